/**
 * One HTTP exchange with Neutron or Keystone, with a hard deadline and typed transport failures.
 *
 * Invariants:
 *  - Every call has a timeout covering connect, headers and the whole body (`timeoutMs`, default 10 s).
 *  - A caller's abort rejects with the caller's `signal.reason` unchanged (cancellation is not a server failure);
 *    our own timeout and connection failures reject with NeutronUnavailableError (`Timeout` / `ConnectionError`).
 *  - Bodies are read completely before returning, so connections go back to the pool.
 *  - Nothing here logs headers or bodies (they carry tokens and credentials).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as Undici from 'undici';
import type { Dispatcher } from 'undici';
import type { CloudConfig } from './clouds.ts';
import { NeutronUnavailableError } from './errors.ts';

export const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * undici, loaded on first use: the manager's start path (and a manager without Neutron configuration) never pays its
 * import (~25 MiB RSS and a noticeable part of start-up).
 */
let undici: typeof Undici | undefined;
function lib(): typeof Undici {
  return (undici ??= createRequire(import.meta.url)('undici') as typeof Undici);
}

export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  dispatcher?: Dispatcher;
}

export interface HttpResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** The innermost cause's message of a fetch failure, e.g. `connect ECONNREFUSED 127.0.0.1:9696`. */
function causeMessage(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}

/** Sends the request and reads the whole body. See the module comment for the failure contract. */
export async function send(req: HttpRequest): Promise<HttpResponse> {
  const { fetch } = lib(); // loaded before the deadline starts: the first call must not spend its timeout on it
  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // One controller per request (as pkg/client/rest.ts): the caller's signal and our timer both abort it; both are
  // released when the body has been read or the request failed.
  const ac = new AbortController();
  const outer = req.signal;
  const onAbort = (): void => ac.abort(outer?.reason);
  if (outer?.aborted) ac.abort(outer.reason);
  else outer?.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort(new DOMException(`no complete response within ${timeoutMs} ms`, 'TimeoutError'));
  }, timeoutMs);
  timer.unref();
  const path = new URL(req.url).pathname;
  try {
    const res = await fetch(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: ac.signal,
      ...(req.dispatcher && { dispatcher: req.dispatcher }),
    });
    const text = await res.text();
    // undici's Headers and the global Headers are the same shape; callers only read them.
    return { status: res.status, headers: res.headers as unknown as Headers, text };
  } catch (err) {
    if (outer?.aborted && !timedOut) throw outer.reason;
    if (timedOut) {
      throw new NeutronUnavailableError({
        status: 0, type: 'Timeout', message: `no complete response within ${timeoutMs} ms`, method: req.method, path, cause: err,
      });
    }
    throw new NeutronUnavailableError({
      status: 0, type: 'ConnectionError', message: causeMessage(err), method: req.method, path, cause: err,
    });
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onAbort);
  }
}

/** An undici dispatcher honouring the cloud's `verify`/`cacert`, or undefined for the default one. */
export function dispatcherFor(cloud: CloudConfig): Dispatcher | undefined {
  if (cloud.verify && cloud.cacert === undefined) return undefined;
  return new (lib().Agent)({
    connect: {
      rejectUnauthorized: cloud.verify,
      ...(cloud.cacert !== undefined && { ca: readFileSync(cloud.cacert, 'utf8') }),
    },
  });
}
