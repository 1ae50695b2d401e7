/**
 * The manager against controller-runtime (issue 30): the same Foo controller written three ways, each on a FRESH
 * minimal control plane (etcd + kube-apiserver) with N Foos created before it starts:
 *
 *  - ts:  this project's manager as the image runs it (the bundle dist/bundle/main.js, the image's Node flags,
 *         `--controllers=foo --foo-concurrency=8`, all namespaces, logs discarded);
 *  - cr:  bench/cr-anchor, the Foo controller with sigs.k8s.io/controller-runtime (8 workers, no client rate limit,
 *         /readyz = caches synced), built by `hack/build-tools.sh --bench` from the pinned go.mod;
 *  - raw: no controller, the Foo controller's writes made directly (bench/common.ts rawFooWrites): the API server's
 *         own pace, a floor for start → converged.
 *
 * Order per round is ABBA (ts, cr, raw / raw, cr, ts / …) so a drift of the machine's load hits both alike. Measured
 * per run: start → ready (spawn → /readyz 200), start → converged (every Foo has status.availableReplicas and its
 * Deployment, seen by a watch in this process), the contender's CPU seconds and kube-apiserver's over that time
 * (/proc/<pid>/stat), peak RSS (VmHWM) at convergence, settled RSS 5 s later, restart → ready (SIGTERM, start again,
 * → /readyz 200, with 2 N objects to cache) and the writes that converged restart made (kube-apiserver's
 * apiserver_request_total for foos, deployments and events, non-read verbs; should be 0). With `--limits` 256 the
 * contender runs inside a 256 MiB cgroup v1 memory limit (root). `--idle`: N = 0, RSS 10 s after ready.
 *
 *   node bench/vs-cr.ts [--foos 1000,10000] [--rounds 3] [--limits none,256] [--idle-rounds 3] [--out runs.jsonl]
 *                       [--base OTHER/bundle/main.js] [--no-raw]
 *   node bench/vs-cr.ts --from runs.jsonl[,more.jsonl]   (the table from recorded runs, nothing run)
 *
 * Prints a markdown table: medians and min–max, the ts/cr ratio first, and the issue's goals it misses. Also per run:
 * the requests the contender's convergence cost kube-apiserver (foos, deployments, events: writes, of them 409s, reads).
 *
 * `--base SCRIPT`: a candidate and its baseline in the same run, interleaved with the anchor — a fourth contender
 * "base" runs SCRIPT (another build's bundle, e.g. `node hack/bundle.ts dist/bundle-base` before the change) exactly
 * as ts runs dist/bundle; the order per round is ts, base, cr(, raw) / (raw,) cr, base, ts. The table adds base's column,
 * base ÷ cr and ts ÷ base. `--no-raw` leaves the raw writer out (it does not depend on the build).
 * `--ts-node-flags '…'` / `--base-node-flags '…'` (with `=`, the value starts with `--`): that contender's Node flags
 * instead of the image's (productionNodeFlags), e.g. one build under two V8 settings; `--ts-env 'K=V K2=V2'` /
 * `--base-env …`: extra environment of that contender (e.g. MALLOC_ARENA_MAX=2).
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { deploymentResource, type Deployment } from '../pkg/controllers/deployment/types.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { MemoryCgroup, processRss } from '../test/helpers/cgroup.ts';
import { bundleMainScript, ManagerProcess } from '../test/helpers/managerprocess.ts';
import { apiserverRequests, apiserverWrites, freshFooControlPlane, log, rawFooWrites, stopEnv, type FooEnv } from './common.ts';
import { median as medianOf, MiB, procCpuMs } from './informer/stats.ts';
import { BenchResults, ratio as ratioOf, spread, val } from './results.ts';

const { values: args } = parseArgs({
  options: {
    foos: { type: 'string', default: '1000,10000' },
    rounds: { type: 'string', default: '3' },
    limits: { type: 'string', default: 'none,256' },
    'idle-rounds': { type: 'string', default: '3' },
    workers: { type: 'string', default: '8' },
    namespaces: { type: 'string', default: '10' },
    'timeout-seconds': { type: 'string', default: '1200' },
    'cr-bin': { type: 'string' },
    base: { type: 'string' },
    'ts-node-flags': { type: 'string' },
    'base-node-flags': { type: 'string' },
    'ts-env': { type: 'string' },
    'base-env': { type: 'string' },
    'no-raw': { type: 'boolean', default: false },
    out: { type: 'string' },
    from: { type: 'string' },
  },
});
const sizes = (args.foos ?? '1000').split(',').filter(Boolean).map(Number);
const rounds = Number(args.rounds);
const limits = (args.limits ?? 'none').split(',').map((l) => (l === 'none' ? undefined : Number(l)));
const idleRounds = Number(args['idle-rounds']);
const workers = Number(args.workers);
const namespaceCount = Number(args.namespaces);
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const repo = join(import.meta.dirname, '..');

type Contender = 'ts' | 'base' | 'cr' | 'raw';
type Manager = Exclude<Contender, 'raw'>;
const baseScript = args.base ? resolve(args.base) : undefined;
/** Node flags per TypeScript contender (undefined: the image's, productionNodeFlags). */
const nodeFlagsOf = (kind: Manager): string[] | undefined => {
  const v = kind === 'ts' ? args['ts-node-flags'] : kind === 'base' ? args['base-node-flags'] : undefined;
  return v === undefined ? undefined : v.split(' ').filter(Boolean);
};
/** Extra environment per TypeScript contender. */
const envOf = (kind: Manager): Record<string, string> => {
  const v = kind === 'ts' ? args['ts-env'] : kind === 'base' ? args['base-env'] : undefined;
  return Object.fromEntries((v ?? '').split(' ').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
};
const managers: Manager[] = baseScript ? ['ts', 'base', 'cr'] : ['ts', 'cr'];

/** One run's numbers (ms, seconds of CPU, bytes); undefined = not reached or not applicable. */
interface Run {
  contender: Contender;
  n: number;
  limitMiB: number | undefined;
  round: number;
  readyMs?: number;
  convergedMs?: number;
  cpuS?: number;
  apiCpuS?: number;
  peakRss?: number;
  settledRss?: number;
  idleRss?: number;
  restartReadyMs?: number;
  restartCpuS?: number;
  restartWrites?: number;
  convergeWrites?: number;
  convergeConflicts?: number;
  convergeReads?: number;
  cgroupMax?: number;
  cgroupFailCnt?: number;
  killed?: string;
}

function crBinary(): string {
  if (args['cr-bin']) return args['cr-bin'];
  const out = execFileSync('bash', [join(repo, 'hack', 'build-tools.sh'), '--print-env', '--control-plane', '--bench'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = /^CR_ANCHOR_BIN_DIR=(.*)$/m.exec(out)?.[1];
  if (!dir) throw new Error('hack/build-tools.sh --bench printed no CR_ANCHOR_BIN_DIR');
  return join(dir, 'cr-anchor');
}

function startManager(kind: Manager, env: FooEnv, crBin: string, cgroup: MemoryCgroup | undefined): Promise<ManagerProcess> {
  return ManagerProcess.start({
    collectLogs: false, env: { ...envOf(kind), KUBECONFIG: env.cp.kubeconfig }, ...(cgroup ? { cgroup } : {}),
    ...(kind === 'cr'
      ? { executable: crBin, args: [`--workers=${workers}`] }
      : {
        script: kind === 'base' && baseScript ? baseScript : bundleMainScript, args: ['--controllers=foo', `--foo-concurrency=${workers}`],
        ...(nodeFlagsOf(kind) ? { nodeFlags: nodeFlagsOf(kind) } : {}),
      }),
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** ts or cr on a fresh control plane with n Foos: see the file comment for what is measured. */
async function managerRun(kind: Manager, n: number, limitMiB: number | undefined, round: number, crBin: string): Promise<Run> {
  const run: Run = { contender: kind, n, limitMiB, round };
  const env = await freshFooControlPlane(n, { namespaceCount, prefix: 'tscm-vscr-' });
  const apiPid = env.cp.state.components['kube-apiserver']?.pid ?? 0;
  const cgroup = limitMiB ? MemoryCgroup.create(`tscm-vscr-${process.pid}`, limitMiB * MiB) : undefined;
  const factory = new SharedInformerFactory({ client: env.rest, namespaces: [] });
  const foos = factory.informerFor<Foo>(fooResource);
  const deployments = factory.informerFor<Deployment>(deploymentResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  await factory.waitForCacheSync({ timeoutMs: 300_000 });
  const converged = (): boolean => {
    const all = foos.lister().list();
    return all.length >= n && all.every((f) => f.status?.availableReplicas !== undefined &&
      deployments.lister().get(f.metadata?.namespace ?? '', f.spec?.deploymentName ?? '') !== undefined);
  };
  let mgr: ManagerProcess | undefined;
  try {
    const apiCpu0 = procCpuS(apiPid);
    const requests0 = await apiserverRequests(env.cp);
    const t0 = performance.now();
    mgr = await startManager(kind, env, crBin, cgroup);
    const pid = mgr.proc.pid ?? 0;
    while (performance.now() < t0 + timeoutMs && mgr.running) {
      if (run.readyMs === undefined && (await mgr.probe('/readyz')).status === 200) run.readyMs = performance.now() - t0;
      if (run.readyMs !== undefined && converged()) {
        run.convergedMs = performance.now() - t0;
        break;
      }
      await sleep(50);
    }
    if (!mgr.running) {
      const { signal, code } = await mgr.exited;
      run.killed = `${signal ?? `exit ${code}`}`;
      return run;
    }
    if (run.convergedMs === undefined) {
      run.killed = 'timeout';
      return run;
    }
    run.cpuS = procCpuS(pid);
    run.apiCpuS = procCpuS(apiPid) - apiCpu0;
    run.peakRss = processRss(pid)?.peak;
    const requests = await apiserverRequests(env.cp);
    run.convergeWrites = requests.writes - requests0.writes;
    run.convergeConflicts = requests.conflicts - requests0.conflicts;
    run.convergeReads = requests.reads - requests0.reads;
    await sleep(n === 0 ? 10_000 : 5000);
    if (n === 0) run.idleRss = processRss(pid)?.rss;
    else run.settledRss = processRss(pid)?.rss;
    if (n === 0) return run;

    const writes0 = await apiserverWrites(env.cp);
    await mgr.stop('SIGTERM', 60_000);
    const t1 = performance.now();
    mgr = await startManager(kind, env, crBin, cgroup);
    // Polled every 10 ms: at waitReady's default 100 ms the ~0.2 s restarts read as whole poll periods (0.22 s for a
    // process ready at 0.13 s), which distorted the ratio. CPU to ready (the process's own, all threads) is the
    // stable number on a shared machine: wall time is the load's.
    await mgr.waitReady({ timeoutMs: 300_000, intervalMs: 10 });
    run.restartReadyMs = performance.now() - t1;
    run.restartCpuS = procCpuS(mgr.proc.pid ?? 0);
    // The restart reconciles every cached Foo after it is ready; give it time to do so (and to write, if it would).
    await sleep(5000 + n);
    run.restartWrites = (await apiserverWrites(env.cp)) - writes0;
    return run;
  } finally {
    if (mgr?.running) await mgr.stop('SIGTERM', 60_000);
    if (cgroup) {
      run.cgroupMax = cgroup.maxUsageBytes();
      // 0 = the usage never reached the limit: no reclaim inside the cgroup (memory.failcnt).
      run.cgroupFailCnt = cgroup.failCount();
      if (cgroup.oomKills() > 0) run.killed = `OOM-killed ${cgroup.oomKills()}×`;
      cgroup.remove();
    }
    ac.abort();
    await informers;
    await stopEnv(env);
  }
}

async function rawRun(n: number, round: number): Promise<Run> {
  const env = await freshFooControlPlane(n, { namespaceCount, prefix: 'tscm-vscr-' });
  try {
    const apiPid = env.cp.state.components['kube-apiserver']?.pid ?? 0;
    const apiCpu0 = procCpuS(apiPid);
    const { ms, cpuSeconds } = await rawFooWrites(env);
    return { contender: 'raw', n, limitMiB: undefined, round, convergedMs: ms, cpuS: cpuSeconds, apiCpuS: procCpuS(apiPid) - apiCpu0 };
  } finally {
    await stopEnv(env);
  }
}

// ---- statistics and the table ----

/** A column of the table; `name` and `resultUnit`: its leaf in the results file (bench/results.ts). */
type Metric = { key: keyof Run; label: string; unit: 's' | 'MiB' | 'n'; name: string; resultUnit: string };
const metrics: Metric[] = [
  { key: 'readyMs', label: 'start → ready s', unit: 's', name: 'ready', resultUnit: 's' },
  { key: 'convergedMs', label: 'start → converged s', unit: 's', name: 'converge', resultUnit: 's' },
  { key: 'cpuS', label: 'contender CPU s (to converged)', unit: 'n', name: 'cpu', resultUnit: 'CPU-s' },
  { key: 'apiCpuS', label: 'kube-apiserver CPU s (to converged)', unit: 'n', name: 'apiserverCpu', resultUnit: 'CPU-s' },
  { key: 'convergeWrites', label: 'writes to converge (foos, deployments, events)', unit: 'n', name: 'convergeWrites', resultUnit: 'count' },
  { key: 'convergeConflicts', label: 'of them refused with 409', unit: 'n', name: 'convergeConflicts', resultUnit: 'count' },
  { key: 'convergeReads', label: 'reads to converge (GET/LIST/WATCH)', unit: 'n', name: 'convergeReads', resultUnit: 'count' },
  { key: 'peakRss', label: 'peak RSS MiB', unit: 'MiB', name: 'peakRss', resultUnit: 'MiB' },
  { key: 'settledRss', label: 'settled RSS MiB (5 s after converged)', unit: 'MiB', name: 'settledRss', resultUnit: 'MiB' },
  { key: 'restartReadyMs', label: 'restart → ready s', unit: 's', name: 'restart', resultUnit: 's' },
  { key: 'restartCpuS', label: 'restart: CPU s to ready', unit: 'n', name: 'restartCpu', resultUnit: 'CPU-s' },
  { key: 'restartWrites', label: 'writes by the converged restart', unit: 'n', name: 'restartWrites', resultUnit: 'count' },
  { key: 'cgroupMax', label: 'cgroup max usage MiB', unit: 'MiB', name: 'cgroupMax', resultUnit: 'MiB' },
  { key: 'cgroupFailCnt', label: 'cgroup limit hits (memory.failcnt)', unit: 'n', name: 'cgroupFailCnt', resultUnit: 'count' },
  { key: 'idleRss', label: 'idle RSS MiB (N = 0, 10 s after ready)', unit: 'MiB', name: 'idleRss', resultUnit: 'MiB' },
];

function values(runs: Run[], key: keyof Run): number[] {
  return runs.map((r) => r[key]).filter((v): v is number => typeof v === 'number');
}

/** Median, undefined for no values. */
function median(xs: number[]): number | undefined {
  return xs.length === 0 ? undefined : medianOf(xs);
}

/** CPU seconds a live process has used (/proc/<pid>/stat utime + stime). */
const procCpuS = (pid: number): number => procCpuMs(pid) / 1000;

function scale(v: number, unit: Metric['unit']): number {
  return unit === 's' ? v / 1000 : unit === 'MiB' ? v / MiB : v;
}

function fmt(v: number | undefined, unit: Metric['unit']): string {
  if (v === undefined) return '–';
  const x = scale(v, unit);
  return unit === 'MiB' ? x.toFixed(0) : unit === 'n' && Number.isInteger(x) ? String(x) : x.toFixed(2);
}

function cell(runs: Run[], m: Metric): string {
  const xs = values(runs, m.key);
  if (xs.length === 0) return '–';
  if (xs.length === 1) return fmt(xs[0], m.unit);
  return `${fmt(median(xs), m.unit)} (${fmt(Math.min(...xs), m.unit)}–${fmt(Math.max(...xs), m.unit)})`;
}

function ratio(ts: Run[], cr: Run[], key: keyof Run): number | undefined {
  const a = median(values(ts, key));
  const b = median(values(cr, key));
  return a === undefined || b === undefined || b === 0 ? undefined : a / b;
}

/** The runs of one (N, limit) group, by contender (raw only in the unlimited group). */
interface Group { n: number; limit: number | undefined; ts: Run[]; cr: Run[]; base: Run[]; raw: Run[] }

/** Every (N, limit) measured with a manager, N = 0 (idle) last. */
function groupsOf(all: Run[]): Group[] {
  const keys = [...new Set(all.map((r) => `${r.n === 0 ? Infinity : r.n}/${r.limitMiB ?? 0}`))].sort((a, b) => {
    const [an = 0, al = 0] = a.split('/').map(Number);
    const [bn = 0, bl = 0] = b.split('/').map(Number);
    return an - bn || al - bl;
  });
  return keys.map((k) => {
    const [n0 = 0, limit0 = 0] = k.split('/').map(Number);
    const n = Number.isFinite(n0) ? n0 : 0;
    const limit = limit0 || undefined;
    const of = (c: Contender): Run[] => all.filter((r) => r.n === n && r.limitMiB === limit && r.contender === c);
    return { n, limit, ts: of('ts'), cr: of('cr'), base: of('base'), raw: limit === undefined ? all.filter((r) => r.n === n && r.contender === 'raw') : [] };
  }).filter((g) => g.ts.length + g.cr.length > 0);
}

/**
 * The results file's tree: per group (`n1000.unlimited`, `n1000.cgroup256`, `idle`) and metric, each contender's
 * median/min/max and the ratio ts ÷ cr of the medians (the anchor, same run); `base ÷ cr` and `ts ÷ base` with `--base`.
 */
function recordResults(all: Run[], res: BenchResults): void {
  for (const { n, limit, ts, cr, base, raw } of groupsOf(all)) {
    const group = n === 0 ? 'idle' : `n${n}.${limit ? `cgroup${limit}` : 'unlimited'}`;
    res.set(`${group}.rounds`, val(Math.max(ts.length, cr.length), 'count'));
    for (const m of metrics) {
      const contenders = { ts, cr, base, raw };
      for (const [c, runs] of Object.entries(contenders)) {
        const xs = values(runs, m.key).map((v) => scale(v, m.unit));
        if (xs.length > 0) res.set(`${group}.${m.name}.${c}`, spread(xs, m.resultUnit));
      }
      const pairs: [string, Run[], Run[]][] = [['ratio', ts, cr], ['baseRatio', base, cr], ['tsOverBase', ts, base]];
      for (const [name, a, b] of pairs) {
        const ma = median(values(a, m.key));
        const mb = median(values(b, m.key));
        if (ma !== undefined && mb !== undefined && mb !== 0) res.set(`${group}.${m.name}.${name}`, ratioOf(ma, mb));
      }
    }
  }
}

function table(all: Run[]): string {
  const out: string[] = [];
  const goals: string[] = [];
  for (const { n, limit, ts, cr, base, raw } of groupsOf(all)) {
    const rounds = Math.max(ts.length, cr.length);
    const r2 = (a: Run[], b: Run[], key: keyof Run): string => {
      const r = ratio(a, b, key);
      return r === undefined ? '–' : `${r.toFixed(2)}×`;
    };
    out.push(`\n**N = ${n.toLocaleString('en-US').replace(/,/g, ' ')} Foos${n ? ` (${(2 * n).toLocaleString('en-US').replace(/,/g, ' ')} cached objects)` : ' (idle)'}, ${limit ? `${limit} MiB memory cgroup` : 'no memory limit'}, ${rounds} round${rounds > 1 ? 's' : ''}**\n`);
    if (base.length > 0) {
      out.push('| metric | ts ÷ cr | base ÷ cr | ts ÷ base | ts (this build) | base (baseline build) | cr (controller-runtime) | raw writer |', '|---|---:|---:|---:|---:|---:|---:|---:|');
    } else out.push('| metric | ts ÷ cr | ts (this manager) | cr (controller-runtime) | raw writer |', '|---|---:|---:|---:|---:|');
    for (const m of metrics) {
      if (values([...ts, ...cr, ...base], m.key).length === 0) continue;
      if (base.length > 0) {
        out.push(`| ${m.label} | ${r2(ts, cr, m.key)} | ${r2(base, cr, m.key)} | ${r2(ts, base, m.key)} | ${cell(ts, m)} | ${cell(base, m)} | ${cell(cr, m)} | ${cell(raw, m)} |`);
      } else out.push(`| ${m.label} | ${r2(ts, cr, m.key)} | ${cell(ts, m)} | ${cell(cr, m)} | ${cell(raw, m)} |`);
    }
    const killed = [...ts, ...cr, ...base].filter((r) => r.killed).map((r) => `${r.contender} round ${r.round}: ${r.killed}`);
    if (killed.length) out.push(`\nNot converged: ${killed.join('; ')}`);
    // The issue's goals (ratios ts ÷ cr unless stated).
    const where = `N=${n}${limit ? `, ${limit} MiB` : ''}`;
    const goal = (what: string, value: number | undefined, max: number, unit = '×'): void => {
      if (value !== undefined && value > max) goals.push(`- goal missed by ${(value - max).toFixed(2)}${unit} (${where}): ${what} ${value.toFixed(2)}${unit} > ${max}${unit}`);
    };
    if (n > 0) {
      goal('converge', ratio(ts, cr, 'convergedMs'), 1.0);
      goal('CPU', ratio(ts, cr, 'cpuS'), 1.0);
      goal('peak RSS', ratio(ts, cr, 'peakRss'), limit ? 1.5 : 2.0);
      goal('settled RSS', ratio(ts, cr, 'settledRss'), limit ? 1.5 : 2.0);
      goal(`restart → ready at ${2 * n} cached objects`, ratio(ts, cr, 'restartReadyMs'), 1.5);
      const w = median(values(ts, 'restartWrites'));
      if (w !== undefined && w > 0) goals.push(`- goal missed (${where}): a converged restart made ${w} writes (median), not 0`);
    } else {
      const idle = median(values(ts, 'idleRss'));
      goal('ts idle RSS', idle === undefined ? undefined : idle / MiB, 55, ' MiB');
    }
  }
  out.push('\nGoals (issue 30): converge ≤ 1.0×, CPU ≤ 1.0×, RSS ≤ 1.5× inside 256 MiB and ≤ 2.0× unlimited, idle ≤ 55 MiB, ' +
    'restart → ready ≤ 1.5× at 2 000 and 20 000 cached objects, 0 writes on a converged restart.');
  out.push(goals.length ? goals.join('\n') : '- every goal measured here is met');
  return out.join('\n');
}

async function main(): Promise<void> {
  if (args.from) {
    const runs = args.from.split(',').flatMap((f) => readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Run));
    process.stdout.write(`${table(runs)}\n`);
    return;
  }
  execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  execFileSync(process.execPath, [join(repo, 'hack', 'bundle.ts')], { cwd: repo, stdio: 'inherit' });
  const crBin = crBinary();
  const crVersion = execFileSync('awk', ['$1 == "sigs.k8s.io/controller-runtime" {print $2}', join(repo, 'bench', 'cr-anchor', 'go.mod')], { encoding: 'utf8' }).trim();
  const res = new BenchResults('vs-cr', {
    name: `controller-runtime ${crVersion}`,
    description: `bench/cr-anchor: the same Foo controller with sigs.k8s.io/controller-runtime ${crVersion} (${workers} workers, no client rate limit), ` +
      'run in the same rounds ABBA on a fresh minimal control plane per run; `raw`: the controller\'s writes made directly (a floor for converge)',
  });
  const started = new Date();
  const loads: number[] = [];
  const all: Run[] = [];
  const record = (r: Run): void => {
    all.push(r);
    res.sampleLoad();
    loads.push(loadavg()[0] ?? 0);
    log(`  ${JSON.stringify(r)}`);
    if (args.out) appendFileSync(args.out, `${JSON.stringify(r)}\n`);
  };
  for (let round = 0; round < idleRounds; round++) {
    for (const kind of round % 2 ? [...managers].reverse() : managers) {
      log(`idle round ${round + 1}/${idleRounds}: ${kind}`);
      record(await managerRun(kind, 0, undefined, round + 1, crBin));
    }
  }
  for (const n of sizes) {
    for (const limit of limits) {
      const contenders: Contender[] = limit === undefined && !args['no-raw'] ? [...managers, 'raw'] : [...managers];
      for (let round = 0; round < rounds; round++) {
        for (const kind of round % 2 ? [...contenders].reverse() : contenders) {
          log(`N=${n}${limit ? `, ${limit} MiB` : ''} round ${round + 1}/${rounds}: ${kind} (load ${loadavg().map((l) => l.toFixed(1)).join(' ')})`);
          record(kind === 'raw' ? await rawRun(n, round + 1) : await managerRun(kind, n, limit, round + 1, crBin));
        }
      }
    }
  }
  recordResults(all, res);
  res.runs = all;
  res.write();
  process.stdout.write(`${table(all)}\n\n(${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${((Date.now() - started.getTime()) / 60000).toFixed(0)} min; ` +
    `Node ${process.version}, controller-runtime ${crVersion}, ${cpus().length} CPUs shared with other work: 1-min load average during the runs ` +
    `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} (median ${(median(loads) ?? 0).toFixed(1)}); ${workers} workers each, all namespaces; ` +
    `ABBA order, a fresh minimal control plane per run)\n`);
}

await main();
