/**
 * startManager (pkg/testing/harness.ts) on a real control plane: it resolves once the controllers run and `stop()`
 * is a graceful exit 0; a manager that cannot start (its CRD not installed: the cache-sync timeout) makes it reject
 * at once with the manager's failure, not after its own timeout.
 *   ./node_modules/.bin/node --test test/testkit-harness.test.ts
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { ControllerManager, coreResources, silentLogger, type KubeObject } from '../pkg/index.ts';
import { eventually, startManager, startTestEnv, testNamespace, type TestEnv } from '../pkg/testing/index.ts';

let env: TestEnv;
before(async () => {
  env = await startTestEnv();
});
after(() => env.stop());

test('startManager: resolves with the controllers running (they reconcile), stop() resolves after a graceful exit 0, idempotent', async (t) => {
  const ns = await testNamespace(env, { t });
  const seen: string[] = [];
  const t0 = Date.now();
  const running = await startManager(() => {
    const mgr = new ControllerManager({ kubeConfig: env.kubeConfig, logger: silentLogger, registry: new Registry(), namespaces: [ns.name] });
    mgr.controller('seen').for<KubeObject>(coreResources.configMaps).complete(({ name }) => {
      seen.push(name);
      return Promise.resolve();
    });
    return mgr;
  });
  assert.ok(running.manager.controllersStarted());
  const t1 = Date.now();
  await env.client.resource(coreResources.configMaps).namespace(ns.name).create({ metadata: { name: 'hello' } });
  await eventually(() => seen.includes('hello'), { timeoutMs: 10_000, message: 'the reconcile of hello' });
  const t2 = Date.now();
  await running.stop();
  t.diagnostic(`started in ${t1 - t0} ms, reconciled in ${t2 - t1} ms, stopped in ${Date.now() - t2} ms`);
  await running.stop();
  assert.equal(await running.exited, 0);
  await ns.delete();
});

test('startManager: a manager that stops before its controllers start rejects at once with its failure (a CRD not installed)', async () => {
  const t0 = Date.now();
  const missing = { group: 'nowhere.example.com', version: 'v1', resource: 'ghosts', kind: 'Ghost', namespaced: true };
  await assert.rejects(startManager(() => {
    const mgr = new ControllerManager({ kubeConfig: env.kubeConfig, logger: silentLogger, registry: new Registry(), cacheSyncTimeoutMs: 1_000 });
    mgr.controller('ghosts').for(missing).complete(() => Promise.resolve());
    return mgr;
  }, { startTimeoutMs: 30_000 }), /the manager stopped \(exit 1\) before its controllers started: .*ghosts\.nowhere\.example\.com/);
  assert.ok(Date.now() - t0 < 15_000, `rejected after ${Date.now() - t0} ms, not at the 30 s start timeout`);
});
