/**
 * The FakeClient conformance suite: ONE set of cases (`conformance(kit)`) run against the in-memory FakeClient and
 * against a real kube-apiserver (startTestEnv), so the fake cannot drift from the server. Every case passes on both.
 * Where the fake refuses (FakeUnsupportedError: it cannot answer as the server would without managedFields, a
 * garbage collector, …), the case asserts the refusal on the fake and the server's behaviour on the real one — so
 * the refusal list in pkg/testing/fakeclient.ts and docs/testing.md is proven, not just written down. The one case
 * that asserts a silent difference ("not modelled, silently different") proves docs/testing.md's warning about it.
 *
 *   ./node_modules/.bin/node --test test/fakeclient-conformance.test.ts
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { ApiError, coreResources, type ApiClient, type KubeObject, type ResourceType } from '../pkg/index.ts';
import { FakeClient, FakeUnsupportedError, startTestEnv, testNamespace, type TestEnv } from '../pkg/testing/index.ts';
import { memcachedResource, type Memcached } from '../examples/memcached/api/example/v1alpha1/zz_generated.types.ts';

const root = join(import.meta.dirname, '..');
const crdPaths = [join(root, 'examples/memcached/crd.yaml'), join(root, 'test/testdata/gadgets-crd.yaml')];
const gadgets: ResourceType = { group: 'conformance.ts-controller-manager.io', version: 'v1', resource: 'gadgets', kind: 'Gadget', namespaced: true };
interface Gadget extends KubeObject { spec?: Record<string, unknown>; status?: Record<string, unknown> }
interface ConfigMap extends KubeObject { data?: Record<string, string> }
interface Deployment extends KubeObject { spec?: Record<string, unknown>; status?: Record<string, unknown> }
const mcApiVersion = 'example.ts-controller-manager.io/v1alpha1';

/** What a case needs: the client under test and whether it is the fake. */
export interface ConformanceKit {
  client: ApiClient;
  fake: boolean;
}

const apiError = (status: number, reason?: string) => (err: unknown): boolean => {
  assert.ok(err instanceof ApiError, `an ApiError, got ${String(err)}`);
  assert.equal(err.status, status, err.message);
  if (reason) assert.equal(err.reason, reason, err.message);
  return true;
};

const deployment = (name: string, replicas = 1): Deployment => ({
  apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name },
  spec: {
    replicas, selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
  },
});

