/**
 * Endurance bench (issue 43; `make soak`, also in `make bench`): the manager as shipped — every controller, two
 * replicas with leader election, each in a memory cgroup of the shipped 256 MiB — on a private full control plane
 * and a real neutron-server, under continuous churn of Foos, Networks and Deployments, with faults on a schedule
 * (kube-apiserver crashed and restarted gracefully, etcd compacted under cut-off watches, neutron-server answering
 * 503 and slowly, the leader killed) and a checkpoint closing every cycle (every object converged, Neutron holding
 * exactly the networks it should, every cache equal to kube-apiserver's state). The pieces: bench/soak/*.ts.
 *
 *   SOAK_MINUTES=60 node bench/soak.ts [--rate 25] [--cycle-minutes 10] [--foos 150] [--deployments 60] [--networks 30]
 *                                       [--leader-kill-every 3] [--graceful-every 3] [--no-cgroup] [--dir DIR]
 *                                       [--manager-env NAME=VALUE …]
 *
 * The leader kill and the graceful restart (which costs the leader its Lease: it exits, by design) run in every 3rd
 * cycle by default, the other faults in every cycle: with both in every cycle no process lived past its 10-minute
 * warm-up for long (the 60-min run of 28 Nov 2026 08:48 UTC, bench/results/soak/2026-11-28T0848Z-9cad639.json: every process ≤ 10 min), so memory growth could not be
 * measured at all.
 *
 * `--manager-env` adds environment variables to both replicas (an experiment, e.g. MALLOC_ARENA_MAX=2: the results
 * file's `config.managerEnv` records them).
 *
 * The manager runs from a bundle built into `dist/soak-<stamp>/` at the start (tsc + hack/bundle.ts), so a run of
 * hours is not affected by later edits of the tree; it is removed at the end.
 *
 * Results: bench/results/soak/…json (bench/results.ts). The anchor is the run's own FIRST window after the warm-up
 * (an hour, or half of what is left for shorter runs): the goals compare the LAST window with it. Progress and each
 * fault's recovery go to stderr; the goals and the summary to stdout. Logs and samples stay in the working directory
 * (printed at the start; kept unless the run ends cleanly and `--keep` is not given).
 *
 * A benchmark, not a test: it says "goal missed" where a goal is missed and exits 0 unless the bench itself broke.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BenchResults, val } from './results.ts';
import { report } from './soak/report.ts';
import { defaultSchedule, runSoak } from './soak/run.ts';

const repo = join(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string' },
    rate: { type: 'string', default: '25' },
    'cycle-minutes': { type: 'string', default: '10' },
    foos: { type: 'string', default: '150' },
    deployments: { type: 'string', default: '60' },
    networks: { type: 'string', default: '30' },
    'leader-kill-every': { type: 'string', default: '3' },
    'graceful-every': { type: 'string', default: '3' },
    'no-cgroup': { type: 'boolean', default: false },
    dir: { type: 'string' },
    keep: { type: 'boolean', default: false },
    'manager-env': { type: 'string', multiple: true, default: [] },
  },
});
const log = (m: string): void => void process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${m}\n`);
const minutes = Number(args.minutes ?? process.env['SOAK_MINUTES'] ?? 60);
const num = (name: string, v: string | undefined): number => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) {
    process.stderr.write(`soak: --${name} must be a positive number, not '${v}'\n`);
    process.exit(2);
  }
  return n;
};
num('minutes', String(minutes));
const managerEnv: Record<string, string> = {};
for (const kv of args['manager-env']) {
  const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(kv);
  if (!m?.[1] || m[2] === undefined) {
    process.stderr.write(`soak: --manager-env must be NAME=VALUE, not '${kv}'\n`);
    process.exit(2);
  }
  managerEnv[m[1]] = m[2];
}
const cycleMs = num('cycle-minutes', args['cycle-minutes']) * 60_000;
const warmupMs = Math.min(10 * 60_000, 0.2 * minutes * 60_000);

const dir = args.dir ?? mkdtempSync(join(tmpdir(), 'tscm-soak-'));
const stamp = new Date().toISOString().replace(/[:.]/g, '').slice(0, 15);
const bundleDir = `dist/soak-${stamp}-${process.pid}`;
log(`working directory ${dir} (logs: <replica>.log, samples.jsonl); building the manager into ${bundleDir}`);
execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
execFileSync(process.execPath, ['hack/bundle.ts', bundleDir], { cwd: repo, stdio: 'inherit' });

const res = new BenchResults('soak', {
  name: 'first window',
  description: 'the first hour after the warm-up of the same run (half of what is left after the warm-up when the run is shorter than 2 h 10 min): ' +
    'the last window is compared with it',
});
const ac = new AbortController();
process.once('SIGINT', () => ac.abort());
process.once('SIGTERM', () => ac.abort());
const schedule = defaultSchedule.map((f) => (
  f.kind === 'leader-kill' ? { ...f, every: num('leader-kill-every', args['leader-kill-every']) }
    : f.kind === 'apiserver-graceful' ? { ...f, every: num('graceful-every', args['graceful-every']) } : f));
let clean = false;
try {
  const out = await runSoak({
    minutes, dir, script: join(repo, bundleDir, 'main.js'), rate: num('rate', args.rate),
    targets: { foo: num('foos', args.foos), deployment: num('deployments', args.deployments), network: num('networks', args.networks) },
    weights: { foo: 0.55, deployment: 0.37, network: 0.08 },
    cycleMs, schedule, neutronWindow: 0.1, warmupMs, sampleIntervalMs: 10_000,
    memoryLimitMiB: args['no-cgroup'] ? undefined : 256, convergeTimeoutMs: 300_000, cacheTimeoutMs: 60_000, cutMs: 5000,
    restartDelayMs: 2000, managerEnv, log, signal: ac.signal,
  });
  const rep = report({
    startedAt: out.startedAt, endedAt: out.endedAt, warmupMs, minGrowthSpanMs: Math.min(60 * 60_000, 0.3 * minutes * 60_000),
    samples: out.sampler.samples, faults: out.faults, checkpoints: out.checkpoints, churn: out.churn, churnMs: out.churnMs,
    logs: out.logs, replicas: out.replicas,
  });
  for (const [k, v] of Object.entries(rep.results)) res.set(k, v);
  res.set('config', {
    rate: val(num('rate', args.rate), '/s'), cycle: val(cycleMs / 60_000, 'min'), foos: val(num('foos', args.foos), 'count'),
    deployments: val(num('deployments', args.deployments), 'count'), networks: val(num('networks', args.networks), 'count'),
    cgroup: args['no-cgroup'] ? 'none' : '256 MiB per replica',
    managerEnv: Object.entries(managerEnv).map(([k, v]) => `${k}=${v}`).join(' ') || 'none', schedule: schedule.map((f) => `${f.kind}@${f.at}${f.every && f.every > 1 ? `/every ${f.every}` : ''}`).join(', '),
  });
  res.set('goals', Object.fromEntries(rep.goals.map((g, i) => [String(i + 1), { goal: g.name, verdict: g.verdict, detail: g.detail }])));
  if (out.errors.length) res.set('benchErrors', Object.fromEntries(out.errors.map((e, i) => [String(i + 1), e])));
  res.runs = out.checkpoints.map((c) => ({ at: new Date(c.at).toISOString(), converged: c.converged, convergeS: Math.round(c.convergeMs / 100) / 10, cachesEqual: c.cachesEqual, counts: c.report.counts, problems: c.report.problems.slice(0, 5), mismatches: c.mismatches }));
  res.sampleLoad();
  const file = res.write();
  process.stdout.write(`\n# Endurance: ${(minutes).toFixed(0)} min, results ${file}\n\n`);
  process.stdout.write('| goal (issue 43) | measured | verdict |\n|---|---|---|\n');
  for (const g of rep.goals) process.stdout.write(`| ${g.name} | ${g.detail.replaceAll('|', '/')} | ${g.verdict === 'missed' ? 'goal missed' : g.verdict} |\n`);
  process.stdout.write(`\n${rep.lines.join('\n')}\n`);
  clean = !ac.signal.aborted;
} finally {
  rmSync(join(repo, bundleDir), { recursive: true, force: true });
  if (clean && !args.keep && !args.dir) rmSync(dir, { recursive: true, force: true });
  else log(`kept ${dir}`);
}
