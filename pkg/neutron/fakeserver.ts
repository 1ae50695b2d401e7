/**
 * UNIT-TEST FAKE — not Neutron, not Keystone. A scriptable HTTP server on 127.0.0.1 for unit tests of the client's
 * own logic (error decoding, Keystone token caching/re-auth, pagination, timeouts): each test supplies a handler
 * that answers with canned, Neutron/Keystone-shaped responses, and inspects the requests it received.
 * Behaviour of the real API is covered by test/neutron.test.ts against a real neutron-server.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path without query string. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: string;
}

export type FakeHandler = (req: RecordedRequest, res: ServerResponse) => void | Promise<void>;

/** Writes a JSON (or empty, for undefined) response. */
export function reply(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    ...(text && { 'content-type': typeof body === 'string' ? 'text/html' : 'application/json' }),
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

export class FakeServer {
  readonly requests: RecordedRequest[] = [];
  handler: FakeHandler;
  private readonly server: Server;
  private port = 0;

  private constructor(handler: FakeHandler) {
    this.handler = handler;
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const u = new URL(req.url ?? '/', 'http://fake');
        const rec: RecordedRequest = {
          method: req.method ?? 'GET', path: u.pathname, query: u.searchParams, headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        };
        this.requests.push(rec);
        Promise.resolve(this.handler(rec, res)).catch((err: unknown) => {
          if (!res.headersSent) reply(res, 599, { error: String(err) });
        });
      });
    });
  }

  /** Starts on an ephemeral loopback port. */
  static async start(handler: FakeHandler = (_req, res) => reply(res, 404, {})): Promise<FakeServer> {
    const s = new FakeServer(handler);
    await new Promise<void>((resolve, reject) => {
      s.server.once('error', reject);
      s.server.listen(0, '127.0.0.1', () => resolve());
    });
    s.port = (s.server.address() as AddressInfo).port;
    return s;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests whose method and path match. */
  matching(method: string, path: string | RegExp): RecordedRequest[] {
    return this.requests.filter((r) => r.method === method && (typeof path === 'string' ? r.path === path : path.test(r.path)));
  }

  /** Stops listening and drops open connections (including requests a handler never answered). */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
