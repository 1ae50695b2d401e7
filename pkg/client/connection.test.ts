import assert from 'node:assert/strict';
import { createSecureServer, type Http2SecureServer, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { selfSignedCertificate } from '../manager/selfsigned.ts';
import { TcpProxy } from '../../test/helpers/tcpproxy.ts';
import { Connection, readText } from './connection.ts';

/** An HTTP/2 TLS server (Node's own) standing in for the API server's transport behaviour. */
const cert = await selfSignedCertificate({ commonName: 'test', ips: ['127.0.0.1'] });
let server: Http2SecureServer;
let port = 0;
let sessions = 0;
const open = new Set<ServerHttp2Stream>();

before(async () => {
  server = createSecureServer({ cert: cert.cert, key: cert.key, allowHTTP1: true, settings: { maxConcurrentStreams: 3 } });
  server.on('session', () => sessions++);
  server.on('stream', (stream, headers) => {
    const path = String(headers[':path']);
    if (path.startsWith('/stream')) {
      // A watch: headers now, then data only when the test writes it; never ends by itself.
      open.add(stream);
      stream.on('close', () => open.delete(stream));
      stream.respond({ ':status': 200 });
      stream.write('{"type":"ADDED"}\n');
      return;
    }
    if (path.startsWith('/reset')) {
      stream.close(0); // RST_STREAM NO_ERROR before any response: the client sees a close without an error
      return;
    }
    if (path.startsWith('/big')) {
      stream.respond({ ':status': 200 });
      stream.end(Buffer.alloc(4 << 20, 'x'));
      return;
    }
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.end(JSON.stringify({ path }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(() => {
  for (const s of open) s.close();
  return new Promise<void>((r) => server.close(() => r()));
});

/** The `path` field of a JSON body. */
async function pathOf(body: Readable): Promise<string> {
  return (JSON.parse(await readText(body)) as { path: string }).path;
}

const get = (path: string, signal = new AbortController().signal) => ({ method: 'GET', path, headers: {}, signal });

test('HTTP/2 is chosen by ALPN and every request shares one session', async () => {
  const before = sessions;
  const c = new Connection(`https://127.0.0.1:${port}`, { tls: { ca: Buffer.from(cert.cert) } });
  for (let i = 0; i < 10; i++) assert.equal(await pathOf((await c.send(get(`/a/${i}`))).body), `/a/${i}`);
  // Two in parallel: the server allows 3 streams per session (a just-finished stream may still hold its slot).
  await Promise.all(Array.from({ length: 2 }, async (_, i) => readText((await c.send(get(`/b/${i}`))).body)));
  assert.equal(c.protocol, 'h2');
  assert.equal(sessions - before, 1, 'one TLS connection for 12 requests');
  c.close();
});

test('when long-running streams fill the server stream limit, a new session is opened (no starvation)', async () => {
  const c = new Connection(`https://127.0.0.1:${port}`, { tls: { ca: Buffer.from(cert.cert) } });
  const watches = await Promise.all([0, 1, 2].map(async (i) => c.send(get(`/stream/${i}`))));
  // The server allows 3 concurrent streams per session: all are taken by never-ending watches.
  const res = await c.send(get('/after'));
  assert.equal(await pathOf(res.body), '/after');
  assert.equal(c.sessionCount, 2);
  for (const w of watches) w.body.destroy();
  c.close();
});

test('a slow consumer of one stream does not block other streams (per-stream flow control)', async () => {
  const c = new Connection(`https://127.0.0.1:${port}`, { tls: { ca: Buffer.from(cert.cert) } });
  const big = await c.send(get('/big')); // 4 MiB never read: its stream window fills
  for (let i = 0; i < 5; i++) assert.equal(await pathOf((await c.send(get(`/c/${i}`))).body), `/c/${i}`);
  assert.equal((await readText(big.body)).length, 4 << 20);
  c.close();
});

test('a black-holed connection is detected by an unanswered ping: its streams fail and the next request reconnects', async () => {
  const proxy = await TcpProxy.start('127.0.0.1', port);
  try {
    const c = new Connection(`https://127.0.0.1:${proxy.port}`, { tls: { ca: Buffer.from(cert.cert) }, readIdleMs: 300, pingTimeoutMs: 1000 });
    const watch = await c.send(get('/stream/w'));
    const ended = (async () => {
      try {
        for await (const _ of watch.body) { /* events */ }
        return 'ended';
      } catch (err) {
        return `failed: ${(err as Error).message}`;
      }
    })();
    proxy.blackhole();
    const outcome = await ended; // without the health check this never resolves
    // The watch must FAIL (so its reader resumes from its resourceVersion), never end as if the server closed it.
    assert.match(outcome, /^failed: /);
    proxy.restore();
    const res = await c.send(get('/again'));
    assert.equal(await pathOf(res.body), '/again');
    c.close();
  } finally {
    await proxy.close();
  }
});

test('aborting a request resets its stream; the session stays usable', async () => {
  const c = new Connection(`https://127.0.0.1:${port}`, { tls: { ca: Buffer.from(cert.cert) } });
  const ac = new AbortController();
  const w = await c.send(get('/stream/abort', ac.signal));
  const it = (async () => {
    try {
      for await (const _ of w.body) { /* events */ }
      return 'ended';
    } catch (err) {
      return (err as Error).name;
    }
  })();
  ac.abort();
  assert.equal(await it, 'AbortError');
  assert.equal(await pathOf((await c.send(get('/next'))).body), '/next');
  assert.equal(c.sessionCount, 1);
  c.close();
});

test('a TLS server without HTTP/2 (ALPN http/1.1 only) is spoken to over HTTP/1.1 keep-alive', async () => {
  const { createServer: createHttpsServer } = await import('node:https');
  const h1 = createHttpsServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }));
  });
  await new Promise<void>((r) => h1.listen(0, '127.0.0.1', r));
  try {
    const c = new Connection(`https://127.0.0.1:${(h1.address() as AddressInfo).port}`, { tls: { ca: Buffer.from(cert.cert) } });
    for (let i = 0; i < 3; i++) assert.equal(await pathOf((await c.send(get(`/h1/${i}`))).body), `/h1/${i}`);
    assert.equal(c.protocol, 'h1');
    c.close();
  } finally {
    h1.closeAllConnections();
    await new Promise<void>((r) => h1.close(() => r()));
  }
});

test('a stream closed without an error and without a response rejects (it used to wait forever, deaf to aborts)', async () => {
  const c = new Connection(`https://127.0.0.1:${port}`, { tls: { ca: Buffer.from(cert.cert) } });
  const outcome = await Promise.race([
    c.send(get('/reset')).then(() => 'resolved', (err: Error) => err.message),
    new Promise<string>((r) => setTimeout(() => r('still waiting after 5 s'), 5_000).unref()),
  ]);
  assert.match(outcome, /closed before a complete response/);
  assert.equal(await pathOf((await c.send(get('/after-reset'))).body), '/after-reset', 'the connection still serves');
  c.close();
});

test('HTTP/1.1: a connection closed without an error and without a (complete) response rejects (no hang); the next request works', async () => {
  // The HTTP/2 path had this hang (see the test above); here the server ends (FIN) or destroys (RST) the socket of a
  // request without answering, on a fresh and on a reused keep-alive socket.
  const { createServer: createHttpsServer } = await import('node:https');
  const h1 = createHttpsServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    if (req.url?.startsWith('/fin')) req.socket.end();
    else if (req.url?.startsWith('/rst')) req.socket.destroy();
    else if (req.url?.startsWith('/partial')) {
      res.writeHead(200, { 'content-length': '100' });
      res.write('abc', () => req.socket.destroy()); // headers and part of the body, then the socket closes
    }
    else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }));
  });
  await new Promise<void>((r) => h1.listen(0, '127.0.0.1', r));
  try {
    const c = new Connection(`https://127.0.0.1:${(h1.address() as AddressInfo).port}`, { tls: { ca: Buffer.from(cert.cert) } });
    for (const path of ['/fin/1', '/rst/1', '/ok', '/fin/2', '/rst/2', '/partial']) {
      const outcome = await Promise.race([
        (async () => {
          const res = await c.send(get(path));
          return `resolved ${res.status}: ${await readText(res.body)}`;
        })().catch((err: Error) => `rejected: ${err.message}`),
        new Promise<string>((r) => setTimeout(() => r('still waiting after 5 s'), 5_000).unref()),
      ]);
      if (path === '/ok') assert.equal(outcome, 'resolved 200: {"path":"/ok"}');
      else assert.match(outcome, /^rejected: /, `${path}: ${outcome}`);
    }
    assert.equal(c.protocol, 'h1');
    assert.equal(await pathOf((await c.send(get('/after'))).body), '/after', 'the connection still serves');
    c.close();
  } finally {
    h1.closeAllConnections();
    await new Promise<void>((r) => h1.close(() => r()));
  }
});

