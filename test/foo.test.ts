/**
 * Foo controller on the real control plane (kube-controller-manager + kwok make Deployments' Pods Ready): the
 * acceptance points of issue 5 for Foo, the no-op steady state of both controllers, each test in its own namespace
 * with its own in-process manager (test/helpers/manager.ts).
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import type { Deployment } from '../pkg/controllers/deployment/types.ts';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { startControllers } from './helpers/manager.ts';

interface CoreEvent { reason: string; message: string; type: string; count?: number; metadata: { resourceVersion: string } }

const foosPath = (ns: string): string => `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`;
const deploymentsPath = (ns: string): string => `/apis/apps/v1/namespaces/${ns}/deployments`;

async function createFoo(ns: string, name: string, spec: Foo['spec']): Promise<Foo> {
  return expectStatus<Foo>(await cluster().request('POST', foosPath(ns), {
    apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name }, spec,
  }), 201, `create Foo ${name}`);
}

async function getFoo(ns: string, name: string): Promise<Foo> {
  return expectStatus<Foo>(await cluster().get(`${foosPath(ns)}/${name}`), 200, `get Foo ${name}`);
}

/** The Deployment, or undefined when it does not exist. */
async function getDeployment(ns: string, name: string): Promise<Deployment | undefined> {
  const res = await cluster().get(`${deploymentsPath(ns)}/${name}`);
  return res.status === 404 ? undefined : expectStatus<Deployment>(res, 200, `get Deployment ${name}`);
}

/** Events about one object, oldest first. */
async function eventsFor(ns: string, kind: string, name: string): Promise<CoreEvent[]> {
  const sel = encodeURIComponent(`involvedObject.kind=${kind},involvedObject.name=${name}`);
  const list = expectStatus<{ items: CoreEvent[] }>(await cluster().get(`/api/v1/namespaces/${ns}/events?fieldSelector=${sel}`), 200, 'list events');
  return list.items.sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion));
}

async function mergePatch(path: string, body: unknown): Promise<Deployment> {
  return expectStatus<Deployment>(await cluster().request('PATCH', path, body, { headers: { 'content-type': 'application/merge-patch+json' } }), 200, `patch ${path}`);
}

