import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../util/clock.ts';
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
