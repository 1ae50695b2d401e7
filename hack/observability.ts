/**
 * What `make run` (hack/run.ts) prints about observability: where the metrics are, a Prometheus scrape job for them
 * with the labels the dashboards and alerts select on (as the ServiceMonitor would set them in a cluster), and how to
 * import the Grafana dashboards. test/run-hints.test.ts checks the files it names exist and the job parses.
 */
export const metricsJob = 'ts-controller-manager-controller-manager-metrics-service';
export const dashboardFiles = ['config/grafana/runtime.json', 'config/grafana/networks.json'] as const;

/** The lines to print for a manager serving plain metrics at `metricsUrl` (e.g. http://127.0.0.1:8080/metrics). */
export function observabilityHints(metricsUrl: string, namespace: string): string[] {
  const u = new URL(metricsUrl);
  return [
    `metrics: ${metricsUrl} (plain HTTP on loopback; a deployed manager serves HTTPS with token authentication)`,
    `dashboards: ${dashboardFiles.join(', ')} — Grafana ≥ 10: Dashboards → New → Import → upload the file, pick your Prometheus;`,
    `  alerts: config/prometheus/rules (PrometheusRule); runbooks: docs/operations.md. A Prometheus scrape job for this manager`,
    `  with the labels the dashboards and alerts select on (prometheus.yml, scrape_configs):`,
    `    - job_name: ${metricsJob}`,
    `      metrics_path: ${u.pathname}`,
    `      static_configs: [{targets: ['${u.host}'], labels: {namespace: ${namespace}, pod: local}}]`,
  ];
}
