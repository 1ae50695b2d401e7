/**
 * The FakeClient against a real kube-apiserver for one reconcile scenario (docs/testing.md "How much faster"):
 * examples/memcached/reconcile.test.ts runs the same scenario — a Memcached gets its Deployment, Ready=False then
 * True, an idempotent reconcile, a foreign Deployment left alone, deletion through the finalizer: 5 reconciles — on
 * the fake and on `startTestEnv` (the reconciler on a ControllerManager's caches), and prints both times.
 *
 *   node bench/testkit.ts [--rounds 4] [--no-build]
 *
 * Each figure comes from a FRESH `node --test --test-name-pattern=…` process of this checkout's built JavaScript
 * (`ts-controller-manager` resolves to dist/, built first), in the order fake, server, server, fake per round (ABBA).
 * From the fake's process: its first run (JIT warm-up included) and the median of 4 more runs in the same process;
 * from the server's: the scenario alone (the control plane's start apart). The anchor is the real kube-apiserver,
 * measured in the same rounds. Writes bench/results/testkit/… (bench/results.ts).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { log } from './common.ts';
import { BenchResults, ratio, spread } from './results.ts';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '4' }, 'no-build': { type: 'boolean', default: false } } });
const rounds = Number(args.rounds);
const repo = join(import.meta.dirname, '..');
const testFile = join(repo, 'examples', 'memcached', 'reconcile.test.ts');

type Side = 'fake' | 'server';
const pattern: Record<Side, string> = { fake: 'memcached reconcile on the FakeClient', server: 'the same scenario on a real kube-apiserver' };

/** One fresh test process; the times it printed (ms). */
function once(side: Side): { first?: number; warm?: number; scenario?: number } {
  const out = execFileSync(process.execPath, ['--test', '--test-reporter=spec', `--test-name-pattern=${pattern[side]}`, testFile], {
    cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000,
  });
  if (side === 'fake') {
    const m = /reconcile scenario on the FakeClient: ([\d.]+) ms the first time in this process, then median ([\d.]+) ms/.exec(out);
    if (!m) throw new Error(`the fake's run printed no time:\n${out.slice(-2000)}`);
    return { first: Number(m[1]), warm: Number(m[2]) };
  }
  const m = /reconcile scenario on startTestEnv: ([\d.]+) ms/.exec(out);
  if (!m) throw new Error(`the server's run printed no time:\n${out.slice(-2000)}`);
  return { scenario: Number(m[1]) };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

function main(): void {
  if (!args['no-build']) execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  const res = new BenchResults('testkit', {
    name: 'kube-apiserver (startTestEnv)',
    description: 'the same scenario on a real etcd + kube-apiserver started by startTestEnv, a fresh process per run, ABBA with the fake in the same rounds',
  });
  const first: number[] = [];
  const warm: number[] = [];
  const server: number[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const side of ['fake', 'server', 'server', 'fake'] as Side[]) {
      const t = once(side);
      if (t.first !== undefined) first.push(t.first);
      if (t.warm !== undefined) warm.push(t.warm);
      if (t.scenario !== undefined) server.push(t.scenario);
      res.sampleLoad();
      log(`round ${r + 1} ${side}: ${JSON.stringify(t)}`);
    }
  }
  res.set('fake.first', spread(first, 'ms'));
  res.set('fake.warm', spread(warm, 'ms'));
  res.set('server.scenario', spread(server.map((x) => x / 1000), 's'));
  res.set('ratio.first', ratio(median(server), median(first)));
  res.set('ratio.warm', ratio(median(server), median(warm)));
  res.write();
  const cell = (xs: number[], d: number): string => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
  process.stdout.write(`\n| | fake | kube-apiserver (startTestEnv) | ratio of the medians |\n|---|---|---|---|\n` +
    `| the scenario, first time in a process | ${cell(first, 1)} ms | ${cell(server.map((x) => x / 1000), 2)} s | ${(median(server) / median(first)).toFixed(0)}× |\n` +
    `| the scenario, warm (median of 4 more runs in the process) | ${cell(warm, 1)} ms | the same | ${(median(server) / median(warm)).toFixed(0)}× |\n\n` +
    `(${rounds} rounds, fake, server, server, fake; a fresh process per figure)\n`);
}

main();
