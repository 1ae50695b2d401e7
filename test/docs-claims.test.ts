/**
 * Claims of README.md, docs/*.md and bench/README.md that state something countable about the repository itself
 * (issue 31, docs/claims-audit.md): they must equal what the files contain, so they cannot drift silently. No cluster
 * needed.
 *
 * - Every test file a document names (`test/x.test.ts`, `pkg/…/y.test.ts`, `test/node.e2e.ts`, or a bare
 *   `reflectorstate.test.ts`) exists: a claim "tested in F" whose F was renamed or deleted fails here.
 * - "the real-node suite (N tests)" / "`test/node.e2e.ts` (N tests" equals the number of `test(` calls in
 *   test/node.e2e.ts.
 * - "the three controllers" equals `knownControllers` (pkg/controllers/names.ts), and the README names each.
 * - docs/real-node.md's list of which test checks which manifest field quotes test titles of test/node.e2e.ts: each
 *   quoted title (up to its "…") starts a real test title there.
 * - The measured test count of the last fresh-clone CI run ("1 023 tests") is one figure: every document quoting it
 *   quotes the same number (it is a measurement of a run, not derivable from the files — loops create tests).
 * - Proof references (issue 41; syntax in test/helpers/proofs.ts): every `` `file` › “title” `` of a document names a
 *   test file that exists and that a `make` target runs, with a test (or describe) of exactly that title, not skipped;
 *   every footnote is such a proof, used and defined. A claim whose test is renamed, deleted or skipped fails here.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { knownControllers } from '../pkg/controllers/names.ts';
import { fileGraph, formatRooms, roomGraph } from '../hack/importgraph.ts';
import { checkRef, parseProofs, testCalls, type ProofRef } from './helpers/proofs.ts';

const repo = join(import.meta.dirname, '..');

/**
 * README.md, every docs/*.md and bench/README.md, as [repo-relative path, text]. docs/claims-audit.md quotes the
 * claims (and the wrong values used to make these tests fail once), so it states no count itself: it is left out
 * unless `withAudit`.
 */
function documents(withAudit = false): Array<[string, string]> {
  const docs = readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md') && (withAudit || f !== 'claims-audit.md'));
  const files = ['README.md', 'bench/README.md', ...docs.map((f) => `docs/${f}`)];
  return files.map((f) => [f, readFileSync(join(repo, f), 'utf8')]);
}

/** Repo-relative paths of every file named `base` (outside node_modules, dist and dot-directories). */
function findByName(base: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, rel: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) {
        if (!e.name.startsWith('.') && e.name !== 'node_modules' && e.name !== 'dist') walk(join(dir, e.name), rel ? `${rel}/${e.name}` : e.name);
      } else if (e.name === base) found.push(rel ? `${rel}/${e.name}` : e.name);
    }
  };
  walk(repo, '');
  return found;
}

/** Line number (1-based) of character `index` in `text`. */
const lineOf = (text: string, index: number): number => text.slice(0, index).split('\n').length;

const NUMBER_WORDS: Record<string, number> = { one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10 };

