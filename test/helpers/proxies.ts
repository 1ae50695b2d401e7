/**
 * Real HTTP plumbing for transport tests, each counting what passed through it:
 *  - `ForwardProxy`: a forward HTTP proxy as HTTP_PROXY/HTTPS_PROXY name it — absolute-URI requests (`GET http://h:p/x`,
 *    what clients send for http:// URLs) are forwarded, CONNECT opens a TCP tunnel (https:// URLs);
 *  - `TlsForwarder`: a TLS-terminating reverse proxy (node:https) in front of a plain-HTTP server such as the real
 *    neutron-server or Keystone, optionally requiring a client certificate signed by a given CA.
 * Neither changes requests or answers; both close every connection on `close()`.
 */
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

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
