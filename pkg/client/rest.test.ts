import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { selfSignedCertificate } from '../manager/selfsigned.ts';
import type { Transport } from './transport.ts';
import { KubeConfig, type User } from './kubeconfig.ts';
import { ApiError, RestClient } from './rest.ts';

/** A plain-HTTP stand-in for the API server that records each request's client port and Authorization header. */
let server: Server;
let base = '';
const seen: { port: number; auth: string | undefined; path: string }[] = [];
let hold: ((req: IncomingMessage) => Promise<void>) | undefined;

before(async () => {
  server = createServer((req, res) => {
    seen.push({ port: req.socket.remotePort ?? 0, auth: req.headers.authorization, path: req.url ?? '' });
    void (hold ? hold(req) : Promise.resolve()).then(() => {
      if (req.url?.startsWith('/missing')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'gone' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

function client(user: Omit<User, 'name'>): RestClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: base }], users: [{ name: 'u', ...user }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new RestClient({ kubeConfig: kc, registry: new Registry() });
}

test('every request of a client goes over ONE connection: 20 sequential + 5 parallel requests, one TLS session (HTTP/2)', async (t) => {
  // The API server's transport: TLS with ALPN h2 (a plain-HTTP/1.1 server needs one socket per parallel request).
  const cert = await selfSignedCertificate({ commonName: 'one', ips: ['127.0.0.1'] });
  const ports = new Set<number>();
  const auth: (string | undefined)[] = [];
  let sessions = 0;
  const h2 = createSecureServer({ cert: cert.cert, key: cert.key });
  h2.on('session', () => sessions++);
  h2.on('request', (req, res) => {
    ports.add(req.socket.remotePort ?? 0);
    auth.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }));
  });
  await new Promise<void>((r) => h2.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => h2.close(() => r())));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${(h2.address() as AddressInfo).port}`, caData: Buffer.from(cert.cert).toString('base64') }],
    users: [{ name: 'u', token: 't' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry() });
  for (let i = 0; i < 20; i++) await rest.json('GET', `/r/${i}`);
  await Promise.all(Array.from({ length: 5 }, (_, i) => rest.json('GET', `/p/${i}`)));
  // One connection per request (what client-node's per-request dispatcher does) would be 25.
  assert.equal(auth.length, 25);
  assert.equal(sessions, 1, 'one TLS connection');
  assert.equal(ports.size, 1, 'one client port');
  assert.ok(auth.every((a) => a === 'Bearer t'));
  await rest.close();
});

test('a rotated token file is used at once (re-read when its mtime changes), without a new connection pool', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rest-'));
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, 'first\n');
  const rest = client({ tokenFile });
  seen.length = 0;
  await rest.json('GET', '/a');
  const before = (rest.transport as Transport).sender();
  writeFileSync(tokenFile, 'second-and-longer\n');
  // The file is checked at most once a second: poll until the new token is sent.
  const deadline = Date.now() + 5000;
  while (seen.at(-1)?.auth !== 'Bearer second-and-longer' && Date.now() < deadline) {
    await rest.json('GET', '/b');
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(seen.at(-1)?.auth, 'Bearer second-and-longer');
  assert.equal(seen[0]?.auth, 'Bearer first');
  assert.equal((rest.transport as Transport).sender(), before, 'a token change keeps the pool');
  await rest.close();
});

test('a rewritten client certificate file rebuilds the pool (old one closed gracefully)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rest-'));
  const certFile = join(dir, 'tls.crt');
  writeFileSync(certFile, 'A');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: base }], users: [{ name: 'u', certFile, keyData: Buffer.from('k').toString('base64') }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry() });
  const first = (rest.transport as Transport).sender();
  assert.equal((rest.transport as Transport).sender(), first);
  writeFileSync(certFile, 'BB');
  const deadline = Date.now() + 5000;
  while ((rest.transport as Transport).sender() === first && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.notEqual((rest.transport as Transport).sender(), first);
  await rest.close();
});

test('an exec credential plugin is run once and its token cached until it expires', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rest-'));
  const counter = join(dir, 'count');
  const plugin = join(dir, 'plugin.sh');
  const expires = new Date(Date.now() + 3600_000).toISOString();
  writeFileSync(plugin, `#!/bin/sh\necho x >> ${counter}\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-'"$MY_VAR"'","expirationTimestamp":"${expires}"}}'\n`);
  chmodSync(plugin, 0o755);
  const rest = client({ exec: { command: plugin, env: [{ name: 'MY_VAR', value: 'v1' }] } });
  seen.length = 0;
  await Promise.all([rest.json('GET', '/e1'), rest.json('GET', '/e2')]);
  await rest.json('GET', '/e3');
  assert.deepEqual(seen.map((s) => s.auth), ['Bearer exec-v1', 'Bearer exec-v1', 'Bearer exec-v1']);
  const { readFileSync } = await import('node:fs');
  assert.equal(readFileSync(counter, 'utf8').trim().split('\n').length, 1, 'concurrent requests share one plugin run');
  await rest.close();
});

test('non-2xx answers throw ApiError with the Status reason; a timeout aborts the request and frees it', async () => {
  const rest = client({});
  await assert.rejects(rest.json('GET', '/missing/x'), (err: unknown) => err instanceof ApiError && err.status === 404 && err.reason === 'NotFound');
  hold = () => new Promise((r) => setTimeout(r, 2000));
  try {
    await assert.rejects(rest.json('GET', '/slow', { timeoutMs: 50 }), /timed out|aborted/i);
    const ac = new AbortController();
    const p = rest.json('GET', '/slow2', { signal: ac.signal });
    ac.abort(new Error('caller gave up'));
    await assert.rejects(p, /caller gave up|aborted/i);
  } finally {
    hold = undefined;
  }
  await rest.close();
});

/** A second stand-in that records method, URL, headers and body of every request and answers from `answer`. */
async function recordingServer(answer: (req: IncomingMessage, body: string) => { status: number; type?: string; body: string }): Promise<{
  url: string; seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[]; close: () => Promise<void>;
}> {
  const seenReqs: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = [];
  const srv = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => {
      seenReqs.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const a = answer(req, body);
      res.writeHead(a.status, { 'content-type': a.type ?? 'application/json' }).end(a.body);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    seen: seenReqs,
    close: () => new Promise<void>((r) => srv.close(() => r())),
  };
}

function clientFor(server: string, registry = new Registry(), userAgent?: string): RestClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server }], users: [{ name: 'u', token: 'tok' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new RestClient({ kubeConfig: kc, registry, ...(userAgent ? { userAgent } : {}) });
}

test('a plain-text error body (the API server\'s "404 page not found\\n" for an unknown group) becomes a one-line ApiError', async () => {
  const srv = await recordingServer(() => ({ status: 404, type: 'text/plain; charset=utf-8', body: '404 page not found\n' }));
  const rest = clientFor(srv.url);
  try {
    await assert.rejects(rest.json('GET', '/apis/nope.example.com/v1/widgets'), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 404);
      assert.equal(err.reason, 'Not Found');
      assert.equal(err.message, 'GET /apis/nope.example.com/v1/widgets: HTTP 404: 404 page not found');
      return true;
    });
  } finally {
    await rest.close();
    await srv.close();
  }
});

