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
import { FakeClient, FakeUnsupportedError, startTestEnv, testNamespace, type CustomResourceDefinition, type TestEnv } from '../pkg/testing/index.ts';
import { memcachedResource, type Memcached } from '../examples/memcached/api/example/v1alpha1/zz_generated.types.ts';

const root = join(import.meta.dirname, '..');
const crdPaths = [join(root, 'examples/memcached/crd.yaml'), join(root, 'test/testdata/gadgets-crd.yaml'), join(root, 'test/testdata/samples-crd.yaml'), join(root, 'test/testdata/rules-crd.yaml')];
const gadgets: ResourceType = { group: 'conformance.ts-controller-manager.io', version: 'v1', resource: 'gadgets', kind: 'Gadget', namespaced: true };
/** A custom resource whose schema has every OpenAPI rule the server validates, prunes and defaults by (test/testdata/samples-crd.yaml). */
const samples: ResourceType = { group: 'conformance.ts-controller-manager.io', version: 'v1', resource: 'samples', kind: 'Sample', namespaced: true };
const sampleKind = 'Sample.conformance.ts-controller-manager.io';
/** A custom resource whose schema has CEL rules of every kind (test/testdata/rules-crd.yaml). */
const rules: ResourceType = { group: 'conformance.ts-controller-manager.io', version: 'v1', resource: 'rules', kind: 'Rule', namespaced: true };
const ruleKind = 'Rule.conformance.ts-controller-manager.io';
interface Gadget extends KubeObject { spec?: Record<string, unknown>; status?: Record<string, unknown> }
interface ConfigMap extends KubeObject { data?: Record<string, string> }
interface Deployment extends KubeObject { spec?: Record<string, unknown>; status?: Record<string, unknown> }
const mcApiVersion = 'example.ts-controller-manager.io/v1alpha1';

const crdResource: ResourceType = { group: 'apiextensions.k8s.io', version: 'v1', resource: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false };
/** A CRD `<plural>.conformance.ts-controller-manager.io` with one version per schema (v1, v2, …; undefined: none). */
function badCRD(plural: string, schemas: (Record<string, unknown> | undefined)[], status = false): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: `${plural}.conformance.ts-controller-manager.io` },
    spec: {
      group: 'conformance.ts-controller-manager.io', scope: 'Namespaced', names: { kind: plural, plural, singular: plural, listKind: `${plural}List` },
      versions: schemas.map((s, i) => ({ name: `v${i + 1}`, served: true, storage: i === 0, ...(status ? { subresources: { status: {} } } : {}), ...(s ? { schema: { openAPIV3Schema: s } } : {}) })),
    },
  } as CustomResourceDefinition;
}

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

interface StatusCause { reason?: string; message?: string; field?: string }

/**
 * A 422 Invalid answer for `<kind> "<name>"` whose causes are exactly `want` ("<reason> <field>: <message>"), and whose
 * message is the server's aggregate of them: `<kind> "<name>" is invalid: <one>` or `… is invalid: [<a>, <b>]`. The order
 * of errors of different fields is not compared: the server's follows Go map iteration and varies between requests.
 */
const invalidAs = (kind: string, name: string, want: string[]) => (err: unknown): boolean => {
  assert.ok(err instanceof ApiError, `an ApiError, got ${String(err)}`);
  assert.deepEqual([err.status, err.reason], [422, 'Invalid'], err.message);
  const body = err.body as { message?: string; details?: { name?: string; kind?: string; causes?: StatusCause[] } };
  const causes = (body.details?.causes ?? []).map((c) => `${c.reason ?? ''} ${c.field ?? ''}: ${c.message ?? ''}`);
  assert.deepEqual([...causes].sort(), [...want].sort(), body.message);
  const prefix = `${kind} "${name}" is invalid: `;
  assert.ok(body.message?.startsWith(prefix), body.message);
  const errors = [...new Set((body.details?.causes ?? []).map((c) => `${c.field ?? ''}: ${c.message ?? ''}`))];
  const rest = (body.message ?? '').slice(prefix.length);
  if (errors.length === 1) assert.equal(rest, errors[0]);
  else {
    assert.ok(rest.startsWith('[') && rest.endsWith(']'), rest);
    assert.equal(rest.length, errors.reduce((n, e) => n + e.length, 0) + 2 * (errors.length - 1) + 2, rest);
    for (const e of errors) assert.ok(rest.includes(e), `${e} in ${rest}`);
  }
  return true;
};

/** `o` without what differs between any two servers (uid, resourceVersion, timestamps, managedFields, namespace). */
function comparable<T extends KubeObject>(o: T): T {
  const c = JSON.parse(JSON.stringify(o)) as T & { metadata: Record<string, unknown> };
  for (const k of ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'namespace']) delete c.metadata[k];
  return c;
}

