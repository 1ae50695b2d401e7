/**
 * The memcached controller's own test, envtest-style: a real etcd + kube-apiserver with crd.yaml installed, from
 * `ts-controller-manager/testing`; the controller run in this process on a ControllerManager (`startManager`, the
 * same `setupMemcached` that `node main.ts` runs); everything checked through the API, each step awaited with
 * `eventually`, in a namespace of the test's own (`testNamespace`). As in envtest no Kubernetes controllers run:
 * Deployments get no Pods and nothing garbage-collects, so the test plays the Deployment controller (writes the
 * Deployment's status) and the finalizer alone removes the Deployment. The reconciler's unit test on the FakeClient
 * is reconcile.test.ts.
 *   node --test main.test.ts
 * (From a clone of ts-controller-manager: NODE_OPTIONS=--conditions=ts-controller-manager-source node --test examples/memcached/main.test.ts)
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { ControllerManager, coreResources, ignoreNotFound, newLogger } from 'ts-controller-manager';
import type { Deployment } from 'ts-controller-manager/api/apps/v1';
import { eventually, startManager, startTestEnv, testNamespace, type RunningManager, type TestEnv } from 'ts-controller-manager/testing';
import { memcachedResource, type Memcached } from './api/example/v1alpha1/zz_generated.types.ts';
import { setupMemcached } from './main.ts';

let env: TestEnv;
let controller: RunningManager;
let logs = '';

before(async () => {
  // The controller runs as a ServiceAccount bound to rbac/ (what gen rbac derived from its declarations): a call it
  // did not declare is refused as in a cluster, and the test stops there, naming the rule.
  env = await startTestEnv({ crdPaths: [join(import.meta.dirname, 'crd.yaml')], rbacPaths: [join(import.meta.dirname, 'rbac')] });
  console.log(`control plane ready in ${(env.startMs / 1000).toFixed(1)} s`);
  const out = new PassThrough();
  out.on('data', (d: Buffer) => (logs += d.toString()));
  controller = await startManager(() => {
    const mgr = new ControllerManager({ ...env.managerConnection, logger: newLogger({ destination: out }) });
    setupMemcached(mgr);
    return mgr;
  });
});
after(async () => {
  await controller.stop().catch(() => {}); // asserted in the test; here only: never leave it running
  await env.stop();
});

/** Live processes whose command line names a path in `dir` (an environment's etcd and kube-apiserver do). */
const processesIn = (dir: string): number[] => readdirSync('/proc').map(Number).filter((pid) => {
  try {
    return Number.isInteger(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${dir}/`);
  } catch {
    return false; // exited meanwhile
  }
});

test('a Memcached gets its Deployment (SSA, owned), becomes Ready, drift is undone, a foreign Deployment is never taken over, the finalizer cleans up', async (t) => {
  const ns = await testNamespace(env, { t });
  const memcacheds = env.client.resource<Memcached>(memcachedResource).namespace(ns.name);
  const deployments = env.client.resource<Deployment>(coreResources.deployments).namespace(ns.name);
  const waitFor = <T>(message: string, fn: () => Promise<T>): Promise<Exclude<T, undefined | null | false>> => eventually(fn, { message: () => `${message}; controller logs:\n${logs.slice(-2000)}` });
  const mc = await memcacheds.create({ apiVersion: 'example.ts-controller-manager.io/v1alpha1', kind: 'Memcached', metadata: { name: 'sessions' }, spec: { size: 2 } });
  const ready = async (): Promise<Memcached['status'] & object> => (await memcacheds.get('sessions')).status ?? {};

  // The Deployment appears as the spec says, controlled by the Memcached, its fields owned by the controller's apply.
  const d = await waitFor('the Deployment', () => ignoreNotFound(deployments.get('sessions')));
  assert.equal(d.spec?.replicas, 2);
  assert.equal(d.spec?.template?.spec?.containers?.[0]?.image, 'memcached:1.6.26-alpine3.19', 'the CRD default');
  assert.deepEqual(d.metadata?.ownerReferences, [{
    apiVersion: 'example.ts-controller-manager.io/v1alpha1', kind: 'Memcached', name: 'sessions', uid: mc.metadata?.uid, controller: true, blockOwnerDeletion: true,
  }]);
  const managers = (d.metadata?.managedFields ?? []) as { manager: string; operation: string }[];
  assert.ok(managers.some((f) => f.manager === 'memcached-controller' && f.operation === 'Apply'), JSON.stringify(managers));
  assert.deepEqual((await memcacheds.get('sessions')).metadata?.finalizers, ['example.ts-controller-manager.io/finalizer']);
  const progressing = await waitFor('Ready=False', async () => (await ready()).conditions?.find((c) => c.type === 'Ready' && c.status === 'False'));
  assert.deepEqual([progressing.reason, progressing.message, progressing.observedGeneration], ['Progressing', '0/2 replicas available', 1]);

  // Play the Deployment controller: all replicas available → Ready=True.
  await deployments.status().patch('sessions', { merge: { status: { observedGeneration: d.metadata?.generation, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 } } });
  const readyCond = await waitFor('Ready=True', async () => (await ready()).conditions?.find((c) => c.type === 'Ready' && c.status === 'True'));
  assert.deepEqual([readyCond.reason, readyCond.message, readyCond.observedGeneration], ['Available', '2/2 replicas available', 1]);
  assert.equal((await ready()).availableReplicas, 2);

  // Drift by hand (another field manager) is undone: `.owns` requeues the Memcached and the forced apply takes it back.
  await deployments.patch('sessions', { merge: { spec: { replicas: 5, template: { spec: { containers: [{ name: 'memcached', image: 'memcached:latest' }] } } } } }, { fieldManager: 'kubectl-edit' });
  const back = await waitFor('the drift undone', async () => {
    const now = await deployments.get('sessions');
    return now.spec?.replicas === 2 && now.spec.template?.spec?.containers?.[0]?.image === 'memcached:1.6.26-alpine3.19' && now;
  });
  assert.equal(back.metadata?.uid, d.metadata?.uid, 'the same Deployment, corrected in place');

  // Deleting the Memcached runs the finalizer: the Deployment goes (no garbage collector here), then the Memcached.
  await memcacheds.delete('sessions');
  await waitFor('Memcached and Deployment gone', async () =>
    (await ignoreNotFound(memcacheds.get('sessions'))) === undefined && (await ignoreNotFound(deployments.get('sessions'))) === undefined);
  assert.match(logs, /Deleted the Deployment/);

  // Someone else's Deployment of a Memcached's name is never taken over: Ready=False ResourceExists, until it goes.
  await deployments.create({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'foreign' }, spec: {
    replicas: 1, selector: { matchLabels: { app: 'foreign' } }, template: { metadata: { labels: { app: 'foreign' } }, spec: { containers: [{ name: 'x', image: 'x' }] } },
  } } satisfies Deployment);
  await memcacheds.create({ apiVersion: 'example.ts-controller-manager.io/v1alpha1', kind: 'Memcached', metadata: { name: 'foreign' }, spec: { size: 3 } });
  const refused = await waitFor('Ready=False ResourceExists', async () => (await memcacheds.get('foreign')).status?.conditions?.find((c) => c.reason === 'ResourceExists'));
  assert.equal(refused.status, 'False');
  const untouched = await deployments.get('foreign');
  assert.deepEqual([untouched.spec?.replicas, untouched.metadata?.ownerReferences], [1, undefined], 'the foreign Deployment is left as it was');
  await deployments.delete('foreign');
  const own = await waitFor('its own Deployment once the foreign one is gone', async () => {
    const now = await ignoreNotFound(deployments.get('foreign'));
    return now?.metadata?.ownerReferences?.[0]?.kind === 'Memcached' && now;
  });
  assert.equal(own.spec?.replicas, 3);
  await memcacheds.delete('foreign');
  await waitFor('the second Memcached gone', async () => (await ignoreNotFound(memcacheds.get('foreign'))) === undefined);

  // Nothing left behind: the manager stops gracefully (stop() rejects unless it exited 0), the control plane's
  // processes are gone after env.stop().
  await ns.delete();
  await controller.stop();
  assert.equal(await controller.exited, 0);
  await env.stop();
  assert.deepEqual(processesIn(env.dir), [], 'no etcd or kube-apiserver left');
});
