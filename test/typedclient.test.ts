/**
 * The typed client (pkg/client/typed.ts) against the real kube-apiserver: CRUD with resourceVersion fences,
 * server-side apply (idempotence, field ownership, conflicts and force), dryRun, delete preconditions and
 * propagation, the status subresource of a CRD (Foo) and the scale subresource of a Deployment. Needs only etcd +
 * kube-apiserver (TEST_CLUSTER_MODE=minimal is enough); every assertion also holds with the full control plane.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { ApiError, isConflict, RestClient } from '../pkg/client/rest.ts';
import { ignoreAlreadyExists, ignoreNotFound } from '../pkg/client/ignore.ts';
import type { Scale, Status } from '../pkg/client/options.ts';
import { coreResources, type ResourceType } from '../pkg/apimachinery/resource.ts';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { adminKubeConfig, testNamespace } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';

interface ConfigMap extends KubeObject { data?: Record<string, string> }
interface ManagedField { manager: string; operation: string; subresource?: string; fieldsV1?: { 'f:data'?: Record<string, unknown>; 'f:status'?: Record<string, unknown> } }
interface Deployment extends KubeObject {
  spec?: { replicas?: number; selector?: { matchLabels?: Record<string, string> }; template?: { metadata?: { labels?: Record<string, string> }; spec?: { containers?: { name: string; image?: string }[] } } };
}

const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };
const isApi = (status: number, reason?: string) => (err: unknown): boolean =>
  err instanceof ApiError && err.status === status && (reason === undefined || err.reason === reason);
/** The managers that own `data.<key>` of a ConfigMap, from its managedFields. */
const ownersOf = (cm: ConfigMap, key: string): string[] => ((cm.metadata?.managedFields ?? []) as ManagedField[])
  .filter((f) => f.fieldsV1?.['f:data']?.[`f:${key}`] !== undefined).map((f) => f.manager).sort();

