/** The shipped PrometheusRule (config/prometheus/rules/alerts.yaml) as plain rule groups, for promtool and Prometheus. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';

const repo = join(import.meta.dirname, '..', '..');

export interface AlertRule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RuleGroup {
  name: string;
  rules: AlertRule[];
}

/** The rule groups of the shipped PrometheusRule. */
export function shippedRuleGroups(): RuleGroup[] {
  const doc = load(readFileSync(join(repo, 'config/prometheus/rules/alerts.yaml'), 'utf8')) as { kind: string; spec: { groups: RuleGroup[] } };
  assert.equal(doc.kind, 'PrometheusRule');
  return doc.spec.groups;
}