test('a Status error body gives reason and message; an empty 2xx body decodes as {}', async () => {
  const srv = await recordingServer((req) => req.url?.startsWith('/conflict')
    ? { status: 409, body: JSON.stringify({ kind: 'Status', code: 409, reason: 'AlreadyExists', message: 'foos.x "a" already exists' }) }
    : { status: 200, body: '' });
  const rest = clientFor(srv.url);
  try {
    await assert.rejects(rest.json('POST', '/conflict', { body: {} }), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.reason, 'AlreadyExists');
      assert.equal(err.message, 'POST /conflict: HTTP 409 AlreadyExists: foos.x "a" already exists');
      assert.deepEqual(err.body, { kind: 'Status', code: 409, reason: 'AlreadyExists', message: 'foos.x "a" already exists' });
      return true;
    });
    assert.deepEqual(await rest.json('DELETE', '/empty'), {});
  } finally {
    await rest.close();
    await srv.close();
  }
});

test('requests carry the server URL\'s path prefix, the query (undefined dropped), token, user agent and body', async () => {
  const srv = await recordingServer((_req, body) => ({ status: 200, body: JSON.stringify({ echo: body }) }));
  const rest = clientFor(`${srv.url}/k8s/clusters/c1/`, new Registry(), 'tscm-test/1.0');
  try {
    await rest.json('GET', '/api/v1/pods', { query: { limit: 500, continue: undefined, labelSelector: 'a=b,c in (d)', watch: false } });
    await rest.json('GET', '/api/v1/pods?pretty=1', { query: { limit: 1 } });
    const patched = await rest.json<{ echo: string }>('PATCH', '/apis/apps/v1/namespaces/n/deployments/d', {
      body: { spec: { replicas: 2 } }, contentType: 'application/merge-patch+json',
    });
    await rest.json('PUT', '/raw', { body: '{"as":"is"}' });
    const [list, withQuery, patch, put] = srv.seen;
    assert.equal(list?.url, '/k8s/clusters/c1/api/v1/pods?limit=500&labelSelector=a%3Db%2Cc+in+%28d%29&watch=false');
    assert.equal(withQuery?.url, '/k8s/clusters/c1/api/v1/pods?pretty=1&limit=1');
    assert.equal(list?.headers.authorization, 'Bearer tok');
    assert.equal(list?.headers['user-agent'], 'tscm-test/1.0');
    assert.equal(list?.headers.accept, 'application/json');
    assert.equal(list?.headers['content-type'], undefined, 'no body, no content type');
    assert.equal(patch?.method, 'PATCH');
    assert.equal(patch?.headers['content-type'], 'application/merge-patch+json');
    assert.equal(patched.echo, '{"spec":{"replicas":2}}');
    assert.equal(put?.headers['content-type'], 'application/json');
    assert.equal(put?.body, '{"as":"is"}', 'a string body is sent as it is');
    assert.equal(rest.url('/api/v1/pods', { limit: 1, x: undefined }), `${srv.url}/k8s/clusters/c1/api/v1/pods?limit=1`);
  } finally {
    await rest.close();
    await srv.close();
  }
});

