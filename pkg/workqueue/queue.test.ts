import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Queue, type GetResult } from './queue.ts';

/** Whether `p` has settled once every already-queued microtask ran (a check, not a wait for progress). */
async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise<void>((r) => setImmediate(r));
  return settled;
}

async function getItem<T>(q: Queue<T>): Promise<T> {
  const r = await q.get();
  assert.equal(r.shutdown, false, 'expected an item, got shutdown');
  return r.item;
}

describe('Queue', { timeout: 30_000 }, () => {
  it('hands out items in FIFO order', async () => {
    const q = new Queue<string>();
    q.add('a');
    q.add('b');
    q.add('c');
    assert.equal(q.len(), 3);
    assert.equal(await getItem(q), 'a');
    assert.equal(await getItem(q), 'b');
    assert.equal(await getItem(q), 'c');
    assert.equal(q.len(), 0);
  });

  it('dedups an item added several times while queued', async () => {
    const q = new Queue<string>();
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('a');
    assert.equal(q.len(), 2);
    assert.equal(await getItem(q), 'a');
    assert.equal(await getItem(q), 'b');
    assert.equal(q.len(), 0);
    assert.equal(await isSettled(q.get()), false, 'a deduped item must not be handed out twice');
  });

  it('never hands an item being processed to a second worker; re-adds it at done', async () => {
    const q = new Queue<string>();
    q.add('a');
    const first = await getItem(q);
    assert.equal(first, 'a');
    q.add('a'); // added while processing
    assert.equal(q.len(), 0, 'an item being processed is not queued again before done');
    const second = q.get();
    assert.equal(await isSettled(second), false, 'a second worker must not receive "a" while it is processing');
    q.done('a');
    assert.deepEqual(await second, { item: 'a', shutdown: false });
  });

  it('does not re-add an item at done when it was not added meanwhile', async () => {
    const q = new Queue<string>();
    q.add('a');
    await getItem(q);
    q.done('a');
    assert.equal(q.len(), 0);
  });

  it('collapses many adds during processing into one requeue', async () => {
    const q = new Queue<string>();
    q.add('a');
    await getItem(q);
    q.add('a');
    q.add('a');
    q.add('a');
    q.done('a');
    assert.equal(q.len(), 1);
    assert.equal(await getItem(q), 'a');
    assert.equal(q.len(), 0);
  });

  it('ignores a done for an item that is not being processed (no duplicate queueing)', async () => {
    const q = new Queue<string>();
    q.add('a');
    await getItem(q);
    q.add('a');
    q.done('a');
    q.done('a'); // stray second done
    assert.equal(q.len(), 1);
  });

  it('wakes waiters in order, one item each', async () => {
    const q = new Queue<string>();
    const w1 = q.get();
    const w2 = q.get();
    const w3 = q.get();
    q.add('a');
    q.add('b');
    assert.deepEqual(await w1, { item: 'a', shutdown: false });
    assert.deepEqual(await w2, { item: 'b', shutdown: false });
    assert.equal(await isSettled(w3), false);
    q.add('c');
    assert.deepEqual(await w3, { item: 'c', shutdown: false });
  });

  it('concurrent workers never hold the same item at once (many adds of few keys)', async () => {
    const q = new Queue<string>();
    const keys = ['k0', 'k1', 'k2'];
    const holding = new Set<string>();
    let overlaps = 0;
    let processed = 0;
    let adds = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        const r = await q.get();
        if (r.shutdown) return;
        if (holding.has(r.item)) overlaps++;
        holding.add(r.item);
        // Producers keep adding while we "work" across several event-loop turns.
        for (let i = 0; i < 3; i++) {
          if (adds < 600) {
            q.add(keys[adds % keys.length] as string);
            adds++;
          }
          await new Promise<void>((res) => setImmediate(res));
        }
        holding.delete(r.item);
        processed++;
        q.done(r.item);
        if (adds >= 600 && q.len() === 0 && holding.size === 0) q.shutDown();
      }
    };
    for (const k of keys) q.add(k);
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.equal(overlaps, 0);
    assert.ok(processed >= keys.length);
  });

  describe('shutdown', () => {
    it('shutDown wakes every waiting get with shutdown', async () => {
      const q = new Queue<string>();
      const waits = [q.get(), q.get()];
      q.shutDown();
      assert.deepEqual(await Promise.all(waits), [{ shutdown: true }, { shutdown: true }]);
      assert.equal(q.shuttingDown(), true);
    });

    it('after shutDown, get returns shutdown at once even with queued items, and adds are ignored', async () => {
      const q = new Queue<string>();
      q.add('a');
      q.shutDown();
      assert.deepEqual(await q.get(), { shutdown: true });
      q.add('b');
      assert.equal(q.len(), 1, 'only the item queued before shutdown remains');
    });

    it('shutDownWithDrain waits for in-flight items to be done and rejects new adds meanwhile', async () => {
      const q = new Queue<string>();
      q.add('a');
      q.add('b');
      const a = await getItem(q);
      const b = await getItem(q);
      const drained = q.shutDownWithDrain();
      q.add('c');
      assert.equal(q.len(), 0, 'adds during drain are rejected');
      assert.deepEqual(await q.get(), { shutdown: true });
      q.done(a);
      assert.equal(await isSettled(drained), false, '"b" is still in flight');
      q.done(b);
      assert.equal(await isSettled(drained), true);
    });

    it('shutDownWithDrain resolves at once when nothing is in flight', async () => {
      const q = new Queue<string>();
      q.add('queued-but-not-taken');
      assert.equal(await isSettled(q.shutDownWithDrain()), true);
    });

    it('shutDown cancels a pending drain wait', async () => {
      const q = new Queue<string>();
      q.add('a');
      await getItem(q);
      const drained = q.shutDownWithDrain();
      assert.equal(await isSettled(drained), false);
      q.shutDown();
      assert.equal(await isSettled(drained), true);
    });

    it('a drain still ends when the in-flight item had been re-added before shutdown', async () => {
      const q = new Queue<string>();
      q.add('a');
      await getItem(q);
      q.add('a');
      const drained = q.shutDownWithDrain();
      q.done('a');
      assert.equal(await isSettled(drained), true);
      assert.deepEqual(await q.get(), { shutdown: true });
    });
  });

  describe('get with an AbortSignal', () => {
    it('rejects with the reason and consumes nothing', async () => {
      const q = new Queue<string>();
      const ac = new AbortController();
      const p: Promise<GetResult<string>> = q.get(ac.signal);
      ac.abort(new Error('stop waiting'));
      await assert.rejects(p, /stop waiting/);
      q.add('a');
      assert.equal(q.len(), 1, 'the aborted waiter must not take the item');
      assert.equal(await getItem(q), 'a');
    });

    it('rejects at once for an already-aborted signal', async () => {
      const q = new Queue<string>();
      q.add('a');
      await assert.rejects(q.get(AbortSignal.abort(new Error('gone'))), /gone/);
      assert.equal(q.len(), 1);
    });
  });
});
