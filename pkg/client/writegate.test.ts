import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureServer } from 'node:http2';
import { connect as netConnect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedCertificate } from '../manager/selfsigned.ts';
import { KubeConfig } from './kubeconfig.ts';
import { Registry } from 'prom-client';
import { RestClient } from './rest.ts';
import { ForwardProxy } from '../../test/helpers/proxies.ts';

/** A plain-HTTP stand-in for the API server: records requests; `delayMs` delays the answer to writes. */
async function server(opts: { delayMs?: number } = {}): Promise<{ url: string; seen: string[]; close: () => Promise<void> }> {
  const seen: string[] = [];
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url}`);
    const answer = (): void => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    if (opts.delayMs && req.method !== 'GET') setTimeout(answer, opts.delayMs);
    else answer();
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`, seen,
    close: () => new Promise<void>((resolve) => {
      srv.closeAllConnections();
      srv.close(() => resolve());
    }),
  };
}

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

test('writeGate: once it aborted, every non-GET request is refused before anything is sent; GETs still work', async (t) => {
  const s = await server();
  t.after(s.close);
  const gate = new AbortController();
  const rest = new RestClient({ kubeConfig: kubeConfig(s.url), registry: new Registry(), writeGate: gate.signal });
  await rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} });
  gate.abort(new Error('leadership lost'));
  for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    await assert.rejects(rest.json(verb, '/api/v1/namespaces/ns/configmaps/x', { body: {} }), /leadership lost/);
  }
  await rest.json('GET', '/api/v1/namespaces/ns/configmaps');
  assert.deepEqual(s.seen, ['POST /api/v1/namespaces/ns/configmaps', 'GET /api/v1/namespaces/ns/configmaps']);
});

test('a write already sent is not cut by its signal or the gate (it runs to its answer); the next one is refused', async (t) => {
  const s = await server({ delayMs: 300 });
  t.after(s.close);
  const gate = new AbortController();
  const caller = new AbortController();
  const rest = new RestClient({ kubeConfig: kubeConfig(s.url), registry: new Registry(), writeGate: gate.signal });
  const pending = rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {}, signal: caller.signal });
  while (s.seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  caller.abort(new Error('shutting down'));
  gate.abort(new Error('leadership lost'));
  assert.deepEqual(await pending, {});
  await assert.rejects(rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} }), /leadership lost/);
  await assert.rejects(rest.json('PATCH', '/x', { body: {}, signal: caller.signal }), /shutting down|leadership lost/);
  assert.equal(s.seen.length, 1);
});

/**
 * An exec credential plugin that takes as long as the test wants: it creates `started`, then waits until `go` exists
 * before printing its ExecCredential, and counts its runs in `runs`.
 */
function slowExecPlugin(dir: string): { command: string; started: string; go: string; runs: () => number } {
  const command = join(dir, 'plugin.sh');
  const started = join(dir, 'started');
  const go = join(dir, 'go');
  const runs = join(dir, 'runs');
  writeFileSync(command, `#!/bin/sh
echo run >> '${runs}'
touch '${started}'
while [ ! -e '${go}' ]; do sleep 0.02; done
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'
`);
  chmodSync(command, 0o755);
  return { command, started, go, runs: () => (existsSync(runs) ? readFileSync(runs, 'utf8').split('\n').filter(Boolean).length : 0) };
}

test('the gate is checked again after the credentials: a write whose exec plugin was slow while the gate aborted is never sent', async (t) => {
  // Issue 23 item 6: the gate was checked before `await transport.headers()` only.
  const s = await server();
  t.after(s.close);
  const plugin = slowExecPlugin(mkdtempSync(join(tmpdir(), 'gate-exec-')));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: s.url }],
    users: [{ name: 'u', exec: { command: plugin.command, apiVersion: 'client.authentication.k8s.io/v1' } }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const gate = new AbortController();
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), writeGate: gate.signal });
  t.after(() => rest.close());
  const write = rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} });
  const outcome = write.then(() => 'sent', (err: Error) => err.message);
  while (!existsSync(plugin.started)) await new Promise((resolve) => setTimeout(resolve, 10));
  gate.abort(new Error('leadership lost while the exec plugin ran'));
  writeFileSync(plugin.go, '');
  assert.equal(await outcome, 'leadership lost while the exec plugin ran');
  assert.deepEqual(s.seen, [], 'nothing reached the server');
  await rest.json('GET', '/api/v1/namespaces/ns/configmaps');
  assert.deepEqual(s.seen, ['GET /api/v1/namespaces/ns/configmaps'], 'reads still go');
});

