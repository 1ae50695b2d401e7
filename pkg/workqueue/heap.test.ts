import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type HeapEntry, MinHeap } from './heap.ts';

interface Item extends HeapEntry {
  key: number;
  name: string;
}

const item = (key: number, name = String(key)): Item => ({ key, name, index: -1 });
const byKey = (a: Item, b: Item): boolean => a.key < b.key;

/** Checks the heap invariants through the public surface: every entry's index, and the pop order. */
function drain(h: MinHeap<Item>): number[] {
  const out: number[] = [];
  for (let e = h.pop(); e !== undefined; e = h.pop()) {
    assert.equal(e.index, -1, 'a popped entry is marked out of the heap');
    out.push(e.key);
  }
  return out;
}

/** A deterministic pseudo-random sequence (LCG), so a failure reproduces. */
function lcg(seed: number): () => number {
  let x = seed;
  return () => (x = (x * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
}

describe('MinHeap', () => {
  it('empty: size 0, peek and pop give undefined', () => {
    const h = new MinHeap<Item>(byKey);
    assert.equal(h.size, 0);
    assert.equal(h.peek(), undefined);
    assert.equal(h.pop(), undefined);
  });

  it('pops in key order whatever the push order, duplicates included', () => {
    const h = new MinHeap<Item>(byKey);
    for (const k of [5, 3, 9, 1, 3, 7, 0, 9, 2]) h.push(item(k));
    assert.equal(h.size, 9);
    assert.equal(h.peek()?.key, 0);
    assert.deepEqual(drain(h), [0, 1, 2, 3, 3, 5, 7, 9, 9]);
    assert.equal(h.size, 0);
  });

  it('each entry knows its position while in the heap', () => {
    const h = new MinHeap<Item>(byKey);
    const items = [4, 8, 1, 6, 2].map((k) => item(k));
    for (const e of items) h.push(e);
    const positions = items.map((e) => e.index).sort();
    assert.deepEqual(positions, [0, 1, 2, 3, 4], 'indexes are a permutation of 0..size-1');
    assert.equal(h.peek(), items[2], 'the smallest is at index 0');
    assert.equal(items[2]?.index, 0);
  });

  it('fix after a key got smaller moves the entry up; after it got larger, down', () => {
    const h = new MinHeap<Item>(byKey);
    const items = [10, 20, 30, 40, 50, 60].map((k) => item(k));
    for (const e of items) h.push(e);
    const last = items[5] as Item;
    last.key = 5;
    h.fix(last);
    assert.equal(h.peek(), last);
    const top = items[0] as Item;
    top.key = 45;
    h.fix(top);
    assert.deepEqual(drain(h), [5, 20, 30, 40, 45, 50]);
  });

  it('fix of an entry that is not in the heap (popped) does nothing', () => {
    const h = new MinHeap<Item>(byKey);
    const a = item(1);
    const b = item(2);
    h.push(a);
    h.push(b);
    assert.equal(h.pop(), a);
    a.key = 0;
    h.fix(a);
    assert.equal(h.size, 1);
    assert.equal(h.peek(), b);
  });

  it('clear empties the heap and marks every entry out of it', () => {
    const h = new MinHeap<Item>(byKey);
    const items = [3, 1, 2].map((k) => item(k));
    for (const e of items) h.push(e);
    h.clear();
    assert.equal(h.size, 0);
    assert.equal(h.peek(), undefined);
    assert.ok(items.every((e) => e.index === -1));
    h.push(item(7));
    assert.deepEqual(drain(h), [7], 'usable after clear');
  });

  it('random pushes, pops and key changes agree with a sorted array (1 000 operations)', () => {
    const rnd = lcg(42);
    const h = new MinHeap<Item>(byKey);
    const live: Item[] = [];
    for (let op = 0; op < 1_000; op++) {
      const r = rnd();
      if (r < 0.5 || live.length === 0) {
        const e = item(Math.floor(rnd() * 100));
        h.push(e);
        live.push(e);
      } else if (r < 0.75) {
        const e = h.pop() as Item;
        const min = Math.min(...live.map((x) => x.key));
        assert.equal(e.key, min, `op ${op}: pop gives the minimum`);
        live.splice(live.indexOf(e), 1);
      } else {
        const e = live[Math.floor(rnd() * live.length)] as Item;
        e.key = Math.floor(rnd() * 100);
        h.fix(e);
      }
      assert.equal(h.size, live.length);
      if (live.length > 0) assert.equal(h.peek()?.key, Math.min(...live.map((x) => x.key)), `op ${op}: peek is the minimum`);
    }
    assert.deepEqual(drain(h), live.map((e) => e.key).sort((a, b) => a - b));
  });
});
