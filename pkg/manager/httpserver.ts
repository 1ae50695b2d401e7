/**
 * HttpServerRunnable: an HTTP(S) server as a Runnable (health probes, metrics).
 *
 * Contract: `start` rejects if the address cannot be bound (e.g. EADDRINUSE), which the Manager treats as fatal.
 * After the signal aborts, the server first DRAINS for `drainDelayMs` (default 0: no drain) — it keeps listening and
 * answering, and every answer carries `Connection: close`, so callers re-dial and reach another replica as soon as
 * their routing (Service endpoints, kube-proxy) has caught up. Idle keep-alive connections are NOT cut at the drain's
 * start: a caller may be writing its next request on one at that instant (a reset or broken pipe it cannot retry, as
 * Go does not retry a POST on a reused connection); each is closed by its caller after its next answer, or at the
 * end of the drain if it stays idle that long; past the
 * delay it waits for 1 s without a new connection (at most until twice the delay) — then it stops accepting connections, idle keep-alive connections are closed at once, and connections still busy after
 * `shutdownTimeoutMs` are destroyed; `start` then resolves. `listening` resolves
 * with the bound address once the server accepts connections (useful with port 0).
 *
 * With `http2Handler` (TLS only) the server offers h2 and http/1.1 by ALPN (node:http2's createSecureServer, allowHTTP1):
 * HTTP/1.1 clients are served as before; an HTTP/2 session is told to go elsewhere with a GOAWAY where an HTTP/1.1
 * answer would carry `Connection: close` — every open session at the start of a drain and at a certificate change,
 * and a session that sends a request during the drain. GOAWAY names the last stream the server took, so requests in
 * flight complete and the client re-sends the later ones on a new connection (Go's transport retries them).
 */
import type { RequestListener, Server } from 'node:http';
import type * as Http2 from 'node:http2';
import type { Http2SecureServer, Http2ServerRequest, Http2ServerResponse, ServerHttp2Session } from 'node:http2';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { type Logger, silentLogger } from '../log/logger.ts';
import { type Clock, realClock } from '../util/clock.ts';
import type { Runnable } from './runnable.ts';

// Not `import { … } from 'node:http'`: an ESM import of node:http reads every export into the module namespace, which
// runs node:http's lazy WebSocket/CloseEvent/MessageEvent getters and loads Node's bundled undici — 80–150 ms and
// ~11 MiB RSS at every start (bench/README.md, "Fixed cost"). process.getBuiltinModule returns the same module object.
const { createServer: createHttpServer } = process.getBuiltinModule('node:http');
// node:http2 only when a server speaks it (the same lazy load: most processes never do).
const http2 = (): typeof Http2 => process.getBuiltinModule('node:http2');

/** The handler of HTTP/2 requests (node:http2's compatibility API: the same shape as `handler`'s req and res). */
export type Http2RequestListener = (req: Http2ServerRequest, res: Http2ServerResponse) => void;

/**
 * Closes idle HTTP/1.1 keep-alive connections. An Http2SecureServer with allowHTTP1 has the method too (it tracks its
 * HTTP/1.1 connections as node:http does), which @types/node does not declare.
 */
function closeIdleConnections(server: Server | Http2SecureServer): void {
  (server as Pick<Server, 'closeIdleConnections'>).closeIdleConnections();
}

/** During a drain, the port closes only after this long (ms) without a new connection (or at twice the delay). */
const drainQuietMs = 1_000;

export interface BindAddress {
  /** undefined = all interfaces. */
  host: string | undefined;
  port: number;
}

/** Parses "host:port", ":port", "[v6]:port"; returns undefined for "0" (disabled). Throws on anything else. */
export function parseBindAddress(text: string): BindAddress | undefined {
  if (text === '0') return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]*)):(\d{1,5})$/.exec(text);
  const port = Number(m?.[3]);
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new Error(`invalid address ${JSON.stringify(text)} (want "host:port", ":port" or "0" to disable)`);
  }
  const host = m[1] ?? m[2];
  return { host: host === '' ? undefined : host, port };
}

/** A PEM certificate (chain) and its private key. */
export interface TlsPair {
  /** The certificate chain (PEM). */
  cert: Buffer;
  /** Its private key (PEM). */
  key: Buffer;
}

