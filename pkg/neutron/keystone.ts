/**
 * Authentication for the Neutron client: where Neutron is and which token to send.
 *
 * `KeystoneAuth` (Keystone v3):
 *  - `POST {auth_url}/v3/auth/tokens` with the password (project-scoped) or application-credential method; the token
 *    is the `X-Subject-Token` response header; Neutron's URL comes from the token's catalog (service type `network`,
 *    the cloud's interface, default public, and region if `region_name` is set) unless the cloud has an explicit
 *    `network_endpoint_override`/`endpoint_override`.
 *  - Tokens are cached and renewed ahead of expiry. The token's lifetime is measured on the SERVER's clock
 *    (`expires_at - issued_at`) and counted down on the local monotonic clock from when the request was sent, so
 *    clock skew between machines never makes a token look valid longer than it is. Renewal happens
 *    `min(refreshMarginMs, lifetime / 2)` before expiry.
 *  - Concurrent callers share one in-flight authentication; a caller's abort only abandons its own wait.
 *  - `invalidate(token)` (the client calls it after a 401) drops that token if it is still the cached one; the
 *    client then authenticates again and retries its request once.
 *  - Failures: every refusal of the token request (401, 403, 404, other 4xx) → NeutronAuthError — a 404 from Keystone
 *    is never a NeutronNotFoundError ("resource gone"); 5xx, 429, timeouts, connection errors → NeutronUnavailableError (retryable);
 *    no `network` endpoint in the catalog → NeutronAuthError (type EndpointNotFound).
 *  - Tokens and credentials are Secrets: they never appear in logs, errors or inspect output.
 *  - Metrics (metrics.ts): every token request is counted in `openstack_keystone_token_requests_total` with why it was
 *    made (`initial` until a token was issued, `renewal` ahead of expiry, `reauth` after `invalidate`) and its result;
 *    its HTTP exchange in `openstack_requests_total{api="keystone"}`.
 *
 * `StaticAuth`: auth_type none — a fixed endpoint and no token.
 */
import type { Registry } from 'prom-client';
import type { Logger } from '../log/logger.ts';
import { silentLogger } from '../log/logger.ts';
import { realClock, type Clock } from '../util/clock.ts';
import { Secret, type ApplicationCredentialAuth, type CloudConfig, type PasswordAuth } from './clouds.ts';
import { decodeError, isRetryable, NeutronAuthError, NeutronUnavailableError } from './errors.ts';
import { DEFAULT_TIMEOUT_MS, send, type Transport } from './http.ts';
import { openStackMetrics, type OpenStackMetrics, type TokenReason } from './metrics.ts';

export interface AuthResult {
  /** Neutron's base URL, without a trailing slash or `/v2.0`. */
  readonly endpoint: string;
  /** Token for `X-Auth-Token`; undefined without Keystone. */
  readonly token: Secret | undefined;
  /** The token's project (project-scoped lookups); undefined without Keystone or for an unscoped token. */
  readonly projectId?: string | undefined;
}

export interface Authenticator {
  /** A usable endpoint and (if any) a token that is not about to expire. */
  authenticate(signal?: AbortSignal): Promise<AuthResult>;
  /** Forget `token` after the server rejected it (no-op if a newer token is cached already). */
  invalidate(token: Secret | undefined): void;
}

/** Strips trailing slashes and a trailing `/v2.0` (catalogs list Neutron both ways). */
export function normaliseNetworkEndpoint(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v2\.0$/, '');
}

/** auth type none: a fixed endpoint, no token. */
export class StaticAuth implements Authenticator {
  readonly endpoint: string;

  constructor(endpoint: string) {
    this.endpoint = normaliseNetworkEndpoint(endpoint);
  }

  authenticate(): Promise<AuthResult> {
    return Promise.resolve({ endpoint: this.endpoint, token: undefined });
  }

  invalidate(): void {}
}

export interface KeystoneAuthOptions {
  clock?: Clock;
  /** Timeout of one token request (default 10 s). */
  timeoutMs?: number;
  /** Renew this long before expiry at most (default 5 min; capped at half the token's lifetime). */
  refreshMarginMs?: number;
  logger?: Logger;
  /** TLS and proxy settings of the cloud (see http.ts `Transport`). */
  transport?: Transport;
  userAgent?: string;
  /** Where token and request metrics go (default: the global registry). */
  registry?: Registry;
}

interface CatalogEndpoint {
  interface?: string;
  region?: string;
  region_id?: string;
  url?: string;
}

interface CatalogService {
  type?: string;
  endpoints?: CatalogEndpoint[];
}

interface TokenBody {
  token?: { expires_at?: string; issued_at?: string; catalog?: CatalogService[]; project?: { id?: string } };
}

