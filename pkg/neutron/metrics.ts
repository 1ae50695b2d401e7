/**
 * Cloud-side metrics: every HTTP request to Neutron and Keystone, and Keystone token requests.
 *
 *  - `openstack_requests_total{api,method,code}` — counter, as client-go's `rest_client_requests_total`: `api` is
 *    `neutron` or `keystone`, `code` the HTTP status, or `<error>` when no response came (timeout, refused or reset
 *    connection, TLS failure). A request the CALLER cancelled (its AbortSignal) is not counted anywhere: it says
 *    nothing about the server.
 *  - `openstack_request_duration_seconds{api,method}` — histogram of the same requests (send → whole body read, or
 *    → failure), client-go's `rest_client_request_duration_seconds` buckets.
 *  - `openstack_last_success_timestamp_seconds{api}` / `openstack_last_failure_timestamp_seconds{api}` — gauges: Unix
 *    time of the latest request that got an answer (any status below 500) / that got none or a 5xx. Both start at 0
 *    when a client for that API is created, so `failure > success` means "the latest request failed and none has
 *    succeeded since" — true for as long as the API stays down, however rarely the backoff retries (the
 *    NeutronUnavailable alert is built on it; a rate over a window goes empty when retries are sparse).
 *  - `openstack_keystone_token_requests_total{reason,result}` — counter of token requests (POST /v3/auth/tokens):
 *    `reason` `initial` (no token issued yet), `renewal` (the cached one is about to expire), `reauth` (Neutron
 *    rejected the cached one with 401); `result` `success`, `auth_failure` (Keystone refused the credentials or has
 *    no network endpoint: NeutronAuthError), `unavailable` (5xx, 429, timeout, connection error, unusable answer).
 *    Every label pair starts at 0 when a Keystone authenticator is created, so ratios and `== 0` comparisons work.
 *
 * Label `api`, not `service`: the Prometheus Operator's ServiceMonitor adds a `service` target label, which would
 * turn ours into `exported_service`.
 *
 * Ownership: one `OpenStackMetrics` per prom-client Registry (`openStackMetrics(registry)`), shared by every client of
 * the process; all methods are synchronous and cheap.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';

export type OpenStackAPI = 'neutron' | 'keystone';
export type TokenReason = 'initial' | 'renewal' | 'reauth';
export type TokenResult = 'success' | 'auth_failure' | 'unavailable';

/** client-go's rest_client_request_duration_seconds buckets. */
export const requestDurationBuckets: readonly number[] = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

const tokenReasons: readonly TokenReason[] = ['initial', 'renewal', 'reauth'];
const tokenResults: readonly TokenResult[] = ['success', 'auth_failure', 'unavailable'];

export class OpenStackMetrics {
  private readonly requests: Counter<'api' | 'method' | 'code'>;
  private readonly duration: Histogram<'api' | 'method'>;
  private readonly lastSuccess: Gauge<'api'>;
  private readonly lastFailure: Gauge<'api'>;
  private readonly tokens: Counter<'reason' | 'result'>;
  private readonly initialised = new Set<string>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = getOrCreate(registry, 'openstack_requests_total', () => new Counter({
      name: 'openstack_requests_total',
      help: 'Number of HTTP requests to OpenStack APIs, partitioned by API (neutron, keystone), method and status code ("<error>": no response).',
      labelNames: ['api', 'method', 'code'] as const, registers,
    }));
    this.duration = getOrCreate(registry, 'openstack_request_duration_seconds', () => new Histogram({
      name: 'openstack_request_duration_seconds',
      help: 'Duration of HTTP requests to OpenStack APIs (until the whole body was read or the request failed), by API and method.',
      labelNames: ['api', 'method'] as const, buckets: [...requestDurationBuckets], registers,
    }));
    this.lastSuccess = getOrCreate(registry, 'openstack_last_success_timestamp_seconds', () => new Gauge({
      name: 'openstack_last_success_timestamp_seconds',
      help: 'Unix time of the latest request to the OpenStack API that got a response below 500 (0: none yet).',
      labelNames: ['api'] as const, registers,
    }));
    this.lastFailure = getOrCreate(registry, 'openstack_last_failure_timestamp_seconds', () => new Gauge({
      name: 'openstack_last_failure_timestamp_seconds',
      help: 'Unix time of the latest request to the OpenStack API that got no response or a 5xx (0: none yet).',
      labelNames: ['api'] as const, registers,
    }));
    this.tokens = getOrCreate(registry, 'openstack_keystone_token_requests_total', () => new Counter({
      name: 'openstack_keystone_token_requests_total',
      help: 'Number of Keystone token requests, by reason (initial, renewal, reauth) and result (success, auth_failure, unavailable).',
      labelNames: ['reason', 'result'] as const, registers,
    }));
  }

  /** Creates the `api`'s timestamp series at 0 (once); a client calls it when it is created. */
  init(api: OpenStackAPI): void {
    if (this.initialised.has(api)) return;
    this.initialised.add(api);
    this.lastSuccess.set({ api }, 0);
    this.lastFailure.set({ api }, 0);
    if (api === 'keystone') {
      for (const reason of tokenReasons) for (const result of tokenResults) this.tokens.inc({ reason, result }, 0);
    }
  }

  /** One finished request: `status` undefined = no response. `nowMs` is wall-clock time (Date.now()). */
  request(api: OpenStackAPI, method: string, status: number | undefined, seconds: number, nowMs: number = Date.now()): void {
    this.init(api);
    this.requests.inc({ api, method, code: status === undefined ? '<error>' : String(status) });
    this.duration.observe({ api, method }, seconds);
    (status === undefined || status >= 500 ? this.lastFailure : this.lastSuccess).set({ api }, nowMs / 1000);
  }

  /** One finished token request. */
  tokenRequest(reason: TokenReason, result: TokenResult): void {
    this.init('keystone');
    this.tokens.inc({ reason, result });
  }
}

const byRegistry = new WeakMap<Registry, OpenStackMetrics>();

/** The OpenStackMetrics of `registry` (default: the global one), created on first use. */
export function openStackMetrics(registry: Registry = globalRegistry): OpenStackMetrics {
  let m = byRegistry.get(registry);
  if (!m) {
    m = new OpenStackMetrics(registry);
    byRegistry.set(registry, m);
  }
  return m;
}
