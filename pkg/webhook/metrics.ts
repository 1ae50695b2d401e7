/**
 * Webhook metrics with controller-runtime's names, help texts, labels and buckets (pkg/webhook/internal/metrics):
 *
 *   controller_runtime_webhook_requests_total{webhook,code}    every request to a registered path, by HTTP status
 *   controller_runtime_webhook_latency_seconds{webhook}        histogram, from the request's arrival to the answer
 *   controller_runtime_webhook_requests_in_flight{webhook}     gauge, requests being served
 *
 * and one of this project's, named in the same style (controller-runtime's server has no limits to count):
 *
 *   controller_runtime_webhook_refused_total{webhook,reason}  requests and connections refused by the server's limits
 *
 * `webhook` is the path (`/validate-…`, `/mutate-…`, `/convert`). Requests to unregistered paths are not counted
 * (as controller-runtime, whose instrumentation wraps each registered handler). A refused request is counted in both
 * `requests_total` (by its code) and `refused_total` (by its reason); a connection refused before any request is
 * counted only in `refused_total`, with `webhook=""`. Families are created once per Registry (`getOrCreate`).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';

/** controller-runtime's webhook metrics (requests by code, latency, requests in flight) and the refusals (label `webhook`: the path). */
export interface WebhookMetricFamilies {
  /** controller_runtime_webhook_requests_total{webhook, code}: requests by path and HTTP status code. */
  requestsTotal: Counter<'webhook' | 'code'>;
  /** controller_runtime_webhook_latency_seconds{webhook}: from a request's arrival to its answer. */
  latency: Histogram<'webhook'>;
  /** controller_runtime_webhook_requests_in_flight{webhook}: requests being served. */
  inFlight: Gauge<'webhook'>;
  /** controller_runtime_webhook_refused_total{webhook, reason}: refusals by the server's limits (webhookRefusalReasons). */
  refused: Counter<'webhook' | 'reason'>;
}

/**
 * The `reason` label of controller_runtime_webhook_refused_total, one per limit of the webhook server (server.ts):
 *   max_connections         a TCP connection over `maxConnections`, closed at accept (webhook="")
 *   max_requests_in_flight  429: `maxRequestsInFlight` requests were being read or handled
 *   max_in_flight_bytes     429: the body would pass `maxInFlightBytes` with the bodies already held
 *   body_too_large          413: the body passes the path's limit (`maxRequestBytes`, `maxRequestBytesByPath`)
 *   request_timeout         408: the body was not complete within `requestTimeoutMs`
 */
export const webhookRefusalReasons = ['max_connections', 'max_requests_in_flight', 'max_in_flight_bytes', 'body_too_large', 'request_timeout'] as const;
/** One of webhookRefusalReasons. */
export type WebhookRefusalReason = (typeof webhookRefusalReasons)[number];

/** Prometheus's default buckets (client_golang DefBuckets), which controller-runtime's latency histogram uses. */
export const webhookLatencyBuckets: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The webhook metrics of `registry` (controller-runtime's names, and the refusals), created once per registry and shared afterwards. */
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
    refused: getOrCreate(registry, 'controller_runtime_webhook_refused_total', () => new Counter({
      name: 'controller_runtime_webhook_refused_total',
      help: 'Total number of requests and connections the webhook server refused by its limits, by reason (webhook="" for connections).',
      labelNames: ['webhook', 'reason'], registers,
    })),
  };
}
