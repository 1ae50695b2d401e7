import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keyOf, metaNamespaceKey, splitKey } from './keys.ts';
import { collectionPath, objectPath } from './paths.ts';
import { apiVersionOf, coreResources, resourceId, type ResourceType } from './resource.ts';

const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };

describe('resource paths', () => {
  it('core group lives under /api/v1', () => {
    assert.equal(collectionPath(coreResources.pods), '/api/v1/pods');
    assert.equal(collectionPath(coreResources.pods, 'default'), '/api/v1/namespaces/default/pods');
    assert.equal(collectionPath(coreResources.nodes), '/api/v1/nodes');
  });

  it('named groups live under /apis/<group>/<version>', () => {
    assert.equal(collectionPath(coreResources.deployments), '/apis/apps/v1/deployments');
    assert.equal(collectionPath(foos, 'ns1'), '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns1/foos');
    assert.equal(collectionPath(foos, ''), '/apis/samplecontroller.k8s.io/v1alpha1/foos');
    assert.equal(objectPath(foos, 'ns1', 'a'), '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns1/foos/a');
  });

  it('refuses a namespace for a cluster-scoped resource', () => {
    assert.throws(() => collectionPath(coreResources.nodes, 'default'), /cluster-scoped/);
  });

  it('names resources', () => {
    assert.equal(apiVersionOf(coreResources.pods), 'v1');
    assert.equal(apiVersionOf(foos), 'samplecontroller.k8s.io/v1alpha1');
    assert.equal(resourceId(coreResources.deployments), 'deployments.apps/v1');
    assert.equal(resourceId(coreResources.pods), 'pods/v1');
  });
});

describe('object keys', () => {
  it('keys namespaced and cluster-scoped objects', () => {
    assert.equal(metaNamespaceKey({ metadata: { namespace: 'ns', name: 'n' } }), 'ns/n');
    assert.equal(metaNamespaceKey({ metadata: { name: 'node' } }), 'node');
    assert.throws(() => metaNamespaceKey({ metadata: {} }), /no metadata.name/);
    assert.equal(keyOf('', 'node'), 'node');
    assert.equal(keyOf(undefined, 'node'), 'node');
    assert.deepEqual(splitKey('ns/n'), { namespace: 'ns', name: 'n' });
    assert.deepEqual(splitKey('node'), { namespace: '', name: 'node' });
  });
});
