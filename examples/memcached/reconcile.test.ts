/**
 * The memcached reconciler's unit test: `memcachedReconciler` (main.ts) called directly on a FakeClient from
 * `ts-controller-manager/testing` — no control plane, milliseconds. The same scenario then runs on a real
 * kube-apiserver (startTestEnv, the reconciler on a ControllerManager's caches) and both times are printed
 * (docs/testing.md has the figure). What the fake refuses (a hand-edited list taken back by server-side apply needs
 * managedFields) is asserted as a refusal here and tested for real in main.test.ts.
 *   node --test reconcile.test.ts
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ControllerManager, coreResources, ignoreNotFound, silentLogger, type ReconcilerHost } from 'ts-controller-manager';
import type { Deployment } from 'ts-controller-manager/api/apps/v1';
import { eventually, FakeClient, FakeUnsupportedError, reconcileContext, startTestEnv, testNamespace } from 'ts-controller-manager/testing';
import { memcachedResource, type Memcached } from './api/example/v1alpha1/zz_generated.types.ts';
import { memcachedReconciler } from './main.ts';

const crd = join(import.meta.dirname, 'crd.yaml');
const apiVersion = 'example.ts-controller-manager.io/v1alpha1';

/**
 * The scenario, on any host. `settle` waits until the host's caches hold what the API has (a no-op on the fake,
 * whose listers never lag): the reconciler reads its cache, as it does under a manager.
 */
async function scenario(host: ReconcilerHost, ns: string, settle: () => Promise<void>): Promise<void> {
  const reconcile = memcachedReconciler(host);
  const memcacheds = host.client.resource<Memcached>(memcachedResource).namespace(ns);
  const deployments = host.client.resource<Deployment>(coreResources.deployments).namespace(ns);
  const run = async (name: string): Promise<void> => {
    await settle();
    await reconcile({ namespace: ns, name }, AbortSignal.timeout(10_000), reconcileContext(`${ns}/${name}`));
  };
  const ready = async (name: string) => (await memcacheds.get(name)).status?.conditions?.find((c) => c.type === 'Ready');

  const mc = await memcacheds.create({ apiVersion, kind: 'Memcached', metadata: { name: 'sessions' }, spec: { size: 2 } });
  await run('sessions');
  const d = await deployments.get('sessions');
  assert.equal(d.spec?.replicas, 2);
  assert.equal(d.spec?.template?.spec?.containers?.[0]?.image, 'memcached:1.6.26-alpine3.19', 'the CRD default');
  assert.deepEqual(d.metadata?.ownerReferences, [{ apiVersion, kind: 'Memcached', name: 'sessions', uid: mc.metadata?.uid, controller: true, blockOwnerDeletion: true }]);
  assert.deepEqual((await memcacheds.get('sessions')).metadata?.finalizers, ['example.ts-controller-manager.io/finalizer']);
  assert.deepEqual(await ready('sessions').then((c) => [c?.status, c?.reason, c?.message, c?.observedGeneration]), ['False', 'Progressing', '0/2 replicas available', 1]);

  // The Deployment controller's part: all replicas available → Ready=True; a further reconcile writes nothing.
  await deployments.status().patch('sessions', { merge: { status: { observedGeneration: d.metadata?.generation, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 } } });
  await run('sessions');
  assert.deepEqual(await ready('sessions').then((c) => [c?.status, c?.reason, c?.message]), ['True', 'Available', '2/2 replicas available']);
  const before = [(await memcacheds.get('sessions')).metadata?.resourceVersion, (await deployments.get('sessions')).metadata?.resourceVersion];
  await run('sessions');
  assert.deepEqual([(await memcacheds.get('sessions')).metadata?.resourceVersion, (await deployments.get('sessions')).metadata?.resourceVersion], before, 'idempotent');

  // Someone else's Deployment of a Memcached's name is never taken over.
  await deployments.create({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'foreign' }, spec: {
    replicas: 1, selector: { matchLabels: { app: 'foreign' } }, template: { metadata: { labels: { app: 'foreign' } }, spec: { containers: [{ name: 'x', image: 'x' }] } },
  } } satisfies Deployment);
  await memcacheds.create({ apiVersion, kind: 'Memcached', metadata: { name: 'foreign' }, spec: { size: 3 } });
  await run('foreign');
  assert.deepEqual(await ready('foreign').then((c) => [c?.status, c?.reason]), ['False', 'ResourceExists']);
  assert.deepEqual((await deployments.get('foreign')).metadata?.ownerReferences, undefined);

  // Deletion: the finalizer deletes the Deployment, then lets the Memcached go.
  await memcacheds.delete('sessions');
  await run('sessions');
  assert.equal(await ignoreNotFound(deployments.get('sessions')), undefined);
  assert.equal(await ignoreNotFound(memcacheds.get('sessions')), undefined);
}

