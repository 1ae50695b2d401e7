/**
 * Builder options that reach the Controller: the reconcile timeout (per controller, else the manager's default).
 * The managers contact nothing: controllers are built and started directly, without `mgr.start`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from '../client/kubeconfig.ts';
import { coreResources } from '../apimachinery/resource.ts';
import { silentLogger } from '../log/logger.ts';
import { ControllerManager } from './manager.ts';

function manager(reconcileTimeoutMs?: number): ControllerManager {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new ControllerManager({
    kubeConfig, registry: new Registry(), logger: silentLogger, ...(reconcileTimeoutMs === undefined ? {} : { reconcileTimeoutMs }),
  });
}

describe('ControllerBuilder reconcileTimeoutMs', () => {
  const cases: { mgr?: number; builder?: number; want: number | undefined }[] = [
    { want: undefined }, // off by default
    { mgr: 5_000, want: 5_000 }, // the manager's default
    { mgr: 5_000, builder: 100, want: 100 }, // the builder overrides it
    { mgr: 5_000, builder: 0, want: undefined }, // 0 turns it off for one controller
    { builder: 250, want: 250 },
  ];
  for (const { mgr, builder, want } of cases) {
    it(`manager ${String(mgr)}, builder ${String(builder)} → ${String(want)}`, () => {
      const b = manager(mgr).controller('t').for(coreResources.configMaps);
      const ctl = (builder === undefined ? b : b.withOptions({ reconcileTimeoutMs: builder })).complete(() => Promise.resolve());
      assert.equal(ctl.reconcileTimeoutMs, want);
    });
  }

  it('the manager default aborts a reconcile of a builder-made controller with a TimeoutError', async () => {
    const reason = Promise.withResolvers<unknown>();
    const ctl = manager(1).controller('t').for(coreResources.configMaps).complete(async (_req, signal) => {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      reason.resolve(signal.reason);
    });
    const run = new AbortController();
    const started = ctl.start(run.signal);
    ctl.enqueue('ns/a');
    const r = await reason.promise;
    assert.ok(r instanceof DOMException && r.name === 'TimeoutError', String(r));
    run.abort();
    await started;
  });
});
