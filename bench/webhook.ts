/**
 * Webhooks through a real kube-apiserver (issue 32 item 8; `make bench`):
 *
 *   node bench/webhook.ts [--rate 200] [--seconds 30] [--rounds 3] [--networks 10000] [--list-rounds 3] [--quick]
 *                         [--parts admission,conversion] [--cpu-prof DIR] [--http2 | --compare-http2]
 *
 * A PRIVATE minimal control plane (etcd + kube-apiserver) with the two-version Network CRD of config/crd/v2 (v1 + v2,
 * storage v2, conversion strategy Webhook), and the library's WebhookServer in its OWN process
 * (bench/webhook/server-child.ts: validateNetwork on /validate-samplecrd-k8s-io-v2-network, Network v1 ↔ v2 on
 * /convert), reached by url https://127.0.0.1:<port> with its self-signed certificate as caBundle.
 *
 * 1. Admission latency at a steady rate. A driver in this process sends dry-run creates of v2 Networks (valid, half
 *    single-stack, half dual-stack; dry run: admission runs in full, nothing is stored, so phases do not pile up
 *    objects) OPEN-LOOP: write i is due at t0 + i / rate whatever earlier writes are doing (≤ 512 in flight; a write
 *    due while 512 are in flight is skipped and counted), for `--seconds`. Two variants, interleaved ABBA
 *    (A B B A A B …, `--rounds` of each), after one unmeasured warm-up phase:
 *      - webhook: a ValidatingWebhookConfiguration (CREATE/UPDATE of networks v2, failurePolicy Fail, sideEffects
 *        None) points at the webhook process — one admission call per write;
 *      - none (the anchor): the configuration deleted — the same writes with no webhook.
 *    The configuration is created/deleted between phases and the switch confirmed with probes (a multicast CIDR, which
 *    the CRD's CEL rules accept and validateNetwork refuses: denied ⇔ the webhook is called).
 *    Then the webhook ALONE at the same rate, ABBA again: this process posts AdmissionReviews shaped like the API
 *    server's straight to it over ≤ 25 HTTPS keep-alive connections (what the webhook does when its caller keeps up),
 *    against the same with a new TLS connection per call (what the handshakes cost).
 *    Measured per phase: the webhook's own handling time per call inside its process (request body complete → answer
 *    written, performance.now(); and from the request headers, which adds the caller's pace sending the body;
 *    server-child.ts says exactly what is in each), p50/p99/max; the API server's own view of the call
 *    (apiserver_admission_webhook_admission_duration_seconds: mean and share ≤ 5 ms); new TLS connections and the
 *    most calls at once in the webhook; the whole write at this client (request written → response read), p50/p99;
 *    kube-apiserver and webhook CPU; the webhook process's event-loop delay and run-queue wait (on a shared machine a
 *    latency tail is often the scheduler). Goal: the webhook's own handling p99 ≤ 5 ms at 200 calls/s.
 * 2. Conversion cost, on two control planes: this one (watch cache on, kube-apiserver's default) and a fresh one with
 *    `--watch-cache-sizes=networks.samplecrd.k8s.io#0` (no watch cache for Networks). On each: `--networks` v2
 *    Networks are created (16 in flight, no admission webhook), counting the ConversionReviews sent meanwhile; then
 *    they are listed as v1 (not the storage version) and as v2 (the anchor), paged as informers and kubectl do
 *    (limit 500), ABBA, `--list-rounds` of each after one warm-up list of each; then one unpaged v1 LIST; with the
 *    watch cache, also a kube-apiserver restart over the stored objects (its v1 cache refilled through the webhook).
 *    Measured per list: wall time at the client, kube-apiserver / etcd / webhook / client CPU, the ConversionReviews
 *    the API server sent (requests, objects per request, bytes) and the webhook's handling time per review.
 *
 * `--http2`: the webhook process serves HTTP/2 as well (WebhookServer `http2: true`; the API server negotiates h2 by
 * ALPN). `--compare-http2`: part 1 instead runs TWO webhook processes, HTTP/1.1 only and HTTP/2, and interleaves ABBA
 * "through the API server, HTTP/1.1" against "through the API server, HTTP/2" (the configuration's url switched
 * between them, confirmed by probes the target process answers); the webhook-alone phases are skipped.
 *
 * Progress on stderr; the result (markdown tables: medians with min–max over the rounds, date, load average) on stdout.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { ApiError } from '../pkg/client/errors.ts';
import type { RestClient } from '../pkg/client/rest.ts';
import { applyCRDs, readCRDs } from '../pkg/testing/crds.ts';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { runAll } from './common.ts';
import { createNamespace, progress, repoRoot, restClient } from './informer/cluster.ts';
import { startPrivateControlPlane } from './informer/privatecluster.ts';
import { markdownTable, median, percentile, procCpuMs } from './informer/stats.ts';
import { validatePathV2, type ChildMessage, type ChildStats, type ParentMessage, type Served } from './webhook/server-child.ts';
import { BenchResults, ratio, spread, val } from './results.ts';

function flag(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : i >= 0 ? (process.argv[i + 1] ?? def) : def;
}
const QUICK = process.argv.includes('--quick');
const RATE = Number(flag('rate', '200'));
const SECONDS = Number(flag('seconds', QUICK ? '5' : '30'));
const ROUNDS = Number(flag('rounds', '3'));
const NETWORKS = Number(flag('networks', QUICK ? '1000' : '10000'));
const LIST_ROUNDS = Number(flag('list-rounds', '3'));
const CPU_PROF = flag('cpu-prof', '');
/** Which parts to run (profiling one part: `--parts admission`). */
const PARTS = new Set(flag('parts', 'admission,conversion').split(','));
/** The webhook process serves HTTP/2 too (`http2: true`). */
const HTTP2 = process.argv.includes('--http2');
/** Part 1 compares an HTTP/1.1-only webhook process with an HTTP/2 one, ABBA (see the header). */
const COMPARE_HTTP2 = process.argv.includes('--compare-http2');
for (const [name, v] of [['rate', RATE], ['seconds', SECONDS], ['rounds', ROUNDS], ['networks', NETWORKS], ['list-rounds', LIST_ROUNDS]] as const) {
  if (!(Number.isFinite(v) && v > 0)) {
    process.stderr.write(`--${name} must be a positive number (got ${v})\n` +
      'usage: node bench/webhook.ts [--rate 200] [--seconds 30] [--rounds 3] [--networks 10000] [--list-rounds 3] [--quick] [--cpu-prof DIR]\n');
    process.exit(2);
  }
}
/** Goal of issue 32 item 8. */
const GOAL_P99_MS = 5;
const MAX_IN_FLIGHT = 512;
const GROUP = 'samplecrd.k8s.io';
const ADMIT_NS = 'wh-admit';
const CONV_NS = 'wh-conv';
const HOOK_NAME = `vnetwork.${GROUP}`;
const VWC_PATH = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';
const VWC_NAME = 'networks-bench';
/** kube-apiserver --watch-cache-sizes value that turns the watch cache off for Networks (every version). */
const NO_CACHE = 'networks.samplecrd.k8s.io#0';
const networks = (version: string, ns: string): string => `/apis/${GROUP}/${version}/namespaces/${ns}/networks`;

