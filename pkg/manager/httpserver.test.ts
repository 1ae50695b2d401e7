import assert from 'node:assert/strict';
import { Agent, createServer, request, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { afterEach, describe, it } from 'node:test';
import { HttpServerRunnable, type TlsPair, type TlsSource } from './httpserver.ts';
import { selfSignedCertificate } from './selfsigned.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

/** Starts `server` until the test ends; returns its bound port and the start promise. */
async function run(server: HttpServerRunnable): Promise<{ port: number; ac: AbortController; done: Promise<void> }> {
  const ac = new AbortController();
  const done = server.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done.catch(() => {});
  });
  const { port } = await server.listening;
  return { port, ac, done };
}

function get(port: number, agent?: Agent): Promise<{ status: number; body: string; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/x', agent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => resolve({ status: res.statusCode ?? 0, body, res }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HttpServerRunnable', () => {
  it('a bind address of "0" means disabled: constructing a server for it is an error', () => {
    assert.throws(() => new HttpServerRunnable({ name: 'probe', bindAddress: '0', handler: () => {} }), /disabled/);
    assert.throws(() => new HttpServerRunnable({ name: 'probe', bindAddress: 'nonsense', handler: () => {} }), /invalid address/);
    assert.throws(() => new HttpServerRunnable({ name: 'probe', bindAddress: ':0', handler: () => {}, http2Handler: () => {} }), /http2Handler needs tls/);
  });

  it('serves the handler on the bound port; listening resolves with the address (port 0 = any free port)', async () => {
    const server = new HttpServerRunnable({
      name: 'probe', bindAddress: '127.0.0.1:0', handler: (req, res) => res.end(`hello ${req.url}`),
    });
    const { port } = await run(server);
    assert.ok(port > 0);
    assert.deepEqual(await get(port).then(({ status, body }) => ({ status, body })), { status: 200, body: 'hello /x' });
    assert.equal((server.server?.address() as AddressInfo).port, port);
  });

  it('an address in use: start rejects with EADDRINUSE and listening rejects too (the Manager treats it as fatal)', async () => {
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => squatter.close(() => r())));
    const port = (squatter.address() as AddressInfo).port;
    const server = new HttpServerRunnable({ name: 'metrics', bindAddress: `127.0.0.1:${port}`, handler: () => {} });
    await assert.rejects(server.start(new AbortController().signal), (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE');
    await assert.rejects(server.listening, (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE');
  });

  it('a signal aborted before start: start rejects and nothing listens', async () => {
    const server = new HttpServerRunnable({ name: 'probe', bindAddress: '127.0.0.1:0', handler: () => {} });
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(server.start(ac.signal), /aborted before start/);
    await assert.rejects(server.listening);
    assert.equal(server.server, undefined);
  });

  it('on abort an idle keep-alive connection is closed at once: start resolves without waiting for the shutdown timeout', async () => {
    const server = new HttpServerRunnable({
      name: 'probe', bindAddress: '127.0.0.1:0', handler: (_req, res) => res.end('ok'),
      shutdownTimeoutMs: 3_600_000, // an hour: only closing the idle connection lets start resolve within the test
    });
    const { port, ac, done } = await run(server);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => agent.destroy());
    await get(port, agent);
    const idle = Object.values(agent.freeSockets).flat();
    assert.equal(idle.length, 1, 'the connection is idle in the pool');
    const socketClosed = new Promise<void>((r) => idle[0]?.once('close', () => r()));
    ac.abort();
    await done;
    await socketClosed;
    await assert.rejects(get(port), (err: NodeJS.ErrnoException) => err.code === 'ECONNREFUSED', 'no longer listening');
  });

  it('on abort a connection still busy after shutdownTimeoutMs is destroyed, then start resolves', async () => {
    let arrived!: () => void;
    const requestArrived = new Promise<void>((r) => (arrived = r));
    const server = new HttpServerRunnable({
      name: 'probe', bindAddress: '127.0.0.1:0', shutdownTimeoutMs: 50,
      handler: () => arrived(), // never answers
    });
    const { port, ac, done } = await run(server);
    const pending = get(port);
    await requestArrived;
    ac.abort();
    await done;
    await assert.rejects(pending, (err: NodeJS.ErrnoException) => err.code === 'ECONNRESET' || /socket hang up/.test(err.message));
  });

  it('HTTPS: serves the TLS source\'s latest pair, stops the source with the server, and installs updates for new handshakes', async () => {
    const [a, b] = await Promise.all(['a', 'b'].map((cn) => selfSignedCertificate({ commonName: cn, ips: ['127.0.0.1'] })));
    assert.ok(a && b);
    const pair = (p: { cert: string; key: string }): TlsPair => ({ cert: Buffer.from(p.cert), key: Buffer.from(p.key) });
    let update: ((p: TlsPair) => void) | undefined;
    let sourceSignal: AbortSignal | undefined;
    const source: TlsSource = {
      start: (signal, onUpdate) => {
        sourceSignal = signal;
        update = onUpdate;
        return Promise.resolve(pair(a));
      },
    };
    const server = new HttpServerRunnable({ name: 'metrics', bindAddress: '127.0.0.1:0', tls: source, handler: (_q, r) => r.end('tls') });
    const { port, ac, done } = await run(server);
    const peerCN = (): Promise<string> => new Promise((resolve, reject) => {
      const req = httpsRequest({ host: '127.0.0.1', port, path: '/', rejectUnauthorized: false, agent: false }, (res) => {
        const der = (res.socket as TLSSocket).getPeerCertificate().raw;
        res.resume().on('end', () => resolve(new X509Certificate(der).subject));
      });
      req.on('error', reject);
      req.end();
    });
    assert.match(await peerCN(), /CN=a/);
    update?.(pair(b));
    assert.match(await peerCN(), /CN=b/, 'the next handshake presents the new pair');
    assert.equal(sourceSignal?.aborted, false);
    ac.abort();
    await done;
    assert.equal(sourceSignal?.aborted, true, 'the certificate source stops with the server');
  });

  it('HTTPS: a TLS source without a first pair: start rejects, nothing listens, the source is stopped', async () => {
    let sourceSignal: AbortSignal | undefined;
    const server = new HttpServerRunnable({
      name: 'metrics', bindAddress: '127.0.0.1:0', handler: () => {},
      tls: { start: (signal) => ((sourceSignal = signal), Promise.reject(new Error('no tls.crt in /certs'))) },
    });
    await assert.rejects(server.start(new AbortController().signal), /no tls\.crt/);
    await assert.rejects(server.listening, /no tls\.crt/);
    assert.equal(sourceSignal?.aborted, true);
  });
});
