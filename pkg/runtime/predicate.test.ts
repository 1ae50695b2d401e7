import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../apimachinery/meta.ts';
import { and, annotationsChanged, generationChanged, labelsChanged, not, or, passes, passesAll, type Predicate } from './predicate.ts';

const obj = (generation: number | undefined, labels?: Record<string, string>, annotations?: Record<string, string>): KubeObject =>
  ({ metadata: { name: 'x', ...(generation === undefined ? {} : { generation }), ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) } });
const upd = (p: Predicate, a: KubeObject, b: KubeObject): boolean => passes(p, { type: 'update', oldObj: a, obj: b });

test('ready-made predicates filter updates only; create and delete pass (controller-runtime semantics)', () => {
  for (const p of [generationChanged, labelsChanged, annotationsChanged]) {
    assert.equal(passes(p, { type: 'create', obj: obj(1) }), true);
    assert.equal(passes(p, { type: 'delete', obj: obj(1) }), true);
  }
  assert.equal(upd(generationChanged, obj(1), obj(2)), true);
  assert.equal(upd(generationChanged, obj(2), obj(2, { a: 'b' })), false, 'metadata/status-only update, or a resync');
  assert.equal(upd(generationChanged, obj(undefined), obj(undefined)), false, 'a type without generation never passes');
  assert.equal(upd(labelsChanged, obj(1, { a: '1' }), obj(1, { a: '2' })), true);
  assert.equal(upd(labelsChanged, obj(1, { a: '1' }), obj(1, { a: '1', b: '2' })), true);
  assert.equal(upd(labelsChanged, obj(1, { a: '1' }), obj(2, { a: '1' })), false);
  assert.equal(upd(labelsChanged, obj(1), obj(1, {})), false, 'absent = empty');
  assert.equal(upd(labelsChanged, obj(1, { a: '1' }), obj(1, { b: '1' })), true, 'same size, other key');
  assert.equal(upd(annotationsChanged, obj(1, undefined, { n: 'x' }), obj(1, undefined, { n: 'y' })), true);
  assert.equal(upd(annotationsChanged, obj(1, { a: '1' }), obj(1, { a: '2' })), false);
});

test('combinators and WithPredicates semantics: all of a list must pass; or/and/not', () => {
  const genOrLabels = or(generationChanged, labelsChanged);
  assert.equal(upd(genOrLabels, obj(1, { a: '1' }), obj(1, { a: '2' })), true);
  assert.equal(upd(genOrLabels, obj(1), obj(2)), true);
  assert.equal(upd(genOrLabels, obj(1, undefined, { n: 'x' }), obj(1, undefined, { n: 'y' })), false);
  assert.equal(upd(and(generationChanged, labelsChanged), obj(1, { a: '1' }), obj(2, { a: '1' })), false);
  assert.equal(upd(and(generationChanged, labelsChanged), obj(1, { a: '1' }), obj(2, { a: '2' })), true);
  assert.equal(upd(not(generationChanged), obj(1), obj(1)), true);
  assert.equal(passes(not(generationChanged), { type: 'create', obj: obj(1) }), false, 'not() of a passing create');
  assert.equal(passesAll([generationChanged, labelsChanged], { type: 'update', oldObj: obj(1, { a: '1' }), obj: obj(2, { a: '1' }) }), false);
  assert.equal(passesAll(undefined, { type: 'update', oldObj: obj(1), obj: obj(1) }), true, 'no predicates: everything passes');
  const onlyCreates: Predicate = { update: () => false, delete: () => false };
  assert.equal(passes(onlyCreates, { type: 'create', obj: obj(1) }), true, 'an absent method passes');
});
