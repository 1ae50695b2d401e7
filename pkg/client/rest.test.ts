import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
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

test('every request of a client reuses one connection (one pool per RestClient, not one per request)', async () => {
  const rest = client({ token: 't' });
  seen.length = 0;
  for (let i = 0; i < 20; i++) await rest.json('GET', `/r/${i}`);
  await Promise.all(Array.from({ length: 5 }, (_, i) => rest.json('GET', `/p/${i}`)));
  const ports = new Set(seen.map((s) => s.port));
  // One connection per request (what client-node's per-request dispatcher does) would be 25. HTTP/1.1 keep-alive:
  // a request may start before the previous response's socket is back in the pool, so allow one spare.
  assert.ok(ports.size <= 7, `20 sequential + 5 parallel requests used ${ports.size} connections`);
  assert.ok(new Set(seen.slice(0, 20).map((s) => s.port)).size <= 2, 'sequential requests share keep-alive connections');
  assert.ok(seen.every((s) => s.auth === 'Bearer t'));
  await rest.close();
});

test('a rotated token file is used at once (re-read when its mtime changes), without a new connection pool', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rest-'));
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, 'first\n');
  const rest = client({ tokenFile });
  seen.length = 0;
  await rest.json('GET', '/a');
  const before = rest.transport.sender();
  writeFileSync(tokenFile, 'second-and-longer\n');
  // The file is checked at most once a second: poll until the new token is sent.
  const deadline = Date.now() + 5000;
  while (seen.at(-1)?.auth !== 'Bearer second-and-longer' && Date.now() < deadline) {
    await rest.json('GET', '/b');
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(seen.at(-1)?.auth, 'Bearer second-and-longer');
  assert.equal(seen[0]?.auth, 'Bearer first');
  assert.equal(rest.transport.sender(), before, 'a token change keeps the pool');
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
  const first = rest.transport.sender();
  assert.equal(rest.transport.sender(), first);
  writeFileSync(certFile, 'BB');
  const deadline = Date.now() + 5000;
  while (rest.transport.sender() === first && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.notEqual(rest.transport.sender(), first);
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
