import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from './meta.ts';
import { controllerNameOf } from './ownerref.ts';
import { apiGroupOf } from './resource.ts';

test('apiGroupOf: the group of an apiVersion; the core group is ""', () => {
  assert.equal(apiGroupOf('apps/v1'), 'apps');
  assert.equal(apiGroupOf('samplecontroller.k8s.io/v1alpha1'), 'samplecontroller.k8s.io');
  assert.equal(apiGroupOf('v1'), '');
});

test('controllerNameOf: only the controller ownerReference of that kind AND group names the owner', () => {
  const owned = (refs: NonNullable<KubeObject['metadata']>['ownerReferences']): KubeObject => ({ metadata: { name: 'd', ownerReferences: refs } });
  const ref = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'foo-1', uid: 'u' };
  assert.equal(controllerNameOf(owned([{ ...ref, controller: true }]), 'Foo', 'samplecontroller.k8s.io'), 'foo-1');
  assert.equal(controllerNameOf(owned([{ ...ref, controller: false }]), 'Foo', 'samplecontroller.k8s.io'), undefined, 'not the controller');
  assert.equal(controllerNameOf(owned([{ ...ref, apiVersion: 'other.io/v1', controller: true }]), 'Foo', 'samplecontroller.k8s.io'), undefined, 'another group');
  assert.equal(controllerNameOf(owned([{ ...ref, kind: 'Bar', controller: true }]), 'Foo', 'samplecontroller.k8s.io'), undefined, 'another kind');
  assert.equal(controllerNameOf(owned([{ ...ref, apiVersion: 'v1', kind: 'Foo', controller: true }]), 'Foo', ''), 'foo-1', 'core group');
  assert.equal(controllerNameOf(owned(undefined), 'Foo', 'samplecontroller.k8s.io'), undefined);
});

test('setControllerReference: sets one controller ref; same owner is idempotent; a second controller is refused', async () => {
  const { AlreadyOwnedError, setControllerReference, setOwnerReference } = await import('./ownerref.ts');
  const owner = { apiVersion: 'example.io/v1', kind: 'Memcached', metadata: { name: 'm', namespace: 'ns', uid: 'u1' } };
  const obj: KubeObject = { kind: 'Deployment', metadata: { name: 'd', namespace: 'ns' } };
  setControllerReference(owner, obj);
  setControllerReference(owner, obj);
  assert.deepEqual(obj.metadata?.ownerReferences, [{ apiVersion: 'example.io/v1', kind: 'Memcached', name: 'm', uid: 'u1', controller: true, blockOwnerDeletion: true }]);
  setControllerReference({ ...owner, metadata: { ...owner.metadata, uid: 'u2' } }, obj);
  assert.equal(obj.metadata?.ownerReferences?.length, 1, 'the same owner recreated: its ref is replaced');
  assert.equal(obj.metadata?.ownerReferences?.[0]?.uid, 'u2');
  const other = { ...owner, metadata: { ...owner.metadata, name: 'other', uid: 'u3' } };
  assert.throws(() => setControllerReference(other, obj), (e: unknown) =>
    e instanceof AlreadyOwnedError && /Deployment ns\/d is already controlled by Memcached m \(uid u2\)/.test(e.message));
  setOwnerReference(other, obj);
  assert.deepEqual(obj.metadata?.ownerReferences?.map((r) => [r.name, r.controller ?? false]), [['m', true], ['other', false]]);
  setOwnerReference(owner, obj);
  assert.equal(obj.metadata?.ownerReferences?.[0]?.controller, true, 'setOwnerReference keeps the controller flag');
  assert.throws(() => setControllerReference({ ...owner, metadata: { ...owner.metadata, namespace: 'elsewhere' } }, { metadata: { name: 'd', namespace: 'ns' } }), /cross-namespace/);
  assert.throws(() => setControllerReference(owner, { metadata: { name: 'cluster-scoped' } }), /cluster-scoped resource must not have a namespace-scoped owner/);
  const clusterOwner = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ns', uid: 'n1' } };
  const o2: KubeObject = { metadata: { name: 'd', namespace: 'ns' } };
  setControllerReference(clusterOwner, o2);
  assert.equal(o2.metadata?.ownerReferences?.[0]?.kind, 'Namespace', 'a cluster-scoped owner of a namespaced object is fine');
});
