/**
 * Typed errors of the Neutron/Keystone client.
 *
 * Every failure of a client call is one of these (except a caller's own abort, which rejects with the caller's
 * AbortSignal reason unchanged):
 *
 *  | class                          | when                                                        | retryable |
 *  |--------------------------------|-------------------------------------------------------------|-----------|
 *  | NeutronBadRequestError         | 400 (InvalidInput, HTTPBadRequest, overlapping subnet, …)   | no        |
 *  | NeutronAuthError               | 401 from Neutron; any 4xx from Keystone's token request     | no        |
 *  |                                | (incl. 404: never "not found"), or no usable catalog entry  |           |
 *  | NeutronForbiddenError          | 403 from Neutron: the policy forbids the call (message kept)| no        |
 *  | NeutronNotFoundError           | 404 (NetworkNotFound, SubnetNotFound, …)                    | no        |
 *  | NeutronConflictError           | 409 (NetworkInUse, GatewayConflictWithAllocationPools, …)   | no        |
 *  | NeutronUnavailableError        | 5xx, 429, network errors, per-request timeouts              | yes       |
 *  |                                | (`retryAfterMs` from a Retry-After header on 429/503)       |           |
 *  | NeutronError (base)            | any other status (e.g. 412 stale If-Match revision)         | no        |
 *
 * `type` is Neutron's error type (e.g. `InvalidInput`, `NetworkNotFound`), or `HTTP<status>` when the body was not a
 * Neutron error, or `Timeout`/`ConnectionError` for transport failures. Messages never contain credentials or tokens.
 *
 * A retryable failure of a non-idempotent call (POST) may still have taken effect on the server (e.g. the response
 * was lost): callers must look up what they meant to create before creating it again.
 */

export interface NeutronErrorInit {
  status: number;
  type: string;
  message: string;
  detail?: string;
  method?: string;
  path?: string;
  requestId?: string;
  cause?: unknown;
  /** From a Retry-After header (429/503), in ms. */
  retryAfterMs?: number;
}

export class NeutronError extends Error {
  /** HTTP status, or 0 when no response arrived. */
  readonly status: number;
  /** Neutron's error type, e.g. `NetworkNotFound`; `HTTP<status>`, `Timeout` or `ConnectionError` otherwise. */
  readonly type: string;
  /** The server's message alone (without method, path, status and type). */
  readonly serverMessage: string;
  /** Neutron's `detail` (often empty). */
  readonly detail: string;
  readonly method: string | undefined;
  /** Request path without query string. */
  readonly path: string | undefined;
  /** `X-Openstack-Request-Id` of the response, for correlating with server logs. */
  readonly requestId: string | undefined;

