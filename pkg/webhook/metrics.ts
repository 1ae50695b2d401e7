/**
 * Webhook metrics with controller-runtime's names, help texts, labels and buckets (pkg/webhook/internal/metrics):
 *
 *   controller_runtime_webhook_requests_total{webhook,code}    every request to a registered path, by HTTP status
 *   controller_runtime_webhook_latency_seconds{webhook}        histogram, from the request's arrival to the answer
 *   controller_runtime_webhook_requests_in_flight{webhook}     gauge, requests being served
 *
 * `webhook` is the path (`/validate-…`, `/mutate-…`, `/convert`). Requests to unregistered paths are not counted
 * (as controller-runtime, whose instrumentation wraps each registered handler). Families are created once per
 * Registry (`getOrCreate`).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';

/** controller-runtime's webhook metrics: requests by code, latency, requests in flight (label `webhook`: the path). */
export interface WebhookMetricFamilies {
  /** controller_runtime_webhook_requests_total{webhook, code}: requests by path and HTTP status code. */
  requestsTotal: Counter<'webhook' | 'code'>;
  /** controller_runtime_webhook_latency_seconds{webhook}: from a request's arrival to its answer. */
  latency: Histogram<'webhook'>;
  /** controller_runtime_webhook_requests_in_flight{webhook}: requests being served. */
  inFlight: Gauge<'webhook'>;
}

/** Prometheus's default buckets (client_golang DefBuckets), which controller-runtime's latency histogram uses. */
export const webhookLatencyBuckets: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The webhook metrics of `registry` (controller-runtime's names), created once per registry and shared afterwards. */
export function webhookMetricFamilies(registry: Registry = globalRegistry): WebhookMetricFamilies {
  const registers = [registry];
  return {
    requestsTotal: getOrCreate(registry, 'controller_runtime_webhook_requests_total', () => new Counter({
      name: 'controller_runtime_webhook_requests_total', help: 'Total number of admission requests by HTTP status code.',
      labelNames: ['webhook', 'code'], registers,
    })),
    latency: getOrCreate(registry, 'controller_runtime_webhook_latency_seconds', () => new Histogram({
      name: 'controller_runtime_webhook_latency_seconds', help: 'Histogram of the latency of processing admission requests',
      labelNames: ['webhook'], buckets: [...webhookLatencyBuckets], registers,
    })),
    inFlight: getOrCreate(registry, 'controller_runtime_webhook_requests_in_flight', () => new Gauge({
      name: 'controller_runtime_webhook_requests_in_flight', help: 'Current number of admission requests being served.',
      labelNames: ['webhook'], registers,
    })),
  };
}
