import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Foo } from '../../apis/samplecontroller/v1alpha1/types.ts';
import { fooDeploymentIndexFunc, isControlledBy, messageResourceExists, newDeployment, owningFooName } from './desired.ts';

const foo: Foo = {
  metadata: { name: 'example-foo', namespace: 'team-a', uid: 'uid-foo', resourceVersion: '12', generation: 3 },
  spec: { deploymentName: 'example-foo-web', replicas: 3 },
};

describe('newDeployment', () => {
  test('is exactly upstream sample-controller\'s Deployment', () => {
    assert.deepEqual(newDeployment(foo), {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'example-foo-web',
        namespace: 'team-a',
        ownerReferences: [{
          apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'example-foo', uid: 'uid-foo',
          controller: true, blockOwnerDeletion: true,
        }],
      },
      spec: {
        replicas: 3,
        selector: { matchLabels: { app: 'nginx', controller: 'example-foo' } },
        template: {
          metadata: { labels: { app: 'nginx', controller: 'example-foo' } },
          spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] },
        },
      },
    });
  });

  test('leaves replicas to the API server default when the Foo has none', () => {
    const d = newDeployment({ ...foo, spec: { deploymentName: 'd' } });
    assert.equal('replicas' in (d.spec ?? {}), false);
  });

  test('does not share label maps between selector and template', () => {
    const d = newDeployment(foo);
    assert.notEqual(d.spec?.selector?.matchLabels, d.spec?.template?.metadata?.labels);
  });
});

describe('ownership', () => {
  const owned = newDeployment(foo);
  test('isControlledBy compares the controller reference UID', () => {
    assert.equal(isControlledBy(owned, foo), true);
    assert.equal(isControlledBy(owned, { metadata: { uid: 'other' } }), false);
    assert.equal(isControlledBy({ metadata: {} }, foo), false);
    const notController = { metadata: { ownerReferences: [{ apiVersion: 'x/v1', kind: 'Foo', name: 'n', uid: 'uid-foo' }] } };
    assert.equal(isControlledBy(notController, foo), false);
  });

  test('owningFooName only accepts Foo controllers of samplecontroller.k8s.io', () => {
    assert.equal(owningFooName(owned), 'example-foo');
    const ref = (apiVersion: string, kind: string): Foo => ({ metadata: { ownerReferences: [{ apiVersion, kind, name: 'n', uid: 'u', controller: true }] } });
    assert.equal(owningFooName(ref('apps/v1', 'ReplicaSet')), undefined);
    assert.equal(owningFooName(ref('other.example.com/v1', 'Foo')), undefined);
    assert.equal(owningFooName({ metadata: {} }), undefined);
  });
});

test('the Foo index maps namespace/deploymentName, and skips Foos without one', () => {
  assert.deepEqual(fooDeploymentIndexFunc(foo), ['team-a/example-foo-web']);
  assert.deepEqual(fooDeploymentIndexFunc({ metadata: { name: 'x', namespace: 'a' }, spec: {} }), []);
});

test('the ErrResourceExists message is upstream\'s', () => {
  assert.equal(messageResourceExists('web'), 'Resource "web" already exists and is not managed by Foo');
});
