/**
 * ProcessorListener: one per handler registration. It owns an unbounded FIFO of notifications and a drain loop
 * that calls the handler, so the informer's delta processing never waits for a handler and a slow handler (one that
 * returns a promise that takes long, or a busy one) delays only its own notifications.
 *
 * Memory: the FIFO is a growing and shrinking ring (ringbuffer.ts, client-go's RingGrowing), so what it holds is
 * bounded by the notifications pending — about 4 slots per pending one at most, 64 at least — and not by how many
 * passed through, also for a handler that is always slightly behind and never lets the buffer run empty.
 *
 * Contract for handlers (ResourceEventHandler): map the event to keys and enqueue them; no I/O, no mutation of the
 * objects (they are the cache's). A handler may return a promise; the next notification for that handler waits for
 * it. A handler that throws (or rejects) is reported to `onError` (the informer counts and rate-limit-logs it:
 * handlererrors.ts); the notification is dropped for this handler only and the listener carries on with the next.
 *
 * Sync tracking: an `add` marked isInInitialList counts as pending until the handler returned; the registration is
 * synced when the informer is synced and no such notification is pending (client-go's per-handler HasSynced).
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Logger } from '../log/logger.ts';
import type { DeletedFinalStateUnknown } from './object.ts';
import { RingBuffer } from './ringbuffer.ts';

/**
 * Callbacks of an informer's event handler (client-go's ResourceEventHandler): each handler gets the events in
 * order, one at a time (a returned promise delays its next one). Map events to keys; do not modify the objects.
 */
export interface ResourceEventHandler<T> {
  /** A new object in the cache; isInInitialList is true for objects of the initial list (or the replay of the cache to a late handler). */
  onAdd?(obj: T, isInInitialList: boolean): void | Promise<void>;
  /** A changed object; on a resync old and new are the same object. */
  onUpdate?(oldObj: T, newObj: T): void | Promise<void>;
  /** An object gone from the cache: its final state, or a tombstone when the delete was inferred from a relist. */
  onDelete?(obj: T | DeletedFinalStateUnknown<T>): void | Promise<void>;
}

export type Notification<T> =
  | { type: 'add'; obj: T; isInInitialList: boolean }
  | { type: 'update'; oldObj: T; newObj: T }
  | { type: 'delete'; obj: T | DeletedFinalStateUnknown<T> };

/** Notifications handled in a row before the drain loop yields to the event loop. */
const BATCH = 128;

export interface ProcessorListenerOptions<T> {
  /** Called for each notification whose handler threw or rejected. Default: log it at error level. */
  onError?: (err: unknown, n: Notification<T>) => void;
}

export class ProcessorListener<T> {
  readonly handler: ResourceEventHandler<T>;
  /** 0 = no resync for this handler. */
  readonly resyncPeriodMs: number;
  /** clock time at which this handler is next due a resync. */
  nextResyncAt = 0;
  private readonly buf = new RingBuffer<Notification<T>>(64);
  private pendingInitialCount = 0;
  private wake: (() => void) | undefined;
  private running = false;
  private stopped = false;
  private readonly onError: (err: unknown, n: Notification<T>) => void;

  constructor(handler: ResourceEventHandler<T>, resyncPeriodMs: number, log: Logger, opts: ProcessorListenerOptions<T> = {}) {
    this.handler = handler;
    this.resyncPeriodMs = resyncPeriodMs;
    this.onError = opts.onError ?? ((err, n) => log.error({ err, notification: n.type }, 'event handler failed'));
  }

  /** Notifications buffered and not yet handled. */
  get pending(): number {
    return this.buf.length;
  }

  /** Slots held by the buffer (for tests: stays bounded by what is pending, not by what passed through). */
  get capacity(): number {
    return this.buf.capacity;
  }

  /** Initial-list adds not yet handled. */
  get pendingInitial(): number {
    return this.pendingInitialCount;
  }

  add(n: Notification<T>): void {
    if (this.stopped) return;
    if (n.type === 'add' && n.isInInitialList) this.pendingInitialCount++;
    this.buf.push(n);
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Drains notifications until stop(). Call once. */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    let handled = 0;
    while (!this.stopped) {
      const n = this.buf.shift();
      if (n === undefined) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      try {
        const r = this.deliver(n);
        if (r !== undefined) await r;
      } catch (err) {
        try {
          this.onError(err, n);
        } catch {
          // a failing error reporter must not stop the drain loop
        }
      } finally {
        if (n.type === 'add' && n.isInInitialList) this.pendingInitialCount--;
      }
      if (++handled % BATCH === 0) await yieldToEventLoop();
    }
  }

  stop(): void {
    this.stopped = true;
    this.buf.clear();
    this.pendingInitialCount = 0;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private deliver(n: Notification<T>): void | Promise<void> {
    switch (n.type) {
      case 'add':
        return this.handler.onAdd?.(n.obj, n.isInInitialList);
      case 'update':
        return this.handler.onUpdate?.(n.oldObj, n.newObj);
      case 'delete':
        return this.handler.onDelete?.(n.obj);
    }
  }
}
