/**
 * `createOrPatch()`'s fences (pkg/runtime/createorpatch.ts; docs/safety.md), raced on the real kube-apiserver: a
 * concurrent write lands between its read and its write, deterministically — made from inside `mutate` (which runs
 * after the GET and before the PATCH/POST), or, between the object patch and the status patch, by a wrapper around
 * the client (a FAKE for deterministic fault injection: it forwards every call to the real client and makes the
 * concurrent write once the object patch returned). Each write of createOrPatch must be refused (409) and the
 * concurrent write must be on the server afterwards, untouched:
 *  - the object patch (fenced by the resourceVersion read): someone else took over the ConfigMap the mutate function
 *    found controlled by its owner (the scaffold's "no takeover from a stale cache": its decision is taken on this
 *    read, and the patch that acts on it is refused once the object changed);
 *  - the status patch of a status-only change (fenced by the resourceVersion read);
 *  - the status patch after an object patch (fenced by the resourceVersion the object patch returned);
 *  - the create of a missing object (fenced by the name: 409 AlreadyExists).
 * Needs only etcd + kube-apiserver.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { controllerOf, setControllerReference } from '../pkg/apimachinery/ownerref.ts';
import { coreResources, type ResourceType } from '../pkg/apimachinery/resource.ts';
import { ApiError, RestClient } from '../pkg/client/rest.ts';
import type { ResourceClient } from '../pkg/client/typed.ts';
import { createOrPatch } from '../pkg/runtime/createorpatch.ts';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { adminKubeConfig, testNamespace } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';

interface ConfigMap extends KubeObject { data?: Record<string, string> }
const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };

const refused = (status: number, reason: string) => (err: unknown): boolean => {
  assert.ok(err instanceof ApiError, String(err));
  assert.equal(err.status, status, err.message);
  assert.equal(err.reason, reason, err.message);
  return true;
};

describe('createOrPatch: a concurrent write between its read and its write is refused, never overwritten', () => {
  let rest: RestClient;
  /** The concurrent writer: another client, as another process would be. */
  let other: RestClient;
  before(async () => {
    rest = new RestClient({ kubeConfig: adminKubeConfig(), registry: new Registry() });
    other = new RestClient({ kubeConfig: adminKubeConfig(), registry: new Registry(), userAgent: 'concurrent-writer' });
    await installCRDs();
  });
  after(async () => {
    await rest.close();
    await other.close();
  });
  /** A Foo `f` in a namespace of its own; its API through our client and through the concurrent writer's. */
  const aFoo = async (t: TestContext): Promise<{ fooApi: ResourceClient<Foo>; theirFoos: ResourceClient<Foo>; base: Foo }> => {
    const ns = await testNamespace(t, 'copf');
    const fooApi = rest.resource<Foo>(foos).namespace(ns);
    const base: Foo = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f' }, spec: { deploymentName: 'd', replicas: 1 } };
    await fooApi.create(base);
    return { fooApi, theirFoos: other.resource<Foo>(foos).namespace(ns), base };
  };

  test('object patch: the ConfigMap taken over by another owner after the read — 409 Conflict, the takeover stays (no takeover from a stale decision)', async (t) => {
    const ns = await testNamespace(t, 'copf');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const theirCms = other.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const ours = await cms.create({ metadata: { name: 'ours' } });
    const theirs = await cms.create({ metadata: { name: 'theirs' } });
    const asOwner = (o: ConfigMap): ConfigMap & { apiVersion: string; kind: string } => ({ ...o, apiVersion: 'v1', kind: 'ConfigMap' });
    const cm: ConfigMap = { metadata: { name: 'c', namespace: ns }, data: { foo: 'old' } };
    setControllerReference(asOwner(ours), cm);
    await cms.create(cm);

    let decidedOnUid: string | undefined;
    let concurrent: ConfigMap | undefined;
    await assert.rejects(createOrPatch(cms, { metadata: { name: 'c' } }, async (read) => {
      // The scaffold's decision, on the API server's copy: ours, so it may be changed.
      decidedOnUid = controllerOf(read)?.uid;
      assert.equal(decidedOnUid, ours.metadata?.uid);
      // Meanwhile another controller takes the ConfigMap over (controller reference and data).
      const taken = await theirCms.get('c');
      taken.metadata = { ...taken.metadata, ownerReferences: [] };
      setControllerReference(asOwner(theirs), taken);
      concurrent = await theirCms.update({ ...taken, data: { foo: 'theirs' } });
      read.data = { foo: 'new' };
      setControllerReference(asOwner(ours), read);
    }), refused(409, 'Conflict'));
    assert.ok(concurrent);
    const now = await cms.get('c');
    assert.equal(now.metadata?.resourceVersion, concurrent.metadata?.resourceVersion, 'nothing was written after the concurrent write');
    assert.deepEqual(now.data, { foo: 'theirs' });
    assert.equal(controllerOf(now)?.uid, theirs.metadata?.uid, 'still controlled by the other owner');

    // The retry (the reconcile's next run) reads the takeover and leaves the ConfigMap alone.
    let foreign = false;
    const retry = await createOrPatch(cms, { metadata: { name: 'c' } }, (read) => {
      if (controllerOf(read)?.uid !== ours.metadata?.uid) foreign = true;
    });
    assert.equal(foreign, true);
    assert.equal(retry.result, 'unchanged');
  });

  test('status patch of a status-only change: a concurrent status write after the read — 409 Conflict, the newer status stays', async (t) => {
    const { fooApi, theirFoos, base } = await aFoo(t);
    let concurrent: Foo | undefined;
    await assert.rejects(createOrPatch(fooApi, base, async (read) => {
      concurrent = await theirFoos.status().patch('f', { merge: { status: { availableReplicas: 5 } } });
      read.status = { availableReplicas: 1 };
    }), refused(409, 'Conflict'));
    const now = await fooApi.get('f');
    assert.equal(now.metadata?.resourceVersion, concurrent?.metadata?.resourceVersion, 'nothing was written after the concurrent write');
    assert.equal(now.status?.availableReplicas, 5);
  });

  test('status patch after an object patch: a concurrent status write between the two — 409 Conflict, the newer status stays', async (t) => {
    const { fooApi, theirFoos, base } = await aFoo(t);
    // FAKE (fault injection): the real client, except that its object patch is followed by a concurrent status write.
    let concurrent: Foo | undefined;
    const raced = new Proxy(fooApi, {
      get(target, prop): unknown {
        if (prop === 'patch') {
          return async (...args: Parameters<ResourceClient<Foo>['patch']>): Promise<Foo> => {
            const patched = await target.patch(...args);
            concurrent = await theirFoos.status().patch('f', { merge: { status: { availableReplicas: 5 } } });
            return patched;
          };
        }
        const v: unknown = Reflect.get(target, prop, target); // (its getters read private fields of the real client)
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    await assert.rejects(createOrPatch(raced, base, (read) => {
      read.spec = { deploymentName: 'd', replicas: 2 };
      read.status = { availableReplicas: 1 };
    }), refused(409, 'Conflict'));
    assert.ok(concurrent, 'the object patch was made (and the concurrent write after it)');
    const now = await fooApi.get('f');
    assert.equal(now.spec?.replicas, 2, 'the object patch landed');
    assert.equal(now.metadata?.resourceVersion, concurrent.metadata?.resourceVersion, 'nothing was written after the concurrent write');
    assert.equal(now.status?.availableReplicas, 5);
  });

  test('create of a missing object: created by someone else after the read — 409 AlreadyExists, theirs stays', async (t) => {
    const ns = await testNamespace(t, 'copf');
    const cms = rest.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    const theirCms = other.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
    let concurrent: ConfigMap | undefined;
    await assert.rejects(createOrPatch(cms, { metadata: { name: 'c' } }, async (read) => {
      assert.equal(read.metadata?.uid, undefined, 'missing when read');
      concurrent = await theirCms.create({ metadata: { name: 'c' }, data: { foo: 'theirs' } });
      read.data = { foo: 'ours' };
    }), refused(409, 'AlreadyExists'));
    const now = await cms.get('c');
    assert.equal(now.metadata?.resourceVersion, concurrent?.metadata?.resourceVersion);
    assert.deepEqual(now.data, { foo: 'theirs' });
  });
});
