/**
 * The shipped alerts (config/prometheus/rules/alerts.yaml, a PrometheusRule) with the real promtool (Debian's
 * prometheus package): the rule groups extracted from the PrometheusRule pass `promtool check rules`, and
 * `promtool test rules` passes test/alerts/alerts_test.yaml, which has every alert firing and silent in a healthy
 * case (checked here, so a new alert cannot come without both). Every alert has a summary, a description and a
 * runbook_url naming a section of docs/operations.md that exists. No cluster needed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { dump, load } from 'js-yaml';
import { shippedRuleGroups } from './helpers/rules.ts';

const repo = join(import.meta.dirname, '..');
const run = promisify(execFile);

/** GitHub's anchor for a Markdown heading (lower case, punctuation dropped, spaces to dashes). */
function anchor(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-');
}

interface PromtoolTest {
  name: string;
  alert_rule_test?: { eval_time: string; alertname: string; exp_alerts?: unknown[] }[];
}

describe('alerts (config/prometheus/rules)', () => {
  const groups = shippedRuleGroups();
  const alerts = groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);

  test('every alert has a severity, summary, description and a runbook_url to an existing docs/operations.md section', () => {
    assert.ok(alerts.length > 0); // the exact number is checked against the docs by test/observability-counts.test.ts
    const headings = new Set(readFileSync(join(repo, 'docs/operations.md'), 'utf8').split('\n')
      .filter((l) => l.startsWith('#')).map((l) => anchor(l.replace(/^#+/, ''))));
    for (const a of alerts) {
      assert.match(a.labels?.['severity'] ?? '', /^(critical|warning)$/, `${a.alert}: severity`);
      assert.ok((a.annotations?.['summary'] ?? '').length > 10, `${a.alert}: summary`);
      assert.ok((a.annotations?.['description'] ?? '').length > 40, `${a.alert}: description`);
      const url = a.annotations?.['runbook_url'] ?? '';
      const m = /^docs\/operations\.md#(.+)$/.exec(url);
      assert.ok(m, `${a.alert}: runbook_url ${url}`);
      assert.ok(headings.has(m[1] ?? ''), `${a.alert}: no section #${m[1]} in docs/operations.md`);
      assert.equal(m[1], (a.alert ?? '').toLowerCase(), `${a.alert}: its runbook is the section named after it`);
    }
  });

  test('promtool check rules and promtool test rules pass; every alert has a firing and a silent case', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tscm-alerts-'));
    try {
      writeFileSync(join(dir, 'rules.yaml'), dump({ groups }));
      copyFileSync(join(repo, 'test/alerts/alerts_test.yaml'), join(dir, 'alerts_test.yaml'));
      const check = await run('promtool', ['check', 'rules', join(dir, 'rules.yaml')]);
      assert.match(check.stdout, new RegExp(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`));
      const unit = await run('promtool', ['test', 'rules', join(dir, 'alerts_test.yaml')]).catch((err: { stdout?: string; stderr?: string }) => {
        assert.fail(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      });
      assert.match(unit.stdout, /SUCCESS/);

      const tests = (load(readFileSync(join(dir, 'alerts_test.yaml'), 'utf8')) as { tests: PromtoolTest[] }).tests;
      for (const a of alerts) {
        const cases = tests.map((t) => (t.alert_rule_test ?? []).filter((c) => c.alertname === a.alert)).filter((c) => c.length > 0);
        assert.ok(cases.some((c) => c.some((x) => (x.exp_alerts ?? []).length > 0)), `${a.alert}: no test where it fires`);
        assert.ok(cases.some((c) => c.every((x) => (x.exp_alerts ?? []).length === 0)), `${a.alert}: no test where it stays silent`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
