/**
 * Paged LIST vs streaming list (watch-list) for an informer's initial sync (issue 23 point 9; `make bench`):
 *
 *   node bench/watchlist.ts [--objects 10000] [--pairs 3] [--kind configmap|foo]
 *
 * Starts a PRIVATE minimal control plane (etcd + kube-apiserver 1.36, whose WatchList gate is on by default),
 * creates N objects (ConfigMaps by default, ~0.5 KiB each; or Foos) in one namespace from a load-generator process,
 * then syncs a fresh informer on that namespace in a FRESH child process per run (bench/informer/watchlist-child.ts),
 * alternating the two variants in ABBA order (A B B A A B B A …, `--pairs` ABBA blocks, so each variant runs
 * 2 × pairs times and neither always goes first on a warmer server). Per run:
 *  - time to sync: factory.run() → the handler has every object and its registration reports synced;
 *  - peak RSS of the child process (VmHWM), and its RSS before the informer started;
 *  - kube-apiserver and etcd CPU seconds: utime + stime from /proc/<pid>/stat before the child starts and after it
 *    exited (the child's whole life: connection, sync, teardown);
 *  - the child's own CPU time, and how its cache was filled (LIST pages / streaming watches: a watch-list run that
 *    fell back to LIST would show it).
 * Prints progress on stderr and ONE markdown table with medians (runs in brackets) and the verdict on stdout.
 * "Wins" = lower median time to sync AND lower-or-equal median peak RSS AND lower-or-equal median API server CPU.
 */
import { cpus, loadavg } from 'node:os';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import type { ControlPlane } from '../test/cluster/controlplane.ts';
import { createNamespace, fooResource, installFooCRD, progress, runChild, runLoad } from './informer/cluster.ts';
import { startPrivateControlPlane } from './informer/privatecluster.ts';
import { fmtMiB, markdownTable, median, procCpuMs } from './informer/stats.ts';
import type { WatchListChildConfig, WatchListChildResult } from './informer/watchlist-child.ts';
import { BenchResults, ratio, spread } from './results.ts';

function flag(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : i >= 0 ? (process.argv[i + 1] ?? def) : def;
}

const N = Number(flag('objects', '10000'));
const PAIRS = Number(flag('pairs', '3'));
const KIND = flag('kind', 'configmap');
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(PAIRS) || PAIRS < 1 || !['configmap', 'foo'].includes(KIND)) {
  process.stderr.write('usage: node bench/watchlist.ts [--objects N] [--pairs P] [--kind configmap|foo]\n');
  process.exit(2);
}
const NS = 'bench-watchlist';
const resource = KIND === 'foo' ? fooResource : coreResources.configMaps;

type Variant = 'list' | 'watchlist';

interface Run extends WatchListChildResult {
  variant: Variant;
  apiserverCpuMs: number;
  etcdCpuMs: number;
}

/** ABBA order: A B B A, repeated `pairs` times. */
export function abba(pairs: number): Variant[] {
  return Array.from({ length: pairs }, (): Variant[] => ['list', 'watchlist', 'watchlist', 'list']).flat();
}

async function oneRun(cp: ControlPlane, variant: Variant): Promise<Run> {
  const pidOf = (name: 'kube-apiserver' | 'etcd'): number => {
    const pid = cp.state.components[name]?.pid;
    if (!pid) throw new Error(`${name} is not running`);
    return pid;
  };
  const api0 = procCpuMs(pidOf('kube-apiserver'));
  const etcd0 = procCpuMs(pidOf('etcd'));
  const r = await runChild<WatchListChildResult>('bench/informer/watchlist-child.ts', {
    kubeconfig: cp.kubeconfig, resource, namespace: NS, expected: N, watchList: variant === 'watchlist',
  } satisfies WatchListChildConfig);
  const run: Run = {
    ...r, variant, apiserverCpuMs: procCpuMs(pidOf('kube-apiserver')) - api0, etcdCpuMs: procCpuMs(pidOf('etcd')) - etcd0,
  };
  if (run.cached !== N) throw new Error(`${variant}: cached ${run.cached}, expected ${N}`);
  if (variant === 'watchlist' && (run.listRequests !== 0 || run.streamingWatches !== 1)) {
    throw new Error(`watch-list run made ${run.listRequests} LIST and ${run.streamingWatches} streaming watch requests (expected 0 and 1: did it fall back?)`);
  }
  if (variant === 'list' && run.streamingWatches !== 0) throw new Error('paged-LIST run asked for a streaming list');
  return run;
}

const s = (ms: number): string => (ms / 1000).toFixed(2);

