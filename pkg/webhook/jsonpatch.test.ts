import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonEqual } from '../apimachinery/mergepatch.ts';
import { escapePointerSegment, jsonPatch, type JsonPatchOperation } from './jsonpatch.ts';

/**
 * An RFC 6902 applier for add/remove/replace, written independently of jsonpatch.ts from the RFC's rules (strict:
 * `remove`/`replace` of a missing member and out-of-range indices throw), so the tests can check that applying the
 * patch gives the target. The real API server applies these patches in test/webhook.test.ts.
 */
function apply(doc: unknown, ops: readonly JsonPatchOperation[]): unknown {
  let root = structuredClone(doc);
  for (const op of ops) {
    if (op.op !== 'add' && op.op !== 'remove' && op.op !== 'replace') throw new Error(`unexpected op ${op.op}`);
    if (op.path === '') {
      if (op.op === 'remove') root = undefined;
      else root = structuredClone(op.value);
      continue;
    }
    const segments = op.path.slice(1).split('/').map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = segments.pop()!;
    let parent: unknown = root;
    for (const s of segments) {
      if (Array.isArray(parent)) parent = parent[Number(s)];
      else if (typeof parent === 'object' && parent !== null && Object.hasOwn(parent, s)) parent = (parent as Record<string, unknown>)[s];
      else throw new Error(`path ${op.path}: ${s} missing`);
    }
    if (Array.isArray(parent)) {
      const i = Number(last);
      if (!/^\d+$/.test(last)) throw new Error(`bad index ${last}`);
      if (op.op === 'add') {
        if (i > parent.length) throw new Error(`add index ${i} out of range`);
        parent.splice(i, 0, structuredClone(op.value));
      } else {
        if (i >= parent.length) throw new Error(`${op.op} index ${i} out of range`);
        if (op.op === 'remove') parent.splice(i, 1);
        else parent[i] = structuredClone(op.value);
      }
    } else if (typeof parent === 'object' && parent !== null) {
      const o = parent as Record<string, unknown>;
      if (op.op !== 'add' && !Object.hasOwn(o, last)) throw new Error(`${op.op} of missing member ${op.path}`);
      if (op.op === 'remove') delete o[last];
      else o[last] = structuredClone(op.value);
    } else {
      throw new Error(`path ${op.path}: parent is not a container`);
    }
  }
  return root;
}

function roundTrip(from: unknown, to: unknown): JsonPatchOperation[] {
  const before = structuredClone(from);
  const ops = jsonPatch(from, to);
  assert.deepEqual(from, before, 'the input is not modified');
  assert.ok(jsonEqual(apply(from, ops), JSON.parse(JSON.stringify(to))), `patch ${JSON.stringify(ops)} turns from into to`);
  return ops;
}

test('escapePointerSegment: ~ before /, as RFC 6901 says', () => {
  assert.equal(escapePointerSegment('a/b'), 'a~1b');
  assert.equal(escapePointerSegment('a~b'), 'a~0b');
  assert.equal(escapePointerSegment('~/'), '~0~1');
  assert.equal(escapePointerSegment('~1'), '~01'); // not confused with an escaped '/'
});

test('jsonPatch: equal documents give no operation', () => {
  assert.deepEqual(jsonPatch({ a: [1, { b: null }], c: 'x' }, { c: 'x', a: [1, { b: null }] }), []);
  assert.deepEqual(jsonPatch({ a: 1 }, { a: 1, b: undefined }), []);
});

test('jsonPatch: object members added, removed and replaced, deep paths', () => {
  const ops = roundTrip(
    { spec: { a: 1, b: 2, nested: { keep: true, drop: 'x' } } },
    { spec: { a: 1, b: 3, c: { d: [1] }, nested: { keep: true } } },
  );
  assert.deepEqual(ops, [
    { op: 'add', path: '/spec/c', value: { d: [1] } },
    { op: 'replace', path: '/spec/b', value: 3 },
    { op: 'remove', path: '/spec/nested/drop' },
  ]);
});

