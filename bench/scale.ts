/**
 * Scale benchmark (issue 10): N Foos already exist when the manager starts — the case of a restart, an upgrade or a
 * new leader in a real cluster. One FRESH minimal control plane (etcd + kube-apiserver) per row, so rows do not
 * share etcd history or API-server caches:
 *
 *  - raw anchor: the same writes the Foo controller makes — POST Deployment, PATCH Foo status, POST Event per Foo —
 *    with 16 requests in flight and no cache, timed from the first to the last write;
 *  - manager: the real manager process (compiled dist/, the image's Node flags, `--controllers=foo
 *    --foo-concurrency=8`, all namespaces, default log level with stdout discarded): spawn → /readyz 200 → every Foo's
 *    status written (the controller writes it after the Deployment exists); RSS sampled from /proc/<pid>/status every
 *    50 ms (peak = VmHWM), heap and external memory from its /metrics at convergence, settled RSS 5 s later with 2 N
 *    cached objects; then SIGTERM, a restart → /readyz 200, RSS 3 s after ready, and the writes the restart made
 *    (must be 0: a converged cluster needs none);
 *  - manager in a memory cgroup of `--cgroup-mib` (default 256, what config/manager ships): same as above; reports
 *    the cgroup's max usage and OOM kills.
 *
 *   node bench/scale.ts [--foos 1000,10000] [--cgroup-mib 256] [--workers 8] [--namespaces 10]
 *
 * Foos are spread over `--namespaces` namespaces. Convergence is observed through a watch in this process.
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { MemoryCgroup, processRss } from '../test/helpers/cgroup.ts';
import { distMainScript, ManagerProcess, metricValue } from '../test/helpers/managerprocess.ts';
import { freshFooControlPlane, log, rawFooWrites, RAW_CLIENTS as clients, stopEnv } from './common.ts';

const { values: args } = parseArgs({
  args: import.meta.main ? process.argv.slice(2) : [], // imported (not run) by another bench: no flags of its own
  options: {
    foos: { type: 'string', default: '1000,10000' },
    'cgroup-mib': { type: 'string', default: '256' },
    workers: { type: 'string', default: '8' },
    namespaces: { type: 'string', default: '10' },
    'timeout-seconds': { type: 'string', default: '900' },
  },
});
const sizes = (args.foos ?? '1000').split(',').map(Number);
const cgroupMiB = Number(args['cgroup-mib']);
const workers = Number(args.workers);
const namespaceCount = Number(args.namespaces);
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const MiB = 1024 * 1024;
const repo = join(import.meta.dirname, '..');

interface ManagerRow {
  readyMs: number | undefined;
  convergedMs: number | undefined;
  peakRss: number;
  heapUsed: number;
  external: number;
  settledRss: number;
  restartReadyMs: number | undefined;
  restartRss: number;
  restartWrites: number;
  killed: string | undefined;
  cgroupMax: number | undefined;
  cpuSeconds: number;
}

function writesIn(metrics: string): number {
  let n = 0;
  for (const line of metrics.split('\n')) {
    if (line.startsWith('rest_client_requests_total{') && !/method="GET"/.test(line)) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

async function managerRun(n: number, limitMiB: number | undefined): Promise<ManagerRow> {
  const env = await freshFooControlPlane(n, { namespaceCount, prefix: 'tscm-scale-' });
  const cgroup = limitMiB ? MemoryCgroup.create(`tscm-scale-${process.pid}`, limitMiB * MiB) : undefined;
  const factory = new SharedInformerFactory({ client: env.rest, namespaces: [] });
  const foos = factory.informerFor<Foo>(fooResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  await factory.waitForCacheSync({ timeoutMs: 120_000 });
  const converged = (): boolean => {
    const all = foos.lister().list();
    return all.length >= n && all.every((f) => f.status?.availableReplicas !== undefined);
  };
  const start = (): Promise<ManagerProcess> => ManagerProcess.start({
    script: distMainScript, collectLogs: false, ...(cgroup ? { cgroup } : {}),
    args: ['--controllers=foo', `--foo-concurrency=${workers}`], env: { KUBECONFIG: env.cp.kubeconfig },
  });
  const row: ManagerRow = {
    readyMs: undefined, convergedMs: undefined, peakRss: 0, heapUsed: 0, external: 0, settledRss: 0,
    restartReadyMs: undefined, restartRss: 0, restartWrites: 0, killed: undefined, cgroupMax: undefined, cpuSeconds: 0,
  };
  let mgr: ManagerProcess | undefined;
  try {
    const t0 = performance.now();
    mgr = await start();
    const pid = mgr.proc.pid ?? 0;
    const deadline = t0 + timeoutMs;
    const died = (): boolean => !mgr?.running;
    while (performance.now() < deadline && !died()) {
      if (row.readyMs === undefined && (await mgr.probe('/readyz')).status === 200) row.readyMs = performance.now() - t0;
      if (row.readyMs !== undefined && converged()) {
        row.convergedMs = performance.now() - t0;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (died()) {
      const { signal, code } = await mgr.exited;
      row.killed = `${signal ?? `exit ${code}`} after ${foos.lister().list().filter((f) => f.status?.availableReplicas !== undefined).length} Foos`;
      return row;
    }
    row.peakRss = processRss(pid)?.peak ?? 0;
    const m = await mgr.metrics();
    row.heapUsed = metricValue(m, 'nodejs_heap_size_used_bytes') ?? 0;
    row.external = metricValue(m, 'nodejs_external_memory_bytes') ?? 0;
    row.cpuSeconds = metricValue(m, 'process_cpu_seconds_total') ?? 0;
    await new Promise((r) => setTimeout(r, 5000));
    row.settledRss = processRss(pid)?.rss ?? 0;
    await mgr.stop('SIGTERM', 60_000);

    const t1 = performance.now();
    mgr = await start();
    await mgr.waitReady({ timeoutMs: 120_000 });
    row.restartReadyMs = performance.now() - t1;
    await new Promise((r) => setTimeout(r, 3000));
    row.restartRss = processRss(mgr.proc.pid ?? 0)?.rss ?? 0;
    row.restartWrites = writesIn(await mgr.metrics());
    return row;
  } finally {
    if (mgr?.running) await mgr.stop('SIGTERM', 60_000);
    if (cgroup) {
      row.cgroupMax = cgroup.maxUsageBytes();
      if (cgroup.oomKills() > 0) row.killed ??= `OOM-killed ${cgroup.oomKills()}×`;
      cgroup.remove();
    }
    ac.abort();
    await informers;
    await stopEnv(env);
  }
}

const sec = (ms: number | undefined): string => (ms === undefined ? '–' : (ms / 1000).toFixed(2));
const mib = (b: number | undefined): string => (b ? (b / MiB).toFixed(0) : '–');

async function main(): Promise<void> {
  execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  const lines = [
    '| Foos | run | start → ready s | start → converged s | ÷ raw | peak RSS MiB | heap / external MiB | settled RSS MiB | restart → ready s | RSS after restart MiB | writes on restart | cgroup max MiB | killed |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const n of sizes) {
    log(`N=${n}: raw anchor`);
    const rawEnv = await freshFooControlPlane(n, { namespaceCount, prefix: 'tscm-scale-' });
    const raw = await rawFooWrites(rawEnv).finally(() => stopEnv(rawEnv)).then((r) => r.ms);
    lines.push(`| ${n} | raw writes (${clients} in flight) | – | ${sec(raw)} | 1.00 | – | – | – | – | – | – | – | – |`);
    for (const limit of [undefined, cgroupMiB]) {
      log(`N=${n}: manager${limit ? ` in a ${limit} MiB cgroup` : ''}`);
      const r = await managerRun(n, limit);
      lines.push(`| ${n} | manager${limit ? `, ${limit} MiB cgroup` : ''} | ${sec(r.readyMs)} | ${sec(r.convergedMs)} | ` +
        `${r.convergedMs === undefined ? '–' : (r.convergedMs / raw).toFixed(2)} | ${mib(r.peakRss)} | ${mib(r.heapUsed)} / ${mib(r.external)} | ` +
        `${mib(r.settledRss)} | ${sec(r.restartReadyMs)} | ${mib(r.restartRss)} | ${r.restartReadyMs === undefined ? '–' : r.restartWrites} | ` +
        `${mib(r.cgroupMax)} | ${r.killed ?? 'no'} |`);
      log(`  ${lines[lines.length - 1]} (manager CPU ${r.cpuSeconds.toFixed(1)} s)`);
    }
  }
  process.stdout.write(`\n${lines.join('\n')}\n\n(Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}; ` +
    `manager: dist/, ${workers} workers, all namespaces; ÷ raw = convergence time / raw-writes time of the same N)\n`);
}

if (import.meta.main) await main();
