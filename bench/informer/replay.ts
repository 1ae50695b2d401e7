/**
 * Informer-path capacity without the network: the raw watch stream recorded from the real API server during the
 * steady-state run (steady.ts: the ADDED events of the creates and the MODIFIED events of the patches, real objects
 * with managedFields, in the chunks as they arrived) is replayed through a SharedIndexInformer:
 *
 *   recorded chunks ─▶ decodeWatchStream ─▶ Reflector ─▶ transform (strip managedFields) ─▶ DeltaQueue ─▶ Indexer
 *                                                                                    ─▶ handler ─▶ work queue
 *
 * Only the ListWatcher is replaced (list = empty page at the recording's start resourceVersion; first watch = the
 * recording; later watches stay open until stop). Measured: events per second from informer start until the handler
 * has seen every recorded ADDED/MODIFIED/DELETED event.
 *
 * Reference: the least any client must do with the same bytes — UTF-8 decode, split lines, JSON.parse each event.
 */
import {
  decodeWatchStream, SharedIndexInformer, type ListPage, type ListWatcher, type WatchEvent, type WatchRequest,
} from '../../pkg/informerfactory/index.ts';
import { metaNamespaceKey } from '../../pkg/apimachinery/keys.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { coreResources } from '../../pkg/apimachinery/resource.ts';
import { Queue } from '../../pkg/workqueue/index.ts';
import { until } from './cluster.ts';
import { monoNs, msBetween, percentile, runQueueWaitMs, selfCpuMs } from './stats.ts';

export interface ReplayResult {
  events: number;
  ms: number;
  /** CPU time this process used meanwhile: events per CPU-second is the capacity with one core to itself. */
  cpuMs: number;
}

/** Raw decode of the recording: returns the number of non-BOOKMARK events and the time taken. */
export function rawDecode(chunks: readonly Uint8Array[]): ReplayResult {
  const cpu0 = process.cpuUsage();
  const start = monoNs();
  const decoder = new TextDecoder();
  let carry = '';
  let events = 0;
  for (const chunk of chunks) {
    const lines = (carry + decoder.decode(chunk, { stream: true })).split('\n');
    carry = lines.pop() ?? '';
    for (const line of lines) {
      if (line === '') continue;
      const ev = JSON.parse(line) as { type: string };
      if (ev.type !== 'BOOKMARK') events++;
    }
  }
  return { events, ms: msBetween(start, monoNs()), cpuMs: selfCpuMs(cpu0) };
}

function openUntilAborted(signal: AbortSignal): AsyncIterable<WatchEvent<KubeObject>> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: () => new Promise<IteratorResult<WatchEvent<KubeObject>>>((resolve) => {
        const end = (): void => resolve({ done: true, value: undefined });
        if (signal.aborted) end();
        else signal.addEventListener('abort', end, { once: true });
      }),
    }),
  };
}

class ReplayListWatcher implements ListWatcher {
  private watches = 0;
  private readonly chunks: readonly Uint8Array[];
  private readonly startRv: string;

  constructor(chunks: readonly Uint8Array[], startRv: string) {
    this.chunks = chunks;
    this.startRv = startRv;
  }

  list(): Promise<ListPage> {
    return Promise.resolve({ items: [], continueToken: undefined, resourceVersion: this.startRv });
  }

  watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent<KubeObject>>> {
    if (this.watches++ > 0) return Promise.resolve(openUntilAborted(req.signal));
    const chunks = this.chunks;
    // The recorded chunks, one per iteration step (as a socket would hand them over).
    const source: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => {
        let i = 0;
        return {
          next: (): Promise<IteratorResult<Uint8Array>> => Promise.resolve(
            i < chunks.length ? { done: false, value: chunks[i++] as Uint8Array } : { done: true, value: undefined },
          ),
        };
      },
    };
    return Promise.resolve(decodeWatchStream<KubeObject>(source, { onData: req.onData }));
  }
}

/** Replays the recording through a fresh informer; `expected` = rawDecode(...).events. */
export async function replayThroughInformer(chunks: readonly Uint8Array[], startRv: string, expected: number): Promise<ReplayResult> {
  const informer = new SharedIndexInformer<KubeObject>({
    resource: coreResources.configMaps,
    listWatcherFor: () => new ReplayListWatcher(chunks, startRv),
  });
  const queue = new Queue<string>();
  let seen = 0;
  let end = 0n;
  let cpuMs = 0;
  const cpu0 = process.cpuUsage();
  const count = (): void => {
    if (++seen === expected) {
      end = monoNs();
      cpuMs = selfCpuMs(cpu0);
    }
  };
  informer.addEventHandler({
    onAdd: (obj, initial) => {
      queue.add(metaNamespaceKey(obj));
      if (!initial) count();
    },
    onUpdate: (_old, obj) => {
      queue.add(metaNamespaceKey(obj));
      count();
    },
    onDelete: () => count(),
  });
  const worker = (async (): Promise<void> => {
    for (;;) {
      const r = await queue.get();
      if (r.shutdown) return;
      queue.done(r.item);
    }
  })();
  const ac = new AbortController();
  const start = monoNs();
  const running = informer.start(ac.signal);
  try {
    await until(`replay of ${expected} events`, () => seen >= expected, 300_000, 10);
  } finally {
    ac.abort();
    await running;
    queue.shutDown();
    await worker;
  }
  return { events: seen, ms: msBetween(start, end), cpuMs };
}

