import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../util/clock.ts';
import { RateLimitingQueue } from './ratelimiting.ts';
import type { RateLimiter } from './ratelimiter.ts';

describe('RateLimitingQueue', () => {
  /** Processes the next item (get + done) and returns it. */
  async function takeOne(q: RateLimitingQueue<string>): Promise<string> {
    const r = await q.get();
    assert.equal(r.shutdown, false);
    q.done(r.item);
    return r.item;
  }

  /** Asserts that `item` becomes ready exactly `ms` after now. */
  function assertReadyAfter(q: RateLimitingQueue<string>, clock: FakeClock, ms: number): void {
    clock.step(ms - 1);
    assert.equal(q.len(), 0, `not ready before ${ms} ms`);
    clock.step(1);
    assert.equal(q.len(), 1, `ready after ${ms} ms`);
  }

  it('addRateLimited delays by the default limiter: 5 ms, 10 ms, 20 ms …', async () => {
    const clock = new FakeClock();
    const q = new RateLimitingQueue<string>({ clock });
    for (const [i, ms] of [5, 10, 20, 40].entries()) {
      q.addRateLimited('a');
      assert.equal(q.numRequeues('a'), i + 1);
      assertReadyAfter(q, clock, ms);
      assert.equal(await takeOne(q), 'a');
    }
  });

  it('forget resets the backoff to the base delay', async () => {
    const clock = new FakeClock();
    const q = new RateLimitingQueue<string>({ clock });
    q.addRateLimited('a');
    assertReadyAfter(q, clock, 5);
    await takeOne(q);
    q.addRateLimited('a');
    assertReadyAfter(q, clock, 10);
    await takeOne(q);
    q.forget('a');
    assert.equal(q.numRequeues('a'), 0);
    q.addRateLimited('a');
    assertReadyAfter(q, clock, 5);
  });

  it('a second addRateLimited while waiting keeps the earlier deadline but still counts', () => {
    const clock = new FakeClock();
    const q = new RateLimitingQueue<string>({ clock });
    q.addRateLimited('a'); // 5 ms
    q.addRateLimited('a'); // 10 ms: later, ignored for scheduling
    assert.equal(q.numRequeues('a'), 2);
    assertReadyAfter(q, clock, 5);
  });

  it('uses a custom rate limiter', () => {
    const clock = new FakeClock();
    const calls: string[] = [];
    const rl: RateLimiter<string> = {
      when: (item) => {
        calls.push(`when:${item}`);
        return 1000;
      },
      forget: (item) => calls.push(`forget:${item}`),
      numRequeues: () => 42,
    };
    const q = new RateLimitingQueue<string>({ clock, rateLimiter: rl });
    q.addRateLimited('x');
    q.forget('x');
    assert.equal(q.numRequeues('x'), 42);
    assert.deepEqual(calls, ['when:x', 'forget:x']);
    clock.step(999);
    assert.equal(q.len(), 0);
    clock.step(1);
    assert.equal(q.len(), 1);
  });

  it('after shutdown, addRateLimited neither queues nor counts a requeue', () => {
    const clock = new FakeClock();
    const q = new RateLimitingQueue<string>({ clock });
    q.shutDown();
    q.addRateLimited('a');
    assert.equal(q.numRequeues('a'), 0);
    clock.step(10_000);
    assert.equal(q.len(), 0);
  });
});
