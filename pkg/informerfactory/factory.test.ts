import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer } from '../../test/fakeapiserver/server.ts';
import { parseWatchNamespace, SharedInformerFactory } from './factory.ts';
import { coreResources, type ResourceType } from './resource.ts';

const configMaps = coreResources.configMaps;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

async function setup(namespaces?: string[]): Promise<{ server: FakeApiServer; factory: SharedInformerFactory; ac: AbortController }> {
  const server = new FakeApiServer({ resource: configMaps });
  await server.listen();
  const factory = new SharedInformerFactory({
    client: restClientFor(server.url),
    namespaces,
    reflector: { config: { backoffInitialMs: 20, backoffMaxMs: 100 } },
  });
  const ac = new AbortController();
  const running = factory.run(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await running;
    await server.close();
  });
  return { server, factory, ac };
}

describe('SharedInformerFactory', () => {
  it('returns the same informer for the same type and scope', async () => {
    const { factory } = await setup();
    const a = factory.informerFor(configMaps);
    assert.equal(factory.informerFor({ ...configMaps }), a);
    assert.notEqual(factory.informerFor(configMaps, { namespaces: ['x'] }), a);
    assert.equal(factory.informerFor(configMaps, { namespaces: ['y', 'x'] }), factory.informerFor(configMaps, { namespaces: ['x', 'y', 'x'] }));
    assert.notEqual(factory.informerFor(configMaps, { labelSelector: 'app=web' }), a);
    // Cluster-scoped resources ignore the namespace scope.
    const nodes = factory.informerFor(coreResources.nodes);
    assert.equal(factory.informerFor(coreResources.nodes, { namespaces: ['x'] }), nodes);
    assert.deepEqual(nodes.scopes, ['']);
  });

  it('shares one watch between all users of an informer, and starts informers created after start', async () => {
    const { server, factory } = await setup();
    server.create({ metadata: { name: 'a', namespace: 'default' } });
    const inf = factory.informerFor(configMaps);
    const seen1: string[] = [];
    const seen2: string[] = [];
    inf.addEventHandler({ onAdd: (o) => void seen1.push(o.metadata?.name ?? '') });
    factory.informerFor(configMaps).addEventHandler({ onAdd: (o) => void seen2.push(o.metadata?.name ?? '') });
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 5000 }), true);
    await eventually('one watch', () => factory.openWatches(configMaps) === 1);
    assert.equal(server.requests.filter((r) => r.kind === 'list').length, 1);
    await eventually('both handlers', () => seen1.length === 1 && seen2.length === 1);
    assert.deepEqual(factory.syncStatus(), { 'configmaps/v1': true });
  });

  it('waitForCacheSync resolves false on timeout and on abort', async () => {
    const { factory } = await setup();
    // The fake serves only configmaps: a list of secrets gets 404 forever.
    const secrets: ResourceType = coreResources.secrets;
    factory.informerFor(secrets);
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 150 }), false);
    const ac = new AbortController();
    const p = factory.waitForCacheSync({ signal: ac.signal });
    ac.abort();
    assert.equal(await p, false);
  });

  it('a namespace list gives one watch per namespace feeding one cache', async () => {
    const { server, factory } = await setup(parseWatchNamespace('a, b'));
    server.create({ metadata: { name: 'x', namespace: 'a' } });
    server.create({ metadata: { name: 'y', namespace: 'b' } });
    server.create({ metadata: { name: 'z', namespace: 'c' } });
    const inf = factory.informerFor(configMaps);
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 5000 }), true);
    assert.deepEqual(inf.lister().list().map((o) => o.metadata?.name).sort(), ['x', 'y']);
    await eventually('watches per namespace', () => factory.openWatches(configMaps, 'a') === 1 && factory.openWatches(configMaps, 'b') === 1);
    assert.equal(factory.openWatches(configMaps), 2);
    assert.equal(factory.openWatches(configMaps, 'c'), 0);
  });

  it('run resolves after abort with every watch closed', async () => {
    const { server, factory, ac } = await setup();
    factory.informerFor(configMaps);
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 5000 }), true);
    await eventually('watch open', () => factory.openWatches(configMaps) === 1);
    ac.abort();
    await cleanups.pop()?.();
    assert.equal(factory.watchCounter.total(), 0);
    assert.equal(server.openWatches, 0);
    assert.ok(factory.informers().every((i) => i.isStopped()));
  });
});

describe('parseWatchNamespace', () => {
  it('parses WATCH_NAMESPACE', () => {
    assert.deepEqual(parseWatchNamespace(undefined), []);
    assert.deepEqual(parseWatchNamespace(''), []);
    assert.deepEqual(parseWatchNamespace('default'), ['default']);
    assert.deepEqual(parseWatchNamespace(' a,b ,,a'), ['a', 'b']);
  });
});