describe('countable claims of the documentation equal the repository', () => {
  test('every test file named in README.md, docs/*.md and bench/README.md exists', () => {
    const missing: string[] = [];
    let named = 0;
    for (const [doc, text] of documents(true)) {
      for (const m of text.matchAll(/[\w./-]*\.(?:test|e2e)\.ts/g)) {
        const name = m[0].replace(/^(\.\.\/)+/, '');
        const base = name.split('/').at(-1) ?? '';
        // Generic mentions ("`.test.ts`", "each example's `main.test.ts`") name no one file.
        if (base.startsWith('.') || (!name.includes('/') && base === 'main.test.ts')) continue;
        named++;
        const exists = name.includes('/') ? existsSync(join(repo, name)) : findByName(base).length > 0;
        if (!exists) missing.push(`${doc}:${lineOf(text, m.index)} names ${m[0]}, which does not exist`);
      }
    }
    assert.ok(named >= 50, `the documents name test files (${named} mentions found)`);
    assert.deepEqual(missing, []);
  });

  test('the real-node suite\'s test count stated in the documents equals the tests in test/node.e2e.ts', () => {
    const suite = readFileSync(join(repo, 'test/node.e2e.ts'), 'utf8');
    const actual = [...suite.matchAll(/^\s*test\(/gm)].length;
    assert.ok(actual > 0);
    const stated: string[] = [];
    for (const [doc, text] of documents()) {
      for (const m of text.matchAll(/(?:node\s+suite|`test\/node\.e2e\.ts`)\s+\((\d+) tests\b/g)) {
        stated.push(`${doc}:${lineOf(text, m.index)}`);
        assert.equal(Number(m[1]), actual, `${doc}:${lineOf(text, m.index)} says "${m[0]}", test/node.e2e.ts has ${actual} tests`);
      }
    }
    assert.ok(stated.length >= 3, `README.md, docs/contributing.md and docs/real-node.md state it (found: ${stated.join(', ')})`);
  });

  test('"the N controllers" equals knownControllers, and the README names each of them', () => {
    const stated: string[] = [];
    for (const [doc, raw] of documents()) {
      const text = raw.replace(/“[^”\n]*”/g, (t) => ' '.repeat(t.length)); // quoted test titles are not claims about the manager
      for (const m of text.matchAll(/\b(one|two|three|four|five|six|seven|eight|nine|ten) controllers\b/gi)) {
        stated.push(`${doc}:${lineOf(text, m.index)}`);
        assert.equal(NUMBER_WORDS[(m[1] ?? '').toLowerCase()], knownControllers.length,
          `${doc}:${lineOf(text, m.index)} says "${m[0]}"; pkg/controllers/names.ts knows ${knownControllers.join(', ')}`);
      }
    }
    assert.ok(stated.length >= 2, `README.md and docs/controllers.md state it (found: ${stated.join(', ')})`);
    const readme = readFileSync(join(repo, 'README.md'), 'utf8').split('\n').slice(0, 10).join('\n');
    for (const c of knownControllers) {
      assert.match(readme, new RegExp(`\\b${c}\\b`, 'i'), `the README's opening names the ${c} controller`);
    }
  });

  test('docs/real-node.md quotes titles of tests that exist in test/node.e2e.ts', () => {
    const doc = readFileSync(join(repo, 'docs/real-node.md'), 'utf8');
    const start = doc.indexOf('Tests, all in `test/node.e2e.ts` unless named:');
    assert.ok(start >= 0, 'docs/real-node.md lists the tests of its manifest table');
    const list = doc.slice(start, doc.indexOf('\n\n', doc.indexOf('\n- ', start)));
    const source = readFileSync(join(repo, 'test/node.e2e.ts'), 'utf8');
    const titles = [...source.matchAll(/^\s*test\((['`])((?:\\.|(?!\1).)*)\1/gm)].map((m) => (m[2] ?? '').replace(/\\(.)/g, '$1'));
    assert.ok(titles.length > 0);
    const quoted = [...list.matchAll(/"([^"]+)"/g)].map((m) => (m[1] ?? '').replace(/\s*…$/, '').trim());
    assert.ok(quoted.length >= 8, `quoted titles found: ${quoted.length}`);
    for (const q of quoted) {
      assert.ok(titles.some((t) => t.startsWith(q)), `docs/real-node.md quotes "${q}", which starts no test title of test/node.e2e.ts`);
    }
  });

  test('docs/testing.md\'s "N cases × 2" equals the cases of test/fakeclient-conformance.test.ts', () => {
    const cases = testCalls(readFileSync(join(repo, 'test/fakeclient-conformance.test.ts'), 'utf8')).filter((c) => c.fn === 'test' && c.enclosing.length === 0);
    const stated = /(\d+) cases × 2/.exec(readFileSync(join(repo, 'docs/testing.md'), 'utf8'));
    assert.ok(stated, 'docs/testing.md states the number of conformance cases');
    assert.equal(Number(stated[1]), cases.length, `test/fakeclient-conformance.test.ts has ${cases.length} cases`);
  });

  test('docs/layering.md\'s room graph is the one hack/importgraph.ts prints', () => {
    const doc = readFileSync(join(repo, 'docs/layering.md'), 'utf8');
    const start = doc.indexOf('```\n', doc.indexOf('## The room graph')) + 4;
    const stated = doc.slice(start, doc.indexOf('```', start)).trim().split('\n');
    assert.deepEqual(stated, formatRooms(roomGraph(fileGraph(repo))), 'run node hack/importgraph.ts and copy its rooms into docs/layering.md');
  });

  test('the measured unit + integration test count of the last CI run is quoted identically everywhere', () => {
    const counts = new Map<string, string[]>();
    for (const [doc, text] of documents()) {
      for (const m of text.matchAll(/\((\d(?:[\d ]*\d)?) tests\)|\b(\d(?:[\d ]*\d)?)\/\2 unit \+ integration tests/g)) {
        if (/node/.test(text.slice(Math.max(0, m.index - 40), m.index))) continue; // the node suite's own count
        const n = (m[1] ?? m[2] ?? '').replaceAll(' ', '');
        counts.set(n, [...(counts.get(n) ?? []), `${doc}:${lineOf(text, m.index)}`]);
      }
    }
    assert.equal(counts.size, 1, `one figure, not several: ${JSON.stringify(Object.fromEntries(counts))}`);
    assert.ok([...counts.values()][0]!.length >= 3, `README.md, docs/contributing.md and docs/real-node.md quote it: ${JSON.stringify(Object.fromEntries(counts))}`);
  });
});

/** Whether `file` (repo-relative) is run by `make test`, or by the Makefile target that runs it on demand. */
function runBy(file: string, makefile: string): string | undefined {
  const globs = [...makefile.matchAll(/^(?:UNIT|INTEGRATION)_TESTS := (.*)$/gm)].flatMap((m) => [...(m[1] ?? '').matchAll(/"([^"]+)"/g)].map((g) => g[1] ?? ''));
  const asRe = (glob: string): RegExp => new RegExp(`^${glob.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*\*\//g, '\0').replace(/\*/g, '[^/]*').replaceAll('\0', '(?:.*/)?')}$`);
  if (globs.some((g) => asRe(g).test(file))) return 'make test';
  if ((/^NODE_TESTS := (.*)$/m.exec(makefile)?.[1] ?? '').split(/\s+/).includes(file)) return 'make test (the real-node suite)';
  const target = new RegExp(`^([\\w-]+):[^\\n]*\\n(?:\\t[^\\n]*\\n)*?\\t[^\\n]*${file.replace(/[.]/g, '\\.')}`, 'm').exec(makefile);
  if (target?.[1] !== undefined) return `make ${target[1]}`;
  // An example's own tests run in a fresh project by test/example.test.ts (as a user of the package runs them).
  if (/^examples\/[\w-]+\/[\w-]+\.test\.ts$/.test(file) && readFileSync(join(repo, 'test/example.test.ts'), 'utf8').includes(`'${file.replace(/^examples\/(configmap-copier\/)?/, '')}'`)) return 'test/example.test.ts';
  return undefined;
}

describe('each claim\'s proof: the named test exists with that title and is not skipped', () => {
  test('the checker: a missing file, a missing or inexact title, each kind of skip, a malformed reference and footnote faults are reported; template titles and enclosing titles resolve', () => {
    const src = [
      "describe('outer', () => {",
      "  test('a stale write gets 409', () => {});",
      "  test.skip('skipped by modifier', () => {});",
      "  it('skipped by option', { skip: 'flaky' }, () => {});",
      "  test('skipped in its body', (t) => { if (x) t.skip('no root'); });",
      "  test('todo', { todo: true }, () => {});",
      "  test('not skipped', { skip: false }, () => {});",
      "  test('weakened', { skip: weakenedNote('TSCM_X', a, b) }, () => {});",
      "  for (const kind of ['a', 'b']) test(`${kind}: converges`, () => {});",
      "});",
      "describe.skip('skipped describe', () => { test('inner', () => {}); });",
      "describe('other', () => { test('a stale write gets 409', () => {}); });",
    ].join('\n');
    const ref = (titles: string[], file = 'test/x.test.ts'): ProofRef => ({ file, titles, line: 1 });
    assert.equal(checkRef(ref(['a stale write gets 409']), src), undefined);
    assert.equal(checkRef(ref(['outer', 'a stale write gets 409']), src), undefined);
    assert.equal(checkRef(ref(['not skipped']), src), undefined);
    assert.equal(checkRef(ref(['weakened']), src), undefined, 'the weakening switch is refused under CI, not a skip');
    assert.equal(checkRef(ref(['b: converges']), src), undefined, 'a template title matches its filled-in text');
    assert.match(checkRef(ref(['a stale write gets 409'], 'test/nope.test.ts'), undefined) ?? '', /does not exist/);
    assert.match(checkRef(ref(['a stale write gets 409'], 'docs/x.md'), src) ?? '', /not a test file/);
    assert.match(checkRef(ref(['a stale write gets']), src) ?? '', /has no test “a stale write gets”/, 'a prefix is not the title');
    assert.match(checkRef(ref(['a stale write gets 409!']), src) ?? '', /has no test/);
    assert.match(checkRef(ref(['skipped describe', 'a stale write gets 409']), src) ?? '', /has no test/, 'the enclosing title must enclose it');
    assert.match(checkRef(ref(['b: converge']), src) ?? '', /has no test/, 'the literal parts of a template must match exactly');
    assert.match(checkRef(ref(['skipped by modifier']), src) ?? '', /skipped: line 3: \.skip/);
    assert.match(checkRef(ref(['skipped by option']), src) ?? '', /skipped: line 4: \{ skip: 'flaky' \}/);
    assert.match(checkRef(ref(['skipped in its body']), src) ?? '', /skipped: line 5: t\.skip\(…\) in its body/);
    assert.match(checkRef(ref(['todo']), src) ?? '', /skipped: line 6: \{ todo: true \}/);
    assert.match(checkRef(ref(['inner']), src) ?? '', /skipped: line 11: inside "skipped describe" \(\.skip\)/);
    assert.equal(testCalls(src).length, 13);

    const doc = [
      'A stale write is refused.[^fence] Another.[^gone] Before a colon[^colon]: fine.',
      'Inline: [`test/x.test.ts`](../test/x.test.ts) › “outer” › “a stale write gets 409”; straight: `test/x.test.ts` › "a stale write gets 409".',
      '```',
      '`test/in-code.test.ts` › “ignored in a fence”',
      '```',
      'An example in code: `[^example]`.',
      '',
      '[^fence]: `test/x.test.ts` › “a stale write gets 409”; `test/y.test.ts` › “b” — what it asserts.',
      '[^unused]: `test/x.test.ts` › “not skipped”',
      '[^colon]: `test/x.test.ts` › “not skipped”',
      '[^words]: only words',
      '  continued, still no test',
    ].join('\n');
    const parsed = parseProofs(doc);
    assert.deepEqual(parsed.refs, [
      { file: 'test/x.test.ts', titles: ['outer', 'a stale write gets 409'], line: 2 },
      { file: 'test/x.test.ts', titles: ['a stale write gets 409'], line: 8 },
      { file: 'test/y.test.ts', titles: ['b'], line: 8 },
      { file: 'test/x.test.ts', titles: ['not skipped'], line: 9 },
      { file: 'test/x.test.ts', titles: ['not skipped'], line: 10 },
    ]);
    assert.equal(parsed.footnotes, 4);
    assert.deepEqual(parsed.problems, [
      'line 2: "`test/x.test.ts` ›…" is not followed by a title in curly quotes “…”',
      'line 1: footnote [^gone] is used but not defined',
      'line 9: footnote [^unused] is defined but not used',
      'line 11: footnote [^words] is defined but not used',
      'line 11: footnote [^words] names no test (`file` › “title”)',
    ]);
  });

  test('every proof reference in README.md, docs/*.md and bench/README.md names a test run by make, with that title, not skipped', () => {
    const makefile = readFileSync(join(repo, 'Makefile'), 'utf8');
    const problems: string[] = [];
    const perDoc: string[] = [];
    let total = 0;
    for (const [doc, text] of documents(true)) {
      const { refs, footnotes, problems: own } = parseProofs(text);
      problems.push(...own.map((p) => `${doc}: ${p}`));
      for (const r of refs) {
        const path = join(repo, r.file);
        const problem = checkRef(r, existsSync(path) ? readFileSync(path, 'utf8') : undefined);
        if (problem !== undefined) problems.push(`${doc}:${r.line}: ${problem}`);
        if (runBy(r.file, makefile) === undefined) problems.push(`${doc}:${r.line}: ${r.file} is run by no make target`);
      }
      total += refs.length;
      if (refs.length > 0) perDoc.push(`${doc} ${refs.length} (${footnotes} footnotes)`);
    }
    console.log(`proof references: ${total} — ${perDoc.join(', ')}`);
    assert.deepEqual(problems, []);
  });
});
