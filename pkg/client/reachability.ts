/**
 * ServerReachability: "the API server answers again", told to whoever waits for it (issue 43).
 *
 * A reflector whose LIST or WATCH got no answer (refused, reset, timed out) backs off, up to 30 s; after a
 * kube-apiserver restart that wait, not the server, kept caches blind for up to 22.9 s. Every RestClient reports each
 * response it receives (any status: the server answered) to the ServerReachability of its transport, and a reflector in
 * such a backoff subscribes and retries when told (reflectorstate.ts, `serverReachable`). The answers come from any
 * request of the process on that transport: the leader election's renew, another informer's retry — the first
 * reflector whose retry succeeds wakes the others.
 *
 * Scope: one per RequestTransport (`reachabilityOf`), i.e. per connection pool to one API server with one set of
 * credentials — every RestClient sharing a Transport shares its notifier. No process-wide state.
 *
 * Contract: `answered()` is cheap and synchronous (a set-size check when nobody waits); the listeners run on a later
 * microtask, never inside the caller's request path, at most once per burst of answers before they ran; a listener
 * that throws does not keep the others from running. Subscribers unsubscribe (the returned function) when they stop
 * waiting: nothing here holds a timer.
 */
import type { RequestTransport } from './transport.ts';
import { ApiError } from './errors.ts';

/**
 * Tells subscribers that the API server answered a request (any status): one per transport, `RestClient.reachability`.
 * Reflectors waiting in a backoff after a connection-level failure subscribe and retry within a second of the next
 * answer instead of sleeping out their backoff. Listeners run on a later microtask, once per burst of answers.
 */
export class ServerReachability {
  private readonly listeners = new Set<() => void>();
  private pending = false;

  /** Calls `listener` after each later answer of the server (batched per microtask) until the returned function is called. */
  subscribe(listener: () => void): () => void {
    const entry = (): void => listener();
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  /** The server answered a request (any HTTP status). Called by RestClient for every response. */
  answered(): void {
    if (this.listeners.size === 0 || this.pending) return;
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      for (const l of [...this.listeners]) {
        try {
          l();
        } catch {
          // A listener's failure is its own (the reflector's dispatch never throws); the others still run.
        }
      }
    });
  }
}

const byTransport = new WeakMap<RequestTransport, ServerReachability>();

/** The ServerReachability of `transport` (made on first use; lives as long as the transport). */
export function reachabilityOf(transport: RequestTransport): ServerReachability {
  let r = byTransport.get(transport);
  if (!r) byTransport.set(transport, (r = new ServerReachability()));
  return r;
}

/** System / HTTP/2 / undici error codes of a request that got no answer. */
const CONNECTION_CODE = /^(ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|ENETDOWN|EHOSTDOWN|EAI_AGAIN|ENOTFOUND|ERR_HTTP2_|UND_ERR_(SOCKET|CONNECT_TIMEOUT|HEADERS_TIMEOUT|BODY_TIMEOUT|CLOSED))/;
/** connection.ts's own errors for a stream or session that closed without an answer, or an unanswered ping. */
const CONNECTION_MESSAGE = /closed before (a complete response|it connected|its end)|ping to .* unanswered/;

/**
 * True when `err` says the request got no answer at the connection level: refused, reset, unreachable, timed out
 * (the request's own timeout, a TimeoutError), an HTTP/2 stream or session that died — on `err` or its `cause` chain.
 * False for an answer (ApiError), an abort by the caller, and everything local (a malformed body, a credential plugin).
 */
export function isConnectionFailure(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof ApiError || e.name === 'AbortError') return false;
    if (e.name === 'TimeoutError') return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECTION_CODE.test(code)) return true;
    if (CONNECTION_MESSAGE.test(e.message)) return true;
  }
  return false;
}
