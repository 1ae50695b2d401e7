/**
 * Queue: the basic work queue (client-go util/workqueue semantics, async instead of goroutines), with priorities
 * (controller-runtime's priority queue, plus aging so nothing starves).
 *
 *  - Priorities: `add(item, priority)`; higher first (`PriorityNormal` = 0 for real changes, `PriorityLow` = -100 for
 *    the initial list and resyncs). Within one priority, items are handed out in the order they were added (FIFO).
 *    Without priorities (every add at the default) the queue is exactly the FIFO below.
 *  - No starvation (aging): an item that has waited `maxWaitMs` (default 30 s) or longer is handed out before any
 *    younger item whatever their priorities, oldest first. So a lower-priority item waits at most `maxWaitMs` plus
 *    the time to work off the items that aged before it, even under a sustained stream of higher-priority adds above
 *    the workers' throughput; higher-priority items are delayed only by aged ones.
 *  - De-duplication keeps the highest priority: adding a waiting item again at a higher priority raises it (its
 *    waiting time keeps counting from the first add); at a lower or equal priority it changes nothing.
 *  - Fair: items of one priority are handed out in the order they were first added (FIFO).
 *  - Stingy: an item added several times before a worker takes it is handed out once ("dirty" set dedup).
 *  - One at a time: an item is never handed to two workers at once. An item added while it is being processed is
 *    remembered (dirty) and queued again only when the worker calls `done(item)`.
 *  - Shutdown: `shutDown()` stops accepting adds and resolves every pending and future `get` with
 *    `{shutdown: true}`; `shutDownWithDrain()` does the same and resolves once every handed-out item is `done`.
 *
 * Items are compared with SameValueZero (Map/Set keys): use strings ("ns/name") or other primitives; two distinct
 * objects with equal contents are two different items.
 *
 * Invariants (between calls):
 *  - `dirty` maps each waiting item to its one live Entry; a bucket may still hold older (stale) entries of an item
 *    whose priority was raised — an entry is live iff `dirty.get(entry.item) === entry` and it is not processing;
 *  - `queued` = number of live entries in buckets = `len()`;
 *  - an item in `dirty` and in `processing` is waiting for its `done` to be queued again (at its dirty priority);
 *  - `processing` maps items being worked on to the priority they were handed out with (`priorityOf`), so a requeue
 *    after the reconcile keeps it;
 *  - `waiters` is non-empty only while nothing is queued and the queue is not shutting down.
 *
 * Deliberate difference from client-go: there, `Get` keeps handing out already-queued items after `ShutDown` until
 * the queue is empty. Here, per our design ("on SIGTERM stop handing out keys, let in-flight reconciles finish"),
 * `get` returns `{shutdown: true}` as soon as shutdown starts, even if items remain (`len()` still counts them; they
 * are dropped with the process — controllers are level-triggered and will see them again after a restart/resync).
 *
 * Concurrency contract: single-threaded JS, so every method is atomic. `get` decides which item a caller receives
 * synchronously (the item enters `processing` before the returned promise settles), so two callers can never
 * receive the same item. The caller that received an item owns it until it calls `done(item)` exactly once; extra
 * `done` calls for an item that is not being processed are ignored.
 */
import { realClock, type Clock } from '../util/clock.ts';
import type { Registry } from 'prom-client';
import { newQueueMetrics, noopQueueMetrics, type QueueMetrics } from './metrics.ts';

/** What `get` resolves with: the next item, or `shutdown: true` as soon as the queue is shutting down. */
export type GetResult<T> = { item: T; shutdown: false } | { item?: undefined; shutdown: true };

/** Priority of real changes (adds, updates, deletes after the cache synced). */
export const PriorityNormal = 0;
/** Priority of the initial list and of resyncs (controller-runtime's LowPriority). */
export const PriorityLow = -100;

