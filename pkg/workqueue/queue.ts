/**
 * Queue: the basic work queue (client-go util/workqueue semantics, async instead of goroutines).
 *
 *  - Fair: items are handed out in the order they were first added (FIFO).
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
 *  - every item in `fifo` is in `dirty` and not in `processing`; `fifo` has no duplicates;
 *  - an item in `dirty` and in `processing` is waiting for its `done` to be queued again;
 *  - `waiters` is non-empty only while `fifo` is empty and the queue is not shutting down.
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

export type GetResult<T> = { item: T; shutdown: false } | { item?: undefined; shutdown: true };

/** The basic queue interface (client-go workqueue.Interface). */
export interface WorkQueue<T> {
  /** Marks `item` as needing processing. No-op after shutdown or when it is already waiting (dirty). */
  add(item: T): void;
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
  shuttingDown(): boolean;
}

export interface QueueOptions {
  /** Metrics name (labels `name` and `controller`). Without a name (and without `metrics`) nothing is recorded. */
  name?: string;
  /** `controller` label value; defaults to `name`. */
  controller?: string;
  /** Registry for the metrics; defaults to globalRegistry. */
  registry?: Registry;
  clock?: Clock;
  /** Use these metrics hooks instead of creating them (shared between the layers of one queue). */
  metrics?: QueueMetrics<unknown>;
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

export class Queue<T> implements WorkQueue<T> {
  private readonly metrics: QueueMetrics<T>;
  /** FIFO of items to hand out: `fifo[head..]` are live. */
  private fifo: T[] = [];
  private head = 0;
  private readonly dirty = new Set<T>();
  private readonly processing = new Set<T>();
  private readonly waiters: Waiter<T>[] = [];
  private stopping = false;
  /** Pending `shutDownWithDrain` wait, if any. */
  private drain: { promise: Promise<void>; resolve: () => void } | undefined;
  private metricsClosed = false;

  constructor(opts: QueueOptions = {}) {
    this.metrics = metricsFor<T>(opts, opts.clock ?? realClock);
  }

  add(item: T): void {
    if (this.stopping || this.dirty.has(item)) return;
    this.metrics.add(item);
    this.dirty.add(item);
    if (this.processing.has(item)) return; // queued again by done()
    this.push(item);
  }

  len(): number {
    return this.fifo.length - this.head;
  }

  get(signal?: AbortSignal): Promise<GetResult<T>> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (this.stopping) return Promise.resolve({ shutdown: true });
    if (this.len() > 0) return Promise.resolve({ item: this.take(), shutdown: false });
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
    if (this.dirty.has(item)) this.push(item);
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

  /** Appends `item` and hands queued items to waiting callers, oldest waiter first. */
  private push(item: T): void {
    this.fifo.push(item);
    while (this.waiters.length > 0 && this.len() > 0) {
      const w = this.waiters.shift() as Waiter<T>; // length checked
      w.resolve({ item: this.take(), shutdown: false });
    }
  }

  /** Removes the oldest queued item and moves it to `processing`. Precondition: len() > 0. */
  private take(): T {
    const item = this.fifo[this.head] as T;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.fifo.length) {
      this.fifo = this.fifo.slice(this.head);
      this.head = 0;
    }
    this.metrics.get(item);
    this.processing.add(item);
    this.dirty.delete(item);
    return item;
  }
}
