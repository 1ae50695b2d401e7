/**
 * WebhookServer: the HTTPS endpoint the API server calls for admission (AdmissionReview admission.k8s.io/v1) and CRD
 * conversion (ConversionReview apiextensions.k8s.io/v1) — controller-runtime's webhook.Server.
 *
 * Serving:
 *  - HTTPS on `bindAddress` (default ":9443", as kubebuilder) with the certificate of `tls` (any TlsSource), else of
 *    `certDir` (default /tmp/k8s-webhook-server/serving-certs, files tls.crt/tls.key) re-read when it changes
 *    (CertDirWatcher). Runs on every replica (needLeaderElection false): the API server may call any of them.
 *  - Paths are registered by the builder (builder.ts; kubebuilder's `/mutate-…`, `/validate-…`, `/convert`), also
 *    after start. Only POST with a JSON content type is served.
 *
 * Answers (every admission and conversion verdict is HTTP 200 with a review; everything else is not a verdict, so the
 * API server applies the webhook configuration's failurePolicy):
 *   404  path not registered                   405  not POST
 *   400  not JSON content, empty or malformed body, wrong apiVersion/kind, no request or uid (body: the reason)
 *   413  body over the path's limit (`maxRequestBytesByPath`, else `maxRequestBytes`: 7 MiB):
 *        answered as soon as the Content-Length or the bytes received pass it
 *   429  (with `Retry-After: 1`, which kube-apiserver's webhook client honours by retrying within its timeout)
 *        `maxRequestsInFlight` (64) requests are already being read or handled, or this body would make the bodies
 *        held at once pass `maxInFlightBytes` (16 MiB): at once for a declared Content-Length, else when the bytes
 *        received pass it
 *   408  the body not complete within `requestTimeoutMs` (10 s) of its headers; (Node) headers not complete within
 *        `headersTimeoutMs` (10 s); a TLS handshake not done within `handshakeTimeoutMs` (10 s) is cut.
 *   500  the handler threw something other than a denial (admission.ts) — logged once with the request uid
 *   504  the handler did not finish within `handlerTimeoutMs` (default 10 s, the API server's default webhook
 *        timeout): its signal aborts with a TimeoutError, the request is answered at once and logged once with the
 *        uid; whatever the handler does later is ignored.
 *
 * Limits (the process shares its memory with the controllers; the port is open to every source):
 *  - A body is never buffered past its path's limit nor past `maxInFlightBytes` together with the others: bytes are
 *    counted as they arrive. Every refusal (413, 429, 408 above) is answered before the rest of the body is read, and
 *    the connection closed 500 ms later without reading more (lingeringClose; HTTP/2: only the stream is reset), so a
 *    refused client holds no memory here.
 *  - `maxConnections` (256) TCP connections at once; one more is closed at accept, before TLS.
 *  - So the request bodies held at any moment are at most `maxInFlightBytes`, however many clients send, and however
 *    slowly; a slow one holds its bytes `requestTimeoutMs` at most.
 *
 * Stopping: with `shutdownDelayMs` the server keeps answering that long after the signal (each answer closing its
 * connection, `ready()` failing), then closes the port and waits up to `shutdownTimeoutMs` for requests in progress.
 *
 * Metrics (metrics.ts) count every request to a registered path by its final HTTP code, and every refusal by its
 * reason (controller_runtime_webhook_refused_total; connections with webhook=""). `ready()` (the manager's
 * /readyz check "webhook-server") passes once the server listens with a certificate loaded, until it stops.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { type Logger, silentLogger } from '../log/logger.ts';
import { CertDirWatcher } from '../manager/certwatcher.ts';
import { HttpServerRunnable, type TlsSource } from '../manager/httpserver.ts';
import type { Runnable } from '../manager/runnable.ts';
import { type Clock, realClock } from '../util/clock.ts';
import {
  admissionReviewResponse, BadRequestError, parseAdmissionReview, type AdmissionHandler, type HandlerContext,
} from './admission.ts';
import {
  conversionReviewResponse, convertReview, groupKindKey, parseConversionReview, type Conversion,
} from './conversion.ts';
import { InFlightLimiter, type Ticket } from './limits.ts';
import { webhookMetricFamilies, type WebhookMetricFamilies, type WebhookRefusalReason } from './metrics.ts';
import { convertPath } from './paths.ts';

/** kubebuilder's default webhook port: all interfaces, port 9443. */
export const defaultWebhookBindAddress = ':9443';
/** controller-runtime's default CertDir. */
export const defaultWebhookCertDir = '/tmp/k8s-webhook-server/serving-certs';
/**
 * The body limit of every path (controller-runtime's admission limit, derived the same way), sized to what
 * kube-apiserver sends with its own defaults for an object it can store: it reads a request body of at most 3 MiB
 * (`--max-request-body-bytes`, k8s.io/apiserver pkg/server/config.go: twice etcd's 1.5 MiB request limit, because a
 * JSON body shrinks when stored as protobuf), and an UPDATE's AdmissionReview carries two objects — `object` and
 * `oldObject`, each at most 3 MiB as JSON — plus the envelope (userInfo, options, …), well under 1 MiB: 2 × 3 + 1 =
 * 7 MiB. A larger review is for an object etcd would refuse anyway. A ConversionReview carries one object:
 * kube-apiserver 1.36 sends one per review for gets, watches, writes and LISTs too, each item on its own
 * (test/webhook-limits.test.ts), although its converter accepts a list in one review (apiextensions-apiserver), so the
 * same limit covers it with room. Raise it (`maxRequestBytesByPath`) for an API server with raised limits or one
 * that sends a list's items in one review.
 */