describe('Foo controller', () => {
  before(installCRDs);

  test('creates the exact Deployment with a controller ownerReference; availableReplicas reaches replicas', async (t) => {
    const ns = await testNamespace(t, 'foo-create');
    const m = await startControllers(t, { namespace: ns, controllers: ['foo'] });
    const foo = await createFoo(ns, 'example-foo', { deploymentName: 'example-foo-web', replicas: 2 });

    const d = await waitFor('Deployment created', () => getDeployment(ns, 'example-foo-web'));
    assert.deepEqual(d.metadata?.ownerReferences, [{
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'example-foo', uid: foo.metadata?.uid,
      controller: true, blockOwnerDeletion: true,
    }]);
    const labels = { app: 'nginx', controller: 'example-foo' };
    assert.equal(d.spec?.replicas, 2);
    assert.deepEqual(d.spec?.selector, { matchLabels: labels });
    assert.deepEqual(d.spec?.template?.metadata?.labels, labels);
    const containers = d.spec?.template?.spec?.containers ?? [];
    assert.deepEqual(containers.map((c) => [c.name, c.image]), [['nginx', 'nginx:latest']]);

    const done = await waitFor('status.availableReplicas = 2', async () => {
      const f = await getFoo(ns, 'example-foo');
      return f.status?.availableReplicas === 2 ? f : undefined;
    });
    assert.equal(done.spec?.replicas, 2);
    await m.flushEvents();
    const events = await eventsFor(ns, 'Foo', 'example-foo');
    assert.ok(events.some((e) => e.type === 'Normal' && e.reason === 'Synced' && e.message === 'Foo synced successfully'), JSON.stringify(events));
    assert.equal(events.filter((e) => e.type === 'Warning').length, 0);
  });

  test('replicas change → Deployment updated; replica drift on the Deployment is corrected', async (t) => {
    const ns = await testNamespace(t, 'foo-scale');
    await startControllers(t, { namespace: ns, controllers: ['foo'] });
    await createFoo(ns, 'f', { deploymentName: 'web', replicas: 1 });
    await waitFor('Foo available 1', async () => (await getFoo(ns, 'f')).status?.availableReplicas === 1);

    await mergePatch(`${foosPath(ns)}/f`, { spec: { replicas: 3 } });
    await waitFor('Deployment scaled to 3', async () => (await getDeployment(ns, 'web'))?.spec?.replicas === 3);
    await waitFor('Foo available 3', async () => (await getFoo(ns, 'f')).status?.availableReplicas === 3);

    const drifted = await mergePatch(`${deploymentsPath(ns)}/web`, { spec: { replicas: 5 } }); // someone edits the child
    assert.equal(drifted.spec?.replicas, 5);
    await waitFor('drift corrected back to 3', async () => {
      const d = await getDeployment(ns, 'web');
      return (d?.metadata?.generation ?? 0) > (drifted.metadata?.generation ?? 0) && d?.spec?.replicas === 3;
    });
    await waitFor('Foo available 3 again', async () => (await getFoo(ns, 'f')).status?.availableReplicas === 3);
  });

  test('a Deployment deleted by hand is recreated', async (t) => {
    const ns = await testNamespace(t, 'foo-recreate');
    await startControllers(t, { namespace: ns, controllers: ['foo'] });
    const foo = await createFoo(ns, 'f', { deploymentName: 'web', replicas: 1 });
    const first = await waitFor('Deployment created', () => getDeployment(ns, 'web'));
    expectStatus(await cluster().request('DELETE', `${deploymentsPath(ns)}/web`), 200, 'delete Deployment');
    const second = await waitFor('Deployment recreated', async () => {
      const d = await getDeployment(ns, 'web');
      return d && d.metadata?.uid !== first.metadata?.uid ? d : undefined;
    });
    assert.equal(second.metadata?.ownerReferences?.[0]?.uid, foo.metadata?.uid);
    assert.equal(second.metadata?.ownerReferences?.[0]?.controller, true);
  });

  test('a pre-existing unowned Deployment: ErrResourceExists, retried with backoff, never taken over', async (t) => {
    const ns = await testNamespace(t, 'foo-exists');
    const m = await startControllers(t, { namespace: ns, controllers: ['foo'] });
    const labels = { app: 'mine' };
    const theirs = expectStatus<Deployment>(await cluster().request('POST', deploymentsPath(ns), {
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' },
      spec: { replicas: 2, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'busybox:1' }] } } },
    }), 201, 'create unowned Deployment');
    await waitFor('Deployment in the controller cache', () => m.factory.informers().some((i) => i.lister().get(ns, 'web')));
    await createFoo(ns, 'f', { deploymentName: 'web', replicas: 1 });

    const warning = await waitFor('ErrResourceExists event', async () => {
      await m.flushEvents();
      return (await eventsFor(ns, 'Foo', 'f')).find((e) => e.reason === 'ErrResourceExists');
    });
    assert.equal(warning.type, 'Warning');
    assert.equal(warning.message, 'Resource "web" already exists and is not managed by Foo');
    await waitFor('retried (rate-limited requeue)', async () => (await m.metric('workqueue_retries_total', { name: 'foo' })) >= 2);
    const after = await getDeployment(ns, 'web');
    assert.equal(after?.metadata?.uid, theirs.metadata?.uid);
    assert.equal(after?.metadata?.ownerReferences, undefined, 'no ownerReference added');
    assert.equal(after?.spec?.replicas, 2, 'replicas untouched');
    assert.equal(after?.spec?.template?.spec?.containers[0]?.image, 'busybox:1');
    assert.equal((await getFoo(ns, 'f')).status, undefined, 'no status written');
    const writes = await m.requestsByMethod();
    assert.equal((writes['PUT'] ?? 0) + (writes['DELETE'] ?? 0), 0);

    // Once the blocker is gone the Foo gets its own Deployment (the Foo index maps the delete back to it).
    expectStatus(await cluster().request('DELETE', `${deploymentsPath(ns)}/web`), 200, 'delete unowned Deployment');
    const owned = await waitFor('own Deployment created', async () => {
      const d = await getDeployment(ns, 'web');
      return d?.metadata?.ownerReferences?.[0]?.kind === 'Foo' ? d : undefined;
    });
    assert.equal(owned.spec?.template?.spec?.containers[0]?.image, 'nginx:latest');
  });

  test('Foo deleted → its Deployment is garbage-collected', async (t) => {
    const ns = await testNamespace(t, 'foo-gc');
    await startControllers(t, { namespace: ns, controllers: ['foo'] });
    await createFoo(ns, 'f', { deploymentName: 'web', replicas: 1 });
    await waitFor('Deployment created', () => getDeployment(ns, 'web'));
    expectStatus(await cluster().request('DELETE', `${foosPath(ns)}/f`), 200, 'delete Foo');
    // kube-controller-manager's garbage collector discovers a new CRD type up to ~30 s after it was installed.
    await waitFor('Deployment garbage-collected', async () => (await getDeployment(ns, 'web')) === undefined, { timeoutMs: 120_000, intervalMs: 500 });
  });

  test('invalid Foos: schema violations are rejected; an empty deploymentName is reported once, not retried', async (t) => {
    const ns = await testNamespace(t, 'foo-invalid');
    const m = await startControllers(t, { namespace: ns, controllers: ['foo'] });
    for (const spec of [{ deploymentName: 'd', replicas: 0 }, { deploymentName: 'd', replicas: 11 }, { deploymentName: 'd', replicas: 'x' }]) {
      const res = await cluster().request('POST', foosPath(ns), { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'bad' }, spec });
      assert.equal(res.status, 422, `${JSON.stringify(spec)}: ${res.body}`);
    }
    await createFoo(ns, 'no-name', { replicas: 1 });
    const warning = await waitFor('InvalidSpec event', async () => {
      await m.flushEvents();
      return (await eventsFor(ns, 'Foo', 'no-name')).find((e) => e.reason === 'InvalidSpec');
    });
    assert.equal(warning.type, 'Warning');
    // Not requeued (checked while it is the only Foo: a valid Foo's fenced status patch may be requeued once when the
    // cache is behind its own last write — a 409, docs/safety.md — which also counts as a retry).
    assert.equal(await m.metric('workqueue_retries_total', { name: 'foo' }), 0);
    // The controller keeps working: a valid Foo created afterwards converges.
    await createFoo(ns, 'ok', { deploymentName: 'ok', replicas: 1 });
    await waitFor('valid Foo converged', async () => (await getFoo(ns, 'ok')).status?.availableReplicas === 1);
    // No hot loop: the invalid Foo was reconciled once (terminal) meanwhile — each of its reconciles is an error.
    assert.equal(await m.metric('controller_runtime_terminal_reconcile_errors_total', { controller: 'foo' }), 1);
    assert.equal(await m.metric('controller_runtime_reconcile_errors_total', { controller: 'foo' }), 1);
    await m.flushEvents();
    const warnings = (await eventsFor(ns, 'Foo', 'no-name')).filter((e) => e.type === 'Warning');
    assert.deepEqual(warnings.map((e) => [e.reason, e.count]), [['InvalidSpec', 1]]);
  });

  test('no-op steady state: after convergence a resync period passes with zero write requests', async (t) => {
    const ns = await testNamespace(t, 'foo-steady');
    const resyncPeriodMs = 2_000;
    const m = await startControllers(t, { namespace: ns, controllers: ['foo', 'deployment'], resyncPeriodMs });
    const names = ['a', 'b', 'c'];
    for (const [i, name] of names.entries()) await createFoo(ns, name, { deploymentName: `${name}-web`, replicas: i + 1 });
    await waitFor('Foos converged and rollouts complete', async () => {
      for (const [i, name] of names.entries()) {
        if ((await getFoo(ns, name)).status?.availableReplicas !== i + 1) return false;
        if ((await m.metric('deployment_rollout_state', { deployment: `${name}-web`, state: 'complete' })) !== 1) return false;
      }
      return true;
    });
    await m.flushEvents();
    const writesBefore = await m.requestsByMethod();
    const reconciles = async (controller: string): Promise<number> => m.metric('controller_runtime_reconcile_total', { controller });
    const [foo0, dep0] = [await reconciles('foo'), await reconciles('deployment')];
    // Two resyncs re-deliver every cached object to both controllers.
    await waitFor('two resyncs reconciled everything again', async () =>
      (await reconciles('foo')) >= foo0 + 2 * names.length && (await reconciles('deployment')) >= dep0 + 2 * names.length,
    { timeoutMs: 6 * resyncPeriodMs + 10_000 });
    await m.flushEvents();
    const writesAfter = await m.requestsByMethod();
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      assert.equal(writesAfter[method] ?? 0, writesBefore[method] ?? 0, `${method} requests during the resyncs`);
    }
    assert.ok((writesBefore['POST'] ?? 0) >= names.length, 'the Deployments were created by this manager');
  });
});
