/**
 * The /metrics endpoint (--metrics-bind-address, --metrics-secure, --metrics-cert-dir).
 *
 *  - Serves a prom-client Registry (default `globalRegistry`), to which Node process metrics are added once per
 *    registry (`registerProcessMetrics`).
 *  - Insecure mode: plain HTTP, no authentication (bind to localhost or protect with a NetworkPolicy).
 *  - Secure mode: HTTPS with tls.crt/tls.key from the cert dir, re-read when they change (certwatcher.ts), or a
 *    self-signed pair generated in memory and renewed before it expires; every scrape must carry
 *    `Authorization: Bearer <token>`, which is
 *    authenticated with a TokenReview (401 when missing or not authenticated) and authorized with a
 *    SubjectAccessReview for the non-resource URL (403 when not allowed) — as controller-runtime's
 *    WithAuthenticationAndAuthorization filter. Review results (positive and negative) are cached for `ttlMs`
 *    (default 10 s) in bounded LRU caches; API errors are not cached and answer 500.
 *  - TokenReview load is bounded: anyone who can reach the port can send random bearer tokens, and each unknown
 *    token costs a TokenReview. Reviews of tokens not in the cache are limited to `maxReviewsInFlight` at a time
 *    (default 4) and a token bucket of `reviewsPerSecond` (default 10, burst `reviewBurst` 20); past either the scrape
 *    gets 429 with `Retry-After: 1` and the API server is not asked. Concurrent requests with the same uncached token
 *    share one review. Cached tokens (a scraper's, reviewed within the TTL) never wait for the limit.
 *
 * Tokens never appear in logs or cache keys (keys hold a SHA-256 digest).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LRUCache } from 'lru-cache';
import { collectDefaultMetrics, type Registry } from 'prom-client';
import { registerMemoryLimitMetrics } from '../metrics/process.ts';
import type { RestClient } from '../client/rest.ts';
import { type Logger, silentLogger } from '../log/logger.ts';
import { globalRegistry } from '../metrics/registry.ts';
import { type Clock, realClock } from '../util/clock.ts';
import { CertDirWatcher, GeneratedCertificate } from './certwatcher.ts';
import { HttpServerRunnable, type TlsSource } from './httpserver.ts';

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface AuthorizationAttributes {
  /** Non-resource URL path, e.g. "/metrics". */
  path: string;
  /** Lower-case HTTP verb, e.g. "get". */
  verb: string;
}

export interface AuthorizationDecision {
  allowed: boolean;
  reason?: string;
}

/** Authentication and authorization of scrapers (the API server's reviews, or a fake in tests). */
export interface AccessReviewer {
  /** The user of a bearer token, or undefined when the token is not authenticated. Rejects on API errors. */
  authenticate(token: string, signal?: AbortSignal): Promise<UserInfo | undefined>;
  /** Whether `user` may perform `attrs`. Rejects on API errors. */
  authorize(user: UserInfo, attrs: AuthorizationAttributes, signal?: AbortSignal): Promise<AuthorizationDecision>;
}

interface TokenReviewStatus {
  authenticated?: boolean;
  user?: UserInfo;
  error?: string;
}

interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
  reason?: string;
  evaluationError?: string;
}

/** AccessReviewer over authentication.k8s.io/v1 TokenReview and authorization.k8s.io/v1 SubjectAccessReview. */
export class KubeAccessReviewer implements AccessReviewer {
  private readonly rest: Pick<RestClient, 'json'>;

  constructor(rest: Pick<RestClient, 'json'>) {
    this.rest = rest;
  }

  async authenticate(token: string, signal?: AbortSignal): Promise<UserInfo | undefined> {
    const review = await this.rest.json<{ status?: TokenReviewStatus }>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
      signal,
    });
    const status = review.status ?? {};
    if (!status.authenticated || !status.user?.username) return undefined;
    return status.user;
  }

  async authorize(user: UserInfo, attrs: AuthorizationAttributes, signal?: AbortSignal): Promise<AuthorizationDecision> {
    const review = await this.rest.json<{ status?: SubjectAccessReviewStatus }>(
      'POST',
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: user.username,
            uid: user.uid,
            groups: user.groups,
            extra: user.extra,
            nonResourceAttributes: { path: attrs.path, verb: attrs.verb },
          },
        },
        signal,
      },
    );
    const status = review.status ?? {};
    return { allowed: status.allowed === true && status.denied !== true, reason: status.reason ?? status.evaluationError };
  }
}

export interface AuthResult {
  status: 200 | 401 | 403 | 429 | 500;
  message: string;
  user?: string;
}