let fakeMs = 0;
let warmFakeMs = 0;

test('memcached reconcile on the FakeClient: Deployment, Ready, idempotent, a foreign Deployment left alone, finalizer cleanup', async () => {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) { // the first run includes the JIT's (and the YAML parser's) warm-up: printed apart
    const fake = new FakeClient({ crdPaths: [crd] });
    const ns = await testNamespace(fake, { prefix: 'cache' });
    const t0 = performance.now(); // the scenario alone, as on startTestEnv below (set-up apart there too)
    await scenario(fake.host(), ns.name, () => Promise.resolve());
    times.push(performance.now() - t0);
  }
  const warm = times.slice(1).sort((a, b) => a - b);
  fakeMs = times[0] ?? 0;
  console.log(`reconcile scenario on the FakeClient: ${fakeMs.toFixed(1)} ms the first time in this process, then median ${(warm[1] ?? 0).toFixed(1)} ms (of ${warm.map((t) => t.toFixed(1)).join(', ')})`);
  warmFakeMs = warm[1] ?? 0;
});

test('the fake refuses, loudly, what depends on managedFields: a hand-edited container list taken back by apply (main.test.ts tests it for real)', async () => {
  const fake = new FakeClient({ crdPaths: [crd] });
  const ns = await testNamespace(fake, { prefix: 'cache' });
  const reconcile = memcachedReconciler(fake.host());
  await fake.resource<Memcached>(memcachedResource).namespace(ns.name).create({ metadata: { name: 'm' }, spec: { size: 1 } });
  await reconcile({ namespace: ns.name, name: 'm' }, AbortSignal.timeout(10_000), reconcileContext(`${ns.name}/m`));
  await fake.resource<Deployment>(coreResources.deployments).namespace(ns.name)
    .patch('m', { merge: { spec: { template: { spec: { containers: [{ name: 'memcached', image: 'memcached:latest' }] } } } } }, { fieldManager: 'kubectl-edit' });
  await assert.rejects(reconcile({ namespace: ns.name, name: 'm' }, AbortSignal.timeout(10_000), reconcileContext(`${ns.name}/m`)),
    (err: unknown) => err instanceof FakeUnsupportedError && /list spec\.template\.spec\.containers/.test(err.message));
});

test('the same scenario on a real kube-apiserver (startTestEnv), timed against the fake', async () => {
  const t0 = performance.now();
  const env = await startTestEnv({ crdPaths: [crd] });
  after(() => env.stop());
  const mgr = new ControllerManager({ kubeConfig: env.kubeConfig, logger: silentLogger });
  const ns = await testNamespace(env, { prefix: 'cache' });
  const host: ReconcilerHost = mgr; // the reconciler on the manager's shared caches, as under `mgr.run()`
  const reconcilerCaches = { memcacheds: mgr.informer<Memcached>(memcachedResource).lister(), deployments: mgr.informer<Deployment>(coreResources.deployments).lister() };
  const caches = new AbortController();
  after(() => caches.abort());
  mgr.factory.start(caches.signal);
  assert.ok(await mgr.factory.waitForCacheSync({ timeoutMs: 30_000 }));
  const settle = async (): Promise<void> => {
    // Until every Memcached and Deployment in the namespace is cached at the API's resourceVersion (and no more).
    await eventually(async () => {
      for (const [api, lister] of [[env.client.resource(memcachedResource), reconcilerCaches.memcacheds], [env.client.resource(coreResources.deployments), reconcilerCaches.deployments]] as const) {
        const live = (await api.namespace(ns.name).list()).items;
        const cached = lister.list(ns.name);
        if (cached.length !== live.length) return false;
        for (const o of live) if (lister.get(ns.name, o.metadata?.name ?? '')?.metadata?.resourceVersion !== o.metadata?.resourceVersion) return false;
      }
      return true;
    }, { intervalMs: 5, timeoutMs: 10_000, message: 'the caches to catch up' });
  };
  const t1 = performance.now();
  await scenario(host, ns.name, settle);
  const envMs = performance.now() - t1;
  const total = performance.now() - t0;
  console.log(`reconcile scenario on startTestEnv: ${envMs.toFixed(0)} ms = ${(envMs / fakeMs).toFixed(0)}× the fake's first run, ` +
    `${(envMs / warmFakeMs).toFixed(0)}× its warm median; with the control plane's start ${(total / 1000).toFixed(1)} s = ${(total / fakeMs).toFixed(0)}× / ${(total / warmFakeMs).toFixed(0)}×`);
});
