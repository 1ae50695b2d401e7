/**
 * The Grafana dashboards (config/grafana/*.json): importable shape for Grafana ≥ 10 (schemaVersion, the DS_PROMETHEUS
 * input every panel uses, kubebuilder-style template variables namespace/job/pod and controller on the runtime
 * dashboard), and every panel's PromQL parsed by the real promtool (each query wrapped as a recording rule, with the
 * variables substituted, through `promtool check rules`). test/observability.test.ts runs the same queries against a
 * real Prometheus scraping a real manager. No cluster needed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import { dashboardQueries, dashboards } from './helpers/dashboards.ts';

const run = promisify(execFile);

describe('Grafana dashboards (config/grafana)', () => {
  test('two dashboards, importable into Grafana ≥ 10, with namespace/job/pod (and controller) variables', () => {
    const all = dashboards();
    assert.deepEqual([...all.keys()], ['networks.json', 'runtime.json']);
    for (const [file, d] of all) {
      assert.ok(d.schemaVersion >= 36, `${file}: schemaVersion ${d.schemaVersion} (Grafana 10 writes 38)`);
      assert.deepEqual(d.__inputs?.map((i) => [i.name, i.pluginId]), [['DS_PROMETHEUS', 'prometheus']], `${file}: datasource input`);
      const vars = d.templating.list.map((v) => v.name);
      const want = file === 'runtime.json' ? ['DS_PROMETHEUS', 'namespace', 'job', 'pod', 'controller'] : ['DS_PROMETHEUS', 'namespace', 'job', 'pod'];
      assert.deepEqual(vars, want, `${file}: variables`);
      const ids = d.panels.map((p) => p.id);
      assert.equal(new Set(ids).size, ids.length, `${file}: unique panel ids`);
      for (const p of d.panels.filter((x) => x.type !== 'row')) {
        assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${DS_PROMETHEUS}' }, `${file} / ${p.title}: datasource`);
        assert.ok((p.targets ?? []).length > 0, `${file} / ${p.title}: has queries`);
        for (const t of p.targets ?? []) {
          assert.match(t.expr, /namespace="\$namespace", job="\$job", pod=~"\$pod"/, `${file} / ${p.title} ${t.refId}: filters by the variables`);
        }
        assert.ok(p.gridPos.x + p.gridPos.w <= 24, `${file} / ${p.title}: fits the 24-column grid`);
      }
    }
  });

  test('promtool parses every panel query', async () => {
    const queries = dashboardQueries({ namespace: 'tscm', job: 'ts-controller-manager-controller-manager-metrics-service' });
    assert.ok(queries.length > 0); // the exact number is checked against docs/operations.md by test/observability-counts.test.ts
    for (const q of queries) assert.doesNotMatch(q.expr, /\$/, `${q.dashboard} / ${q.panel}: a variable left`);
    const dir = mkdtempSync(join(tmpdir(), 'tscm-dashboards-'));
    try {
      const rules = { groups: [{ name: 'dashboards', rules: queries.map((q, i) => ({ record: `dashboard:query:${i}`, expr: q.expr })) }] };
      writeFileSync(join(dir, 'rules.yaml'), dump(rules));
      const res = await run('promtool', ['check', 'rules', join(dir, 'rules.yaml')]).catch((err: { stdout?: string; stderr?: string }) => {
        assert.fail(`promtool check rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      });
      assert.match(res.stdout, new RegExp(`SUCCESS: ${queries.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
