/**
 * Every write the manager's code makes has a row in docs/safety.md's table "Every write, what fences it, and what a
 * late write can still do" (issue 31), the way test/manifest-fields.test.ts holds docs/real-node.md to manager.yaml.
 * No cluster: this reads pkg/ and the doc.
 *
 * What counts as a write call site (exactly):
 *  - Kubernetes API: in every non-test `.ts` file under pkg/, a call `.json(`, `.request(`, `.send(` or `.stream(`
 *    (type arguments allowed) whose first argument is the string literal 'POST', 'PUT', 'PATCH' or 'DELETE' (line
 *    breaks allowed). Its key is `<file> <VERB>`. Not scanned: pkg/client/ (the REST and typed clients that define
 *    these verbs, with no call sites of their own), pkg/neutron/ (the Neutron library: its writes are counted where
 *    they are called, below) and pkg/testing/ (the test-environment library: it installs CRDs in a test cluster and
 *    never runs in the manager), pkg/api/ (generated type-only modules), pkg/scaffold/ (templates of a generated
 *    project: the requests in them are text). So that nothing slips past the pattern, a
 *    write-verb literal anywhere else in a scanned file fails the test too, unless it is in a comment, a `case`, a
 *    union type member, a `===`/`!==` comparison or an `allow:` header value.
 *  - Typed client (library helpers such as pkg/runtime/createorpatch.ts, finalizer.ts): in a scanned file that imports
 *    pkg/client/typed.ts, a call `client.<m>(`, `this.secrets.<m>(` or `client.status().<m>(` with <m> one of create, update, patch,
 *    delete, apply; key `<file> typed.<m>`. Any other `.create(`/`.update(`/`.patch(`/`.delete(` call in such a file
 *    fails the test (name the ResourceClient `client`, or extend this pattern); `.apply(` elsewhere is the
 *    finalizer's user callback `handlers.apply(` only; `warned.delete(` is a Set.
 *  - Neutron: a call `.<m>(` anywhere under pkg/ outside pkg/neutron/, where <m> is a NeutronClient method whose name
 *    starts with create, update, delete, add, remove or set (the write methods; checked: every write-verb request
 *    in pkg/neutron/client.ts is inside such a method or the private `createTagged` they use). Key:
 *    `<file> neutron.<m>`.
 *
 * The table's last cell lists call sites as `` `<file>` <VERB or neutron.method> `` with an optional `×N`, separated
 * by `;`. For each key, the numbers listed over all rows must equal the number of call sites: a new write fails
 * here until a row (or its count) says what fences it, and a row whose call site is gone fails too.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const repo = join(import.meta.dirname, '..');
const SECTION = '### Every write, what fences it, and what a late write can still do';
const VERBS = '(POST|PUT|PATCH|DELETE)';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') && !p.endsWith('.test.ts') ? [relative(repo, p)] : [];
  });
}

/** The NeutronClient write methods (see the file comment), checked to cover every write request of client.ts. */
function neutronWriteMethods(): string[] {
  const text = readFileSync(join(repo, 'pkg/neutron/client.ts'), 'utf8');
  const cls = text.slice(text.indexOf('export class NeutronClient'));
  const parts = cls.split(/^ {2}(?=(?:private |public )?(?:async )?\w+\s*(?:<[^(]*>)?\()/m);
  const methods: string[] = [];
  for (const part of parts.slice(1)) {
    const name = /^(?:private |public )?(?:async )?(\w+)/.exec(part)?.[1] ?? '';
    const isWrite = /^(create|update|delete|add|remove|set)[A-Z]/.test(name);
    if (isWrite && !part.startsWith('private')) methods.push(name);
    if (new RegExp(`\\.json(?:<[^()]*?>)?\\(\\s*'${VERBS}'`).test(part)) {
      assert.ok(isWrite || name === 'createTagged', `NeutronClient.${name} sends a write: name it create…/update…/delete…/add…/remove…/set… or extend this test`);
    }
  }
  assert.ok(methods.length >= 6, `found NeutronClient write methods: ${methods.join(', ')}`);
  return methods;
}

/** Every write call site in pkg/, by key (see the file comment), with where. */
function writeSites(): Map<string, string[]> {
  const sites = new Map<string, string[]>();
  const add = (key: string, where: string): void => void sites.set(key, [...(sites.get(key) ?? []), where]);
  const lineOf = (text: string, i: number): number => text.slice(0, i).split('\n').length;
  const neutron = new RegExp(`\\.(${neutronWriteMethods().join('|')})\\(`, 'g');
  for (const file of files(join(repo, 'pkg'))) {
    const text = readFileSync(join(repo, file), 'utf8');
    if (!file.startsWith('pkg/neutron/')) {
      for (const m of text.matchAll(neutron)) add(`${file} neutron.${m[1] ?? ''}`, `${file}:${lineOf(text, m.index)}`);
    }
    if (/^pkg\/(client|neutron|testing)\//.test(file)) continue;
    if (file.startsWith('pkg/api/')) continue; // generated type-only modules (no runtime code); 'CREATE' there is an enum value
    if (file.startsWith('pkg/scaffold/')) continue; // project templates: a 'POST' there is text of a generated test, not a request
    if (/^import [^;]*from '[^']*client\/typed\.ts'/m.test(text)) {
      const typed = [...text.matchAll(/\b(?:client|this\.secrets)(?:\.status\(\))?\.(create|update|patch|delete|apply)\(/g)];
      for (const m of typed) add(`${file} typed.${m[1] ?? ''}`, `${file}:${lineOf(text, m.index)}`);
      const all = [...text.matchAll(/\.(create|update|patch|delete|apply)\(/g)].filter((m) => !/(handlers|warned)$/.test(text.slice(0, m.index))); // Set/Map deletes, not writes
      assert.equal(all.length, typed.length,
        `${file}: a typed-client write not on \`client\` at line(s) ${all.filter((m) => !typed.some((t) => t.index + t[0].length === m.index + m[0].length)).map((m) => lineOf(text, m.index)).join(', ')}; extend the pattern`);
    }
    const calls = [...text.matchAll(new RegExp(`\\.(?:json|request|send|stream)(?:<[^()]*?>)?\\(\\s*'${VERBS}'`, 'g'))];
    for (const m of calls) add(`${file} ${m[1] ?? ''}`, `${file}:${lineOf(text, m.index)}`);
    // Not a request: a comment, a `case 'DELETE':`, a union member (`| 'DELETE'`: AdmissionReview operations) or a
    // comparison (`req.method !== 'POST'`: a server checking what it was sent) or a 405's `allow:` header.
    const literals = [...text.matchAll(new RegExp(`'${VERBS}'`, 'g'))].filter((m) => !/(\/\/|\bcase|\||[!=]==|\ballow:)$/.test(text.slice(0, m.index).trimEnd()));
    assert.equal(literals.length, calls.length,
      `${file}: a write verb outside the recognized call pattern at line(s) ${literals.map((m) => lineOf(text, m.index)).join(', ')}; extend the pattern`);
  }
  return sites;
}

/** For each call-site key, how many calls docs/safety.md's table lists, and which rows. */
function documentedSites(): Map<string, { n: number; rows: string[] }> {
  const md = readFileSync(join(repo, 'docs/safety.md'), 'utf8');
  const start = md.indexOf(`\n${SECTION}\n`);
  assert.ok(start >= 0, `docs/safety.md has the section "${SECTION}"`);
  const rest = md.slice(start + SECTION.length + 2);
  const rows = rest.slice(0, rest.search(/^#{2,3} /m)).split('\n').filter((l) => l.startsWith('|')).slice(2);
  assert.ok(rows.length > 0, 'the table has rows');
  const out = new Map<string, { n: number; rows: string[] }>();
  for (const row of rows) {
    const cells = row.split('|').slice(1, -1).map((c) => c.trim());
    const last = cells.at(-1) ?? '';
    const items = last.split(';').map((x) => x.trim());
    for (const item of items) {
      const m = /^`(pkg\/[^`]+\.ts)` ((?:POST|PUT|PATCH|DELETE)|neutron\.\w+|typed\.\w+)(?: ×(\d+))?$/.exec(item);
      assert.ok(m, `a call-site item is "\`pkg/…\` VERB|neutron.method|typed.method [×N]": "${item}" in ${row.slice(0, 80)}…`);
      const key = `${m[1] ?? ''} ${m[2] ?? ''}`;
      const e = out.get(key) ?? { n: 0, rows: [] };
      out.set(key, { n: e.n + Number(m[3] ?? '1'), rows: [...e.rows, `${cells[0] ?? ''} / ${cells[1] ?? ''}`] });
    }
  }
  return out;
}

test('every write call site in pkg/ has a row in docs/safety.md\'s write table, and every row\'s call site exists', () => {
  const sites = writeSites();
  const documented = documentedSites();
  const problems: string[] = [];
  for (const [key, where] of sites) {
    const d = documented.get(key);
    if (!d) problems.push(`${key}: ${where.length} call(s) (${where.join(', ')}) and no row in docs/safety.md`);
    else if (d.n !== where.length) problems.push(`${key}: ${where.length} call(s) (${where.join(', ')}), the table lists ${d.n} (${d.rows.join('; ')})`);
  }
  for (const [key, d] of documented) if (!sites.has(key)) problems.push(`${key}: listed by ${d.rows.join('; ')} but no such call in pkg/`);
  assert.deepEqual(problems, []);
  assert.ok(sites.size >= 15, `${sites.size} call-site keys found`);
});
