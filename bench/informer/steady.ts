/**
 * Steady state on the real API server: one ConfigMap informer (SharedInformerFactory, one namespace, synced on an
 * empty namespace) with a handler that enqueues `ns/name` into a work queue drained by a worker, while a SEPARATE
 * load-generator process (load.ts) writes:
 *
 *  1. Throughput: `creates` ConfigMaps as fast as the API server takes them (`concurrency` in flight). Measured:
 *     ADDED events the handler saw per second, from its first to its last live event; reference: the writes the API
 *     server acknowledged per second (first send → last ack) in the generator. With 2 cores shared by etcd,
 *     kube-apiserver, the generator and the informer this is API-LIMITED: the informer can only see as many events as
 *     the server commits. The informer's own capacity is measured by replay.ts.
 *  2. Latency: paced merge-patches at `rate`/s for `durationMs` (open loop; see load.ts), then again at half the
 *     measured create rate (a rate this API server sustains) when that is lower. Each write carries its send time
 *     (data.sentAt, CLOCK_MONOTONIC ns taken just before the request is written); the handler records its own time
 *     on the same machine-wide clock. Reported per phase:
 *       - send → handler: the whole path client → kube-apiserver → etcd commit → watch cache → watch stream →
 *         decode → DeltaQueue → handler (the headline number);
 *       - ack → handler: handler time − the time the generator received the write's response (the generator reports
 *         [sentAt, ackedAt] per write); negative when the event beat the response;
 *       - informer-internal: decoded object entering the informer (transform) → handler;
 *       - reference (raw API): the generator's send → response latency of the same writes.
 *
 * Meanwhile a plain watch (no informer, bytes only kept) records the raw watch stream of the namespace from the
 * informer's synced resourceVersion, for the replay benchmark.
 */
import type { ControlPlane } from '../../test/cluster/controlplane.ts';
import { SharedInformerFactory, stripManagedFields } from '../../pkg/informerfactory/index.ts';
import { metaNamespaceKey } from '../../pkg/apimachinery/keys.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { collectionPath } from '../../pkg/apimachinery/paths.ts';
import { coreResources } from '../../pkg/apimachinery/resource.ts';
import { Queue } from '../../pkg/workqueue/index.ts';
import { progress, restClient, runLoad, until } from './cluster.ts';
import type { LoadResult } from './load.ts';
import { monoNs, msBetween, percentile, procCpuMs, runQueueWaitMs } from './stats.ts';

type ConfigMap = KubeObject & { data?: Record<string, string> };

export interface SteadyOptions {
  namespace: string;
  /** Prefix of the ConfigMaps created in the throughput phase (and patched in the latency phase). */
  prefix: string;
  creates: number;
  concurrency: number;
  rate: number;
  durationMs: number;
}

export interface LatencyResult {
  /** Requested writes per second. */
  rate: number;
  samples: number;
  /** Client send timestamp (in the object) → handler. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Write acknowledged (response received by the client) → handler; negative when the event beat the response. */
  ackP50Ms: number;
  ackP99Ms: number;
  /** Decoded object entering the informer (transform) → handler. */
  internalP50Ms: number;
  internalP99Ms: number;
  /** Writes per second the generator achieved (send of first → ack of last). */
  achievedRate: number;
  /** ms per wall second this process's JavaScript thread spent runnable but waiting for a CPU. */
  runQueueWaitPerS: number;
  load: LoadResult;
}

/** CPU used during the live throughput phase, in cores (CPU time / wall time). */
export interface CpuShare {
  wallMs: number;
  apiserver: number;
  etcd: number;
  generator: number;
  /** This process: the informer, handler, queue and the raw recorder watch. */
  bench: number;
}

export interface SteadyResult {
  throughput: { events: number; handlerRate: number; load: LoadResult; cpu: CpuShare };
  /** One entry per latency phase: the requested rate first, then (if lower) a rate the API server sustains. */
  latency: LatencyResult[];
  /** The raw watch stream bytes (cut after the last complete line) and the resourceVersion it starts after. */
  recording: { chunks: Uint8Array[]; startResourceVersion: string; bytes: number };
}