/** Where a TLS server's certificate comes from (certwatcher.ts: a watched directory, or a generated one). */
export interface TlsSource {
  /**
   * Resolves with the first pair (rejects when there is none: the server does not start), then calls `onUpdate`
   * with every later one until `signal` aborts.
   */
  start(signal: AbortSignal, onUpdate: (pair: TlsPair) => void): Promise<TlsPair>;
}

export interface HttpServerOptions {
  name: string;
  /** A bind address other than "0". */
  bindAddress: string;
  handler: RequestListener;
  /**
   * Serve HTTP/2 too (requires `tls`): ALPN offers h2 and http/1.1; HTTP/2 requests go to this handler, HTTP/1.1
   * requests to `handler`. Absent: HTTP/1.1 only.
   */
  http2Handler?: Http2RequestListener;
  /**
   * HTTPS with this certificate source (started with the server; may be slow: certificate generation). A new pair is
   * installed with setSecureContext: the next handshake presents it, open connections keep theirs. Plain HTTP when
   * absent.
   */
  tls?: TlsSource;
  shutdownTimeoutMs?: number;
  /**
   * After the signal aborts, keep serving this long (ms) before closing the listener: a replica being replaced must
   * not refuse or silently drop calls routed to it by endpoints that still name it (the webhook server). Past it, the
   * listener closes once no connection came for 1 s (at most 2 × drainDelayMs after the signal). Default 0.
   */
  drainDelayMs?: number;
  /** Timer source of the drain (tests); default the real clock. */
  clock?: Clock;
  /**
   * Connection limits for servers that face untrusted clients (the webhook server): passed to createServer as is.
   * Node's defaults apply to what is absent (headersTimeout 60 s, requestTimeout 300 s, TLS handshake 120 s).
   */
  limits?: ServerLimits;
  /** Called for each connection closed at accept because `limits.maxConnections` were open (net.Server's 'drop'). */
  onConnectionDropped?: () => void;
  logger?: Logger;
}

/** Node server options bounding how long one client can hold a connection (all in ms). */
export interface ServerLimits {
  /** Time to receive the complete request headers; past it Node answers 408 and closes. */
  headersTimeout?: number;
  /** Time to receive the complete request (headers and body); past it Node answers 408 and closes. */
  requestTimeout?: number;
  /** How often Node checks the two timeouts above (its default is 30 s, so set it with them). */
  connectionsCheckingInterval?: number;
  /** Idle time of a keep-alive connection between requests. */
  keepAliveTimeout?: number;
  /** HTTPS only: time to complete the TLS handshake after the TCP connection. */
  handshakeTimeout?: number;
  /**
   * Most TCP connections open at once (net.Server's maxConnections): one more is closed as soon as it is accepted —
   * before TLS or HTTP, so it costs nothing — and reported to `onConnectionDropped`. Absent: no limit.
   */
  maxConnections?: number;
  /**
   * HTTP/2 only: most requests at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS; default 250, Go's
   * server's). HTTP/2 requests get `requestTimeout` (an answer 408 and the stream reset) and `keepAliveTimeout` (an
   * idle session is closed); `headersTimeout` does not apply (a request's headers arrive as one frame sequence).
   */
  maxConcurrentStreams?: number;
}

export class HttpServerRunnable implements Runnable {
  readonly name: string;
  readonly needLeaderElection = false;
  /** Resolves with the bound address once listening. */
  readonly listening: Promise<AddressInfo>;
  private resolveListening!: (a: AddressInfo) => void;
  private rejectListening!: (err: Error) => void;
  private readonly opts: HttpServerOptions;
  private readonly address: BindAddress;
  private readonly log: Logger;
  /** The underlying server once started. */
  server: Server | Http2SecureServer | undefined;
  /** True from the signal's abort until the listener closes (the drain; see drainDelayMs). */
  draining = false;

  /** TCP connections open now (accepted and not yet closed; those closed at accept by maxConnections never count). */
  get openConnections(): number {
    return this.sockets.size;
  }
  /** When the last TCP connection was accepted (the drain's clock); -Infinity before any. */
  private lastConnectionAt = Number.NEGATIVE_INFINITY;
  /** Open TCP connections (destroyed past shutdownTimeoutMs). */
  private readonly sockets = new Set<Socket>();
  /** Open HTTP/2 sessions (http2Handler): sent GOAWAY at a drain's start and at a certificate change. */
  private readonly sessions = new Set<ServerHttp2Session>();