test('jsonPatch: keys with "/" and "~" are escaped (annotation and label keys)', () => {
  const ops = roundTrip(
    { metadata: { annotations: { 'example.com/old': '1', 'a~b': 'x' } } },
    { metadata: { annotations: { 'example.com/new': '2', 'a~b': 'y', '~/': 'z' } } },
  );
  assert.deepEqual(ops, [
    { op: 'remove', path: '/metadata/annotations/example.com~1old' },
    { op: 'add', path: '/metadata/annotations/example.com~1new', value: '2' },
    { op: 'add', path: '/metadata/annotations/~0~1', value: 'z' },
    { op: 'replace', path: '/metadata/annotations/a~0b', value: 'y' },
  ]);
});

test('jsonPatch: arrays — changed elements in place, appended in ascending order, surplus removed from the end down', () => {
  assert.deepEqual(roundTrip({ l: [1, 2, 3] }, { l: [1, 5, 3, 4, 6] }), [
    { op: 'replace', path: '/l/1', value: 5 },
    { op: 'add', path: '/l/3', value: 4 },
    { op: 'add', path: '/l/4', value: 6 },
  ]);
  assert.deepEqual(roundTrip({ l: [1, 2, 3, 4] }, { l: [1] }), [
    { op: 'remove', path: '/l/3' },
    { op: 'remove', path: '/l/2' },
    { op: 'remove', path: '/l/1' },
  ]);
  // A field inside an element is one deep operation, not a replaced element.
  assert.deepEqual(roundTrip({ c: [{ name: 'a', image: 'x' }] }, { c: [{ name: 'a', image: 'y' }] }), [
    { op: 'replace', path: '/c/0/image', value: 'y' },
  ]);
  roundTrip({ l: [] }, { l: [[1], { a: 1 }] });
});

test('jsonPatch: type changes replace; undefined members count as removed; root replacement', () => {
  assert.deepEqual(roundTrip({ a: { b: 1 } }, { a: [1] }), [{ op: 'replace', path: '/a', value: [1] }]);
  assert.deepEqual(roundTrip({ a: 1, b: 2 }, { a: 1, b: undefined }), [{ op: 'remove', path: '/b' }]);
  assert.deepEqual(roundTrip({ a: null }, { a: 0 }), [{ op: 'replace', path: '/a', value: 0 }]);
  assert.deepEqual(jsonPatch({ a: 1 }, 'x'), [{ op: 'replace', path: '', value: 'x' }]);
});

test('jsonPatch: values in operations are copies (changing the target later does not change the patch)', () => {
  const to = { a: { b: [1] } };
  const ops = jsonPatch({}, to);
  to.a.b.push(2);
  assert.deepEqual(ops, [{ op: 'add', path: '/a', value: { b: [1] } }]);
});

test('jsonPatch: 2 000 random document pairs round-trip', () => {
  // Deterministic PRNG (mulberry32) so a failure is reproducible.
  let seed = 42;
  const rand = (): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const keys = ['a', 'b', 'c/d', 'e~f', '~1', ''];
  const value = (depth: number): unknown => {
    const r = rand();
    if (depth > 3 || r < 0.35) return [null, true, 1, 'x', 2.5, ''][Math.floor(rand() * 6)];
    if (r < 0.65) return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
    const o: Record<string, unknown> = {};
    for (const k of keys) if (rand() < 0.4) o[k] = value(depth + 1);
    return o;
  };
  for (let i = 0; i < 2000; i++) {
    const from = value(0);
    // Targets are often mutations of the source, so deep diffs happen (not only whole replacements).
    const to = rand() < 0.5 ? value(0) : (() => {
      const c = structuredClone(from);
      if (typeof c === 'object' && c !== null && !Array.isArray(c)) (c as Record<string, unknown>)[keys[Math.floor(rand() * keys.length)]!] = value(2);
      else if (Array.isArray(c)) c.splice(Math.floor(rand() * (c.length + 1)), rand() < 0.5 ? 1 : 0, value(2));
      return c;
    })();
    roundTrip(from, to);
  }
});
