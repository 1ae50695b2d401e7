/**
 * Scale benchmark (issue 10): N Foos already exist when the manager starts — the case of a restart, an upgrade or a
 * new leader in a real cluster. One FRESH minimal control plane (etcd + kube-apiserver) per row, so rows do not
 * share etcd history or API-server caches:
 *
 *  - raw anchor: the same writes the Foo controller makes — POST Deployment, PATCH Foo status, POST Event per Foo —
 *    with 16 requests in flight and no cache, timed from the first to the last write;
 *  - manager: the real manager process (compiled dist/, the image's Node flags, `--controllers` as shipped (`*`: Foo and
 *    Deployment; Network off without Neutron), `--foo-concurrency=8`, the Network webhooks served (`--webhook-cert-path`,
 *    a certificate for 127.0.0.1, as config/default serves them; `--no-webhooks` leaves them off), all namespaces,
 *    default log level with stdout discarded): spawn → /readyz 200 → every Foo's
 *    status written (the controller writes it after the Deployment exists); RSS sampled from /proc/<pid>/status every
 *    50 ms (peak = VmHWM), heap and external memory from its /metrics at convergence, settled RSS 5 s later with 2 N
 *    cached objects; then SIGTERM, a restart → /readyz 200, RSS 3 s after ready, and the writes the restart made
 *    (must be 0: a converged cluster needs none);
 *  - manager in a memory cgroup of `--cgroup-mib` (default 256, what config/manager ships): same as above; reports
 *    the cgroup's max usage and OOM kills.
 *
 *   node bench/scale.ts [--foos 1000,10000] [--cgroup-mib 256] [--workers 8] [--namespaces 10] [--controllers '*'] [--no-webhooks]
 *
 * Foos are spread over `--namespaces` namespaces. Convergence is observed through a watch in this process.
 * Writes bench/results/scale/… (bench/results.ts); the anchor is the raw writer of the same N in the same run. The
 * sizing rule of docs/sizing.md (128 MiB + 6 MiB per 1 000 cached objects) is checked against the cgroup's max usage:
 * `n<N>.rule` holds what the rule asks for 2 N cached objects and the headroom left.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { MemoryCgroup, processRss } from '../test/helpers/cgroup.ts';
import { distMainScript, ManagerProcess, metricValue } from '../test/helpers/managerprocess.ts';
import { createWebhookServing } from '../pkg/testing/webhooks.ts';
import { freePort } from '../test/cluster/controlplane.ts';
import { freshFooControlPlane, log, rawFooWrites, RAW_CLIENTS as clients, stopEnv } from './common.ts';
import { BenchResults, ratio, val } from './results.ts';

const { values: args } = parseArgs({
  args: import.meta.main ? process.argv.slice(2) : [], // imported (not run) by another bench: no flags of its own
  options: {
    foos: { type: 'string', default: '1000,10000' },
    'cgroup-mib': { type: 'string', default: '256' },
    workers: { type: 'string', default: '8' },
    namespaces: { type: 'string', default: '10' },
    'timeout-seconds': { type: 'string', default: '900' },
    controllers: { type: 'string', default: '*' },
    'no-webhooks': { type: 'boolean', default: false },
  },
});
const sizes = (args.foos ?? '1000').split(',').map(Number);
const cgroupMiB = Number(args['cgroup-mib']);
const workers = Number(args.workers);
const namespaceCount = Number(args.namespaces);
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const controllers = args.controllers ?? '*';
const webhooks = !args['no-webhooks'];
/** docs/sizing.md's rule: memory limit ≥ RULE_BASE_MIB + RULE_PER_1000_MIB per 1 000 cached objects. */
const RULE_BASE_MIB = 128;
const RULE_PER_1000_MIB = 6;
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
  // The Network webhooks as config/default serves them (validation, v1 ↔ v2 conversion), on a loopback port.
  const certDir = mkdtempSync(join(tmpdir(), 'tscm-scale-webhook-'));
  const webhookArgs = webhooks
    ? [`--webhook-cert-path=${certDir}`, `--webhook-bind-address=${(await createWebhookServing(certDir, '127.0.0.1', await freePort())).bindAddress}`]
    : [];
  const start = (): Promise<ManagerProcess> => ManagerProcess.start({
    script: distMainScript, collectLogs: false, ...(cgroup ? { cgroup } : {}),
    args: [`--controllers=${controllers}`, `--foo-concurrency=${workers}`, ...webhookArgs],
    env: { KUBECONFIG: env.cp.kubeconfig }, // no Neutron configuration: the Network controller stays off, as config/default without [NEUTRON]
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
      log(`manager exited: ${mgr.stderr.join('').slice(-500)}`);
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
    rmSync(certDir, { recursive: true, force: true });
  }
}

