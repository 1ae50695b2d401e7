/**
 * describeInformers (the `/debug/informers` endpoint's content) against the fake API server (test/fakeapiserver:
 * deterministic 410s): counts, phase, keys and digest follow the cache; a relist after a 410 is counted as a list and
 * the watch that follows as a watch, in the description and in informer_lists_total / informer_watches_total.
 */
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { Registry } from 'prom-client';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer } from '../../test/fakeapiserver/server.ts';
import { coreResources } from '../apimachinery/resource.ts';
import { cacheDigest, describeInformers } from './debug.ts';
import { SharedIndexInformer } from './sharedinformer.ts';
import { WatchCounter } from './watchcounter.ts';

const resource = coreResources.configMaps;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

async function counter(registry: Registry, name: string): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => v.labels['resource'] === 'configmaps/v1')?.value ?? 0;
}

test('describeInformers: objects, resourceVersion, keys and digest follow the cache; a 410 relist counts a list and a watch', async () => {
  const server = new FakeApiServer({ resource, goneAs: 'event' });
  await server.listen();
  cleanups.push(() => server.close());
  server.create({ metadata: { name: 'a', namespace: 'default' }, data: {} });
  server.create({ metadata: { name: 'b', namespace: 'other' }, data: {} });
  const registry = new Registry();
  const informer = new SharedIndexInformer({
    resource, client: restClientFor(server.url), registry, watchCounter: new WatchCounter(),
    reflector: { config: { backoffInitialMs: 10, backoffMaxMs: 20 } },
  });
  const ac = new AbortController();
  const done = informer.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  // Watching = the watch was requested; `watches` counts it once the server answered.
  await eventually('watching', () => informer.isWatching() && informer.reflectorStatus()[0]?.watches === 1);

  const [d] = describeInformers([informer], { keys: true });
  assert.ok(d);
  assert.equal(d.resource, 'configmaps/v1');
  assert.equal(d.kind, 'ConfigMap');
  assert.deepEqual(d.namespaces, []);
  assert.equal(d.synced, true);
  assert.equal(d.objects, 2);
  assert.equal(d.resourceVersion, server.resourceVersion);
  const serverKeys: [string, string][] = [['default/a', server.get('default', 'a')?.metadata.resourceVersion ?? ''], ['other/b', server.get('other', 'b')?.metadata.resourceVersion ?? '']];
  assert.deepEqual(d.keys, Object.fromEntries(serverKeys));
  assert.equal(d.digest, cacheDigest(serverKeys).digest, 'the digest of the same keys and versions, in any order');
  assert.equal(d.digest, cacheDigest([...serverKeys].reverse()).digest);
  assert.equal(d.reflectors.length, 1);
  assert.deepEqual({ ...d.reflectors[0], phaseForMs: 0 }, { namespace: '', phase: 'Watching', phaseForMs: 0, resourceVersion: server.resourceVersion, lists: 1, watches: 1 });
  assert.equal(describeInformers([informer])[0]?.keys, undefined, 'keys only when asked');
  assert.equal(d.labelSelector, undefined);
  const selected = new SharedIndexInformer({ resource, client: restClientFor(server.url), registry, labelSelector: 'app=x', fieldSelector: 'metadata.name=a' });
  assert.deepEqual([describeInformers([selected])[0]?.labelSelector, describeInformers([selected])[0]?.fieldSelector], ['app=x', 'metadata.name=a'],
    'the selectors: its cache holds the matching objects only');

  // An update changes the digest (same keys, another resourceVersion).
  server.update({ metadata: { name: 'a', namespace: 'default' }, data: { x: '1' } });
  await eventually('update cached', () => informer.lister().get('default', 'a')?.metadata?.resourceVersion === server.get('default', 'a')?.metadata.resourceVersion);
  assert.notEqual(describeInformers([informer])[0]?.digest, d.digest);

  // A 410: an object created without reaching the watch, the history compacted past it, the watch dropped — the
  // reflector's resume from its last version is refused, so it relists and watches again.
  server.create({ metadata: { name: 'c', namespace: 'default' }, data: {} }, { deliver: false });
  server.compact();
  server.dropWatches('reset');
  await eventually('relisted and watching', () => informer.lister().get('default', 'c') !== undefined && (informer.reflectorStatus()[0]?.watches ?? 0) >= 2);
  const after = describeInformers([informer], { keys: true })[0];
  assert.equal(after?.objects, 3);
  assert.equal(after?.reflectors[0]?.lists, 2, 'the initial list and one relist');
  assert.equal(await counter(registry, 'informer_lists_total'), after?.reflectors[0]?.lists);
  assert.equal(await counter(registry, 'informer_watches_total'), after?.reflectors[0]?.watches);
});
