import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import type { Foo } from '../../apis/samplecontroller/v1alpha1/types.ts';
import { ApiError, type RequestOptions, type Verb } from '../../client/rest.ts';
import { isTerminalError } from '../../controller/index.ts';
import { FakeRecorder } from '../../events/fake.ts';
import { Indexer } from '../../informerfactory/indexer.ts';
import { Lister } from '../../informerfactory/lister.ts';
import { silentLogger } from '../../log/logger.ts';
import type { Deployment } from '../deployment/types.ts';
import { foosWanting, fooReconciler } from './controller.ts';
import { FOO_BY_DEPLOYMENT_INDEX, fooDeploymentIndexFunc, newDeployment } from './desired.ts';

interface Call { method: Verb; path: string; body: unknown; contentType: string | undefined }

class FakeRest {
  readonly calls: Call[] = [];
  reply: (c: Call) => unknown = (c) => c.body;
  json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const call = { method, path, body: opts.body, contentType: opts.contentType };
    this.calls.push(call);
    return Promise.resolve(this.reply(call) as T);
  }
}

const signal = new AbortController().signal;
const ctx = { log: silentLogger, reconcileID: 'r', key: 'ns/foo' };
const req = { namespace: 'ns', name: 'foo' };

function aFoo(spec: Foo['spec'], status?: Foo['status']): Foo {
  return { metadata: { name: 'foo', namespace: 'ns', uid: 'foo-uid', generation: 1, resourceVersion: '7' }, spec, ...(status ? { status } : {}) };
}

function owned(foo: Foo, replicas: number, available: number): Deployment {
  const d = newDeployment(foo);
  return { ...d, metadata: { ...d.metadata, uid: 'dep-uid', resourceVersion: '11' }, spec: { selector: {}, template: {}, ...d.spec, replicas }, status: { availableReplicas: available } };
}

let foos: Indexer<Foo>;
let deployments: Indexer<Deployment>;
let rest: FakeRest;
let recorder: FakeRecorder;
let reconcile: ReturnType<typeof fooReconciler>;

beforeEach(() => {
  foos = new Indexer<Foo>({ indexers: { [FOO_BY_DEPLOYMENT_INDEX]: fooDeploymentIndexFunc } });
  deployments = new Indexer<Deployment>();
  rest = new FakeRest();
  recorder = new FakeRecorder();
  reconcile = fooReconciler({ foos: new Lister(foos), deployments: new Lister(deployments), rest, recorder });
});

