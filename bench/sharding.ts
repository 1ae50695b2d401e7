/**
 * Sharding benchmark (issue 13): convergence of N Foos (10 000 by default) with 1, 2, 3 and 4 manager replicas
 * running `--leader-elect --sharding --controllers=foo` (default `--foo-concurrency`, i.e. 1 worker per replica), in
 * one run, with the API server's raw write time for the same number of writes as the anchor.
 *
 *   node bench/sharding.ts [--foos 10000] [--replicas 1,2,3,4] [--clients 16] [--no-reference]
 *
 * Every row (and each anchor) gets a FRESH private minimal control plane (etcd + kube-apiserver, as bench/scale.ts):
 * rows then share no etcd history, watch cache or leftover objects, Leases or sharder state, and no row waits for the
 * previous row's 2 N objects to be deleted (a minimal control plane has no namespace controller, and deleting 20 000
 * objects would itself load the API server the next row measures).
 *
 * Rows:
 *  - anchor (before the rows and again after them): this process creates N Foos and, for each, the Foo controller's
 *    Deployment (`newDeployment(foo)`), `--clients` requests in flight, no cache; time from the first to the last
 *    write — the API server's pace for the 2 N writes every row needs at least.
 *  - R replicas (R of `--replicas`): the compiled manager (dist/, the image's Node flags) `--controllers=foo
 *    --leader-elect --sharding`, started together; once every replica is ready and the sharder counts R live shards,
 *    this process creates N unlabelled Foos (`--clients` in flight) in namespace `bench`. Converged = a label-selected
 *    Deployment informer in this process (selector `shard.ts-controller-manager.io/foo`: the Deployment carries its
 *    Foo's shard label) holds a Deployment owned by every Foo; time from the first Foo create. Reported: per-replica peak RSS (VmHWM from /proc/<pid>/status at convergence, the sharder marked *),
 *    Foos per replica (`sharding_shard_objects{controller="foo"}`), the sharder's writes (the API server's own
 *    `apiserver_request_total` for PATCH of foos (not /status) and deployments: only the sharder's label patches make
 *    them in this run; cross-checked with the sharder's `sharding_reassignments_total{controller="foo"}`), every
 *    write the API server took in the window and its rate, and the CPU (in cores) that kube-apiserver, etcd, the
 *    replicas together and this process used in the window. "API floor" = those writes at the faster anchor's
 *    write rate: the least time the API server needs for the row's writes on this machine at that moment.
 *    "Deployments/s after the creates": the Deployments still missing when the last Foo create returned, over the
 *    time from then to convergence — the replicas' own pace once the bench's creates no longer compete.
 *  - reference (unless `--no-reference`): one replica WITHOUT `--sharding` with `--foo-concurrency` = the largest R —
 *    as many workers as the largest sharded row, on one event loop: what sharding adds beyond more workers.
 *
 * Progress goes to stderr, the table to stdout.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { RestClient } from '../pkg/client/rest.ts';
import type { Deployment } from '../pkg/controllers/deployment/types.ts';
import { deploymentResource } from '../pkg/controllers/deployment/types.ts';
import { fooResource, newDeployment, owningFooName } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { collectionPath } from '../pkg/apimachinery/paths.ts';
import { shardLabel } from '../pkg/sharding/assignment.ts';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { BenchResults, val } from './results.ts';
import { processRss } from '../test/helpers/cgroup.ts';
import { distMainScript, ManagerProcess, metricValue } from '../test/helpers/managerprocess.ts';
import { log, runAll } from './common.ts';
import { procCpuMs } from './informer/stats.ts';

const { values: args } = parseArgs({
  options: {
    foos: { type: 'string', default: '10000' },
    replicas: { type: 'string', default: '1,2,3,4' },
    clients: { type: 'string', default: '16' },
    'no-reference': { type: 'boolean', default: false },
    'timeout-seconds': { type: 'string', default: '1800' },
  },
});
const N = Number(args.foos);
const replicaCounts = (args.replicas ?? '1').split(',').map(Number);
const clients = Number(args.clients);
const timeoutMs = Number(args['timeout-seconds']) * 1000;
if (!(N > 0) || replicaCounts.some((r) => !(r >= 1)) || !(clients >= 1) || !(timeoutMs > 0)) {
  process.stderr.write('usage: node bench/sharding.ts [--foos N] [--replicas 1,2,3,4] [--clients C] [--no-reference] [--timeout-seconds S]\n');
  process.exit(2);
}
const repo = join(import.meta.dirname, '..');
const ns = 'bench';
const MiB = 1024 * 1024;

interface Env { cp: ControlPlane; rest: RestClient; dir: string }

/** What a Ctrl-C (SIGINT/SIGTERM) must stop: the replicas and control plane of the row being measured. */
const running = { envs: new Set<Env>(), managers: new Set<ManagerProcess>() };
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    log(`${sig}: stopping ${running.managers.size} replica(s) and ${running.envs.size} control plane(s)`);
    void Promise.allSettled([...running.managers].map((m) => m.stop('SIGTERM', 10_000)))
      .then(() => Promise.allSettled([...running.envs].map((e) => stopEnv(e))))
      .finally(() => process.exit(130));
  });
}

