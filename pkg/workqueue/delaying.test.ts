import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock, realClock } from '../util/clock.ts';
import { DelayingQueue } from './delaying.ts';

/** Takes everything queued right now (each item is marked done). */
async function drainNow(q: DelayingQueue<string>): Promise<string[]> {
  const out: string[] = [];
  while (q.len() > 0) {
    const r = await q.get();
    if (r.shutdown) break;
    out.push(r.item);
    q.done(r.item);
  }
  return out;
}

describe('DelayingQueue', () => {
  it('on the real clock, addAfter(25 days) neither fires early nor busy-wakes (a plain setTimeout overflows to 1 ms)', async () => {
    const overflows: string[] = [];
    const onWarning = (w: Error): void => {
      if (w.name === 'TimeoutOverflowWarning') overflows.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const q = new DelayingQueue<string>({ clock: realClock });
      q.addAfter('far', 25 * 86_400_000);
      q.addAfter('near', 20);
      // 'near' becoming ready proves timers ran meanwhile; an overflowed timer would have re-armed every 1 ms.
      while (q.len() === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.deepEqual(await drainNow(q), ['near']);
      assert.equal(q.waitingLen(), 1);
      q.shutDown();
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      assert.deepEqual(overflows, []);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('adds an item only when its delay has passed', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 50);
    assert.equal(q.len(), 0);
    assert.equal(q.waitingLen(), 1);
    clock.step(49);
    assert.equal(q.len(), 0);
    clock.step(1);
    assert.equal(q.len(), 1);
    assert.equal(q.waitingLen(), 0);
  });

  it('nextReadyInMs: the time until the earliest waiting item, undefined when none waits', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    assert.equal(q.nextReadyInMs(), undefined);
    q.addAfter('late', 300);
    q.addAfter('early', 100);
    assert.equal(q.nextReadyInMs(), 100);
    clock.step(40);
    assert.equal(q.nextReadyInMs(), 60);
    clock.step(60);
    assert.equal(q.nextReadyInMs(), 200, 'early was added; late is next');
    clock.step(200);
    assert.equal(q.nextReadyInMs(), undefined);
  });

  it('adds at once for a zero or negative delay', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 0);
    q.addAfter('b', -5);
    assert.equal(q.len(), 2);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('releases items in ready-time order, ties in call order', async () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('c', 30);
    q.addAfter('a', 10);
    q.addAfter('b', 20);
    q.addAfter('b2', 20);
    clock.step(100);
    assert.deepEqual(await drainNow(q), ['a', 'b', 'b2', 'c']);
  });

  it('keeps the earlier deadline when an item is added twice (earlier second)', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 100);
    q.addAfter('a', 10);
    assert.equal(q.waitingLen(), 1);
    clock.step(10);
    assert.equal(q.len(), 1);
    assert.equal(q.waitingLen(), 0);
    clock.step(200);
    assert.equal(q.len(), 1, 'the superseded later deadline must not add it again');
  });

  it('keeps the earlier deadline when an item is added twice (later second)', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 10);
    q.addAfter('a', 100);
    clock.step(10);
    assert.equal(q.len(), 1);
    assert.equal(q.waitingLen(), 0);
  });

  it('keeps a single armed timer', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 100);
    q.addAfter('b', 50);
    q.addAfter('c', 70);
    assert.equal(clock.pendingTimers(), 1);
    clock.step(50);
    assert.equal(q.len(), 1);
    assert.equal(clock.pendingTimers(), 1);
    clock.step(50);
    assert.equal(q.len(), 3);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('a delayed item that is already queued is deduped when it becomes ready', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.add('a');
    q.addAfter('a', 10);
    clock.step(10);
    assert.equal(q.len(), 1);
  });

  it('shutdown cancels waiting items and ignores later addAfter', () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 10);
    q.shutDown();
    assert.equal(clock.pendingTimers(), 0);
    assert.equal(q.waitingLen(), 0);
    q.addAfter('b', 10);
    clock.step(100);
    assert.equal(q.len(), 0);
    assert.equal(q.waitingLen(), 0);
  });

  it('shutDownWithDrain also cancels waiting items', async () => {
    const clock = new FakeClock();
    const q = new DelayingQueue<string>({ clock });
    q.addAfter('a', 10);
    await q.shutDownWithDrain();
    clock.step(100);
    assert.equal(q.len(), 0);
    assert.equal(clock.pendingTimers(), 0);
  });
});