/** ABBA order of `rounds` runs of each variant: A B B A A B B A … cut to 2 × rounds. */
export function abba<V>(a: V, b: V, rounds: number): V[] {
  return Array.from({ length: 2 * rounds }, (_, i) => ((i % 4 === 0 || i % 4 === 3) ? a : b));
}

/** A valid v2 Network: even i single-stack IPv4, odd i dual-stack; a few labels, as real objects carry. */
function networkV2(i: number, name: string): KubeObject {
  const a = (i >> 8) & 255;
  const b = i & 255;
  const subnets: { cidr: string; gateway?: string }[] = [{ cidr: `10.${a}.${b}.0/24`, gateway: `10.${a}.${b}.1` }];
  if (i % 2 === 1) subnets.push({ cidr: `fd00:${a.toString(16)}:${b.toString(16)}::/64` });
  return {
    apiVersion: `${GROUP}/v2`, kind: 'Network',
    metadata: { name, labels: { 'app.kubernetes.io/name': 'bench', 'bench.example.com/stack': subnets.length === 2 ? 'dual' : 'single' } },
    spec: { subnets },
  } as KubeObject;
}

// ---------------------------------------------------------------------------------------------------------------
// The webhook process

class WebhookChild {
  readonly proc: ChildProcess;
  private waiters: ((m: ChildMessage) => void)[] = [];

  private constructor(proc: ChildProcess) {
    this.proc = proc;
    proc.on('message', (m: ChildMessage) => this.waiters.shift()?.(m));
  }

  static async start(http2 = HTTP2): Promise<{ child: WebhookChild; port: number; caBundle: string }> {
    const execArgv = CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', CPU_PROF] : [];
    const proc = fork(join(repoRoot, 'bench/webhook/server-child.ts'), http2 ? ['--http2'] : [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const child = new WebhookChild(proc);
    const ready = await new Promise<ChildMessage>((resolve, reject) => {
      child.waiters.push(resolve);
      proc.once('exit', (code) => reject(new Error(`webhook child exited with ${code} before it was ready`)));
    });
    if (ready.type !== 'ready') throw new Error(`webhook child: expected ready, got ${ready.type}`);
    return { child, port: ready.port, caBundle: ready.caBundle };
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  private ask(msg: ParentMessage): Promise<ChildMessage> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.proc.send(msg);
    });
  }

  async reset(): Promise<void> {
    await this.ask({ type: 'reset' });
  }

  async collect(): Promise<ChildStats> {
    const m = await this.ask({ type: 'collect' });
    if (m.type !== 'stats') throw new Error(`webhook child: expected stats, got ${m.type}`);
    return m;
  }