test('rest_client_requests_total counts every request by code and method, and "<error>" when there is no response', async () => {
  const srv = await recordingServer((req) => ({ status: req.url === '/nf' ? 404 : 200, body: '{}' }));
  const registry = new Registry();
  const rest = clientFor(srv.url, registry);
  const value = async (code: string, method: string): Promise<number> => {
    const m = await registry.getSingleMetric('rest_client_requests_total')?.get();
    return m?.values.find((v) => v.labels['code'] === code && v.labels['method'] === method)?.value ?? 0;
  };
  try {
    await rest.json('GET', '/a');
    await rest.json('GET', '/b');
    await assert.rejects(rest.json('GET', '/nf'));
    await rest.json('POST', '/c', { body: {} });
    const raw = await rest.request('GET', '/stream');
    await raw.dump();
    assert.equal(await value('200', 'GET'), 3, 'json and raw requests alike');
    assert.equal(await value('404', 'GET'), 1);
    assert.equal(await value('201', 'POST') + await value('200', 'POST'), 1);
    const m = await registry.getSingleMetric('rest_client_requests_total')?.get();
    assert.ok(m?.values.every((v) => v.labels['host'] === new URL(srv.url).host));
  } finally {
    await rest.close();
    await srv.close();
  }
  const dead = clientFor(srv.url, registry); // the server is closed now: connection refused
  await assert.rejects(dead.json('GET', '/gone', { timeoutMs: 5_000 }));
  await dead.close();
  assert.equal(await value('<error>', 'GET'), 1);
});
