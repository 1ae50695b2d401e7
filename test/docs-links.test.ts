/**
 * The README is a front door (issue 31): at most 300 lines, the detail lives in docs/. Every relative link in
 * README.md and docs/*.md (and every other Markdown file of the repository) must lead somewhere: the file (or directory) exists, and a `#anchor` names a heading of the
 * target Markdown file under GitHub's slug rules. So moving a section out of the README (or renaming a heading) cannot
 * silently break a link to it. No cluster needed.
 *
 * Links are read from Markdown outside fenced code blocks and inline code spans: inline links and images
 * `[text](target "title")` and reference definitions `[label]: target`. Absolute URLs (`scheme:`) are not checked.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';

const repo = join(import.meta.dirname, '..');
const README_MAX_LINES = 300;

/**
 * The Markdown files whose links are checked: README.md, every docs/*.md, and every other Markdown file of the
 * repository (bench/README.md, …) — not under node_modules/, dist/ or a dot-directory (.cluster/, .git/).
 */
function checkedFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) {
        if (!e.name.startsWith('.') && e.name !== 'node_modules' && e.name !== 'dist') walk(join(dir, e.name));
      } else if (e.name.endsWith('.md')) found.push(join(dir, e.name));
    }
  };
  walk(repo);
  return found.sort();
}

/** Lines of `text` with fenced code blocks blanked (so their `#` lines are no headings and their `[x](y)` no links). */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === undefined) {
      if (m?.[1] !== undefined) { fence = m[1]; return ''; }
      return line;
    }
    if (m?.[1] !== undefined && m[1][0] === fence[0] && m[1].length >= fence.length) fence = undefined;
    return '';
  });
}

/**
 * GitHub's anchor for a heading's text (github-slugger): Markdown links reduced to their text, then lower case, every
 * character that is not a letter, mark, number, connector punctuation (`_`), space or `-` dropped, spaces to `-`.
 * A repeated slug gets `-1`, `-2`, … in order of appearance.
 */
function slugs(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of proseLines(markdown)) {
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h?.[1] === undefined) continue;
    const text = h[1].replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
    const n = seen.get(base);
    out.add(n === undefined ? base : `${base}-${n}`);
    seen.set(base, (n ?? 0) + 1);
  }
  return out;
}

/** Every link target in `markdown` (outside code), with its 1-based line number. */
function links(markdown: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  proseLines(markdown).forEach((raw, i) => {
    const line = raw.replace(/(`+)[^`]*?\1/g, '');
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ line: i + 1, target: m[1] ?? '' });
    // A reference definition `[label]: target`; not a footnote `[^id]: text` (GitHub's footnotes: docs-claims.test.ts).
    const def = /^\s{0,3}\[(?!\^)[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
    if (def?.[1] !== undefined) out.push({ line: i + 1, target: def[1] });
  });
  return out;
}

/** What is wrong with each relative link of `file` (empty: all resolve). */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  const where = relative(repo, file);
  for (const { line, target } of links(readFileSync(file, 'utf8'))) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const fragment = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const dest = pathPart === '' ? file : resolve(dirname(file), pathPart);
    if (!existsSync(dest)) { broken.push(`${where}:${line}: ${target}: no such file`); continue; }
    if (fragment === undefined) continue;
    if (statSync(dest).isDirectory() || !dest.endsWith('.md')) {
      broken.push(`${where}:${line}: ${target}: an anchor into a file that is not Markdown`);
      continue;
    }
    if (!slugs(readFileSync(dest, 'utf8')).has(fragment)) {
      broken.push(`${where}:${line}: ${target}: no heading #${fragment} in ${relative(repo, dest)}`);
    }
  }
  return broken;
}

describe('README and docs/ links (issue 31)', () => {
  test('the slug and link readers follow GitHub (so the checks below can fail)', () => {
    assert.deepEqual([...slugs('# What `make run` does\n## Sharding (active-active)\n```\n# not a heading\n```\n' +
      '## config/manager/manager.yaml, field by field\n## Tests\n## Tests\n### [Linked](x.md) heading\n')], [
      'what-make-run-does', 'sharding-active-active', 'configmanagermanageryaml-field-by-field', 'tests', 'tests-1',
      'linked-heading',
    ]);
    assert.deepEqual(links('see [a](docs/a.md#x) and `[not](a link)`\n```\n[no](code.md)\n```\n[ref]: ../b.md\n' +
      '![img](pic.png "title")\n'), [
      { line: 1, target: 'docs/a.md#x' }, { line: 5, target: '../b.md' }, { line: 6, target: 'pic.png' },
    ]);
  });

  test(`README.md has at most ${README_MAX_LINES} lines`, () => {
    const n = readFileSync(join(repo, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
    assert.ok(n <= README_MAX_LINES, `README.md has ${n} lines (> ${README_MAX_LINES}): move detail into docs/`);
  });

  test('every relative link in README.md, docs/*.md (and every other .md) resolves to a file, and every #anchor to a heading', () => {
    const files = checkedFiles();
    for (const f of ['README.md', 'docs/operations.md', 'docs/benchmarks.md']) assert.ok(files.includes(join(repo, f)), `${f} is checked`);
    const broken = files.flatMap(brokenLinks);
    assert.deepEqual(broken, [], `${broken.length} broken link(s):\n${broken.join('\n')}`);
  });
});
