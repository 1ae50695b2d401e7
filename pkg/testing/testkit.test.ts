/**
 * Unit tests of the unit-test kit itself (no control plane): eventually, testNamespace and the FakeClient's own
 * surface (informers, seeding, host, refusals of the JSON interface). The fake's API semantics are proven against a
 * real kube-apiserver in test/fakeclient-conformance.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { coreResources, type KubeObject } from '../index.ts';
import { eventually, StopTrying } from './eventually.ts';
import { FakeClient, FakeUnsupportedError } from './fakeclient.ts';
import { testNamespace } from './namespace.ts';

interface ConfigMap extends KubeObject { data?: Record<string, string> }

test('eventually: resolves with the first value that is not undefined/null/false; throws count as "not yet"', async () => {
  let calls = 0;
  const v = await eventually(() => {
    calls++;
    if (calls === 1) throw new Error('not yet');
    return calls < 3 ? false : { calls };
  }, { intervalMs: 1 });
  assert.deepEqual(v, { calls: 3 });
});

test('eventually: the timeout names the message, the number of calls and the last error (as cause) or value', async () => {
  const boom = new Error('still 404');
  await assert.rejects(eventually(() => { throw boom; }, { timeoutMs: 30, intervalMs: 5, message: () => 'the Deployment' }), (err: unknown) => {
    assert.ok(err instanceof Error);
    assert.match(err.message, /^eventually: timed out after 30 ms for the Deployment \(\d+ calls\); last error: still 404$/);
    assert.equal(err.cause, boom);
    return true;
  });
  await assert.rejects(eventually(() => null, { timeoutMs: 10, intervalMs: 2 }), /last value: null$/);
});

test('eventually: an aborted signal rejects at once with its reason', async () => {
  const ac = new AbortController();
  const t0 = Date.now();
  const p = eventually(() => false, { timeoutMs: 10_000, intervalMs: 1_000, signal: ac.signal });
  setTimeout(() => ac.abort(new Error('test over')), 20);
  await assert.rejects(p, /test over/);
  assert.ok(Date.now() - t0 < 1_000);
});

test('eventually: a StopTrying thrown by fn ends the wait at once with that error (what it waits for cannot happen any more)', async () => {
  let calls = 0;
  const stop = new StopTrying('the manager exited (code 2)');
  await assert.rejects(eventually(() => {
    calls++;
    throw stop;
  }, { timeoutMs: 600_000, intervalMs: 1 }), (err) => err === stop);
  assert.equal(calls, 1);
  assert.equal(stop.name, 'StopTrying');
});

test('testNamespace: a unique DNS-safe name from the test, created, deleted after the test (idempotent)', async (t) => {
  const fake = new FakeClient();
  const ns = await testNamespace(fake, { t: { name: 'My Test: x_y', after: (fn) => t.after(fn) }, labels: { a: 'b' } });
  assert.match(ns.name, /^my-test-x-y-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
  assert.deepEqual((await fake.resource(coreResources.namespaces).get(ns.name)).metadata?.labels, { a: 'b', 'kubernetes.io/metadata.name': ns.name });
  const other = await testNamespace({ client: fake });
  assert.match(other.name, /^test-/);
  await other.delete();
  await other.delete();
  assert.ok((await fake.resource(coreResources.namespaces).get(other.name)).metadata?.deletionTimestamp, 'Terminating, as on a server without a namespace controller');
  {
    await using scoped = await testNamespace(fake, { prefix: 'scoped' });
    assert.match(scoped.name, /^scoped-/);
  }
  assert.equal(fake.objects(coreResources.namespaces).filter((n) => n.metadata?.deletionTimestamp).length, 2);
});

test('FakeClient informers: the cache follows every write at once, within its namespaces; copies, never the stored object', async () => {
  const fake = new FakeClient({ objects: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'seeded', namespace: 'a' }, data: { x: '1' } } as ConfigMap] });
  const all = fake.informer<ConfigMap>(coreResources.configMaps);
  const onlyB = fake.informer<ConfigMap>(coreResources.configMaps, { namespaces: ['b'] });
  assert.equal(all.lister().get('a', 'seeded')?.data?.['x'], '1', 'seeded objects (their namespace created) are cached');
  assert.ok(all.hasSynced());
  await fake.resource(coreResources.namespaces).create({ metadata: { name: 'b' } });
  const cms = fake.resource<ConfigMap>(coreResources.configMaps);
  await cms.namespace('b').create({ metadata: { name: 'c', labels: { app: 'x' } } });
  assert.deepEqual(onlyB.lister().list().map((o) => o.metadata?.name), ['c']);
  assert.deepEqual(all.lister().list(undefined, 'app=x').map((o) => o.metadata?.name), ['c']);
  await cms.namespace('a').patch('seeded', { merge: { data: { x: '2' } } });
  assert.equal(all.lister().get('a', 'seeded')?.data?.['x'], '2');
  assert.equal(onlyB.lister().get('a', 'seeded'), undefined);
  const cached = all.lister().get('b', 'c');
  if (cached?.metadata) cached.metadata.labels = { app: 'changed' };
  assert.deepEqual((await cms.namespace('b').get('c')).metadata?.labels, { app: 'x' }, 'mutating the cache does not change the store');
  await cms.namespace('b').delete('c');
  assert.equal(all.lister().get('b', 'c'), undefined);
  assert.equal(onlyB.lister().list().length, 0);
  const host = fake.host();
  assert.equal(host.client, fake);
  assert.equal(host.informer<ConfigMap>(coreResources.configMaps).lister().get('a', 'seeded')?.data?.['x'], '2');
});

test('FakeClient metadata-only informers cache { apiVersion, kind, metadata } and follow writes, as a real metadataOnly informer', async () => {
  const fake = new FakeClient({ objects: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'm', namespace: 'a', labels: { l: '1' } }, data: { secret: 'x' } } as ConfigMap] });
  const meta = fake.host().informer<ConfigMap>(coreResources.configMaps, { metadataOnly: true });
  assert.deepEqual(meta.lister().get('a', 'm'), { apiVersion: 'v1', kind: 'ConfigMap', metadata: fake.objects<ConfigMap>(coreResources.configMaps)[0]?.metadata });
  await fake.resource<ConfigMap>(coreResources.configMaps).namespace('a').patch('m', { merge: { metadata: { labels: { l: '2' } }, data: { secret: 'y' } } });
  const after = meta.lister().get('a', 'm');
  assert.equal(after?.metadata?.labels?.['l'], '2');
  assert.deepEqual(Object.keys(after ?? {}).sort(), ['apiVersion', 'kind', 'metadata']);
  assert.equal(fake.informer<ConfigMap>(coreResources.configMaps).lister().get('a', 'm')?.data?.['secret'], 'y', 'a full informer of the type still has the data');
});

test('FakeClient: timestamps from `now` (second precision); unregistered types and watches are refused loudly', async () => {
  const fake = new FakeClient({ now: () => Date.parse('2026-01-02T03:04:05.678Z') });
  const ns = await fake.resource(coreResources.namespaces).create({ metadata: { name: 'n' } });
  assert.equal(ns.metadata?.creationTimestamp, '2026-01-02T03:04:05Z');
  assert.throws(() => fake.informer({ group: 'x.io', version: 'v1', resource: 'things', kind: 'Thing', namespaced: true }), /x\.io\/v1 is not registered/);
  await assert.rejects(fake.json('GET', '/api/v1/namespaces/n/configmaps', { query: { watch: 'true' } }), FakeUnsupportedError);
  await assert.rejects(fake.json('GET', '/apis/x.io/v1/namespaces/n/things'), (err: unknown) => (err as { status?: number }).status === 404);
});

test('FakeClient objects: created first, in order, a missing namespace created, status kept (also behind a status subresource)', () => {
  const fake = new FakeClient({ objects: [
    { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'seeded' }, spec: { replicas: 1 }, status: { replicas: 1 } } as KubeObject,
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'seeded' } },
  ] });
  assert.deepEqual(fake.objects(coreResources.namespaces).map((n) => n.metadata?.name), ['seeded']);
  const [d] = fake.objects<KubeObject & { status?: unknown }>(coreResources.deployments);
  const [c] = fake.objects(coreResources.configMaps);
  assert.deepEqual(d?.status, { replicas: 1 });
  assert.ok(Number(d?.metadata?.resourceVersion) < Number(c?.metadata?.resourceVersion), 'created in the order given');
});