/** A fresh minimal control plane with the Foo CRD established and namespace `bench`. */
async function freshControlPlane(): Promise<Env> {
  const dir = mkdtempSync(join(tmpdir(), 'tscm-sharding-bench-'));
  const cp = await ControlPlane.start({ mode: 'minimal', dir, log: () => {} });
  try {
    const kubectl = join(cp.k8sBinDir, 'kubectl');
    execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '-k', 'config/crd'], { cwd: repo, stdio: 'ignore' });
    execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io'], { stdio: 'ignore' });
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'sharding-bench' });
    await rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
    const env = { cp, rest, dir };
    running.envs.add(env);
    return env;
  } catch (err) {
    await cp.stop(); // never leave a control plane behind when the set-up fails
    throw err;
  }
}

async function stopEnv(env: Env): Promise<void> {
  running.envs.delete(env);
  await env.rest.close();
  await env.cp.stop();
  rmSync(env.dir, { recursive: true, force: true });
}

const fooBody = (i: number): Foo => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo',
  metadata: { name: `foo-${i}`, namespace: ns }, spec: { deploymentName: `foo-${i}`, replicas: 1 },
});

/** The API server's write counters (`apiserver_request_total`, mutating verbs only), by "VERB resource[/sub] code". */
async function apiWrites(cp: ControlPlane): Promise<Map<string, number>> {
  const res = await cp.request('GET', '/metrics');
  if (res.status !== 200) throw new Error(`kube-apiserver /metrics: HTTP ${res.status}`);
  const out = new Map<string, number>();
  for (const line of res.body.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const label = (k: string): string => new RegExp(`[{,]${k}="([^"]*)"`).exec(line)?.[1] ?? '';
    const verb = label('verb');
    if (!['POST', 'PUT', 'PATCH', 'DELETE', 'DELETECOLLECTION', 'APPLY'].includes(verb)) continue;
    const sub = label('subresource');
    const key = `${verb} ${label('resource')}${sub ? `/${sub}` : ''} ${label('code')}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

function writesBetween(before: Map<string, number>, after: Map<string, number>, match: (key: string) => boolean = () => true): number {
  let n = 0;
  for (const [k, v] of after) if (match(k)) n += v - (before.get(k) ?? 0);
  return n;
}

interface AnchorResult { ms: number; writes: number; load: number }

/** N Foo creates + N Deployment creates by this process, `clients` in flight: the API server's pace for 2 N writes. */
async function anchor(): Promise<AnchorResult> {
  const env = await freshControlPlane();
  try {
    log(`anchor: ${N} Foo creates + ${N} Deployment creates (${clients} in flight)`);
    const ms = await runAll(N, clients, async (i) => {
      const foo = await env.rest.json<Foo>('POST', collectionPath(fooResource, ns), { body: fooBody(i) });
      await env.rest.json('POST', collectionPath(deploymentResource, ns), { body: newDeployment({ ...foo, apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo' }) });
    });
    const load = loadavg()[0] ?? 0;
    log(`  anchor: ${(ms / 1000).toFixed(2)} s (${Math.round((2 * N) / (ms / 1000))} writes/s, load ${load.toFixed(1)})`);
    return { ms, writes: 2 * N, load };
  } finally {
    await stopEnv(env);
  }
}

interface RowResult {
  label: string;
  replicas: number;
  sharding: boolean;
  workers: number;
  convergedMs: number | undefined;
  createMs: number;
  /** Deployments that existed when the last Foo create returned. */
  atCreateEnd: number;
  peakRss: { mib: number; sharder: boolean }[];
  fooCounts: number[];
  sharderPatches: number | undefined;
  assignments: number | undefined;
  apiWrites: number;
  cpu: { apiserver: number; etcd: number; replicas: number; bench: number };
  replicaCpuSeconds: number;
  load: number;
  /** The largest sharded row: kill -9 of a replica that is not the sharder → all its Foos (and their Deployments) relabelled to live shards. */
  kill?: { moved: number; ms: number | undefined; leaseMs: number };
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

async function row(replicas: number, sharding: boolean, workers: number): Promise<RowResult> {
  const label = sharding ? `${replicas}` : `1, no --sharding, --foo-concurrency=${workers}`;
  const env = await freshControlPlane();
  const mgrs: ManagerProcess[] = [];
  const ac = new AbortController();
  let informers: Promise<void> | undefined;
  try {
    const factory = new SharedInformerFactory({ client: env.rest, namespaces: [ns] });
    // Sharded rows: only Deployments that carry the Foo shard label (the Foo controller sets it on create).
    const deployments = factory.informerFor<Deployment>(deploymentResource, sharding ? { labelSelector: shardLabel('foo') } : {});
    const foos = factory.informerFor<Foo>(fooResource);
    informers = factory.run(ac.signal);
    await factory.waitForCacheSync({ timeoutMs: 60_000 });
    const owned = (): number => {
      const owners = new Set<string>();
      for (const d of deployments.lister().list(ns)) {
        const owner = owningFooName(d);
        if (owner !== undefined) owners.add(owner);
      }
      return owners.size;
    };

    log(`row "${label}": starting ${replicas} replica(s)`);
    const flags = ['--controllers=foo', ...(workers > 1 ? [`--foo-concurrency=${workers}`] : []),
      ...(sharding ? ['--leader-elect', '--sharding', '--leader-election-namespace=kube-system', '--leader-election-id=sharding-bench'] : [])];
    mgrs.push(...await Promise.all(Array.from({ length: replicas }, () => ManagerProcess.start({
      script: distMainScript, collectLogs: false, args: flags, env: { KUBECONFIG: env.cp.kubeconfig },
    }))));
    for (const m of mgrs) running.managers.add(m);
    await Promise.all(mgrs.map((m) => m.waitReady({ timeoutMs: 120_000 })));
    let sharder: ManagerProcess | undefined;
    if (sharding) {
      // Foos are created once the sharder counts every replica: no Foo is assigned to a subset and drained later.
      const deadline = performance.now() + 120_000;
      while (sharder === undefined) {
        for (const m of mgrs) if ((metricValue(await m.metrics(), 'sharding_members') ?? 0) === replicas) sharder = m;
        if (sharder === undefined) {
          if (performance.now() > deadline) throw new Error(`no sharder counted ${replicas} live shards within 120 s`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }

    const pid = (name: 'kube-apiserver' | 'etcd'): number => env.cp.state.components[name]?.pid ?? -1;
    const replicaCpu = (): number => sum(mgrs.map((m) => procCpuMs(m.proc.pid ?? -1)));
    const writes0 = await apiWrites(env.cp);
    const cpu0 = { apiserver: procCpuMs(pid('kube-apiserver')), etcd: procCpuMs(pid('etcd')), replicas: replicaCpu(), bench: process.cpuUsage() };
    log(`row "${label}": creating ${N} Foos (${clients} in flight)`);
    const t0 = performance.now();
    const createMs = await runAll(N, clients, (i) => env.rest.json('POST', collectionPath(fooResource, ns), { body: fooBody(i) }));
    const atCreateEnd = owned();
    log(`row "${label}": ${N} Foos created in ${(createMs / 1000).toFixed(1)} s; ${atCreateEnd} Deployments so far`);
    let convergedMs: number | undefined;
    let lastLog = performance.now();
    while (convergedMs === undefined) {
      if (owned() >= N) {
        convergedMs = performance.now() - t0;
        break;
      }
      const dead = mgrs.find((m) => !m.running);
      if (dead) throw new Error(`a replica exited: ${dead.stderr.join('').slice(-2000)}`);
      if (performance.now() - t0 > timeoutMs) {
        log(`row "${label}": gave up after ${timeoutMs / 1000} s with ${owned()} of ${N} Deployments`);
        break;
      }
      if (performance.now() - lastLog > 30_000) {
        lastLog = performance.now();
        log(`row "${label}": ${owned()} of ${N} Deployments after ${((lastLog - t0) / 1000).toFixed(0)} s`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const windowMs = performance.now() - t0;
    const cpu = {
      apiserver: (procCpuMs(pid('kube-apiserver')) - cpu0.apiserver) / windowMs,
      etcd: (procCpuMs(pid('etcd')) - cpu0.etcd) / windowMs,
      replicas: (replicaCpu() - cpu0.replicas) / windowMs,
      bench: ((u) => (u.user + u.system) / 1000 / windowMs)(process.cpuUsage(cpu0.bench)),
    };
    const writes1 = await apiWrites(env.cp);
    const load = loadavg()[0] ?? 0;
    const peakRss = mgrs.map((m) => ({ mib: (processRss(m.proc.pid ?? -1)?.peak ?? NaN) / MiB, sharder: m === sharder }));
    const metrics = await Promise.all(mgrs.map((m) => m.metrics()));
    const fooCounts = sharding ? metrics.map((t) => metricValue(t, 'sharding_shard_objects', { controller: 'foo' }) ?? NaN) : [];
    const sharderMetrics = sharder ? metrics[mgrs.indexOf(sharder)] ?? '' : undefined;
    const assignments = sharderMetrics === undefined ? undefined
      : sum(['new', 'drained', 'dead'].map((reason) => metricValue(sharderMetrics, 'sharding_reassignments_total', { controller: 'foo', reason }) ?? 0));
    const result: RowResult = {
      label, replicas, sharding, workers, convergedMs, createMs, atCreateEnd, peakRss, fooCounts, assignments, cpu, load,
      sharderPatches: sharding ? writesBetween(writes0, writes1, (k) => k.startsWith('PATCH foos ') || k.startsWith('PATCH deployments ')) : undefined,
      apiWrites: writesBetween(writes0, writes1),
      replicaCpuSeconds: sum(metrics.map((t) => metricValue(t, 'process_cpu_seconds_total') ?? 0)),
    };
    if (sharding && sharder && convergedMs !== undefined && replicas >= 2 && replicas === Math.max(...replicaCounts)) {
      // kill -9 of a replica that is not the sharder: how long until every Foo it had (and the Foo's Deployment) is
      // labelled to a live shard — the lease duration (15 s, client-go's default) plus the API server's write rate.
      const shardOf = (o: { metadata?: { labels?: Record<string, string> } }): string => o.metadata?.labels?.[shardLabel('foo')] ?? '';
      const before = new Map(foos.lister().list(ns).map((f) => [f.metadata?.name ?? '', shardOf(f)]));
      const victim = mgrs.find((m) => m !== sharder) as ManagerProcess;
      const t = performance.now();
      await victim.stop('SIGKILL');
      let ms: number | undefined;
      let moved = 0;
      while (ms === undefined && performance.now() - t < 300_000) {
        const shards = new Set(foos.lister().list(ns).map(shardOf));
        const deps = new Map(deployments.lister().list(ns).map((d) => [d.metadata?.name ?? '', shardOf(d)]));
        const all = foos.lister().list(ns);
        moved = all.filter((f) => before.get(f.metadata?.name ?? '') !== shardOf(f)).length;
        if (shards.size === replicas - 1 && !shards.has('') && all.every((f) => deps.get(f.spec?.deploymentName ?? '') === shardOf(f))) ms = performance.now() - t;
        else await new Promise((r) => setTimeout(r, 100));
      }
      result.kill = { moved, ms, leaseMs: 15_000 };
      log(`row "${label}": kill -9 of a replica: ${moved} Foos moved, converged ${ms === undefined ? 'never' : `${(ms / 1000).toFixed(1)} s`} after the kill`);
    }
    log(`row "${label}": converged ${convergedMs === undefined ? 'never' : `${(convergedMs / 1000).toFixed(2)} s`}; ` +
      `API writes ${result.apiWrites}; sharder patches ${result.sharderPatches ?? '–'} (assignments ${assignments ?? '–'}); load ${load.toFixed(1)}; ` +
      `writes by kind: ${JSON.stringify(Object.fromEntries([...writes1].map(([k, v]) => [k, v - (writes0.get(k) ?? 0)]).filter(([, v]) => Number(v) > 0)))}`);
    return result;
  } finally {
    await Promise.all(mgrs.map(async (m) => {
      await m.stop('SIGTERM', 30_000);
      running.managers.delete(m);
    }));
    ac.abort();
    await informers;
    await stopEnv(env);
  }
}

const sec = (ms: number | undefined): string => (ms === undefined ? 'timeout' : (ms / 1000).toFixed(1));

async function main(): Promise<void> {
  execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  const started = Date.now();
  const res = new BenchResults('sharding', {
    name: 'raw writes',
    description: `N Foo creates + N Deployment creates by the bench (${clients} in flight) on a fresh control plane, before and after the rows ` +
      '(`anchor.before`, `anchor.after`); a single unsharded replica with as many workers as the largest row (`reference`)',
  });
  const before = await anchor();
  res.sampleLoad();
  const rows: RowResult[] = [];
  for (const r of replicaCounts) {
    rows.push(await row(r, true, 1));
    res.sampleLoad();
  }
  if (!args['no-reference']) rows.push(await row(1, false, Math.max(...replicaCounts)));
  const after = await anchor();
  res.sampleLoad();
  recordSharding(res, before, after, rows);
  res.write();

  const anchorMs = Math.min(before.ms, after.ms);
  /** The faster anchor's write rate (writes/ms): a row's API writes at that rate are the least time it can take. */
  const anchorRate = Math.max(before.writes / before.ms, after.writes / after.ms);
  const one = rows.find((r) => r.sharding && r.replicas === 1)?.convergedMs;
  const lines = [
    `| replicas | converge s | Deployments/s after the creates | speed-up vs 1 | ÷ anchor | API floor s | per-replica peak RSS MiB (* sharder) | Foos per replica | sharder's writes (label patches) | API writes in window (per s) | CPU cores: apiserver / etcd / replicas / bench | load 1 min |`,
    '|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|---:|',
    `| anchor before: ${N} Foo + ${N} Deployment creates by the bench (${clients} in flight) | ${sec(before.ms)} | – | – | 1.00 | – | – | – | – | ${before.writes} (${Math.round(before.writes / (before.ms / 1000))}) | – | ${before.load.toFixed(1)} |`,
  ];
  for (const r of rows) {
    const rate = r.convergedMs === undefined ? '–' : String(Math.round(r.apiWrites / (r.convergedMs / 1000)));
    const tail = r.convergedMs === undefined || r.convergedMs <= r.createMs ? '–' : ((N - r.atCreateEnd) / ((r.convergedMs - r.createMs) / 1000)).toFixed(1);
    lines.push(`| ${r.label} | ${sec(r.convergedMs)} | ${tail} | ${r.convergedMs === undefined || one === undefined ? '–' : `${(one / r.convergedMs).toFixed(2)}×`} | ` +
      `${r.convergedMs === undefined ? '–' : (r.convergedMs / anchorMs).toFixed(2)} | ${sec(r.apiWrites / anchorRate)} | ${r.peakRss.map((p) => `${p.mib.toFixed(0)}${p.sharder ? '*' : ''}`).join(' / ')} | ` +
      `${r.sharding ? r.fooCounts.join(' / ') : `${N} (all)`} | ${r.sharderPatches === undefined ? '–' : `${r.sharderPatches} (${r.assignments} assigned)`} | ` +
      `${r.apiWrites} (${rate}) | ${r.cpu.apiserver.toFixed(2)} / ${r.cpu.etcd.toFixed(2)} / ${r.cpu.replicas.toFixed(2)} / ${r.cpu.bench.toFixed(2)} | ${r.load.toFixed(1)} |`);
  }
  for (const r of rows) {
    if (r.kill) lines.push(`| ${r.label}: kill -9 of a replica (not the sharder) → its ${r.kill.moved} Foos and their Deployments relabelled to live shards | ${sec(r.kill.ms)} | – | – | – | – | – | – | – | – | – | goal: lease ${r.kill.leaseMs / 1000} s + 10 s |`);
  }
  lines.push(`| anchor after | ${sec(after.ms)} | – | – | ${(after.ms / anchorMs).toFixed(2)} | – | – | – | – | ${after.writes} (${Math.round(after.writes / (after.ms / 1000))}) | – | ${after.load.toFixed(1)} |`);
  process.stdout.write(`\n${lines.join('\n')}\n\n` +
    `(${N} Foos; replicas: dist/ manager --controllers=foo --leader-elect --sharding, 1 Foo worker each (default --foo-concurrency); ` +
    `a fresh minimal control plane per row; times from the first Foo create to a Deployment for every Foo; ÷ anchor = converge / the faster anchor; Deployments/s after the creates = the rest of the Deployments over the time from the last Foo create to convergence (only the replicas write then); API floor = the row's API writes in the window at the faster anchor's write rate; ` +
    `Foo creates took ${rows.map((r) => sec(r.createMs)).join(' / ')} s of the rows; replica CPU seconds ${rows.map((r) => r.replicaCpuSeconds.toFixed(0)).join(' / ')}; ` +
    `Node ${process.version}, ${cpus().length} CPUs, load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}, ${((Date.now() - started) / 60_000).toFixed(1)} min)\n`);
}

