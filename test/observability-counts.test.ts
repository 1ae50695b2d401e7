/**
 * The numbers the docs state about the shipped observability files are the files' numbers (issue 31): every
 * "N alerts" and "N dashboard queries" written in README.md or docs/*.md equals the count in
 * config/prometheus/rules/alerts.yaml and config/grafana/*.json, docs/operations.md states both, and its alert table
 * names exactly the shipped alerts. No dashboard query can have data by construction (`… or vector(0)` at the top
 * level): test/observability.test.ts requires data from every query, which such a query would satisfy with no metric
 * at all. No cluster needed.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { dashboardQueries } from './helpers/dashboards.ts';
import { shippedRuleGroups } from './helpers/rules.ts';

const repo = join(import.meta.dirname, '..');

/** Every Markdown file whose numbers are checked: README.md and docs/*.md. */
function docs(): { file: string; text: string }[] {
  return ['README.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)]
    .map((file) => ({ file, text: readFileSync(join(repo, file), 'utf8') }));
}

/** Each number written before `noun` (e.g. "10 alerts", "46 dashboard queries"), with where it was written. */
function stated(noun: string): { file: string; line: number; n: number }[] {
  const re = new RegExp(`\\b(\\d+)\\s+(?:shipped\\s+)?${noun}\\b`, 'g');
  return docs().flatMap(({ file, text }) => text.split('\n').flatMap((l, i) =>
    [...l.matchAll(re)].map((m) => ({ file, line: i + 1, n: Number(m[1]) }))));
}

describe('observability numbers in the docs match config/', () => {
  const alerts = shippedRuleGroups().flatMap((g) => g.rules).filter((r) => r.alert !== undefined).map((r) => r.alert ?? '');
  const queries = dashboardQueries({ namespace: 'ns', job: 'job' });

  test('every "N alerts" in README.md and docs/ is the number of alerts in config/prometheus/rules', () => {
    const claims = stated('alerts');
    assert.ok(claims.some((c) => c.file === 'docs/operations.md'), 'docs/operations.md states how many alerts ship');
    for (const c of claims) assert.equal(c.n, alerts.length, `${c.file}:${c.line} says ${c.n} alerts; alerts.yaml has ${alerts.length}`);
  });

  test('docs/operations.md\'s alert table lists exactly the shipped alerts', () => {
    const text = readFileSync(join(repo, 'docs/operations.md'), 'utf8');
    const rows = [...text.matchAll(/^\| `(\w+)` \| (?:critical|warning) \|/gm)].map((m) => m[1]);
    assert.deepEqual(rows.sort(), [...alerts].sort());
  });

  test('every "N dashboard queries" in README.md and docs/ is the number of panel queries in config/grafana', () => {
    const claims = stated('dashboard queries');
    assert.ok(claims.some((c) => c.file === 'docs/operations.md'), 'docs/operations.md states how many dashboard queries ship');
    for (const c of claims) assert.equal(c.n, queries.length, `${c.file}:${c.line} says ${c.n} dashboard queries; config/grafana has ${queries.length}`);
  });

  test('no dashboard query has data by construction (a top-level `or vector(…)`)', () => {
    for (const q of queries) assert.doesNotMatch(q.expr, /\bor\s+vector\([^)]*\)\s*$/, `${q.dashboard} / ${q.panel} ${q.refId}: ${q.expr}`);
  });
});
