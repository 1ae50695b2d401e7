import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { liveShards, nextExpiry, observe, type ShardLease } from './membership.ts';

const lease = (name: string, holder: string, renewTime: string, seconds = 15): ShardLease =>
  ({ metadata: { name }, spec: { holderIdentity: holder, leaseDurationSeconds: seconds, renewTime } });

describe('shard membership: every row of the table', () => {
  test('first sight → live until observedAt + duration (whatever the holder\'s clock says)', () => {
    const obs = observe(new Map(), [lease('shard-a', 'a', '1999-01-01T00:00:00Z')], 1_000);
    assert.deepEqual([...liveShards(obs, 1_000)], ['a']);
    assert.deepEqual([...liveShards(obs, 15_999)], ['a']);
    assert.deepEqual([...liveShards(obs, 16_000)], []);
  });

  test('the same record again keeps the first observation time; a renewal extends', () => {
    let obs = observe(new Map(), [lease('shard-a', 'a', 't1')], 0);
    obs = observe(obs, [lease('shard-a', 'a', 't1')], 10_000);
    assert.deepEqual([...liveShards(obs, 15_000)], [], 'an unrenewed lease expires 15 s after it was FIRST seen');
    obs = observe(obs, [lease('shard-a', 'a', 't2')], 14_000);
    assert.deepEqual([...liveShards(obs, 28_999)], ['a']);
    assert.equal(nextExpiry(obs, 20_000), 29_000);
  });

  test('a released lease (no holder) and a deleted lease are not shards', () => {
    let obs = observe(new Map(), [lease('shard-a', 'a', 't1'), lease('shard-b', 'b', 't1')], 0);
    obs = observe(obs, [lease('shard-a', '', 't2')], 1_000);
    assert.deepEqual([...liveShards(obs, 1_000)], []);
    assert.equal(nextExpiry(obs, 1_000), undefined);
  });

  test('observe is pure', () => {
    const prev = observe(new Map(), [lease('shard-a', 'a', 't1')], 0);
    const copy = new Map(prev);
    observe(prev, [lease('shard-a', 'a', 't2')], 5_000);
    assert.deepEqual(prev, copy);
  });
});
