/**
 * Informer-layer errors reach the Manager (issue 16 item 5): a cache that cannot sync within the cache-sync timeout,
 * and an informer whose start fails, end `Manager.start` with exit code 1 and a failure naming the resource — the
 * Manager never stays up unready without a reason. The Manager, the factory and the REST client are the real ones,
 * wired as the manager wires them (waitForCacheSync and unsyncedCaches from the factory); the API server is the fake
 * one (deterministic 404s).
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer } from '../../test/fakeapiserver/server.ts';
import { SharedInformerFactory } from '../informerfactory/factory.ts';
import { coreResources, type ResourceType } from '../apimachinery/resource.ts';
import { exitFailure, Manager } from './manager.ts';
import { runnable } from './runnable.ts';

const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

async function managerWithFactory(cacheSyncTimeoutMs: number): Promise<{ manager: Manager; factory: SharedInformerFactory; controllerStarted: () => boolean }> {
  const server = new FakeApiServer({ resource: coreResources.configMaps });
  await server.listen();
  cleanups.push(() => server.close());
  const factory = new SharedInformerFactory({
    client: restClientFor(server.url), reflector: { config: { backoffInitialMs: 20, backoffMaxMs: 100 } },
  });
  const manager = new Manager({
    gracefulShutdownTimeoutMs: 5_000,
    cacheSyncTimeoutMs,
    unsyncedCaches: () => factory.unsyncedCaches(),
    waitForCacheSync: (signal) => factory.waitForCacheSync({ signal }),
  });
  let started = false;
  manager.add(runnable('controller', true, async (signal) => {
    started = true;
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  }));
  manager.add(runnable('informers', false, (signal) => factory.run(signal)));
  return { manager, factory, controllerStarted: () => started };
}

describe('Manager and informer failures', () => {
  it('a resource the API server does not serve (CRD not installed): exit 1 after the cache-sync timeout, naming it and the 404', async () => {
    const { manager, factory, controllerStarted } = await managerWithFactory(1_000);
    factory.informerFor(foos);
    factory.informerFor(coreResources.configMaps);
    const ac = new AbortController();
    cleanups.push(() => Promise.resolve(ac.abort()));
    assert.equal(await manager.start(ac.signal), exitFailure);
    assert.equal(controllerStarted(), false);
    const message = manager.failure()?.message ?? '';
    assert.match(message, /^timed out waiting for cache sync after 1s: not synced: foos\.samplecontroller\.k8s\.io\/v1alpha1 \(Foo\): GET \/apis\/samplecontroller\.k8s\.io\/v1alpha1\/foos: HTTP 404 NotFound/);
    assert.match(message, /is its CustomResourceDefinition installed\?/);
    assert.doesNotMatch(message, /configmaps\/v1 \(ConfigMap\)/, 'the cache that synced is not blamed');
    assert.ok(factory.informers().every((i) => i.isStopped()), 'informers stopped before start returned');
  });

  it('an informer whose start fails: exit 1 at once (no waiting for the timeout), naming the resource', async () => {
    const { manager, factory, controllerStarted } = await managerWithFactory(0); // no cache-sync timeout at all
    factory.informerFor(coreResources.configMaps);
    const broken = factory.informerFor(coreResources.secrets);
    broken.start = () => Promise.reject(new Error('list/watch setup failed')); // fault injection
    const ac = new AbortController();
    cleanups.push(() => Promise.resolve(ac.abort()));
    assert.equal(await manager.start(ac.signal), exitFailure);
    assert.equal(controllerStarted(), false);
    assert.equal(manager.failure()?.message, 'informer for secrets/v1 (Secret) failed: list/watch setup failed');
  });
});