  /** Objects converted since the last reset. */
  async converted(): Promise<number> {
    const m = await this.ask({ type: 'converted' });
    if (m.type !== 'converted') throw new Error(`webhook child: expected converted, got ${m.type}`);
    return m.objects;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.send({ type: 'stop' } satisfies ParentMessage);
    await exited;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// API server metrics

/** Sum of the samples of `metric` whose labels contain every `key="value"` of `labels`. */
function metricSum(text: string, metric: string, labels: Record<string, string>): number {
  let n = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

async function apiserverMetrics(cp: ControlPlane): Promise<string> {
  const res = await cp.get('/metrics');
  if (res.status !== 200) throw new Error(`kube-apiserver /metrics: HTTP ${res.status}`);
  return res.body;
}

/** The API server's view of its calls to our validating webhook: count, sum (s), calls ≤ 5 ms. */
function hookCalls(text: string): { count: number; sum: number; le5: number } {
  const m = 'apiserver_admission_webhook_admission_duration_seconds';
  const l = { name: HOOK_NAME, type: 'validating' };
  return { count: metricSum(text, `${m}_count`, l), sum: metricSum(text, `${m}_sum`, l), le5: metricSum(text, `${m}_bucket`, { ...l, le: '0.005' }) };
}

function pidOf(cp: ControlPlane, name: 'kube-apiserver' | 'etcd'): number {
  const pid = cp.state.components[name]?.pid;
  if (!pid) throw new Error(`${name} is not running`);
  return pid;
}

// ---------------------------------------------------------------------------------------------------------------
// Part 1: admission latency

/**
 * webhook / none: dry-run creates through the API server with / without the webhook; direct: the webhook alone over
 * kept-alive connections; direct-new: the same with a new TLS connection per call.
 */
type AdmitVariant = 'webhook' | 'none' | 'direct' | 'direct-new' | 'webhook-h2';
/** Keep-alive connections of the direct caller. */
const DIRECT_CONNECTIONS = 25;

interface AdmitPhase {
  variant: AdmitVariant;
  seconds: number;
  due: number;
  ok: number;
  errors: Record<string, number>;
  skipped: number;
  clientMs: number[];
  lateMs: number[];
  /** The webhook's own handling time per call (body complete → answer written), ms. */
  served: number[];
  /** Headers parsed → answer written (adds the wait for the API server to send the body), ms. */
  withBody: number[];
  child: ChildStats;
  apiserver: { count: number; sum: number; le5: number };
  apiserverCpuMs: number;
  clientCpuMs: number;
  load: number;
}

/**
 * Creates (on) or deletes the ValidatingWebhookConfiguration. `target`: the process the configuration now points at
 * must answer the probes (the url switched between two processes, --compare-http2); the previous configuration is
 * deleted first.
 */
async function setWebhook(rest: RestClient, on: boolean, base: string, caBundle: string, target?: WebhookChild): Promise<void> {
  if (on && target) {
    await rest.json('DELETE', `${VWC_PATH}/${VWC_NAME}`).catch((err: unknown) => {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    });
  }
  if (on) {
    await rest.json('POST', VWC_PATH, {
      body: {
        apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: VWC_NAME },
        webhooks: [{
          name: HOOK_NAME, clientConfig: { url: `${base}${validatePathV2}`, caBundle },
          rules: [{ apiGroups: [GROUP], apiVersions: ['v2'], operations: ['CREATE', 'UPDATE'], resources: ['networks'], scope: 'Namespaced' }],
          admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail', matchPolicy: 'Equivalent', timeoutSeconds: 10,
        }],
      },
    });
  } else {
    await rest.json('DELETE', `${VWC_PATH}/${VWC_NAME}`);
  }
  // The API server picks configurations up asynchronously: probe until 3 probes in a row show the new state.
  const probe = async (): Promise<boolean> => {
    try {
      await rest.json('POST', networks('v2', ADMIT_NS), {
        query: { dryRun: 'All' },
        body: { apiVersion: `${GROUP}/v2`, kind: 'Network', metadata: { generateName: 'probe-' }, spec: { subnets: [{ cidr: '224.1.0.0/16' }] } },
      });
      return false;
    } catch (err) {
      if (err instanceof ApiError && /denied the request/.test(err.message)) return true;
      throw err;
    }
  };
  const answeredByTarget = async (): Promise<boolean> => {
    if (!target) return probe();
    await target.reset();
    const denied = await probe();
    return denied && (await target.collect()).served.length === 1;
  };
  const deadline = Date.now() + 60_000;
  for (let seen = 0; seen < 3;) {
    if (Date.now() > deadline) throw new Error(`the webhook configuration did not become ${on ? 'active' : 'inactive'} within 60 s`);
    seen = (await answeredByTarget()) === on ? seen + 1 : 0;
    if (seen < 3) await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Open-loop calls at `rate`/s for `seconds`: call i is started at t0 + i/rate (later only if this process was late:
 * `lateMs`), whatever the earlier ones are doing; skipped if MAX_IN_FLIGHT are in flight. `send(i)` resolves when the
 * call succeeded and rejects otherwise.
 */
async function drive(rate: number, seconds: number, send: (i: number) => Promise<unknown>): Promise<Pick<AdmitPhase, 'due' | 'ok' | 'errors' | 'skipped' | 'clientMs' | 'lateMs' | 'seconds'>> {
  const due = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const clientMs: number[] = [];
  const lateMs: number[] = [];
  const errors: Record<string, number> = {};
  const pending = new Set<Promise<void>>();
  let ok = 0;
  let skipped = 0;
  let i = 0;
  const t0 = performance.now() + 5;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      for (; i < due && t0 + i * interval <= now; i++) {
        if (pending.size >= MAX_IN_FLIGHT) {
          skipped++;
          continue;
        }
        lateMs.push(now - (t0 + i * interval));
        const sent = performance.now();
        const p: Promise<void> = send(i).then(
          () => {
            clientMs.push(performance.now() - sent);
            ok++;
          },
          (err: unknown) => {
            const key = err instanceof ApiError ? `HTTP ${err.status}` : err instanceof Error ? err.message.slice(0, 60) : 'error';
            errors[key] = (errors[key] ?? 0) + 1;
          },
        ).finally(() => pending.delete(p));
        pending.add(p);
      }
      if (i < due) setTimeout(tick, Math.max(0, t0 + i * interval - performance.now()));
      else resolve();
    };
    tick();
  });
  await Promise.all(pending);
  return { due, ok, errors, skipped, clientMs, lateMs, seconds: (performance.now() - t0) / 1000 };
}

/**
 * Calls the webhook process directly, as the API server does but from this process: POST of an AdmissionReview
 * shaped like the API server's (request with kind/resource/userInfo/options, the object with uid, timestamps and
 * managedFields) over HTTPS: at most DIRECT_CONNECTIONS connections, kept alive, or (keepAlive false) a new TLS
 * connection per call. Resolves when allowed.
 */
function directCaller(base: string, caBundle: string, keepAlive: boolean): { send: (i: number) => Promise<void>; close: () => void } {
  const ca = Buffer.from(caBundle, 'base64');
  // keepAlive false: no agent at all (an Agent without keep-alive still hands a finished socket to a queued request).
  const agent = keepAlive ? new Agent({ keepAlive, maxSockets: DIRECT_CONNECTIONS, ca }) : false;
  const url = new URL(`${base}${validatePathV2}`);
  const send = (i: number): Promise<void> => {
    const object = networkV2(i, `direct-${i}`) as KubeObject & { metadata: Record<string, unknown> };
    object.metadata = {
      ...object.metadata, namespace: ADMIT_NS, uid: randomUUID(), creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      managedFields: [{ manager: 'tscm-bench', operation: 'Update', apiVersion: `${GROUP}/v2`, time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), fieldsType: 'FieldsV1',
        fieldsV1: { 'f:metadata': { 'f:labels': { '.': {}, 'f:app.kubernetes.io/name': {}, 'f:bench.example.com/stack': {} } }, 'f:spec': { '.': {}, 'f:subnets': {} } } }],
    };
    const gvk = { group: GROUP, version: 'v2', kind: 'Network' };
    const gvr = { group: GROUP, version: 'v2', resource: 'networks' };
    const body = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
      request: {
        uid: randomUUID(), kind: gvk, resource: gvr, requestKind: gvk, requestResource: gvr, name: `direct-${i}`, namespace: ADMIT_NS,
        operation: 'CREATE', userInfo: { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] },
        object, oldObject: null, dryRun: true, options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1', dryRun: ['All'], fieldManager: 'tscm-bench' },
      },
    });
    return new Promise<void>((resolve, reject) => {
      const req = httpsRequest(url, { method: 'POST', agent, ca, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const allowed = res.statusCode === 200 && (JSON.parse(text) as { response?: { allowed?: boolean } }).response?.allowed === true;
          if (allowed) resolve();
          else reject(new Error(`HTTP ${res.statusCode ?? 0}${res.statusCode === 200 ? ' not allowed' : ''}`));
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  };
  return { send, close: () => (agent ? agent.destroy() : undefined) };
}

async function admitPhase(cp: ControlPlane, rest: RestClient, child: WebhookChild, variant: AdmitVariant, seconds: number, prefix: string,
  direct?: (i: number) => Promise<void>): Promise<AdmitPhase> {
  const api0 = procCpuMs(pidOf(cp, 'kube-apiserver'));
  const calls0 = hookCalls(await apiserverMetrics(cp));
  const cpu0 = process.cpuUsage();
  await child.reset();
  const d = await drive(RATE, seconds, variant.startsWith('direct') && direct ? direct
    : (i) => rest.json('POST', networks('v2', ADMIT_NS), { query: { dryRun: 'All' }, body: networkV2(i, `${prefix}-${i}`) }));
  const childStats = await child.collect();
  const cpu = process.cpuUsage(cpu0);
  const calls1 = hookCalls(await apiserverMetrics(cp));
  const calls = childStats.served.filter((s) => s.path === validatePathV2);
  const served = calls.map((s) => s.ownMs);
  const withBody = calls.map((s) => s.ms);
  return {
    variant, ...d, served, withBody, child: childStats,
    apiserver: { count: calls1.count - calls0.count, sum: calls1.sum - calls0.sum, le5: calls1.le5 - calls0.le5 },
    apiserverCpuMs: procCpuMs(pidOf(cp, 'kube-apiserver')) - api0,
    clientCpuMs: (cpu.user + cpu.system) / 1000,
    load: loadavg()[0] ?? NaN,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Part 2: conversion

type ListVariant = 'v1' | 'v2';

interface ListRun {
  variant: ListVariant;
  ms: number;
  items: number;
  pages: number;
  apiserverCpuMs: number;
  etcdCpuMs: number;
  webhookCpuMs: number;
  clientCpuMs: number;
  child: ChildStats;
  load: number;
}

/**
 * One LIST of every Network of CONV_NS as `variant` (paged by `limit`, or unpaged). `expectConverted`: objects the
 * webhook must have converted meanwhile (without a watch cache: the whole list as v1, none as v2) — else it throws.
 */
async function listRun(cp: ControlPlane, rest: RestClient, child: WebhookChild, variant: ListVariant, limit: number | undefined, expectConverted?: number): Promise<ListRun> {
  await child.reset();
  const api0 = procCpuMs(pidOf(cp, 'kube-apiserver'));
  const etcd0 = procCpuMs(pidOf(cp, 'etcd'));
  const wh0 = procCpuMs(child.pid);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const items: KubeObject[] = [];
  let pages = 0;
  let cont: string | undefined;
  do {
    const page = await rest.json<{ items: KubeObject[]; metadata?: { continue?: string } }>('GET', networks(variant, CONV_NS), {
      query: { ...(limit ? { limit: String(limit) } : {}), ...(cont ? { continue: cont } : {}) }, timeoutMs: 120_000,
    });
    pages++;
    items.push(...page.items);
    cont = page.metadata?.continue || undefined;
  } while (cont);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const run: ListRun = {
    variant, ms, items: items.length, pages,
    apiserverCpuMs: procCpuMs(pidOf(cp, 'kube-apiserver')) - api0, etcdCpuMs: procCpuMs(pidOf(cp, 'etcd')) - etcd0,
    webhookCpuMs: procCpuMs(child.pid) - wh0, clientCpuMs: (cpu.user + cpu.system) / 1000,
    child: await child.collect(), load: loadavg()[0] ?? NaN,
  };
  if (run.items !== NETWORKS) throw new Error(`list ${variant}: ${run.items} items, expected ${NETWORKS}`);
  const wrong = items.find((o) => o.apiVersion !== undefined && o.apiVersion !== `${GROUP}/${variant}`);
  if (wrong) throw new Error(`list ${variant}: an item has apiVersion ${wrong.apiVersion}`);
  const sample = items[1] as KubeObject & { spec?: { cidr?: string; subnets?: unknown[] } };
  if (variant === 'v1' ? !sample.spec?.cidr : !sample.spec?.subnets) throw new Error(`list ${variant}: item not in ${variant} form: ${JSON.stringify(sample.spec)}`);
  const converted = run.child.batchSizes.reduce((a, b) => a + b, 0);
  if (expectConverted !== undefined && converted !== expectConverted) throw new Error(`list ${variant}: the webhook converted ${converted} objects meanwhile, expected ${expectConverted}`);
  return run;
}

/** Waits until the webhook has converted `n` objects since its last reset; resolves the ms waited (NaN on timeout). */
async function untilConverted(child: WebhookChild, n: number, timeoutMs: number): Promise<number> {
  const t0 = performance.now();
  while ((await child.converted()) < n) {
    if (performance.now() - t0 > timeoutMs) return Number.NaN;
    await new Promise((r) => setTimeout(r, 50));
  }
  return performance.now() - t0;
}

interface ConversionPart {
  cache: boolean;
  /** The creates: wall time, the webhook's work meanwhile and until the v1 watch cache had every object. */
  create: { ms: number; settleMs: number; webhookCpuMs: number; stats: ChildStats };
  lists: ListRun[];
  unpaged: ListRun | Error;
  /** Watch cache only: kube-apiserver restarted over the N objects → its v1 cache refilled through the webhook. */
  restart?: { ms: number; webhookCpuMs: number; stats: ChildStats } | Error;
}

/**
 * Part 2 on one control plane: NETWORKS v2 creates (no admission webhook), then LIST_ROUNDS paged lists of each
 * version in ABBA order (after one warm-up each), one unpaged v1 list, and (watch cache on) a kube-apiserver restart.
 */
async function conversionPart(cp: ControlPlane, rest: RestClient, child: WebhookChild, cache: boolean): Promise<ConversionPart> {
  const label = cache ? 'watch cache on' : 'watch cache off';
  await createNamespace(cp, CONV_NS);
  progress(`conversion (${label}): creating ${NETWORKS} v2 Networks`);
  await child.reset();
  const wh0 = procCpuMs(child.pid);
  const tc = performance.now();
  await runAll(NETWORKS, 16, (i) => rest.json('POST', networks('v2', CONV_NS), { body: networkV2(i, `net-${i}`) }));
  const ms = performance.now() - tc;
  // With a watch cache, the API server's cache of v1 converts each new object as its watch event arrives.
  const settleMs = cache ? await untilConverted(child, NETWORKS, 120_000) : 0;
  const create = { ms, settleMs, webhookCpuMs: procCpuMs(child.pid) - wh0, stats: await child.collect() };
  progress(`created in ${f2(ms / 1000)} s; ${create.stats.batchSizes.length} ConversionReviews meanwhile (${sizes(create.stats.batchSizes)}), ` +
    `v1 cache complete ${f2(settleMs / 1000)} s after the last create; warm-up: one list of each (not counted)`);
  const expect = (v: ListVariant): number | undefined => (cache ? undefined : v === 'v1' ? NETWORKS : 0);
  await listRun(cp, rest, child, 'v1', 500, expect('v1'));
  await listRun(cp, rest, child, 'v2', 500, expect('v2'));
  const lists: ListRun[] = [];
  for (const [i, variant] of abba<ListVariant>('v1', 'v2', LIST_ROUNDS).entries()) {
    const r = await listRun(cp, rest, child, variant, 500, expect(variant));
    lists.push(r);
    progress(`list (${label}) ${i + 1}/${2 * LIST_ROUNDS} ${variant}: ${f2(r.ms / 1000)} s, ${r.pages} pages, apiserver ${f2(r.apiserverCpuMs / 1000)} CPU-s, ` +
      `webhook ${f2(r.webhookCpuMs / 1000)} CPU-s, reviews ${sizes(r.child.batchSizes)}; load ${f1(r.load)}`);
  }
  progress(`conversion (${label}): one unpaged v1 LIST`);
  const unpaged = await listRun(cp, rest, child, 'v1', undefined, expect('v1')).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
  let restart: ConversionPart['restart'];
  if (cache) {
    progress('conversion (watch cache on): restarting kube-apiserver over the stored Networks');
    try {
      await cp.stopComponent('kube-apiserver');
      await child.reset();
      const w0 = procCpuMs(child.pid);
      const t0 = performance.now();
      await cp.startComponent('kube-apiserver');
      // The CRD's storage (and its per-version caches) is made on the first request for the resource.
      await rest.json('GET', networks('v2', CONV_NS), { query: { limit: '1' } });
      const waited = await untilConverted(child, NETWORKS, 300_000);
      if (Number.isNaN(waited)) throw new Error(`the v1 cache did not convert ${NETWORKS} objects within 300 s after the restart`);
      restart = { ms: performance.now() - t0, webhookCpuMs: procCpuMs(child.pid) - w0, stats: await child.collect() };
    } catch (err) {
      restart = err instanceof Error ? err : new Error(String(err));
    }
  }
  return { cache, create, lists, unpaged, restart };
}

// ---------------------------------------------------------------------------------------------------------------
// Formatting

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
const f0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : 'n/a');
const thin = (n: number): string => Math.round(n).toLocaleString('en-US').replace(/,/g, ' ');

/** "median (min–max)" of `values` with `fmt`. */
function mm(values: number[], fmt: (x: number) => string): string {
  if (values.length === 0) return '—';
  if (values.length === 1) return fmt(values[0] as number);
  return `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

function sizes(batchSizes: number[]): string {
  const counts = new Map<number, number>();
  for (const b of batchSizes) counts.set(b, (counts.get(b) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[0] - a[0]).map(([size, n]) => `${thin(size)} × ${n}`).join(', ') || 'none';
}

/** Per-phase figures of part 1 in the results file: name, unit, value of one phase. */
const admitFigures: [string, string, (p: AdmitPhase) => number][] = [
  ['ownP50', 'ms', (p) => percentile(p.served, 50)],
  ['ownP99', 'ms', (p) => percentile(p.served, 99)],
  ['ownMax', 'ms', (p) => Math.max(...p.served)],
  ['headersP99', 'ms', (p) => percentile(p.withBody, 99)],
  ['callsPerS', '/s', (p) => p.served.length / p.seconds],
  ['h2Share', '%', (p) => (100 * p.child.h2Calls) / Math.max(1, p.served.length)],
  ['apiserverCallMean', 'ms', (p) => (1000 * p.apiserver.sum) / p.apiserver.count],
  ['apiserverCallsLe5ms', '%', (p) => (100 * p.apiserver.le5) / p.apiserver.count],
  ['clientP50', 'ms', (p) => percentile(p.clientMs, 50)],
  ['clientP99', 'ms', (p) => percentile(p.clientMs, 99)],
  ['answeredPerS', '/s', (p) => p.ok / p.seconds],
  ['failedOrSkipped', 'count', (p) => Object.values(p.errors).reduce((a, b) => a + b, 0) + p.skipped],
  ['apiserverCores', 'cores', (p) => p.apiserverCpuMs / 1000 / p.seconds],
  ['newConnections', 'count', (p) => p.child.connections],
  ['maxInFlight', 'count', (p) => p.child.maxInFlight],
  ['cpuPerCall', 'CPU-µs', (p) => (1000 * p.child.cpuMs) / Math.max(1, p.served.length)],
  ['loopDelayP99', 'ms', (p) => p.child.loopDelay.p99],
  ['runQueuePerS', 'ms', (p) => p.child.runQueueMs / p.seconds],
];

/**
 * The results file: part 1 per variant (`admission.<variant>.<figure>`: median/min/max over the phases; `none`, no
 * webhook, is the anchor of `webhook`), part 2 per control plane (`conversion.cache|nocache.<v1|v2>.…`, v2 the anchor).
 */
function recordWebhookResults(res: BenchResults, phases: AdmitPhase[], conversions: ConversionPart[]): void {
  for (const variant of new Set(phases.map((p) => p.variant))) {
    const of = phases.filter((p) => p.variant === variant);
    for (const [name, unit, f] of admitFigures) {
      const xs = of.map(f).filter((x) => Number.isFinite(x));
      if (xs.length > 0) res.set(`admission.${variant}.${name}`, spread(xs, unit));
    }
  }
  for (const part of conversions) {
    const key = `conversion.${part.cache ? 'cache' : 'nocache'}`;
    for (const v of ['v1', 'v2'] as const) {
      const runs = part.lists.filter((r) => r.variant === v);
      res.set(`${key}.${v}`, {
        list: spread(runs.map((r) => r.ms / 1000), 's'), apiserverCpu: spread(runs.map((r) => r.apiserverCpuMs / 1000), 'CPU-s'),
        webhookCpu: spread(runs.map((r) => r.webhookCpuMs / 1000), 'CPU-s'),
        converted: spread(runs.map((r) => r.child.batchSizes.reduce((a, b) => a + b, 0)), 'count'),
        reviews: spread(runs.map((r) => r.child.batchSizes.length), 'count'),
      });
    }
    const med = (v: 'v1' | 'v2', f: (r: ListRun) => number): number => median(part.lists.filter((r) => r.variant === v).map(f));
    res.set(`${key}.listRatio`, ratio(med('v1', (r) => r.ms), med('v2', (r) => r.ms)));
    res.set(`${key}.webhookCpuPerObject`, val((1000 * med('v1', (r) => r.webhookCpuMs)) / NETWORKS, 'CPU-µs'));
    res.set(`${key}.apiserverCpuPerObject`, val((1000 * (med('v1', (r) => r.apiserverCpuMs) - med('v2', (r) => r.apiserverCpuMs))) / NETWORKS, 'CPU-µs'));
    res.set(`${key}.create`, {
      wall: val(part.create.ms / 1000, 's'), reviews: val(part.create.stats.batchSizes.length, 'count'),
      webhookCpuPerObject: val((1000 * part.create.webhookCpuMs) / NETWORKS, 'CPU-µs'),
      ...(part.cache ? { cacheFilled: val(part.create.settleMs / 1000, 's') } : {}),
    });
    if (part.restart && !(part.restart instanceof Error)) res.set(`${key}.restartRefill`, val(part.restart.ms / 1000, 's'));
  }
  res.set('networks', val(NETWORKS, 'count'));
  res.set('rate', val(RATE, '/s'));
}

async function main(): Promise<number> {
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const res = new BenchResults('webhook', {
    name: 'no webhook / the storage version',
    description: 'admission: the same dry-run writes with the webhook configuration deleted (`admission.none`), ABBA in the same run; ' +
      'conversion: the same Networks listed as v2, the storage version (`conversion.*.v2`), ABBA in the same run',
  });
  const load0 = loadavg();
  const { cp, stop } = await startPrivateControlPlane('tscm-bench-webhook-', `webhooks: ${RATE} writes/s × ${SECONDS} s × ${ROUNDS} rounds each; ${NETWORKS} Networks listed ${LIST_ROUNDS} rounds each`);
  let child: WebhookChild | undefined;
  let h2child: WebhookChild | undefined;
  const rest = restClient(cp);
  let cp2: ControlPlane | undefined;
  let rest2: RestClient | undefined;
  try {
    const version = (JSON.parse((await cp.get('/version')).body) as { gitVersion?: string }).gitVersion ?? '?';
    const started = await WebhookChild.start();
    child = started.child;
    const base = `https://127.0.0.1:${started.port}`;
    progress(`webhook process ${child.pid} serving on ${base}`);
    const [crd] = readCRDs([join(repoRoot, 'config/crd/v2/samplecrd.k8s.io_networks.yaml')]);
    if (!crd) throw new Error('config/crd/v2 has no CRD');
    const conv = (crd.spec as { conversion: { webhook: { clientConfig: Record<string, unknown> } } }).conversion;
    conv.webhook.clientConfig = { url: `${base}/convert`, caBundle: started.caBundle };
    await applyCRDs(rest, [crd], ['config/crd/v2']);
    await createNamespace(cp, ADMIT_NS);

    // ---- Part 1
    const phases: AdmitPhase[] = [];
    if (PARTS.has('admission') && COMPARE_HTTP2) {
      const h2 = await WebhookChild.start(true);
      h2child = h2.child;
      const h2base = `https://127.0.0.1:${h2.port}`;
      progress(`HTTP/2 webhook process ${h2.child.pid} serving on ${h2base}; comparing it with the HTTP/1.1 one (${child.pid}), ABBA`);
      const targets = {
        webhook: { base, caBundle: started.caBundle, child },
        'webhook-h2': { base: h2base, caBundle: h2.caBundle, child: h2.child },
      } as const;
      for (const v of ['webhook', 'webhook-h2'] as const) {
        progress(`admission: warm-up ${Math.min(SECONDS, 5)} s, ${v} (not counted)`);
        await setWebhook(rest, true, targets[v].base, targets[v].caBundle, targets[v].child);
        await admitPhase(cp, rest, targets[v].child, v, Math.min(SECONDS, 5), `warm-${v}`);
      }
      let current: 'webhook' | 'webhook-h2' = 'webhook-h2';
      for (const [i, variant] of abba<'webhook' | 'webhook-h2'>('webhook', 'webhook-h2', ROUNDS).entries()) {
        if (variant !== current) {
          current = variant;
          await setWebhook(rest, true, targets[variant].base, targets[variant].caBundle, targets[variant].child);
        }
        const p = await admitPhase(cp, rest, targets[variant].child, variant, SECONDS, `c${i}`);
        phases.push(p);
        progress(`admission ${i + 1}/${2 * ROUNDS} ${variant}: ${p.ok}/${p.due} ok, ${JSON.stringify(p.errors)} errors, ${p.skipped} skipped; ` +
          `webhook's own handling p50 ${f2(percentile(p.served, 50))} p99 ${f2(percentile(p.served, 99))} max ${f2(Math.max(...p.served))} ms, from headers p99 ${f1(percentile(p.withBody, 99))} ms ` +
          `(${p.served.length} calls, ${p.child.h2Calls} over h2, ${p.child.connections} new connections, ${f0(p.child.cpuMs)} CPU-ms = ${f0((1000 * p.child.cpuMs) / Math.max(1, p.served.length))} µs/call); ` +
          `client p50 ${f1(percentile(p.clientMs, 50))} p99 ${f1(percentile(p.clientMs, 99))} ms; load ${f1(p.load)}`);
      }
      await setWebhook(rest, false, base, started.caBundle);
    } else if (PARTS.has('admission')) {
      progress(`admission: warm-up ${Math.min(SECONDS, 5)} s with the webhook (not counted)`);
      await setWebhook(rest, true, base, started.caBundle);
      let webhookOn = true;
      await admitPhase(cp, rest, child, 'webhook', Math.min(SECONDS, 5), 'warm');
      for (const [i, variant] of abba<AdmitVariant>('webhook', 'none', ROUNDS).entries()) {
        if ((variant === 'webhook') !== webhookOn) {
          webhookOn = variant === 'webhook';
          await setWebhook(rest, webhookOn, base, started.caBundle);
        }
        const p = await admitPhase(cp, rest, child, variant, SECONDS, `r${i}`);
        phases.push(p);
        res.sampleLoad();
        progress(`admission ${i + 1}/${2 * ROUNDS} ${variant}: ${p.ok}/${p.due} ok, ${JSON.stringify(p.errors)} errors, ${p.skipped} skipped; ` +
          `webhook's own handling p50 ${f2(percentile(p.served, 50))} p99 ${f2(percentile(p.served, 99))} max ${f2(Math.max(...p.served))} ms, from headers p99 ${f1(percentile(p.withBody, 99))} ms (${p.served.length} calls, ${p.child.connections} new connections, ${f0(p.child.cpuMs)} CPU-ms); ` +
          `client p50 ${f1(percentile(p.clientMs, 50))} p99 ${f1(percentile(p.clientMs, 99))} ms; load ${f1(p.load)}`);
      }
      if (webhookOn) await setWebhook(rest, false, base, started.caBundle);
      const callers = { direct: directCaller(base, started.caBundle, true), 'direct-new': directCaller(base, started.caBundle, false) };
      try {
        await admitPhase(cp, rest, child, 'direct', Math.min(SECONDS, 5), 'warm-direct', callers.direct.send);
        for (const [i, variant] of abba<'direct' | 'direct-new'>('direct', 'direct-new', ROUNDS).entries()) {
          const p = await admitPhase(cp, rest, child, variant, SECONDS, `d${i}`, callers[variant].send);
          phases.push(p);
          progress(`admission ${i + 1}/${2 * ROUNDS} ${variant}: ${p.ok}/${p.due} ok, ${JSON.stringify(p.errors)} errors, ${p.skipped} skipped; ` +
            `webhook's own handling p50 ${f2(percentile(p.served, 50))} p99 ${f2(percentile(p.served, 99))} max ${f2(Math.max(...p.served))} ms, ` +
            `from headers p99 ${f1(percentile(p.withBody, 99))} ms (${p.served.length} calls, ${p.child.connections} new connections, ${f0(p.child.cpuMs)} CPU-ms); load ${f1(p.load)}`);
        }
      } finally {
        callers.direct.close();
        callers['direct-new'].close();
      }
    }

    // ---- Part 2: on this control plane (watch cache on), then on a fresh one without a watch cache for Networks
    const conversions: ConversionPart[] = [];
    if (PARTS.has('conversion')) {
      const withCache = await conversionPart(cp, rest, child, true);
      await rest.close();
      await stop();
      const dir2 = mkdtempSync(join(tmpdir(), 'tscm-bench-webhook-nocache-'));
      progress(`starting a second private minimal control plane in ${dir2}: kube-apiserver --watch-cache-sizes=${NO_CACHE}`);
      cp2 = await ControlPlane.start({ mode: 'minimal', dir: dir2, log: (m) => progress(`cluster: ${m}`), extraArgs: { 'kube-apiserver': [`--watch-cache-sizes=${NO_CACHE}`] } });
      rest2 = restClient(cp2);
      await applyCRDs(rest2, [crd], ['config/crd/v2']);
      const noCache = await conversionPart(cp2, rest2, child, false);
      conversions.push(noCache, withCache);
    }
    const load1 = loadavg();
    recordWebhookResults(res, phases, conversions);
    res.write();

    // ---- Report
    const out: string[] = [];
    const of = (v: AdmitVariant): AdmitPhase[] => phases.filter((p) => p.variant === v);
    const cols = (f: (p: AdmitPhase) => number, fmt: (x: number) => string, only?: AdmitVariant | 'hooked'): string[] =>
      (['webhook', 'none', 'direct', 'direct-new'] as const).map((v) => (only && v !== only && !(only === 'hooked' && v !== 'none') ? '—' : mm(of(v).map(f), fmt)));
    const p99s = of('webhook').map((p) => percentile(p.served, 99));
    const directP99s = of('direct').map((p) => percentile(p.served, 99));
    const medP99 = median(p99s);
    const met = medP99 <= GOAL_P99_MS;
    if (phases.length > 0 && COMPARE_HTTP2) {
      const vs = ['webhook', 'webhook-h2'] as const;
      const c2 = (f: (p: AdmitPhase) => number, fmt: (x: number) => string): string[] => vs.map((v) => mm(of(v).map(f), fmt));
      out.push(`## Admission through the API server, the webhook over HTTP/1.1 vs HTTP/2: ${RATE} dry-run creates/s, open-loop, ${SECONDS} s per phase`, '');
      out.push(markdownTable([`median (min–max) of ${ROUNDS} phases each, ABBA`, 'webhook HTTP/1.1 only', 'webhook HTTP/2 (http2: true)'], [
        ['webhook\'s own handling p50, ms (body received → answer written, in its process)', ...c2((p) => percentile(p.served, 50), f2)],
        ['webhook\'s own handling p99, ms', ...c2((p) => percentile(p.served, 99), f2)],
        ['webhook\'s own handling max, ms', ...c2((p) => Math.max(...p.served), f1)],
        ['headers received → answer written p50 / p99, ms', ...vs.map((v) => `${mm(of(v).map((p) => percentile(p.withBody, 50)), f2)} / ${mm(of(v).map((p) => percentile(p.withBody, 99)), f1)}`)],
        ['admission calls served per s', ...c2((p) => p.served.length / p.seconds, f0)],
        ['… of which over HTTP/2, %', ...c2((p) => (100 * p.child.h2Calls) / Math.max(1, p.served.length), f1)],
        ['API server\'s call to the webhook: mean, ms', ...c2((p) => (1000 * p.apiserver.sum) / p.apiserver.count, f2)],
        ['… calls ≤ 5 ms (its histogram), %', ...c2((p) => (100 * p.apiserver.le5) / p.apiserver.count, f1)],
        ['whole write at the client: p50, ms', ...c2((p) => percentile(p.clientMs, 50), f1)],
        ['whole write at the client: p99, ms', ...c2((p) => percentile(p.clientMs, 99), f1)],
        ['writes answered per s', ...c2((p) => p.ok / p.seconds, f0)],
        ['writes failed / skipped', ...c2((p) => Object.values(p.errors).reduce((a, b) => a + b, 0) + p.skipped, f0)],
        ['kube-apiserver CPU, cores', ...c2((p) => p.apiserverCpuMs / 1000 / p.seconds, f2)],
        ['new connections to the webhook', ...c2((p) => p.child.connections, f0)],
        ['most calls in the webhook at once', ...c2((p) => p.child.maxInFlight, f0)],
        ['webhook process CPU per call, µs', ...c2((p) => (1000 * p.child.cpuMs) / Math.max(1, p.served.length), f0)],
        ['webhook process: event-loop delay p99, ms', ...c2((p) => p.child.loopDelay.p99, f1)],
        ['webhook process: run-queue wait, ms per s', ...c2((p) => p.child.runQueueMs / p.seconds, f1)],
        ['1-min load average at the end', ...c2((p) => p.load, f1)],
      ]), '');
      const h2p99 = of('webhook-h2').map((p) => percentile(p.served, 99));
      out.push(`Goal: webhook's own handling p99 ≤ ${GOAL_P99_MS} ms at ${RATE} calls/s — HTTP/2: median p99 ${f2(median(h2p99))} ms (${median(h2p99) <= GOAL_P99_MS ? 'MET' : 'NOT MET'}; phases ${h2p99.map(f2).join(', ')} ms); ` +
        `HTTP/1.1: median p99 ${f2(medP99)} ms (phases ${p99s.map(f2).join(', ')} ms).`, '');
    } else if (phases.length > 0) {
      out.push(`## Admission through the API server: ${RATE} dry-run creates/s, open-loop, ${SECONDS} s per phase`, '');
      out.push(markdownTable([`median (min–max) of ${ROUNDS} phases each (ABBA within each pair of columns)`, 'through the API server, validating webhook', 'through the API server, no webhook (anchor)',
        `the webhook alone (direct HTTPS, ≤ ${DIRECT_CONNECTIONS} keep-alive connections)`, 'the webhook alone, a new TLS connection per call'], [
        ['webhook\'s own handling p50, ms (body received → answer written, in its process)', ...cols((p) => percentile(p.served, 50), f2, 'hooked')],
        ['webhook\'s own handling p99, ms', ...cols((p) => percentile(p.served, 99), f2, 'hooked')],
        ['webhook\'s own handling max, ms', ...cols((p) => Math.max(...p.served), f1, 'hooked')],
        ['headers received → answer written p50 / p99, ms (adds the sender\'s pace writing the body)', ...(['webhook', 'none', 'direct', 'direct-new'] as const).map((v) => (v === 'none' ? '—'
          : `${mm(of(v).map((p) => percentile(p.withBody, 50)), f2)} / ${mm(of(v).map((p) => percentile(p.withBody, 99)), f1)}`))],
        ['admission calls served per s', ...cols((p) => p.served.length / p.seconds, f0, 'hooked')],
        ['API server\'s call to the webhook: mean, ms', ...cols((p) => (1000 * p.apiserver.sum) / p.apiserver.count, f2, 'webhook')],
        ['… calls ≤ 5 ms (its histogram), %', ...cols((p) => (100 * p.apiserver.le5) / p.apiserver.count, f1, 'webhook')],
        ['whole write (direct: whole call) at the client: p50, ms', ...cols((p) => percentile(p.clientMs, 50), f1)],
        ['whole write (direct: whole call) at the client: p99, ms', ...cols((p) => percentile(p.clientMs, 99), f1)],
        ['writes (calls) answered per s', ...cols((p) => p.ok / p.seconds, f0)],
        ['writes failed / skipped (≥ 512 in flight)', ...cols((p) => Object.values(p.errors).reduce((a, b) => a + b, 0) + p.skipped, f0)],
        ['kube-apiserver CPU, cores', ...cols((p) => p.apiserverCpuMs / 1000 / p.seconds, f2)],
        ['new TLS connections to the webhook', ...cols((p) => p.child.connections, f0, 'hooked')],
        ['most calls in the webhook at once', ...cols((p) => p.child.maxInFlight, f0, 'hooked')],
        ['webhook process CPU per call, µs', ...cols((p) => (1000 * p.child.cpuMs) / Math.max(1, p.served.length), f0, 'hooked')],
        ['webhook process: event-loop delay p99, ms', ...cols((p) => p.child.loopDelay.p99, f1, 'hooked')],
        ['webhook process: run-queue wait, ms per s', ...cols((p) => p.child.runQueueMs / p.seconds, f1, 'hooked')],
        ['driver lateness p99, ms', ...cols((p) => percentile(p.lateMs, 99), f1)],
        ['1-min load average at the end', ...cols((p) => p.load, f1)],
      ]), '');
      out.push(`Goal: webhook's own handling p99 ≤ ${GOAL_P99_MS} ms at ${RATE} calls/s — ${met ? 'MET' : 'NOT MET'}: median p99 ${f2(medP99)} ms ` +
        `(${met ? `${f2(GOAL_P99_MS - medP99)} ms under` : `${f2(medP99 - GOAL_P99_MS)} ms over`}; phases ${p99s.map(f2).join(', ')} ms). ` +
        `The webhook alone at the same rate: median p99 ${f2(median(directP99s))} ms (${median(directP99s) <= GOAL_P99_MS ? 'met' : 'not met'}; phases ${directP99s.map(f2).join(', ')} ms).`, '');
    }

    for (const part of conversions) {
      const lists = part.lists;
      const lof = (v: ListVariant): ListRun[] => lists.filter((r) => r.variant === v);
      const lcols = (f: (r: ListRun) => number, fmt: (x: number) => string): string[] => {
        const a = lof('v1').map(f);
        const b = lof('v2').map(f);
        return [mm(a, fmt), mm(b, fmt), median(b) > 0 ? `${(median(a) / median(b)).toFixed(2)}×` : '—'];
      };
      const perObj = (x: number): number => (1000 * x) / NETWORKS;
      const conv = (r: ListRun): Served[] => r.child.served.filter((x) => x.path === '/convert');
      out.push(part.cache
        ? `## Conversion, watch cache on (kube-apiserver's default): ${thin(NETWORKS)} Networks stored as v2, listed as v1 and as v2 (paged, limit 500)`
        : `## Conversion, no watch cache for Networks (--watch-cache-sizes=${NO_CACHE}): ${thin(NETWORKS)} Networks stored as v2, listed as v1 (every object through /convert) and as v2 (paged, limit 500)`, '');
      out.push(markdownTable([`median (min–max) of ${LIST_ROUNDS} lists each, ABBA`, 'list as v1', 'list as v2 (anchor)', 'v1 ÷ v2'], [
        ['list wall time, s', ...lcols((r) => r.ms / 1000, f2)],
        ['kube-apiserver CPU, s', ...lcols((r) => r.apiserverCpuMs / 1000, f2)],
        ['etcd CPU, s', ...lcols((r) => r.etcdCpuMs / 1000, f2)],
        ['webhook process CPU, s', ...lcols((r) => r.webhookCpuMs / 1000, f2)],
        ['client CPU, s', ...lcols((r) => r.clientCpuMs / 1000, f2)],
        ['objects converted by the webhook', ...lcols((r) => r.child.batchSizes.reduce((a, b) => a + b, 0), f0)],
        ['ConversionReviews sent', ...lcols((r) => r.child.batchSizes.length, f0)],
        ['new TLS connections from the API server', ...lcols((r) => r.child.connections, f0)],
        ['webhook\'s own handling per review: median, ms', ...lcols((r) => median(conv(r).map((x) => x.ownMs)), f2)],
        ['webhook\'s own handling per review: max, ms', ...lcols((r) => Math.max(0, ...conv(r).map((x) => x.ownMs)), f1)],
        ['review request size: median, KiB', ...lcols((r) => median(conv(r).map((x) => x.bytes)) / 1024, f0)],
        ['1-min load average at the end', ...lcols((r) => r.load, f1)],
      ]), '');
      const v1 = median(lof('v1').map((r) => r.ms));
      const v2 = median(lof('v2').map((r) => r.ms));
      const first = lof('v1')[0];
      out.push(`Listing as v1 adds ${f1(perObj(v1 - v2))} µs of list time per object (medians ${f2(v1 / 1000)} s − ${f2(v2 / 1000)} s over ${thin(NETWORKS)}); ` +
        `the webhook process spent ${f1(perObj(median(lof('v1').map((r) => r.webhookCpuMs))))} CPU-µs per object listed; ` +
        `reviews for one paged v1 list: ${first ? sizes(first.child.batchSizes) : '—'} (objects per ConversionReview × reviews).`);
      const c = part.create;
      out.push(`Creating the ${thin(NETWORKS)} (16 in flight): ${f2(c.ms / 1000)} s; meanwhile ${thin(c.stats.batchSizes.length)} ConversionReviews ` +
        `(${sizes(c.stats.batchSizes)}), webhook ${f2(c.webhookCpuMs / 1000)} CPU-s = ${f1(perObj(c.webhookCpuMs))} CPU-µs per object` +
        (part.cache ? `; the v1 cache held every object ${f2(c.settleMs / 1000)} s after the last create.` : '.'));
      const u = part.unpaged;
      out.push(u instanceof Error
        ? `Unpaged v1 LIST (all ${thin(NETWORKS)} in one response): FAILED — ${u.message.slice(0, 300)}`
        : `Unpaged v1 LIST (all ${thin(NETWORKS)} in one response): ${f2(u.ms / 1000)} s, reviews ${sizes(u.child.batchSizes)}, ` +
          `largest ${f0(Math.max(0, ...conv(u).map((x) => x.bytes)) / 1024)} KiB handled in ${f1(Math.max(0, ...conv(u).map((x) => x.ownMs)))} ms, webhook ${f2(u.webhookCpuMs / 1000)} CPU-s.`);
      const r = part.restart;
      if (r) {
        out.push(r instanceof Error
          ? `kube-apiserver restart over the ${thin(NETWORKS)}: FAILED — ${r.message.slice(0, 300)}`
          : `kube-apiserver restarted over the ${thin(NETWORKS)}: its v1 cache was refilled through the webhook ${f2(r.ms / 1000)} s after the start ` +
            `(reviews ${sizes(r.stats.batchSizes)}, webhook ${f2(r.webhookCpuMs / 1000)} CPU-s).`);
      }
      out.push('');
    }
    out.push('', `Environment: ${date}, kube-apiserver ${version} (private minimal control plane, etcd --unsafe-no-fsync), Node ${process.version}, ` +
      `${cpus().length} CPUs shared with other work; load average (1/5/15 min) at start ${load0.map(f2).join(' / ')}, at end ${load1.map(f2).join(' / ')}. ` +
      `Webhook: the library's WebhookServer (HTTPS, self-signed, by url) in its own process${CPU_PROF ? `, under --cpu-prof (${CPU_PROF})` : ''}.`, '');
    process.stdout.write(`\n${out.join('\n')}`);
    return 0;
  } finally {
    await child?.stop().catch(() => {});
    await h2child?.stop().catch(() => {});
    await rest.close();
    await stop();
    await rest2?.close();
    await cp2?.stop();
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
