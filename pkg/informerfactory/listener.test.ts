import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { silentLogger } from '../log/logger.ts';
import { ProcessorListener, type Notification } from './listener.ts';

interface Obj {
  n: number;
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function until(what: string, cond: () => boolean, maxTurns = 10_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (cond()) return;
    await turn();
  }
  assert.fail(`never: ${what}`);
}

/** A listener whose handler blocks on a gate per notification; the test opens gates one at a time. */
function gatedListener(): { listener: ProcessorListener<Obj>; gates: Array<() => void>; seen: number[] } {
  const gates: Array<() => void> = [];
  const seen: number[] = [];
  const listener = new ProcessorListener<Obj>(
    {
      onUpdate: (_o, n) =>
        new Promise<void>((resolve) => {
          seen.push(n.n);
          gates.push(resolve);
        }),
    },
    0,
    silentLogger,
  );
  return { listener, gates, seen };
}

const upd = (n: number): Notification<Obj> => ({ type: 'update', oldObj: { n }, newObj: { n } });

describe('ProcessorListener buffer', () => {
  it('a handler that is always slightly behind keeps a bounded buffer (50 000 notifications, ≤ 3 pending)', async () => {
    const { listener, gates, seen } = gatedListener();
    let sent = 0;
    for (; sent < 3; sent++) listener.add(upd(sent));
    void listener.run();
    let maxCapacity = 0;
    while (sent < 50_000) {
      await until('the handler started on a notification', () => gates.length === 1);
      (gates.shift() as () => void)();
      listener.add(upd(sent++));
      assert.ok(listener.pending <= 3, `pending ${listener.pending}`);
      maxCapacity = Math.max(maxCapacity, listener.capacity);
    }
    await until('drained', () => {
      gates.shift()?.();
      return listener.pending === 0 && seen.length === 50_000;
    });
    listener.stop();
    assert.deepEqual(seen.slice(-3), [49_997, 49_998, 49_999], 'in order, nothing lost');
    assert.ok(maxCapacity <= 64, `buffer capacity grew to ${maxCapacity} slots for at most 3 pending notifications`);
  });

  it('grows for a burst and shrinks back once the burst is handled', async () => {
    const { listener, gates, seen } = gatedListener();
    void listener.run();
    for (let i = 0; i < 10_000; i++) listener.add(upd(i));
    assert.ok(listener.capacity >= 10_000);
    // Stay a little behind while draining: the buffer never becomes empty, yet it must shrink.
    await until('burst drained to 2 pending', () => {
      gates.shift()?.();
      return listener.pending <= 2;
    }, 100_000);
    assert.ok(listener.capacity <= 64, `capacity ${listener.capacity} after the burst`);
    listener.stop();
    assert.deepEqual(seen.slice(0, 3), [0, 1, 2]);
  });

  it('stop drops what is buffered and releases the memory', () => {
    const { listener } = gatedListener();
    for (let i = 0; i < 1000; i++) listener.add(upd(i));
    listener.stop();
    assert.equal(listener.pending, 0);
    assert.ok(listener.capacity <= 64);
    listener.add(upd(1));
    assert.equal(listener.pending, 0, 'nothing is buffered after stop');
  });
});
