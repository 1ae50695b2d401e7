import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { acknowledgePatch, decide, drainLabel, labelPatch, placementOf, shardLabel, shardView, type Decision, type Placement } from './assignment.ts';

const live = new Set(['a', 'b']);

describe('decide: every row of the transition table', () => {
  const rows: [string, Placement, string | undefined, Decision][] = [
    ['unassigned, no live shard', { shard: undefined, drain: false }, undefined, { kind: 'none', why: 'no-live-shard' }],
    ['unassigned → desired', { shard: undefined, drain: false }, 'a', { kind: 'assign', shard: 'a', from: undefined }],
    ['unassigned with a stale drain label → desired (drain cleared)', { shard: undefined, drain: true }, 'b', { kind: 'assign', shard: 'b', from: undefined }],
    ['on its desired live shard', { shard: 'a', drain: false }, 'a', { kind: 'none', why: 'in-place' }],
    ['live shard, another desired → drain', { shard: 'a', drain: false }, 'b', { kind: 'drain', from: 'a', to: 'b' }],
    ['draining on a live shard → wait', { shard: 'a', drain: true }, 'b', { kind: 'none', why: 'awaiting-drain' }],
    ['draining, desired flipped back → still wait (never cancelled)', { shard: 'a', drain: true }, 'a', { kind: 'none', why: 'awaiting-drain' }],
    ['dead shard → assign at once', { shard: 'gone', drain: false }, 'b', { kind: 'assign', shard: 'b', from: 'gone' }],
    ['dead shard while draining → assign at once', { shard: 'gone', drain: true }, 'a', { kind: 'assign', shard: 'a', from: 'gone' }],
    ['dead shard, no live shard → wait', { shard: 'gone', drain: false }, undefined, { kind: 'none', why: 'no-live-shard' }],
  ];
  for (const [name, placement, desired, want] of rows) {
    test(name, () => assert.deepEqual(decide(placement, desired, desired === undefined ? new Set() : live), want));
  }
});

describe('labels', () => {
  test('placement read from labels; an empty shard label is no assignment', () => {
    assert.deepEqual(placementOf(undefined, 'foo'), { shard: undefined, drain: false });
    assert.deepEqual(placementOf({ [shardLabel('foo')]: 'a', [drainLabel('foo')]: 'true' }, 'foo'), { shard: 'a', drain: true });
    assert.deepEqual(placementOf({ [shardLabel('foo')]: '' }, 'foo'), { shard: undefined, drain: false });
    assert.deepEqual(placementOf({ [shardLabel('network')]: 'a' }, 'foo'), { shard: undefined, drain: false }, 'labels are per controller');
  });

  test('patches: assign sets the shard and clears drain; drain sets drain only; acknowledge clears both', () => {
    assert.deepEqual(labelPatch({ kind: 'assign', shard: 'b', from: 'a' }, 'foo'), { 'shard.ts-controller-manager.io/foo': 'b', 'drain.ts-controller-manager.io/foo': null });
    assert.deepEqual(labelPatch({ kind: 'drain', from: 'a', to: 'b' }, 'foo'), { 'drain.ts-controller-manager.io/foo': 'true' });
    assert.equal(labelPatch({ kind: 'none', why: 'in-place' }, 'foo'), undefined);
    assert.deepEqual(acknowledgePatch('foo'), { 'shard.ts-controller-manager.io/foo': null, 'drain.ts-controller-manager.io/foo': null });
  });

  test('shard view: active, draining, foreign', () => {
    assert.equal(shardView({ [shardLabel('foo')]: 'me' }, 'foo', 'me'), 'active');
    assert.equal(shardView({ [shardLabel('foo')]: 'me', [drainLabel('foo')]: 'true' }, 'foo', 'me'), 'draining');
    assert.equal(shardView({ [shardLabel('foo')]: 'other' }, 'foo', 'me'), 'foreign');
    assert.equal(shardView(undefined, 'foo', 'me'), 'foreign');
  });

  test('the protocol end to end on one object: move between live shards only through drain + acknowledge', () => {
    const labels: Record<string, string> = {};
    const apply = (patch: Record<string, string | null> | undefined): void => {
      for (const [k, v] of Object.entries(patch ?? {})) {
        if (v === null) delete labels[k];
        else labels[k] = v;
      }
    };
    const actors = (): string[] => ['a', 'b'].filter((s) => shardView(labels, 'foo', s) === 'active');
    apply(labelPatch(decide(placementOf(labels, 'foo'), 'a', live), 'foo'));
    assert.deepEqual(actors(), ['a']);
    apply(labelPatch(decide(placementOf(labels, 'foo'), 'b', live), 'foo')); // membership changed: b is desired
    assert.deepEqual(actors(), [], 'while draining nobody starts a reconcile');
    assert.equal(decide(placementOf(labels, 'foo'), 'b', live).kind, 'none');
    apply(acknowledgePatch('foo')); // a finished its in-flight reconcile
    assert.deepEqual(actors(), []);
    apply(labelPatch(decide(placementOf(labels, 'foo'), 'b', live), 'foo'));
    assert.deepEqual(actors(), ['b']);
  });
});