test('the gate is checked again after the connection set-up: a write whose TLS handshake was held while the gate aborted is never sent', async (t) => {
  const cert = await selfSignedCertificate({ commonName: 'gate', ips: ['127.0.0.1'] });
  const seen: string[] = [];
  const h2 = createSecureServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
  // A TCP relay that holds every new connection (bytes buffered, nothing forwarded) until released.
  const held: Socket[] = [];
  const relay = createNetServer((client) => {
    client.pause();
    held.push(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const upstreams: Socket[] = [];
  const release = (): void => {
    for (const client of held.splice(0)) {
      const up = netConnect((h2.address() as AddressInfo).port, '127.0.0.1', () => {
        client.pipe(up);
        up.pipe(client);
        client.resume();
      });
      upstreams.push(up, client);
    }
  };
  t.after(async () => {
    for (const so of [...upstreams, ...held]) so.destroy();
    await new Promise((resolve) => relay.close(resolve));
    await new Promise((resolve) => h2.close(resolve));
  });
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${(relay.address() as AddressInfo).port}`, caData: Buffer.from(cert.cert).toString('base64') }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const gate = new AbortController();
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), writeGate: gate.signal });
  t.after(() => rest.close());
  const outcome = rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} }).then(() => 'sent', (err: Error) => err.message);
  while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  gate.abort(new Error('leadership lost during the handshake'));
  release();
  assert.equal(await outcome, 'leadership lost during the handshake');
  await rest.json('GET', '/api/v1/namespaces/ns/configmaps');
  assert.deepEqual(seen, ['GET /api/v1/namespaces/ns/configmaps'], 'the write never reached the server; the read did');
});

test('HTTP/1.1 (a server without h2): the gate is checked again after a new socket\'s TLS handshake, held while the gate aborted', async (t) => {
  // docs/safety.md: "for HTTP/1.1 the socket's connect/secureConnect". The server offers no ALPN, so the client
  // speaks HTTP/1.1 over a keep-alive pool; a GET held at the server keeps the pool's one socket busy, so the write
  // needs a new socket, whose handshake the relay holds while the gate aborts.
  const cert = await selfSignedCertificate({ commonName: 'gate-h1', ips: ['127.0.0.1'] });
  const seen: string[] = [];
  let releaseSlow: (() => void) | undefined;
  const h1 = createHttpsServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    seen.push(`${req.method} ${req.url} HTTP/${req.httpVersion}`);
    const answer = (): void => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    if (req.url === '/slow') releaseSlow = answer;
    else answer();
  });
  await new Promise<void>((resolve) => h1.listen(0, '127.0.0.1', resolve));
  // A TCP relay: pipes at once until `holding`, then keeps new connections paused until released.
  let holding = false;
  const held: Socket[] = [];
  const sockets: Socket[] = [];
  const pipe = (client: Socket): void => {
    const up = netConnect((h1.address() as AddressInfo).port, '127.0.0.1', () => {
      client.pipe(up);
      up.pipe(client);
      client.resume();
    });
    sockets.push(up, client);
  };
  const relay = createNetServer((client) => {
    client.pause();
    if (holding) held.push(client);
    else pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const so of [...sockets, ...held]) so.destroy();
    h1.closeAllConnections();
    await new Promise((resolve) => relay.close(resolve));
    await new Promise((resolve) => h1.close(resolve));
  });
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${(relay.address() as AddressInfo).port}`, caData: Buffer.from(cert.cert).toString('base64') }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const gate = new AbortController();
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), writeGate: gate.signal });
  t.after(() => rest.close());
  const slow = rest.json('GET', '/slow');
  while (releaseSlow === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
  holding = true;
  const outcome = rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} }).then(() => 'sent', (err: Error) => err.message);
  while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  gate.abort(new Error('leadership lost during the HTTP/1.1 handshake'));
  holding = false;
  for (const client of held.splice(0)) pipe(client);
  assert.equal(await outcome, 'leadership lost during the HTTP/1.1 handshake');
  releaseSlow();
  assert.deepEqual(await slow, {});
  assert.deepEqual(seen, ['GET /slow HTTP/1.1'], 'the write never reached the server; the held read did, over HTTP/1.1');
});

test('through an HTTP proxy (kubeconfig proxy-url): the gate is checked after the credentials, before the tunnel is opened', async (t) => {
  // docs/safety.md: "Through an HTTP(S) proxy the last check is after the credentials but before undici opens the tunnel."
  const s = await server();
  t.after(s.close);
  const proxy = await ForwardProxy.start();
  t.after(() => proxy.close());
  const plugin = slowExecPlugin(mkdtempSync(join(tmpdir(), 'gate-proxy-')));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: s.url, proxyUrl: proxy.url }],
    users: [{ name: 'u', exec: { command: plugin.command, apiVersion: 'client.authentication.k8s.io/v1' } }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const gate = new AbortController();
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), writeGate: gate.signal });
  t.after(() => rest.close());
  const outcome = rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} }).then(() => 'sent', (err: Error) => err.message);
  while (!existsSync(plugin.started)) await new Promise((resolve) => setTimeout(resolve, 10));
  gate.abort(new Error('leadership lost while the exec plugin ran (proxied)'));
  writeFileSync(plugin.go, '');
  assert.equal(await outcome, 'leadership lost while the exec plugin ran (proxied)');
  assert.deepEqual(proxy.seen, [], 'no tunnel or request reached the proxy');
  assert.deepEqual(s.seen, [], 'nothing reached the server');
  await rest.json('GET', '/api/v1/namespaces/ns/configmaps');
  assert.deepEqual(s.seen, ['GET /api/v1/namespaces/ns/configmaps'], 'reads still go');
  assert.ok(proxy.count(new URL(s.url).host) >= 1, `the read went through the proxy: ${JSON.stringify(proxy.seen)}`);
});
