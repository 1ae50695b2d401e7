import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../util/clock.ts';
import { Queue, PriorityLow, PriorityNormal } from './queue.ts';
import { RateLimitingQueue } from './ratelimiting.ts';

async function take<T>(q: { get(): Promise<{ item?: T; shutdown: boolean }> }): Promise<T> {
  const r = await q.get();
  assert.equal(r.shutdown, false);
  return r.item as T;
}

describe('priority queue', () => {
  it('hands out higher priorities first, FIFO within one priority', async () => {
    const q = new Queue<string>();
    q.add('low-1', PriorityLow);
    q.add('low-2', PriorityLow);
    q.add('normal-1');
    q.add('normal-2', PriorityNormal);
    q.add('high', 10);
    assert.equal(q.len(), 5);
    const order = [];
    for (let i = 0; i < 5; i++) order.push(await take(q));
    assert.deepEqual(order, ['high', 'normal-1', 'normal-2', 'low-1', 'low-2']);
  });

  it('de-duplication keeps the highest priority of the adds (a lower add changes nothing)', async () => {
    const q = new Queue<string>();
    q.add('a', PriorityLow);
    q.add('b', PriorityLow);
    q.add('b'); // raised to normal
    q.add('c');
    q.add('c', PriorityLow); // stays normal
    assert.equal(q.len(), 3);
    assert.deepEqual([await take(q), await take(q), await take(q)], ['b', 'c', 'a']);
    assert.equal(q.len(), 0);
  });

  it('an item added while processing is queued after done() at the highest priority of those adds', async () => {
    const q = new Queue<string>();
    q.add('x', PriorityLow);
    assert.equal(await take(q), 'x');
    assert.equal(q.priorityOf('x'), PriorityLow);
    q.add('x', PriorityLow);
    q.add('x'); // a real change while x is reconciled
    q.add('y', PriorityLow);
    q.done('x');
    assert.deepEqual([await take(q), await take(q)], ['x', 'y']);
  });

  it('a rate-limited or delayed requeue keeps the priority the item was processed with', async () => {
    const clock = new FakeClock();
    const q = new RateLimitingQueue<string>({ clock });
    q.add('low', PriorityLow);
    assert.equal(await take(q), 'low');
    q.addRateLimited('low'); // failed: retry later, still low
    q.done('low');
    q.add('n1');
    clock.step(1000);
    q.add('n2');
    assert.equal(q.priorityOf('low'), PriorityLow);
    assert.deepEqual([await take(q), await take(q), await take(q)], ['n1', 'n2', 'low']);
    // requeueAfter of a normal item stays normal
    q.done('n1');
    q.addAfter('n1', 10);
    q.add('l2', PriorityLow);
    clock.step(20);
    assert.deepEqual([await take(q), await take(q)], ['n1', 'l2']);
  });

  it('no starvation: under a sustained normal-priority rate above throughput every low item is handed out within the aging bound (controller-runtime #3496)', async () => {
    const clock = new FakeClock();
    const maxWaitMs = 5_000;
    const q = new Queue<string>({ clock, maxWaitMs });
    const lows = Array.from({ length: 20 }, (_, i) => `low-${i}`);
    for (const l of lows) q.add(l, PriorityLow);
    const handedAt = new Map<string, number>();
    const t0 = clock.now();
    // One worker, 100 ms per item; two new normal items every 100 ms: the normal backlog grows for ever.
    let n = 0;
    for (let step = 0; step < 1_000 && handedAt.size < lows.length; step++) {
      q.add(`normal-${n++}`);
      q.add(`normal-${n++}`);
      const item = await take(q);
      if (item.startsWith('low-')) handedAt.set(item, clock.now() - t0);
      clock.step(100);
      q.done(item);
    }
    assert.equal(handedAt.size, lows.length, 'every initial-list item was reconciled');
    // Each waited at most the bound plus the time to work off the low items that aged before it (one per 100 ms).
    for (const [i, l] of lows.entries()) {
      const waited = handedAt.get(l) ?? Infinity;
      assert.ok(waited <= maxWaitMs + (i + 1) * 100, `${l} waited ${waited} ms`);
    }
    assert.ok(q.len() > 50, 'the normal backlog kept growing: the rate was above throughput');
  });

  it('without aging pressure, low items wait behind every normal item (the default bound is 30 s)', async () => {
    const clock = new FakeClock();
    const q = new Queue<string>({ clock });
    q.add('low', PriorityLow);
    clock.step(29_000);
    q.add('normal');
    assert.equal(await take(q), 'normal');
    q.add('normal-2');
    clock.step(1_000);
    assert.equal(await take(q), 'low', 'after 30 s the low item goes first');
  });

  it('workqueue_depth has a priority label and follows raises', async () => {
    const registry = new Registry();
    const q = new Queue<string>({ name: 'pq', registry });
    q.add('a', PriorityLow);
    q.add('b', PriorityLow);
    q.add('c');
    const depth = async (priority: string): Promise<number | undefined> =>
      (await registry.getSingleMetric('workqueue_depth')?.get())?.values.find((v) => v.labels['priority'] === priority && v.labels['name'] === 'pq')?.value;
    assert.equal(await depth('-100'), 2);
    assert.equal(await depth('0'), 1);
    q.add('a'); // raised
    assert.equal(await depth('-100'), 1);
    assert.equal(await depth('0'), 2);
    await take(q);
    await take(q);
    await take(q);
    assert.equal(await depth('-100'), 0);
    assert.equal(await depth('0'), 0);
  });
});
