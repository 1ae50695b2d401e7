/**
 * Real HTTP plumbing for transport tests, each counting what passed through it:
 *  - `ForwardProxy`: a forward HTTP proxy as HTTP_PROXY/HTTPS_PROXY name it — absolute-URI requests (`GET http://h:p/x`,
 *    what clients send for http:// URLs) are forwarded, CONNECT opens a TCP tunnel (https:// URLs);
 *  - `TlsForwarder`: a TLS-terminating reverse proxy (node:https) in front of a plain-HTTP server such as the real
 *    neutron-server or Keystone, optionally requiring a client certificate signed by a given CA.
 *  - `HoldingApiProxy`: a TLS-terminating HTTP/2 reverse proxy in front of the kube-apiserver that can hold writes
 *    and deliver them late, in or out of order (the leadership chaos test's request-level fault).
 * None changes requests or answers; all close every connection on `close()`.
 */
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  connect as http2Connect, createSecureServer, type ClientHttp2Session, type ClientHttp2Stream, type Http2SecureServer,
  type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Session,
} from 'node:http2';

/** Forwards one request to `target` (http origin) and pipes the answer back; a failed upstream drops the client. */
function forward(req: IncomingMessage, res: ServerResponse, target: URL, path: string): void {
  const up = httpRequest({
    host: target.hostname, port: target.port, method: req.method, path,
    headers: { ...req.headers, host: target.host },
  }, (ur) => {
    res.writeHead(ur.statusCode ?? 502, ur.headers);
    ur.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

export interface ProxiedRequest {
  /** `absolute` for a forwarded http:// request, `connect` for a tunnel. */
  kind: 'absolute' | 'connect';
  /** host:port the client asked for. */
  target: string;
  /** The request's path (absolute requests only). */
  path?: string;
}

/** A forward proxy (absolute-URI and CONNECT) on 127.0.0.1 that records every request it proxied. */
export class ForwardProxy {
  readonly seen: ProxiedRequest[] = [];
  private readonly server: Server;
  private readonly tunnels = new Set<Socket>();
  readonly url: string;

  private constructor(server: Server, port: number) {
    this.server = server;
    this.url = `http://127.0.0.1:${port}`;
  }

  static async start(): Promise<ForwardProxy> {
    const server = createHttpServer();
    const proxy = new ForwardProxy(server, await listen(server));
    server.on('request', (req, res) => {
      let target: URL;
      try {
        target = new URL(req.url ?? '');
      } catch {
        res.writeHead(400).end('a proxy needs absolute-URI requests');
        return;
      }
      proxy.seen.push({ kind: 'absolute', target: target.host, path: target.pathname });
      forward(req, res, target, target.pathname + target.search);
    });
    server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
      const target = req.url ?? '';
      proxy.seen.push({ kind: 'connect', target });
      const i = target.lastIndexOf(':');
      const up = netConnect(Number(target.slice(i + 1)), target.slice(0, i).replace(/^\[(.+)\]$/, '$1'), () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        up.write(head);
        up.pipe(client);
        client.pipe(up);
      });
      for (const s of [up, client]) {
        proxy.tunnels.add(s);
        s.on('close', () => proxy.tunnels.delete(s));
      }
      up.on('error', () => client.destroy());
      client.on('error', () => up.destroy());
    });
    return proxy;
  }

  /** How many requests (of a kind) went to `target` (host:port). */
  count(target: string, kind?: ProxiedRequest['kind']): number {
    return this.seen.filter((r) => r.target === target && (kind === undefined || r.kind === kind)).length;
  }

  async close(): Promise<void> {
    for (const s of this.tunnels) s.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

export interface TlsForwarderOptions {
  /** Serving certificate and key (PEM) for 127.0.0.1. */
  cert: string;
  key: string;
  /** With a CA: a client certificate signed by it is required (handshake refused otherwise). */
  clientCA?: string;
}

export interface ForwardedRequest {
  path: string;
  /** The client certificate's CN, when one was presented. */
  clientCN: string | undefined;
}

/** HTTPS on 127.0.0.1 in front of a plain-HTTP origin; records each request and the client certificate it came with. */
export class TlsForwarder {
  readonly seen: ForwardedRequest[] = [];
  /** TLS handshakes that failed (e.g. no or a wrong client certificate, an untrusted server certificate). */
  handshakeFailures = 0;
  readonly url: string;
  /** host:port, as a CONNECT request names it. */
  readonly hostPort: string;
  private readonly server: Server;

  private constructor(server: Server, port: number) {
    this.server = server;
    this.hostPort = `127.0.0.1:${port}`;
    this.url = `https://${this.hostPort}`;
  }

  static async start(target: string, opts: TlsForwarderOptions): Promise<TlsForwarder> {
    const origin = new URL(target);
    const server = createHttpsServer({
      cert: opts.cert, key: opts.key,
      ...(opts.clientCA !== undefined && { ca: opts.clientCA, requestCert: true, rejectUnauthorized: true }),
    });
    const fwd = new TlsForwarder(server, await listen(server));
    server.on('tlsClientError', () => fwd.handshakeFailures++);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      const cn = peer.subject?.CN;
      fwd.seen.push({ path: (req.url ?? '').split('?')[0] ?? '', clientCN: Array.isArray(cn) ? cn[0] : cn });
      forward(req, res, origin, req.url ?? '/');
    });
    return fwd;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

export interface ApiProxyTls {
  /** The proxy's serving certificate and key (PEM) for 127.0.0.1; clients must trust its CA instead of the API server's. */
  cert: string;
  key: string;
  /** How the proxy reaches the API server: its CA, and the client certificate it authenticates with (PEM). */
  upstreamCA: string;
  upstreamCert: string;
  upstreamKey: string;
}

/** A write the `HoldingApiProxy` kept, as the client sent it. */
export interface HeldWrite {
  method: string;
  path: string;
  userAgent: string;
  /** Date.now() when it arrived at the proxy. */
  at: number;
}

interface QueuedWrite extends HeldWrite {
  headers: OutgoingHttpHeaders;
  body: Buffer;
  res: Http2ServerResponse;
}

const hopByHop = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'host']);

