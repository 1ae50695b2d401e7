/** Helpers shared by the scale benchmarks (bench/foo-scale.ts, bench/network-scale.ts, bench/scale.ts, bench/vs-cr.ts). */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { deploymentResource } from '../pkg/controllers/deployment/types.ts';
import { fooResource, newDeployment } from '../pkg/controllers/foo/desired.ts';
import { collectionPath, objectPath } from '../pkg/apimachinery/paths.ts';
import { ControlPlane } from '../test/cluster/controlplane.ts';

const repo = join(import.meta.dirname, '..');

export const log = (msg: string): void => void process.stderr.write(`[bench] ${msg}\n`);

/**
 * The control plane to measure on: the first running one of `--cluster-dir`, $TSCM_CLUSTER_DIR, $CLUSTER_DIR, else a
 * fresh full-mode one in a temporary directory (`owned`: the caller stops it).
 */
export async function benchControlPlane(clusterDir: string | undefined): Promise<{ cp: ControlPlane; owned: boolean }> {
  for (const dir of [clusterDir, process.env['TSCM_CLUSTER_DIR'], process.env['CLUSTER_DIR']]) {
    if (dir && existsSync(join(dir, 'state.json'))) {
      const cp = ControlPlane.attach(dir, () => {});
      if (cp.running().length > 0) return { cp, owned: false };
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'tscm-bench-cluster-'));
  log(`starting a full control plane in ${dir}`);
  return { cp: await ControlPlane.start({ mode: 'full', dir }), owned: true };
}

/** Runs `n` calls with `concurrency` in flight; resolves the elapsed ms. */
export async function runAll(n: number, concurrency: number, call: (i: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, async () => {
    while (next < n) await call(next++);
  }));
  return performance.now() - started;
}

/** Requests in flight for the raw writer and for creating the Foos. */
export const RAW_CLIENTS = 16;

/** A fresh control plane with N Foos already created: what a manager under test starts on. */
export interface FooEnv { cp: ControlPlane; rest: RestClient; namespaces: string[] }

/**
 * A FRESH minimal control plane (etcd + kube-apiserver: no controller-manager, so Deployments stay at 0 available and
 * nothing but the contender writes Foos, Deployments or Events) with the Foo CRD and `n` Foos spread over
 * `namespaceCount` namespaces (`scale-<i>`, Foo `foo-<i>` wanting Deployment `foo-<i>` with 1 replica).
 */
export async function freshFooControlPlane(n: number, opts: { namespaceCount: number; prefix: string }): Promise<FooEnv> {
  const dir = mkdtempSync(join(tmpdir(), opts.prefix));
  const cp = await ControlPlane.start({ mode: 'minimal', dir, log: () => {} });
  try {
    const kubectl = join(cp.k8sBinDir, 'kubectl');
    execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '-k', 'config/crd'], { cwd: repo, stdio: 'ignore' });
    execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io'], { stdio: 'ignore' });
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'scale-bench' });
    const namespaces = Array.from({ length: opts.namespaceCount }, (_, i) => `scale-${i}`);
    for (const ns of namespaces) await rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
    const t0 = performance.now();
    await runAll(n, RAW_CLIENTS, (i) => rest.json('POST', collectionPath(fooResource, namespaces[i % opts.namespaceCount]), {
      body: { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: `foo-${i}` }, spec: { deploymentName: `foo-${i}`, replicas: 1 } },
    }));
    if (n > 0) log(`${n} Foos created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    return { cp, rest, namespaces };
  } catch (err) {
    await cp.stop(); // never leave a control plane behind when the set-up fails
    throw err;
  }
}

export async function stopEnv(env: FooEnv): Promise<void> {
  await env.rest.close();
  await env.cp.stop();
}

/**
 * The raw writer: the Foo controller's writes for every Foo — POST Deployment, PATCH Foo status, POST Event — with
 * RAW_CLIENTS requests in flight and no cache: the API server's own pace for this work. `ms` from the first to the
 * last write; `cpuSeconds` this process's CPU over that time.
 */
export async function rawFooWrites(env: FooEnv): Promise<{ ms: number; cpuSeconds: number }> {
  const foos: Foo[] = [];
  for (const ns of env.namespaces) foos.push(...(await env.rest.json<{ items: Foo[] }>('GET', collectionPath(fooResource, ns))).items);
  const cpu0 = process.cpuUsage();
  // The client's connection does not hold the event loop open by itself: with nothing else pending (no informer, no
  // timer) Node can exit in the middle of the writes ("unsettled top-level await"). A ref'd timer keeps it alive.
  const keepAlive = setInterval(() => {}, 1000);
  let ms: number;
  try {
    ms = await runAll(foos.length, RAW_CLIENTS, async (i) => {
      const foo = foos[i];
      if (!foo) return;
      const ns = foo.metadata?.namespace ?? '';
      foo.apiVersion = 'samplecontroller.k8s.io/v1alpha1';
      foo.kind = 'Foo';
      await env.rest.json('POST', collectionPath(deploymentResource, ns), { body: newDeployment(foo) });
      await env.rest.json('PATCH', `${objectPath(fooResource, ns, foo.metadata?.name ?? '')}/status`, {
        body: { status: { availableReplicas: 0 } }, contentType: 'application/merge-patch+json',
      });
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      await env.rest.json('POST', `/api/v1/namespaces/${ns}/events`, {
        body: {
          apiVersion: 'v1', kind: 'Event', metadata: { generateName: `${foo.metadata?.name}.` },
          involvedObject: { apiVersion: foo.apiVersion, kind: 'Foo', namespace: ns, name: foo.metadata?.name, uid: foo.metadata?.uid },
          reason: 'Synced', message: 'Foo synced successfully', type: 'Normal', source: { component: 'raw-writer' },
          firstTimestamp: now, lastTimestamp: now, count: 1,
        },
      });
    });
  } finally {
    clearInterval(keepAlive);
  }
  const cpu = process.cpuUsage(cpu0);
  return { ms, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

/**
 * Writes (any verb but GET/LIST/WATCH) the API server has served so far for these resources, from its own
 * apiserver_request_total: the same count whichever client made them (its own lease renewals are not in `resources`).
 */
export async function apiserverWrites(cp: ControlPlane, resources: readonly string[] = ['foos', 'deployments', 'events']): Promise<number> {
  return (await apiserverRequests(cp, resources)).writes;
}

/** Requests served so far for `resources` (apiserver_request_total): writes (verbs but GET/LIST/WATCH), reads, and writes refused with 409. */
export interface RequestCounts { writes: number; reads: number; conflicts: number }

export async function apiserverRequests(cp: ControlPlane, resources: readonly string[] = ['foos', 'deployments', 'events']): Promise<RequestCounts> {
  const res = await cp.get('/metrics');
  if (res.status !== 200) throw new Error(`kube-apiserver /metrics: HTTP ${res.status}`);
  const counts: RequestCounts = { writes: 0, reads: 0, conflicts: 0 };
  for (const line of res.body.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1];
    const resource = /resource="([^"]*)"/.exec(line)?.[1];
    if (!verb || !resource || !resources.includes(resource)) continue;
    const n = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (['GET', 'LIST', 'WATCH'].includes(verb)) counts.reads += n;
    else {
      counts.writes += n;
      if (/code="409"/.test(line)) counts.conflicts += n;
    }
  }
  return counts;
}