test('concurrent first writes (beforeSend) on a connecting session hold the event loop until answered (the process does not exit with them pending)', async () => {
  // A fresh process with nothing else alive: before the fix, two writes waiting for the session to connect held the
  // stream slot without ref-ing the session, and the process exited with both promises pending (exit code 13).
  const { execFile } = await import('node:child_process');
  const script = `
    import { Connection } from ${JSON.stringify(new URL('./connection.ts', import.meta.url).href)};
    const c = new Connection('https://127.0.0.1:${port}', { tls: { ca: Buffer.from(${JSON.stringify(cert.cert.toString())}) } });
    const send = () => c.send({ method: 'POST', path: '/w', headers: {}, body: '{}', signal: new AbortController().signal, buffered: true, beforeSend: () => {} });
    const r = await Promise.all([send(), send(), send()]);
    console.log('answered', r.map((x) => x.status).join(','));
    c.close();`;
  const out = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
    const child = execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 30_000 }, (err, stdout) => resolve({ code: err ? (err as { code?: number }).code ?? 1 : 0, stdout }));
    child.stdin?.end();
  });
  assert.equal(out.stdout.trim(), 'answered 200,200,200');
  assert.equal(out.code, 0);
});

test('many writes waiting for a new session to connect share one wait (no MaxListenersExceededWarning on the session)', async () => {
  // The server sends GOAWAY on its first session after one request: the next writes all pick a NEW session, still
  // connecting, and wait for it (beforeSend). Each waiter used to add three listeners of its own: > 10 waiters crossed
  // the emitter's limit.
  const goaway = createSecureServer({ cert: cert.cert, key: cert.key });
  let first = true;
  goaway.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    stream.end('{}');
    if (first) {
      first = false;
      stream.session?.goaway();
    }
  });
  await new Promise<void>((r) => goaway.listen(0, '127.0.0.1', r));
  const warnings: string[] = [];
  const onWarning = (w: Error): void => {
    warnings.push(`${w.name}: ${w.message}`);
  };
  process.on('warning', onWarning);
  const c = new Connection(`https://127.0.0.1:${(goaway.address() as AddressInfo).port}`, { tls: { ca: Buffer.from(cert.cert) } });
  try {
    const write = () => c.send({ method: 'POST', path: '/w', headers: {}, body: '{}', signal: new AbortController().signal, buffered: true, beforeSend: () => {} });
    assert.equal((await write()).status, 200);
    await new Promise<void>((r) => setImmediate(r)); // the GOAWAY retires the first session
    const answers = await Promise.all(Array.from({ length: 20 }, write));
    assert.deepEqual(answers.map((a) => a.status), Array<number>(20).fill(200));
    await new Promise<void>((r) => setImmediate(r)); // warnings are emitted on the next tick
    assert.deepEqual(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')), []);
  } finally {
    process.off('warning', onWarning);
    c.close();
    await new Promise<void>((r) => goaway.close(() => r()));
  }
});
