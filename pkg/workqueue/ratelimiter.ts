/**
 * Rate limiters: decide how long an item waits before it is retried (client-go util/workqueue/default_rate_limiters
 * semantics). All durations are milliseconds.
 *
 *  - ItemExponentialFailureRateLimiter: per item, `base * 2^failures`, capped at `max` (defaults 5 ms and 1000 s).
 *    Every `when(item)` counts one failure; `forget(item)` resets it.
 *  - BucketRateLimiter: one token bucket for all items (defaults 10 qps, burst 100), on a Clock. `when` reserves a
 *    token and returns how long until that token exists (0 while the burst lasts). Like golang.org/x/time/rate's
 *    Reserve(), a reservation is never returned, so a burst of retries spreads out at `qps`.
 *  - MaxOfRateLimiter: the largest delay of its limiters; forget/numRequeues fan out / take the max.
 *  - defaultControllerRateLimiter(): max(exponential 5 ms → 1000 s, bucket 10 qps / burst 100).
 *
 * Concurrency: synchronous; one limiter belongs to one queue (sharing is safe but couples their budgets).
 */
import { realClock, type Clock } from '../util/clock.ts';

/** How long an item waits before its next retry (client-go's workqueue.RateLimiter). */
export interface RateLimiter<T> {
  /** Delay before `item` should be processed again; records one more requeue of `item`. */
  when(item: T): number;
  /** Stops tracking `item` (success or give-up): its next failure starts from the base delay again. */
  forget(item: T): void;
  /** How many times `item` has been requeued since it was last forgotten. */
  numRequeues(item: T): number;
}

/** Per-item exponential backoff (client-go's ItemExponentialFailureRateLimiter): `baseMs * 2^failures`, at most `maxMs`. */
export class ItemExponentialFailureRateLimiter<T> implements RateLimiter<T> {
  private readonly failures = new Map<T, number>();
  private readonly baseMs: number;
  private readonly maxMs: number;

  /** First retry after `baseMs` (default 5 ms), doubling per failure up to `maxMs` (default 1 000 s). */
  constructor(baseMs = 5, maxMs = 1_000_000) {
    this.baseMs = baseMs;
    this.maxMs = maxMs;
  }

  when(item: T): number {
    const exp = this.failures.get(item) ?? 0;
    this.failures.set(item, exp + 1);
    const backoff = this.baseMs * 2 ** exp;
    return Number.isFinite(backoff) && backoff < this.maxMs ? backoff : this.maxMs;
  }

  forget(item: T): void {
    this.failures.delete(item);
  }

  numRequeues(item: T): number {
    return this.failures.get(item) ?? 0;
  }
}

/** Options of BucketRateLimiter. */
export interface BucketRateLimiterOptions {
  /** Tokens added per second. Infinity = no limit. Default 10. */
  qps?: number;
  /** Bucket size (and initial fill). Default 100. */
  burst?: number;
  /** The clock of its timers and time measurements (default the real one; a fake in tests). */
  clock?: Clock;
}

/**
 * An overall token bucket (client-go's BucketRateLimiter): `qps` tokens per second, `burst` at most; the delay
 * is how long until the item's token is available. Not per item: `forget` and `numRequeues` do nothing.
 */
export class BucketRateLimiter<T> implements RateLimiter<T> {
  private readonly qps: number;
  private readonly burst: number;
  private readonly clock: Clock;
  /** Tokens at time `last`; negative when reservations ran ahead of the refill. */
  private tokens: number;
  private last: number;

  /** A full bucket: `opts.qps` tokens per second (default 10), `opts.burst` at most (default 100). */
  constructor(opts: BucketRateLimiterOptions = {}) {
    this.qps = opts.qps ?? 10;
    this.burst = opts.burst ?? 100;
    this.clock = opts.clock ?? realClock;
    this.tokens = this.burst;
    this.last = this.clock.now();
  }

  when(_item: T): number {
    if (this.qps === Infinity) return 0;
    const now = this.clock.now();
    const elapsed = Math.max(0, now - this.last);
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.qps) / 1000);
    this.last = Math.max(this.last, now);
    this.tokens -= 1;
    return this.tokens < 0 ? (-this.tokens * 1000) / this.qps : 0;
  }

  forget(_item: T): void {}

  numRequeues(_item: T): number {
    return 0;
  }
}

/** The longest delay of several limiters (client-go's MaxOfRateLimiter); every limiter records each requeue. */
export class MaxOfRateLimiter<T> implements RateLimiter<T> {
  private readonly limiters: readonly RateLimiter<T>[];

  /** The limiters to combine (each one's delay is computed; the longest wins). */
  constructor(...limiters: RateLimiter<T>[]) {
    this.limiters = limiters;
  }

  when(item: T): number {
    let max = 0;
    for (const l of this.limiters) max = Math.max(max, l.when(item));
    return max;
  }

  forget(item: T): void {
    for (const l of this.limiters) l.forget(item);
  }

  numRequeues(item: T): number {
    let max = 0;
    for (const l of this.limiters) max = Math.max(max, l.numRequeues(item));
    return max;
  }
}

/** client-go's DefaultTypedControllerRateLimiter: max(exponential 5 ms → 1000 s, bucket 10 qps / burst 100). */
export function defaultControllerRateLimiter<T>(clock: Clock = realClock): RateLimiter<T> {
  return new MaxOfRateLimiter<T>(
    new ItemExponentialFailureRateLimiter<T>(5, 1_000_000),
    new BucketRateLimiter<T>({ qps: 10, burst: 100, clock }),
  );
}
