/**
 * Fixed-cost benchmark (issue 30): what the manager costs before it has any work — idle memory and spawn → ready.
 *
 * One private minimal control plane (etcd + kube-apiserver) with the CRDs installed and `--foos` Foos (default 0).
 * Each run spawns a FRESH manager process the way the image runs it (the bundle dist/bundle/main.js, config/manager:
 * `--leader-elect --metrics-secure`, every controller (`--controllers` default `*`), all namespaces, POD_NAMESPACE set, the
 * Dockerfile's Node flags unless a variant says otherwise, stdout discarded) and measures:
 *
 *  - spawn → ready: from spawn to the first /readyz 200 (polled every 10 ms);
 *  - after `--idle-seconds` (default 10) more: VmRSS, its anonymous and file-backed parts (RssAnon / RssFile of
 *    /proc/<pid>/status: file-backed = pages of the node binary and shared libraries), VmHWM, V8's used heap (scraped
 *    from the secure /metrics with a ServiceAccount token allowed to read it), and the process's CPU time at ready
 *    and during the idle period (utime + stime of /proc/<pid>/stat);
 *  - then SIGTERM (the exit code must be 0).
 *
 * The first spawn on the fresh control plane is a warm-up (reported on stderr, not in the table: with `--foos` it
 * also converges the Foos). Every measured spawn is therefore a *restart*: the cluster is warm, the Lease was
 * released by the previous process. Variants alternate ABBA (round r runs them in order, round r+1 in reverse).
 *
 *   node bench/idle.ts [--rounds 6] [--idle-seconds 10] [--foos 0] [--no-build]
 *        [--variant 'NAME|DIST|NODE FLAGS|ENV' ...]
 *
 * A variant: NAME, DIST = what to run: a `.js` entry point, or a compiled tree whose `cmd/manager/main.js` is run
 * (default `dist/bundle/main.js`, as the image; `dist` = the unbundled tsc output; another branch's build placed
 * beside node_modules), NODE FLAGS = space-separated (default: the Dockerfile's), ENV = `K=V,K=V` added to the child's
 * environment. Without `--variant` one variant, `current|dist|<image flags>|`, is measured.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { cpus, loadavg, tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { parseArgs } from 'node:util';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { ManagerProcess, metricValue, productionNodeFlags } from '../test/helpers/managerprocess.ts';
import { log } from './common.ts';
import { BenchResults, spread } from './results.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    'idle-seconds': { type: 'string', default: '10' },
    foos: { type: 'string', default: '0' },
    variant: { type: 'string', multiple: true },
    'no-build': { type: 'boolean', default: false },
  },
});
const repo = join(import.meta.dirname, '..');
const rounds = Number(args.rounds);
const idleMs = Number(args['idle-seconds']) * 1000;
const fooCount = Number(args.foos);
const MiB = 1024 * 1024;
const ns = 'default';

interface Variant { name: string; script: string; nodeFlags: string[]; env: Record<string, string> }

function parseVariant(spec: string): Variant {
  const [name = '', dist = '', flags = '', env = ''] = spec.split('|');
  const target = dist || 'dist/bundle/main.js';
  const path = isAbsolute(target) ? target : join(repo, target);
  return {
    name: name || 'current',
    script: path.endsWith('.js') ? path : join(path, 'cmd', 'manager', 'main.js'),
    nodeFlags: flags.trim() ? flags.trim().split(/\s+/) : productionNodeFlags,
    env: Object.fromEntries(env.split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
  };
}
const variants = (args.variant?.length ? args.variant : ['current|||']).map(parseVariant);

interface Sample {
  readyMs: number; rss: number; anon: number; file: number; hwm: number; heap: number; cpuReadyMs: number; cpuIdleMs: number;
}

function procStatus(pid: number): { rss: number; anon: number; file: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), hwm: kb('VmHWM') };
}

/** utime + stime of a process in ms (clock ticks are 10 ms on Linux x86-64). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** GET /metrics over HTTPS with a bearer token; the serving certificate is the manager's self-signed one. */
function scrapeSecure(port: number, token: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1', port, path: '/metrics', rejectUnauthorized: false, headers: { authorization: `Bearer ${token}` },
      timeout: 5000,
    }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => { body += c; }).on('end', () => {
        if (res.statusCode === 200) resolve(body);
        else reject(new Error(`/metrics: HTTP ${res.statusCode} ${body}`));
      });
    });
    req.on('error', reject).on('timeout', () => req.destroy(new Error('/metrics: timeout')));
    req.end();
  });
}