const sec = (ms: number | undefined): string => (ms === undefined ? '–' : (ms / 1000).toFixed(2));
const mib = (b: number | undefined): string => (b ? (b / MiB).toFixed(0) : '–');

async function main(): Promise<void> {
  execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  const res = new BenchResults('scale', {
    name: 'raw writes',
    description: `the Foo controller's writes (POST Deployment, PATCH Foo status, POST Event per Foo) made directly with ${clients} in flight, ` +
      'on a fresh control plane with the same N Foos, in the same run: the API server\'s own pace (÷ raw)',
  });
  res.set('config.controllers', controllers);
  res.set('config.webhooks', webhooks);
  res.set('config.workers', val(workers, 'count'));
  const lines = [
    '| Foos | run | start → ready s | start → converged s | ÷ raw | peak RSS MiB | heap / external MiB | settled RSS MiB | restart → ready s | RSS after restart MiB | writes on restart | cgroup max MiB | killed |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const n of sizes) {
    log(`N=${n}: raw anchor`);
    const rawEnv = await freshFooControlPlane(n, { namespaceCount, prefix: 'tscm-scale-' });
    const raw = await rawFooWrites(rawEnv).finally(() => stopEnv(rawEnv)).then((r) => r.ms);
    res.sampleLoad();
    res.set(`n${n}.raw.converge`, val(raw / 1000, 's'));
    res.set(`n${n}.cachedObjects`, val(2 * n, 'count'));
    lines.push(`| ${n} | raw writes (${clients} in flight) | – | ${sec(raw)} | 1.00 | – | – | – | – | – | – | – | – |`);
    for (const limit of [undefined, cgroupMiB]) {
      log(`N=${n}: manager${limit ? ` in a ${limit} MiB cgroup` : ''}`);
      const r = await managerRun(n, limit);
      res.sampleLoad();
      recordRow(res, `n${n}.${limit ? `cgroup${limit}` : 'unlimited'}`, r, raw);
      if (limit && r.cgroupMax) {
        const asked = RULE_BASE_MIB + (RULE_PER_1000_MIB * 2 * n) / 1000;
        res.set(`n${n}.rule`, { limit: val(asked, 'MiB'), headroom: val(asked - r.cgroupMax / MiB, 'MiB'), usedShare: val((100 * r.cgroupMax) / MiB / asked, '%') });
      }
      lines.push(`| ${n} | manager${limit ? `, ${limit} MiB cgroup` : ''} | ${sec(r.readyMs)} | ${sec(r.convergedMs)} | ` +
        `${r.convergedMs === undefined ? '–' : (r.convergedMs / raw).toFixed(2)} | ${mib(r.peakRss)} | ${mib(r.heapUsed)} / ${mib(r.external)} | ` +
        `${mib(r.settledRss)} | ${sec(r.restartReadyMs)} | ${mib(r.restartRss)} | ${r.restartReadyMs === undefined ? '–' : r.restartWrites} | ` +
        `${mib(r.cgroupMax)} | ${r.killed ?? 'no'} |`);
      log(`  ${lines[lines.length - 1]} (manager CPU ${r.cpuSeconds.toFixed(1)} s)`);
    }
  }
  res.write();
  process.stdout.write(`\n${lines.join('\n')}\n\n(Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}; ` +
    `manager: dist/, --controllers=${controllers}, ${workers} Foo workers, webhooks ${webhooks ? 'on' : 'off'}, all namespaces; ÷ raw = convergence time / raw-writes time of the same N)\n`);
}

/** One manager row into the results file (units: s, MiB, CPU-s, count). */
function recordRow(res: BenchResults, group: string, r: ManagerRow, rawMs: number): void {
  const set = (k: string, v: number | undefined, unit: string, scale = 1): void => {
    if (v !== undefined && Number.isFinite(v) && v > 0) res.set(`${group}.${k}`, val(v / scale, unit));
  };
  set('ready', r.readyMs, 's', 1000);
  set('converge', r.convergedMs, 's', 1000);
  if (r.convergedMs !== undefined) res.set(`${group}.convergeOverRaw`, ratio(r.convergedMs, rawMs));
  set('peakRss', r.peakRss, 'MiB', MiB);
  set('heapUsed', r.heapUsed, 'MiB', MiB);
  set('external', r.external, 'MiB', MiB);
  set('settledRss', r.settledRss, 'MiB', MiB);
  set('restart', r.restartReadyMs, 's', 1000);
  set('restartRss', r.restartRss, 'MiB', MiB);
  set('cgroupMax', r.cgroupMax, 'MiB', MiB);
  set('cpu', r.cpuSeconds, 'CPU-s');
  if (r.restartReadyMs !== undefined) res.set(`${group}.restartWrites`, val(r.restartWrites, 'count'));
  res.set(`${group}.killed`, r.killed ?? 'no');
}

if (import.meta.main) await main();