export interface AuthFilterOptions {
  reviewer: AccessReviewer;
  /** How long review answers are reused (default 10 s). */
  ttlMs?: number;
  /** Entries per cache (default 1024). */
  max?: number;
  clock?: Clock;
  logger?: Logger;
  /** TokenReviews of uncached tokens at a time (default 4); more → 429. */
  maxReviewsInFlight?: number;
  /** Sustained TokenReviews of uncached tokens per second (default 10); more → 429. */
  reviewsPerSecond?: number;
  /** Token-bucket size for `reviewsPerSecond` (default 20). */
  reviewBurst?: number;
}

/**
 * Bearer-token authentication + authorization with short-lived, bounded caches and a bounded TokenReview rate.
 * Concurrency: safe for concurrent requests; simultaneous first requests for one token share one TokenReview.
 */
export class AuthFilter {
  private readonly reviewer: AccessReviewer;
  private readonly authn: LRUCache<string, { user: UserInfo | false }>;
  private readonly authz: LRUCache<string, AuthorizationDecision>;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly pendingAuthn = new Map<string, Promise<UserInfo | false>>();
  private readonly maxInFlight: number;
  private readonly ratePerMs: number;
  private readonly burst: number;
  private tokens: number;
  private tokensAt: number;
  private throttledLogAt = Number.NEGATIVE_INFINITY;
  private throttledSinceLog = 0;

  constructor(opts: AuthFilterOptions) {
    this.reviewer = opts.reviewer;
    const clock = opts.clock ?? realClock;
    this.clock = clock;
    this.maxInFlight = opts.maxReviewsInFlight ?? 4;
    this.ratePerMs = (opts.reviewsPerSecond ?? 10) / 1000;
    this.burst = opts.reviewBurst ?? 20;
    this.tokens = this.burst;
    this.tokensAt = clock.now();
    // ttlResolution 0: read the (possibly fake) clock on every lookup instead of caching "now" with a real timer.
    const common = { max: opts.max ?? 1024, ttl: opts.ttlMs ?? 10_000, ttlResolution: 0, perf: clock };
    this.authn = new LRUCache(common);
    this.authz = new LRUCache(common);
    this.log = (opts.logger ?? silentLogger).child({ component: 'metrics-auth' });
  }

  /** Decides one request from its Authorization header, path and (any-case) method. */
  async check(authorization: string | undefined, path: string, method: string, signal?: AbortSignal): Promise<AuthResult> {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    const token = m?.[1];
    if (!token) return { status: 401, message: 'Unauthorized: a bearer token is required' };
    const tokenKey = createHash('sha256').update(token).digest('hex');
    let user: UserInfo | false;
    const cachedUser = this.authn.get(tokenKey);
    if (cachedUser) {
      user = cachedUser.user;
    } else {
      let review = this.pendingAuthn.get(tokenKey);
      if (!review) {
        if (!this.admitReview()) {
          return { status: 429, message: 'Too Many Requests: too many token reviews; retry later' };
        }
        review = this.review(token, tokenKey, signal);
      }
      try {
        user = await review;
      } catch (err) {
        this.log.error({ err }, 'TokenReview failed');
        return { status: 500, message: 'Internal Server Error: authentication failed' };
      }
    }
    if (!user) return { status: 401, message: 'Unauthorized' };

    const attrs: AuthorizationAttributes = { path, verb: method.toLowerCase() };
    const authzKey = JSON.stringify([user.username, user.uid ?? '', [...(user.groups ?? [])].sort(), sortedExtra(user.extra), attrs.path, attrs.verb]);
    let decision = this.authz.get(authzKey);
    if (!decision) {
      try {
        decision = await this.reviewer.authorize(user, attrs, signal);
      } catch (err) {
        this.log.error({ err, user: user.username }, 'SubjectAccessReview failed');
        return { status: 500, message: 'Internal Server Error: authorization failed' };
      }
      this.authz.set(authzKey, decision);
    }
    if (!decision.allowed) {
      this.log.debug({ user: user.username, path, reason: decision.reason }, 'metrics scrape forbidden');
      return { status: 403, message: `Forbidden: user "${user.username}" cannot ${attrs.verb} path "${attrs.path}"`, user: user.username };
    }
    return { status: 200, message: 'ok', user: user.username };
  }

  /** One TokenReview, shared by concurrent requests with the same token; its answer is cached. */
  private review(token: string, tokenKey: string, signal?: AbortSignal): Promise<UserInfo | false> {
    const review = (async (): Promise<UserInfo | false> => {
      try {
        const user = (await this.reviewer.authenticate(token, signal)) ?? false;
        this.authn.set(tokenKey, { user });
        return user;
      } finally {
        this.pendingAuthn.delete(tokenKey);
      }
    })();
    this.pendingAuthn.set(tokenKey, review);
    return review;
  }

  /** Whether one more TokenReview may start now (in-flight bound and token bucket); takes a token if so. */
  private admitReview(): boolean {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + (now - this.tokensAt) * this.ratePerMs);
    this.tokensAt = now;
    if (this.pendingAuthn.size < this.maxInFlight && this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.throttledSinceLog++;
    if (now - this.throttledLogAt >= 60_000) {
      this.log.warn({ throttled: this.throttledSinceLog, inFlight: this.pendingAuthn.size },
        'metrics scrapes with unknown bearer tokens throttled (429)');
      this.throttledLogAt = now;
      this.throttledSinceLog = 0;
    }
    return false;
  }

