/** What `make run` prints about metrics, dashboards and alerts (hack/observability.ts): true paths, a usable scrape job. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { load } from 'js-yaml';
import { dashboardFiles, metricsJob, observabilityHints } from '../hack/observability.ts';
import { shippedRuleGroups } from './helpers/rules.ts';

const repo = join(import.meta.dirname, '..');

test('make run names the metrics URL, existing dashboards and rules, and a scrape job with the labels they select on', () => {
  const lines = observabilityHints('http://127.0.0.1:8080/metrics', 'default');
  assert.match(lines[0] ?? '', /^metrics: http:\/\/127\.0\.0\.1:8080\/metrics /);
  for (const f of [...dashboardFiles, 'config/prometheus/rules/alerts.yaml', 'docs/operations.md']) assert.ok(existsSync(join(repo, f)), f);
  const job = load(lines.filter((l) => l.startsWith('    ')).map((l) => l.slice(4)).join('\n')) as
    { job_name: string; metrics_path: string; static_configs: { targets: string[]; labels: Record<string, string> }[] }[];
  assert.deepEqual(job, [{
    job_name: metricsJob, metrics_path: '/metrics',
    static_configs: [{ targets: ['127.0.0.1:8080'], labels: { namespace: 'default', pod: 'local' } }],
  }]);
  // The alerts select exactly this job.
  for (const r of shippedRuleGroups().flatMap((g) => g.rules)) assert.ok(r.expr.includes(`job="${metricsJob}"`), `${r.alert}: selects the job`);
});
