/**
 * The layering of pkg/: no two rooms (pkg/<dir>) import each other, directly or through others, and no file-level
 * import cycle exists. Type-only, re-exported and dynamic imports count (see hack/importgraph.ts), so a cycle cannot
 * be hidden behind `import type` or `import()`. Test files are not part of the graph.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { cycles, describeCycles, fileGraph, roomGraph, specifiers } from '../hack/importgraph.ts';

const root = resolve(import.meta.dirname, '..');

test('specifiers: static, type-only, re-export, side-effect and dynamic imports are all edges', () => {
  const text = [
    "import { a } from './a.ts';",
    "import type { B } from './b.ts';",
    "export { c } from './c.ts';",
    "export type { D } from './d.ts';",
    "export * from './e.ts';",
    "import './f.ts';",
    "const g = await import('./g.ts');",
    "import { readFileSync } from 'node:fs';",
  ].join('\n');
  assert.deepEqual(specifiers(text).sort(), ['./a.ts', './b.ts', './c.ts', './d.ts', './e.ts', './f.ts', './g.ts', 'node:fs']);
});

test('cycles: finds a room cycle through a third room and a self-edge, none in a DAG', () => {
  const g = (edges: Record<string, string[]>): Map<string, Set<string>> => new Map(Object.entries(edges).map(([k, v]) => [k, new Set(v)]));
  assert.deepEqual(cycles(g({ a: ['b'], b: ['c'], c: ['a'], d: ['a'] })), [['a', 'b', 'c', 'a']]);
  assert.deepEqual(cycles(g({ a: ['a'] })), [['a', 'a']]);
  assert.deepEqual(cycles(g({ a: ['b', 'c'], b: ['c'], c: [] })), []);
});

test('pkg/: the graph is the real one (files and rooms found)', () => {
  const files = fileGraph(root);
  assert.ok(files.has('pkg/index.ts'));
  assert.ok(files.get('pkg/index.ts')!.size > 10, 'pkg/index.ts imports many files');
  const rooms = roomGraph(files);
  for (const r of ['client', 'informerfactory', 'manager', 'runtime', 'controller', 'apis']) assert.ok(rooms.has(r), r);
});

test('pkg/: no two rooms import each other (transitively)', () => {
  assert.deepEqual(describeCycles(roomGraph(fileGraph(root))), [], 'room cycles');
});

test('pkg/: no file-level import cycle', () => {
  assert.deepEqual(describeCycles(fileGraph(root)), [], 'file cycles');
});

test('pkg/: no room imports the public facade pkg/index.ts', () => {
  const importers = [...fileGraph(root)].filter(([, deps]) => deps.has('pkg/index.ts')).map(([f]) => f);
  assert.deepEqual(importers, []);
});

test('pkg/apimachinery is the lowest room: it imports no other room and no package', () => {
  const files = [...fileGraph(root)].filter(([f]) => f.startsWith('pkg/apimachinery/'));
  assert.ok(files.length >= 6, 'the apimachinery files are found');
  for (const [file, deps] of files) {
    assert.deepEqual([...deps].filter((d) => !d.startsWith('pkg/apimachinery/')), [], `${file} imports another room`);
    const external = specifiers(readFileSync(resolve(root, file), 'utf8')).filter((s) => !s.startsWith('.'));
    assert.deepEqual(external, [], `${file} imports a package`);
  }
});
