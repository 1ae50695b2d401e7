/**
 * A TLS-terminating HTTP/2 reverse proxy in front of the REAL API server, for deterministic fault injection on single
 * requests (a fake only in what it withholds; every other request and answer is the API server's own):
 *  - the client (the manager) speaks HTTP/2 to it, verifying its serving certificate (a test CA, SAN 127.0.0.1);
 *  - each stream is forwarded as one stream on ONE upstream HTTP/2 session authenticated with the admin client
 *    certificate (so the client needs no credential of its own; any `authorization` header is dropped);
 *  - a request matching `hold(method, path)` is recorded and never answered (nor forwarded): the stream stays open
 *    until the client resets it or the connection goes — what an Event POST stuck in a congested path looks like.
 * `close()` destroys every session.
 */
import { connect, constants as h2c, createSecureServer, type ClientHttp2Session, type Http2SecureServer, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { ControlPlane } from '../cluster/controlplane.ts';
import { createCA } from './pki.ts';

export interface HeldRequest {
  method: string;
  path: string;
}

interface AdminKubeconfig {
  clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
  users: { user: { 'client-certificate-data': string; 'client-key-data': string } }[];
}

export class H2HoldingProxy {
  /** Requests withheld (never answered), in arrival order. */
  readonly held: HeldRequest[] = [];
  /** Requests forwarded, "METHOD path" (path without query). */
  readonly forwarded: string[] = [];
  readonly url: string;
  /** The proxy's CA (PEM): what the client's kubeconfig trusts. */
  readonly ca: string;
  private readonly server: Http2SecureServer;
  private readonly upstream: ClientHttp2Session;
  private readonly sessions = new Set<Http2Session>();

  private constructor(server: Http2SecureServer, upstream: ClientHttp2Session, port: number, ca: string) {
    this.server = server;
    this.upstream = upstream;
    this.url = `https://127.0.0.1:${port}`;
    this.ca = ca;
  }

  static async start(cp: ControlPlane, kubeconfigText: string, hold: (method: string, path: string) => boolean): Promise<H2HoldingProxy> {
    const kc = JSON.parse(kubeconfigText) as AdminKubeconfig;
    const c = kc.clusters[0]?.cluster;
    const u = kc.users[0]?.user;
    if (!c || !u) throw new Error('admin kubeconfig without cluster or user');
    const b64 = (s: string): Buffer => Buffer.from(s, 'base64');
    const upstream = connect(cp.server, { ca: b64(c['certificate-authority-data']), cert: b64(u['client-certificate-data']), key: b64(u['client-key-data']) });
    upstream.on('error', () => {});
    const pki = await createCA('h2-holding-proxy-ca');
    const serving = await pki.issue(['localhost'], 'h2-holding-proxy', { ips: ['127.0.0.1'] });
    const server = createSecureServer({ cert: serving.cert, key: serving.key, allowHTTP1: false });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const proxy = new H2HoldingProxy(server, upstream, (server.address() as AddressInfo).port, pki.cert);
    server.on('session', (s: Http2Session) => {
      proxy.sessions.add(s);
      s.on('close', () => proxy.sessions.delete(s));
      s.on('error', () => {});
    });
    server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
      stream.on('error', () => {});
      const method = String(headers[h2c.HTTP2_HEADER_METHOD]);
      const full = String(headers[h2c.HTTP2_HEADER_PATH]);
      const path = full.split('?')[0] ?? '';
      if (hold(method, path)) {
        proxy.held.push({ method, path });
        stream.resume(); // read and discard the body; never answer
        return;
      }
      proxy.forwarded.push(`${method} ${path}`);
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(headers)) {
        if (v === undefined || k === 'authorization' || (k.startsWith(':') && k !== h2c.HTTP2_HEADER_METHOD && k !== h2c.HTTP2_HEADER_PATH)) continue;
        out[k] = v;
      }
      const up = upstream.request(out, { endStream: false });
      up.on('error', () => stream.close(h2c.NGHTTP2_INTERNAL_ERROR));
      stream.on('close', () => {
        if (!up.closed) up.close(h2c.NGHTTP2_CANCEL);
      });
      up.on('response', (h) => {
        const back: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(h)) if (v !== undefined && (!k.startsWith(':') || k === h2c.HTTP2_HEADER_STATUS)) back[k] = v;
        if (!stream.closed) stream.respond(back);
        up.pipe(stream);
      });
      stream.pipe(up);
    });
    return proxy;
  }

  /** A kubeconfig (JSON) naming this proxy as the server, trusting its CA, with no credential of its own. */
  kubeconfig(): string {
    return JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'proxy',
      clusters: [{ name: 'proxy', cluster: { server: this.url, 'certificate-authority-data': Buffer.from(this.ca).toString('base64') } }],
      users: [{ name: 'anonymous-to-proxy', user: {} }],
      contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: 'anonymous-to-proxy' } }],
    });
  }

  async close(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    this.upstream.destroy();
    await new Promise((r) => this.server.close(r));
  }
}
