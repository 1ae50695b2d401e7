/**
 * Connections to ONE API server origin, on Node's built-in http2/https/http (nothing to import at start).
 *
 *   https origin ──TLS, ALPN [h2, http/1.1]──▶ h2 chosen      → HTTP/2 sessions: every request and watch is a stream
 *                                          └─▶ http/1.1 chosen → https.Agent with keep-alive (max 100 sockets)
 *   http origin ─────────────────────────────────────────────→ http.Agent with keep-alive (tests, kubectl proxy)
 *
 * HTTP/2 invariants (what client-go's transport does, and the failure modes one shared connection brings):
 *  - Requests use the first live session with a free stream slot (remote SETTINGS_MAX_CONCURRENT_STREAMS); when all
 *    are full a new session is opened, so long-running watches can never starve ordinary requests.
 *  - A session that got GOAWAY, errored or closed takes no new streams; its open streams finish or fail on their own.
 *  - Health: every `readIdleMs` (default 30 s) a session with open streams is PINGed; no answer within
 *    `pingTimeoutMs` (default 15 s) destroys it, failing every stream on it at once (so a black-holed connection is
 *    noticed in ≤ 45 s, like Go's ReadIdleTimeout + PingTimeout), and the next request opens a new session. (Go pings
 *    only after read-idleness; one PING frame per 30 s is cheaper than watching every stream's reads.)
 *  - Flow control is per stream: a watch whose consumer is slow stops reading, its stream window fills and only that
 *    stream pauses; other streams keep flowing.
 *  - A session keeps the process alive only while it has open streams (like a pending fetch); idle, it is unref'd.
 * Aborting a request's signal resets its stream (or destroys its HTTP/1.1 request) and rejects / errors the body.
 * `beforeSend` runs once the session (HTTP/2) or socket (HTTP/1.1) is connected, right before the request is
 * written: a request refused there never reaches the wire (a queued HTTP/2 request on a connecting session would).
 * Bodies: `buffered` requests are read inside the response handler (an HTTP/2 stream may close right after
 * END_STREAM, and a read started a few ticks later can fail with "premature close"); streamed bodies (watches) are
 * read by the caller, who treats such an error like any broken watch (resume from the last resourceVersion).
 */
import type { Agent as HttpAgentType, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { connect as h2connect, constants as h2c, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

// Not `import { … } from 'node:http'`: an ESM import of node:http reads every export into the module namespace, which
// runs node:http's lazy WebSocket/CloseEvent/MessageEvent getters and loads Node's bundled undici — 80–150 ms and
// ~11 MiB RSS at every start (bench/README.md, "Fixed cost"). process.getBuiltinModule returns the same module object.
const { Agent: HttpAgent, request: httpRequest } = process.getBuiltinModule('node:http');

export interface TlsOptions {
  ca?: Buffer | undefined;
  cert?: Buffer | undefined;
  key?: Buffer | undefined;
  servername?: string | undefined;
  rejectUnauthorized?: boolean | undefined;
}

export interface ConnectionOptions2 {
  tls: TlsOptions;
  /** Idle time after which a session with open streams is pinged. Default 30 000 ms. */
  readIdleMs?: number;
  /** Time a ping may take before the session is considered dead. Default 15 000 ms. */
  pingTimeoutMs?: number;
}

export interface SendOptions {
  method: string;
  /** Path with query string. */
  path: string;
  headers: Record<string, string>;
  body?: string | undefined;
  signal: AbortSignal;
  /** Read the whole body before resolving (ordinary calls); otherwise the body is streamed (watches). */
  buffered?: boolean;
  /**
   * Called synchronously at the last moment before the request's first byte is handed to a connected session or
   * socket (after the TLS handshake / session connect); throwing refuses the request with that error and nothing
   * of it is sent. The write gate (rest.ts) uses it.
   */
  beforeSend?: () => void;
}

/**
 * A response: `body` is a byte stream (iterate it, or read it with readBody()). For a `buffered` request the sender
 * may have read the whole body already: then `bytes` holds it and `body` is the ended stream (nothing left to read).
 */
export interface WireResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Readable;
  bytes?: Buffer;
}

interface Session {
  session: ClientHttp2Session;
  open: number;
  usable: boolean;
  pinging: boolean;
  /** While connecting: settles when the session connected or failed first (see `connected()`). */
  connected?: Promise<void>;
}

const noop = (): void => {};

/** One Buffer of `chunks` (no copy for a single chunk). */
function joined(chunks: Buffer[], length: number): Buffer {
  return chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, length);
}