/** The basic queue interface (client-go workqueue.Interface, plus priorities). */
export interface WorkQueue<T> {
  /**
   * Marks `item` as needing processing at `priority` (default PriorityNormal). No-op after shutdown; when it is
   * already waiting only a higher priority changes anything (raises it).
   */
  add(item: T, priority?: number): void;
  /** The priority `item` is being processed with, or is waiting at; undefined when the queue does not know it. */
  priorityOf(item: T): number | undefined;
  /** Number of items waiting to be handed out (not counting items being processed). */
  len(): number;
  /**
   * Waits for the next item. Resolves `{item, shutdown:false}` — the caller must call `done(item)` later — or
   * `{shutdown:true}` once the queue is shutting down. Rejects with `signal.reason` if `signal` aborts first (no item
   * is consumed in that case).
   */
  get(signal?: AbortSignal): Promise<GetResult<T>>;
  /** Marks `item` as finished; if it was added meanwhile it is queued again. */
  done(item: T): void;
  /** Stops accepting adds and wakes every waiter with `{shutdown:true}`. Cancels a pending drain wait. */
  shutDown(): void;
  /** Like `shutDown`, and resolves once no item is being processed (immediately if none is). */
  shutDownWithDrain(): Promise<void>;
  /** Whether shutDown (or shutDownWithDrain) was called: adds are ignored from then on. */
  shuttingDown(): boolean;
}

/** Options of `new Queue(opts)`: metrics labels and registry, clock, aging bound. */
export interface QueueOptions {
  /** Metrics name (labels `name` and `controller`). Without a name (and without `metrics`) nothing is recorded. */
  name?: string;
  /** `controller` label value; defaults to `name`. */
  controller?: string;
  /** Registry for the metrics; defaults to globalRegistry. */
  registry?: Registry;
  /** The clock of its timers and time measurements (default the real one; a fake in tests). */
  clock?: Clock;
  /** Use these metrics hooks instead of creating them (shared between the layers of one queue). */
  metrics?: QueueMetrics<unknown>;
  /** Aging bound: an item waiting this long goes before younger ones whatever their priority. Default 30 000 ms. */
  maxWaitMs?: number;
}

/** Default aging bound (see the module comment). */
export const defaultMaxWaitMs = 30_000;

interface Entry<T> {
  item: T;
  priority: number;
  /** Clock time of the add that made the item dirty (raising its priority keeps it). */
  since: number;
}

/** A FIFO of entries of one priority: `list[head..]` are pending (some may be stale). */
interface Bucket<T> {
  priority: number;
  list: Entry<T>[];
  head: number;
}

/** Builds the metrics hooks for a queue from its options (shared by the delaying/rate-limiting layers). */
export function metricsFor<T>(opts: QueueOptions, clock: Clock): QueueMetrics<T> {
  if (opts.metrics) return opts.metrics;
  if (opts.name === undefined || opts.name === '') return noopQueueMetrics;
  return newQueueMetrics<T>({ name: opts.name, controller: opts.controller, registry: opts.registry, clock });
}

interface Waiter<T> {
  resolve(r: GetResult<T>): void;
}

/**
 * The basic work queue (client-go's workqueue with controller-runtime's priorities, plus aging): an item is queued at
 * most once, handed to one consumer at a time, and re-queued after `done` if added while processing.
 */
export class Queue<T> implements WorkQueue<T> {
  private readonly metrics: QueueMetrics<T>;
  private readonly clock: Clock;
  private readonly maxWaitMs: number;
  /** Buckets by priority, highest first. */
  private buckets: Bucket<T>[] = [];
  private queued = 0;
  private readonly dirty = new Map<T, Entry<T>>();
  private readonly processing = new Map<T, number>();
  private readonly waiters: Waiter<T>[] = [];
  private stopping = false;
  /** Pending `shutDownWithDrain` wait, if any. */
  private drain: { promise: Promise<void>; resolve: () => void } | undefined;
  private metricsClosed = false;

  /** An empty queue; its metrics are registered when `opts` names it (see QueueOptions). */
  constructor(opts: QueueOptions = {}) {
    this.clock = opts.clock ?? realClock;
    this.metrics = metricsFor<T>(opts, this.clock);
    this.maxWaitMs = opts.maxWaitMs ?? defaultMaxWaitMs;
  }

  add(item: T, priority: number = PriorityNormal): void {
    if (this.stopping) return;
    const existing = this.dirty.get(item);
    if (existing) {
      if (priority <= existing.priority) return;
      // Raise: a new live entry in the higher bucket; the old one goes stale. The wait keeps counting.
      const raised: Entry<T> = { item, priority, since: existing.since };
      this.dirty.set(item, raised);
      this.metrics.priorityChanged?.(existing.priority, priority);
      if (!this.processing.has(item)) {
        this.queued--;
        this.push(raised);
      }
      return;
    }
    const entry: Entry<T> = { item, priority, since: this.clock.now() };
    this.metrics.add(item, priority);
    this.dirty.set(item, entry);
    if (this.processing.has(item)) return; // queued again by done()
    this.push(entry);
  }

