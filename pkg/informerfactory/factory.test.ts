import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer } from '../../test/fakeapiserver/server.ts';
import { parseWatchNamespace, SharedInformerFactory } from './factory.ts';
import { coreResources, type ResourceType } from '../apimachinery/resource.ts';

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

  it('unsyncedCaches names each informer not synced with its last request failure (404: CRD not installed?)', async () => {
    const { server, factory } = await setup();
    const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };
    factory.informerFor(foos);
    factory.informerFor(configMaps);
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 5000 }), false, 'foos never lists');
    await eventually('the 404 recorded', () => factory.unsyncedCaches()[0]?.includes('404') === true);
    const lines = factory.unsyncedCaches();
    assert.equal(lines.length, 1, 'configmaps synced and is not listed');
    assert.match(lines[0] ?? '', /^foos\.samplecontroller\.k8s\.io\/v1alpha1 \(Foo\): GET \/apis\/samplecontroller\.k8s\.io\/v1alpha1\/foos: HTTP 404 NotFound: .*is its CustomResourceDefinition installed\?/);
    assert.equal(server.requests.some((r) => r.kind === 'list' && r.path.endsWith('/configmaps')), true);
  });

  it('unsyncedCaches shows a 403 while RBAC refuses the list, and nothing once the list succeeds', async () => {
    const { server, factory } = await setup(['a', 'b']);
    const forbidden = 'configmaps is forbidden: User "system:serviceaccount:x:y" cannot list resource "configmaps" in API group "" in the namespace "b"';
    for (let i = 0; i < 3; i++) {
      server.inject({ on: 'list', when: (r) => r.namespace === 'b', action: { kind: 'status', status: 403, reason: 'Forbidden', message: forbidden } });
    }
    factory.informerFor(configMaps);
    await eventually('the 403 shown for ns b', () => factory.unsyncedCaches()[0]?.includes('403') === true);
    const [line] = factory.unsyncedCaches();
    assert.ok(line?.startsWith('configmaps/v1 (ConfigMap) ns=a,b: ns=b: GET /api/v1/namespaces/b/configmaps: HTTP 403 Forbidden: '), line);
    assert.ok(line?.includes(forbidden));
    assert.ok(!line?.includes('ns=a: '), 'namespace a listed fine and is not blamed');
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 10_000 }), true, 'synced once the faults are used up (backoff 20-100 ms)');
    assert.deepEqual(factory.unsyncedCaches(), []);
  });

  it('an informer whose start fails makes run reject naming its resource, after stopping the other informers', async () => {
    const server = new FakeApiServer({ resource: configMaps });
    await server.listen();
    cleanups.push(() => server.close());
    const factory = new SharedInformerFactory({ client: restClientFor(server.url), reflector: { config: { backoffInitialMs: 20 } } });
    const ok = factory.informerFor(configMaps);
    const broken = factory.informerFor(coreResources.secrets);
    // Fault injection: this informer's start rejects (as a bug or an unusable configuration would).
    broken.start = () => Promise.reject(new Error('cannot start: invalid field selector'));
    const ac = new AbortController();
    cleanups.push(() => Promise.resolve(ac.abort()));
    await assert.rejects(factory.run(ac.signal), (err: Error) => {
      assert.equal(err.message, 'informer for secrets/v1 (Secret) failed: cannot start: invalid field selector');
      assert.equal((err.cause as Error).message, 'cannot start: invalid field selector');
      return true;
    });
    assert.equal(ac.signal.aborted, false, 'the caller did not stop it');
    assert.equal(ok.isStopped(), true, 'the healthy informer was stopped before run rejected');
    assert.equal(factory.watchCounter.total(), 0);
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