  /** Answers 401/403/429/500 and resolves false, or resolves true for an allowed request (nothing written). */
  async admit(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
    const result = await this.check(req.headers.authorization, path, req.method ?? 'GET');
    if (result.status === 200) return true;
    res.writeHead(result.status, {
      'content-type': 'text/plain; charset=utf-8',
      ...(result.status === 401 ? { 'www-authenticate': 'Bearer' } : {}),
      ...(result.status === 429 ? { 'retry-after': '1' } : {}),
    });
    res.end(result.message + '\n');
    return false;
  }
}

function sortedExtra(extra: Record<string, string[]> | undefined): [string, string[]][] {
  return Object.entries(extra ?? {})
    .map(([k, v]): [string, string[]] => [k, [...v].sort()])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const withProcessMetrics = new WeakSet<Registry>();

/** Adds prom-client's Node process metrics (process_*, nodejs_*) to `registry`, at most once per registry. */
export function registerProcessMetrics(registry: Registry): void {
  if (withProcessMetrics.has(registry) || registry.getSingleMetric('process_cpu_user_seconds_total')) return;
  withProcessMetrics.add(registry);
  collectDefaultMetrics({ register: registry });
  registerMemoryLimitMetrics(registry); // process_memory_limit_bytes, nodejs_heap_size_limit_bytes
  // prom-client names three gauges *_total, which Prometheus reserves for counters (`promtool check metrics` flags
  // them). The same values stay available per type as nodejs_active_handles / _requests / _resources.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
    registry.removeSingleMetric(name);
  }
}

export interface MetricsServerOptions {
  /** "host:port", ":port", or "0" (disabled: newMetricsServer returns undefined). */
  bindAddress: string;
  registry?: Registry;
  /** Default true: add Node process metrics to the registry. */
  processMetrics?: boolean;
  secure?: boolean;
  /** Directory with tls.crt/tls.key (secure mode), re-read on change; a self-signed pair is generated when absent. */
  certDir?: string;
  /** How often the cert dir is re-read without a filesystem event (default 10 s). */
  certPollIntervalMs?: number;
  /** Lifetime of the generated certificate (default 365 days); renewed at two thirds of it. */
  generatedCertValidityMs?: number;
  /** Clock of certificate polling and renewal (fake in tests). */
  clock?: Clock;
  /** Required in secure mode (unless `authFilter` is given). */
  reviewer?: AccessReviewer;
  authFilter?: AuthFilter;
  logger?: Logger;
  shutdownTimeoutMs?: number;
}

/** Builds the metrics server Runnable, or undefined when disabled ("0"). */
export function newMetricsServer(opts: MetricsServerOptions): HttpServerRunnable | undefined {
  if (opts.bindAddress === '0') return undefined;
  const registry = opts.registry ?? globalRegistry;
  if (opts.processMetrics ?? true) registerProcessMetrics(registry);
  const log = (opts.logger ?? silentLogger).child({ component: 'metrics-server' });

  let filter: AuthFilter | undefined;
  if (opts.secure) {
    filter = opts.authFilter ?? (opts.reviewer ? new AuthFilter({ reviewer: opts.reviewer, logger: opts.logger }) : undefined);
    if (!filter) throw new Error('metrics server: secure mode needs an AccessReviewer');
  }
  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    if (filter && !(await filter.admit(req, res, path))) return;
    try {
      const body = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType }).end(body);
    } catch (err) {
      log.error({ err }, 'collecting metrics failed');
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('error collecting metrics\n');
    }
  };
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    serve(req, res).catch((err: unknown) => {
      log.error({ err }, 'metrics handler failed');
      if (!res.headersSent) res.writeHead(500).end();
    });
  };

  let tls: TlsSource | undefined;
  if (opts.secure) {
    const common = { logger: opts.logger, ...(opts.clock ? { clock: opts.clock } : {}) };
    tls = opts.certDir
      ? new CertDirWatcher({ dir: opts.certDir, ...common, ...(opts.certPollIntervalMs ? { pollIntervalMs: opts.certPollIntervalMs } : {}) })
      : new GeneratedCertificate({
        commonName: 'ts-controller-manager-metrics', dnsNames: ['localhost'], ips: ['127.0.0.1'], ...common,
        ...(opts.generatedCertValidityMs ? { validityMs: opts.generatedCertValidityMs } : {}),
      });
  }
  return new HttpServerRunnable({
    name: 'metrics-server',
    bindAddress: opts.bindAddress,
    handler,
    tls,
    logger: opts.logger,
    shutdownTimeoutMs: opts.shutdownTimeoutMs,
  });
}
