/**
 * The webhook example's own test, envtest-style: a real etcd + kube-apiserver from `ts-controller-manager/testing`
 * with crd.yaml installed and config/webhook installed through the `webhooks` option (the Service in each
 * clientConfig replaced by `https://127.0.0.1:<port>/<path>` and a CA made for the test); the webhook server run as
 * its own process (`node main.ts`) on the address and certificate directory the environment gives; every write goes
 * through the API server, which calls the webhooks.
 *   node --test main.test.ts
 * (From a clone of ts-controller-manager: NODE_OPTIONS=--conditions=ts-controller-manager-source node --test examples/webhook/main.test.ts)
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ApiError, ignoreNotFound } from 'ts-controller-manager';
import { startTestEnv, type TestEnv } from 'ts-controller-manager/testing';
import { apiVersion, cacheResource, type Cache, type CacheSpec } from './api/example/v1/zz_generated.types.ts';

let env: TestEnv;
let server: ChildProcess;
let logs = '';

before(async () => {
  env = await startTestEnv({ crdPaths: [join(import.meta.dirname, 'crd.yaml')], webhooks: { paths: [join(import.meta.dirname, 'config', 'webhook')] } });
  console.log(`control plane ready in ${(env.startMs / 1000).toFixed(1)} s`);
  server = spawn(process.execPath, ['main.ts'], {
    cwd: import.meta.dirname, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KUBECONFIG: env.kubeconfigPath, PROBE_ADDRESS: '0', WEBHOOK_BIND_ADDRESS: env.webhook?.bindAddress, WEBHOOK_CERT_DIR: env.webhook?.certDir },
  });
  server.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
  server.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
  // Until the API server has loaded the configurations and reaches the server, writes could pass unchecked.
  const t0 = Date.now();
  await env.waitForWebhooks({ timeoutMs: 30_000 }).catch((err: unknown) => assert.fail(`${String(err)}\nserver logs:\n${logs.slice(-2000)}`));
  console.log(`webhooks answering ${Date.now() - t0} ms after the server was started`);
});
after(async () => {
  if (server.exitCode === null) server.kill('SIGKILL');
  await env.stop();
});

/** A Cache as a user writes it: `size` may be left to the defaulting webhook. */
const cache = (name: string, spec: Partial<CacheSpec>): Cache => ({ apiVersion, kind: 'Cache', metadata: { name }, spec: spec as CacheSpec });

test('defaulted by tier and persisted; more than 10 Pods refused with the message; an unpinned image warned about; updates checked too', async () => {
  const caches = env.client.resource<Cache>(cacheResource).namespace('default');

  // Defaulting: no size given — the webhook sizes it by tier (the CRD defaults the tier itself), and it is stored.
  await caches.create(cache('prod', { tier: 'production', image: 'memcached:1.6.26' }));
  await caches.create(cache('dev', { image: 'memcached:1.6.26' }));
  assert.deepEqual((await caches.get('prod')).spec, { tier: 'production', size: 3, image: 'memcached:1.6.26' });
  assert.deepEqual((await caches.get('dev')).spec, { tier: 'development', size: 1, image: 'memcached:1.6.26' });

  // Validation: refused with the webhook's message; nothing stored.
  const refused = await caches.create(cache('huge', { size: 12 })).then(() => undefined, (err: unknown) => err);
  assert.ok(refused instanceof ApiError, String(refused));
  assert.equal(refused.status, 403);
  assert.match(refused.message, /admission webhook "vcache-v1\.kb\.io" denied the request: spec\.size: 12 Pods asked, at most 10 per Cache; split it into several Caches/);
  assert.equal(await ignoreNotFound(caches.get('huge')), undefined);

  // A warning: allowed, and the API server hands it to the client in a `Warning` header (kubectl prints it).
  const res = await env.client.request('POST', '/apis/example.ts-controller-manager.io/v1/namespaces/default/caches', { body: cache('latest', { size: 2, image: 'memcached:latest' }) });
  await res.dump();
  assert.equal(res.status, 201);
  assert.match(String(res.headers['warning']), /^299 - "spec\.image \\?"memcached:latest\\?" is not pinned to a version: every Pod restart may run a different one"$/);

  // Updates go through the same validation.
  await assert.rejects(caches.patch('prod', { merge: { spec: { size: 11 } } }), /denied the request: spec\.size: 11 Pods asked/);
  assert.equal((await caches.get('prod')).spec?.size, 3);

  // The server stops cleanly.
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  assert.equal(await exited, 0, `graceful exit on SIGTERM; logs:\n${logs.slice(-2000)}`);
});