async function main(): Promise<number> {
  const load0 = loadavg();
  const res = new BenchResults('watchlist', {
    name: 'paged LIST',
    description: 'the informer\'s default paged LIST (limit 500) in a fresh process per run, ABBA with the streaming list in the same run',
  });
  const { cp, stop } = await startPrivateControlPlane('tscm-bench-watchlist-', `N=${N} ${resource.resource}, ${PAIRS} ABBA blocks`);
  try {
    const version = (JSON.parse((await cp.get('/version')).body) as { gitVersion?: string }).gitVersion ?? '?';
    if (KIND === 'foo') await installFooCRD(cp);
    await createNamespace(cp, NS);
    progress(`creating ${N} ${resource.resource}`);
    const created = await runLoad(cp, { mode: 'create', kind: KIND === 'foo' ? 'foo' : 'configmap', namespace: NS, prefix: 'o', count: N, concurrency: 32, label: resource.resource });
    if (created.writes !== N) throw new Error(`created ${created.writes} of ${N}`);

    progress('warm-up: one run of each variant (not counted)');
    await oneRun(cp, 'list');
    await oneRun(cp, 'watchlist');
    const runs: Run[] = [];
    const order = abba(PAIRS);
    for (const [i, variant] of order.entries()) {
      const r = await oneRun(cp, variant);
      runs.push(r);
      res.sampleLoad();
      progress(`run ${i + 1}/${order.length} ${variant}: sync ${s(r.syncMs)} s, peak RSS ${fmtMiB(r.peakRss)}, ` +
        `apiserver ${s(r.apiserverCpuMs)} CPU-s, etcd ${s(r.etcdCpuMs)} CPU-s, client ${s(r.cpuMs)} CPU-s, ${r.listRequests} LIST pages; load ${(loadavg()[0] ?? NaN).toFixed(1)}`);
    }
    const load1 = loadavg();

    const of = (v: Variant): Run[] => runs.filter((r) => r.variant === v);
    const med = (v: Variant, f: (r: Run) => number): number => median(of(v).map(f));
    const cell = (v: Variant, f: (r: Run) => number, fmt: (x: number) => string): string =>
      `${fmt(med(v, f))} (${of(v).map((r) => fmt(f(r))).join(', ')})`;
    const mib = (b: number): string => (b / 1048576).toFixed(0);
    const metrics: [string, (r: Run) => number, (x: number) => string][] = [
      ['time to sync, s', (r) => r.syncMs, s],
      ['peak RSS of the process, MiB', (r) => r.peakRss, mib],
      ['kube-apiserver CPU, s', (r) => r.apiserverCpuMs, s],
      ['etcd CPU, s', (r) => r.etcdCpuMs, s],
      ['informer process CPU, s', (r) => r.cpuMs, s],
      ['RSS before the informer started, MiB', (r) => r.baseRss, mib],
    ];
    const rows = metrics.map(([name, f, fmt]) => [
      name, cell('list', f, fmt), cell('watchlist', f, fmt),
      med('list', f) > 0 ? `${(med('watchlist', f) / med('list', f)).toFixed(2)}×` : 'n/a',
    ]);
    const wins = med('watchlist', (r) => r.syncMs) < med('list', (r) => r.syncMs)
      && med('watchlist', (r) => r.peakRss) <= med('list', (r) => r.peakRss)
      && med('watchlist', (r) => r.apiserverCpuMs) <= med('list', (r) => r.apiserverCpuMs);
    const pages = of('list')[0]?.listRequests ?? 0;
    res.set('objects', { value: N, unit: 'count' });
    res.set('kind', resource.resource);
    const keys: Record<string, [string, string, number]> = {
      'time to sync, s': ['sync', 's', 1000], 'peak RSS of the process, MiB': ['peakRss', 'MiB', 1048576], 'kube-apiserver CPU, s': ['apiserverCpu', 'CPU-s', 1000],
      'etcd CPU, s': ['etcdCpu', 'CPU-s', 1000], 'informer process CPU, s': ['cpu', 'CPU-s', 1000], 'RSS before the informer started, MiB': ['baseRss', 'MiB', 1048576],
    };
    for (const [name, f] of metrics) {
      const [key = name, unit = '', scale = 1] = keys[name] ?? [];
      for (const v of ['list', 'watchlist'] as const) res.set(`${key}.${v}`, spread(of(v).map((r) => f(r) / scale), unit));
      if (med('list', f) > 0) res.set(`${key}.ratio`, ratio(med('watchlist', f), med('list', f)));
    }
    res.set('verdict', wins ? 'watch-list wins' : 'watch-list does not win');
    res.runs = runs;
    res.write();
    process.stdout.write(`\n## Initial sync of ${N.toLocaleString('en-US').replace(/,/g, ' ')} ${resource.resource}: paged LIST vs streaming list\n\n`);
    process.stdout.write(`${markdownTable(
      ['median (runs)', `paged LIST (limit 500, ${pages} pages)`, 'streaming list (watch-list)', 'watch-list ÷ LIST'], rows)}\n\n`);
    process.stdout.write([
      `Verdict: watch-list ${wins ? 'WINS' : 'does NOT win'} (criterion: faster median sync and no more median peak RSS and API server CPU).`,
      `Environment: kube-apiserver ${version} (private minimal control plane, etcd --unsafe-no-fsync), Node ${process.version}, ` +
        `${cpus().length} CPUs; load average (1/5/15 min) at start ${load0.map((x) => x.toFixed(2)).join(' / ')}, ` +
        `at end ${load1.map((x) => x.toFixed(2)).join(' / ')}. ${order.length} runs in ABBA order after one warm-up run of each; ` +
        'each run is a fresh process; API server / etcd CPU = growth of utime+stime over the child\'s whole life.',
      '',
    ].join('\n'));
    return 0;
  } finally {
    await stop();
  }
}

if (import.meta.main) {
  main().then(
    (code) => process.stdout.write('', () => process.exit(code)),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.stdout.write('', () => process.exit(1));
    },
  );
}