/** Half the API server's measured create rate, rounded down to a multiple of 50 (at least 50). */
export function sustainableRate(createAckRate: number): number {
  return Math.max(50, Math.floor((createAckRate * 0.5) / 50) * 50);
}

export async function steadyState(cp: ControlPlane, opts: SteadyOptions): Promise<SteadyResult> {
  const received = new WeakMap<object, bigint>();
  const factory = new SharedInformerFactory({ client: restClient(cp), namespaces: [opts.namespace] });
  const informer = factory.informerFor<ConfigMap>(coreResources.configMaps, {
    // The default transform plus a timestamp of when the decoded object entered the informer.
    transform: (o: KubeObject) => {
      received.set(o, monoNs());
      return stripManagedFields(o);
    },
  });
  const queue = new Queue<string>();
  let phase: 'throughput' | 'latency' = 'throughput';
  let adds = 0;
  let firstAdd = 0n;
  let lastAdd = 0n;
  let updates = 0;
  /** sentAt (decimal ns) → handler time, for the current latency phase. */
  let handled = new Map<string, bigint>();
  let internal: number[] = [];
  informer.addEventHandler({
    onAdd: (obj, initial) => {
      queue.add(metaNamespaceKey(obj));
      if (initial) return;
      const now = monoNs();
      if (adds++ === 0) firstAdd = now;
      lastAdd = now;
    },
    onUpdate: (_old, obj) => {
      queue.add(metaNamespaceKey(obj));
      const now = monoNs();
      updates++;
      const sentAt = obj.data?.['sentAt'];
      if (phase !== 'latency' || !sentAt) return;
      handled.set(sentAt, now);
      const got = received.get(obj);
      if (got !== undefined) internal.push(msBetween(got, now));
    },
  });
  const worker = (async (): Promise<void> => {
    for (;;) {
      const r = await queue.get();
      if (r.shutdown) return;
      queue.done(r.item);
    }
  })();
  const ac = new AbortController();
  const running = factory.run(ac.signal);
  const recorderAbort = new AbortController();
  try {
    if (!(await factory.waitForCacheSync({ timeoutMs: 60_000 }))) throw new Error('steady-state informer did not sync');
    const startRv = informer.lastSyncResourceVersion();

    // The recorder: a plain watch from the same resourceVersion, keeping the bytes only.
    const rec = restClient(cp);
    const res = await rec.request('GET', collectionPath(coreResources.configMaps, opts.namespace), {
      query: { watch: 'true', allowWatchBookmarks: 'true', resourceVersion: startRv, timeoutSeconds: 3600 },
      signal: recorderAbort.signal,
      timeoutMs: 0,
    });
    if (res.status !== 200 || !res.body) throw new Error(`recorder watch: HTTP ${res.status}`);
    const chunks: Uint8Array[] = [];
    const body = res.body as AsyncIterable<Uint8Array>;
    const recording = (async (): Promise<void> => {
      try {
        for await (const chunk of body) chunks.push(chunk);
      } catch {
        /* aborted */
      }
    })();

    progress(`steady state: creating ${opts.creates} ConfigMaps from a separate process (${opts.concurrency} in flight)`);
    const pidOf = (name: 'kube-apiserver' | 'etcd'): number => cp.state.components[name]?.pid ?? -1;
    const cpu0 = { at: monoNs(), apiserver: procCpuMs(pidOf('kube-apiserver')), etcd: procCpuMs(pidOf('etcd')), bench: process.cpuUsage() };
    const createLoad = await runLoad(cp, {
      mode: 'create', kind: 'configmap', namespace: opts.namespace, prefix: opts.prefix, count: opts.creates,
      concurrency: opts.concurrency, label: 'steady-state creates',
    });
    await until('the handler saw every create', () => adds >= opts.creates, 120_000, 20);
    const wallMs = msBetween(cpu0.at, monoNs());
    const benchCpu = process.cpuUsage(cpu0.bench);
    const cpu: CpuShare = {
      wallMs,
      apiserver: (procCpuMs(pidOf('kube-apiserver')) - cpu0.apiserver) / wallMs,
      etcd: (procCpuMs(pidOf('etcd')) - cpu0.etcd) / wallMs,
      // The generator's whole life (startup included) falls inside this window.
      generator: createLoad.cpuMs / wallMs,
      bench: (benchCpu.user + benchCpu.system) / 1000 / wallMs,
    };
    const spanS = msBetween(firstAdd, lastAdd) / 1000;
    const handlerRate = spanS > 0 ? (adds - 1) / spanS : NaN;
    progress(`steady state: handler saw ${adds} adds at ${Math.round(handlerRate)}/s; API acked ${Math.round(createLoad.ackRate)}/s`);

    phase = 'latency';
    const latency: LatencyResult[] = [];
    const rates = [opts.rate];
    const lower = sustainableRate(createLoad.ackRate);
    if (lower < opts.rate) rates.push(lower);
    for (const rate of rates) {
      handled = new Map();
      internal = [];
      const updatesBefore = updates;
      const wait0 = runQueueWaitMs();
      const t0 = monoNs();
      progress(`latency: ${rate} patches/s for ${opts.durationMs / 1000}s from a separate process`);
      const load = await runLoad(cp, {
        mode: 'patch', kind: 'configmap', namespace: opts.namespace, prefix: opts.prefix, count: opts.creates,
        concurrency: 64, rate, durationMs: opts.durationMs, label: `latency patches at ${rate}/s`, reportAcks: true,
      });
      await until('the handler saw every patch', () => updates - updatesBefore >= load.writes, 120_000, 20);
      const runQueueWaitPerS = ((runQueueWaitMs() - wait0) / msBetween(t0, monoNs())) * 1000;
      const fromSend: number[] = [];
      const fromAck: number[] = [];
      for (const [sentAt, ackedAt] of load.acks ?? []) {
        const at = handled.get(sentAt);
        if (at === undefined) continue;
        fromSend.push(msBetween(BigInt(sentAt), at));
        fromAck.push(msBetween(BigInt(ackedAt), at));
      }
      if (fromSend.length !== load.writes) throw new Error(`latency: matched ${fromSend.length} of ${load.writes} writes`);
      const r: LatencyResult = {
        rate,
        samples: fromSend.length,
        p50Ms: percentile(fromSend, 50),
        p99Ms: percentile(fromSend, 99),
        maxMs: percentile(fromSend, 100),
        ackP50Ms: percentile(fromAck, 50),
        ackP99Ms: percentile(fromAck, 99),
        internalP50Ms: percentile(internal, 50),
        internalP99Ms: percentile(internal, 99),
        achievedRate: load.ackRate,
        runQueueWaitPerS,
        load: { ...load, acks: undefined },
      };
      latency.push(r);
      progress(`latency at ${rate}/s (achieved ${Math.round(r.achievedRate)}/s): send→handler p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms`);
    }

    recorderAbort.abort();
    await recording;
    const bytes = trimToLastLine(chunks);
    return {
      throughput: { events: adds, handlerRate, load: createLoad, cpu },
      latency,
      recording: { chunks, startResourceVersion: startRv, bytes },
    };
  } finally {
    recorderAbort.abort();
    ac.abort();
    await running;
    queue.shutDown();
    await worker;
  }
}

/** Drops bytes after the last newline (the recorder was cut mid-stream); returns the bytes kept. */
function trimToLastLine(chunks: Uint8Array[]): number {
  while (chunks.length > 0) {
    const last = chunks[chunks.length - 1] as Uint8Array;
    const nl = last.lastIndexOf(0x0a);
    if (nl === last.length - 1) break;
    if (nl >= 0) {
      chunks[chunks.length - 1] = last.subarray(0, nl + 1);
      break;
    }
    chunks.pop();
  }
  return chunks.reduce((n, c) => n + c.length, 0);
}
