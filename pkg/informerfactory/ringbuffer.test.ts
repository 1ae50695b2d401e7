import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RingBuffer } from './ringbuffer.ts';

describe('RingBuffer', () => {
  it('is a FIFO across wrap-around and growth', () => {
    const r = new RingBuffer<number>(4);
    const out: number[] = [];
    let next = 0;
    // Interleave pushes and shifts so the head wraps several times, then grow while wrapped.
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 3; i++) r.push(next++);
      for (let i = 0; i < 2; i++) out.push(r.shift() as number);
    }
    while (r.length > 0) out.push(r.shift() as number);
    assert.deepEqual(out, Array.from({ length: next }, (_, i) => i));
    assert.equal(r.shift(), undefined);
  });

  it('capacity follows the length, not the traffic: steady state with few pending stays at the initial capacity', () => {
    const r = new RingBuffer<number>(8);
    for (let i = 0; i < 3; i++) r.push(i);
    for (let i = 3; i < 100_000; i++) {
      r.push(i);
      assert.equal(r.shift(), i - 3);
    }
    assert.equal(r.capacity, 8);
    assert.equal(r.length, 3);
  });

  it('grows by doubling for a burst and shrinks by halving as it drains (capacity <= max(initial, 4 × length))', () => {
    const r = new RingBuffer<number>(8);
    for (let i = 0; i < 1000; i++) r.push(i);
    assert.equal(r.capacity, 1024);
    while (r.length > 1) {
      r.shift();
      assert.ok(r.capacity <= Math.max(8, 4 * r.length), `capacity ${r.capacity} for ${r.length}`);
    }
    assert.equal(r.capacity, 8);
  });

  it('keeps no reference to elements it handed out', () => {
    const r = new RingBuffer<object>(4);
    const a = {};
    r.push(a);
    r.shift();
    assert.ok(!(r as unknown as { slots: unknown[] }).slots.includes(a));
  });

  it('clear empties it and returns to the initial capacity', () => {
    const r = new RingBuffer<number>(2);
    for (let i = 0; i < 100; i++) r.push(i);
    r.clear();
    assert.equal(r.length, 0);
    assert.equal(r.capacity, 2);
    assert.equal(r.shift(), undefined);
  });
});
