import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../util/clock.ts';
import {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
  type RateLimiter,
} from './ratelimiter.ts';

describe('ItemExponentialFailureRateLimiter', () => {
  it('doubles from 5 ms per failure and caps at 1000 s', () => {
    const rl = new ItemExponentialFailureRateLimiter<string>();
    const got = Array.from({ length: 20 }, () => rl.when('a'));
    assert.deepEqual(got.slice(0, 5), [5, 10, 20, 40, 80]);
    // 5 ms * 2^17 = 655.36 s < 1000 s; 2^18 → 1310.72 s, capped.
    assert.equal(got[17], 655_360);
    assert.equal(got[18], 1_000_000);
    assert.equal(got[19], 1_000_000);
    assert.equal(rl.numRequeues('a'), 20);
  });

  it('stays at the cap for huge failure counts (no overflow to Infinity/NaN)', () => {
    const rl = new ItemExponentialFailureRateLimiter<string>(5, 1_000_000);
    let last = 0;
    for (let i = 0; i < 2000; i++) last = rl.when('a');
    assert.equal(last, 1_000_000);
  });

  it('tracks items independently', () => {
    const rl = new ItemExponentialFailureRateLimiter<string>();
    rl.when('a');
    rl.when('a');
    assert.equal(rl.when('b'), 5);
    assert.equal(rl.numRequeues('a'), 2);
    assert.equal(rl.numRequeues('b'), 1);
  });

  it('forget resets the backoff and the count', () => {
    const rl = new ItemExponentialFailureRateLimiter<string>();
    rl.when('a');
    rl.when('a');
    rl.when('a');
    rl.forget('a');
    assert.equal(rl.numRequeues('a'), 0);
    assert.equal(rl.when('a'), 5);
  });

  it('honours custom base and max', () => {
    const rl = new ItemExponentialFailureRateLimiter<string>(1, 3);
    assert.deepEqual([rl.when('x'), rl.when('x'), rl.when('x'), rl.when('x')], [1, 2, 3, 3]);
  });
});

describe('BucketRateLimiter', () => {
  it('allows a burst of 100 at once, then one token per 100 ms (10 qps)', () => {
    const clock = new FakeClock();
    const rl = new BucketRateLimiter<string>({ clock });
    for (let i = 0; i < 100; i++) assert.equal(rl.when(`k${i}`), 0, `token ${i} is in the burst`);
    assert.equal(rl.when('x'), 100);
    assert.equal(rl.when('y'), 200);
    assert.equal(rl.when('z'), 300);
  });

  it('refills at qps over time, up to the burst', () => {
    const clock = new FakeClock();
    const rl = new BucketRateLimiter<string>({ qps: 10, burst: 100, clock });
    for (let i = 0; i < 100; i++) rl.when('k');
    clock.step(1000); // +10 tokens
    for (let i = 0; i < 10; i++) assert.equal(rl.when('k'), 0);
    assert.equal(rl.when('k'), 100);
    clock.step(3_600_000); // long idle: refilled only to the burst
    for (let i = 0; i < 100; i++) assert.equal(rl.when('k'), 0);
    assert.equal(rl.when('k'), 100);
  });

  it('reserves tokens: waiting reservations are paid back by the refill first', () => {
    const clock = new FakeClock();
    const rl = new BucketRateLimiter<string>({ qps: 10, burst: 1, clock });
    assert.equal(rl.when('a'), 0);
    assert.equal(rl.when('b'), 100);
    assert.equal(rl.when('c'), 200);
    clock.step(100);
    assert.equal(rl.when('d'), 200);
  });

  it('is item-independent: forget and numRequeues are no-ops', () => {
    const rl = new BucketRateLimiter<string>({ clock: new FakeClock() });
    rl.when('a');
    assert.equal(rl.numRequeues('a'), 0);
    rl.forget('a');
  });
});

describe('MaxOfRateLimiter', () => {
  class Fixed implements RateLimiter<string> {
    forgotten: string[] = [];
    readonly ms: number;
    readonly n: number;
    constructor(ms: number, n: number) {
      this.ms = ms;
      this.n = n;
    }
    when(): number {
      return this.ms;
    }
    forget(item: string): void {
      this.forgotten.push(item);
    }
    numRequeues(): number {
      return this.n;
    }
  }

  it('returns the largest delay and requeue count, and forgets in all', () => {
    const a = new Fixed(5, 7);
    const b = new Fixed(50, 1);
    const rl = new MaxOfRateLimiter<string>(a, b);
    assert.equal(rl.when('x'), 50);
    assert.equal(rl.numRequeues('x'), 7);
    rl.forget('x');
    assert.deepEqual(a.forgotten, ['x']);
    assert.deepEqual(b.forgotten, ['x']);
  });
});

describe('defaultControllerRateLimiter', () => {
  it('is per-item exponential while the bucket has tokens', () => {
    const rl = defaultControllerRateLimiter<string>(new FakeClock());
    assert.deepEqual([rl.when('a'), rl.when('a'), rl.when('a')], [5, 10, 20]);
    assert.equal(rl.numRequeues('a'), 3);
    rl.forget('a');
    assert.equal(rl.when('a'), 5);
  });

  it('is bucket-limited once the burst of 100 is spent', () => {
    const rl = defaultControllerRateLimiter<string>(new FakeClock());
    for (let i = 0; i < 100; i++) assert.equal(rl.when(`k${i}`), 5);
    assert.equal(rl.when('fresh'), 100);
  });
});
