/**
 * RestClient: the one HTTP path from this process to the Kubernetes API server.
 *
 * Authentication and TLS come from client-node's KubeConfig (kubeconfig files, in-cluster ServiceAccount, exec/OIDC
 * plugins): each request gets a fresh RequestContext. For a token FILE (in-cluster bound ServiceAccount tokens, which
 * the kubelet rotates by rewriting the file) client-node re-reads only every 60 s; RestClient checks the file's
 * mtime at most once a second and uses a rewritten token at once, so rotation never leaves a revoked token in use. Transport is undici's fetch with client-node's dispatcher (connection
 * pooling per cluster/user). Every request — including streaming watches — is counted in
 * `rest_client_requests_total{code,method,host}` (client-go's name); a request that fails before a response is
 * counted with code `<error>`.
 *
 * Concurrency: a RestClient is stateless between requests and safe to share across every informer, controller,
 * elector and recorder of the process.
 */
import { readFileSync, statSync } from 'node:fs';
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { Counter, type Registry } from 'prom-client';
import { fetch, type Response } from 'undici';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';

export type Verb = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  query?: Query;
  /** JSON-serialised unless a string. */
  body?: unknown;
  /** Defaults to application/json; use application/merge-patch+json etc. for PATCH. */
  contentType?: string;
  signal?: AbortSignal;
  /** Timeout for the whole request, body included. Default 30 s; 0 = none (watches: pass your own signal). */
  timeoutMs?: number;
}

/** A Kubernetes `Status` error from the API server (or a transport-level failure with status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly body: unknown;

  constructor(status: number, reason: string, message: string, body: unknown) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.body = body;
  }

  static async fromResponse(method: string, path: string, res: Response): Promise<ApiError> {
    const text = await res.text().catch(() => '');
    let body: unknown = text;
    let reason = res.statusText || 'Unknown';
    let message = `${method} ${path}: HTTP ${res.status}`;
    try {
      body = JSON.parse(text) as unknown;
      const status = body as { reason?: string; message?: string };
      if (status.reason) reason = status.reason;
      if (status.message) message = `${message} ${reason}: ${status.message}`;
    } catch {
      if (text) message = `${message}: ${text.slice(0, 200)}`;
    }
    return new ApiError(res.status, reason, message, body);
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404;
}

export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409;
}

export function isAlreadyExists(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409 && err.reason === 'AlreadyExists';
}

export interface RestClientOptions {
  kubeConfig: KubeConfig;
  registry?: Registry;
  userAgent?: string;
  /**
   * Write gate (leader election): once this signal aborts, every request other than GET is refused with its reason
   * before anything is sent. The manager gives its guarded client (controllers, Events) the leadership signal, so
   * nothing it writes starts after leadership can no longer be proven (writes already sent are not cut: see request()).
   */
  writeGate?: AbortSignal;
}

export function requestsCounter(registry: Registry): Counter<'code' | 'method' | 'host'> {
  return getOrCreate(registry, 'rest_client_requests_total', () => new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'] as const,
    registers: [registry],
  }));
}

/** The current token of a token file, re-read when the file changes (checked at most once per `checkEveryMs`). */
class TokenFile {
  private token: string | undefined;
  private mtimeMs = -1;
  private checkedAt = -Infinity;
  private readonly path: string;
  private readonly checkEveryMs: number;

  constructor(path: string, checkEveryMs = 1000) {
    this.path = path;
    this.checkEveryMs = checkEveryMs;
  }

  current(): string | undefined {
    const now = performance.now();
    if (now - this.checkedAt >= this.checkEveryMs) {
      this.checkedAt = now;
      try {
        const { mtimeMs } = statSync(this.path);
        if (mtimeMs !== this.mtimeMs) {
          this.token = readFileSync(this.path, 'utf8').trim();
          this.mtimeMs = mtimeMs;
        }
      } catch {
        // Keep the last good token; client-node's own header is used if there never was one.
      }
    }
    return this.token;
  }
}

export class RestClient {
  readonly kubeConfig: KubeConfig;
  readonly server: string;
  private readonly host: string;
  private readonly userAgent: string;
  private readonly requests: Counter<'code' | 'method' | 'host'>;
  private readonly tokenFile: TokenFile | undefined;
  private readonly writeGate: AbortSignal | undefined;

  constructor(opts: RestClientOptions) {
    this.writeGate = opts.writeGate;
    this.kubeConfig = opts.kubeConfig;
    const cluster = opts.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/+$/, '');
    this.host = new URL(this.server).host;
    this.userAgent = opts.userAgent ?? 'ts-controller-manager';
    this.requests = requestsCounter(opts.registry ?? globalRegistry);
    const tokenFile = (opts.kubeConfig.getCurrentUser()?.authProvider as { config?: { tokenFile?: string } } | undefined)
      ?.config?.tokenFile;
    this.tokenFile = tokenFile ? new TokenFile(tokenFile) : undefined;
  }

  /** Builds the absolute URL of an API path with query parameters (undefined values are dropped). */
  url(path: string, query?: Query): string {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    return url.toString();
  }

  /**
   * Sends one request and returns the raw response (status not checked; body not consumed), so callers can stream
   * watch bodies. Prefer `json()` for ordinary calls.
   */
  async request(method: Verb, path: string, opts: RequestOptions = {}): Promise<Response> {
    // --- writes (issue 11): refused once the caller's signal or the write gate aborted, never cut mid-flight ---
    // A write that was sent runs to its answer or its timeout (`timeoutMs`): cancelling in-flight HTTP/2 streams
    // (shutdown aborts every reconcile at once) can leave Node 24's Http2Session spinning forever in
    // SendPendingData (seen here: 100% CPU, no timers, process never exits). The process exits right after a lost
    // lease anyway, which drops such a request with its connection.
    if (method !== 'GET') {
      opts.signal?.throwIfAborted();
      this.writeGate?.throwIfAborted();
      opts = { ...opts, signal: undefined };
    }
    // ---
    const url = this.url(path, opts.query);
    const ctx = new RequestContext(url, HttpMethod[method]);
    await this.kubeConfig.applySecurityAuthentication(ctx);
    const headers: Record<string, string> = { ...ctx.getHeaders(), accept: 'application/json', 'user-agent': this.userAgent };
    const token = this.tokenFile?.current();
    if (token) {
      delete headers['Authorization'];
      headers['authorization'] = `Bearer ${token}`;
    }
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] = opts.contentType ?? 'application/json';
    }
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const signals = [opts.signal, timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : undefined].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    try {
      const res = await fetch(url, {
        method,
        headers,
        body,
        // client-node builds its dispatcher (TLS, client certificates, proxy) with this same undici package.
        dispatcher: ctx.getDispatcher(),
        signal: signals.length > 0 ? AbortSignal.any(signals) : undefined,
      });
      this.requests.inc({ code: String(res.status), method, host: this.host });
      return res;
    } catch (err) {
      this.requests.inc({ code: '<error>', method, host: this.host });
      throw err;
    }
  }

  /** Sends a request and decodes a JSON response; non-2xx answers throw ApiError. */
  async json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.request(method, path, opts);
    if (res.status < 200 || res.status >= 300) throw await ApiError.fromResponse(method, path, res);
    const text = await res.text();
    return (text ? JSON.parse(text) : {}) as T;
  }
}