/** A Service with its allocated cluster IP (10.0.0.0/24) and node ports (30000–32767) checked and replaced by placeholders. */
function allocated<T extends KubeObject & { spec?: Record<string, unknown> }>(svc: T): T {
  const c = comparable(svc);
  const spec = (c.spec ?? {}) as { clusterIP?: string; clusterIPs?: string[]; healthCheckNodePort?: number; ports?: { nodePort?: number }[] };
  if (spec.clusterIP && spec.clusterIP !== 'None') {
    assert.match(spec.clusterIP, /^10\.0\.0\.\d{1,3}$/);
    assert.deepEqual(spec.clusterIPs, [spec.clusterIP]);
    spec.clusterIP = '<ip>';
    spec.clusterIPs = ['<ip>'];
  }
  const ports = [...(spec.ports ?? []).map((p) => p.nodePort), spec.healthCheckNodePort].filter((n) => n !== undefined);
  assert.equal(new Set(ports).size, ports.length, 'node ports are distinct');
  for (const p of ports) assert.ok(p >= 30000 && p <= 32767, `node port ${p}`);
  for (const p of spec.ports ?? []) if (p.nodePort !== undefined) (p as Record<string, unknown>)['nodePort'] = '<port>';
  if (spec.healthCheckNodePort !== undefined) (spec as Record<string, unknown>)['healthCheckNodePort'] = '<port>';
  return c;
}

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
  const sds = (namespace: string) => kit().client.resource<Gadget>(samples).namespace(namespace);
  const sample = (name: string, spec: Record<string, unknown>): Gadget => ({ apiVersion: 'conformance.ts-controller-manager.io/v1', kind: 'Sample', metadata: { name }, spec });
  /** The fake refuses `call` naming `feature`; the real server answers and `real` checks the answer. */
  const refusedByFake = async <T>(call: () => Promise<T>, feature: RegExp, real: (answer: T) => void | Promise<void>): Promise<void> => {
    if (kit().fake) {
      await assert.rejects(call(), (err: unknown) => err instanceof FakeUnsupportedError && feature.test(err.message));
    } else {
      await real(await call());
    }
  };

  /** Installs a CRD: addCRD on the fake, a create of the CustomResourceDefinition on the server. */
  const installCRD = async (crd: CustomResourceDefinition): Promise<void> => {
    if (kit().fake) (kit().client as FakeClient).addCRD(crd);
    else await kit().client.resource<CustomResourceDefinition>(crdResource).create(crd);
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

  test('CRD install: a CRD kube-apiserver refuses (type int, an array without items, a pattern RE2 cannot parse; a default above its maximum, a version without a schema) is refused by addCRD with the server\'s 422 message and causes', async () => {
    const root = (spec: Record<string, unknown>): Record<string, unknown> => ({ type: 'object', properties: { spec: { type: 'object', properties: spec } } });
    const bad1 = badCRD('refusedones', [root({ size: { type: 'int' }, list: { type: 'array' }, name: { type: 'string', pattern: '[a-' } })]);
    await assert.rejects(installCRD(bad1), invalidAs('CustomResourceDefinition.apiextensions.k8s.io', 'refusedones.conformance.ts-controller-manager.io', [
      'FieldValueNotSupported spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Unsupported value: "int": supported values: "array", "boolean", "integer", "number", "object", "string"',
      'FieldValueRequired spec.validation.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified',
      'FieldValueInvalid spec.validation.openAPIV3Schema.properties[spec].properties[name].pattern: Invalid value: "[a-": must be a valid regular expression, but isn\'t: error parsing regexp: missing closing ]: `[a-`',
    ]));
    // The default is checked once the schema is structural; each version apart when their schemas differ.
    const bad2 = badCRD('refusedtwos', [root({ replicas: { type: 'integer', maximum: 10, default: 50 }, opts: { type: 'object', properties: { a: { type: 'string' } }, default: { a: 'x', b: 1 } } }), undefined]);
    await assert.rejects(installCRD(bad2), invalidAs('CustomResourceDefinition.apiextensions.k8s.io', 'refusedtwos.conformance.ts-controller-manager.io', [
      'FieldValueInvalid spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[replicas].default: Invalid value: 50:  in body should be less than or equal to 10',
      'FieldValueInvalid spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[opts].default: Invalid value: {"a":"x","b":1}: must not have unknown fields',
      'FieldValueRequired spec.versions[1].schema.openAPIV3Schema: Required value',
    ]));
    // The root of a schema with a status subresource allows only some keywords: the server prints the whole schema.
    const bad3 = badCRD('refusedthrees', [{ type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } }, anyOf: [{ required: ['spec'] }] }], true);
    const allowed = 'only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled';
    await assert.rejects(installCRD(bad3), (err: unknown) => {
      const body = (err as ApiError).body as { message?: string; details?: { causes?: StatusCause[] } };
      const causes = body.details?.causes ?? [];
      assert.deepEqual(causes.map((c) => [c.reason, c.field]), [['FieldValueInvalid', 'spec.validation.openAPIV3Schema']], body.message);
      assert.match(causes[0]?.message ?? '', /^Invalid value: \{"ID":"","Schema":"","Ref":null,"Description":"","Type":"object",.*"AnyOf":\[\{"ID":"",.*"Required":\["spec"\],.*"XPreserveUnknownFields":true,.*"XValidations":null\}: only \[/);
      assert.ok((causes[0]?.message ?? '').endsWith(allowed), causes[0]?.message);
      assert.equal(body.message, `CustomResourceDefinition.apiextensions.k8s.io "refusedthrees.conformance.ts-controller-manager.io" is invalid: spec.validation.openAPIV3Schema: ${causes[0]?.message ?? ''}`);
      return true;
    });
  });

  test('CRD install: a pattern in RE2 syntax ECMAScript lacks ((?i)) is refused by the fake at addCRD (it cannot check it), accepted by the server', async () => {
    const crd = badCRD('caseless', [{ type: 'object', properties: { spec: { type: 'object', properties: { name: { type: 'string', pattern: '(?i)^web$' } } } } }]);
    await refusedByFake(() => installCRD(crd), /the CRD caseless\.conformance\.ts-controller-manager\.io: v1: spec\.name: ECMAScript cannot compile the pattern "\(\?i\)\^web\$"/, async () => {
      await kit().client.resource(crdResource).delete(crd.metadata?.name ?? '');
    });
  });

  test('CEL rules: message, messageExpression, reason (Forbidden, Required, Duplicate), fieldPath; the value of a scalar in the message, none of an object or list; an evaluation error; a type error skips the rules', async (t) => {
    const n = await ns(t);
    const rs = kit().client.resource<Gadget>(rules).namespace(n);
    const rule = (name: string, spec: Record<string, unknown>): Gadget => ({ apiVersion: 'conformance.ts-controller-manager.io/v1', kind: 'Rule', metadata: { name }, spec });
    await assert.rejects(rs.create(rule('a', { min: 5, max: 3, name: 'bcdefg', tags: ['ok', 'bad'] })), invalidAs(ruleKind, 'a', [
      'FieldValueInvalid spec: Invalid value: min must not exceed max',
      'FieldValueInvalid spec: Invalid value: failed rule: self.name.startsWith("a")',
      'FieldValueRequired spec.name: Required value: failed rule: self.size() < 5',
      'FieldValueDuplicate spec.tags[1]: Duplicate value: "bad"',
    ]));
    await assert.rejects(rs.create(rule('b', { min: 200, max: 300, name: 'abc' })), invalidAs(ruleKind, 'b', [
      'FieldValueForbidden spec.min: Forbidden: min is too large for abc',
      'FieldValueInvalid spec.labels[k]: Invalid value: see the labels',
    ]));
    await assert.rejects(rs.create(rule('c', { min: 1, max: 3 })), invalidAs(ruleKind, 'c', [
      'FieldValueInvalid spec: Invalid value: "object": no such key: name evaluating rule: self.name.startsWith("a")',
    ]));
    await assert.rejects(rs.create(rule('e', { min: 'x', max: 2, name: 'a' })), invalidAs(ruleKind, 'e', [
      'FieldValueTypeInvalid spec.min: Invalid value: "string": spec.min in body must be of type integer: "string"',
      'FieldValueInvalid <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
    ]));
    await assert.rejects(rs.create(rule('f', { min: 1, max: 2, name: 'a', ratio: 7.5, enabled: false, tags: ['a', 'b', 'c'], labels: { A: 'x' } })), invalidAs(ruleKind, 'f', [
      'FieldValueInvalid spec.ratio: Invalid value: 7.5: failed rule: self < 5.0',
      'FieldValueInvalid spec.enabled: Invalid value: false: failed rule: self',
      'FieldValueInvalid spec.tags: Invalid value: failed rule: self.size() < 3',
      'FieldValueInvalid spec.labels: Invalid value: keys are lowercase letters',
    ]));
    const ok = await rs.create(rule('ok', { min: 1, max: 2, name: 'abc', ratio: 1.5, enabled: true, tags: ['x'], labels: { k: 'v' } }));
    assert.equal(ok.spec?.['name'], 'abc');
    await assert.rejects(rs.get('a'), apiError(404));
  });

  test('CEL transition rules: oldSelf of a field and of map-list items matched by key; not evaluated on create (a new item has no old one)', async (t) => {
    const n = await ns(t);
    const rs = kit().client.resource<Gadget>(rules).namespace(n);
    const d = await rs.create({ apiVersion: 'conformance.ts-controller-manager.io/v1', kind: 'Rule', metadata: { name: 'd' },
      spec: { min: 1, max: 2, name: 'a', immutable: 'x', counters: [{ key: 'a', value: 5 }, { key: 'b', value: 5 }] } });
    await assert.rejects(rs.update({ ...d, spec: { ...d.spec, immutable: 'y', counters: [{ key: 'b', value: 4 }, { key: 'a', value: 6 }, { key: 'c', value: 1 }] } }), invalidAs(ruleKind, 'd', [
      'FieldValueInvalid spec.immutable: Invalid value: "y": immutable',
      'FieldValueInvalid spec.counters[0]: Invalid value: a counter only grows',
    ]));
    const grown = await rs.update({ ...d, spec: { ...d.spec, counters: [{ key: 'b', value: 9 }, { key: 'a', value: 5 }, { key: 'c', value: 0 }] } });
    assert.deepEqual(grown.spec?.['counters'], [{ key: 'b', value: 9 }, { key: 'a', value: 5 }, { key: 'c', value: 0 }]);
    const same = await rs.patch('d', { merge: { spec: { immutable: 'x', ratio: 1 } } });
    assert.deepEqual([same.spec?.['immutable'], same.spec?.['ratio']], ['x', 1]);
  });

  test('CEL rules the fake cannot evaluate (a Kubernetes library function cel-js lacks: isSorted) are named at addCRD and left unchecked, or refused with uncheckedRules: refuse; the server accepts the CRD', async () => {
    const crd = badCRD('sorteds', [{ type: 'object', properties: { spec: { type: 'object', properties: { tags: { type: 'array', maxItems: 5, items: { type: 'string', maxLength: 5 }, 'x-kubernetes-validations': [{ rule: 'self.isSorted()' }] } } } } }]);
    const named = /the CRD sorteds\.conformance\.ts-controller-manager\.io: v1: spec\.tags x-kubernetes-validations\[0\] "self\.isSorted\(\)": isSorted\(\) \(a Kubernetes CEL library function/;
    if (kit().fake) {
      const fake = kit().client as FakeClient;
      const before = fake.unchecked.length;
      fake.addCRD(crd);
      assert.match(fake.unchecked.slice(before).join('\n'), named);
      assert.throws(() => new FakeClient({ uncheckedRules: 'refuse' }).addCRD(crd), (err: unknown) => err instanceof FakeUnsupportedError && named.test(err.message));
    } else {
      await installCRD(crd);
      await kit().client.resource(crdResource).delete(crd.metadata?.name ?? '');
    }
  });

  test('CRD validation: a value above `maximum` is 422 Invalid with the server\'s message and details.causes (replicas: 50 against maximum: 10); nothing is stored', async (t) => {
    const n = await ns(t);
    const err = await sds(n).create(sample('w', { image: 'nginx', replicas: 50 })).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof ApiError);
    assert.equal((err.body as { message?: string }).message,
      'Sample.conformance.ts-controller-manager.io "w" is invalid: spec.replicas: Invalid value: 50: spec.replicas in body should be less than or equal to 10');
    assert.deepEqual((err.body as { details?: unknown }).details, {
      name: 'w', group: 'conformance.ts-controller-manager.io', kind: 'Sample',
      causes: [{ reason: 'FieldValueInvalid', message: 'Invalid value: 50: spec.replicas in body should be less than or equal to 10', field: 'spec.replicas' }],
    });
    await assert.rejects(sds(n).get('w'), apiError(404));
  });

  test('CRD validation: type, required, minLength, pattern, enum (strings and numbers), exclusiveMinimum, multipleOf, minItems, maxProperties, additionalProperties', async (t) => {
    const n = await ns(t);
    await assert.rejects(sds(n).create(sample('t', { replicas: 'x', enabled: 'yes' })), invalidAs(sampleKind, 't', [
      'FieldValueTypeInvalid spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
      'FieldValueTypeInvalid spec.enabled: Invalid value: "string": spec.enabled in body must be of type boolean: "string"',
      'FieldValueRequired spec.image: Required value',
    ]));
    await assert.rejects(sds(n).create(sample('s', { image: 'AB', mode: 'Slow', port: 81, ratio: 0.3, tags: [], labels: { a: '123456789', b: 'x', c: 'y' } })), invalidAs(sampleKind, 's', [
      'FieldValueInvalid spec.image: Invalid value: "AB": spec.image in body should be at least 3 chars long',
      'FieldValueNotSupported spec.mode: Unsupported value: "Slow": supported values: "Fast", "Safe"',
      'FieldValueNotSupported spec.port: Unsupported value: 81: supported values: "80", "443"',
      'FieldValueInvalid spec.ratio: Invalid value: 0.3: spec.ratio in body should be a multiple of 0.25',
      'FieldValueInvalid spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items',
      'FieldValueTooMany spec.labels: Too many: 3: must have at most 2 items',
      'FieldValueTooLong spec.labels.a: Too long: may not be more than 8 bytes',
    ]));
    // The server's quirks, kept: an integer in a number field with a fractional multipleOf is checked in integer
    // arithmetic (the factor truncated to 0); a pattern is checked only when the length is within bounds.
    await assert.rejects(sds(n).create(sample('q', { image: 'Not Valid', ratio: 0 })), invalidAs(sampleKind, 'q', [
      'FieldValueInvalid spec.image: Invalid value: "Not Valid": spec.image in body should match \'^[a-z0-9./:-]+$\'',
      'FieldValueInvalid spec.ratio: Invalid value: 0: factor MultipleOf declared for spec.ratio must be positive: 0',
      'FieldValueInvalid spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0',
    ]));
  });

  test('CRD validation: maxItems, formats (uuid, date-time, email, duration; an unknown format is not checked), null and float items of an integer list, the int32 range', async (t) => {
    const n = await ns(t);
    await assert.rejects(sds(n).create(sample('f', {
      image: 'nginx', tags: ['a', 'b', 'c', 'd'], id: 'x', since: 'yesterday', email: 'nope', timeout: '5 parsecs', unknownFormat: 'whatever', list: [1, null, 2.5],
    })), invalidAs(sampleKind, 'f', [
      'FieldValueTooMany spec.tags: Too many: 4: must have at most 3 items',
      'FieldValueTypeInvalid spec.id: Invalid value: "x": spec.id in body must be of type uuid: "x"',
      'FieldValueTypeInvalid spec.since: Invalid value: "yesterday": spec.since in body must be of type date-time: "yesterday"',
      'FieldValueTypeInvalid spec.email: Invalid value: "nope": spec.email in body must be of type email: "nope"',
      'FieldValueTypeInvalid spec.timeout: Invalid value: "5 parsecs": spec.timeout in body must be of type duration: "5 parsecs"',
      'FieldValueTypeInvalid spec.list[1]: Invalid value: "null": spec.list[1] in body must be of type integer: "null"',
      'FieldValueTypeInvalid spec.list[2]: Invalid value: "number": spec.list[2] in body must be of type integer: "number"',
      'FieldValueInvalid <nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.list[2]',
    ]));
    await assert.rejects(sds(n).create(sample('r', { image: 'nginx', replicas: 5000000000 })), invalidAs(sampleKind, 'r', [
      'FieldValueInvalid <nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.replicas',
      'FieldValueInvalid spec.replicas: Invalid value: 5000000000: spec.replicas in body should be less than or equal to 10',
    ]));
    const ok = await sds(n).create(sample('ok', {
      image: 'nginx', id: '123e4567-e89b-12d3-a456-426614174000', since: '2026-11-28T05:31:00Z', email: 'a@example.com', timeout: '90s', unknownFormat: 'anything',
    }));
    assert.equal(ok.spec?.['timeout'], '90s');
  });

  test('CRD validation: x-kubernetes-list-type set and map refuse duplicates; int-or-string refuses a boolean (anyOf)', async (t) => {
    const n = await ns(t);
    await assert.rejects(sds(n).create(sample('d', { image: 'nginx', tags: ['a', 'a'], ports: [{ name: 'x' }, { name: 'x', port: 1 }] })), invalidAs(sampleKind, 'd', [
      'FieldValueDuplicate spec.tags[1]: Duplicate value: "a"',
      'FieldValueDuplicate spec.ports[1]: Duplicate value: {"name":"x"}',
    ]));
    await assert.rejects(sds(n).create(sample('i', { image: 'nginx', size: true })), invalidAs(sampleKind, 'i', [
      'FieldValueTypeInvalid spec.size: Invalid value: "boolean": spec.size in body must be of type integer,string: "boolean"',
      'FieldValueInvalid <nil>: Invalid value: "": "spec.size" must validate at least one schema (anyOf)',
      'FieldValueTypeInvalid spec.size: Invalid value: "boolean": spec.size in body must be of type integer: "boolean"',
    ]));
  });

  test('CRD pruning and defaulting: unknown fields dropped (kept under x-kubernetes-preserve-unknown-fields), nulls of non-nullable fields dropped or defaulted, nested defaults, map-list item defaults, int-or-string', async (t) => {
    const n = await ns(t);
    const w = await sds(n).create({
      ...sample('p', {
        image: 'nginx', mode: null, note: null, replicas: null, unknown: 1, size: '50%', nested: null,
        extra: { known: 1, free: { x: 1 }, pruned: { kept: 'a', gone: 1 } },
        ports: [{ name: 'http' }, { name: 'https', port: null }], labels: { a: null, b: 'x' },
      }),
      status: { phase: 'Ready' }, top: 1,
    } as Gadget);
    assert.deepEqual(w.spec, {
      image: 'nginx', mode: 'Safe', note: null, replicas: 1, size: '50%', nested: { level: 3 },
      extra: { known: 1, free: { x: 1 }, pruned: { kept: 'a' } },
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }, { name: 'https', port: 8080, protocol: 'TCP' }], labels: { b: 'x' },
    });
    assert.equal(w.status, undefined, 'status dropped on create (status subresource)');
    assert.equal((w as Record<string, unknown>)['top'], undefined, 'an unknown top-level field is pruned');
    assert.deepEqual(await sds(n).get('p').then((g) => g.spec), w.spec);
  });

  test('CRD validation on update, patch, apply and /status: the same rules; /status checks only status (paths under status., the message\'s path relative to it); nothing is written', async (t) => {
    const n = await ns(t);
    const w = await sds(n).create(sample('u', { image: 'nginx' }));
    await assert.rejects(sds(n).patch('u', { merge: { spec: { replicas: 11 } } }), invalidAs(sampleKind, 'u', [
      'FieldValueInvalid spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10',
    ]));
    await assert.rejects(sds(n).update({ ...w, spec: { image: 'x' } }), invalidAs(sampleKind, 'u', [
      'FieldValueInvalid spec.image: Invalid value: "x": spec.image in body should be at least 3 chars long',
    ]));
    await assert.rejects(sds(n).apply({ apiVersion: 'conformance.ts-controller-manager.io/v1', kind: 'Sample', metadata: { name: 'u' }, spec: { image: 'x y' } }, { fieldManager: 'ctl', force: true }),
      invalidAs(sampleKind, 'u', ['FieldValueInvalid spec.image: Invalid value: "x y": spec.image in body should match \'^[a-z0-9./:-]+$\'']));
    await assert.rejects(sds(n).status().patch('u', { merge: { status: { phase: 'Gone', observed: -1, conditions: [{ type: 'A', status: 'Maybe' }, { type: 'A', status: 'True' }] } } }),
      invalidAs(sampleKind, 'u', [
        'FieldValueNotSupported status.phase: Unsupported value: "Gone": supported values: "Pending", "Ready"',
        'FieldValueNotSupported status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
        'FieldValueInvalid status.observed: Invalid value: -1: observed in body should be greater than or equal to 0',
        'FieldValueDuplicate status.conditions[1]: Duplicate value: {"type":"A"}',
      ]));
    await assert.rejects(sds(n).status().patch('u', { merge: { status: { conditions: [{ type: 'A' }] } } }),
      invalidAs(sampleKind, 'u', ['FieldValueRequired status.conditions[0].status: Required value']));
    // /status ignores an invalid spec (it is not written), and validates the status it writes.
    const st = await sds(n).status().patch('u', { merge: { spec: { replicas: 11 }, status: { phase: 'Ready' } } });
    assert.deepEqual([st.spec?.['replicas'], st.status?.['phase']], [1, 'Ready']);
    const now = await sds(n).get('u');
    assert.deepEqual([now.spec, now.metadata?.resourceVersion], [{ image: 'nginx', replicas: 1, mode: 'Safe', nested: { level: 3 } }, st.metadata?.resourceVersion]);
  });

  test('metadata validation (every kind): a name that is not a DNS subdomain, a Service name that is not a DNS label, invalid label keys and values', async (t) => {
    const n = await ns(t);
    const subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    await assert.rejects(sds(n).create(sample('Bad_Name', { image: 'nginx' })), invalidAs(sampleKind, 'Bad_Name', [`FieldValueInvalid metadata.name: Invalid value: "Bad_Name": ${subdomain}`]));
    await assert.rejects(cms(n).create({ metadata: { name: 'Bad_Name' } }), invalidAs('ConfigMap', 'Bad_Name', [`FieldValueInvalid metadata.name: Invalid value: "Bad_Name": ${subdomain}`]));
    const services = kit().client.resource<KubeObject & { spec?: Record<string, unknown> }>(coreResources.services).namespace(n);
    await assert.rejects(services.create({ metadata: { name: 'web.v1' }, spec: { ports: [{ port: 80 }] } }), invalidAs('Service', 'web.v1', [
      'FieldValueInvalid metadata.name: Invalid value: "web.v1": must not contain dots',
    ]));
    await assert.rejects(cms(n).create({ metadata: { name: 'lbl', labels: { 'a b': 'c', ok: 'x y' } } }), invalidAs('ConfigMap', 'lbl', [
      "FieldValueInvalid metadata.labels: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
      "FieldValueInvalid metadata.labels: Invalid value: \"x y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ]));
  });

  test('built-in defaults: a Deployment (strategy, revisionHistoryLimit, progressDeadlineSeconds, status) and its Pod template (restartPolicy, dnsPolicy, containers, ports, env, probes, volumes, resources in canonical form), the whole object', async (t) => {
    const n = await ns(t);
    const d = await deps(n).create({
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', labels: { app: 'web' } },
      spec: {
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            initContainers: [{ name: 'init', image: 'busybox:1.36' }],
            containers: [
              { name: 'app', image: 'registry.example.com:5000/app', ports: [{ containerPort: 8080 }, { containerPort: 53, protocol: 'UDP' }],
                resources: { limits: { cpu: '0.5', memory: '1024Mi' }, requests: { cpu: 0.25, memory: '0.5Gi', 'ephemeral-storage': '1000M' } } },
              { name: 'side', image: 'busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000',
                env: [{ name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
                readinessProbe: { httpGet: { port: 8080 } }, livenessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 5 },
                volumeMounts: [{ name: 'config', mountPath: '/etc/app' }] },
            ],
            volumes: [
              { name: 'config', configMap: { name: 'app' } }, { name: 'creds', secret: { secretName: 'app' } },
              { name: 'scratch', emptyDir: { sizeLimit: '1024Mi' } }, { name: 'host', hostPath: { path: '/tmp' } },
              { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token' } }, { downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }] } },
            ],
          },
        },
      },
    });
    const probeDefaults = { timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 };
    const term = { terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' };
    assert.deepEqual(comparable(d), {
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', labels: { app: 'web' }, generation: 1 },
      spec: {
        replicas: 1, selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            initContainers: [{ name: 'init', image: 'busybox:1.36', resources: {}, ...term, imagePullPolicy: 'IfNotPresent' }],
            containers: [
              { name: 'app', image: 'registry.example.com:5000/app', ports: [{ containerPort: 8080, protocol: 'TCP' }, { containerPort: 53, protocol: 'UDP' }],
                resources: { limits: { cpu: '500m', memory: '1Gi' }, requests: { cpu: '250m', memory: '512Mi', 'ephemeral-storage': '1G' } }, ...term, imagePullPolicy: 'Always' },
              { name: 'side', image: 'busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000',
                env: [{ name: 'POD', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } }], resources: {},
                volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
                livenessProbe: { tcpSocket: { port: 8080 }, ...probeDefaults, periodSeconds: 5 },
                readinessProbe: { httpGet: { path: '/', port: 8080, scheme: 'HTTP' }, ...probeDefaults, periodSeconds: 10 },
                ...term, imagePullPolicy: 'IfNotPresent' },
            ],
            volumes: [
              { name: 'config', configMap: { name: 'app', defaultMode: 420 } }, { name: 'creds', secret: { secretName: 'app', defaultMode: 420 } },
              { name: 'scratch', emptyDir: { sizeLimit: '1Gi' } }, { name: 'host', hostPath: { path: '/tmp', type: '' } },
              { name: 'token', projected: { sources: [{ serviceAccountToken: { expirationSeconds: 3600, path: 'token' } }, { downwardAPI: { items: [{ path: 'n', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } }] } }], defaultMode: 420 } },
            ],
            restartPolicy: 'Always', terminationGracePeriodSeconds: 30, dnsPolicy: 'ClusterFirst', securityContext: {}, schedulerName: 'default-scheduler',
          },
        },
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } },
        revisionHistoryLimit: 10, progressDeadlineSeconds: 600,
      },
      status: {},
    });
    // An update that leaves the defaulted fields out gets them again (no spec change, no new generation); a Recreate
    // strategy gets no rollingUpdate.
    const again = await deps(n).update({ ...d, spec: { ...deployment('web').spec, selector: { matchLabels: { app: 'web' } }, template: (d.spec as { template: unknown }).template, replicas: 1 } });
    assert.equal(again.metadata?.generation, 1);
    assert.deepEqual(again.spec, d.spec);
    const recreate = await deps(n).patch('web', { merge: { spec: { strategy: { type: 'Recreate', rollingUpdate: null } } } });
    assert.deepEqual((recreate.spec as { strategy?: unknown }).strategy, { type: 'Recreate' });
  });

  test('built-in defaults: Services (type ClusterIP, protocol, targetPort, sessionAffinity, ipFamilies, internalTrafficPolicy; NodePort, LoadBalancer with Local traffic, headless, ExternalName) — the allocated cluster IP and node ports are the server\'s own, kept by an update that leaves them out', async (t) => {
    const n = await ns(t);
    type Svc = KubeObject & { spec?: Record<string, unknown>; status?: unknown };
    const svcs = kit().client.resource<Svc>(coreResources.services).namespace(n);
    const common = { sessionAffinity: 'None', ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack', internalTrafficPolicy: 'Cluster' };
    const web = await svcs.create({ metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP', targetPort: 'dns' }] } });
    assert.deepEqual(allocated(web), {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' },
      spec: { ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 80 }, { name: 'dns', protocol: 'UDP', port: 53, targetPort: 'dns' }],
        selector: { app: 'web' }, clusterIP: '<ip>', clusterIPs: ['<ip>'], type: 'ClusterIP', ...common },
      status: { loadBalancer: {} },
    });
    const np = await svcs.create({ metadata: { name: 'np' }, spec: { type: 'NodePort', ports: [{ name: 'a', port: 80 }, { name: 'b', port: 81 }] } });
    assert.deepEqual(allocated(np).spec, {
      ports: [{ name: 'a', protocol: 'TCP', port: 80, targetPort: 80, nodePort: '<port>' }, { name: 'b', protocol: 'TCP', port: 81, targetPort: 81, nodePort: '<port>' }],
      clusterIP: '<ip>', clusterIPs: ['<ip>'], type: 'NodePort', externalTrafficPolicy: 'Cluster', ...common,
    });
    const lb = await svcs.create({ metadata: { name: 'lb' }, spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ port: 443 }] } });
    assert.deepEqual(allocated(lb).spec, {
      ports: [{ protocol: 'TCP', port: 443, targetPort: 443, nodePort: '<port>' }], clusterIP: '<ip>', clusterIPs: ['<ip>'], type: 'LoadBalancer',
      externalTrafficPolicy: 'Local', healthCheckNodePort: '<port>', allocateLoadBalancerNodePorts: true, ...common,
    });
    const headless = await svcs.create({ metadata: { name: 'headless' }, spec: { clusterIP: 'None', selector: { app: 'web' }, ports: [{ port: 80 }] } });
    assert.deepEqual(allocated(headless).spec, {
      ports: [{ protocol: 'TCP', port: 80, targetPort: 80 }], selector: { app: 'web' }, clusterIP: 'None', clusterIPs: ['None'], type: 'ClusterIP', ...common,
    });
    const bare = await svcs.create({ metadata: { name: 'bare' }, spec: { clusterIP: 'None', ports: [{ port: 80 }] } });
    assert.deepEqual([bare.spec?.['ipFamilies'], bare.spec?.['ipFamilyPolicy']], [['IPv4', 'IPv6'], 'RequireDualStack'], 'headless without a selector');
    const ext = await svcs.create({ metadata: { name: 'ext' }, spec: { type: 'ExternalName', externalName: 'example.com' } });
    assert.deepEqual(ext.spec, { type: 'ExternalName', sessionAffinity: 'None', externalName: 'example.com' });
    // An update whose body leaves out the allocated values keeps them (the server's patchAllocatedValues).
    const updated = await svcs.update({ metadata: { name: 'np', resourceVersion: np.metadata?.resourceVersion }, spec: { type: 'NodePort', ports: [{ name: 'a', port: 80 }, { name: 'b', port: 81 }] } });
    assert.deepEqual([updated.spec?.['clusterIP'], (updated.spec?.['ports'] as unknown[]), updated.metadata?.resourceVersion], [np.spec?.['clusterIP'], np.spec?.['ports'], np.metadata?.resourceVersion]);
  });

  test('built-in defaults: a Secret (type Opaque, stringData merged into data as base64), a ConfigMap (nothing), a Namespace (the kubernetes.io/metadata.name label)', async (t) => {
    const n = await ns(t);
    type Sec = KubeObject & { type?: string; data?: Record<string, string>; stringData?: Record<string, string> };
    const secrets = kit().client.resource<Sec>(coreResources.secrets).namespace(n);
    const s = await secrets.create({ metadata: { name: 's' }, stringData: { user: 'ü', pass: 'x' }, data: { pass: 'eQ==', other: 'Mg==' } });
    assert.deepEqual(comparable(s), { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' }, data: { user: 'w7w=', pass: 'eA==', other: 'Mg==' }, type: 'Opaque' });
    const u = await secrets.patch('s', { merge: { stringData: { pass: 'z' } } });
    assert.deepEqual([u.data, u.stringData, u.type], [{ user: 'w7w=', pass: 'eg==', other: 'Mg==' }, undefined, 'Opaque']);
    const c = await cms(n).create({ metadata: { name: 'c' } });
    assert.deepEqual(comparable(c), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } });
    const got = await kit().client.resource(coreResources.namespaces).get(n);
    assert.equal(got.metadata?.labels?.['kubernetes.io/metadata.name'], n);
  });

  test('built-in defaults: a Pod (its spec as a template\'s, enableServiceLinks, requests from limits, the default admission plugins\' tolerations and priority, status Pending with its QoS class)', async (t) => {
    const n = await ns(t);
    type Pod = KubeObject & { spec?: Record<string, unknown>; status?: unknown };
    const pods = kit().client.resource<Pod>(coreResources.pods).namespace(n);
    const p = await pods.create({ metadata: { name: 'p' }, spec: {
      containers: [{ name: 'c', image: 'r.io/x/busybox:1.2', resources: { limits: { cpu: '500m', memory: '128Mi' } } }],
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists' }],
    } });
    assert.deepEqual(comparable(p), {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', generation: 1 },
      spec: {
        containers: [{ name: 'c', image: 'r.io/x/busybox:1.2', resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: { cpu: '500m', memory: '128Mi' } },
          terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'IfNotPresent' }],
        restartPolicy: 'Always', terminationGracePeriodSeconds: 30, dnsPolicy: 'ClusterFirst', securityContext: {}, schedulerName: 'default-scheduler',
        tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists' }, { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
        priority: 0, enableServiceLinks: true, preemptionPolicy: 'PreemptLowerPriority',
      },
      status: { phase: 'Pending', qosClass: 'Guaranteed' },
    });
    const q = await pods.create({ metadata: { name: 'q' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } });
    assert.deepEqual([(q.spec?.['tolerations'] as unknown[]).length, q.status], [2, { phase: 'Pending', qosClass: 'BestEffort' }]);
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
