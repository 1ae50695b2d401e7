/**
 * Helpers for protocol tests against FakeApiServer: a RestClient pointed at it (through client-node's KubeConfig,
 * like production) and `eventually`, which polls a condition instead of sleeping a guessed time.
 */
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { Registry } from 'prom-client';
import { RestClient } from '../../pkg/client/rest.ts';

export function restClientFor(server: string): RestClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node refuses plain http:// servers unless skipTLSVerify is set.
    clusters: [{ name: 'f', server, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'c', cluster: 'f', user: 'u' }],
    currentContext: 'c',
  });
  return new RestClient({ kubeConfig: kc, registry: new Registry() });
}

/** Polls `cond` every few ms until it holds; fails with `what` (and the last error thrown by cond) after timeoutMs. */
export async function eventually(what: string, cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (cond()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for: ${what}${last instanceof Error ? ` (last error: ${last.message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