async function startManager(cp: ControlPlane, v: Variant): Promise<ManagerProcess> {
  return ManagerProcess.start({
    script: v.script, nodeFlags: v.nodeFlags, collectLogs: false,
    // As config/manager runs it (bind addresses are loopback ports picked by ManagerProcess).
    args: ['--leader-elect', '--metrics-secure'],
    env: { KUBECONFIG: cp.kubeconfig, POD_NAMESPACE: ns, WATCH_NAMESPACE: '', ...v.env },
  });
}

async function measure(cp: ControlPlane, v: Variant, token: string): Promise<Sample> {
  const t0 = performance.now();
  const mgr = await startManager(cp, v);
  const pid = mgr.proc.pid ?? 0;
  try {
    let readyMs: number | undefined;
    while (readyMs === undefined) {
      if (!mgr.running) throw new Error(`manager exited before ready: ${mgr.stderr.join('')}`);
      if ((await mgr.probe('/readyz')).status === 200) readyMs = performance.now() - t0;
      else await new Promise((r) => setTimeout(r, 10));
      if (performance.now() - t0 > 60_000) throw new Error('manager not ready within 60 s');
    }
    const cpuReady = cpuMs(pid);
    await new Promise((r) => setTimeout(r, idleMs));
    const mem = procStatus(pid);
    const cpuIdle = cpuMs(pid) - cpuReady;
    const heap = metricValue(await scrapeSecure(mgr.metricsPort ?? 0, token), 'nodejs_heap_size_used_bytes') ?? NaN;
    return { readyMs, ...mem, heap, cpuReadyMs: cpuReady, cpuIdleMs: cpuIdle };
  } finally {
    const code = await mgr.stop('SIGTERM', 60_000);
    if (code !== 0) log(`WARNING: ${v.name}: exit code ${code} ${mgr.stderr.join('').slice(-500)}`);
  }
}