export const defaultMaxRequestBytes = 7 * 1024 * 1024;
/**
 * Requests read or handled at once. kube-apiserver holds one connection per call in flight (HTTP/1.1) and calls for
 * every matching write; 64 covers bursts of writes, and one more is answered 429 + Retry-After, which its client
 * retries after a second.
 */
export const defaultMaxRequestsInFlight = 64;
/**
 * Request body bytes held at once by all requests in flight: 16 MiB, two reviews at the 7 MiB limit — a bound on what
 * clients can make this process hold, whatever their number. Handling a review of many small objects costs far more
 * than its size: in test/webhook-limits.test.ts two valid 7 MiB ConversionReviews of 29 000 Networks at once took the
 * manager from 52 to 158 MiB; with 32 MiB here (four at once) 177 to 223 MiB of its 256.
 */
export const defaultMaxInFlightBytes = 16 * 1024 * 1024;
/**
 * TCP connections open at once: kube-apiserver keeps up to 25 idle connections per webhook host (client-go's
 * transport) plus one per call in flight; 256 leaves room for three API servers. Each costs some 50 KiB of TLS state.
 */
export const defaultMaxConnections = 256;
/**
 * The body must be complete within this of its headers: kube-apiserver writes a review at once, and gives up on a
 * call after the webhook's `timeoutSeconds` (default 10 s) anyway; a body arriving slower is not from it.
 */
export const defaultRequestTimeoutMs = 10_000;

