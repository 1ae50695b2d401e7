/**
 * The Grafana dashboards of config/grafana/ and their PromQL: every panel target's `expr`, with the template
 * variables replaced the way Grafana would for one selection (`vars`), ready for promtool or a real Prometheus.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(import.meta.dirname, '..', '..', 'config', 'grafana');

export interface Target { expr: string; legendFormat?: string; refId: string; datasource?: { type: string; uid: string } }
export interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
}
export interface Variable { name: string; type: string; query?: unknown; multi?: boolean; includeAll?: boolean }
export interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  __inputs?: { name: string; pluginId: string }[];
  panels: Panel[];
  templating: { list: Variable[] };
}

/** Every dashboard file, by file name. */
export function dashboards(): Map<string, Dashboard> {
  return new Map(readdirSync(dir).filter((f) => f.endsWith('.json')).sort()
    .map((f) => [f, JSON.parse(readFileSync(join(dir, f), 'utf8')) as Dashboard]));
}

export interface Query { dashboard: string; panel: string; refId: string; expr: string }

/** The variables' values for one selection: namespace, job, pod and controller (regex `.*` = All), and the intervals. */
export interface Selection { namespace: string; job: string; pod?: string; controller?: string; rateInterval?: string }

/** Every panel query of every dashboard with the variables substituted. */
export function dashboardQueries(sel: Selection): Query[] {
  const out: Query[] = [];
  for (const [file, d] of dashboards()) {
    for (const p of d.panels) {
      for (const t of p.targets ?? []) {
        const expr = t.expr
          .replaceAll('$__rate_interval', sel.rateInterval ?? '1m')
          .replaceAll('$namespace', sel.namespace)
          .replaceAll('$job', sel.job)
          .replaceAll('$pod', sel.pod ?? '.*')
          .replaceAll('$controller', sel.controller ?? '.*');
        out.push({ dashboard: file, panel: p.title, refId: t.refId, expr });
      }
    }
  }
  return out;
}
