/**
 * RestClient: the one HTTP path from this process to the Kubernetes API server.
 *
 * Transport (transport.ts, connection.ts): one connection per PROCESS for equal cluster + user settings — every
 * RestClient of one kubeconfig shares one Transport (`sharedTransports`, as client-go's transport cache), on Node's
 * built-in http2/https (HTTP/2 by ALPN, so all requests and watches share one multiplexed connection), credentials
 * per request (token files re-read when rotated, exec plugins run once for all clients), TLS material re-read when
 * its files change. The write gate, user agent and metrics stay per client. No WHATWG stream or Response
 * objects per call. Every request — including streaming watches — is counted in
 * `rest_client_requests_total{code,method,host}` (client-go's name); a request that fails before a response is
 * counted with code `<error>`.
 *
 * Retries (retry.ts, client-go's `checkWait`): an answer 429 with `Retry-After` (any verb: the server did not do it)
 * or 5xx with `Retry-After` (GET only) is retried after the header's seconds (capped), at most `retry.maxRetries`
 * times; the wait ends early when the caller's signal aborts. Every attempt is counted in
 * `rest_client_requests_total`, every attempt after the first also in `rest_client_request_retries_total{code,verb,host}`.
 * A write is re-checked against the write gate before each attempt.
 *
 * Timeouts and cancellation: each request owns ONE AbortController, aborted by the caller's signal or by its own
 * timer (`timeoutMs`, default 30 s, body included); both are released when the request finishes (the body was read
 * or discarded), so nothing per request outlives it — no `AbortSignal.any` chains on long-lived signals, no 30 s
 * timers left behind by finished requests.
 *
 * Reachability (issue 43): every response (any status) is reported to `reachability`, the ServerReachability of the
 * transport, which wakes reflectors waiting in a backoff after a connection-level failure (reachability.ts).
 *
 * Concurrency: a RestClient is stateless between requests and safe to share across every informer, controller,
 * elector and recorder of the process.
 */
import { Counter, type Registry } from 'prom-client';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';
import { readBody } from './connection.ts';
import type { KubeConfig } from './kubeconfig.ts';
import { sharedTransports, type RequestTransport } from './transport.ts';
import { reachabilityOf, type ServerReachability } from './reachability.ts';
import { ApiError } from './errors.ts';
import type { Query, RawResponse, RequestOptions, Verb } from './request.ts';
import { ResourceClient, type ApiClient } from './typed.ts';
import { realClock } from '../util/clock.ts';
import { defaultRetryPolicy, retryDelayMs, type RetryPolicy } from './retry.ts';
import type { Logger } from '../log/logger.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import type { ResourceType } from '../apimachinery/resource.ts';

/** Options of `new RestClient(opts)`: credentials, metrics registry, user agent, write gate, transport. */
export interface RestClientOptions {
  /** Where to connect and with which credentials (the current context). Only optional with `transport`. */
  kubeConfig?: KubeConfig;
  /** Where `rest_client_requests_total` and the retry counter are registered (default the process-wide registry). */
  registry?: Registry;
  /** The User-Agent header (default `ts-controller-manager`). */
  userAgent?: string;
  /**
   * Write gate (leader election): once this signal aborts, every request other than GET is refused with its reason
   * before anything is sent. The manager gives its guarded client (controllers, Events) the leadership signal, so
   * nothing it writes starts after leadership can no longer be proven (writes already sent are not cut: see send()).
   * Checked when the write is asked for AND again synchronously immediately before its bytes are handed to the
   * connection — after the credentials (an exec plugin can take seconds) and the connection set-up were awaited.
   */
  writeGate?: AbortSignal;
  /**
   * The transport to send on (owned by the caller, not closed by `close()`): a `Transport`, or any RequestTransport
   * (e.g. an in-memory API server in tests). Default: the shared Transport of `kubeConfig`.
   */
  transport?: RequestTransport;
  /**
   * Retrying answers that ask for it (429, or 5xx on a GET, with `Retry-After`): see retry.ts. Default
   * `{ maxRetries: 10, maxDelayMs: 10_000 }`; `{ maxRetries: 0 }` turns it off.
   */
  retry?: Partial<RetryPolicy>;
  /** Where a retry is logged (debug level, as client-go's V(4)). Default: nowhere. */
  log?: Logger;
}

export function requestsCounter(registry: Registry): Counter<'code' | 'method' | 'host'> {
  return getOrCreate(registry, 'rest_client_requests_total', () => new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'] as const,
    registers: [registry],
  }));
}

export function retriesCounter(registry: Registry): Counter<'code' | 'verb' | 'host'> {
  return getOrCreate(registry, 'rest_client_request_retries_total', () => new Counter({
    name: 'rest_client_request_retries_total',
    help: 'Number of request retries, partitioned by status code, verb, and host.',
    labelNames: ['code', 'verb', 'host'] as const,
    registers: [registry],
  }));
}