/** Options of `new WebhookServer(opts)`: address, certificate source, request limits. */
export interface WebhookServerOptions {
  /** "host:port" or ":port" (default ":9443"). "0" is not accepted here: do not create the server instead. */
  bindAddress?: string;
  /** Serving certificate source; wins over `certDir`. */
  tls?: TlsSource;
  /** Directory with `certName`/`keyName` (default tls.crt/tls.key), re-read when they change. */
  certDir?: string;
  /** The certificate's file name in `certDir` (default `tls.crt`). */
  certName?: string;
  /** The private key's file name in `certDir` (default `tls.key`). */
  keyName?: string;
  /** Largest request body accepted (bytes) on a path without its own limit; default 7 MiB (defaultMaxRequestBytes). */
  maxRequestBytes?: number;
  /** Body limits of single paths (bytes), over `maxRequestBytes`: keys are paths ("/convert", "/validate-…"). */
  maxRequestBytesByPath?: Readonly<Record<string, number>>;
  /**
   * Requests to registered paths being read or handled at once; one more is answered 429 with `Retry-After: 1` at
   * once, its body unread. Default 64 (defaultMaxRequestsInFlight).
   */
  maxRequestsInFlight?: number;
  /**
   * Request body bytes held at once by all requests in flight, counted as they arrive (a declared Content-Length at
   * once) and until each is answered; a body that would pass it is answered 429 with `Retry-After: 1`. At least every
   * body limit given (the default `maxRequestBytes` is lowered to it). Default 16 MiB (defaultMaxInFlightBytes).
   */
  maxInFlightBytes?: number;
  /** TCP connections open at once; one more is closed at accept, before TLS. Default 256 (defaultMaxConnections). */
  maxConnections?: number;
  /** Per-request handler deadline (ms); default 10 s. */
  handlerTimeoutMs?: number;
  /** Time to receive a request's headers (ms); default 10 s. */
  headersTimeoutMs?: number;
  /** Time to receive a request's body once its headers arrived (ms); past it 408. Default 10 s (defaultRequestTimeoutMs). */
  requestTimeoutMs?: number;
  /** Time to finish the TLS handshake (ms); default 10 s. */
  handshakeTimeoutMs?: number;
  /** Idle keep-alive connections are closed after this (ms); default 120 s (longer than Go clients' 90 s). */
  idleTimeoutMs?: number;
  /** How long shutdown waits for requests in progress before closing their connections (ms); default 5 s. */
  shutdownTimeoutMs?: number;
  /**
   * After the stop signal, keep answering this long (ms) before closing the port — each answer with `Connection:
   * close`, idle keep-alive connections left to carry one more call (not cut under a caller writing on one) — so that API servers whose route still names this replica (Service
   * endpoints and kube-proxy rules lag a Pod's deletion) are answered, not refused or left hanging until their
   * webhook timeout, and re-dial to another replica. `/readyz` fails meanwhile. Default 0 (none); the bundled manager
   * uses 5 s (`--webhook-shutdown-delay`).
   */
  shutdownDelayMs?: number;
  /**
   * Also speak HTTP/2 (ALPN h2, with http/1.1 still offered): a Go caller then sends its calls as streams on one
   * connection instead of a connection per call at once, and a drain or a certificate change sends a GOAWAY — the
   * caller finishes the calls in flight and re-sends later ones on a new connection, where HTTP/1.1 can only close
   * connections under it. kube-apiserver negotiates h2 only with webhooks it calls by url on loopback; through a
   * Service (or any other url) it offers only http/1.1 (docs/webhooks.md#http2). Default false (the binary:
   * `--webhook-http2`).
   */
  http2?: boolean;
  /** Where the webhook metrics (requests, latency, in flight, refusals) are registered (default the process-wide registry). */
  registry?: Registry;
  /** Where failures and certificate reloads are logged. */
  logger?: Logger;
  /** The clock of handler timeouts and certificate re-reads (default the real one; a fake in tests). */
  clock?: Clock;
}

/** Where a builder registers its handlers: a WebhookServer, or the ControllerManager (which starts its server). */
export interface WebhookRegistrar {
  /** Serves `handler` on `path` (unique). */
  register(path: string, handler: AdmissionHandler): void;
  /** Serves the conversion of `group`/`kind` on /convert (unique per group and kind). */
  registerConversion(group: string, kind: string, conversion: Conversion): void;
}

type Route = { kind: 'admission'; handler: AdmissionHandler } | { kind: 'conversion' };
/** A request over HTTP/1.1 (node:http) or HTTP/2 (node:http2's compatibility API). */
type Request = IncomingMessage | Http2ServerRequest;
type Response = ServerResponse | Http2ServerResponse;

