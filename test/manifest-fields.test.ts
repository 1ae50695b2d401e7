/**
 * Every field of config/manager/manager.yaml is accounted for in docs/real-node.md's table ("config/manager/manager.yaml,
 * field by field"): which real-node test exercises it and how it is observed, or why it is not. No cluster: this reads
 * the two files. A field added to manager.yaml without a row fails here by its path; a row whose path no longer exists
 * fails too. The Test column may only use the test labels the section defines above the table and the qualifiers it
 * explains ((partly), (bound), (reported), (inert)); a row with no test must say "Not exercised", a (reported) one
 * that it is not asserted.
 *
 * Path syntax (the table's second column; the first is the document's kind): map keys joined with `.`, keys that are
 * not plain identifiers quoted (`metadata.labels["app.kubernetes.io/name"]`); list items by their `name`
 * (`containers[manager]`), scalar list items by their value (`args[--leader-elect]`), other items by index.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadAll } from 'js-yaml';

const repo = join(import.meta.dirname, '..');
const SECTION = '## config/manager/manager.yaml, field by field';

/** The leaf paths of one parsed YAML value (scalars, and empty maps/lists, are leaves). */
function leafPaths(value: unknown, prefix = ''): string[] {
  const key = (k: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${prefix ? '.' : ''}${k}` : `[${JSON.stringify(k)}]`);
  if (Array.isArray(value)) {
    if (value.length === 0) return [prefix];
    return value.flatMap((item: unknown, i) => {
      const named = item !== null && typeof item === 'object' && !Array.isArray(item) ? (item as Record<string, unknown>).name : undefined;
      const id = typeof named === 'string' ? named : item === null || typeof item !== 'object' ? String(item) : String(i);
      return item !== null && typeof item === 'object' ? leafPaths(item, `${prefix}[${id}]`) : [`${prefix}[${id}]`];
    });
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return [prefix];
    return entries.flatMap(([k, v]) => leafPaths(v, `${prefix}${key(k)}`));
  }
  return [prefix];
}

/** `<kind> <path>` for every leaf of every document of a multi-document YAML text. */
function manifestFields(yaml: string): string[] {
  return loadAll(yaml).filter((d) => d !== null && d !== undefined).flatMap((doc) => {
    const kind = (doc as { kind?: unknown }).kind;
    assert.equal(typeof kind, 'string', 'every document has a kind');
    return leafPaths(doc).map((p) => `${kind as string} ${p}`);
  });
}

/** `<kind> <path>` of every row of the section's table (first cell the kind, second the path in backticks). */
function documentedFields(markdown: string): string[] {
  const start = markdown.indexOf(`\n${SECTION}\n`);
  assert.ok(start >= 0, `docs/real-node.md has the section "${SECTION}"`);
  const rest = markdown.slice(start + SECTION.length + 2);
  const end = rest.search(/^## /m);
  const rows = (end >= 0 ? rest.slice(0, end) : rest).split('\n').filter((l) => l.startsWith('|'));
  // Header and separator rows: the first two of the table.
  return rows.slice(2).map((row) => {
    const cells = row.split('|').slice(1, -1).map((c) => c.trim());
    const path = /^`([^`]+)`$/.exec(cells[1] ?? '')?.[1];
    assert.ok(cells[0] && path, `a row is "| <kind> | \`<path>\` | … |": ${row}`);
    return `${cells[0]} ${path}`;
  });
}

test('leaf paths: keys, quoted keys, named and scalar list items, empty values', () => {
  assert.deepEqual(leafPaths({ a: { b: 1, 'x.y/z': '' }, l: [{ name: 'n', v: true }, 's', { w: 2 }], e: {}, f: [] }), [
    'a.b', 'a["x.y/z"]', 'l[n].name', 'l[n].v', 'l[s]', 'l[2].w', 'e', 'f',
  ]);
});

test('every field of config/manager/manager.yaml has a row in docs/real-node.md, and every row a field', () => {
  const fields = manifestFields(readFileSync(join(repo, 'config', 'manager', 'manager.yaml'), 'utf8'));
  const rows = documentedFields(readFileSync(join(repo, 'docs', 'real-node.md'), 'utf8'));
  assert.ok(fields.length > 50, `manager.yaml parsed: ${fields.length} fields`);
  const dup = rows.filter((r, i) => rows.indexOf(r) !== i);
  assert.deepEqual(dup, [], 'rows named twice');
  const missing = fields.filter((f) => !rows.includes(f));
  const stale = rows.filter((r) => !fields.includes(r));
  assert.deepEqual({ missing, stale }, { missing: [], stale: [] },
    `docs/real-node.md "${SECTION.slice(3)}": missing = fields of manager.yaml without a row; stale = rows naming no field`);
});

test('every row names its tests by the labels the section defines, with the qualifiers it explains; unasserted rows say so', () => {
  const doc = readFileSync(join(repo, 'docs', 'real-node.md'), 'utf8');
  const section = doc.slice(doc.indexOf(`\n${SECTION}\n`));
  const intro = section.slice(0, section.indexOf('\n| Document |'));
  // "- **Ready**: …; **Sharded**: …" — the labels the Test column may use.
  const labels = new Set([...intro.matchAll(/\*\*(\w+)\*\*:/g)].map((m) => m[1] ?? ''));
  assert.ok(labels.size >= 9, `test labels defined before the table: ${[...labels].join(', ')}`);
  const qualifiers = ['partly', 'bound', 'reported', 'inert'];
  for (const q of qualifiers) assert.ok(intro.includes(`*(${q})*`), `the qualifier (${q}) is explained above the table`);
  const end = section.slice(2).search(/^## /m);
  const rows = section.slice(0, end >= 0 ? end + 2 : undefined).split('\n').filter((l) => l.startsWith('|')).slice(2);
  const bad: string[] = [];
  for (const row of rows) {
    const [, path = '', tests = '', observed = ''] = row.split('|').slice(1, -1).map((c) => c.trim());
    if (tests === '—') {
      if (!/^Not exercised/.test(observed)) bad.push(`${path}: no test, but the row does not say "Not exercised"`);
      continue;
    }
    for (const part of tests.split(', ')) {
      const m = /^(\w+)(?: \((\w+)\))?$/.exec(part);
      if (!m || !labels.has(m[1] ?? '') || (m[2] !== undefined && !qualifiers.includes(m[2]))) bad.push(`${path}: "${part}"`);
      if (m?.[2] === 'reported' && !/\b(Not asserted|reported)\b/i.test(observed)) bad.push(`${path}: (reported) but the row does not say it is not asserted`);
    }
  }
  assert.deepEqual(bad, [], 'Test column: labels defined above the table, qualifiers (partly|bound|reported|inert)');
});