const empty = Buffer.alloc(0);

/**
 * Reads a whole body into one Buffer with plain 'data'/'end' listeners (issue 30: no async iterator, no
 * `stream.finished` — each binds an AsyncResource and schedules extra ticks per response). Rejects with the
 * stream's error, or when it closes before its end; an already ended body reads as empty.
 */
export function readBody(body: Readable): Promise<Buffer> {
  if (body.readableEnded) return Promise.resolve(empty);
  return new Promise<Buffer>((resolve, reject) => {
    if (body.errored) {
      reject(body.errored);
      return;
    }
    if (body.destroyed) {
      reject(new Error('response body closed before its end'));
      return;
    }
    const chunks: Buffer[] = [];
    let length = 0;
    const onData = (c: Buffer | string): void => {
      const b = typeof c === 'string' ? Buffer.from(c) : c;
      chunks.push(b);
      length += b.length;
    };
    const done = (): void => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      body.off('close', onClose);
    };
    const onEnd = (): void => {
      done();
      resolve(joined(chunks, length));
    };
    const onError = (err: Error): void => {
      done();
      reject(err);
    };
    const onClose = (): void => {
      done();
      reject(body.errored ?? new Error('response body closed before its end'));
    };
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
    body.once('close', onClose);
  });
}

/** Reads a whole body as UTF-8 text. */
export async function readText(body: Readable): Promise<string> {
  return (await readBody(body)).toString('utf8');
}

export class Connection {
  readonly origin: URL;
  private readonly tls: TlsOptions;
  private readonly readIdleMs: number;
  private readonly pingTimeoutMs: number;
  private mode: 'probe' | 'h2' | 'h1' = 'probe';
  private probing: Promise<void> | undefined;
  private agent: HttpAgentType | undefined;
  private sessions: Session[] = [];
  private health: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(origin: string, opts: ConnectionOptions2) {
    this.origin = new URL(origin);
    this.tls = opts.tls;
    this.readIdleMs = opts.readIdleMs ?? 30_000;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 15_000;
    if (this.origin.protocol === 'http:') {
      this.mode = 'h1';
      this.agent = new HttpAgent({ keepAlive: true, maxSockets: 100 });
    }
  }

  /** The protocol in use ('probe' until the first TLS handshake chose one). */
  get protocol(): 'probe' | 'h2' | 'h1' {
    return this.mode;
  }

  /** Number of live HTTP/2 sessions (tests). */
  get sessionCount(): number {
    return this.sessions.filter((s) => s.usable).length;
  }

  async send(opts: SendOptions): Promise<WireResponse> {
    if (this.closed) throw new Error('connection closed');
    opts.signal.throwIfAborted();
    if (this.mode === 'probe') await (this.probing ??= this.probe());
    return this.mode === 'h2' ? this.sendH2(opts) : this.sendH1(opts);
  }

  /** Closes every session and socket; streams in flight fail. */
  close(): void {
    this.closed = true;
    if (this.health) clearInterval(this.health);
    for (const s of this.sessions) s.session.destroy();
    this.sessions = [];
    this.agent?.destroy();
  }

