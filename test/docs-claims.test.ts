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
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { knownControllers } from '../pkg/controllers/names.ts';

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
    for (const [doc, text] of documents()) {
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