  constructor(init: NeutronErrorInit) {
    const where = init.method && init.path ? `${init.method} ${init.path}: ` : '';
    const status = init.status > 0 ? `HTTP ${init.status} ` : '';
    super(`${where}${status}${init.type}: ${init.message}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'NeutronError';
    this.status = init.status;
    this.type = init.type;
    this.serverMessage = init.message;
    this.detail = init.detail ?? '';
    this.method = init.method;
    this.path = init.path;
    this.requestId = init.requestId;
  }

}

/** 400: the request was invalid (bad CIDR, read-only attribute, overlapping subnet, malformed body, …). */
export class NeutronBadRequestError extends NeutronError {
  constructor(init: NeutronErrorInit) {
    super(init);
    this.name = 'NeutronBadRequestError';
  }
}

/**
 * 401 from Neutron, any 4xx of Keystone's token request (a 404 there — e.g. a deleted application credential — is an
 * identity problem, never "the resource is gone"), or authentication could not produce a usable token/endpoint.
 */
export class NeutronAuthError extends NeutronError {
  constructor(init: NeutronErrorInit) {
    super(init);
    this.name = 'NeutronAuthError';
  }
}

/** 403 from Neutron: authenticated, but the policy does not allow this call; `serverMessage` says which rule. */
export class NeutronForbiddenError extends NeutronError {
  constructor(init: NeutronErrorInit) {
    super(init);
    this.name = 'NeutronForbiddenError';
  }
}

/** 404 from a Neutron resource path: the resource does not exist (also for malformed ids). */
export class NeutronNotFoundError extends NeutronError {
  constructor(init: NeutronErrorInit) {
    super(init);
    this.name = 'NeutronNotFoundError';
  }
}

/** 409: the request conflicts with the current state; `type` says which (e.g. `NetworkInUse`). */
export class NeutronConflictError extends NeutronError {
  constructor(init: NeutronErrorInit) {
    super(init);
    this.name = 'NeutronConflictError';
  }
}

/** The server could not answer now: 5xx, 429, connection failure or timeout. Retry with backoff. */
export class NeutronUnavailableError extends NeutronError {
  /** The server's Retry-After (429/503), in ms; undefined when it sent none. */
  readonly retryAfterMs: number | undefined;

  constructor(init: NeutronErrorInit) {
    super(init);
    this.name = 'NeutronUnavailableError';
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** Parses a Retry-After header (delta-seconds or HTTP-date) into ms from `nowMs`; undefined when absent/invalid. */
export function parseRetryAfter(value: string | null | undefined, nowMs = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}

/** True for failures worth retrying with backoff (NeutronUnavailableError); false for everything else. */
export function isRetryable(err: unknown): boolean {
  return err instanceof NeutronUnavailableError;
}

export function isNotFound(err: unknown): err is NeutronNotFoundError {
  return err instanceof NeutronNotFoundError;
}

/** Builds the typed error for an HTTP status. */
export function errorForStatus(init: NeutronErrorInit): NeutronError {
  const s = init.status;
  if (s === 400) return new NeutronBadRequestError(init);
  if (s === 401) return new NeutronAuthError(init);
  if (s === 403) return new NeutronForbiddenError(init);
  if (s === 404) return new NeutronNotFoundError(init);
  if (s === 409) return new NeutronConflictError(init);
  if (s === 429 || s >= 500 || s === 0) return new NeutronUnavailableError(init);
  return new NeutronError(init);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/**
 * Decodes an error response body into a typed error. Understands Neutron's `{"NeutronError":{type,message,detail}}`
 * (and its old string form), Keystone's `{"error":{code,title,message}}`, and falls back to the first 200 characters
 * of any other body (HTML from WSGI middleware, proxies).
 */
export function decodeError(status: number, body: string, ctx: { method?: string; path?: string; requestId?: string; retryAfterMs?: number } = {}): NeutronError {
  let type = `HTTP${status}`;
  let message = '';
  let detail = '';
  let parsed: unknown;
  try {
    parsed = body ? (JSON.parse(body) as unknown) : undefined;
  } catch {
    parsed = undefined;
  }
  if (parsed && typeof parsed === 'object') {
    const ne = (parsed as Record<string, unknown>)['NeutronError'];
    const ke = (parsed as Record<string, unknown>)['error'];
    if (ne && typeof ne === 'object') {
      const o = ne as Record<string, unknown>;
      type = str(o['type']) || type;
      message = str(o['message']) ?? '';
      detail = str(o['detail']) ?? '';
    } else if (typeof ne === 'string') {
      message = ne;
    } else if (ke && typeof ke === 'object') {
      const o = ke as Record<string, unknown>;
      type = str(o['title'])?.replace(/\s+/g, '') || type;
      message = str(o['message']) ?? '';
    } else if (typeof ke === 'string') {
      message = ke;
    }
  }
  if (!message) {
    // Not a structured error: keep a short, whitespace-collapsed excerpt (e.g. webob's HTML 401 page).
    message = body.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 200) || '(empty body)';
  }
  return errorForStatus({ status, type, message, detail, ...ctx });
}
