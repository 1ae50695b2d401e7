/**
 * 1 000-Foo scale measurement (not a test): creates N Foos at once in a fresh namespace, with the real manager
 * (`node cmd/manager/main.ts --controllers=foo,deployment`, WATCH_NAMESPACE=<ns>) running as its own process, and
 * measures how long until every Deployment exists and every Foo status is written. As the reference, the same run
 * first measures the API server's raw create throughput: N ConfigMap creates with the same client concurrency.
 *
 *   node bench/foo-scale.ts [--foos 1000] [--clients 50] [--foo-concurrency 1,8] [--cluster-dir DIR]
 *
 * Cluster: --cluster-dir, else $TSCM_CLUSTER_DIR / $CLUSTER_DIR when they hold a running control plane, else a
 * fresh full-mode control plane in a temporary directory (stopped at the end). Each --foo-concurrency value (the
 * manager's --foo-concurrency) gets its own namespace and manager; namespaces are deleted at the end.
 * Times are measured from the first create request; progress is observed through an informer in this process.
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { Registry } from 'prom-client';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { RestClient } from '../pkg/client/rest.ts';
import type { Deployment } from '../pkg/controllers/deployment/types.ts';
import { deploymentResource } from '../pkg/controllers/deployment/types.ts';
import { fooResource, owningFooName } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import type { ControlPlane } from '../test/cluster/controlplane.ts';
import { benchControlPlane, log, runAll } from './common.ts';
import { ManagerProcess, metricValue } from '../test/helpers/managerprocess.ts';
import { BenchResults, val } from './results.ts';

const { values: args } = parseArgs({
  options: {
    foos: { type: 'string', default: '1000' },
    clients: { type: 'string', default: '50' },
    'foo-concurrency': { type: 'string', default: '1,8' },
    'cluster-dir': { type: 'string' },
    'timeout-seconds': { type: 'string', default: '600' },
  },
});
const N = Number(args.foos);
const clients = Number(args.clients);
const workerCounts = (args['foo-concurrency'] ?? '1').split(',').map(Number);
const timeoutMs = Number(args['timeout-seconds']) * 1000;

async function newNamespace(rest: RestClient, prefix: string): Promise<string> {
  const ns = `${prefix}-${Date.now().toString(36)}`;
  await rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
  return ns;
}

async function deleteNamespace(rest: RestClient, ns: string): Promise<void> {
  log(`deleting ${ns} and waiting until it is gone`);
  await rest.json('DELETE', `/api/v1/namespaces/${ns}`);
  const deadline = performance.now() + 600_000;
  while (performance.now() < deadline) {
    const res = await rest.request('GET', `/api/v1/namespaces/${ns}`);
    await res.dump();
    if (res.status === 404) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  log(`${ns} still terminating; continuing`);
}

async function waitUntil(what: string, probe: () => boolean, deadline: number): Promise<number | undefined> {
  while (!probe()) {
    if (performance.now() > deadline) {
      log(`gave up waiting for ${what}`);
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now();
}

interface Row { what: string; objects: number; ms: number | undefined }

async function fooRun(cp: ControlPlane, rest: RestClient, workers: number): Promise<{ rows: Row[]; writes: string; namespace: string }> {
  const ns = await newNamespace(rest, `bench-foo-w${workers}`);
  const manager = await ManagerProcess.start({
    args: ['--controllers=foo,deployment', `--foo-concurrency=${workers}`, '--log-level=warn'],
    env: { KUBECONFIG: cp.kubeconfig, WATCH_NAMESPACE: ns },
  });
  try {
    await manager.waitReady({ timeoutMs: 60_000 });
    const factory = new SharedInformerFactory({ client: rest, namespaces: [ns] });
    const foos = factory.informerFor<Foo>(fooResource);
    const deployments = factory.informerFor<Deployment>(deploymentResource);
    const ac = new AbortController();
    const informers = factory.run(ac.signal);
    await factory.waitForCacheSync({ timeoutMs: 60_000 });

    const ownedDeployments = (): number => deployments.lister().list(ns).filter((d) => owningFooName(d) !== undefined).length;
    const statusWritten = (): number => foos.lister().list(ns).filter((f) => f.status?.availableReplicas !== undefined).length;
    const available = (): number => foos.lister().list(ns).filter((f) => f.status?.availableReplicas === 1).length;

    log(`creating ${N} Foos in ${ns} (${clients} in flight; manager --foo-concurrency=${workers})`);
    const t0 = performance.now();
    const deadline = t0 + timeoutMs;
    const createMs = await runAll(N, clients, (i) => rest.json('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      body: { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: `foo-${i}` }, spec: { deploymentName: `foo-${i}`, replicas: 1 } },
    }));
    const tDeployments = await waitUntil('all Deployments', () => ownedDeployments() >= N, deadline);
    const tStatus = await waitUntil('all statuses written', () => statusWritten() >= N, deadline);
    const tAvailable = await waitUntil('all Foos available', () => available() >= N, deadline);
    ac.abort();
    await informers;

    const metrics = await manager.metrics();
    const value = (name: string, labels: Record<string, string> = {}): number => metricValue(metrics, name, labels) ?? 0;
    const reconciles = value('controller_runtime_reconcile_time_seconds_count', { controller: 'foo' });
    const meanMs = reconciles > 0 ? (1000 * value('controller_runtime_reconcile_time_seconds_sum', { controller: 'foo' })) / reconciles : 0;
    const errors = value('controller_runtime_reconcile_errors_total', { controller: 'foo' });
    const writes = `manager: ${reconciles} Foo reconciles (mean ${meanMs.toFixed(1)} ms, ${errors} errors), ` +
      `writes POST ${value('rest_client_requests_total', { method: 'POST', code: '201' })} / PATCH ${value('rest_client_requests_total', { method: 'PATCH', code: '200' })} ` +
      `(Deployments, Foo statuses and Events), ${value('process_cpu_seconds_total').toFixed(1)} CPU seconds`;
    const since = (t: number | undefined): number | undefined => (t === undefined ? undefined : t - t0);
    return {
      namespace: ns,
      writes,
      rows: [
        { what: `API server: Foo creates (${clients} in flight)`, objects: N, ms: createMs },
        { what: `Foo controller (${workers} worker${workers > 1 ? 's' : ''}): all Deployments exist`, objects: N, ms: since(tDeployments) },
        { what: `Foo controller (${workers} worker${workers > 1 ? 's' : ''}): all Foo statuses written`, objects: N, ms: since(tStatus) },
        { what: `  … and all availableReplicas = 1 (kwok Pods Ready)`, objects: N, ms: since(tAvailable) },
      ],
    };
  } finally {
    await manager.stop('SIGTERM', 30_000);
  }
}

function table(rows: Row[]): string {
  const head = ['measurement', 'objects', 'seconds', 'objects/s'];
  const body = rows.map((r) => [
    r.what, String(r.objects), r.ms === undefined ? 'timeout' : (r.ms / 1000).toFixed(2),
    r.ms === undefined ? '–' : Math.round(r.objects / (r.ms / 1000)).toString(),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  return [line(head), `|${widths.map((w, i) => (i === 0 ? ` ${'-'.repeat(w)} ` : ` ${'-'.repeat(w - 1)}: `)).join('|')}|`, ...body.map(line)].join('\n');
}

async function main(): Promise<void> {
  const results = new BenchResults('foo-scale', {
    name: 'raw creates',
    description: `N ConfigMap creates and the N Foo creates themselves, ${clients} in flight, on the same control plane in the same run`,
  });
  const { cp, owned } = await benchControlPlane(args['cluster-dir']);
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'foo-scale-bench' });
  const namespaces: string[] = [];
  try {
    execFileSync(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '--force-conflicts', '-k', 'config/crd'],
      { cwd: join(import.meta.dirname, '..'), stdio: 'ignore' });
    execFileSync(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io'],
      { stdio: 'ignore' });

    const cmNs = await newNamespace(rest, 'bench-cm');
    namespaces.push(cmNs);
    log(`reference: ${N} ConfigMap creates in ${cmNs} (${clients} in flight)`);
    const cmMs = await runAll(N, clients, (i) => rest.json('POST', `/api/v1/namespaces/${cmNs}/configmaps`, {
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` }, data: { i: String(i) } },
    }));
    const rows: Row[] = [{ what: `API server: ConfigMap creates (${clients} in flight)`, objects: N, ms: cmMs }];
    results.set('foos', val(N, 'count'));
    results.set('configMapCreates', val(cmMs / 1000, 's'));
    const notes: string[] = [];
    for (const [i, workers] of workerCounts.entries()) {
      const run = await fooRun(cp, rest, workers);
      rows.push(...run.rows);
      results.sampleLoad();
      const [creates, deployments, statuses, available] = run.rows.map((r) => r.ms);
      const set = (k: string, ms: number | undefined): void => { if (ms !== undefined) results.set(`workers${workers}.${k}`, val(ms / 1000, 's')); };
      set('fooCreates', creates);
      set('deployments', deployments);
      set('statuses', statuses);
      set('available', available);
      notes.push(`--foo-concurrency=${workers}: ${run.writes}`);
      // Free the node's Pod capacity and let the cluster settle before the next run.
      if (i < workerCounts.length - 1) await deleteNamespace(rest, run.namespace);
      else namespaces.push(run.namespace);
    }
    results.write();
    process.stdout.write(`\n${table(rows)}\n\n${notes.join('\n')}\n` +
      `(times from the first create request; Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
  } finally {
    for (const ns of namespaces) await rest.json('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    if (owned) await cp.stop();
  }
}

await main();
