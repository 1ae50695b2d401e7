/**
 * Priority-queue benchmark (issue 17): the manager restarts over a converged backlog, and one new object is created
 * the moment its `/readyz` turns 200. Measured with the priority queue on (`--priority-queue=true`, the default) and
 * off (`--priority-queue=false`: plain FIFO) in the same run, on the same objects: one warm-up restart (not counted),
 * then ABBA order (on, off, off, on, …) so drift of the machine's load hits both alike:
 *
 *  - new object: ready → the new Foo's Deployment exists and its status is written (GET polled every 10 ms), or
 *    ready → the new Network's Neutron network exists (neutron-server's request log read every 10 ms, then one query
 *    by name; polling Neutron's API would load the CPU the backlog drain is bound by);
 *  - Neutron rows: neutron-server's CPU seconds and the manager's requests during the drain (NeutronProbe);
 *  - drain: ready → the backlog is worked off: `workqueue_depth` 0 (every priority), no active worker, and at least
 *    as many reconciles as objects cached at the restart (the manager's /metrics polled every 20 ms);
 *  - anchor: once drained, one more object of the same kind is created on the now idle manager: create → the same
 *    effect. That is what the new object costs by itself on this machine at this moment;
 *  - writes: the manager's non-GET API requests (`rest_client_requests_total`, the new objects' included), and the
 *    backlog objects changed by the restart — Foos, Deployments, Networks, their Events (count) and their Neutron
 *    networks and subnets (revision_number), compared before and after. A converged restart changes none.
 *
 * Rows:
 *  (a) `--foos` Foos (default 10 000) in one namespace, converged once by the manager (`--controllers=foo`), then
 *      restarted with `--foo-concurrency` workers (default 8, as bench/scale.ts);
 *  (b)/(c) `--networks N:W,…` (default 90:1,1000:4): N Networks converged once by the manager against a private real
 *      neutron-server (noauth; hack/neutron/up.sh; the network and subnet quotas lifted, Neutron's default is 100
 *      a project), then restarted with `--network-concurrency W`.
 * One private minimal control plane (etcd + kube-apiserver) serves every row; each row has its own namespace and the
 * manager watches only it (WATCH_NAMESPACE). The manager runs from dist/ (built first) with the image's Node flags,
 * as its own process, log level warn.
 *
 *   node bench/priority.ts [--foos 10000] [--foo-concurrency 8] [--networks 90:1,1000:4] [--repeats 2] [--quick]
 *                          [--debug-logs DIR]   (restarts at log level debug, their logs kept in DIR)
 *                          [--warmup 1] [--modes on,off,…]   (warm-up restarts; an explicit order instead of ABBA)
 *
 * --quick: 1 000 Foos, 30:1 and 100:4 Networks, one restart per mode. Progress (and each restart's numbers) goes to
 * stderr, the table to stdout. Converging (not measured) uses at least 8 Network workers.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { deploymentResource } from '../pkg/controllers/deployment/types.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { networkResource } from '../pkg/controllers/network/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { collectionPath, objectPath } from '../pkg/apimachinery/paths.ts';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { distMainScript, ManagerProcess } from '../test/helpers/managerprocess.ts';
import { startNeutron, type NeutronInstance } from '../test/helpers/neutron.ts';
import { log, runAll } from './common.ts';
import { BenchResults, ratio, spread, val } from './results.ts';

const { values: args } = parseArgs({
  options: {
    foos: { type: 'string' },
    'foo-concurrency': { type: 'string', default: '8' },
    networks: { type: 'string' },
    repeats: { type: 'string' },
    quick: { type: 'boolean', default: false },
    'timeout-seconds': { type: 'string', default: '1800' },
    'debug-logs': { type: 'string' },
    modes: { type: 'string' },
    warmup: { type: 'string' },
  },
});
/** --debug-logs DIR: restarts run at log level debug and their log lines go to DIR/<namespace>-<new object>.jsonl. */
const debugLogs = args['debug-logs'];
const quick = args.quick ?? false;
const fooCount = Number(args.foos ?? (quick ? 1000 : 10_000));
const fooWorkers = Number(args['foo-concurrency']);
const networkRows = (args.networks ?? (quick ? '30:1,100:4' : '90:1,1000:4')).split(',').filter(Boolean).map((s) => {
  const [n, w] = s.split(':').map(Number);
  return { n: n ?? 0, workers: w ?? 1 };
});
const repeats = Number(args.repeats ?? (quick ? 1 : 2));
/**
 * --warmup N (default 1): restarts per row before the measured ones, shown in the table but left out of the medians.
 * The first restart after converging drains slowest whatever the mode — Neutron's CPU per request falls over the
 * first restarts (300 Networks, 4 workers, off/on/on/off/off/on: 32.4, 28.8, 24.5, 29.1, 24.9, 23.9 s, each tracking
 * neutron-server's CPU seconds within 1 %) — so without it the ABBA order's first mode pays for the warm-up.
 */
