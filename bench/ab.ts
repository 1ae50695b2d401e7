/**
 * A/B benchmark of two compiled builds of the manager (issue 30): the per-object cost of convergence, measured the
 * way bench/scale.ts measures it, alternating the two builds so that a busy, shared machine hurts both alike.
 *
 *   node bench/ab.ts --a /tmp/base/dist --b dist [--foos 1000] [--rounds 3] [--workers 8] [--namespaces 10]
 *
 * `--a` / `--b` are dist directories (`tsc -p tsconfig.build.json` output; `<dir>/cmd/manager/main.js` is run, with
 * the node_modules next to `<dir>`). Every run: a FRESH minimal control plane (bench/common.ts `freshFooControlPlane`:
 * etcd + kube-apiserver, the Foo CRD, N Foos over `--namespaces` namespaces created before the start), then the
 * manager `node --max-old-space-size-percentage=50 <dir>/cmd/manager/main.js --controllers=foo
 * --foo-concurrency=<workers>` (stdout discarded), until every Foo has a status (seen through a watch in this
 * process). Measured per run:
 *  - manager CPU-seconds from spawn to convergence: utime + stime of /proc/<pid>/stat (the PRIMARY measure: on a
 *    machine shared with other work, CPU time varies far less than wall time);
 *  - converge s: spawn → every Foo has a status (wall time, noisy under load);
 *  - peak RSS: VmHWM at convergence.
 * `--a-node-flags` / `--b-node-flags` '…': the Node flags of that build's manager (default the image's,
 * `--max-old-space-size-percentage=50 --max-semi-space-size=2`), so one build can be compared with itself under two
 * heap settings (`--a X/dist --b X/dist '--b-node-flags=--max-semi-space-size=8 …'`: with `=`, as the value starts with `--`).
 * `--a-env` / `--b-env` 'K=V K2=V2': extra environment of that build's manager (e.g. glibc malloc settings).
 * `--cpu-prof-dir DIR`: the manager also runs with `--cpu-prof` (whole life, written at its exit after the SIGTERM)
 * into DIR/A and DIR/B, for bench/profile-summary.ts; the profiler's own cost is in the CPU-seconds then.
 * Order: rounds alternate AB, BA, AB, ... (ABBA), so a drift of the machine's load over the run hits both builds
 * equally. The summary gives median and min–max per build, and B ÷ A of the medians, plus the load averages seen.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { processRss } from '../test/helpers/cgroup.ts';
import { ManagerProcess, productionNodeFlags } from '../test/helpers/managerprocess.ts';
import { log } from './common.ts';
import { freshFooControlPlane, stopEnv } from './common.ts';
import { BenchResults, spread, val } from './results.ts';

const { values: args } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    foos: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: '8' },
    'timeout-seconds': { type: 'string', default: '600' },
    'cpu-prof-dir': { type: 'string' },
    'a-node-flags': { type: 'string' },
    'b-node-flags': { type: 'string' },
    'a-env': { type: 'string' },
    'b-env': { type: 'string' },
  },
});
if (!args.a || !args.b) throw new Error('usage: node bench/ab.ts --a DIST_A --b DIST_B [--foos N] [--rounds R]');
const builds = { A: resolve(args.a), B: resolve(args.b) };
for (const dir of Object.values(builds)) {
  if (!existsSync(join(dir, 'cmd', 'manager', 'main.js'))) throw new Error(`${dir}/cmd/manager/main.js not found (compile it first)`);
}
const n = Number(args.foos);
const rounds = Number(args.rounds);
const workers = Number(args.workers);
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const profDir = args['cpu-prof-dir'] ? resolve(args['cpu-prof-dir']) : undefined;
/** Node flags per build (space-separated; default the image's, `productionNodeFlags`): e.g. one build, two heap settings. */
const nodeFlags = {
  A: args['a-node-flags'] !== undefined ? args['a-node-flags'].split(' ').filter(Boolean) : productionNodeFlags,
  B: args['b-node-flags'] !== undefined ? args['b-node-flags'].split(' ').filter(Boolean) : productionNodeFlags,
};
/** Extra environment per build (`--a-env 'K=V K2=V2'`): e.g. one build under two malloc settings. */
const envOf = (v: string | undefined): Record<string, string> =>
  Object.fromEntries((v ?? '').split(' ').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const extraEnv = { A: envOf(args['a-env']), B: envOf(args['b-env']) };
const MiB = 1024 * 1024;
const clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** utime + stime of a process in seconds (fields 14 and 15 of /proc/<pid>/stat, after the parenthesised name). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

interface Run { build: 'A' | 'B'; cpu: number; convergedMs: number; peakRss: number; load: number }

async function runOnce(build: 'A' | 'B'): Promise<Run> {
  const env = await freshFooControlPlane(n, { namespaceCount: 10, prefix: 'tscm-ab-' });
  const factory = new SharedInformerFactory({ client: env.rest, namespaces: [] });
  const foos = factory.informerFor<Foo>(fooResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  let mgr: ManagerProcess | undefined;
  try {
    await factory.waitForCacheSync({ timeoutMs: 120_000 });
    const converged = (): boolean => {
      const all = foos.lister().list();
      return all.length >= n && all.every((f) => f.status?.availableReplicas !== undefined);
    };
    const load = loadavg()[0] ?? 0;
    const t0 = performance.now();
    mgr = await ManagerProcess.start({
      script: join(builds[build], 'cmd', 'manager', 'main.js'), collectLogs: false, metrics: false,
      nodeFlags: [...nodeFlags[build], ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profDir, build)}`] : [])],
      args: ['--controllers=foo', `--foo-concurrency=${workers}`], env: { ...extraEnv[build], KUBECONFIG: env.cp.kubeconfig },
    });
    const pid = mgr.proc.pid ?? 0;
    while (!converged()) {
      if (!mgr.running) throw new Error(`manager ${build} exited before convergence: ${mgr.stderr.join('')}`);
      if (performance.now() - t0 > timeoutMs) throw new Error(`manager ${build} did not converge in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const run: Run = { build, cpu: cpuSeconds(pid), convergedMs: performance.now() - t0, peakRss: processRss(pid)?.peak ?? 0, load };
    return run;
  } finally {
    if (mgr?.running) await mgr.stop('SIGTERM', 60_000);
    ac.abort();
    await informers;
    await stopEnv(env);
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
const stat = (xs: number[], digits: number): string =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

async function main(): Promise<void> {
  const res = new BenchResults('ab', {
    name: `A: ${builds.A}`,
    description: 'build A (the baseline) interleaved ABBA with build B in the same run, a fresh control plane per run',
  });
  const runs: Run[] = [];
  for (let r = 0; r < rounds; r++) {
    const order: ('A' | 'B')[] = r % 2 === 0 ? ['A', 'B'] : ['B', 'A'];
    for (const build of order) {
      log(`round ${r + 1}/${rounds}: ${build} (${builds[build]})`);
      const run = await runOnce(build);
      runs.push(run);
      res.sampleLoad();
      log(`  ${build}: CPU ${run.cpu.toFixed(2)} s, converged ${(run.convergedMs / 1000).toFixed(1)} s, peak RSS ${(run.peakRss / MiB).toFixed(0)} MiB, load ${run.load.toFixed(1)}`);
    }
  }
  const of = (b: 'A' | 'B'): Run[] => runs.filter((x) => x.build === b);
  const ratio = (f: (x: Run) => number): string => (median(of('B').map(f)) / median(of('A').map(f))).toFixed(2);
  for (const b of ['A', 'B'] as const) {
    res.set(b, {
      build: `${builds[b]} ${nodeFlags[b].join(' ')}`.trim(), cpu: spread(of(b).map((x) => x.cpu), 'CPU-s'),
      converge: spread(of(b).map((x) => x.convergedMs / 1000), 's'), peakRss: spread(of(b).map((x) => x.peakRss / MiB), 'MiB'),
    });
  }
  const r = (f: (x: Run) => number): number => median(of('B').map(f)) / median(of('A').map(f));
  res.set('ratio', { cpu: val(r((x) => x.cpu), '×'), converge: val(r((x) => x.convergedMs), '×'), peakRss: val(r((x) => x.peakRss), '×') });
  res.set('foos', val(n, 'count'));
  res.runs = runs;
  res.write();
  const lines = [
    `| build | manager CPU-s to converge | converge s | peak RSS MiB |`,
    `|---|---:|---:|---:|`,
    ...(['A', 'B'] as const).map((b) => `| ${b}: ${builds[b]} ${nodeFlags[b].join(' ')}${args[`${b.toLowerCase() as 'a' | 'b'}-env`] ? ` ${args[`${b.toLowerCase() as 'a' | 'b'}-env`]}` : ''} | ${stat(of(b).map((x) => x.cpu), 2)} | ${stat(of(b).map((x) => x.convergedMs / 1000), 1)} | ${stat(of(b).map((x) => x.peakRss / MiB), 0)} |`),
    `| B ÷ A (medians) | ${ratio((x) => x.cpu)} | ${ratio((x) => x.convergedMs)} | ${ratio((x) => x.peakRss)} |`,
  ];
  process.stdout.write(`\n${lines.join('\n')}\n\n(N = ${n} Foos, ${workers} workers, ${rounds} rounds ABBA, median (min–max); Node ${process.version}, ` +
    `${cpus().length} CPUs, 1-min load average at the runs' starts ${Math.min(...runs.map((x) => x.load)).toFixed(1)}–${Math.max(...runs.map((x) => x.load)).toFixed(1)})\n` +
    `runs in order: ${runs.map((x) => `${x.build} ${x.cpu.toFixed(2)}`).join(', ')}\n`);
}

await main();