/** Every case, against `kit()` (called once the suite's `before` ran). */
export function conformance(kit: () => ConformanceKit): void {
  const ns = async (t: TestContext): Promise<string> => (await testNamespace(kit().client, { t })).name;
  const mcs = (namespace: string) => kit().client.resource<Memcached>(memcachedResource).namespace(namespace);
  const gds = (namespace: string) => kit().client.resource<Gadget>(gadgets).namespace(namespace);
  const cms = (namespace: string) => kit().client.resource<ConfigMap>(coreResources.configMaps).namespace(namespace);
  const deps = (namespace: string) => kit().client.resource<Deployment>(coreResources.deployments).namespace(namespace);
  /** The fake refuses `call` naming `feature`; the real server answers and `real` checks the answer. */
  const refusedByFake = async <T>(call: () => Promise<T>, feature: RegExp, real: (answer: T) => void | Promise<void>): Promise<void> => {
    if (kit().fake) {
      await assert.rejects(call(), (err: unknown) => err instanceof FakeUnsupportedError && feature.test(err.message));
    } else {
      await real(await call());
    }
  };

  test('create: uid, resourceVersion, generation 1, creationTimestamp; get; 404 NotFound; 409 AlreadyExists; a missing namespace is 404', async (t) => {
    const n = await ns(t);
    const m = await mcs(n).create({ apiVersion: mcApiVersion, kind: 'Memcached', metadata: { name: 'a', labels: { x: 'y' } }, spec: { size: 1 } });
    assert.match(m.metadata?.uid ?? '', /^[0-9a-f-]{36}$/);
    assert.match(m.metadata?.resourceVersion ?? '', /^\d+$/);
    assert.equal(m.metadata?.generation, 1);
    assert.match(m.metadata?.creationTimestamp ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(m.metadata?.namespace, n);
    const got = await mcs(n).get('a');
    assert.deepEqual([got.metadata?.uid, got.metadata?.resourceVersion, got.spec?.size], [m.metadata?.uid, m.metadata?.resourceVersion, 1]);
    await assert.rejects(mcs(n).get('nope'), apiError(404, 'NotFound'));
    await assert.rejects(mcs(n).create({ metadata: { name: 'a' }, spec: { size: 2 } }), apiError(409, 'AlreadyExists'));
    await assert.rejects(cms(`${n}-missing`).create({ metadata: { name: 'x' } }), apiError(404, 'NotFound'));
  });

  test('a body is what JSON makes of it: a Date becomes its ISO string, undefined members are left out (null in a list); neither the caller\'s object nor the answer is the stored one', async (t) => {
    const n = await ns(t);
    const spec: Record<string, unknown> = { when: new Date(0), gone: undefined, list: [1, undefined, 'x'], nested: { keep: true, drop: undefined } };
    const g = await gds(n).create({ apiVersion: 'conformance.ts-controller-manager.io/v1', kind: 'Gadget', metadata: { name: 'a' }, spec });
    const want = { when: '1970-01-01T00:00:00.000Z', list: [1, null, 'x'], nested: { keep: true } };
    assert.deepEqual(g.spec, want);
    (spec['nested'] as Record<string, unknown>)['keep'] = false; // a later change of the caller's object is not stored
    assert.deepEqual((await gds(n).get('a')).spec, want);
    (g.spec as Record<string, unknown>)['when'] = 'changed'; // nor is a change of the answer
    assert.deepEqual((await gds(n).get('a')).spec, want);
    const p = await gds(n).patch('a', { merge: { spec: { when: new Date(1000), list: undefined } } });
    assert.deepEqual(p.spec, { ...want, when: '1970-01-01T00:00:01.000Z' }, 'undefined in a merge patch is left out, not a deletion');
  });

  test('generateName: the prefix and 5 random characters; a name or generateName is required (422)', async (t) => {
    const n = await ns(t);
    const a = await cms(n).create({ metadata: { generateName: 'gen-' } });
    const b = await cms(n).create({ metadata: { generateName: 'gen-' } });
    assert.match(a.metadata?.name ?? '', /^gen-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    assert.notEqual(a.metadata?.name, b.metadata?.name);
    await assert.rejects(cms(n).create({ metadata: {} }), apiError(422, 'Invalid'));
  });

  test('update: a stale resourceVersion is 409 Conflict; the current one writes (new resourceVersion); an unchanged update writes nothing; a missing object is 404', async (t) => {
    const n = await ns(t);
    await assert.rejects(cms(n).update({ metadata: { name: 'c' }, data: { a: '0' } }), apiError(404, 'NotFound'));
    const v1 = await cms(n).create({ metadata: { name: 'c' }, data: { a: '1' } });
    const v2 = await cms(n).update({ ...v1, data: { a: '2' } });
    assert.notEqual(v2.metadata?.resourceVersion, v1.metadata?.resourceVersion);
    await assert.rejects(cms(n).update({ ...v1, data: { a: '3' } }), apiError(409, 'Conflict'));
    const same = await cms(n).update(v2);
    assert.equal(same.metadata?.resourceVersion, v2.metadata?.resourceVersion, 'no change, no write');
    // ConfigMaps accept an update without resourceVersion (unconditional); custom resources refuse it (422).
    const v3 = await cms(n).update({ metadata: { name: 'c' }, data: { a: '4' } });
    assert.equal(v3.data?.['a'], '4');
    assert.equal(v3.metadata?.generation, undefined, 'ConfigMaps have no generation');
    const m = await mcs(n).create({ metadata: { name: 'm' }, spec: { size: 1 } });
    await assert.rejects(mcs(n).update({ metadata: { name: 'm' }, spec: { size: 2 } }), apiError(422, 'Invalid'));
    assert.equal((await mcs(n).update({ ...m, spec: { ...m.spec, size: 2 } })).spec?.size, 2);
  });

  test('metadata checks: create with a resourceVersion (500); update naming another namespace (400) or uid (409); JSON patch of a missing path (422)', async (t) => {
    const n = await ns(t);
    await assert.rejects(cms(n).create({ metadata: { name: 'rv', resourceVersion: '5' } }), apiError(500));
    await cms(n).create({ metadata: { name: 'b' } });
    await assert.rejects(cms(n).update({ metadata: { name: 'b', namespace: `${n}-other` } }), apiError(400, 'BadRequest'));
    await assert.rejects(cms(n).update({ metadata: { name: 'b', uid: '00000000-0000-0000-0000-000000000000' } }), apiError(409, 'Conflict'));
    await assert.rejects(cms(n).patch('b', { json: [{ op: 'remove', path: '/data/nope' }] }), apiError(422, 'Invalid'));
    await assert.rejects(cms(n).patch('b', { json: [{ op: 'replace', path: '/data/nope', value: 'x' }] }), apiError(422, 'Invalid'));
  });

  test('generation: bumped by a spec change (and a Deployment\'s annotations), not by other metadata or by status behind a subresource', async (t) => {
    const n = await ns(t);
    const m = await mcs(n).create({ metadata: { name: 'g' }, spec: { size: 1 } });
    const labelled = await mcs(n).update({ ...m, metadata: { ...m.metadata, labels: { a: 'b' } } });
    assert.equal(labelled.metadata?.generation, 1);
    const resized = await mcs(n).update({ ...labelled, spec: { ...labelled.spec, size: 2 } });
    assert.equal(resized.metadata?.generation, 2);
    const withStatus = await mcs(n).status().update({ ...resized, status: { availableReplicas: 1 } });
    assert.equal(withStatus.metadata?.generation, 2);
    const d = await deps(n).create(deployment('d'));
    assert.equal(d.metadata?.generation, 1);
    assert.equal((await deps(n).patch('d', { merge: { spec: { replicas: 3 } } })).metadata?.generation, 2);
    assert.equal((await deps(n).patch('d', { merge: { metadata: { labels: { a: 'b' } } } })).metadata?.generation, 2);
    // Deployments count annotations too (they are copied to the ReplicaSets).
    assert.equal((await deps(n).patch('d', { merge: { metadata: { annotations: { a: 'b' } } } })).metadata?.generation, 3);
    // Without a status subresource every change outside metadata counts, status included.
    const g = await gds(n).create({ metadata: { name: 'g' }, spec: { a: 1 } });
    assert.equal((await gds(n).patch('g', { merge: { status: { b: 2 } } })).metadata?.generation, (g.metadata?.generation ?? 0) + 1);
  });

  test('CRD defaults: the schema\'s default is filled in on create and on update', async (t) => {
    const n = await ns(t);
    const m = await mcs(n).create({ metadata: { name: 'def' }, spec: { size: 1 } });
    assert.equal(m.spec?.image, 'memcached:1.6.26-alpine3.19');
    const changed = await mcs(n).update({ ...m, spec: { size: 2, image: 'memcached:other' } });
    assert.equal(changed.spec?.image, 'memcached:other', 'a value given is kept');
    const dropped = await mcs(n).update({ ...changed, spec: { size: 3 } });
    assert.deepEqual([dropped.spec?.size, dropped.spec?.image], [3, 'memcached:1.6.26-alpine3.19'], 'an update that leaves it out gets the default again');
  });

  test('status subresource: create drops status; the main resource ignores status; /status ignores everything else', async (t) => {
    const n = await ns(t);
    const created = await mcs(n).create({ metadata: { name: 's' }, spec: { size: 1 }, status: { availableReplicas: 9 } });
    assert.equal(created.status, undefined, 'status dropped on create');
    const st = await mcs(n).status().update({ ...created, spec: { ...created.spec, size: 5 }, metadata: { ...created.metadata, labels: { l: '1' } }, status: { availableReplicas: 1 } });
    assert.deepEqual([st.spec?.size, st.metadata?.labels, st.status?.availableReplicas], [1, undefined, 1], 'only status written by /status');
    const main = await mcs(n).update({ ...st, spec: { ...st.spec, size: 2 }, status: { availableReplicas: 7 } });
    assert.deepEqual([main.spec?.size, main.status?.availableReplicas], [2, 1], 'status ignored by the main resource');
    const p = await mcs(n).status().patch('s', { merge: { spec: { size: 4 }, status: { availableReplicas: 2 } } });
    assert.deepEqual([p.spec?.size, p.status?.availableReplicas], [2, 2]);
    const mp = await mcs(n).patch('s', { merge: { status: { availableReplicas: 3 } } });
    assert.equal(mp.status?.availableReplicas, 2);
    await assert.rejects(mcs(n).status().update({ ...mp, metadata: { ...mp.metadata, resourceVersion: created.metadata?.resourceVersion } }), apiError(409, 'Conflict'));
    // Deployments too: status dropped on create, /status writes only status.
    const d = await deps(n).create({ ...deployment('d'), status: { replicas: 5 } });
    assert.equal((d.status as { replicas?: number } | undefined)?.replicas, undefined);
    // Without a status subresource status is an ordinary field and /status does not exist.
    const g = await gds(n).create({ metadata: { name: 'g' }, spec: { a: 1 }, status: { b: 1 } });
    assert.deepEqual(g.status, { b: 1 });
    await assert.rejects(gds(n).status().patch('g', { merge: { status: { b: 2 } } }), apiError(404));
  });

  test('finalizers: delete sets deletionTimestamp (generation bumped); no new finalizer then (422); removing the last one deletes', async (t) => {
    const n = await ns(t);
    const m = await mcs(n).create({ metadata: { name: 'f', finalizers: ['example.com/a', 'example.com/b'] }, spec: { size: 1 } });
    const deleting = await mcs(n).delete('f') as Memcached;
    assert.equal(deleting.kind, 'Memcached');
    assert.match(deleting.metadata?.deletionTimestamp ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(deleting.metadata?.generation, (m.metadata?.generation ?? 0) + 1);
    const again = await mcs(n).delete('f') as Memcached;
    assert.equal(again.metadata?.resourceVersion, deleting.metadata?.resourceVersion, 'a second delete changes nothing');
    await assert.rejects(mcs(n).patch('f', { merge: { metadata: { finalizers: ['example.com/a', 'example.com/b', 'example.com/c'] } } }), apiError(422, 'Invalid'));
    const one = await mcs(n).patch('f', { json: [{ op: 'remove', path: '/metadata/finalizers/1' }] });
    assert.deepEqual(one.metadata?.finalizers, ['example.com/a']);
    assert.ok((await mcs(n).get('f')).metadata?.deletionTimestamp);
    await mcs(n).update({ ...one, metadata: { ...one.metadata, finalizers: [] } });
    await assert.rejects(mcs(n).get('f'), apiError(404, 'NotFound'));
  });

  test('delete: without finalizers the object goes; 404 when gone; preconditions (uid, resourceVersion) → 409', async (t) => {
    const n = await ns(t);
    const c = await cms(n).create({ metadata: { name: 'd' } });
    await assert.rejects(cms(n).delete('d', { preconditions: { uid: '00000000-0000-0000-0000-000000000000' } }), apiError(409, 'Conflict'));
    await assert.rejects(cms(n).delete('d', { preconditions: { resourceVersion: '1' } }), apiError(409, 'Conflict'));
    const status = await cms(n).delete('d', { preconditions: { uid: c.metadata?.uid, resourceVersion: c.metadata?.resourceVersion } });
    assert.equal(status.kind, 'Status');
    await assert.rejects(cms(n).get('d'), apiError(404, 'NotFound'));
    await assert.rejects(cms(n).delete('d'), apiError(404, 'NotFound'));
    await mcs(n).create({ metadata: { name: 'm' }, spec: { size: 1 } });
    const gone = await mcs(n).delete('m');
    assert.deepEqual([gone.kind, (gone as { status?: string }).status], ['Status', 'Success']);
    await assert.rejects(mcs(n).get('m'), apiError(404, 'NotFound'));
  });

  test('list: label selectors (=, !=, in, notin, exists, !exists), field selectors on name and namespace, paging with limit/continue', async (t) => {
    const n = await ns(t);
    for (const [name, labels] of [['a', { app: 'web', tier: 'fe' }], ['b', { app: 'web', tier: 'db' }], ['c', { app: 'api' }], ['d', {}]] as const) {
      await cms(n).create({ metadata: { name, labels } });
    }
    const names = async (opts: { labelSelector?: string; fieldSelector?: string }): Promise<string[]> =>
      (await cms(n).list(opts)).items.map((i) => i.metadata?.name ?? '').sort();
    assert.deepEqual(await names({ labelSelector: 'app=web' }), ['a', 'b']);
    assert.deepEqual(await names({ labelSelector: 'app=web,tier!=db' }), ['a']);
    assert.deepEqual(await names({ labelSelector: 'tier!=db' }), ['a', 'c', 'd']);
    assert.deepEqual(await names({ labelSelector: 'app in (api,web)' }), ['a', 'b', 'c']);
    assert.deepEqual(await names({ labelSelector: 'app notin (web)' }), ['c', 'd']);
    assert.deepEqual(await names({ labelSelector: 'tier' }), ['a', 'b']);
    assert.deepEqual(await names({ labelSelector: '!app' }), ['d']);
    assert.deepEqual(await names({ fieldSelector: 'metadata.name=c' }), ['c']);
    assert.deepEqual(await names({ fieldSelector: 'metadata.name!=c' }), ['a', 'b', 'd']);
    // Across all namespaces, metadata.namespace picks this one's.
    const everywhere = await kit().client.resource<ConfigMap>(coreResources.configMaps).list({ fieldSelector: `metadata.namespace=${n}` });
    assert.deepEqual(everywhere.items.map((i) => `${i.metadata?.namespace}/${i.metadata?.name}`).sort(), ['a', 'b', 'c', 'd'].map((x) => `${n}/${x}`));
    const others = await kit().client.resource<ConfigMap>(coreResources.configMaps).list({ fieldSelector: `metadata.namespace!=${n}` });
    assert.ok(others.items.every((i) => i.metadata?.namespace !== n));
    const page1 = await cms(n).list({ limit: 3 });
    assert.equal(page1.items.length, 3);
    assert.ok(page1.metadata.continue);
    const page2 = await cms(n).list({ limit: 3, continue: page1.metadata.continue });
    assert.deepEqual(page2.items.map((i) => i.metadata?.name), ['d']);
    assert.equal(page2.metadata.continue || undefined, undefined);
    assert.deepEqual((await cms(n).listAll({ limit: 1 })).map((i) => i.metadata?.name), ['a', 'b', 'c', 'd']);
    assert.match((await cms(n).list()).metadata.resourceVersion ?? '', /^\d+$/);
  });

  test('merge patch: sets, deletes with null, replaces lists; metadata.resourceVersion in it is a precondition (409)', async (t) => {
    const n = await ns(t);
    const c = await cms(n).create({ metadata: { name: 'p', labels: { a: '1', b: '2' } }, data: { x: '1', y: '2' } });
    const p = await cms(n).patch('p', { merge: { metadata: { labels: { b: null, c: '3' } }, data: { y: null, z: '3' } } });
    assert.deepEqual([p.metadata?.labels, p.data], [{ a: '1', c: '3' }, { x: '1', z: '3' }]);
    await assert.rejects(cms(n).patch('p', { merge: { metadata: { resourceVersion: c.metadata?.resourceVersion }, data: { x: '9' } } }), apiError(409, 'Conflict'));
    const fenced = await cms(n).patch('p', { merge: { metadata: { resourceVersion: p.metadata?.resourceVersion }, data: { x: '9' } } });
    assert.equal(fenced.data?.['x'], '9');
    const noop = await cms(n).patch('p', { merge: {} });
    assert.equal(noop.metadata?.resourceVersion, fenced.metadata?.resourceVersion, 'an empty patch writes nothing');
    await assert.rejects(cms(n).patch('nope', { merge: { data: { a: '1' } } }), apiError(404, 'NotFound'));
    await gds(n).create({ metadata: { name: 'l' }, spec: { list: [1, 2], keep: true } });
    assert.deepEqual((await gds(n).patch('l', { merge: { spec: { list: [3] } } })).spec, { list: [3], keep: true });
  });

  test('JSON patch: add, replace, remove, test; a failed test is 422 and changes nothing', async (t) => {
    const n = await ns(t);
    await cms(n).create({ metadata: { name: 'j', labels: { a: '1' } }, data: { x: '1' } });
    const p = await cms(n).patch('j', { json: [
      { op: 'test', path: '/data/x', value: '1' },
      { op: 'add', path: '/data/y', value: '2' },
      { op: 'replace', path: '/data/x', value: '3' },
      { op: 'remove', path: '/metadata/labels/a' },
      { op: 'add', path: '/metadata/labels/k8s.io~1name', value: 'v' },
    ] });
    assert.deepEqual([p.data, p.metadata?.labels], [{ x: '3', y: '2' }, { 'k8s.io/name': 'v' }]);
    await assert.rejects(cms(n).patch('j', { json: [{ op: 'test', path: '/data/x', value: '1' }, { op: 'replace', path: '/data/x', value: '4' }] }), apiError(422));
    assert.equal((await cms(n).get('j')).data?.['x'], '3');
  });

  test('strategic merge patch: 415 for custom resources; built-ins: refused by the fake, merged by the server', async (t) => {
    const n = await ns(t);
    await mcs(n).create({ metadata: { name: 'sm' }, spec: { size: 1 } });
    await assert.rejects(mcs(n).patch('sm', { strategic: { spec: { size: 2 } } }), apiError(415));
    await cms(n).create({ metadata: { name: 'sm' }, data: { a: '1' } });
    await refusedByFake(() => cms(n).patch('sm', { strategic: { data: { b: '2' } } }), /strategic merge patch/, (c) => {
      assert.deepEqual(c.data, { a: '1', b: '2' });
    });
  });

  test('server-side apply: creates; the same configuration again writes nothing; force takes a changed field back; /status apply; maps merged, own lists replaced', async (t) => {
    const n = await ns(t);
    const config = { metadata: { name: 'ssa', labels: { owner: 'me' } }, spec: { size: 2 } };
    const a = await mcs(n).apply(config, { fieldManager: 'ctl', force: true });
    assert.deepEqual([a.spec?.size, a.spec?.image, a.metadata?.labels, a.metadata?.generation], [2, 'memcached:1.6.26-alpine3.19', { owner: 'me' }, 1]);
    const again = await mcs(n).apply(config, { fieldManager: 'ctl', force: true });
    assert.equal(again.metadata?.resourceVersion, a.metadata?.resourceVersion, 'no change, no write');
    await mcs(n).patch('ssa', { merge: { spec: { size: 4 }, metadata: { annotations: { hand: 'edit' } } } }, { fieldManager: 'kubectl-edit' });
    const back = await mcs(n).apply(config, { fieldManager: 'ctl', force: true });
    assert.deepEqual([back.spec?.size, back.metadata?.annotations, back.metadata?.generation], [2, { hand: 'edit' }, 3], 'applied field taken back, others kept');
    const st = await mcs(n).status().apply({ metadata: { name: 'ssa' }, status: { availableReplicas: 2 } }, { fieldManager: 'ctl', force: true });
    assert.deepEqual([st.status?.availableReplicas, st.spec?.size, st.metadata?.generation], [2, 2, 3]);
    const st2 = await mcs(n).status().apply({ metadata: { name: 'ssa' }, status: { availableReplicas: 1 } }, { fieldManager: 'ctl', force: true });
    assert.equal(st2.status?.availableReplicas, 1);
    // A Deployment with lists (containers, ownerReferences) applied twice by one manager: the lists are its own.
    const d1 = await deps(n).apply({ ...deployment('web', 1), metadata: { name: 'web' } }, { fieldManager: 'ctl', force: true });
    const d2 = await deps(n).apply({ ...deployment('web', 2), metadata: { name: 'web' } }, { fieldManager: 'ctl', force: true });
    assert.deepEqual([d1.metadata?.generation, d2.metadata?.generation, (d2.spec as { replicas?: number }).replicas], [1, 2, 2]);
    await assert.rejects(mcs(n).status().apply({ metadata: { name: 'nope' }, status: { availableReplicas: 1 } }, { fieldManager: 'ctl', force: true }), apiError(404));
    // Maps merge key by key with what others wrote; a list this manager alone wrote is replaced (here: an atomic list).
    await gds(n).apply({ metadata: { name: 'l' }, spec: { list: [1, 2, 3], mine: 'a' } }, { fieldManager: 'ctl', force: true });
    await gds(n).patch('l', { merge: { spec: { theirs: 'b' } } }, { fieldManager: 'other' });
    const l = await gds(n).apply({ metadata: { name: 'l' }, spec: { list: [3], mine: 'a' } }, { fieldManager: 'ctl', force: true });
    assert.deepEqual(l.spec, { list: [3], mine: 'a', theirs: 'b' });
  });

  test('server-side apply: what depends on field ownership is refused by the fake (the server: 409, merge by key, removal)', async (t) => {
    const n = await ns(t);
    await mcs(n).apply({ metadata: { name: 'own' }, spec: { size: 1 } }, { fieldManager: 'ctl', force: true });
    // Without force, a value another manager set: the server answers 409 Conflict naming it.
    await mcs(n).patch('own', { merge: { spec: { size: 3 } } }, { fieldManager: 'kubectl-edit' });
    await refusedByFake(async () => {
      try {
        return await mcs(n).apply({ metadata: { name: 'own' }, spec: { size: 1 } }, { fieldManager: 'ctl' });
      } catch (err) {
        if (err instanceof ApiError) return err;
        throw err;
      }
    }, /without force that changes spec\.size/, (err) => {
      assert.ok(err instanceof ApiError && err.status === 409 && /kubectl-edit/.test(err.message), err instanceof Error ? err.message : JSON.stringify(err));
    });
    // A list another writer changed: the server merges its items by key (here: the finalizers set keeps theirs).
    await mcs(n).apply({ metadata: { name: 'own', finalizers: ['example.com/ctl'] }, spec: { size: 1 } }, { fieldManager: 'ctl', force: true });
    await mcs(n).patch('own', { json: [{ op: 'add', path: '/metadata/finalizers/-', value: 'example.com/other' }] }, { fieldManager: 'other' });
    await refusedByFake(() => mcs(n).apply({ metadata: { name: 'own', finalizers: ['example.com/ctl', 'example.com/new'] }, spec: { size: 1 } },
      { fieldManager: 'ctl', force: true }), /list metadata\.finalizers/, (m) => {
      assert.deepEqual([...(m.metadata?.finalizers ?? [])].sort(), ['example.com/ctl', 'example.com/new', 'example.com/other']);
    });
    // A field this manager applied before and now leaves out: the server removes it (owned by this manager alone).
    const g = await gds(n).apply({ metadata: { name: 'drop' }, spec: { a: 1, b: 2 } }, { fieldManager: 'ctl', force: true });
    assert.deepEqual(g.spec, { a: 1, b: 2 });
    await refusedByFake(() => gds(n).apply({ metadata: { name: 'drop' }, spec: { a: 1 } }, { fieldManager: 'ctl', force: true }), /leaves out .*spec\.b/, (r) => {
      assert.deepEqual(r.spec, { a: 1 });
    });
    await mcs(n).patch('own', { merge: { metadata: { finalizers: null } } });
  });

  test('dryRun: create, update, patch, apply and delete answer the result and store nothing', async (t) => {
    const n = await ns(t);
    const dry = await cms(n).create({ metadata: { name: 'dry' }, data: { a: '1' } }, { dryRun: true });
    assert.equal(dry.metadata?.name, 'dry');
    await assert.rejects(cms(n).get('dry'), apiError(404));
    const c = await cms(n).create({ metadata: { name: 'wet' }, data: { a: '1' } });
    const p = await cms(n).patch('wet', { merge: { data: { a: '2' } } }, { dryRun: true });
    assert.equal(p.data?.['a'], '2');
    const u = await cms(n).update({ ...c, data: { a: '3' } }, { dryRun: true });
    assert.equal(u.data?.['a'], '3');
    const a = await cms(n).apply({ metadata: { name: 'wet' }, data: { a: '4' } }, { fieldManager: 'ctl', force: true, dryRun: true });
    assert.equal(a.data?.['a'], '4');
    const created = await cms(n).apply({ metadata: { name: 'applied' }, data: { a: '1' } }, { fieldManager: 'ctl', force: true, dryRun: true });
    assert.equal(created.data?.['a'], '1');
    await assert.rejects(cms(n).get('applied'), apiError(404), 'a dry-run apply creates nothing');
    await cms(n).delete('wet', { dryRun: true });
    const now = await cms(n).get('wet');
    assert.deepEqual([now.data?.['a'], now.metadata?.resourceVersion], ['1', c.metadata?.resourceVersion]);
  });

  test('refused by the fake, served by the server: a watch (the fake offers informer(type) instead)', async (t) => {
    const n = await ns(t);
    await cms(n).create({ metadata: { name: 'w' }, data: { a: '1' } });
    // One object, so the server's stream holds one event (a JSON line) before it times out after a second.
    await refusedByFake(() => kit().client.json<{ type?: string; object?: ConfigMap }>('GET', `/api/v1/namespaces/${n}/configmaps`,
      { query: { watch: 'true', fieldSelector: 'metadata.name=w', timeoutSeconds: '1' } }), /does not support watch/, (event) => {
      assert.deepEqual([event.type, event.object?.metadata?.name, event.object?.data], ['ADDED', 'w', { a: '1' }]);
    });
  });

  test('refused by the fake, served by the server: the scale subresource (read and write spec.replicas through a Scale)', async (t) => {
    const n = await ns(t);
    await deps(n).create(deployment('sc', 2));
    await refusedByFake(() => deps(n).scale().get('sc'), /the scale subresource/, (scale) => {
      assert.deepEqual([scale.kind, scale.spec?.replicas], ['Scale', 2]);
    });
    await refusedByFake(() => deps(n).scale().patch('sc', { merge: { spec: { replicas: 3 } } }), /the scale subresource/, async (scale) => {
      assert.equal(scale.spec?.replicas, 3);
      assert.equal((await deps(n).get('sc')).spec?.['replicas'], 3);
    });
  });

  test('refused by the fake, served by the server: field selectors other than metadata.name and metadata.namespace', async (t) => {
    const n = await ns(t);
    const secrets = kit().client.resource<KubeObject & { type?: string; stringData?: Record<string, string> }>(coreResources.secrets).namespace(n);
    await secrets.create({ metadata: { name: 'o' }, type: 'Opaque' });
    await secrets.create({ metadata: { name: 'b' }, type: 'kubernetes.io/basic-auth', stringData: { username: 'u', password: 'p' } });
    await refusedByFake(() => secrets.list({ fieldSelector: 'type=kubernetes.io/basic-auth' }), /field selector "type=kubernetes.io\/basic-auth"/, (list) => {
      assert.deepEqual(list.items.map((i) => i.metadata?.name), ['b']);
    });
    // Combined with one the fake models, still refused: never a list that silently ignores part of the selector.
    await refusedByFake(() => secrets.list({ fieldSelector: 'metadata.name=o,type=Opaque' }), /field selector "type=Opaque"/, (list) => {
      assert.deepEqual(list.items.map((i) => i.metadata?.name), ['o']);
    });
  });

  test('not modelled, silently different: validation (the server refuses a Deployment status with availableReplicas > readyReplicas, the fake stores it); managedFields (never set by the fake)', async (t) => {
    const n = await deps(await ns(t)).create(deployment('v')).then((d) => d.metadata?.namespace ?? '');
    const write = deps(n).status().patch('v', { merge: { status: { replicas: 1, readyReplicas: 1, availableReplicas: 2 } } });
    if (kit().fake) {
      assert.equal((await write).status?.['availableReplicas'], 2);
    } else {
      await assert.rejects(write, apiError(422, 'Invalid'));
    }
    const managed = (await deps(n).get('v')).metadata?.managedFields;
    assert.equal(managed === undefined, kit().fake, `managedFields: ${JSON.stringify(managed)?.slice(0, 80)}`);
  });

  test('refused by the fake, done by the server: Foreground and Orphan deletes (finalizer foregroundDeletion, orphan), fieldValidation Strict', async (t) => {
    const n = await ns(t);
    await cms(n).create({ metadata: { name: 'fg' } });
    await refusedByFake(() => cms(n).delete('fg', { propagationPolicy: 'Foreground' }), /propagationPolicy Foreground/, (obj) => {
      assert.deepEqual((obj as ConfigMap).metadata?.finalizers, ['foregroundDeletion']);
    });
    // The server marks the object and leaves it to the garbage collector (not running here): it stays, terminating.
    await cms(n).create({ metadata: { name: 'or' } });
    await refusedByFake(() => cms(n).delete('or', { propagationPolicy: 'Orphan' }), /propagationPolicy Orphan/, (obj) => {
      const m = (obj as ConfigMap).metadata;
      assert.deepEqual([m?.finalizers, typeof m?.deletionTimestamp], [['orphan'], 'string']);
    });
    await refusedByFake(() => cms(n).create({ metadata: { name: 'strict' }, data: { a: '1' } }, { fieldValidation: 'Strict' }), /Strict/, (c) => {
      assert.equal(c.metadata?.name, 'strict');
    });
  });
}

describe('FakeClient', () => {
  let fake: FakeClient;
  before(() => {
    fake = new FakeClient({ crdPaths });
  });
  conformance(() => ({ client: fake, fake: true }));
});

describe('kube-apiserver (startTestEnv)', () => {
  let env: TestEnv;
  before(async () => {
    env = await startTestEnv({ crdPaths });
    // startTestEnv returns only once every installed CRD can be listed: the first LIST never races the install.
    await env.client.resource(memcachedResource).list();
    await env.client.resource(gadgets).list();
  });
  after(() => env.stop());
  conformance(() => ({ client: env.client, fake: false }));
});
