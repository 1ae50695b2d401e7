import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { selfSignedCertificate } from '../manager/selfsigned.ts';
import { KubeConfig, type User } from './kubeconfig.ts';
import { RestClient } from './rest.ts';
import { sharedTransports, TransportCache, transportKey, type Transport } from './transport.ts';

/** An HTTP/2 TLS server standing in for the API server: counts TLS sessions and records each request. */
const cert = await selfSignedCertificate({ commonName: 'cache', ips: ['127.0.0.1'] });
let server: Http2SecureServer;
let origin = '';
let sessions = 0;
const seen: { method: string; path: string; auth: string | undefined }[] = [];

before(async () => {
  server = createSecureServer({ cert: cert.cert, key: cert.key });
  server.on('session', () => sessions++);
  server.on('request', (req, res) => {
    seen.push({ method: req.method, path: req.url, auth: req.headers.authorization });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

/** A fresh KubeConfig object (as each caller would load its own) for the test server and `user`. */
function kubeConfig(user: Omit<User, 'name'>): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: origin, caData: Buffer.from(cert.cert).toString('base64') }],
    users: [{ name: 'u', ...user }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return kc;
}

/** An exec credential plugin that appends one line to `runs` per run and prints a token. */
function execPlugin(): { user: Omit<User, 'name'>; runs: () => number } {
  const dir = mkdtempSync(join(tmpdir(), 'cache-exec-'));
  const command = join(dir, 'plugin.sh');
  const runs = join(dir, 'runs');
  writeFileSync(runs, '');
  writeFileSync(command, `#!/bin/sh
echo run >> '${runs}'
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token"}}'
`);
  chmodSync(command, 0o755);
  return {
    user: { exec: { command, apiVersion: 'client.authentication.k8s.io/v1' } },
    runs: () => readFileSync(runs, 'utf8').split('\n').filter(Boolean).length,
  };
}

test('clients of equal kubeconfig settings share one Transport and one TLS connection; the write gate stays per client', async () => {
  const beforeSessions = sessions;
  seen.length = 0;
  const gate = new AbortController();
  // What ControllerManager builds with --leader-elect --sharding: a reader, a gated client, a gated sharder writer.
  const reader = new RestClient({ kubeConfig: kubeConfig({ token: 't' }), registry: new Registry() });
  const client = new RestClient({ kubeConfig: kubeConfig({ token: 't' }), registry: new Registry(), writeGate: gate.signal });
  const writer = new RestClient({ kubeConfig: kubeConfig({ token: 't' }), registry: new Registry(), writeGate: new AbortController().signal });
  assert.equal(reader.transport, client.transport);
  assert.equal(reader.transport, writer.transport);
  await Promise.all([reader, client, writer].flatMap((c, i) => [c.json('GET', `/get/${i}`), c.json('POST', `/post/${i}`, { body: {} })]));
  gate.abort(new Error('leadership lost'));
  await assert.rejects(client.json('POST', '/refused', { body: {} }), /leadership lost/);
  await reader.json('POST', '/reader-writes', { body: {} });
  await writer.json('POST', '/writer-writes', { body: {} });
  assert.equal(sessions - beforeSessions, 1, 'one TLS connection for the three clients');
  assert.equal(seen.length, 8);
  assert.ok(!seen.some((s) => s.path === '/refused'), 'the gated client alone refused its write');
  for (const c of [reader, client, writer]) await c.close();
});

test('an exec credential plugin runs once for every client of the process (its credential is shared)', async () => {
  const plugin = execPlugin();
  const clients = [0, 1, 2].map(() => new RestClient({ kubeConfig: kubeConfig(plugin.user), registry: new Registry() }));
  seen.length = 0;
  await Promise.all(clients.map((c, i) => c.json('GET', `/exec/${i}`)));
  await Promise.all(clients.map((c, i) => c.json('GET', `/exec-again/${i}`)));
  assert.equal(plugin.runs(), 1, 'one plugin run for 3 clients × 2 requests');
  assert.ok(seen.every((s) => s.auth === 'Bearer exec-token'));
  for (const c of clients) await c.close();
});

test('different credentials or clusters get separate Transports; the last close closes a shared one', async () => {
  const a = new RestClient({ kubeConfig: kubeConfig({ token: 'a' }), registry: new Registry() });
  const b = new RestClient({ kubeConfig: kubeConfig({ token: 'b' }), registry: new Registry() });
  assert.notEqual(a.transport, b.transport, 'another user: another transport');
  assert.notEqual(transportKey(kubeConfig({ token: 'a' })), transportKey(kubeConfig({ token: 'b' })));
  const a2 = new RestClient({ kubeConfig: kubeConfig({ token: 'a' }), registry: new Registry() });
  assert.equal(a2.transport, a.transport);
  await a.close();
  await a.close(); // idempotent: one client's hold is dropped once
  await a2.json('GET', '/still-open');
  await a2.close();
  assert.throws(() => (a2.transport as Transport).sender(), /transport closed/, 'closed with its last client');
  const a3 = new RestClient({ kubeConfig: kubeConfig({ token: 'a' }), registry: new Registry() });
  assert.notEqual(a3.transport, a2.transport, 'a later client gets a fresh transport');
  await a3.json('GET', '/fresh');
  await a3.close();
  await b.close();
});

test('TransportCache: acquire/release counts holds per key', () => {
  const cache = new TransportCache();
  const one = cache.acquire(kubeConfig({ token: 'x' }));
  const two = cache.acquire(kubeConfig({ token: 'x' }));
  assert.equal(one.transport, two.transport);
  assert.equal(cache.size, 1);
  one.release();
  one.release();
  assert.equal(cache.size, 1, 'the second release of one hold is a no-op');
  two.release();
  assert.equal(cache.size, 0);
  assert.ok(sharedTransports instanceof TransportCache);
});