describe('fooReconciler', () => {
  test('creates the Deployment, writes status 0 and records Synced', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 });
    foos.add(foo);
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls.map((c) => `${c.method} ${c.path}`), [
      'POST /apis/apps/v1/namespaces/ns/deployments',
      'PATCH /apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/foo/status',
    ]);
    assert.deepEqual(rest.calls[0]?.body, newDeployment(foo));
    assert.deepEqual(rest.calls[1]?.body, { metadata: { uid: 'foo-uid', resourceVersion: '7' }, status: { availableReplicas: 0 } });
    assert.equal(rest.calls[1]?.contentType, 'application/merge-patch+json');
    assert.deepEqual(recorder.events, ['Normal Synced Foo synced successfully']);
  });

  test('a changed deploymentName: the new Deployment is created, the old one is left in place (as upstream)', async () => {
    const before = aFoo({ deploymentName: 'old', replicas: 1 }, { availableReplicas: 1 });
    deployments.add(owned(before, 1, 1));
    foos.add({ ...before, spec: { deploymentName: 'new', replicas: 1 } });
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls.map((c) => `${c.method} ${c.path}`), [
      'POST /apis/apps/v1/namespaces/ns/deployments',
      'PATCH /apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/foo/status',
    ]);
    assert.equal((rest.calls[0]?.body as Deployment).metadata?.name, 'new');
  });

  test('converged: no writes, no events', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 }, { availableReplicas: 2 });
    foos.add(foo);
    deployments.add(owned(foo, 2, 2));
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls, []);
    assert.deepEqual(recorder.events, []);
  });

  test('replica drift: merge-patches spec.replicas (fenced by uid + the cached resourceVersion) and mirrors availableReplicas', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 3 }, { availableReplicas: 1 });
    foos.add(foo);
    deployments.add(owned(foo, 1, 1));
    rest.reply = (c) => (c.method === 'PATCH' && c.path.endsWith('/deployments/web') ? owned(foo, 3, 2) : {});
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls.map((c) => [c.method, c.path, c.body]), [
      ['PATCH', '/apis/apps/v1/namespaces/ns/deployments/web', { metadata: { uid: 'dep-uid', resourceVersion: '11' }, spec: { replicas: 3 } }],
      ['PATCH', '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/foo/status', { metadata: { uid: 'foo-uid', resourceVersion: '7' }, status: { availableReplicas: 2 } }],
    ]);
    assert.deepEqual(recorder.events, ['Normal Synced Foo synced successfully']);
  });

  test('status patch refused with 409 (the Foo moved on since the cached version): requeue quietly, no error, no Event', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 }, { availableReplicas: 0 });
    foos.add(foo);
    deployments.add(owned(foo, 2, 2));
    rest.reply = () => {
      throw new ApiError(409, 'Conflict', 'Operation cannot be fulfilled on foos.samplecontroller.k8s.io "foo": the object has been modified', {});
    };
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.deepEqual(rest.calls.map((c) => [c.method, c.path, c.body]), [
      ['PATCH', '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/foo/status', { metadata: { uid: 'foo-uid', resourceVersion: '7' }, status: { availableReplicas: 2 } }],
    ]);
    assert.deepEqual(recorder.events, []);
  });

  test('a status already written on top of the cached version is not written again while the cache lags (no 409 round trip); any other version is', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 }, { availableReplicas: 0 });
    foos.add(foo);
    deployments.add(owned(foo, 2, 2));
    const statusPatches = (): unknown[] => rest.calls.filter((c) => c.path.endsWith('/status')).map((c) => c.body);
    await reconcile(req, signal, ctx);
    assert.equal(statusPatches().length, 1);
    assert.deepEqual(recorder.events, ['Normal Synced Foo synced successfully']);
    // Queued again (e.g. by a Deployment event) while the cache still holds resourceVersion 7: the server has our value.
    assert.equal(await reconcile(req, signal, ctx), undefined);
    assert.equal(statusPatches().length, 1, 'no second patch derived from the same cached version');
    assert.deepEqual(recorder.events, ['Normal Synced Foo synced successfully'], 'no second Synced Event');
    // The cache shows our write: nothing to do, the expectation is dropped.
    foos.update({ ...foo, metadata: { ...foo.metadata, resourceVersion: '8' }, status: { availableReplicas: 2 } });
    await reconcile(req, signal, ctx);
    assert.equal(statusPatches().length, 1);
    // Someone else sets the status back (a newer version): written again, fenced by THAT version.
    foos.update({ ...foo, metadata: { ...foo.metadata, resourceVersion: '9' }, status: { availableReplicas: 0 } });
    await reconcile(req, signal, ctx);
    assert.deepEqual(statusPatches().at(-1), { metadata: { uid: 'foo-uid', resourceVersion: '9' }, status: { availableReplicas: 2 } });
    // Version 7 again but the Deployment now has another value: a different write, so it is made (and fenced by 7).
    foos.update(foo);
    deployments.update(owned(foo, 2, 1));
    await reconcile(req, signal, ctx);
    assert.equal(statusPatches().length, 3);
    // A refused write sets no expectation: the same reconcile after a 409 writes (and is fenced) again.
    deployments.update(owned(foo, 2, 3));
    rest.reply = () => {
      throw new ApiError(409, 'Conflict', 'the object has been modified', {});
    };
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.equal(statusPatches().length, 5);
  });

  test('replica patch refused with 409 (the Deployment moved on): requeue quietly, the status is not written from it', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 3 }, { availableReplicas: 1 });
    foos.add(foo);
    deployments.add(owned(foo, 1, 1));
    rest.reply = () => {
      throw new ApiError(409, 'Conflict', 'the object has been modified', {});
    };
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.deepEqual(rest.calls.map((c) => c.path), ['/apis/apps/v1/namespaces/ns/deployments/web']);
    assert.deepEqual(recorder.events, []);
  });

  test('other write failures are still errors (not swallowed as conflicts)', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 }, { availableReplicas: 0 });
    foos.add(foo);
    deployments.add(owned(foo, 2, 2));
    rest.reply = () => {
      throw new ApiError(422, 'Invalid', 'invalid', {});
    };
    await assert.rejects(reconcile(req, signal, ctx), (err) => err instanceof ApiError && err.status === 422);
  });

  test('a Foo without replicas leaves the Deployment\'s replicas alone', async () => {
    const foo = aFoo({ deploymentName: 'web' }, { availableReplicas: 4 });
    foos.add(foo);
    deployments.add(owned(foo, 4, 4));
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls, []);
  });

  test('a Deployment not controlled by the Foo: ErrResourceExists event, retryable error, no write', async () => {
    foos.add(aFoo({ deploymentName: 'web', replicas: 1 }));
    deployments.add({ metadata: { name: 'web', namespace: 'ns', uid: 'x' }, spec: { replicas: 1, selector: {}, template: {} } });
    await assert.rejects(reconcile(req, signal, ctx), (err: Error) => !isTerminalError(err) && /Resource "web" already exists and is not managed by Foo/.test(err.message));
    assert.deepEqual(recorder.events, ['Warning ErrResourceExists Resource "web" already exists and is not managed by Foo']);
    assert.deepEqual(rest.calls, []);
  });

  test('an empty deploymentName: TerminalError, one Warning per generation, no write', async () => {
    const foo = aFoo({ replicas: 1 });
    foos.add(foo);
    for (let i = 0; i < 3; i++) await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
    assert.deepEqual(recorder.events, ['Warning InvalidSpec spec.deploymentName must be specified']);
    foos.update({ ...foo, metadata: { ...foo.metadata, generation: 2 } });
    await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
    assert.equal(recorder.events.length, 2);
    assert.deepEqual(rest.calls, []);
  });

  test('create answered AlreadyExists with our own Deployment (the cache lags, e.g. a Foo that just moved shards): requeue quietly', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 });
    foos.add(foo);
    rest.reply = (c) => {
      if (c.method === 'POST') throw new ApiError(409, 'AlreadyExists', 'deployments.apps "web" already exists', {});
      return owned(foo, 2, 0);
    };
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.deepEqual(rest.calls.map((c) => `${c.method} ${c.path}`), ['POST /apis/apps/v1/namespaces/ns/deployments', 'GET /apis/apps/v1/namespaces/ns/deployments/web']);
    assert.deepEqual(recorder.events, []);
  });

  test('create answered AlreadyExists with someone else\'s Deployment (not in a sharded cache): upstream\'s Warning and a retry', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 });
    foos.add(foo);
    rest.reply = (c) => {
      if (c.method === 'POST') throw new ApiError(409, 'AlreadyExists', 'deployments.apps "web" already exists', {});
      const d = newDeployment(foo);
      return { ...d, metadata: { ...d.metadata, uid: 'other', ownerReferences: [] } };
    };
    await assert.rejects(reconcile(req, signal, ctx), /Resource "web" already exists and is not managed by Foo/);
    assert.deepEqual(recorder.events, ['Warning ErrResourceExists Resource "web" already exists and is not managed by Foo']);
  });

  test('a Foo with shard labels: its Deployment is created with them (never a drain label)', async () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 2 });
    foo.metadata = { ...foo.metadata, labels: { 'shard.ts-controller-manager.io/foo': 's1', 'drain.ts-controller-manager.io/foo': 'true', app: 'x' } };
    foos.add(foo);
    await reconcile(req, signal, ctx);
    assert.deepEqual((rest.calls[0]?.body as Deployment).metadata?.labels, { 'shard.ts-controller-manager.io/foo': 's1' });
  });

  test('a deleted or deleting Foo: nothing to do', async () => {
    await reconcile(req, signal, ctx);
    foos.add({ ...aFoo({ deploymentName: 'web', replicas: 1 }), metadata: { name: 'foo', namespace: 'ns', uid: 'u', deletionTimestamp: '2024-01-01T00:00:00Z' } });
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls, []);
    assert.deepEqual(recorder.events, []);
  });
});

describe('foosWanting (Deployment event → Foos that want a Deployment of its name)', () => {
  test('every Foo whose spec.deploymentName names the Deployment, in its namespace only', () => {
    const foo = aFoo({ deploymentName: 'web', replicas: 1 });
    const waiting: Foo = { metadata: { name: 'other', namespace: 'ns', uid: 'o' }, spec: { deploymentName: 'unowned' } };
    const elsewhere: Foo = { metadata: { name: 'third', namespace: 'ns2', uid: 't' }, spec: { deploymentName: 'unowned' } };
    foos.add(foo);
    foos.add(waiting);
    foos.add(elsewhere);

    assert.deepEqual(foosWanting(foos, owned(foo, 1, 1)), ['ns/foo']);
    assert.deepEqual(foosWanting(foos, { metadata: { name: 'unowned', namespace: 'ns' } }), ['ns/other']);
    assert.deepEqual(foosWanting(foos, { metadata: { name: 'nobody', namespace: 'ns' } }), []);
  });
});