  priorityOf(item: T): number | undefined {
    return this.processing.get(item) ?? this.dirty.get(item)?.priority;
  }

  len(): number {
    return this.queued;
  }

  get(signal?: AbortSignal): Promise<GetResult<T>> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (this.stopping) return Promise.resolve({ shutdown: true });
    if (this.queued > 0) return Promise.resolve({ item: this.take(), shutdown: false });
    return new Promise<GetResult<T>>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal?.reason as Error);
      };
      const waiter: Waiter<T> = {
        resolve: (r) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(r);
        },
      };
      this.waiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  done(item: T): void {
    if (!this.processing.delete(item)) return;
    this.metrics.done(item);
    const entry = this.dirty.get(item);
    if (entry) this.push(entry);
    if (this.stopping && this.processing.size === 0) this.finishDrain();
  }

  shutDown(): void {
    this.beginShutdown();
    // client-go: ShutDown during a drain stops waiting for it.
    this.drain?.resolve();
    this.drain = undefined;
  }

  shutDownWithDrain(): Promise<void> {
    this.beginShutdown();
    if (this.processing.size === 0) {
      this.finishDrain();
      return Promise.resolve();
    }
    if (!this.drain) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.drain = { promise, resolve };
    }
    return this.drain.promise;
  }

  /** Whether shutDown (or shutDownWithDrain) was called: adds are ignored from then on. */
  shuttingDown(): boolean {
    return this.stopping;
  }

  private beginShutdown(): void {
    if (!this.stopping) {
      this.stopping = true;
      const waiters = this.waiters.splice(0);
      for (const w of waiters) w.resolve({ shutdown: true });
    }
    if (this.processing.size === 0) this.closeMetrics();
  }

  private finishDrain(): void {
    this.closeMetrics();
    this.drain?.resolve();
    this.drain = undefined;
  }

  private closeMetrics(): void {
    if (this.metricsClosed) return;
    this.metricsClosed = true;
    this.metrics.close();
  }

  private bucket(priority: number): Bucket<T> {
    let b = this.buckets.find((x) => x.priority === priority);
    if (!b) {
      b = { priority, list: [], head: 0 };
      this.buckets.push(b);
      this.buckets.sort((x, y) => y.priority - x.priority);
    }
    return b;
  }

  /** Queues a live entry and hands queued items to waiting callers, oldest waiter first. */
  private push(entry: Entry<T>): void {
    this.bucket(entry.priority).list.push(entry);
    this.queued++;
    while (this.waiters.length > 0 && this.queued > 0) {
      const w = this.waiters.shift() as Waiter<T>; // length checked
      w.resolve({ item: this.take(), shutdown: false });
    }
  }

  /** The first live entry of a bucket (stale heads dropped), or undefined. */
  private headOf(b: Bucket<T>): Entry<T> | undefined {
    while (b.head < b.list.length) {
      const e = b.list[b.head] as Entry<T>;
      if (this.dirty.get(e.item) === e && !this.processing.has(e.item)) return e;
      b.head++;
    }
    return undefined;
  }

  /** Removes the next item (aged first, oldest; else highest priority, FIFO) and moves it to processing. */
  private take(): T {
    const now = this.clock.now();
    let pick: Bucket<T> | undefined;
    let aged: Bucket<T> | undefined;
    for (const b of this.buckets) {
      const head = this.headOf(b);
      if (!head) continue;
      pick ??= b;
      if (now - head.since >= this.maxWaitMs && (!aged || head.since < (this.headOf(aged) as Entry<T>).since)) aged = b;
    }
    const b = (aged ?? pick) as Bucket<T>; // queued > 0: some bucket has a live head
    const entry = b.list[b.head] as Entry<T>;
    b.head++;
    if (b.head > 1024 && b.head * 2 > b.list.length) {
      b.list = b.list.slice(b.head);
      b.head = 0;
    }
    this.queued--;
    this.metrics.get(entry.item, entry.priority);
    this.processing.set(entry.item, entry.priority);
    this.dirty.delete(entry.item);
    return entry.item;
  }
}