/** RST_STREAM code NO_ERROR: "stop sending, the answer is complete" (RFC 9113 §8.1). */
const NGHTTP2_NO_ERROR = 0;

/** The body passed its path's limit (413). */
class TooLargeError extends Error {}
/** The body would pass maxInFlightBytes with the bodies already held (429). */
class OverBudgetError extends Error {}
/** The body was not complete within requestTimeoutMs (408). */
class BodyTimeoutError extends Error {}

/** res.writeHead on either protocol (the two overload sets do not unify). */
function writeHead(res: Response, code: number, headers: Record<string, string>): void {
  if ('stream' in res) res.writeHead(code, headers);
  else res.writeHead(code, headers);
}

/**
 * How long a connection answered before its body was read stays open, half-closed and not read, before it is closed:
 * Go's net/http server waits the same (rstAvoidanceDelay) for the same reason (lingeringClose).
 */
const lingerMs = 500;
const lingering = new WeakSet<Socket>();

/**
 * Closes a connection whose request body was not read to its end, after its answer, as RFC 9112 §9.6 asks: the answer
 * and a FIN, then the socket closed `lingerMs` later. Closed at once, the unread bytes would make the kernel reset the
 * connection under a client still writing its body, and the client — kube-apiserver sending a review over the limit —
 * would see a broken pipe instead of the 413 or 429 (its write fails before it reads). Nothing more is read meanwhile:
 * the request stays paused, so a client cannot make the server buffer or discard its bytes (flow control stops it).
 */
