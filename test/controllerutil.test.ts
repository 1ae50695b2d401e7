/**
 * The reconcile helpers against the real kube-apiserver (issue 33.4): `finalizer()` (add before apply, cleanup on
 * deletion, removal fenced by resourceVersion, a stale cache and a concurrent removal tolerated) and `createOrPatch()`
 * (created / updated / updatedStatus / updatedStatusOnly / unchanged, only the difference sent, fenced).
 * Needs only etcd + kube-apiserver.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { coreResources, type ResourceType } from '../pkg/apimachinery/resource.ts';
import { setStatusCondition } from '../pkg/apimachinery/conditions.ts';
import { setControllerReference } from '../pkg/apimachinery/ownerref.ts';
import { ApiError, RestClient } from '../pkg/client/rest.ts';
import { finalizer } from '../pkg/runtime/finalizer.ts';
import { createOrPatch } from '../pkg/runtime/createorpatch.ts';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { adminKubeConfig, testNamespace } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';

interface ConfigMap extends KubeObject { data?: Record<string, string> }
interface Network extends KubeObject {
  spec?: { cidr: string; gateway?: string };
  status?: { conditions?: { type: string; status: 'True' | 'False' | 'Unknown'; reason?: string; message?: string; lastTransitionTime?: string }[] };
}
const networks: ResourceType = { group: 'samplecrd.k8s.io', version: 'v1', resource: 'networks', kind: 'Network', namespaced: true };
const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };
const fin = 'example.com/cleanup';

describe('reconcile helpers against the real API server', () => {
  let rest: RestClient;
  before(async () => {
    rest = new RestClient({ kubeConfig: adminKubeConfig(), registry: new Registry() });
    await installCRDs();
  });
  after(() => rest.close());

  test('finalizer(): added before apply runs; cleanup on deletion, then removed, and the object goes', async (t) => {
    const ns = await testNamespace(t, 'fin');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const created = await cms.create({ metadata: { name: 'src' }, data: { a: '1' } });
    const calls: string[] = [];
    const handlers = {
      apply: async (o: ConfigMap): Promise<string> => {
        // The finalizer is on the server when apply runs.
        calls.push(`apply finalizers=${(await cms.get('src')).metadata?.finalizers?.join(',')} seen=${o.metadata?.finalizers?.join(',')}`);
        return 'applied';
      },
      cleanup: (o: ConfigMap): Promise<string> => {
        calls.push(`cleanup deleting=${Boolean(o.metadata?.deletionTimestamp)}`);
        return Promise.resolve('cleaned');
      },
    };
    assert.equal(await finalizer(cms, created, fin, handlers), 'applied');
    assert.deepEqual(calls, [`apply finalizers=${fin} seen=${fin}`]);
    const withFin = await cms.get('src');
    assert.equal(await finalizer(cms, withFin, fin, handlers), 'applied', 'present: apply only, no write');
    assert.equal((await cms.get('src')).metadata?.resourceVersion, withFin.metadata?.resourceVersion, 'nothing written');

    await cms.delete('src');
    const deleting = await cms.get('src');
    assert.ok(deleting.metadata?.deletionTimestamp, 'held by the finalizer');
    calls.length = 0;
    assert.equal(await finalizer(cms, deleting, fin, handlers), 'cleaned');
    assert.deepEqual(calls, ['cleanup deleting=true']);
    await assert.rejects(cms.get('src'), (e: unknown) => e instanceof ApiError && e.status === 404, 'gone once the finalizer was removed');

    // A stale cache still shows the deleting object: cleanup runs again (idempotent), the removal answers 404 = done.
    calls.length = 0;
    assert.equal(await finalizer(cms, deleting, fin, handlers), 'cleaned');
    assert.deepEqual(calls, ['cleanup deleting=true']);
  });

  test('finalizer(): a stale resourceVersion re-reads (409 → fresh copy); a concurrent removal is done, not an error', async (t) => {
    const ns = await testNamespace(t, 'fin-race');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const stale = await cms.create({ metadata: { name: 'x', finalizers: ['other.io/keep'] } });
    await cms.patch('x', { merge: { data: { moved: 'on' } } }); // the cache's copy is now stale
    let applied: ConfigMap | undefined;
    await finalizer(cms, stale, fin, { apply: (o) => Promise.resolve((applied = o)), cleanup: () => Promise.resolve(undefined) });
    assert.deepEqual((await cms.get('x')).metadata?.finalizers, ['other.io/keep', fin], 'added after a 409 and a re-read');
    assert.equal(applied?.data?.['moved'], 'on', 'apply got the fresh object');

    await cms.delete('x');
    const deleting = await cms.get('x');
    // Someone else (another replica) removes our finalizer first: our fenced removal answers 409, the re-read shows
    // it gone, and that is success. The other finalizer is untouched.
    let cleanups = 0;
    const result = await finalizer(cms, deleting, fin, {
      apply: () => Promise.reject(new Error('apply must not run')),
      cleanup: async () => {
        cleanups++;
        await cms.patch('x', { merge: { metadata: { finalizers: ['other.io/keep'] } } });
        return 'done';
      },
    });
    assert.equal(result, 'done');
    assert.equal(cleanups, 1, 'cleanup is not run again for the re-read');
    assert.deepEqual((await cms.get('x')).metadata?.finalizers, ['other.io/keep']);
    await cms.patch('x', { merge: { metadata: { finalizers: null } } });
  });

  test('createOrPatch(): created, unchanged (no write), updated (only the difference, fenced), status too', async (t) => {
    const ns = await testNamespace(t, 'cop');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const owner = await cms.create({ metadata: { name: 'owner' } });
    const mutate = (cm: ConfigMap): void => {
      cm.data = { ...cm.data, a: '1' };
      setControllerReference({ ...owner, apiVersion: 'v1', kind: 'ConfigMap' }, cm);
    };
    const first = await createOrPatch(cms, { metadata: { name: 'c' } }, mutate);
    assert.equal(first.result, 'created');
    assert.equal(first.object.metadata?.ownerReferences?.[0]?.uid, owner.metadata?.uid);
    const again = await createOrPatch(cms, { metadata: { name: 'c' } }, mutate);
    assert.equal(again.result, 'unchanged');
    assert.equal(again.object.metadata?.resourceVersion, first.object.metadata?.resourceVersion, 'nothing written');

    // Someone else adds a key: a patch of our difference keeps theirs (an update of a stale copy would drop it).
    await cms.patch('c', { merge: { data: { theirs: 'x' } } });
    const updated = await createOrPatch(cms, { metadata: { name: 'c' } }, (cm) => {
      cm.data = { ...cm.data, a: '2' };
    });
    assert.equal(updated.result, 'updated');
    assert.deepEqual(updated.object.data, { a: '2', theirs: 'x' });
    await assert.rejects(createOrPatch(cms, { metadata: { name: 'c' } }, (cm) => {
      cm.metadata = { ...cm.metadata, name: 'renamed' };
    }), /changed the object's key/);

    // The status subresource of a custom resource.
    const fooApi = rest.resource<Foo>(foos).namespace(ns);
    const base: Foo = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f' } };
    assert.equal((await createOrPatch(fooApi, base, (f) => { f.spec = { deploymentName: 'd', replicas: 1 }; })).result, 'created');
    const onlyStatus = await createOrPatch(fooApi, base, (f) => { f.status = { availableReplicas: 1 }; });
    assert.equal(onlyStatus.result, 'updatedStatusOnly');
    const both = await createOrPatch(fooApi, base, (f) => {
      f.spec = { ...f.spec, replicas: 2 };
      f.status = { availableReplicas: 2 };
    });
    assert.equal(both.result, 'updatedStatus');
    const foo = await fooApi.get('f');
    assert.equal(foo.spec?.replicas, 2);
    assert.equal(foo.status?.availableReplicas, 2);
  });

  test('setStatusCondition + createOrPatch on a Network\'s status: lastTransitionTime on the server moves only with the status', async (t) => {
    const ns = await testNamespace(t, 'cond');
    const nets = rest.resource<Network>(networks).namespace(ns);
    const base: Network = { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'n' }, spec: { cidr: '10.0.0.0/24' } };
    await nets.create(base);
    let tick = 0;
    const now = (): string => `2025-01-01T00:00:0${++tick}Z`;
    const set = (status: 'True' | 'False', message: string): ReturnType<typeof createOrPatch<Network>> => createOrPatch(nets, base, (n) => {
      const conditions = ((n.status ??= {}).conditions ??= []);
      setStatusCondition(conditions, { type: 'Ready', status, reason: status === 'True' ? 'Available' : 'Progressing', message }, now);
    });
    const r1 = await set('False', '0/1');
    assert.equal(r1.result, 'updatedStatusOnly');
    assert.equal(r1.object.status?.conditions?.[0]?.lastTransitionTime, '2025-01-01T00:00:01Z');
    const r2 = await set('False', '0/1 still');
    assert.equal(r2.result, 'updatedStatusOnly');
    assert.equal(r2.object.status?.conditions?.[0]?.message, '0/1 still');
    assert.equal(r2.object.status?.conditions?.[0]?.lastTransitionTime, '2025-01-01T00:00:01Z', 'message changed, status not: time kept');
    assert.equal((await set('False', '0/1 still')).result, 'unchanged');
    const r3 = await set('True', '1/1');
    assert.equal(r3.object.status?.conditions?.[0]?.lastTransitionTime, '2025-01-01T00:00:02Z', 'status changed: time moves');
  });
});
