import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  findStatusCondition, isStatusConditionFalse, isStatusConditionPresentAndEqual, isStatusConditionTrue, nowRFC3339,
  removeStatusCondition, setStatusCondition, type ConditionLike,
} from './conditions.ts';
import { addFinalizer, containsFinalizer, removeFinalizer } from './finalizers.ts';
import type { KubeObject } from './meta.ts';
import { jsonEqual, mergePatchDiff } from './mergepatch.ts';

test('setStatusCondition: lastTransitionTime moves only when status changes; reason/message/observedGeneration are copied', () => {
  let t = 0;
  const now = (): string => `2025-01-01T00:00:0${++t}Z`;
  const cs: ConditionLike[] = [];
  assert.equal(setStatusCondition(cs, { type: 'Ready', status: 'False', reason: 'Progressing', message: '0/1' }, now), true);
  assert.deepEqual([...cs], [{ type: 'Ready', status: 'False', reason: 'Progressing', message: '0/1', lastTransitionTime: '2025-01-01T00:00:01Z' }]);
  assert.equal(setStatusCondition(cs, { type: 'Ready', status: 'False', reason: 'Progressing', message: '0/1' }, now), false, 'the same: no change');
  assert.equal(setStatusCondition(cs, { type: 'Ready', status: 'False', reason: 'Progressing', message: '1/2', observedGeneration: 2 }, now), true);
  assert.equal(cs[0]?.lastTransitionTime, '2025-01-01T00:00:01Z', 'message and generation changed, status did not: time kept');
  assert.equal(cs[0]?.observedGeneration, 2);
  assert.equal(setStatusCondition(cs, { type: 'Ready', status: 'True', reason: 'Available', message: '2/2', observedGeneration: 2 }, now), true);
  assert.equal(cs[0]?.lastTransitionTime, '2025-01-01T00:00:02Z', 'status changed: time moves');
  assert.equal(setStatusCondition(cs, { type: 'Ready', status: 'False', reason: 'X', lastTransitionTime: '2020-01-01T00:00:00Z' }, now), true);
  assert.equal(cs[0]?.lastTransitionTime, '2020-01-01T00:00:00Z', 'a given time is used on a transition');
  assert.equal(cs[0]?.message, undefined, 'an absent message clears it');
  setStatusCondition(cs, { type: 'Degraded', status: 'False', reason: 'AsExpected' }, now);
  assert.deepEqual(cs.map((c) => c.type), ['Ready', 'Degraded'], 'one per type, appended');
  assert.equal(findStatusCondition(cs, 'Degraded')?.reason, 'AsExpected');
  assert.equal(isStatusConditionFalse(cs, 'Ready'), true);
  assert.equal(isStatusConditionTrue(cs, 'Ready'), false);
  assert.equal(isStatusConditionTrue(cs, 'Missing'), false);
  assert.equal(isStatusConditionFalse(cs, 'Missing'), false, 'absent is neither true nor false');
  assert.equal(isStatusConditionPresentAndEqual(cs, 'Degraded', 'False'), true);
  assert.equal(removeStatusCondition(cs, 'Ready'), true);
  assert.equal(removeStatusCondition(cs, 'Ready'), false);
  assert.deepEqual(cs.map((c) => c.type), ['Degraded']);
  assert.match(nowRFC3339(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'second precision, as metav1.Time');
});

test('finalizer lists: add once, remove all, order of the others kept', () => {
  const o: KubeObject = {};
  assert.equal(containsFinalizer(o, 'a/b'), false);
  assert.equal(addFinalizer(o, 'x/first'), true);
  assert.equal(addFinalizer(o, 'a/b'), true);
  assert.equal(addFinalizer(o, 'a/b'), false);
  assert.deepEqual(o.metadata?.finalizers, ['x/first', 'a/b']);
  assert.equal(removeFinalizer(o, 'x/first'), true);
  assert.equal(removeFinalizer(o, 'x/first'), false);
  assert.deepEqual(o.metadata?.finalizers, ['a/b']);
});

test('mergePatchDiff: only changed fields, null for removed keys, lists whole, undefined when equal', () => {
  const before = { metadata: { name: 'a', labels: { x: '1', y: '2' } }, data: { k: 'v' }, list: [1, 2] };
  const after = { metadata: { name: 'a', labels: { x: '1', z: '3' } }, data: { k: 'v' }, list: [1, 2, 3], added: { n: 1 } };
  assert.deepEqual(mergePatchDiff(before, after), { metadata: { labels: { y: null, z: '3' } }, list: [1, 2, 3], added: { n: 1 } });
  assert.equal(mergePatchDiff(before, structuredClone(before)), undefined);
  assert.deepEqual(mergePatchDiff({ a: { b: 1 } }, { a: 'scalar' }), { a: 'scalar' });
  assert.deepEqual(mergePatchDiff({ a: 1 }, { a: undefined }), { a: null }, 'undefined counts as removed');
  assert.equal(mergePatchDiff({ a: undefined }, {}), undefined, 'undefined equals absent');
  assert.equal(jsonEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }), true);
  assert.equal(jsonEqual([1], [1, 2]), false);
});