/** Request or response headers without HTTP/2 pseudo-headers and hop-by-hop fields. */
function endToEnd(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && !hopByHop.has(k) && v !== undefined) out[k] = v;
  return out;
}

/**
 * A TLS-terminating HTTP/2 reverse proxy in front of the REAL kube-apiserver that can hold writes (fault injection
 * at request level, labelled as such: it re-originates each request on its own connection with its own client
 * certificate — the admin's, as the managers' kubeconfig — and passes the User-Agent through, so the audit log still
 * attributes every request to the client's leader-election identity).
 *  - Normally every request is forwarded as it comes (watches stream through).
 *  - `hold()`: from then on every write (any method but GET) is kept unanswered; reads still pass, so the client keeps
 *    seeing changes and keeps deriving writes from them. `deliver('reverse')` sends the kept writes to the API server
 *    one at a time, each to its answer before the next, newest first — out of order — or oldest first with 'sent'.
 *    An answer goes back to the client if it is still connected, and is discarded otherwise.
 */
export class HoldingApiProxy {
  readonly url: string;
  private readonly server: Http2SecureServer;
  private readonly tls: ApiProxyTls;
  private readonly upstreamUrl: string;
  private upstream: ClientHttp2Session | undefined;
  private holding = false;
  private queue: QueuedWrite[] = [];
  private readonly sessions = new Set<ServerHttp2Session>();

  private constructor(server: Http2SecureServer, port: number, upstreamUrl: string, tls: ApiProxyTls) {
    this.server = server;
    this.url = `https://127.0.0.1:${port}`;
    this.upstreamUrl = upstreamUrl;
    this.tls = tls;
  }