  private tlsOptions(): ConnectionOptions {
    const t = this.tls;
    return {
      host: this.origin.hostname.replace(/^\[|\]$/g, ''),
      port: Number(this.origin.port || 443),
      ALPNProtocols: ['h2', 'http/1.1'],
      ...(t.ca ? { ca: t.ca } : {}),
      ...(t.cert ? { cert: t.cert } : {}),
      ...(t.key ? { key: t.key } : {}),
      ...(t.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
      servername: t.servername ?? (/^[\d.:[\]]+$/.test(this.origin.hostname) ? undefined : this.origin.hostname),
    };
  }

  /** First TLS handshake: ALPN decides between HTTP/2 and HTTP/1.1; an h2 socket becomes the first session. */
  private probe(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const socket = tlsConnect(this.tlsOptions());
      socket.once('secureConnect', () => {
        socket.removeListener('error', onError);
        if (socket.alpnProtocol === 'h2') {
          this.mode = 'h2';
          this.adopt(socket);
        } else {
          this.mode = 'h1';
          socket.destroy();
          this.agent = new HttpsAgent({ keepAlive: true, maxSockets: 100, ...this.tlsOptions(), ALPNProtocols: ['http/1.1'] });
        }
        resolve();
      });
      const onError = (err: Error): void => {
        this.probing = undefined; // try again on the next request
        reject(err);
      };
      socket.once('error', onError);
    });
  }

  private adopt(socket: ReturnType<typeof tlsConnect> | undefined): Session {
    const session = h2connect(this.origin.origin, {
      ...(socket ? { createConnection: () => socket } : this.tlsOptions()),
      settings: { enablePush: false },
    });
    const s: Session = { session, open: 0, usable: true, pinging: false };
    const retire = (): void => {
      s.usable = false;
      this.sessions = this.sessions.filter((x) => x !== s);
    };
    session.on('goaway', retire);
    session.on('close', retire);
    session.on('error', retire);
    session.unref();
    this.sessions.push(s);
    this.health ??= setInterval(() => this.checkHealth(), this.readIdleMs).unref();
    return s;
  }

  /**
   * A session with a free stream slot, else a new one. A new session is usable at once (its streams start when it
   * connected); if it cannot connect, its streams fail with the connection error and the callers back off.
   */
  private session(): Session {
    const free = this.sessions.find((s) => s.usable && !s.session.destroyed && s.open < (s.session.remoteSettings.maxConcurrentStreams ?? 100));
    return free ?? this.adopt(undefined);
  }

  private checkHealth(): void {
    for (const s of this.sessions) {
      if (s.pinging || s.open === 0 || s.session.destroyed || s.session.connecting) continue;
      s.pinging = true;
      const timer = setTimeout(() => s.session.destroy(new Error(`HTTP/2 ping to ${this.origin.host} unanswered for ${this.pingTimeoutMs} ms`)), this.pingTimeoutMs);
      timer.unref();
      s.session.ping((err) => {
        clearTimeout(timer);
        s.pinging = false;
        if (err) s.session.destroy(err);
      });
    }
  }

  /**
   * Resolves once `s` is connected (at once when it is); rejects if it closes or fails first. One promise per
   * session, shared by every request that waits for it: each waiter adding its own three listeners crossed the
   * emitter's limit of 10 (MaxListenersExceededWarning) whenever more than 10 writes waited for a new session —
   * 8 workers and the Event sink after a reconnect.
   */
  private connected(s: Session): Promise<void> {
    const session = s.session;
    if (!session.connecting) return Promise.resolve();
    return (s.connected ??= new Promise<void>((resolve, reject) => {
      const done = (err?: Error): void => {
        session.off('connect', onConnect);
        session.off('close', onClose);
        session.off('error', done);
        if (err) reject(err);
        else resolve();
      };
      const onConnect = (): void => done();
      const onClose = (): void => done(new Error(`HTTP/2 session to ${this.origin.host} closed before it connected`));
      session.once('connect', onConnect);
      session.once('close', onClose);
      session.once('error', done);
    }));
  }

  private async sendH2(opts: SendOptions): Promise<WireResponse> {
    const s = this.session();
    if (opts.beforeSend) {
      // A request on a connecting session is queued and written when it connects: wait, then ask the gate.
      // Hold the slot meanwhile, so concurrent requests do not all pick this session past its limit — and hold the
      // event loop as an open stream does: the request that drops the count to 0 here sees `open` > 0 below when a
      // concurrent one holds it, and would not ref the session (two first writes of a process with no other handle
      // then left it to exit with both promises pending).
      if (s.open++ === 0) s.session.ref();
      try {
        await this.connected(s);
      } finally {
        if (--s.open === 0) s.session.unref();
      }
      opts.signal.throwIfAborted();
      opts.beforeSend();
    }
    const headers: Record<string, string> = {
      [h2c.HTTP2_HEADER_METHOD]: opts.method,
      [h2c.HTTP2_HEADER_PATH]: opts.path,
      [h2c.HTTP2_HEADER_AUTHORITY]: this.origin.host,
      [h2c.HTTP2_HEADER_SCHEME]: 'https',
    };
    for (const [k, v] of Object.entries(opts.headers)) headers[k.toLowerCase()] = v;
    if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const stream: ClientHttp2Stream = s.session.request(headers, { endStream: opts.body === undefined, signal: opts.signal });
    if (s.open++ === 0) s.session.ref();
    stream.once('close', () => {
      if (--s.open === 0) s.session.unref();
    });

    if (opts.body !== undefined) stream.end(opts.body);
    return new Promise<WireResponse>((resolveResponse, reject) => {
      let settled = false;
      const resolve = (r: WireResponse): void => {
        settled = true;
        resolveResponse(r);
      };
      stream.once('response', (h) => {
        const status = Number(h[h2c.HTTP2_HEADER_STATUS]);
        if (!opts.buffered) {
          resolve({ status, headers: h, body: stream });
          return;
        }
        // Read in the 'response' handler itself: an HTTP/2 stream may close as soon as END_STREAM arrives, and one
        // read a few ticks later can fail with "premature close" though every byte had arrived.
        // The bytes are handed over as they are (one Buffer, no re-wrapping stream): the caller decodes them once.
        const chunks: Buffer[] = [];
        let length = 0;
        stream.on('data', (c: Buffer) => {
          chunks.push(c);
          length += c.length;
        });
        stream.once('end', () => resolve({ status, headers: h, body: stream, bytes: joined(chunks, length) }));
      });
      // Errors before the response reject; later ones reach whoever reads the body (and are harmless otherwise,
      // e.g. an abort after the body was read).
      stream.on('error', reject);
      // A stream can also close WITHOUT an error and without a (complete) response — its session was destroyed while
      // connecting (the peer accepted and closed the TCP connection), or reset with NO_ERROR. Without this the caller
      // would wait forever, and a later abort could not end the wait (the stream is already gone). After a resolve
      // this is a no-op — and no Error is built then (issue 30: an Error with its stack per request was ~4 % of the
      // manager's CPU while N Foos converge).
      stream.once('close', () => {
        if (!settled) reject(new Error(`HTTP/2 stream to ${this.origin.host} closed before a complete response (RST code ${stream.rstCode ?? 'none'})`));
      });
    });
  }

  private sendH1(opts: SendOptions): Promise<WireResponse> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const send = this.origin.protocol === 'http:' ? httpRequest : httpsRequest;
    // The signal is NOT passed to http.request: Node hands it on to the pooled socket, and aborting it later would
    // destroy a keep-alive socket with nobody listening (an uncaught error). The request is destroyed by hand, without
    // an error (which Node would also re-emit on the socket); the caller sees the abort reason through the promise or
    // the body.
    const signal = opts.signal;
    let response: IncomingMessage | undefined;
    const beforeSend = opts.beforeSend;
    return new Promise<WireResponse>((resolve, reject) => {
      const req = send({
        protocol: this.origin.protocol, hostname: this.origin.hostname.replace(/^\[|\]$/g, ''), port: this.origin.port,
        method: opts.method, path: opts.path, headers, agent: this.agent,
      }, (res: IncomingMessage) => {
        response = res;
        res.on('error', noop); // readers see errors through iteration; an abort after reading is harmless
        res.once('close', () => signal.removeEventListener('abort', onAbort));
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
      });
      const onAbort = (): void => {
        const err = new Error('The operation was aborted', { cause: signal.reason });
        err.name = 'AbortError';
        if (response) response.destroy(err);
        else reject(err);
        req.destroy();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      });
      if (!beforeSend) {
        req.end(opts.body);
        return;
      }
      // Nothing is written before end() (headers go with the first write). A pooled keep-alive socket is connected;
      // a new one is not until 'connect' (http) / 'secureConnect' (https) — the 'socket' event comes a tick after
      // it was created, before any connect can have completed.
      req.once('socket', (socket) => {
        const go = (): void => {
          socket.off('close', onClose);
          try {
            signal.throwIfAborted();
            beforeSend();
          } catch (err) {
            signal.removeEventListener('abort', onAbort);
            reject(err instanceof Error ? err : new Error(String(err)));
            req.destroy();
            return;
          }
          req.end(opts.body);
        };
        const onClose = (): void => {
          socket.off(ready, go); // req's 'error' rejects
        };
        const ready = this.origin.protocol === 'http:' ? 'connect' : 'secureConnect';
        if (req.reusedSocket) {
          go();
          return;
        }
        socket.once(ready, go);
        socket.once('close', onClose);
      });
    });
  }
}