export interface PacedLatencyResult {
  events: number;
  rate: number;
  /** CPU time this process used / wall time while pacing. */
  cpuShare: number;
  /** ms per wall second the JavaScript thread spent runnable but waiting for a CPU (machine contention). */
  runQueueWaitPerS: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

interface RecordedEvent {
  line: Uint8Array;
  type: string;
  object: KubeObject;
}

function splitEvents(chunks: readonly Uint8Array[]): RecordedEvent[] {
  const all = Buffer.concat(chunks);
  const out: RecordedEvent[] = [];
  let from = 0;
  for (let nl = all.indexOf(0x0a, from); nl >= 0; nl = all.indexOf(0x0a, from)) {
    const line = all.subarray(from, nl + 1);
    from = nl + 1;
    if (line.length <= 1) continue;
    const ev = JSON.parse(line.toString('utf8')) as { type: string; object: KubeObject };
    out.push({ line, type: ev.type, object: ev.object });
  }
  return out;
}

const eventKey = (o: KubeObject): string => `${o.metadata?.name ?? ''}@${o.metadata?.resourceVersion ?? ''}`;

/**
 * Informer-path latency at a given event rate, without the network: the LAST `rate × durationMs` recorded events
 * (the patches, i.e. MODIFIED events of existing objects) are handed to the informer's watch decoder one event at a
 * time on a fixed schedule (event i due at start + i/rate; timers have ~1 ms granularity), after a list that returns
 * the state the recording had reached before them; the schedule starts once the handler has processed that initial
 * list (steady state). Latency: bytes of an event handed to the decoder → handler call.
 */
export async function replayPacedLatency(chunks: readonly Uint8Array[], startRv: string, rate: number, durationMs: number): Promise<PacedLatencyResult> {
  const all = splitEvents(chunks).filter((e) => e.type !== 'BOOKMARK');
  const k = Math.min(all.length - 1, Math.round((rate * durationMs) / 1000));
  const before = all.slice(0, all.length - k);
  const windowEvents = all.slice(all.length - k);
  // The state of the namespace just before the window: what a LIST at that resourceVersion would return.
  const state = new Map<string, KubeObject>();
  for (const e of before) {
    const name = e.object.metadata?.name ?? '';
    if (e.type === 'DELETED') state.delete(name);
    else state.set(name, e.object);
  }
  const listRv = before.at(-1)?.object.metadata?.resourceVersion ?? startRv;
  const released = new Map<string, bigint>();
  // Pacing starts once the informer is synced and the handler has processed the initial list (steady state).
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const intervalNs = BigInt(Math.round(1e9 / rate));
  const lw: ListWatcher = {
    list: () => Promise.resolve({ items: [...state.values()], continueToken: undefined, resourceVersion: listRv }),
    watch: (req) => {
      let i = 0;
      let start: bigint | undefined;
      const source: AsyncIterable<Uint8Array> = {
        [Symbol.asyncIterator]: () => ({
          next: async (): Promise<IteratorResult<Uint8Array>> => {
            const e = windowEvents[i];
            if (e === undefined) {
              await new Promise<void>((resolve) => {
                if (req.signal.aborted) resolve();
                else req.signal.addEventListener('abort', () => resolve(), { once: true });
              });
              return { done: true, value: undefined };
            }
            if (start === undefined) {
              await ready;
              start = monoNs();
            }
            const due = start + BigInt(i) * intervalNs;
            const wait = msBetween(monoNs(), due);
            if (wait > 0) await new Promise((r) => setTimeout(r, Math.ceil(wait)));
            i++;
            released.set(eventKey(e.object), monoNs());
            return { done: false, value: e.line };
          },
        }),
      };
      return Promise.resolve(decodeWatchStream<KubeObject>(source, { onData: req.onData }));
    },
  };
  const informer = new SharedIndexInformer<KubeObject>({ resource: coreResources.configMaps, listWatcherFor: () => lw });
  const queue = new Queue<string>();
  const latencies: number[] = [];
  const record = (obj: KubeObject): void => {
    const now = monoNs();
    const at = released.get(eventKey(obj));
    if (at !== undefined) latencies.push(msBetween(at, now));
  };
  const reg = informer.addEventHandler({
    onAdd: (obj, initial) => {
      queue.add(metaNamespaceKey(obj));
      if (!initial) record(obj);
    },
    onUpdate: (_old, obj) => {
      queue.add(metaNamespaceKey(obj));
      record(obj);
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
  const running = informer.start(ac.signal);
  let cpuShare: number;
  let runQueueWaitPerS: number;
  try {
    await until('paced replay: handler synced on the initial list', () => reg.hasSynced(), 120_000, 5);
    const cpu0 = process.cpuUsage();
    const wait0 = runQueueWaitMs();
    const t0 = monoNs();
    markReady();
    await until(`paced replay of ${k} events`, () => latencies.length >= k, durationMs + 120_000, 20);
    const wallMs = msBetween(t0, monoNs());
    cpuShare = selfCpuMs(cpu0) / wallMs;
    runQueueWaitPerS = ((runQueueWaitMs() - wait0) / wallMs) * 1000;
  } finally {
    ac.abort();
    await running;
    queue.shutDown();
    await worker;
  }
  return { events: latencies.length, rate, cpuShare, runQueueWaitPerS, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), maxMs: percentile(latencies, 100) };
}