interface CachedToken {
  token: Secret;
  endpoint: string;
  projectId: string | undefined;
  /** Local clock time after which the token is renewed. */
  refreshAt: number;
}

/** Keystone v3 URL (`…/v3`) for an auth_url written with or without the version. */
export function keystoneV3Url(authUrl: string): string {
  const u = authUrl.replace(/\/+$/, '');
  if (/\/v3$/.test(u)) return u;
  if (/\/v2\.0$/.test(u)) return u.replace(/\/v2\.0$/, '/v3');
  return `${u}/v3`;
}

function domainRef(name: string | undefined, id: string | undefined): Record<string, string> | undefined {
  if (id !== undefined) return { id };
  if (name !== undefined) return { name };
  return undefined;
}

/** The JSON body of POST /v3/auth/tokens for a password or application-credential cloud. Contains secrets. */
export function tokenRequestBody(auth: PasswordAuth | ApplicationCredentialAuth): unknown {
  if (auth.type === 'password') {
    const user: Record<string, unknown> = { password: auth.password.reveal() };
    if (auth.userId !== undefined) user['id'] = auth.userId;
    else {
      user['name'] = auth.username;
      user['domain'] = domainRef(auth.userDomainName, auth.userDomainId);
    }
    const project: Record<string, unknown> = {};
    if (auth.projectId !== undefined) project['id'] = auth.projectId;
    else {
      project['name'] = auth.projectName;
      project['domain'] = domainRef(auth.projectDomainName, auth.projectDomainId);
    }
    return { auth: { identity: { methods: ['password'], password: { user } }, scope: { project } } };
  }
  const cred: Record<string, unknown> = { secret: auth.applicationCredentialSecret.reveal() };
  if (auth.applicationCredentialId !== undefined) cred['id'] = auth.applicationCredentialId;
  else {
    cred['name'] = auth.applicationCredentialName;
    const user: Record<string, unknown> = {};
    if (auth.userId !== undefined) user['id'] = auth.userId;
    else {
      user['name'] = auth.username;
      user['domain'] = domainRef(auth.userDomainName, auth.userDomainId);
    }
    cred['user'] = user;
  }
  return { auth: { identity: { methods: ['application_credential'], application_credential: cred } } };
}

/** Picks Neutron's URL from a token's catalog; throws NeutronAuthError (EndpointNotFound) listing what exists. */
export function networkEndpointFromCatalog(catalog: CatalogService[] | undefined, iface: string, region: string | undefined): string {
  const services = (catalog ?? []).filter((s) => s.type === 'network');
  const all = services.flatMap((s) => s.endpoints ?? []);
  const match = all.find((e) => e.interface === iface && typeof e.url === 'string' &&
    (region === undefined || e.region_id === region || e.region === region));
  if (match?.url) return normaliseNetworkEndpoint(match.url);
  const seen = all.map((e) => `${e.interface ?? '?'}@${e.region_id ?? e.region ?? '?'}`).join(', ') || 'none';
  throw new NeutronAuthError({
    status: 0, type: 'EndpointNotFound',
    message: `no network endpoint for interface ${iface}${region ? ` in region ${region}` : ''} in the Keystone catalog (network endpoints: ${seen})`,
  });
}

/** Keystone v3 token authentication; see the module comment for the caching and re-auth contract. */
export class KeystoneAuth implements Authenticator {
  private readonly cloud: CloudConfig;
  private readonly auth: PasswordAuth | ApplicationCredentialAuth;
  private readonly clock: Clock;
  private readonly timeoutMs: number;
  private readonly refreshMarginMs: number;
  private readonly logger: Logger;
  private readonly transport: Transport | undefined;
  private readonly userAgent: string;
  private cached: CachedToken | undefined;
  private inflight: Promise<CachedToken> | undefined;
  private readonly metrics: OpenStackMetrics;
  /** Why the next token request is made: `initial` until one succeeded, then `renewal`, or `reauth` after invalidate. */
  private nextReason: TokenReason = 'initial';
  /** Number of token requests sent (for metrics/tests). */
  tokenRequests = 0;

  constructor(cloud: CloudConfig, opts: KeystoneAuthOptions = {}) {
    if (cloud.auth.type === 'none') throw new Error(`cloud ${cloud.name} has auth_type none: use StaticAuth`);
    this.cloud = cloud;
    this.auth = cloud.auth;
    this.clock = opts.clock ?? realClock;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.refreshMarginMs = opts.refreshMarginMs ?? 5 * 60_000;
    this.logger = opts.logger ?? silentLogger;
    this.transport = opts.transport;
    this.userAgent = opts.userAgent ?? 'ts-controller-manager';
    this.metrics = openStackMetrics(opts.registry);
    this.metrics.init('keystone');
  }

