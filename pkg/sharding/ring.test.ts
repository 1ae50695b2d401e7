import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hash32, HashRing } from './ring.ts';

const keys = Array.from({ length: 3000 }, (_, i) => `ns-${i % 7}/foo-${i}`);

function assignment(ring: HashRing): Map<string, string | undefined> {
  return new Map(keys.map((k) => [k, ring.lookup(k)]));
}

describe('HashRing', () => {
  test('no members: no owner; one member owns everything', () => {
    assert.equal(new HashRing([]).lookup('a/b'), undefined);
    const one = new HashRing(['only']);
    assert.ok(keys.every((k) => one.lookup(k) === 'only'));
  });

  test('deterministic and independent of member order and duplicates', () => {
    const a = assignment(new HashRing(['s-1', 's-2', 's-3']));
    const b = assignment(new HashRing(['s-3', 's-1', 's-2', 's-1']));
    assert.deepEqual(a, b);
  });

  test('balanced: 3 shards × 3000 keys, each within ±15 % of a third', () => {
    const counts = new Map<string, number>();
    for (const s of assignment(new HashRing(['replica-a', 'replica-b', 'replica-c'])).values()) counts.set(s ?? '', (counts.get(s ?? '') ?? 0) + 1);
    assert.equal(counts.size, 3);
    for (const [shard, n] of counts) assert.ok(Math.abs(n - 1000) <= 150, `${shard}: ${n} of 3000`);
  });

  test('adding a shard moves only keys to it (about a quarter); removing one moves only its keys', () => {
    const three = assignment(new HashRing(['a', 'b', 'c']));
    const four = assignment(new HashRing(['a', 'b', 'c', 'd']));
    let moved = 0;
    for (const k of keys) {
      if (three.get(k) !== four.get(k)) {
        moved++;
        assert.equal(four.get(k), 'd', `${k} moved between two shards that stayed`);
      }
    }
    assert.ok(moved > 3000 * 0.15 && moved < 3000 * 0.35, `moved ${moved} of 3000 (expected about 750)`);
    const two = assignment(new HashRing(['a', 'c']));
    for (const k of keys) if (three.get(k) !== 'b') assert.equal(two.get(k), three.get(k), `${k} moved although its shard stayed`);
  });

  test('hash32 spreads similar strings', () => {
    const buckets = new Array<number>(16).fill(0);
    for (let i = 0; i < 16_000; i++) buckets[hash32(`key-${i}`) >>> 28]! += 1;
    for (const b of buckets) assert.ok(b > 800 && b < 1200, `bucket ${b} of expected 1000`);
  });

  test('virtualNodes must be a positive integer', () => {
    assert.throws(() => new HashRing(['a'], 0), /virtualNodes must be a positive integer/);
  });
});