function populate(cp: ControlPlane): void {
  const kubectl = join(cp.k8sBinDir, 'kubectl');
  const kc = ['--kubeconfig', cp.kubeconfig];
  execFileSync(kubectl, [...kc, 'apply', '--server-side', '-k', 'config/crd'], { cwd: repo, stdio: 'ignore' });
  execFileSync(kubectl, [...kc, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io',
    'crd/networks.samplecrd.k8s.io'], { stdio: 'ignore' });
  if (fooCount > 0) {
    const docs = Array.from({ length: fooCount }, (_, i) => JSON.stringify({
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: `foo-${i}`, namespace: ns },
      spec: { deploymentName: `foo-${i}`, replicas: 1 },
    }));
    execFileSync(kubectl, [...kc, 'create', '-f', '-'], { input: `{"apiVersion":"v1","kind":"List","items":[${docs.join(',')}]}`, stdio: ['pipe', 'ignore', 'inherit'] });
    log(`${fooCount} Foos created`);
  }
  // The scraper: a ServiceAccount allowed to GET /metrics (the secure metrics server checks TokenReview + SAR).
  const role = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'idle-bench-metrics' }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] };
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'idle-bench-metrics' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'idle-bench-metrics' },
    subjects: [{ kind: 'ServiceAccount', name: 'idle-bench', namespace: ns }],
  };
  execFileSync(kubectl, [...kc, 'apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [role, binding] }), stdio: ['pipe', 'ignore', 'inherit'] });
}

/** Waits until every Foo has a status (the warm-up manager converged them), polling the API every 500 ms. */
async function waitConverged(cp: ControlPlane): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    const res = await cp.request('GET', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`);
    const items = (JSON.parse(res.body) as { items: { status?: { availableReplicas?: number } }[] }).items;
    if (items.filter((f) => f.status?.availableReplicas !== undefined).length >= fooCount) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('Foos did not converge within 300 s');
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
};
const cell = (xs: number[], scale: number, digits: number): string =>
  `${(median(xs) / scale).toFixed(digits)} (${(Math.min(...xs) / scale).toFixed(digits)}–${(Math.max(...xs) / scale).toFixed(digits)})`;

async function main(): Promise<void> {
  if (!args['no-build']) {
    execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
    execFileSync(process.execPath, [join(repo, 'hack', 'bundle.ts')], { cwd: repo, stdio: 'inherit' });
  }
  const res = new BenchResults('idle', {
    name: variants.length > 1 ? (variants[0]?.name ?? null) : null,
    description: variants.length > 1
      ? `the variants measured in the same rounds, ABBA (${variants.map((v) => v.name).join(' vs ')}); the first is the anchor`
      : 'none: one variant, the fixed cost in absolute terms (bench/vs-cr.ts measures the idle manager against controller-runtime)',
  });
  const dir = mkdtempSync(join(tmpdir(), 'tscm-idle-'));
  const cp = await ControlPlane.start({ mode: 'minimal', dir, log: () => {} });
  const samples = new Map<string, Sample[]>(variants.map((v) => [v.name, []]));
  const loads: number[] = [];
  try {
    populate(cp);
    const token = await cp.mintServiceAccountToken(ns, 'idle-bench', 3600);
    for (const v of variants) {
      // Warm-up: the first spawn on this control plane (and the one that converges the Foos).
      const mgr = await startManager(cp, v);
      await mgr.waitReady({ timeoutMs: 120_000 });
      if (fooCount > 0) await waitConverged(cp);
      await mgr.stop('SIGTERM', 60_000);
      log(`warm-up ${v.name}: done`);
    }
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        const s = await measure(cp, v, token);
        samples.get(v.name)?.push(s);
        loads.push(loadavg()[0] ?? NaN);
        res.sampleLoad();
        log(`round ${r + 1} ${v.name}: ready ${s.readyMs.toFixed(0)} ms, RSS ${(s.rss / MiB).toFixed(1)} MiB ` +
          `(anon ${(s.anon / MiB).toFixed(1)}, file ${(s.file / MiB).toFixed(1)}), heap ${(s.heap / MiB).toFixed(1)} MiB, ` +
          `CPU to ready ${s.cpuReadyMs} ms, idle CPU ${s.cpuIdleMs} ms/${idleMs / 1000} s`);
      }
    }
  } finally {
    await cp.stop();
  }
  const lines = [
    `| variant | idle RSS MiB | anon / file MiB | heap used MiB | spawn → ready ms | CPU to ready ms | idle CPU ms / ${idleMs / 1000} s |`,
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  res.set('foos', { value: fooCount, unit: 'count' });
  res.set('idleSeconds', { value: idleMs / 1000, unit: 's' });
  for (const v of variants) {
    const xs = samples.get(v.name) ?? [];
    const pick = (f: (s: Sample) => number): number[] => xs.map(f);
    res.set(v.name, {
      rss: spread(pick((s) => s.rss / MiB), 'MiB'), anon: spread(pick((s) => s.anon / MiB), 'MiB'), file: spread(pick((s) => s.file / MiB), 'MiB'),
      heap: spread(pick((s) => s.heap / MiB), 'MiB'), ready: spread(pick((s) => s.readyMs), 'ms'),
      cpuToReady: spread(pick((s) => s.cpuReadyMs), 'CPU-ms'), idleCpu: spread(pick((s) => s.cpuIdleMs), 'CPU-ms'),
      nodeFlags: v.nodeFlags.join(' '),
    });
    lines.push(`| ${v.name} | ${cell(pick((s) => s.rss), MiB, 1)} | ${(median(pick((s) => s.anon)) / MiB).toFixed(1)} / ${(median(pick((s) => s.file)) / MiB).toFixed(1)} | ` +
      `${cell(pick((s) => s.heap), MiB, 1)} | ${cell(pick((s) => s.readyMs), 1, 0)} | ${cell(pick((s) => s.cpuReadyMs), 1, 0)} | ${cell(pick((s) => s.cpuIdleMs), 1, 0)} |`);
  }
  res.runs = [...samples.entries()].map(([variant, xs]) => ({ variant, samples: xs }));
  res.write();
  process.stdout.write(`\n${lines.join('\n')}\n\n(${new Date().toISOString().slice(0, 10)}, Node ${process.version}, ${cpus().length} CPUs, ` +
    `${rounds} ABBA rounds × ${variants.length} variants, N = ${fooCount} Foos, idle ${idleMs / 1000} s; load average during runs ` +
    `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}; variants: ${variants.map((v) => `${v.name} = ${v.nodeFlags.join(' ')}` +
      `${Object.keys(v.env).length ? ` ${Object.entries(v.env).map(([k, val]) => `${k}=${val}`).join(' ')}` : ''}`).join('; ')})\n`);
}

await main();