  static async start(upstreamUrl: string, tls: ApiProxyTls): Promise<HoldingApiProxy> {
    const server = createSecureServer({ cert: tls.cert, key: tls.key, allowHTTP1: false });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const proxy = new HoldingApiProxy(server, (server.address() as AddressInfo).port, upstreamUrl, tls);
    server.on('request', (req: Http2ServerRequest, res: Http2ServerResponse) => proxy.handle(req, res));
    server.on('session', (s: ServerHttp2Session) => {
      proxy.sessions.add(s);
      s.on('close', () => proxy.sessions.delete(s));
    });
    return proxy;
  }

  /** The writes kept now (in the order they came). */
  get held(): readonly HeldWrite[] {
    return this.queue;
  }

  hold(): void {
    this.holding = true;
  }

  /** Ends `hold()` and sends what it kept (see the class comment); resolves with what was sent, in that order, and the answers' codes. */
  async deliver(order: 'sent' | 'reverse'): Promise<(HeldWrite & { code: number })[]> {
    this.holding = false;
    const queued = order === 'reverse' ? [...this.queue].reverse() : [...this.queue];
    this.queue = [];
    const done: (HeldWrite & { code: number })[] = [];
    for (const w of queued) {
      const code = await this.send(w.method, w.path, w.headers, w.body, w.res);
      done.push({ method: w.method, path: w.path, userAgent: w.userAgent, at: w.at, code });
    }
    return done;
  }

  private session(): ClientHttp2Session {
    if (!this.upstream || this.upstream.closed || this.upstream.destroyed) {
      const s = http2Connect(this.upstreamUrl, { ca: this.tls.upstreamCA, cert: this.tls.upstreamCert, key: this.tls.upstreamKey });
      s.on('error', () => s.destroy());
      this.upstream = s;
    }
    return this.upstream;
  }

  private handle(req: Http2ServerRequest, res: Http2ServerResponse): void {
    const method = req.method;
    const path = req.url;
    if (method === 'GET') {
      void this.send(method, path, endToEnd(req.headers), undefined, res);
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = endToEnd(req.headers);
      if (this.holding) {
        this.queue.push({ method, path, headers, body, res, userAgent: String(req.headers['user-agent'] ?? ''), at: Date.now() });
      } else {
        void this.send(method, path, headers, body, res);
      }
    });
  }

  /** Sends one request upstream; pipes the answer to `res` while it is open; resolves with the status (0: no answer). */
  private send(method: string, path: string, headers: OutgoingHttpHeaders, body: Buffer | undefined, res: Http2ServerResponse): Promise<number> {
    return new Promise((resolve) => {
      let stream: ClientHttp2Stream;
      try {
        // endStream: false for a request with a body: Node ends a DELETE's stream at once by default, and its body
        // (e.g. preconditions) would then be refused.
        stream = this.session().request({ ...headers, ':method': method, ':path': path }, body !== undefined ? { endStream: false } : {});
      } catch {
        if (!res.stream?.destroyed) res.stream?.close();
        resolve(0);
        return;
      }
      const clientOpen = (): boolean => !res.stream?.destroyed && !res.stream?.closed;
      // A client that left (a watch it stopped, or a process that died) ends the upstream stream — except for a
      // held write, which runs to its answer (the point of holding it).
      if (body === undefined) res.stream?.on('close', () => stream.close());
      stream.on('response', (h) => {
        const code = Number(h[':status'] ?? 0);
        if (clientOpen()) {
          try {
            res.writeHead(code, endToEnd(h));
            stream.pipe(res);
          } catch {
            stream.resume();
          }
        } else {
          stream.resume();
        }
        stream.on('end', () => resolve(code));
        stream.on('close', () => resolve(code));
      });
      stream.on('error', () => {
        if (clientOpen()) res.stream?.close();
        resolve(0);
      });
      stream.on('close', () => resolve(0));
      stream.end(body);
    });
  }

  async close(): Promise<void> {
    this.upstream?.destroy();
    for (const w of this.queue) w.res.stream?.close();
    this.queue = [];
    for (const s of this.sessions) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