// The request shapes and the error type are defined below this file (request.ts, errors.ts, so typed.ts can use
// them without importing this one); re-exported here, where callers of RestClient have always found them.
export type { JsonClient, Query, RawResponse, RequestOptions, Verb } from './request.ts';
export { ApiError, isAlreadyExists, isConflict, isNotFound } from './errors.ts';

type Child = { inc(): void };

/** A RawResponse that can also hand over its body as bytes (read once; `json()` decodes them without a string copy per chunk). */
interface Response extends RawResponse {
  bytes(): Promise<Buffer>;
}

/**
 * The HTTP client of the Kubernetes API: one shared connection per kubeconfig, retries as client-go, an optional
 * write gate, and `rest_client_requests_total` metrics. `resource(type)` gives a typed ResourceClient.
 */
export class RestClient implements ApiClient {
  /** The configuration it was made from (its current context's cluster and user); undefined with only a `transport`. */
  readonly kubeConfig: KubeConfig | undefined;
  /** The API server's URL, without a trailing slash. */
  readonly server: string;
  /** The connection pool it sends on: shared by every RestClient of the same kubeconfig settings, or `opts.transport`. */
  readonly transport: RequestTransport;
  /**
   * Told of every response this client receives (any status): shared by every RestClient on the same transport.
   * Reflectors waiting after a connection failure subscribe to it (reachability.ts, issue 43).
   */
  readonly reachability: ServerReachability;
  /** Path prefix of the server URL (e.g. "/k8s/clusters/c1" behind a proxying gateway), '' for most. */
  private readonly prefix: string;
  private readonly host: string;
  private readonly userAgent: string;
  private readonly requests: Counter<'code' | 'method' | 'host'>;
  /** Counter children by "code method" (prom-client hashes labels on every inc otherwise). */
  private readonly counted = new Map<string, Child>();
  private readonly retries: Counter<'code' | 'verb' | 'host'>;
  private readonly retryPolicy: RetryPolicy;
  private readonly log: Logger | undefined;
  private readonly writeGate: AbortSignal | undefined;
  /** Drops this client's hold on the shared Transport (no-op for a caller-owned one). */
  private readonly releaseTransport: () => void;

  /** Takes a hold on the shared Transport of `opts.kubeConfig` (or uses `opts.transport`); release it with close(). Sends nothing. */
  constructor(opts: RestClientOptions) {
    this.writeGate = opts.writeGate;
    this.kubeConfig = opts.kubeConfig;
    if (opts.transport) {
      this.transport = opts.transport;
      this.releaseTransport = () => {};
    } else {
      if (!opts.kubeConfig) throw new Error('RestClient: kubeConfig or transport is required');
      const lease = sharedTransports.acquire(opts.kubeConfig);
      this.transport = lease.transport;
      this.releaseTransport = () => lease.release();
    }
    this.reachability = reachabilityOf(this.transport);
    this.server = this.transport.cluster.server.replace(/\/+$/, '');
    this.host = new URL(this.server).host;
    this.prefix = new URL(this.server).pathname.replace(/\/+$/, '');
    this.userAgent = opts.userAgent ?? 'ts-controller-manager';
    this.requests = requestsCounter(opts.registry ?? globalRegistry);
    this.retries = retriesCounter(opts.registry ?? globalRegistry);
    this.retryPolicy = { ...defaultRetryPolicy, ...opts.retry };
    this.log = opts.log;
  }

  /** Builds the absolute URL of an API path with query parameters (undefined values are dropped). */
  url(path: string, query?: Query): string {
    return new URL(this.server).origin + this.pathWithQuery(path, query);
  }