/** The results file: anchors, then per row (`replicas<R>`, `reference`) converge, speed-up vs 1, peak RSS, kill -9. */
function recordSharding(res: BenchResults, before: AnchorResult, after: AnchorResult, rows: RowResult[]): void {
  res.set('foos', val(N, 'count'));
  res.set('anchor.before', val(before.ms / 1000, 's'));
  res.set('anchor.after', val(after.ms / 1000, 's'));
  const one = rows.find((r) => r.sharding && r.replicas === 1)?.convergedMs;
  for (const r of rows) {
    const key = r.sharding ? `replicas${r.replicas}` : 'reference';
    res.set(`${key}.workers`, val(r.workers, 'count'));
    if (r.convergedMs !== undefined) {
      res.set(`${key}.converge`, val(r.convergedMs / 1000, 's'));
      if (one !== undefined) res.set(`${key}.speedup`, val(one / r.convergedMs, '×'));
      res.set(`${key}.overAnchor`, val(r.convergedMs / Math.min(before.ms, after.ms), '×'));
    }
    const rss = r.peakRss.map((p) => p.mib);
    if (rss.length) res.set(`${key}.peakRss`, { min: val(Math.min(...rss), 'MiB'), max: val(Math.max(...rss), 'MiB') });
    if (r.sharderPatches !== undefined) res.set(`${key}.sharderPatches`, val(r.sharderPatches, 'count'));
    res.set(`${key}.apiWrites`, val(r.apiWrites, 'count'));
    if (r.kill) {
      res.set(`${key}.kill.moved`, val(r.kill.moved, 'count'));
      if (r.kill.ms !== undefined) res.set(`${key}.kill.relabelled`, val(r.kill.ms / 1000, 's'));
      res.set(`${key}.kill.lease`, val(r.kill.leaseMs / 1000, 's'));
    }
  }
}

await main();