  constructor(opts: HttpServerOptions) {
    const address = parseBindAddress(opts.bindAddress);
    if (!address) throw new Error(`${opts.name}: bind address "0" means disabled; do not create the server`);
    if (opts.http2Handler && !opts.tls) throw new Error(`${opts.name}: http2Handler needs tls (HTTP/2 is negotiated by ALPN)`);
    this.opts = opts;
    this.address = address;
    this.name = opts.name;
    this.log = (opts.logger ?? silentLogger).child({ component: opts.name });
    this.listening = new Promise((resolve, reject) => {
      this.resolveListening = resolve;
      this.rejectListening = reject;
    });
    // `listening` may legitimately never be awaited; do not turn a bind failure into an unhandled rejection.
    this.listening.catch(() => {});
  }

  async start(signal: AbortSignal): Promise<void> {
    let server: Server | Http2SecureServer;
    // Stops the certificate source with the server, also when listening fails.
    const tlsStop = new AbortController();
    const stopTls = (): void => tlsStop.abort();
    signal.addEventListener('abort', stopTls, { once: true });
    try {
      if (signal.aborted) throw new Error(`${this.name}: aborted before start`);
      if (this.opts.tls) {
        // Keep-alive clients (Prometheus scrapes every few seconds on one connection) would never see a new
        // certificate: a request on a connection made before the last change is answered with `Connection: close`,
        // so the client's next request handshakes again — without cutting a connection a request may be racing on.
        // (HTTP/2 sessions get a GOAWAY at the change itself: requests in flight complete, later ones re-dial.)
        const state: { https?: HttpsServer | Http2SecureServer; latest?: TlsPair; generation: number } = { generation: 0 };
        const connectedAt = new WeakMap<object, number>();
        const first = await this.opts.tls.start(tlsStop.signal, (pair) => {
          state.latest = pair;
          if (!state.https) return;
          state.https.setSecureContext({ cert: pair.cert, key: pair.key });
          state.generation++;
          for (const session of this.sessions) session.close();
          this.log.info('TLS certificate updated');
        });
        const { cert, key } = state.latest ?? first;
        const handler = this.opts.handler;
        const h1 = (req: Parameters<RequestListener>[0], res: Parameters<RequestListener>[1]): void => {
          if (this.draining || (connectedAt.get(req.socket) ?? state.generation) < state.generation) res.setHeader('connection', 'close');
          handler(req, res);
        };
        const h2Handler = this.opts.http2Handler;
        if (h2Handler) {
          state.https = this.createHttp2Server(cert, key, h1, h2Handler);
        } else {
          const { maxConcurrentStreams: _h2Only, maxConnections: _netServer, ...limits } = this.opts.limits ?? {};
          state.https = createHttpsServer({ ...limits, cert, key }, h1);
        }
        state.https.on('secureConnection', (socket: Socket) => connectedAt.set(socket, state.generation));
        server = state.https;
      } else {
        const { handshakeTimeout: _tlsOnly, maxConcurrentStreams: _h2Only, maxConnections: _netServer, ...limits } = this.opts.limits ?? {};
        const handler = this.opts.handler;
        server = createHttpServer(limits, (req, res) => {
          if (this.draining) res.setHeader('connection', 'close');
          handler(req, res);
        });
      }
      this.server = server;
      const maxConnections = this.opts.limits?.maxConnections;
      if (maxConnections !== undefined) {
        server.maxConnections = maxConnections;
        server.on('drop', () => this.opts.onConnectionDropped?.());
      }
      const drainClock = this.opts.clock ?? realClock;
      server.on('connection', (socket: Socket) => {
        this.lastConnectionAt = drainClock.now();
        this.sockets.add(socket);
        socket.once('close', () => this.sockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ port: this.address.port, host: this.address.host }, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      stopTls();
      signal.removeEventListener('abort', stopTls);
      this.rejectListening(err as Error);
      throw err;
    }
    const addr = server.address() as AddressInfo;
    this.log.info({ address: addr.address, port: addr.port, tls: Boolean(this.opts.tls) }, 'serving');
    this.resolveListening(addr);
    server.on('error', (err) => this.log.error({ err }, 'server error'));

    await new Promise<void>((resolve) => {
      const close = (): void => {
        // (An HTTP/2 server's close() also sends every session a GOAWAY; it stops once their streams are done.)
        const closed = new Promise<void>((r) => server.close(() => r()));
        closeIdleConnections(server);
        // realClock: unref'd, and safe for any shutdownTimeoutMs (plain setTimeout overflows above 2^31-1 ms).
        const timer = realClock.setTimer(this.opts.shutdownTimeoutMs ?? 5_000, () => {
          for (const session of this.sessions) session.destroy();
          for (const socket of this.sockets) socket.destroy();
        });
        void closed.then(() => {
          timer.cancel();
          this.draining = false;
          this.log.info('stopped');
          resolve();
        });
      };
      const stop = (): void => {
        const drainMs = this.opts.drainDelayMs ?? 0;
        if (drainMs <= 0) return close();
        this.draining = true;
        for (const session of this.sessions) session.close();
        this.log.info({ drainMs }, 'draining: still serving, each answer closes its connection, then stopping');
        // Closing the port while callers still connect would reset a connection accepted a moment before (TLS done,
        // request not yet read: "idle" to Node, closed by close()). So after drainMs, wait for a quiet second with no
        // new connection — no longer than drainMs more, which keeps the drain inside the caller's shutdown budget.
        const clock = this.opts.clock ?? realClock;
        const hardStopAt = clock.now() + 2 * drainMs;
        const quietMs = Math.min(drainQuietMs, drainMs);
        const check = (): void => {
          const now = clock.now();
          const quietFor = now - this.lastConnectionAt;
          if (quietFor >= quietMs || now >= hardStopAt) return close();
          clock.setTimer(Math.min(quietMs - quietFor, hardStopAt - now), check);
        };
        clock.setTimer(drainMs, check);
      };
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
    });
  }

  /**
   * The TLS server of `http2Handler`: h2 and http/1.1 by ALPN. HTTP/1.1 connections get Node's HTTP/1 limits as the
   * HTTPS server does; HTTP/2 streams get `requestTimeout` here (408, then the stream is reset) and sessions
   * `keepAliveTimeout` (an idle one is closed); during a drain a session that sends a request is sent a GOAWAY after it.
   */
  private createHttp2Server(cert: Buffer, key: Buffer, h1: RequestListener, h2: Http2RequestListener): Http2SecureServer {
    const { maxConcurrentStreams, keepAliveTimeout, requestTimeout, maxConnections: _netServer, ...limits } = this.opts.limits ?? {};
    const { createSecureServer, constants } = http2();
    const server = createSecureServer({
      ...limits, ...(keepAliveTimeout !== undefined ? { keepAliveTimeout } : {}), ...(requestTimeout !== undefined ? { requestTimeout } : {}),
      cert, key, allowHTTP1: true, settings: { maxConcurrentStreams: maxConcurrentStreams ?? 250 },
    }, (req: Http2ServerRequest | Parameters<RequestListener>[0], res: Http2ServerResponse | Parameters<RequestListener>[1]) => {
      if (!('stream' in req)) return h1(req, res as Parameters<RequestListener>[1]);
      const h2res = res as Http2ServerResponse;
      const session = req.stream.session;
      // Like `Connection: close` on HTTP/1.1: this request is served, the client's next one goes to a new connection.
      if (this.draining && session && !session.closed) session.close();
      if (requestTimeout) {
        const timer = setTimeout(() => {
          if (req.complete) return;
          if (!h2res.headersSent) {
            h2res.writeHead(408, { 'content-type': 'text/plain; charset=utf-8' });
            h2res.end('request not complete in time\n', () => req.stream.close(constants.NGHTTP2_CANCEL));
          } else {
            req.stream.close(constants.NGHTTP2_CANCEL);
          }
        }, requestTimeout);
        timer.unref();
        const clear = (): void => clearTimeout(timer);
        req.once('end', clear);
        req.stream.once('close', clear);
      }
      h2(req, h2res);
    });
    server.on('session', (session: ServerHttp2Session) => {
      this.sessions.add(session);
      session.once('close', () => this.sessions.delete(session));
      if (keepAliveTimeout) session.setTimeout(keepAliveTimeout, () => session.close());
    });
    return server;
  }
}