describe('the typed client against the real API server', () => {
  let rest: RestClient;
  before(() => {
    rest = new RestClient({ kubeConfig: adminKubeConfig(), registry: new Registry() });
  });
  after(() => rest.close());

  test('CRUD on ConfigMaps: create, get, list by label, update fenced by resourceVersion, three patch kinds, delete', async (t) => {
    const ns = await testNamespace(t, 'typed-crud');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const created = await cms.create({ metadata: { name: 'a', labels: { app: 'x' } }, data: { k: 'v' } });
    assert.ok(created.metadata?.uid && created.metadata.resourceVersion);
    await cms.create({ metadata: { name: 'b', labels: { app: 'y' } } });
    await assert.rejects(cms.create({ metadata: { name: 'a' } }), isApi(409, 'AlreadyExists'));
    await assert.rejects(cms.create({ metadata: { name: 'z', namespace: 'another' } }), isApi(400), 'a body in another namespace is refused');
    assert.equal(await ignoreAlreadyExists(cms.create({ metadata: { name: 'a' } })), undefined);

    assert.deepEqual((await cms.get('a')).data, { k: 'v' });
    assert.deepEqual((await cms.list({ labelSelector: 'app=x' })).items.map((c) => c.metadata?.name), ['a']);
    assert.deepEqual((await cms.list({ fieldSelector: 'metadata.name=b' })).items.map((c) => c.metadata?.name), ['b']);

    const updated = await cms.update({ ...created, data: { k: 'v2' } });
    assert.notEqual(updated.metadata?.resourceVersion, created.metadata.resourceVersion);
    await assert.rejects(cms.update({ ...created, data: { k: 'stale' } }), isApi(409, 'Conflict'), 'a PUT with an old resourceVersion is refused');
    assert.deepEqual((await cms.get('a')).data, { k: 'v2' });

    await cms.patch('a', { merge: { data: { k: null, m: 'merged' } } });
    await assert.rejects(cms.patch('a', { merge: { metadata: { resourceVersion: created.metadata.resourceVersion }, data: { m: 'x' } } }),
      isApi(409, 'Conflict'), 'a merge patch carrying an old resourceVersion is refused');
    await cms.patch('a', { json: [{ op: 'add', path: '/data/j', value: 'json' }] });
    await assert.rejects(cms.patch('a', { json: [{ op: 'test', path: '/data/j', value: 'other' }, { op: 'remove', path: '/data/j' }] }),
      isApi(422), 'a failed test operation refuses the JSON patch');
    const patched = await cms.patch('a', { strategic: { data: { s: 'strategic' } } });
    assert.deepEqual(patched.data, { m: 'merged', j: 'json', s: 'strategic' });

    await cms.delete('a');
    await assert.rejects(cms.get('a'), isApi(404, 'NotFound'));
    assert.equal(await ignoreNotFound(cms.get('a')), undefined);
    assert.equal(await ignoreNotFound(cms.delete('a')), undefined);
  });

  test('listAll reads every page of a paginated list (continue tokens) as one list', async (t) => {
    const ns = await testNamespace(t, 'typed-pages');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    for (let i = 0; i < 7; i++) await cms.create({ metadata: { name: `cm-${i}`, labels: { page: 'yes' } } });
    const first = await cms.list({ labelSelector: 'page=yes', limit: 3 });
    assert.equal(first.items.length, 3);
    assert.ok(first.metadata.continue, 'a first page of 3 of 7 carries a continue token');
    const all = await cms.listAll({ labelSelector: 'page=yes', limit: 3 });
    assert.deepEqual(all.map((c) => c.metadata?.name).sort(), ['cm-0', 'cm-1', 'cm-2', 'cm-3', 'cm-4', 'cm-5', 'cm-6']);
  });

  test('server-side apply creates, then re-applying the same configuration changes nothing (same resourceVersion)', async (t) => {
    const ns = await testNamespace(t, 'typed-ssa');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const config = { metadata: { name: 'a', labels: { app: 'x' } }, data: { k: 'v', j: 'w' } };
    const first = await cms.apply(config, { fieldManager: 'manager-a' });
    assert.deepEqual(first.data, { k: 'v', j: 'w' });
    assert.deepEqual(ownersOf(first, 'k'), ['manager-a']);
    assert.equal(((first.metadata?.managedFields ?? []) as ManagedField[])[0]?.operation, 'Apply');
    const second = await cms.apply(config, { fieldManager: 'manager-a' });
    assert.equal(second.metadata?.resourceVersion, first.metadata?.resourceVersion, 'an identical apply is a no-op');
    assert.equal((await cms.get('a')).metadata?.resourceVersion, first.metadata?.resourceVersion);

    // A field the manager applied before and leaves out now is removed; another manager's field is kept.
    await cms.patch('a', { merge: { data: { other: 'kept' } } }, { fieldManager: 'someone-else' });
    const third = await cms.apply({ metadata: { name: 'a' }, data: { k: 'v' } }, { fieldManager: 'manager-a' });
    assert.deepEqual(third.data, { k: 'v', other: 'kept' });
    assert.equal(third.metadata?.labels?.['app'], undefined, 'the label manager-a no longer applies is gone');
  });

  test('apply removes only what apply owned: a field written by create under the same manager name stays', async (t) => {
    const ns = await testNamespace(t, 'typed-ssa-update');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    await cms.create({ metadata: { name: 'u' }, data: { fromCreate: '1' } }, { fieldManager: 'manager-a' });
    await cms.apply({ metadata: { name: 'u' }, data: { fromCreate: '1', fromApply: '2' } }, { fieldManager: 'manager-a' });
    const after = await cms.apply({ metadata: { name: 'u' }, data: {} }, { fieldManager: 'manager-a' });
    assert.deepEqual(after.data, { fromCreate: '1' }, 'the Update-operation entry of manager-a still owns fromCreate');
    const ops = ((after.metadata?.managedFields ?? []) as ManagedField[]).map((f) => `${f.manager}/${f.operation}`).sort();
    assert.deepEqual(ops, ['manager-a/Apply', 'manager-a/Update']);
  });

  test('SSA conflict: a second field manager changing an owned field gets 409 and changes nothing; with force it wins', async (t) => {
    const ns = await testNamespace(t, 'typed-conflict');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const a = await cms.apply({ metadata: { name: 'c' }, data: { k: 'from-a', onlyA: '1' } }, { fieldManager: 'manager-a' });
    await assert.rejects(cms.apply({ metadata: { name: 'c' }, data: { k: 'from-b' } }, { fieldManager: 'manager-b' }),
      (err: unknown) => isApi(409, 'Conflict')(err) && /manager-a/.test((err as Error).message));
    const unchanged = await cms.get('c');
    assert.equal(unchanged.metadata?.resourceVersion, a.metadata?.resourceVersion);
    assert.equal(unchanged.data?.['k'], 'from-a');

    // The same value is no conflict: both managers then share the field.
    const shared = await cms.apply({ metadata: { name: 'c' }, data: { onlyA: '1' } }, { fieldManager: 'manager-b' });
    assert.deepEqual(ownersOf(shared, 'onlyA'), ['manager-a', 'manager-b']);

    // docs/client.md: a field left out of an apply is removed "unless another manager owns it too".
    const dropped = await cms.apply({ metadata: { name: 'c' }, data: { k: 'from-a' } }, { fieldManager: 'manager-a' });
    assert.deepEqual(dropped.data, { k: 'from-a', onlyA: '1' }, 'a co-owned field manager-a leaves out stays');
    assert.deepEqual(ownersOf(dropped, 'onlyA'), ['manager-b']);

    const forced = await cms.apply({ metadata: { name: 'c' }, data: { k: 'from-b' } }, { fieldManager: 'manager-b', force: true });
    assert.equal(forced.data?.['k'], 'from-b');
    assert.deepEqual(ownersOf(forced, 'k'), ['manager-b'], 'force moves ownership of the field to manager-b');
  });

  test('dryRun: create, apply, patch, update and delete answer as if done, and nothing is stored', async (t) => {
    const ns = await testNamespace(t, 'typed-dryrun');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const dry = await cms.create({ metadata: { name: 'ghost' }, data: { k: 'v' } }, { dryRun: true });
    assert.equal(dry.metadata?.name, 'ghost');
    assert.equal(await ignoreNotFound(cms.get('ghost')), undefined, 'a dry-run create stores nothing');
    assert.equal((await cms.apply({ metadata: { name: 'ghost' } }, { fieldManager: 'm', dryRun: true })).metadata?.name, 'ghost');
    assert.equal(await ignoreNotFound(cms.get('ghost')), undefined, 'a dry-run apply stores nothing');

    const real = await cms.create({ metadata: { name: 'real' }, data: { k: 'v' } });
    const rv = real.metadata?.resourceVersion;
    assert.equal((await cms.apply({ metadata: { name: 'real' }, data: { k: 'applied' } }, { fieldManager: 'm', force: true, dryRun: true })).data?.['k'], 'applied');
    assert.equal((await cms.patch('real', { merge: { data: { k: 'patched' } } }, { dryRun: true })).data?.['k'], 'patched');
    assert.equal((await cms.update({ ...real, data: { k: 'updated' } }, { dryRun: true })).data?.['k'], 'updated');
    await cms.delete('real', { dryRun: true });
    const after = await cms.get('real');
    assert.equal(after.metadata?.resourceVersion, rv, 'no dry-run write changed the stored object');
    assert.deepEqual(after.data, { k: 'v' });
  });

  test('delete preconditions: a wrong uid or resourceVersion is 409 Conflict and deletes nothing; matching ones delete', async (t) => {
    const ns = await testNamespace(t, 'typed-precond');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const cm = await cms.create({ metadata: { name: 'p' } });
    await assert.rejects(cms.delete('p', { preconditions: { uid: '00000000-0000-0000-0000-000000000000' } }), isApi(409, 'Conflict'));
    await assert.rejects(cms.delete('p', { preconditions: { resourceVersion: '1' } }), isApi(409, 'Conflict'));
    assert.equal((await cms.get('p')).metadata?.uid, cm.metadata?.uid, 'still there');
    await cms.delete('p', { preconditions: { uid: cm.metadata?.uid, resourceVersion: cm.metadata?.resourceVersion } });
    assert.equal(await ignoreNotFound(cms.get('p')), undefined);
  });

  test('propagationPolicy reaches the server: Foreground and Orphan leave the owner pending with their finalizer', async (t) => {
    const ns = await testNamespace(t, 'typed-propagation');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    for (const [policy, finalizer] of [['Foreground', 'foregroundDeletion'], ['Orphan', 'orphan']] as const) {
      const owner = await cms.create({ metadata: { name: `owner-${policy.toLowerCase()}` } });
      const name = owner.metadata?.name ?? '';
      // A dependent held by a finalizer of its own, so the garbage collector (full mode) cannot finish at once.
      await cms.create({ metadata: {
        name: `dep-${policy.toLowerCase()}`, finalizers: ['example.com/hold'],
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name, uid: owner.metadata?.uid ?? '', blockOwnerDeletion: true }],
      } });
      const answer = await cms.delete(name, { propagationPolicy: policy });
      assert.notEqual(answer.kind, 'Status');
      const pending = answer as ConfigMap;
      assert.ok(pending.metadata?.deletionTimestamp, `${policy}: the answer is the owner, marked for deletion`);
      assert.deepEqual(pending.metadata?.finalizers, [finalizer]);
      await ignoreNotFound(cms.patch(`dep-${policy.toLowerCase()}`, { merge: { metadata: { finalizers: null } } }));
      await ignoreNotFound(cms.patch(name, { merge: { metadata: { finalizers: null } } }));
    }
    // Background (the default for ConfigMaps): gone at once, the answer is a Status.
    await cms.create({ metadata: { name: 'plain' } });
    const answer = await cms.delete('plain', { propagationPolicy: 'Background' });
    assert.equal((answer as Status).kind, 'Status');
    assert.equal((answer as Status).status, 'Success');
    assert.equal(await ignoreNotFound(cms.get('plain')), undefined);
  });

  test('status subresource of a CRD (Foo): status writes move status only; main-resource writes ignore status; no strategic patch', async (t) => {
    await installCRDs();
    const ns = await testNamespace(t, 'typed-status');
    const foo = rest.resource<Foo>(foos).namespace(ns);
    const created = await foo.create({ metadata: { name: 'f' }, spec: { deploymentName: 'd', replicas: 1 }, status: { availableReplicas: 9 } });
    assert.equal(created.status, undefined, 'status is dropped on create');
    const generation = created.metadata?.generation;

    const s1 = await foo.status().update({ ...created, spec: { deploymentName: 'd', replicas: 5 }, status: { availableReplicas: 1 } });
    assert.equal(s1.status?.availableReplicas, 1);
    assert.equal(s1.spec?.replicas, 1, 'a status update ignores spec');
    assert.equal(s1.metadata?.generation, generation, 'and does not move the generation');
    await assert.rejects(foo.status().update({ ...created, status: { availableReplicas: 2 } }), isApi(409, 'Conflict'), 'fenced by resourceVersion');

    const s2 = await foo.status().patch('f', { merge: { status: { availableReplicas: 2 } } });
    assert.equal(s2.status?.availableReplicas, 2);
    const main = await foo.patch('f', { merge: { status: { availableReplicas: 7 }, spec: { replicas: 2 } } });
    assert.equal(main.status?.availableReplicas, 2, 'the main resource ignores status');
    assert.equal(main.spec?.replicas, 2);
    await assert.rejects(foo.patch('f', { strategic: { spec: { replicas: 3 } } }), isApi(415), 'no strategic merge patch for custom resources');

    const s3 = await foo.status().apply({ metadata: { name: 'f' }, status: { availableReplicas: 3 } }, { fieldManager: 'foo-status', force: true });
    assert.equal(s3.status?.availableReplicas, 3);
    const statusOwner = ((s3.metadata?.managedFields ?? []) as ManagedField[]).find((f) => f.manager === 'foo-status');
    assert.equal(statusOwner?.subresource, 'status');
    assert.equal((await foo.status().get('f')).status?.availableReplicas, 3);
  });

  test('scale subresource of a Deployment: get, update (fenced), patch, and the Deployment follows', async (t) => {
    const ns = await testNamespace(t, 'typed-scale');
    const deploys = rest.resource<Deployment>(coreResources.deployments).namespace(ns);
    await deploys.create({
      metadata: { name: 'web' },
      spec: { replicas: 1, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'app', image: 'nginx' }] } } },
    });
    const scale = await deploys.scale().get('web');
    assert.equal(scale.kind, 'Scale');
    assert.equal(scale.spec?.replicas, 1);

    // With the full control plane the deployment controller writes the Deployment's status meanwhile (a new
    // resourceVersion each time): read-modify-write retried on Conflict, as a controller does.
    let up: Scale | undefined;
    for (let attempt = 0; !up && attempt < 20; attempt++) {
      const current = await deploys.scale().get('web');
      up = await deploys.scale().update('web', { metadata: { resourceVersion: current.metadata?.resourceVersion }, spec: { replicas: 3 } })
        .catch((err: unknown) => { if (isConflict(err)) return undefined; throw err; });
    }
    assert.equal(up?.spec?.replicas, 3);
    assert.equal((await deploys.get('web')).spec?.replicas, 3);
    await assert.rejects(deploys.scale().update('web', { metadata: { resourceVersion: scale.metadata?.resourceVersion }, spec: { replicas: 4 } }),
      isApi(409, 'Conflict'), 'a Scale with an old resourceVersion (from before the update) is refused');

    await deploys.scale().patch('web', { merge: { spec: { replicas: 2 } } });
    assert.equal((await deploys.get('web')).spec?.replicas, 2);
  });
});