function lingeringClose(socket: Socket): void {
  if (lingering.has(socket)) return;
  lingering.add(socket);
  socket.end();
  const timer = setTimeout(() => socket.destroy(), lingerMs);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/**
 * Answers a plain-text error. When the request body has not been read to its end (answered before reading it, or
 * refused while reading it), the connection is closed once the answer is written (lingeringClose; HTTP/2: only the
 * request's stream, with RST_STREAM NO_ERROR): the rest of the body is never read — otherwise Node would read and
 * discard it, for as long as the client keeps sending.
 */
function send(res: Response, code: number, body: string, headers: Record<string, string> = {}): number {
  const unread = !res.req.complete;
  const h2 = 'stream' in res;
  if (!res.headersSent) {
    writeHead(res, code, {
      'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', ...headers, ...(unread && !h2 ? { connection: 'close' } : {}),
    });
  }
  if (unread && h2) {
    // The compatibility API's 'finish' comes only with the stream's close; end's callback is the stream's 'finish'.
    res.end(body, () => res.stream.close(NGHTTP2_NO_ERROR));
    return code;
  }
  if (unread) {
    // Node ends a `Connection: close` exchange with the socket's destroySoon() (FIN, then close at once): linger instead.
    const socket = res.req.socket;
    socket.destroySoon = (): void => lingeringClose(socket);
  }
  res.end(body);
  return code;
}

/** How readBody bounds one body: its path's limit, the ticket its bytes are reserved on, the deadline. */
interface BodyBounds {
  limit: number;
  ticket: Ticket;
  timeoutMs: number;
  clock: Clock;
}

/**
 * Reads the body, never holding more than `limit` bytes nor more than `ticket` can reserve: a declared Content-Length
 * is reserved before the first byte, other bytes as they arrive. Rejects — and stops reading (`req.pause()`) — with
 * TooLargeError past the limit, OverBudgetError when the ticket cannot reserve, BodyTimeoutError at the deadline.
 */
function readBody(req: Request, { limit, ticket, timeoutMs, clock }: BodyBounds): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (declared > limit) return Promise.reject(new TooLargeError());
  if (declared > 0 && !ticket.reserve(declared)) return Promise.reject(new OverBudgetError());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      timer.cancel();
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const fail = (err: Error): void => {
      cleanup();
      req.pause();
      reject(err);
    };
    const timer = clock.setTimer(timeoutMs, () => fail(new BodyTimeoutError()));
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) return fail(new TooLargeError());
      // Bytes past what is reserved (all of a chunked body's; none of a declared one's, whose framing Node enforces).
      if (size > ticket.bytes && !ticket.reserve(size - ticket.bytes)) return fail(new OverBudgetError());
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onAborted = (): void => onError(new Error('client aborted the request'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

/**
 * The HTTPS endpoint the API server calls for admission and conversion reviews (controller-runtime's webhook.Server).
 * A Runnable on every replica (`needLeaderElection` false); paths are registered by WebhookBuilder, also after start.
 */
export class WebhookServer implements Runnable, WebhookRegistrar {
  readonly name = 'webhook-server';
  readonly needLeaderElection = false;
  /** Resolves with the bound address once serving (certificate loaded). */
  readonly listening: Promise<AddressInfo>;
  private readonly http: HttpServerRunnable;
  private readonly routes = new Map<string, Route>();
  private readonly conversions = new Map<string, Conversion>();
  private readonly metrics: WebhookMetricFamilies;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly maxRequestBytes: number;
  private readonly maxRequestBytesByPath: ReadonlyMap<string, number>;
  private readonly limiter: InFlightLimiter;
  private readonly requestTimeoutMs: number;
  private readonly handlerTimeoutMs: number;
  private serving = false;
  private stopped = false;

  /** Binds nothing yet: start() loads the certificate, then listens. Paths may be registered before or after. */
  constructor(opts: WebhookServerOptions = {}) {
    if (opts.shutdownDelayMs !== undefined && !(Number.isFinite(opts.shutdownDelayMs) && opts.shutdownDelayMs >= 0)) {
      throw new Error(`webhook server: shutdownDelayMs must be a number ≥ 0, got ${opts.shutdownDelayMs}`);
    }
    if (opts.http2 !== undefined && typeof opts.http2 !== 'boolean') throw new Error(`webhook server: http2 must be a boolean, got ${String(opts.http2)}`);
    for (const name of ['maxRequestBytes', 'handlerTimeoutMs', 'headersTimeoutMs', 'requestTimeoutMs', 'handshakeTimeoutMs', 'idleTimeoutMs'] as const) {
      const v = opts[name];
      if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new Error(`webhook server: ${name} must be a positive number, got ${v}`);
    }
    const positiveInteger = (what: string, v: number | undefined): void => {
      if (v !== undefined && !(Number.isSafeInteger(v) && v > 0)) throw new Error(`webhook server: ${what} must be a positive integer, got ${v}`);
    };
    for (const name of ['maxRequestsInFlight', 'maxInFlightBytes', 'maxConnections'] as const) positiveInteger(name, opts[name]);
    // A body at its path's limit must fit in the bytes in flight, or it could never be accepted: the default limit is
    // lowered to maxInFlightBytes, a limit given above it is refused.
    const maxInFlightBytes = opts.maxInFlightBytes ?? defaultMaxInFlightBytes;
    const fits = (what: string, bytes: number): number => {
      if (bytes > maxInFlightBytes) throw new Error(`webhook server: maxInFlightBytes (${maxInFlightBytes}) must be at least the largest body limit (${what} ${bytes})`);
      return bytes;
    };
    const byPath = new Map<string, number>();
    for (const [path, bytes] of Object.entries(opts.maxRequestBytesByPath ?? {})) {
      if (!path.startsWith('/')) throw new Error(`webhook server: maxRequestBytesByPath: path ${JSON.stringify(path)} must start with "/"`);
      positiveInteger(`maxRequestBytesByPath[${JSON.stringify(path)}]`, bytes);
      byPath.set(path, fits(path, bytes));
    }
    this.log = (opts.logger ?? silentLogger).child({ component: 'webhook-server' });
    this.clock = opts.clock ?? realClock;
    this.maxRequestBytes = opts.maxRequestBytes === undefined ? Math.min(defaultMaxRequestBytes, maxInFlightBytes) : fits('maxRequestBytes', opts.maxRequestBytes);
    this.maxRequestBytesByPath = byPath;
    this.limiter = new InFlightLimiter(opts.maxRequestsInFlight ?? defaultMaxRequestsInFlight, maxInFlightBytes);
    this.requestTimeoutMs = opts.requestTimeoutMs ?? defaultRequestTimeoutMs;
    this.handlerTimeoutMs = opts.handlerTimeoutMs ?? 10_000;
    this.metrics = webhookMetricFamilies(opts.registry);
    const tls = opts.tls ?? new CertDirWatcher({
      dir: opts.certDir ?? defaultWebhookCertDir, logger: opts.logger,
      ...(opts.certName ? { certFile: opts.certName } : {}), ...(opts.keyName ? { keyFile: opts.keyName } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
    });
    const headersTimeout = opts.headersTimeoutMs ?? 10_000;
    // Node's own request timeout only backs up the body deadline (requestTimeoutMs, counted from the headers: answered
    // here, with the metrics) for requests this server does not read; it counts from the request's first byte.
    const requestTimeout = headersTimeout + this.requestTimeoutMs + 1_000;
    this.http = new HttpServerRunnable({
      name: 'webhook-server',
      bindAddress: opts.bindAddress ?? defaultWebhookBindAddress,
      handler: (req, res) => this.dispatch(req, res),
      ...(opts.http2 ? { http2Handler: (req: Http2ServerRequest, res: Http2ServerResponse) => this.dispatch(req, res) } : {}),
      tls,
      limits: {
        headersTimeout, requestTimeout,
        // Node checks the two timeouts above on this interval (default 30 s): a quarter of the shorter one.
        connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(Math.min(headersTimeout, requestTimeout) / 4))),
        keepAliveTimeout: opts.idleTimeoutMs ?? 120_000,
        handshakeTimeout: opts.handshakeTimeoutMs ?? 10_000,
        maxConnections: opts.maxConnections ?? defaultMaxConnections,
      },
      onConnectionDropped: () => this.metrics.refused.inc({ webhook: '', reason: 'max_connections' }),
      logger: opts.logger,
      ...(opts.shutdownTimeoutMs !== undefined ? { shutdownTimeoutMs: opts.shutdownTimeoutMs } : {}),
      ...(opts.shutdownDelayMs ? { drainDelayMs: opts.shutdownDelayMs } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
    });
    this.listening = this.http.listening;
  }

  register(path: string, handler: AdmissionHandler): void {
    if (!path.startsWith('/')) throw new Error(`webhook path ${JSON.stringify(path)} must start with "/"`);
    if (this.routes.has(path)) throw new Error(`webhook path ${path} is already registered`);
    this.routes.set(path, { kind: 'admission', handler });
    this.log.info({ path }, 'registered webhook');
  }

  registerConversion(group: string, kind: string, conversion: Conversion): void {
    const key = groupKindKey(group, kind);
    if (this.conversions.has(key)) throw new Error(`conversion of ${kind} in group ${JSON.stringify(group)} is already registered`);
    if (Object.hasOwn(conversion.spokes, conversion.hub)) throw new Error(`${kind}: the hub ${conversion.hub} cannot also be a spoke`);
    this.conversions.set(key, conversion);
    if (!this.routes.has(convertPath)) this.routes.set(convertPath, { kind: 'conversion' });
    this.log.info({ path: convertPath, group, kind, hub: conversion.hub, spokes: Object.keys(conversion.spokes) }, 'registered conversion');
  }

  /** Whether this server converts `kind` of `group` (a conversion registered on /convert). */
  servesConversion(group: string, kind: string): boolean {
    return this.conversions.has(groupKindKey(group, kind));
  }

  /** The registered paths, sorted. */
  paths(): string[] {
    return [...this.routes.keys()].sort();
  }

  /**
   * What the limits count now: requests to registered paths being read or handled, the body bytes they hold, and the
   * open TCP connections.
   */
  inFlight(): { requests: number; bytes: number; connections: number } {
    return { requests: this.limiter.requests, bytes: this.limiter.bytes, connections: this.http.openConnections };
  }

  /** Throws unless the server listens with a certificate loaded (a health Checker). */
  ready(): void {
    if (!this.serving || this.stopped) throw new Error('webhook server is not serving (certificate not loaded or port not bound yet, or stopped)');
    if (this.http.draining) throw new Error('webhook server is draining before it stops (shutdownDelayMs)');
  }

  /** Serves until `signal` aborts, then shuts down gracefully (see shutdownTimeoutMs); rejects if it cannot serve. */
  async start(signal: AbortSignal): Promise<void> {
    void this.listening.then(() => {
      this.serving = true;
    }, () => {});
    try {
      await this.http.start(signal);
    } finally {
      this.stopped = true;
    }
  }

  private dispatch(req: Request, res: Response): void {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = this.routes.get(path);
    if (!route) {
      send(res, 404, `no webhook at ${path}\n`);
      return;
    }
    const t0 = performance.now();
    this.metrics.inFlight.inc({ webhook: path });
    void this.handle(req, res, path, route)
      .catch((err: unknown): number => {
        // Only reachable through a bug here: every handler failure is answered inside handle().
        this.log.error({ err, webhook: path }, 'webhook request failed');
        try {
          return send(res, 500, 'internal error\n');
        } catch {
          res.destroy();
          return 500;
        }
      })
      .then((code) => {
        this.metrics.inFlight.dec({ webhook: path });
        this.metrics.requestsTotal.inc({ webhook: path, code: String(code) });
        this.metrics.latency.observe({ webhook: path }, (performance.now() - t0) / 1000);
      });
  }

  /** Serves one request to a registered path; resolves with the HTTP status code sent. */
  private async handle(req: Request, res: Response, path: string, route: Route): Promise<number> {
    if (req.method !== 'POST') return send(res, 405, `method ${req.method ?? ''} not allowed; use POST\n`, { allow: 'POST' });
    const contentType = req.headers['content-type'] ?? '';
    if (!/^application\/json\s*(;|$)/i.test(contentType)) {
      return send(res, 400, `contentType=${contentType}, expected application/json\n`);
    }
    const limit = this.maxRequestBytesByPath.get(path) ?? this.maxRequestBytes;
    const tooLarge = (): number => this.refuse(res, path, 'body_too_large', 413, `request body larger than ${limit} bytes\n`);
    if (Number(req.headers['content-length']) > limit) return tooLarge();
    const ticket = this.limiter.acquire();
    if (!ticket) {
      return this.refuse(res, path, 'max_requests_in_flight', 429,
        `${this.limiter.maxRequests} requests in flight (maxRequestsInFlight); retry later\n`, { 'retry-after': '1' });
    }
    try {
      return await this.serve(req, res, path, route, { limit, ticket, timeoutMs: this.requestTimeoutMs, clock: this.clock }, tooLarge);
    } finally {
      ticket.release();
    }
  }

  /**
   * Answers a request refused by a limit, counting it by `reason`. send() closes the connection (HTTP/2: resets the
   * stream) when the body was not read to its end: the rest is never read, nor buffered.
   */
  private refuse(res: Response, path: string, reason: WebhookRefusalReason, code: number, body: string, headers: Record<string, string> = {}): number {
    this.metrics.refused.inc({ webhook: path, reason });
    this.log.debug({ webhook: path, reason, code }, 'webhook request refused by a limit');
    return send(res, code, body, headers);
  }

  /** Reads the body within `bounds` and answers the review; resolves with the HTTP status code sent. */
  private async serve(req: Request, res: Response, path: string, route: Route, bounds: BodyBounds, tooLarge: () => number): Promise<number> {
    let body: Buffer;
    try {
      body = await readBody(req, bounds);
    } catch (err) {
      if (err instanceof TooLargeError) return tooLarge();
      if (err instanceof OverBudgetError) {
        return this.refuse(res, path, 'max_in_flight_bytes', 429,
          `request bodies in flight would pass ${this.limiter.maxBytes} bytes (maxInFlightBytes); retry later\n`, { 'retry-after': '1' });
      }
      if (err instanceof BodyTimeoutError) return this.refuse(res, path, 'request_timeout', 408, `request body not complete within ${bounds.timeoutMs} ms\n`);
      this.log.debug({ err, webhook: path }, 'reading the request body failed');
      return send(res, 400, `reading the request body failed: ${(err as Error).message}\n`);
    }
    if (body.length === 0) return send(res, 400, 'request body is empty\n');
    let review: unknown;
    try {
      review = JSON.parse(body.toString('utf8'));
    } catch (err) {
      return send(res, 400, `malformed JSON: ${(err as Error).message}\n`);
    }
    try {
      if (route.kind === 'admission') {
        const request = parseAdmissionReview(review);
        const result = await this.run(path, request.uid, res, (ctx) => route.handler(request, ctx), {
          kind: request.kind?.kind, namespace: request.namespace, name: request.name, operation: request.operation,
        });
        if (typeof result === 'number') return result;
        return this.json(res, admissionReviewResponse({ ...result, uid: request.uid }));
      }
      const request = parseConversionReview(review);
      const result = await this.run(path, request.uid, res, (ctx) => convertReview(request, this.conversions, ctx), {
        desiredAPIVersion: request.desiredAPIVersion, objects: request.objects.length,
      });
      if (typeof result === 'number') return result;
      return this.json(res, conversionReviewResponse(result));
    } catch (err) {
      if (err instanceof BadRequestError) return send(res, 400, `${err.message}\n`);
      throw err;
    }
  }

  private json(res: Response, body: unknown): number {
    writeHead(res, 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
    return 200;
  }

  /**
   * Runs a handler under the timeout and the client's connection. Resolves with its result, or with the HTTP code
   * already sent: 500 when it threw (BadRequestError is rethrown for a 400), 504 on timeout, 499 (not sent) when
   * the client went away first. Logs a failure exactly once, with the uid.
   */
  private async run<R>(path: string, uid: string, res: Response, fn: (ctx: HandlerContext) => Promise<R>,
    fields: Record<string, unknown>): Promise<R | number> {
    const logger = this.log.child({ webhook: path, uid });
    const ac = new AbortController();
    const ms = this.handlerTimeoutMs;
    const timer = this.clock.setTimer(ms, () => {
      ac.abort(new DOMException(`webhook handler timed out after ${ms} ms`, 'TimeoutError'));
    });
    const onClose = (): void => {
      if (!res.writableEnded) ac.abort(new Error('client closed the connection'));
    };
    res.on('close', onClose);
    const aborted = new Promise<{ aborted: unknown }>((resolve) => {
      ac.signal.addEventListener('abort', () => resolve({ aborted: ac.signal.reason }), { once: true });
    });
    const work = Promise.resolve().then(() => fn({ signal: ac.signal, logger })).then((value) => ({ value }), (error: unknown) => ({ error }));
    try {
      const outcome = await Promise.race([work, aborted]);
      if ('value' in outcome) return outcome.value;
      if ('error' in outcome) {
        if (outcome.error instanceof BadRequestError) throw outcome.error;
        logger.error({ err: outcome.error, ...fields }, 'webhook handler failed; answering 500 (the failurePolicy decides)');
        return send(res, 500, `webhook handler failed (request uid ${uid}); see the webhook server's log\n`);
      }
      const reason = outcome.aborted;
      if (reason instanceof DOMException && reason.name === 'TimeoutError') {
        logger.error({ timeoutMs: ms, ...fields }, 'webhook handler timed out; answering 504 (the failurePolicy decides)');
        return send(res, 504, `webhook handler timed out after ${ms} ms (request uid ${uid})\n`);
      }
      logger.info({ ...fields }, 'client closed the connection before the webhook answered');
      return 499;
    } finally {
      timer.cancel();
      res.off('close', onClose);
    }
  }
}
