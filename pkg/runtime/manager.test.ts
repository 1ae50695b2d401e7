/**
 * The User-Agent every API request of a ControllerManager carries (docs/architecture.md, "Leader election"):
 * `ts-controller-manager/<version> (<identity>)`, the version being package.json's and the identity the Lease holder
 * identity — default `<hostname>_<uuid>`. The audit-log checks of the chaos and sharding tests read the identity out
 * of it (test/helpers/audit.ts `identityOf`); this test pins the whole string, version included, without a cluster:
 * a local HTTP server stands in for the API server and records the header of each request.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from '../client/kubeconfig.ts';
import { silentLogger } from '../log/logger.ts';
import { ControllerManager, packageVersion } from './manager.ts';

/** Read here, not through packageVersion(), so a packageVersion() that fell back to 'unknown' fails the test. */
const version = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let server: Server;
let base = '';
const seen: { method: string; path: string; userAgent: string | undefined }[] = [];

before(async () => {
  server = createServer((req, res) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', userAgent: req.headers['user-agent'] });
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: base }], users: [{ name: 'u', token: 'tok' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return kc;
}

test('packageVersion() is package.json\'s version', () => {
  assert.match(version, /^\d+\.\d+\.\d+/);
  assert.equal(packageVersion(), version);
});

test('every request (reads and writes) carries User-Agent ts-controller-manager/<package.json version> (<identity>)', async () => {
  seen.length = 0;
  const mgr = new ControllerManager({ kubeConfig: kubeConfig(), registry: new Registry(), logger: silentLogger, identity: 'node-a_1234' });
  try {
    await mgr.reader.json('GET', '/api/v1/namespaces/default/configmaps');
    await mgr.client.json('POST', '/api/v1/namespaces/default/events', { body: { kind: 'Event' } });
  } finally {
    await mgr.client.close();
    await mgr.reader.close();
  }
  assert.deepEqual(seen.map((s) => [s.method, s.userAgent]), [
    ['GET', `ts-controller-manager/${version} (node-a_1234)`],
    ['POST', `ts-controller-manager/${version} (node-a_1234)`],
  ]);
});

test('the default identity in the User-Agent is the Lease holder identity <hostname>_<uuid>, on the reader and the leader-gated client', async () => {
  seen.length = 0;
  const mgr = new ControllerManager({
    kubeConfig: kubeConfig(), registry: new Registry(), logger: silentLogger, leaderElection: { id: 'ua-test', namespace: 'default' },
  });
  try {
    assert.notEqual(mgr.client, mgr.reader, 'with leader election the controllers write through their own gated client');
    await mgr.reader.json('GET', '/apis/coordination.k8s.io/v1/namespaces/default/leases/ua-test');
    await mgr.client.json('GET', '/api/v1/namespaces/default/configmaps');
  } finally {
    await mgr.client.close();
    await mgr.reader.close();
  }
  const uuid = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
  assert.match(mgr.identity, new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}_${uuid}$`));
  assert.deepEqual(seen.map((s) => s.userAgent), [
    `ts-controller-manager/${version} (${mgr.identity})`,
    `ts-controller-manager/${version} (${mgr.identity})`,
  ]);
});

test('webhooks: no server until one is registered; then the server and a /readyz check "webhook-server"; bindAddress "0" refuses them', async () => {
  const mgr = new ControllerManager({ kubeConfig: kubeConfig(), registry: new Registry(), logger: silentLogger, webhook: { bindAddress: '127.0.0.1:0' } });
  const off = new ControllerManager({ kubeConfig: kubeConfig(), registry: new Registry(), logger: silentLogger, webhook: { bindAddress: '0' } });
  try {
    // Read through a function: assert.equal narrows a property read to `undefined` for the rest of the block.
    const server = (): { paths(): string[] } | undefined => mgr.webhookServer;
    assert.equal(server(), undefined);
    assert.equal(mgr.health.has('readyz', 'webhook-server'), false);
    const builder = mgr.webhook({ group: 'example.com', version: 'v1', kind: 'Widget' }).withValidator({});
    assert.equal(server(), undefined, 'a builder not completed starts nothing');
    builder.complete();
    assert.deepEqual(server()?.paths(), ['/validate-example-com-v1-widget']);
    assert.equal(mgr.health.has('readyz', 'webhook-server'), true);
    const [ready] = await mgr.health.run('readyz', { only: 'webhook-server' });
    assert.equal(ready?.ok, false, 'not ready before the manager started the server');

    assert.equal(off.webhooksEnabled(), false);
    assert.throws(() => off.webhook({ group: 'example.com', version: 'v1', kind: 'Widget' }), /webhook server is off/);
  } finally {
    await Promise.all([mgr.client.close(), mgr.reader.close(), off.client.close(), off.reader.close()]);
  }
});