const warmups = Number(args.warmup ?? 1);
if (!Number.isInteger(warmups) || warmups < 0) throw new Error(`--warmup: want a whole number ≥ 0, not "${args.warmup}"`);
/** --modes on,off,…: the restarts of every row in this order instead of ABBA (for A/A and order experiments). */
const modeList = args.modes?.split(',').map((m) => {
  if (m !== 'on' && m !== 'off') throw new Error(`--modes: "${m}" is neither on nor off`);
  return m;
});
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const repo = join(import.meta.dirname, '..');
const clients = 32;
/** Goals of issue 17. */
const goal = { networkMs: 2000, fooMs: 1000, drainRatio: 1.1 };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Sum of every sample of `name` whose labels include `labels`. */
function sumMetric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const labelText = rest[0] === '{' ? rest.slice(1, rest.indexOf('}')) : '';
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

function writesIn(metrics: string): number {
  let n = 0;
  for (const line of metrics.split('\n')) {
    if (line.startsWith('rest_client_requests_total{') && !/method="GET"/.test(line)) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

/** Backlog state from the manager's /metrics: drained once nothing is queued or running and `backlog` reconciles ran. */
function drained(metrics: string, controller: string, backlog: number): boolean {
  return sumMetric(metrics, 'workqueue_depth', { controller }) === 0 &&
    sumMetric(metrics, 'controller_runtime_active_workers', { controller }) === 0 &&
    sumMetric(metrics, 'controller_runtime_reconcile_total', { controller }) >= backlog;
}

/**
 * Neutron's side of a restart's drain, from neutron-server's own request log (`… "GET /v2.0/… HTTP/1.1" status: 200
 * len: … time: 0.123`) and its process's CPU time: the manager's requests (the bench's own polls, which ask for
 * `fields=`, left out), their server-side time, and the CPU the server used. This tells a slower Neutron from a
 * slower manager when two restarts drain the same keys at different speeds.
 */
interface NeutronView { requests: number; medianMs: number; p90Ms: number; cpuS: number }

/** Where to read Neutron's log and CPU; `mark()` then `view(mark)` brackets a window. */
class NeutronProbe {
  private readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }
  private get logPath(): string { return join(this.dir, 'log', 'neutron-server.log'); }
  private cpuS(): number {
    const pid = readFileSync(join(this.dir, 'neutron.pid'), 'utf8').trim();
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
    return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, in clock ticks (USER_HZ = 100)
  }
  mark(): { offset: number; cpuS: number } {
    return { offset: statSync(this.logPath).size, cpuS: this.cpuS() };
  }
  /**
   * Whether the log has a successful `POST /v2.0/networks` from `cursor.offset` on (the cursor moves past the complete
   * lines read). Reading the server's log costs Neutron nothing; polling its API every 10 ms would (a poll is a name
   * query: ~10–20 ms of the one CPU this neutron-server's API runs on, and the backlog drain is bound by that CPU).
   */
  networkCreated(cursor: { offset: number }): boolean {
    // Only the bytes after the cursor: this runs every 10 ms, and re-reading the whole log (megabytes after a
    // 1 000-Network converge) took a CPU of this 2-CPU machine from Neutron for as long as the new object was awaited.
    const fd = openSync(this.logPath, 'r');
    let buf: Buffer;
    try {
      buf = Buffer.alloc(Math.max(0, fstatSync(fd).size - cursor.offset));
      buf = buf.subarray(0, readSync(fd, buf, 0, buf.length, cursor.offset));
    } finally {
      closeSync(fd);
    }
    const end = buf.lastIndexOf(0x0a) + 1;
    cursor.offset += end;
    return /"POST \/v2\.0\/networks HTTP\/1\.1" status: 201 /.test(buf.subarray(0, end).toString('utf8'));
  }
  view(from: { offset: number; cpuS: number }): NeutronView {
    const text = readFileSync(this.logPath).subarray(from.offset).toString('utf8');
    const times: number[] = [];
    for (const m of text.matchAll(/"(?:GET|POST|PUT|DELETE) (\S+) HTTP\/1\.1" status: \d+ +len: \d+ time: ([\d.]+)/g)) {
      if (!(m[1] ?? '').includes('fields=')) times.push(Number(m[2]) * 1000);
    }
    times.sort((a, b) => a - b);
    const at = (q: number): number => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0;
    return { requests: times.length, medianMs: at(0.5), p90Ms: at(0.9), cpuS: this.cpuS() - from.cpuS };
  }
}

interface Measurement {
  mode: 'on' | 'off';
  /** A warm-up restart: shown, not counted. */
  warmup: boolean;
  /** Neutron rows: neutron-server's view of ready → drained. */
  neutron?: NeutronView;
  readyMs: number;
  /** ready → the new object's effect (Deployment / Neutron network). */
  newMs: number | undefined;
  /** ready → the new Foo's status written (Foo rows only). */
  newStatusMs?: number | undefined;
  drainMs: number | undefined;
  /** The same kind of new object created once the backlog drained (idle manager): create → effect. The anchor. */
  idleMs: number | undefined;
  reconciles: number;
  /** The manager's non-GET API requests, all objects. */
  writes: number;
  /** Backlog objects (and their Events, and their Neutron networks/subnets) changed during the restart. */
  backlogChanges: number;
}

interface Row { label: string; backlog: number; controller: string; runs: Measurement[]; goalMs: number }

/**
 * One restart: start the manager, create the new object at ready, measure until both the new object's effect and
 * the drain were seen (or the deadline passed).
 */
async function restart(opts: {
  mode: 'on' | 'off'; warmup: boolean; managerArgs: string[]; env: NodeJS.ProcessEnv; controller: string; backlog: number;
  /** Creates the object `name`; `done(name)` tells whether its effect exists, `statusDone(name)` its status. */
  create: (name: string) => Promise<void>; done: (name: string) => Promise<boolean>; statusDone?: (name: string) => Promise<boolean>;
  newName: string; idleName: string;
  /** Versions of everything that belongs to the backlog (keys containing "/new-" or "/idle-" are ignored). */
  snapshot: () => Promise<Map<string, string>>;
  neutron?: NeutronProbe;
}): Promise<Measurement> {
  const before = await opts.snapshot();
  const t0 = performance.now();
  const mgr = await ManagerProcess.start({
    script: distMainScript, collectLogs: debugLogs !== undefined,
    args: [...opts.managerArgs, `--priority-queue=${opts.mode === 'on'}`, `--log-level=${debugLogs !== undefined ? 'debug' : 'warn'}`], env: opts.env,
  });
  try {
    const deadline = t0 + timeoutMs;
    while ((await mgr.probe('/readyz')).status !== 200) {
      if (!mgr.running) throw new Error(`manager exited before ready: ${mgr.stderr.join('')}`);
      if (performance.now() > deadline) throw new Error('manager not ready in time');
      await sleep(5);
    }
    const tReady = performance.now();
    const neutronMark = opts.neutron?.mark();
    await opts.create(opts.newName);
    const m: Measurement = {
      mode: opts.mode, warmup: opts.warmup, readyMs: tReady - t0, newMs: undefined, drainMs: undefined, idleMs: undefined, reconciles: 0, writes: 0, backlogChanges: 0,
    };
    const watchNew = (async () => {
      while (performance.now() < deadline && m.newMs === undefined) {
        if (await opts.done(opts.newName)) m.newMs = performance.now() - tReady;
        else await sleep(10);
      }
      if (opts.statusDone) {
        while (performance.now() < deadline && !(await opts.statusDone(opts.newName))) await sleep(10);
        m.newStatusMs = performance.now() - tReady;
      }
    })();
    const watchDrain = (async () => {
      while (performance.now() < deadline) {
        const text = await mgr.metrics();
        if (drained(text, opts.controller, opts.backlog)) {
          m.drainMs = performance.now() - tReady;
          if (neutronMark) m.neutron = opts.neutron?.view(neutronMark);
          return;
        }
        await sleep(20);
      }
    })();
    await Promise.all([watchNew, watchDrain]);
    // The new object's last writes may trail its visible effect: wait until its reconciles are done too.
    for (;;) {
      const text = await mgr.metrics();
      if (drained(text, opts.controller, opts.backlog) || performance.now() > deadline) {
        m.reconciles = sumMetric(text, 'controller_runtime_reconcile_total', { controller: opts.controller });
        m.writes = writesIn(text);
        break;
      }
      await sleep(50);
    }
    // Anchor: the same kind of object on the now idle manager (no backlog), same process, same moment.
    const i0 = performance.now();
    await opts.create(opts.idleName);
    while (performance.now() < deadline && !(await (opts.statusDone ?? opts.done)(opts.idleName))) await sleep(10);
    m.idleMs = performance.now() - i0;
    const after = await opts.snapshot();
    m.backlogChanges = [...after].filter(([k, v]) => !/\/(new|idle)-/.test(k) && before.get(k) !== v).length;
    log(`  ${opts.mode}${opts.warmup ? ' (warm-up, not counted)' : ''}: ready ${(m.readyMs / 1000).toFixed(2)} s; new object ${sec(m.newMs)} s; drained ${sec(m.drainMs)} s; ` +
      `idle anchor ${sec(m.idleMs)} s; ${m.reconciles} reconciles, ${m.writes} writes, ${m.backlogChanges} backlog objects changed` +
      (m.neutron ? `; Neutron during the drain: ${neutronText(m.neutron)}` : ''));
    return m;
  } finally {
    await mgr.stop('SIGTERM', 60_000);
    if (debugLogs !== undefined) {
      mkdirSync(debugLogs, { recursive: true });
      writeFileSync(join(debugLogs, `${opts.env['WATCH_NAMESPACE'] ?? ''}-${opts.newName}.jsonl`), mgr.logs.map((l) => JSON.stringify(l)).join('\n'));
    }
  }
}

/** Warm-up restarts (mode on), then the measured ones in ABBA order: on, off, off, on, on, off, … (or --modes). */
function modes(): ('on' | 'off')[] {
  const out: ('on' | 'off')[] = Array.from({ length: warmups }, () => 'on' as const);
  if (modeList) return [...out, ...modeList];
  for (let i = 0; i < repeats; i++) out.push(...(i % 2 === 0 ? ['on', 'off'] as const : ['off', 'on'] as const));
  return out;
}

async function newNamespace(rest: RestClient, name: string): Promise<string> {
  await rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
  return name;
}

/** Waits (polling) until `probe` holds; throws after the deadline. */
async function until(what: string, probe: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!probe()) {
    if (performance.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(100);
  }
}

/** Runs the manager until its queue has drained after everything converged, then stops it. */
async function converge(mgrArgs: string[], env: NodeJS.ProcessEnv, controller: string, n: number, done: () => boolean): Promise<void> {
  const t0 = performance.now();
  const mgr = await ManagerProcess.start({ script: distMainScript, collectLogs: false, args: [...mgrArgs, '--log-level=warn'], env });
  try {
    await until(`${n} objects converged`, () => {
      if (!mgr.running) throw new Error(`manager exited: ${mgr.stderr.join('')}`);
      return done();
    }, timeoutMs);
    for (;;) {
      if (drained(await mgr.metrics(), controller, n)) break;
      await sleep(200);
    }
    log(`  converged in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    await mgr.stop('SIGTERM', 60_000);
  }
}

/** Events of `ns` keyed by `event/<involved object name>/<event name>`, valued by their count (a repeat PATCHes it). */
async function eventVersions(rest: RestClient, ns: string, into: Map<string, string>): Promise<void> {
  const events = await rest.json<{ items: { metadata?: { name?: string }; involvedObject?: { name?: string }; count?: number }[] }>('GET', `/api/v1/namespaces/${ns}/events`);
  for (const e of events.items) into.set(`event/${e.involvedObject?.name ?? ''}/${e.metadata?.name ?? ''}`, String(e.count ?? 1));
}

async function fooRow(cp: ControlPlane, rest: RestClient): Promise<Row> {
  const ns = await newNamespace(rest, 'prio-foo');
  log(`Foos: creating ${fooCount} in ${ns}`);
  const created = await runAll(fooCount, clients, (i) => rest.json('POST', collectionPath(fooResource, ns), {
    body: { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: `foo-${i}` }, spec: { deploymentName: `foo-${i}`, replicas: 1 } },
  }));
  log(`  created in ${(created / 1000).toFixed(1)} s; converging with the manager (${fooWorkers} workers)`);
  const env = { KUBECONFIG: cp.kubeconfig, WATCH_NAMESPACE: ns };
  const mgrArgs = ['--controllers=foo', `--foo-concurrency=${fooWorkers}`];
  const factory = new SharedInformerFactory({ client: rest, namespaces: [ns] });
  const foos = factory.informerFor<Foo>(fooResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  try {
    await factory.waitForCacheSync({ timeoutMs: 120_000 });
    await converge(mgrArgs, env, 'foo', fooCount, () => {
      const all = foos.lister().list(ns);
      return all.length >= fooCount && all.every((f) => f.status?.availableReplicas !== undefined);
    });
  } finally {
    ac.abort();
    await informers;
  }
  const versions = async (path: string, prefix: string, into: Map<string, string>): Promise<void> => {
    for (const o of (await rest.json<{ items: { metadata?: { name?: string; resourceVersion?: string } }[] }>('GET', path)).items) {
      into.set(`${prefix}/${o.metadata?.name ?? ''}`, o.metadata?.resourceVersion ?? '');
    }
  };
  const snapshot = async (): Promise<Map<string, string>> => {
    const out = new Map<string, string>();
    await versions(collectionPath(fooResource, ns), 'foo', out);
    await versions(collectionPath(deploymentResource, ns), 'deployment', out);
    await eventVersions(rest, ns, out);
    return out;
  };
  const runs: Measurement[] = [];
  for (const [k, mode] of modes().entries()) {
    const newName = `new-${k}-${mode}`;
    log(`Foos: restart over ${fooCount + 2 * k} converged Foos, priority queue ${mode}${k < warmups ? ' (warm-up)' : ''}; new Foo ${newName} at ready`);
    runs.push(await restart({
      mode, warmup: k < warmups, managerArgs: mgrArgs, env, controller: 'foo', backlog: fooCount + 2 * k, newName, idleName: `idle-${k}-${mode}`, snapshot,
      create: async (name) => {
        await rest.json('POST', collectionPath(fooResource, ns), {
          body: { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name }, spec: { deploymentName: name, replicas: 1 } },
        });
      },
      done: async (name) => {
        const res = await rest.request('GET', objectPath(deploymentResource, ns, name));
        await res.dump();
        return res.status === 200;
      },
      statusDone: async (name) => (await rest.json<Foo>('GET', objectPath(fooResource, ns, name))).status?.availableReplicas !== undefined,
    }));
  }
  return { label: `(a) ${fooCount} Foos, ${fooWorkers} workers`, backlog: fooCount, controller: 'foo', runs, goalMs: goal.fooMs };
}

async function networkRow(cp: ControlPlane, rest: RestClient, neutron: NeutronInstance, n: number, workers: number, letter: string): Promise<Row> {
  const ns = await newNamespace(rest, `prio-net-${n}-w${workers}`);
  log(`Networks: creating ${n} in ${ns}`);
  const cidr = (i: number): string => `10.${100 + Math.floor(i / 256)}.${i % 256}`;
  await runAll(n, clients, (i) => rest.json('POST', collectionPath(networkResource, ns), {
    body: { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: `net-${i}` }, spec: { cidr: `${cidr(i)}.0/24`, gateway: `${cidr(i)}.1` } },
  }));
  const env = { KUBECONFIG: cp.kubeconfig, WATCH_NAMESPACE: ns };
  const neutronArgs = ['--controllers=network', `--neutron-cloud-config=${neutron.cloudsYaml}`, '--neutron-cloud=local'];
  const mgrArgs = [...neutronArgs, `--network-concurrency=${workers}`];
  const factory = new SharedInformerFactory({ client: rest, namespaces: [ns] });
  const networks = factory.informerFor<Network>(networkResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  const convergeWorkers = Math.max(workers, 8); // converging is not measured: as fast as this Neutron allows
  log(`  converging with the manager (${convergeWorkers} workers)`);
  try {
    await factory.waitForCacheSync({ timeoutMs: 120_000 });
    await converge([...neutronArgs, `--network-concurrency=${convergeWorkers}`], env, 'network', n, () => {
      const all = networks.lister().list(ns);
      return all.length >= n && all.every((x) => x.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    });
  } finally {
    ac.abort();
    await informers;
  }
  const snapshot = async (): Promise<Map<string, string>> => {
    const out = new Map<string, string>();
    for (const o of (await rest.json<{ items: Network[] }>('GET', collectionPath(networkResource, ns))).items) {
      out.set(`network/${o.metadata?.name ?? ''}`, o.metadata?.resourceVersion ?? '');
    }
    await eventVersions(rest, ns, out);
    // Neutron: every network and subnet of this namespace (named "<ns>/<name>") with its revision_number.
    for (const kind of ['networks', 'subnets'] as const) {
      const res = await fetch(`${neutron.endpoint}/v2.0/${kind}?fields=name&fields=revision_number`, { signal: AbortSignal.timeout(120_000) });
      const body = (await res.json()) as Record<string, { name?: string; revision_number?: number }[] | undefined>;
      for (const o of body[kind] ?? []) if (o.name?.startsWith(`${ns}/`)) out.set(`neutron-${kind}/${o.name}`, String(o.revision_number));
    }
    return out;
  };
  const runs: Measurement[] = [];
  const probe = new NeutronProbe(neutron.dir);
  /** Per new object: where in Neutron's log to look for its create; once seen, its name is confirmed by a query. */
  const cursors = new Map<string, { offset: number }>();
  const seen = new Set<string>();
  for (const [k, mode] of modes().entries()) {
    const newName = `new-${k}-${mode}`;
    log(`Networks: restart over ${n + 2 * k} converged Networks (${workers} workers), priority queue ${mode}${k < warmups ? ' (warm-up)' : ''}; new Network ${newName} at ready`);
    runs.push(await restart({
      mode, warmup: k < warmups, managerArgs: mgrArgs, env, controller: 'network', backlog: n + 2 * k, newName, idleName: `idle-${k}-${mode}`, snapshot,
      neutron: probe,
      create: async (name) => {
        cursors.set(name, { offset: probe.mark().offset });
        const third = name.startsWith('new-') ? 250 : 251;
        await rest.json('POST', collectionPath(networkResource, ns), {
          body: { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name }, spec: { cidr: `10.${third}.${k}.0/24`, gateway: `10.${third}.${k}.1` } },
        });
      },
      done: async (name) => {
        // The log first (free for Neutron); then one query by name confirms it (a converged backlog creates nothing,
        // so the create seen is the new object's — if it was not, this keeps asking by name).
        const cursor = cursors.get(name);
        if (cursor && !seen.has(name)) {
          if (!probe.networkCreated(cursor)) return false;
          seen.add(name);
        }
        const res = await fetch(`${neutron.endpoint}/v2.0/networks?name=${encodeURIComponent(`${ns}/${name}`)}&fields=id`, { signal: AbortSignal.timeout(30_000) });
        const body = (await res.json()) as { networks?: unknown[] };
        return (body.networks?.length ?? 0) > 0;
      },
    }));
  }
  return { label: `(${letter}) ${n} Networks, ${workers} worker${workers > 1 ? 's' : ''}`, backlog: n, controller: 'network', runs, goalMs: goal.networkMs };
}

const neutronText = (v: NeutronView): string =>
  `${v.requests} requests, server time median ${v.medianMs.toFixed(0)} ms / p90 ${v.p90Ms.toFixed(0)} ms, ${v.cpuS.toFixed(1)} CPU s`;
const sec = (ms: number | undefined): string => (ms === undefined ? 'timeout' : (ms / 1000).toFixed(2));
const median = (xs: number[]): number | undefined => {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

function table(rows: Row[]): string {
  const out = [
    '| row | queue | restart → ready s | ready → new object s | anchor: new object on the idle manager s | ready → backlog drained s | Neutron during the drain: CPU s (requests, median ms) | reconciles | manager writes | backlog objects changed |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const verdicts: string[] = [];
  for (const r of rows) {
    const isFoo = r.controller === 'foo';
    for (const m of r.runs) {
      const newText = isFoo ? `${sec(m.newMs)} (status ${sec(m.newStatusMs)})` : sec(m.newMs);
      out.push(`| ${r.label} | ${m.mode}${m.warmup ? ' (warm-up, not counted)' : ''} | ${sec(m.readyMs)} | ${newText} | ${sec(m.idleMs)} | ${sec(m.drainMs)} | ${m.neutron ? `${m.neutron.cpuS.toFixed(1)} (${m.neutron.requests}, ${m.neutron.medianMs.toFixed(0)})` : '–'} | ${m.reconciles} | ${m.writes} | ${m.backlogChanges} |`);
    }
    const of = (mode: 'on' | 'off', pick: (m: Measurement) => number | undefined): number | undefined =>
      median(r.runs.filter((m) => m.mode === mode && !m.warmup).map(pick).filter((x): x is number => x !== undefined));
    const newOn = of('on', (m) => (isFoo ? m.newStatusMs : m.newMs));
    const newOff = of('off', (m) => (isFoo ? m.newStatusMs : m.newMs));
    const idle = median(r.runs.filter((m) => !m.warmup).map((m) => m.idleMs).filter((x): x is number => x !== undefined));
    const drainOn = of('on', (m) => m.drainMs);
    const drainOff = of('off', (m) => m.drainMs);
    const changes = r.runs.map((m) => m.backlogChanges); // warm-ups included: no restart may change the backlog
    const what = isFoo ? 'new Foo reconciled (status written)' : 'new Network\'s Neutron network exists';
    verdicts.push(`- ${r.label}: ${what} ${sec(newOn)} s after ready with the priority queue, ${sec(newOff)} s without, ` +
      `${sec(idle)} s on an idle manager (anchor; medians) — goal ≤ ${r.goalMs / 1000} s: ${newOn !== undefined && newOn <= r.goalMs ? 'met' : '**missed**'}; ` +
      `backlog drained ${sec(drainOn)} s on vs ${sec(drainOff)} s off (${drainOn && drainOff ? (drainOn / drainOff).toFixed(2) : '–'}×) — goal ≤ ${goal.drainRatio}×: ` +
      `${drainOn !== undefined && drainOff !== undefined && drainOn <= goal.drainRatio * drainOff ? 'met' : '**missed**'}; ` +
      `backlog objects changed by the restarts: ${changes.join(', ')} — goal 0: ${changes.every((w) => w === 0) ? 'met' : '**missed**'}`);
  }
  return `${out.join('\n')}\n\n${verdicts.join('\n')}`;
}

/**
 * The results file: per row (`foos<N>`, `networks<N>w<W>`) the new object's time after ready with the queue on and
 * off, the drain, the idle manager's time (the anchor), drain on ÷ off, and the backlog objects any restart changed.
 */
function recordPriority(res: BenchResults, rows: Row[]): void {
  for (const r of rows) {
    const isFoo = r.controller === 'foo';
    const key = isFoo ? `foos${r.backlog}` : `networks${r.backlog}w${/(\d+) workers?/.exec(r.label)?.[1] ?? ''}`;
    const counted = r.runs.filter((m) => !m.warmup);
    const secs = (xs: (number | undefined)[]): number[] => xs.filter((x): x is number => x !== undefined).map((x) => x / 1000);
    for (const mode of ['on', 'off'] as const) {
      const of = counted.filter((m) => m.mode === mode);
      const newS = secs(of.map((m) => (isFoo ? m.newStatusMs : m.newMs)));
      const drainS = secs(of.map((m) => m.drainMs));
      if (newS.length) res.set(`${key}.${mode}.newObject`, spread(newS, 's'));
      if (drainS.length) res.set(`${key}.${mode}.drain`, spread(drainS, 's'));
    }
    const idleS = secs(counted.map((m) => m.idleMs));
    if (idleS.length) res.set(`${key}.idle.newObject`, spread(idleS, 's'));
    const drainOn = median(secs(counted.filter((m) => m.mode === 'on').map((m) => m.drainMs)));
    const drainOff = median(secs(counted.filter((m) => m.mode === 'off').map((m) => m.drainMs)));
    if (drainOn !== undefined && drainOff !== undefined) res.set(`${key}.drainRatio`, ratio(drainOn, drainOff));
    res.set(`${key}.backlogChanged`, val(r.runs.reduce((a, m) => a + m.backlogChanges, 0), 'count'));
    res.set(`${key}.restarts`, val(r.runs.length, 'count'));
  }
}

async function main(): Promise<void> {
  execFileSync(join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: repo, stdio: 'inherit' });
  const res = new BenchResults('priority', {
    name: 'idle manager and queue off',
    description: 'in the same run and on the same objects: the same restart with --priority-queue=false (ABBA), and a new object ' +
      'created once the backlog drained (the idle manager: what the new object costs by itself)',
  });
  const dir = mkdtempSync(join(tmpdir(), 'tscm-prio-'));
  log(`starting a private minimal control plane in ${dir}`);
  const cp = await ControlPlane.start({ mode: 'minimal', dir, log: () => {} });
  let neutron: NeutronInstance | undefined;
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'priority-bench' });
  const load: number[] = [];
  const sampler = setInterval(() => {
    load.push(loadavg()[0] ?? 0);
    res.sampleLoad();
  }, 10_000);
  try {
    const kubectl = join(cp.k8sBinDir, 'kubectl');
    execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '-f', 'config/crd/bases'], { cwd: repo, stdio: 'ignore' });
    execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io'], { stdio: 'ignore' });
    const rows: Row[] = [];
    try {
      await measureRows(rows);
    } catch (err) {
      // A row that fails (e.g. its Networks did not converge within --timeout-seconds) loses only itself: the rows
      // measured before it are written, with the failure.
      res.set('failed', err instanceof Error ? err.message.slice(0, 300) : String(err));
      recordPriority(res, rows);
      res.write();
      throw err;
    }
    const range = load.length ? `${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)}` : loadavg()[0]?.toFixed(1);
    recordPriority(res, rows);
    res.write();
    process.stdout.write(`\n${table(rows)}\n\n(Node ${process.version}, ${cpus().length} CPUs, 1-min load average ${range} during the run; ` +
      `manager: dist/, the image's Node flags, one namespace per row, log level warn; "on" = --priority-queue=true (default), ` +
      `"off" = --priority-queue=false in the same run; manager writes = its non-GET API requests, the new and idle objects' included; ` +
      `backlog objects changed = Foos/Deployments/Networks, their Events and Neutron networks/subnets whose version changed)\n`);
  } finally {
    clearInterval(sampler);
    await rest.close();
    await neutron?.stop();
    await cp.stop();
  }

  /** The rows in order, each pushed to `rows` once measured. */
  async function measureRows(rows: Row[]): Promise<void> {
    if (fooCount > 0) rows.push(await fooRow(cp, rest));
    if (networkRows.length > 0) {
      log('starting a private neutron-server (noauth)');
      neutron = await startNeutron({ auth: 'noauth', timeoutMs: 20 * 60_000 });
      // Neutron's default quota is 100 networks and 100 subnets a project (noauth: every request is fake_project_id).
      const quota = await fetch(`${neutron.endpoint}/v2.0/quotas/fake_project_id`, {
        method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ quota: { network: -1, subnet: -1 } }),
      });
      if (quota.status !== 200) throw new Error(`raising the Neutron quota: HTTP ${quota.status} ${await quota.text()}`);
      for (const [i, r] of networkRows.entries()) rows.push(await networkRow(cp, rest, neutron, r.n, r.workers, String.fromCharCode(98 + i)));
    }
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`priority bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
