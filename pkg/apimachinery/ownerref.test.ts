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
