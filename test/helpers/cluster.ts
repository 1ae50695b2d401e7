/**
 * Test helpers for the shared real control plane (see test/global-setup.ts): attach to it, get admin clients,
 * create a namespace per test, and poll for conditions (never sleep to synchronise).
 */
import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { StopTrying } from '../../pkg/testing/eventually.ts';
import { ControlPlane } from '../cluster/controlplane.ts';

let attached: ControlPlane | undefined;

/** The shared control plane of this test run. */
export function cluster(): ControlPlane {
  if (attached) return attached;
  const dir = process.env['TSCM_CLUSTER_DIR'];
  if (!dir) {
    throw new Error('TSCM_CLUSTER_DIR is not set: run integration tests through `make test` (it starts a control plane)');
  }
  attached = ControlPlane.attach(dir, () => {});
  return attached;
}

/** A KubeConfig with the admin (system:masters) credential. */
export function adminKubeConfig(cp: ControlPlane = cluster()): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  return kc;
}

/** A short random DNS-1123 suffix. */
export function suffix(): string {
  return randomBytes(4).toString('hex');
}

/** Creates a namespace for one test and deletes it (without waiting) when the test ends. */
export async function testNamespace(t: TestContext, prefix = 't', cp: ControlPlane = cluster()): Promise<string> {
  const name = `${prefix}-${suffix()}`;
  const res = await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  if (res.status !== 201) throw new Error(`creating namespace ${name}: HTTP ${res.status} ${res.body}`);
  t.after(async () => {
    await cp.request('DELETE', `/api/v1/namespaces/${name}`);
  });
  return name;
}

/** A waitFor probe throws it when what it waits for cannot happen any more: pkg/testing's, as `eventually` takes it. */
export { StopTrying };

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

/**
 * Polls `probe` until it returns something other than undefined/false and returns that value; a throw counts as "not
 * yet", except a StopTrying, which it rethrows at once; on timeout throws with `what` and the last value/error seen.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false,
  opts: WaitOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
      last = v;
    } catch (err) {
      if (err instanceof StopTrying) throw err;
      last = err;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${opts.timeoutMs ?? 60_000} ms waiting for ${what} (last: ${detail})`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100));
  }
}

/** Parses a JSON response body, asserting the HTTP status. */
export function expectStatus<T = unknown>(res: { status: number; body: string }, status: number, what: string): T {
  if (res.status !== status) throw new Error(`${what}: expected HTTP ${status}, got ${res.status}: ${res.body.slice(0, 500)}`);
  return (res.body ? JSON.parse(res.body) : undefined) as T;
}

/**
 * Lets ServiceAccount `ns/sa` GET /metrics (a ClusterRole + ClusterRoleBinding named after `ns`, removed when the
 * test ends) — the grant a Prometheus scraping the secure endpoint needs.
 */
export async function grantMetricsReader(t: TestContext, ns: string, sa: string, cp: ControlPlane = cluster()): Promise<void> {
  const role = `${ns}-metrics-reader`;
  expectStatus(await cp.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: role },
    rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
  }), 201, 'ClusterRole');
  expectStatus(await cp.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: role },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
  }), 201, 'ClusterRoleBinding');
  t.after(async () => {
    await cp.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role}`);
    await cp.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`);
  });
}
