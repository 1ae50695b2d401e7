/**
 * RateLimitingQueue: a delaying queue whose retries are paced by a RateLimiter (client-go rate_limiting_queue).
 *
 *  - `addRateLimited(item)` = `addAfter(item, rateLimiter.when(item))`; it counts one requeue for the item. After
 *    shutdown it is a no-op and does not touch the limiter.
 *  - `forget(item)` resets the item's requeue history (call it when processing succeeded or gave up for good);
 *    it does not remove the item from the queue.
 *  - `numRequeues(item)` reports the limiter's count.
 *
 * Concurrency: as DelayingQueue; the limiter is called synchronously from these methods only.
 */
import { DelayingQueue, type DelayingQueueOptions, type DelayingWorkQueue } from './delaying.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './ratelimiter.ts';

/** A DelayingWorkQueue with rate-limited requeues: `addRateLimited` to retry, `forget` on success. */
export interface RateLimitingWorkQueue<T> extends DelayingWorkQueue<T> {
  /** addAfter(item, limiter delay, priority): the priority defaults as for addAfter (a requeue keeps it). */
  addRateLimited(item: T, priority?: number): void;
  /** The item succeeded (or is given up): its next failure starts from the limiter's base delay. */
  forget(item: T): void;
  /** How many rate-limited requeues of `item` since it was last forgotten. */
  numRequeues(item: T): number;
}

/** Options of RateLimitingQueue: those of DelayingQueue plus the rate limiter. */
export interface RateLimitingQueueOptions<T> extends DelayingQueueOptions {
  /** Defaults to defaultControllerRateLimiter() on the queue's clock. */
  rateLimiter?: RateLimiter<T>;
}

/** A DelayingQueue whose requeues are delayed by a RateLimiter (client-go's RateLimitingInterface). */
export class RateLimitingQueue<T> extends DelayingQueue<T> implements RateLimitingWorkQueue<T> {
  /** The limiter that delays addRateLimited (opts.rateLimiter, default defaultControllerRateLimiter). */
  readonly rateLimiter: RateLimiter<T>;

  /** An empty queue; options as DelayingQueue's plus the rate limiter. */
  constructor(opts: RateLimitingQueueOptions<T> = {}) {
    super(opts);
    this.rateLimiter = opts.rateLimiter ?? defaultControllerRateLimiter<T>(this.clock);
  }

  addRateLimited(item: T, priority?: number): void {
    if (this.shuttingDown()) return;
    this.addAfter(item, this.rateLimiter.when(item), priority);
  }

  /** The item succeeded (or is given up): its next failure starts from the limiter's base delay. */
  forget(item: T): void {
    this.rateLimiter.forget(item);
  }

  /** How many rate-limited requeues of `item` since it was last forgotten. */
  numRequeues(item: T): number {
    return this.rateLimiter.numRequeues(item);
  }
}
