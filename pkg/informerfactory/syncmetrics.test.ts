/**
 * informer_synced{resource} (syncmetrics.ts) from a running SharedInformerFactory against the UNIT-TEST FAKE API
 * server (test/fakeapiserver), which serves ConfigMaps only: a Secret informer never syncs there (404).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer } from '../../test/fakeapiserver/server.ts';
import { SharedInformerFactory } from './factory.ts';
import { coreResources } from '../apimachinery/resource.ts';

async function synced(registry: Registry): Promise<Record<string, number>> {
  const m = await registry.getSingleMetric('informer_synced')?.get();
  return Object.fromEntries((m?.values ?? []).map((v) => [String(v.labels['resource']), v.value]));
}

test('informer_synced is 1 per synced resource, 0 for one that cannot sync, and absent once the factory stopped', async () => {
  const server = new FakeApiServer({ resource: coreResources.configMaps });
  await server.listen();
  try {
    const registry = new Registry();
    const factory = new SharedInformerFactory({
      client: restClientFor(server.url), registry, reflector: { config: { backoffInitialMs: 20, backoffMaxMs: 100 } },
    });
    const cms = factory.informerFor(coreResources.configMaps);
    factory.informerFor(coreResources.secrets);
    const ac = new AbortController();
    const running = factory.run(ac.signal);
    await eventually('configmaps synced', () => cms.hasSynced());
    assert.deepEqual(await synced(registry), { 'configmaps/v1': 1, 'secrets/v1': 0 });
    ac.abort();
    await running;
    assert.deepEqual(await synced(registry), {}, 'a stopped factory reports nothing');
  } finally {
    await server.close();
  }
});