  async authenticate(signal?: AbortSignal): Promise<AuthResult> {
    signal?.throwIfAborted();
    const c = this.cached;
    if (c && this.clock.now() < c.refreshAt) return { endpoint: c.endpoint, token: c.token, projectId: c.projectId };
    this.inflight ??= this.fetchToken().finally(() => {
      this.inflight = undefined;
    });
    const fresh = await abortable(this.inflight, signal);
    return { endpoint: fresh.endpoint, token: fresh.token, projectId: fresh.projectId };
  }

  invalidate(token: Secret | undefined): void {
    if (token !== undefined && this.cached?.token === token) {
      this.cached = undefined;
      this.nextReason = 'reauth';
    }
  }

  /** fetchToken, counted in openstack_keystone_token_requests_total. */
  private async fetchToken(): Promise<CachedToken> {
    const reason = this.nextReason;
    try {
      const token = await this.requestToken();
      this.metrics.tokenRequest(reason, 'success');
      this.nextReason = 'renewal';
      return token;
    } catch (err) {
      this.metrics.tokenRequest(reason, err instanceof NeutronAuthError ? 'auth_failure' : 'unavailable');
      throw err;
    }
  }

  private async requestToken(): Promise<CachedToken> {
    const url = `${keystoneV3Url(this.auth.authUrl)}/auth/tokens`;
    const sentAt = this.clock.now();
    this.tokenRequests++;
    const res = await send({
      method: 'POST', url, timeoutMs: this.timeoutMs, transport: this.transport, metrics: { api: 'keystone', sink: this.metrics },
      headers: { 'content-type': 'application/json', accept: 'application/json', 'user-agent': this.userAgent },
      body: JSON.stringify(tokenRequestBody(this.auth)),
    });
    const path = new URL(url).pathname;
    if (res.status !== 201 && res.status !== 200) {
      const err = decodeError(res.status, res.text, { method: 'POST', path, requestId: res.headers.get('x-openstack-request-id') ?? undefined });
      if (isRetryable(err)) throw err;
      // Any other refusal of the token request (401, 403, and 404 — e.g. an application credential or user that was
      // deleted) is an identity problem. It must never read as Neutron's "not found", which means "resource gone".
      throw new NeutronAuthError({
        status: res.status, type: err.type, message: err.serverMessage, detail: err.detail, method: 'POST', path,
        ...(err.requestId !== undefined && { requestId: err.requestId }),
      });
    }
    const subject = res.headers.get('x-subject-token');
    if (!subject) {
      throw new NeutronAuthError({ status: res.status, type: 'NoToken', message: 'Keystone answered without an X-Subject-Token header', method: 'POST', path });
    }
    let body: TokenBody;
    try {
      body = JSON.parse(res.text) as TokenBody;
    } catch {
      throw new NeutronUnavailableError({ status: res.status, type: 'BadResponse', message: 'Keystone token response is not JSON', method: 'POST', path });
    }
    const endpoint = this.cloud.networkEndpoint !== undefined ? normaliseNetworkEndpoint(this.cloud.networkEndpoint) : networkEndpointFromCatalog(body.token?.catalog, this.cloud.interface, this.cloud.regionName);
    const expires = Date.parse(body.token?.expires_at ?? '');
    const issued = Date.parse(body.token?.issued_at ?? '');
    // Lifetime on the server's clock when issued_at is present; else against our wall clock (best effort).
    const lifetime = Number.isFinite(expires) ? expires - (Number.isFinite(issued) ? issued : Date.now()) : 60 * 60_000;
    const margin = Math.min(this.refreshMarginMs, Math.max(0, lifetime) / 2);
    const projectId = typeof body.token?.project?.id === 'string' ? body.token.project.id : undefined;
    const cached: CachedToken = { token: new Secret(subject), endpoint, projectId, refreshAt: sentAt + lifetime - margin };
    this.cached = cached;
    this.logger.debug({ cloud: this.cloud.name, endpoint, lifetimeSeconds: Math.round(lifetime / 1000) }, 'keystone token issued');
    return cached;
  }
}

/** Waits for `p`, or rejects with the signal's reason when it aborts first (p keeps running for other waiters). */
function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    p.finally(() => signal.removeEventListener('abort', onAbort)).then(resolve, reject);
  });
}

/** The Authenticator for a cloud: StaticAuth for auth_type none, else KeystoneAuth. */
export function authenticatorFor(cloud: CloudConfig, opts: KeystoneAuthOptions = {}): Authenticator {
  if (cloud.auth.type === 'none') return new StaticAuth(cloud.networkEndpoint ?? cloud.auth.endpoint);
  return new KeystoneAuth(cloud, opts);
}