  private pathWithQuery(path: string, query?: Query): string {
    let qs = '';
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
      qs = params.toString();
    }
    return this.prefix + (qs ? `${path}${path.includes('?') ? '&' : '?'}${qs}` : path);
  }

  private count(code: string, method: string, retry: boolean): void {
    const key = `${code} ${method}`;
    let child = this.counted.get(key);
    if (!child) this.counted.set(key, (child = this.requests.labels({ code, method, host: this.host })));
    child.inc();
    if (retry) this.retries.labels({ code, verb: method, host: this.host }).inc();
  }

  /**
   * Sends one request and returns the response with its body unread (status not checked), so callers can stream
   * watch bodies. The caller MUST consume or `dump()` the body. Prefer `json()` for ordinary calls.
   */
  async request(method: Verb, path: string, opts: RequestOptions = {}): Promise<RawResponse> {
    return this.send(method, path, opts, false);
  }

  /** One request with its retries (see retry.ts): returns the first answer that is not to be retried. */
  private async send(method: Verb, path: string, opts: RequestOptions, buffered: boolean): Promise<Response> {
    const caller = opts.signal;
    for (let attempt = 0; ; attempt++) {
      const res = await this.sendOnce(method, path, opts, buffered, attempt > 0);
      const delayMs = res.status === 429 || res.status >= 500 ? retryDelayMs(method, res.status, res.headers, attempt, this.retryPolicy) : undefined;
      if (delayMs === undefined) return res;
      await res.dump();
      this.log?.debug({ method, path, status: res.status, retry: attempt + 1, delayMs }, 'server asked to retry (Retry-After)');
      await realClock.sleep(delayMs, caller);
    }
  }

  private async sendOnce(method: Verb, path: string, opts: RequestOptions, buffered: boolean, retry: boolean): Promise<Response> {
    // --- writes (issue 11): refused once the caller's signal or the write gate aborted, never cut mid-flight ---
    // A write that was sent runs to its answer or its timeout (`timeoutMs`): cancelling in-flight HTTP/2 streams
    // (shutdown aborts every reconcile at once) can leave Node 24's Http2Session spinning forever in
    // SendPendingData (seen here: 100% CPU, no timers, process never exits). The process exits right after a lost
    // lease anyway, which drops such a request with its connection.
    // Issue 23: the gate is checked again synchronously right before the request is handed to the connection
    // (`beforeSend`, called by connection.ts after the credentials and the connection set-up), so a write can never
    // go on the wire after leadership ended while it awaited an exec plugin or a TLS handshake.
    let beforeSend: (() => void) | undefined;
    if (method !== 'GET') {
      const caller = opts.signal;
      const gate = this.writeGate;
      caller?.throwIfAborted();
      gate?.throwIfAborted();
      beforeSend = () => {
        caller?.throwIfAborted();
        gate?.throwIfAborted();
      };
      opts = { ...opts, signal: undefined };
    }
    // ---
    const target = this.pathWithQuery(path, opts.query);
    const headers: Record<string, string> = { ...(await this.transport.headers(this.server + target)), accept: opts.accept ?? 'application/json', 'user-agent': this.userAgent };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] = opts.contentType ?? 'application/json';
    }
    // One controller per request: the caller's signal and our timeout both abort it; both are released at the end.
    const ac = new AbortController();
    const outer = opts.signal;
    const onAbort = (): void => ac.abort(outer?.reason);
    if (outer?.aborted) ac.abort(outer.reason);
    else outer?.addEventListener('abort', onAbort, { once: true });
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const timer = timeoutMs > 0 ? setTimeout(() => ac.abort(new DOMException(`request timed out after ${timeoutMs} ms`, 'TimeoutError')), timeoutMs) : undefined;
    timer?.unref();
    const release = (): void => {
      if (timer) clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    };
    let res;
    try {
      res = await this.transport.send({ method, path: target, headers, body, signal: ac.signal, buffered, ...(beforeSend ? { beforeSend } : {}) });
    } catch (err) {
      release();
      this.count('<error>', method, retry);
      throw err;
    }
    this.count(String(res.status), method, retry);
    this.reachability.answered();
    if (res.status === 401) this.transport.invalidate();
    const b = res.body;
    const read = res.bytes;
    // A body the connection already read (buffered HTTP/2) is complete: the request is over, release it now.
    if (read) release();
    else b.once('close', release);
    const bytes = (): Promise<Buffer> => (read ? Promise.resolve(read) : readBody(b));
    return {
      status: res.status,
      headers: res.headers,
      body: b,
      bytes,
      text: async () => (await bytes()).toString('utf8'),
      dump: () => {
        b.destroy();
        return Promise.resolve();
      },
    };
  }

  /**
   * Sends a request and decodes a JSON response; non-2xx answers throw ApiError. The body is read into one Buffer
   * and decoded with one `toString` + `JSON.parse` (an empty body decodes as `{}`).
   */
  async json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, opts, true);
    if (res.status < 200 || res.status >= 300) throw await ApiError.fromResponse(method, path, res);
    const bytes = await res.bytes();
    return (bytes.length > 0 ? JSON.parse(bytes.toString('utf8')) : {}) as T;
  }

  /**
   * A typed client of one resource type on this client (same write gate, metrics and signals): see typed.ts.
   *   mgr.client.resource<ConfigMap>(coreResources.configMaps).namespace('default').get('settings')
   */
  resource<T extends KubeObject = KubeObject>(type: ResourceType): ResourceClient<T> {
    return new ResourceClient<T>(this, type);
  }

  /**
   * Releases this client's hold on the shared Transport: the connection closes (requests in flight on it fail) when
   * the last client of the same kubeconfig settings closed. A caller-owned `transport` is left open. Idempotent.
   */
  close(): Promise<void> {
    this.releaseTransport();
    return Promise.resolve();
  }
}
