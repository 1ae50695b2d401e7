/**
 * DelayingQueue: a work queue plus `addAfter(item, ms)`, which adds the item once `ms` have passed on the Clock.
 *
 * Rules (client-go delaying_queue semantics):
 *  - `addAfter` with `ms <= 0` (or NaN) adds at once.
 *  - An item waiting for its time is kept once: adding it again with an earlier ready time moves it earlier; a later
 *    ready time is ignored (earliest deadline wins).
 *  - Items that become ready at the same instant are added in ready-time order, ties in the order `addAfter` was
 *    called. A waiting item is not in the queue: `len()` and workqueue_depth do not count it.
 *  - Every `addAfter` that is accepted counts in workqueue_retries_total (client-go counts there, too).
 *  - Shutdown (either kind) cancels the timer and drops every waiting item; `addAfter` after shutdown is a no-op.
 *
 * Implementation: a min-heap of waiting entries by (readyAt, seq) plus a Map item → entry, and at most one armed
 * Clock timer, for the earliest ready time. With FakeClock, due items are added synchronously inside `step()`.
 *
 * Concurrency: all methods are synchronous and atomic on the event loop; the timer callback runs on the event loop
 * too. Ownership of handed-out items follows the underlying Queue (see queue.ts).
 */
import { realClock, type Clock, type Timer } from '../util/clock.ts';
import { MinHeap, type HeapEntry } from './heap.ts';
import type { QueueMetrics } from './metrics.ts';
import { metricsFor, PriorityNormal, Queue, type GetResult, type QueueOptions, type WorkQueue } from './queue.ts';

/** A WorkQueue whose items can be added after a delay. */
export interface DelayingWorkQueue<T> extends WorkQueue<T> {
  /**
   * Adds `item` after `ms` milliseconds (at once if `ms <= 0`), at `priority` — by default the priority the item is
   * being processed with (a requeue keeps its priority), else PriorityNormal.
   */
  addAfter(item: T, ms: number, priority?: number): void;
  /** Number of items waiting for their ready time (not yet in the queue). */
  waitingLen(): number;
  /** How long until the earliest waiting item is added (ms, >= 0); undefined when none waits. */
  nextReadyInMs(): number | undefined;
}

interface Waiting<T> extends HeapEntry {
  item: T;
  readyAt: number;
  seq: number;
  priority: number;
}

/** Options of DelayingQueue (those of Queue). */
export type DelayingQueueOptions = QueueOptions;

/** A Queue with `addAfter` (client-go's DelayingInterface): an item becomes ready after its delay. */
export class DelayingQueue<T> implements DelayingWorkQueue<T> {
  /** The clock of the delays (opts.clock, default the real one). */
  protected readonly clock: Clock;
  private readonly queue: Queue<T>;
  private readonly metrics: QueueMetrics<T>;
  private readonly heap = new MinHeap<Waiting<T>>((a, b) => a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.seq < b.seq));
  private readonly waiting = new Map<T, Waiting<T>>();
  private seq = 0;
  private timer: Timer | undefined;
  private timerAt = Infinity;

  /** An empty queue with no item waiting; options as Queue's. */
  constructor(opts: DelayingQueueOptions = {}) {
    this.clock = opts.clock ?? realClock;
    this.metrics = metricsFor<T>(opts, this.clock);
    this.queue = new Queue<T>({ ...opts, clock: this.clock, metrics: this.metrics });
  }

  addAfter(item: T, ms: number, priority: number = this.queue.priorityOf(item) ?? PriorityNormal): void {
    if (this.queue.shuttingDown()) return;
    this.metrics.retry();
    if (!(ms > 0)) {
      this.queue.add(item, priority);
      return;
    }
    const readyAt = this.clock.now() + ms;
    const existing = this.waiting.get(item);
    if (existing) {
      existing.priority = Math.max(existing.priority, priority);
      if (readyAt >= existing.readyAt) return;
      existing.readyAt = readyAt;
      this.heap.fix(existing);
    } else {
      const w: Waiting<T> = { item, readyAt, seq: this.seq++, index: -1, priority };
      this.waiting.set(item, w);
      this.heap.push(w);
    }
    this.arm();
  }

  /** Number of items waiting for their ready time (not yet in the queue). */
  waitingLen(): number {
    return this.waiting.size;
  }

  /** How long until the earliest waiting item is added (ms on the Clock, >= 0); undefined when none waits. */
  nextReadyInMs(): number | undefined {
    const next = this.heap.peek();
    return next === undefined ? undefined : Math.max(0, next.readyAt - this.clock.now());
  }

  add(item: T, priority?: number): void {
    this.queue.add(item, priority);
  }

  priorityOf(item: T): number | undefined {
    return this.queue.priorityOf(item) ?? this.waiting.get(item)?.priority;
  }

  len(): number {
    return this.queue.len();
  }

  get(signal?: AbortSignal): Promise<GetResult<T>> {
    return this.queue.get(signal);
  }

  done(item: T): void {
    this.queue.done(item);
  }

  shutDown(): void {
    this.stopWaiting();
    this.queue.shutDown();
  }

  shutDownWithDrain(): Promise<void> {
    this.stopWaiting();
    return this.queue.shutDownWithDrain();
  }

  /** Whether shutDown was called: adds (and delayed adds) are ignored from then on. */
  shuttingDown(): boolean {
    return this.queue.shuttingDown();
  }

  private stopWaiting(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = Infinity;
    this.heap.clear();
    this.waiting.clear();
  }

  /** Makes sure a timer is armed for the earliest waiting entry (and only one timer). */
  private arm(): void {
    const top = this.heap.peek();
    if (!top) {
      this.timer?.cancel();
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    if (this.timer && this.timerAt <= top.readyAt) return; // fires early enough; it re-arms on firing
    this.timer?.cancel();
    this.timerAt = top.readyAt;
    this.timer = this.clock.setTimer(top.readyAt - this.clock.now(), () => this.onTimer());
  }

  private onTimer(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock.now();
    for (let top = this.heap.peek(); top && top.readyAt <= now; top = this.heap.peek()) {
      this.heap.pop();
      this.waiting.delete(top.item);
      this.queue.add(top.item, top.priority);
    }
    this.arm();
  }
}
