/**
 * Where the CPU-seconds and the MiB go per phase (issue 30), measured through the manager's own profiling endpoint
 * (--pprof-bind-address) while it converges N Foos that exist before it starts (bench/common.ts's freshFooControlPlane, as bench/scale.ts: a fresh
 * minimal control plane per N, Foos over 10 namespaces, the image's Node flags, `--controllers=foo
 * --foo-concurrency=8`, compiled dist/).
 *
 *  - CPU: back-to-back `/debug/pprof/profile?seconds=W` windows from the moment the endpoint answers until every
 *    Foo has a status (plus one window after), summed and summarised by phase (bench/profile-summary.ts).
 *  - Allocations: back-to-back `/debug/pprof/heap?seconds=W&allocated=1` windows over the same time, by phase.
 *  - Retained memory at convergence: `/debug/pprof/heapstats` (V8 spaces, RSS) and, for N ≤ `--snapshot-max`, a
 *    heap snapshot summarised by constructor.
 *  - N = 0: the manager is started with `node --cpu-prof` instead (start-up to ready + 3 s, written at exit), since
 *    the start-up (module loading) happens before the endpoint can answer; its heap snapshot is taken from a second
 *    start, so the snapshot's own cost is not in that profile.
 *
 *   node bench/phases.ts [--foos 0,1000,10000] [--window 5] [--snapshot-max 1000] [--out /tmp/tscm-phases]
 *
 * Prints markdown on stdout; the raw profiles stay in --out (open them in Chrome DevTools).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { freePort } from '../test/cluster/controlplane.ts';
import { processRss } from '../test/helpers/cgroup.ts';
import { distMainScript, ManagerProcess, metricValue, productionNodeFlags } from '../test/helpers/managerprocess.ts';
import { log } from './common.ts';
import { summariseCpu, summariseHeapProfiles, summariseSnapshot, type CpuProfile, type HeapProfileNode, type HeapSnapshot } from './profile-summary.ts';
import { freshFooControlPlane, stopEnv } from './common.ts';

const { values: args } = parseArgs({
  options: {
    foos: { type: 'string', default: '0,1000,10000' },
    window: { type: 'string', default: '5' },
    'snapshot-max': { type: 'string', default: '1000' },
    out: { type: 'string', default: '/tmp/tscm-phases' },
    'no-build': { type: 'boolean', default: false },
  },
});
const sizes = (args.foos ?? '0').split(',').map(Number);
const windowS = Number(args.window);
const snapshotMax = Number(args['snapshot-max']);
const outDir = args.out ?? '/tmp/tscm-phases';
const repo = join(import.meta.dirname, '..');
const MiB = 1024 * 1024;

async function get(url: string, signal?: AbortSignal): Promise<Response> {
  const res = await fetch(url, { ...(signal ? { signal } : {}) });
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${await res.text()}`);
  return res;
}

interface Row { n: number; convergedS: number | undefined; cpuS: number; cpu: string; alloc: string; stats: string; snapshot: string }

async function runN(n: number): Promise<Row> {
  const dir = join(outDir, `n${n}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const env = await freshFooControlPlane(n, { namespaceCount: 10, prefix: 'tscm-phases-' });
  const factory = new SharedInformerFactory({ client: env.rest, namespaces: [] });
  const foos = factory.informerFor<Foo>(fooResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  await factory.waitForCacheSync({ timeoutMs: 120_000 });
  const converged = (): boolean => {
    const all = foos.lister().list();
    return all.length >= n && all.every((f) => f.status?.availableReplicas !== undefined);
  };
  const port = await freePort();
  const base = `http://127.0.0.1:${port}/debug/pprof`;
  const t0 = performance.now();
  let mgr = await ManagerProcess.start({
    script: distMainScript, collectLogs: false, env: { KUBECONFIG: env.cp.kubeconfig },
    nodeFlags: [...productionNodeFlags, ...(n === 0 ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [])],
    args: ['--controllers=foo', '--foo-concurrency=8', `--pprof-bind-address=127.0.0.1:${port}`],
  });
  const row: Row = { n, convergedS: undefined, cpuS: 0, cpu: '', alloc: '', stats: '', snapshot: '' };
  try {
    const cpuProfiles: CpuProfile[] = [];
    const heapProfiles: { head: HeapProfileNode }[] = [];
    let done = false;
    if (n > 0) {
      // Windows start as soon as the endpoint answers (the informers are listing by then).
      for (;;) {
        if (!mgr.running) throw new Error(`manager exited: ${mgr.stderr.join('')}`);
        if (await fetch(`${base}/`).then((r) => r.ok, () => false)) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const loop = async (kind: 'profile' | 'heap'): Promise<void> => {
        let last = false;
        for (let i = 0; !last; i++) {
          last = done; // one more window after convergence
          const res = await get(`${base}/${kind}?seconds=${windowS}${kind === 'heap' ? '&allocated=1' : ''}`);
          const text = await res.text();
          writeFileSync(join(dir, `${kind}-${i}.${kind === 'profile' ? 'cpuprofile' : 'heapprofile'}`), text);
          if (kind === 'profile') cpuProfiles.push(JSON.parse(text) as CpuProfile);
          else heapProfiles.push(JSON.parse(text) as { head: HeapProfileNode });
        }
      };
      const loops = Promise.all([loop('profile'), loop('heap')]);
      while (!converged() && mgr.running) await new Promise((r) => setTimeout(r, 50));
      row.convergedS = (performance.now() - t0) / 1000;
      done = true;
      await loops;
    } else {
      await mgr.waitReady({ timeoutMs: 120_000 });
      row.convergedS = (performance.now() - t0) / 1000;
      await new Promise((r) => setTimeout(r, 3000));
    }
    const stats = (await (await get(`${base}/heapstats`)).json()) as {
      heap: { total_heap_size: number; total_physical_size: number; malloced_memory: number; peak_malloced_memory: number };
      memory: { rss: number; heapUsed: number; external: number; arrayBuffers: number };
      spaces: { space_name: string; space_used_size: number }[];
      code: { code_and_metadata_size: number; bytecode_and_metadata_size: number };
    };
    const m = await mgr.metrics();
    row.cpuS = metricValue(m, 'process_cpu_seconds_total') ?? 0;
    const space = (name: string): string => ((stats.spaces.find((s) => s.space_name === name)?.space_used_size ?? 0) / MiB).toFixed(1);
    // RSS split by the kernel: anonymous (heap, malloc, stacks) vs file-backed (the node binary's pages: clean, shared).
    const rollup = readFileSync(`/proc/${mgr.proc.pid ?? 0}/smaps_rollup`, 'utf8');
    const anon = Number(/^Anonymous:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    row.stats = `RSS ${(stats.memory.rss / MiB).toFixed(0)} MiB (peak ${((processRss(mgr.proc.pid ?? 0)?.peak ?? 0) / MiB).toFixed(0)}; ` +
      `anonymous ${(anon / MiB).toFixed(0)}, file-backed ${((stats.memory.rss - anon) / MiB).toFixed(0)}): ` +
      `V8 heap committed ${(stats.heap.total_physical_size / MiB).toFixed(1)} of which used ${(stats.memory.heapUsed / MiB).toFixed(1)} ` +
      `(old ${space('old_space')}, new ${space('new_space')}, code ${space('code_space')}, ` +
      `large objects ${space('large_object_space')}, trusted ${space('trusted_space')}), external ${(stats.memory.external / MiB).toFixed(1)} ` +
      `(array buffers ${(stats.memory.arrayBuffers / MiB).toFixed(1)}), bytecode+metadata ${(stats.code.bytecode_and_metadata_size / MiB).toFixed(1)}, ` +
      `machine code+metadata ${(stats.code.code_and_metadata_size / MiB).toFixed(1)}, V8 malloced ${(stats.heap.malloced_memory / MiB).toFixed(1)} ` +
      `(peak ${(stats.heap.peak_malloced_memory / MiB).toFixed(1)})`;
    const snapshot = async (): Promise<void> => {
      const text = await (await get(`${base}/heapsnapshot`)).text();
      writeFileSync(join(dir, 'heap.heapsnapshot'), text);
      row.snapshot = summariseSnapshot(JSON.parse(text) as HeapSnapshot, 12).markdown;
    };
    if (n > 0 && n <= snapshotMax) await snapshot();
    await mgr.stop('SIGTERM', 60_000);
    if (n === 0) {
      mgr = await ManagerProcess.start({
        script: distMainScript, collectLogs: false, env: { KUBECONFIG: env.cp.kubeconfig },
        args: ['--controllers=foo', '--foo-concurrency=8', `--pprof-bind-address=127.0.0.1:${port}`],
      });
      await mgr.waitReady({ timeoutMs: 120_000 });
      await new Promise((r) => setTimeout(r, 3000));
      await snapshot();
      await mgr.stop('SIGTERM', 60_000);
    }
    if (n === 0) {
      for (const f of readdirSync(dir).filter((x) => x.startsWith('CPU.') && x.endsWith('.cpuprofile'))) {
        cpuProfiles.push(JSON.parse(readFileSync(join(dir, f), 'utf8')) as CpuProfile);
      }
    }
    row.cpu = summariseCpu(cpuProfiles, 12).markdown;
    if (heapProfiles.length) row.alloc = summariseHeapProfiles(heapProfiles, 8).markdown;
    return row;
  } finally {
    if (mgr.running) await mgr.stop('SIGTERM', 60_000);
    ac.abort();
    await informers;
    await stopEnv(env);
  }
}

async function main(): Promise<void> {
  if (!args['no-build']) execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  const out: string[] = [];
  for (const n of sizes) {
    log(`N=${n}`);
    const r = await runN(n);
    const section = [
      `### N = ${n}: ${n === 0 ? 'start → ready' : 'start → converged'} ${r.convergedS?.toFixed(1) ?? '–'} s, manager CPU ${r.cpuS.toFixed(2)} s ` +
        `(${n === 0 ? 'node --cpu-prof, whole life' : `${windowS} s windows of /debug/pprof/profile`})`,
      '',
      r.cpu,
      '',
      ...(r.alloc ? ['Allocations (`/debug/pprof/heap?allocated=1` windows):', '', r.alloc, ''] : []),
      `At ${n === 0 ? 'ready + 3 s' : 'convergence'} (\`/debug/pprof/heapstats\`): ${r.stats}.`,
      '',
      ...(r.snapshot ? [r.snapshot, ''] : []),
    ].join('\n');
    log(section);
    out.push(section);
  }
  process.stdout.write(`${out.join('\n')}\n(Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}; raw profiles in ${outDir})\n`);
}

await main();
