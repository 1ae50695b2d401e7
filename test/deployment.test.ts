/**
 * Deployment controller on the real control plane (kube-controller-manager rolls Deployments out, kwok makes Pods
 * Ready): rollout announcements, a stall announced once, nothing re-announced after a restart, and the Foo and
 * Deployment controllers sharing one Deployment watch.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { deploymentResource, revisionAnnotation, type Deployment } from '../pkg/controllers/deployment/types.ts';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { startControllers, type RunningControllers } from './helpers/manager.ts';
import { metricValue } from './helpers/managerprocess.ts';

interface CoreEvent { reason: string; message: string; type: string; count?: number; metadata: { name: string; resourceVersion: string } }

const deploymentsPath = (ns: string): string => `/apis/apps/v1/namespaces/${ns}/deployments`;

async function createDeployment(ns: string, name: string, opts: { replicas?: number; image?: string; progressDeadlineSeconds?: number; nodeSelector?: Record<string, string> } = {}): Promise<Deployment> {
  const labels = { app: name };
  return expectStatus<Deployment>(await cluster().request('POST', deploymentsPath(ns), {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name },
    spec: {
      replicas: opts.replicas ?? 2,
      ...(opts.progressDeadlineSeconds ? { progressDeadlineSeconds: opts.progressDeadlineSeconds } : {}),
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: { containers: [{ name: 'app', image: opts.image ?? 'nginx:1.0' }], ...(opts.nodeSelector ? { nodeSelector: opts.nodeSelector } : {}) },
      },
    },
  }), 201, `create Deployment ${name}`);
}

async function setImage(ns: string, name: string, image: string): Promise<void> {
  expectStatus(await cluster().request('PATCH', `${deploymentsPath(ns)}/${name}`,
    { spec: { template: { spec: { containers: [{ name: 'app', image }] } } } },
    { headers: { 'content-type': 'application/strategic-merge-patch+json' } }), 200, `set image of ${name}`);
}

/** Rollout events about one Deployment, oldest first. */
async function rolloutEvents(ns: string, name: string): Promise<CoreEvent[]> {
  const sel = encodeURIComponent(`involvedObject.kind=Deployment,involvedObject.name=${name}`);
  const list = expectStatus<{ items: CoreEvent[] }>(await cluster().get(`/api/v1/namespaces/${ns}/events?fieldSelector=${sel}`), 200, 'list events');
  return list.items.filter((e) => e.reason.startsWith('Rollout'))
    .sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion));
}

const summary = (events: CoreEvent[]): string[] => events.map((e) => `${e.type} ${e.reason} ${e.message} x${e.count ?? 1}`);

/** Waits until `count` rollout Events exist for the Deployment (the caller asserts what they are). */
async function waitForEvents(m: RunningControllers, ns: string, name: string, count: number): Promise<CoreEvent[]> {
  return waitFor(`${count} rollout events on ${name}`, async () => {
    await m.flushEvents();
    const events = await rolloutEvents(ns, name);
    return events.length >= count ? events : undefined;
  });
}

const reconciles = (m: RunningControllers): Promise<number> => m.metric('controller_runtime_reconcile_total', { controller: 'deployment' });

describe('Deployment controller', () => {
  before(installCRDs);

  test('Foo and Deployment controllers share one Deployment watch per namespace scope', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'dep-share');
    const serverWatches = async (): Promise<number> => metricValue((await cp.get('/metrics')).body, 'apiserver_longrunning_requests',
      { group: 'apps', resource: 'deployments', scope: 'namespace', verb: 'WATCH' }) ?? 0;
    const before = await serverWatches();
    const m = await startControllers(t, { namespace: ns, controllers: ['foo', 'deployment'] });
    const deploymentInformers = m.factory.informers().filter((i) => i.resource === deploymentResource);
    assert.equal(deploymentInformers.length, 1, 'one Deployment informer in the factory');
    await waitFor('our watch is open', () => m.factory.openWatches(deploymentResource, ns) === 1);
    assert.equal(m.factory.openWatches(deploymentResource), 1, 'client side: one Deployment watch in total');
    assert.equal(await waitFor('the API server counts one more namespaced Deployment watch',
      async () => ((await serverWatches()) - before === 1 ? 1 : undefined), { timeoutMs: 10_000 }), 1);
    // Both controllers act on that one informer.
    expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f' }, spec: { deploymentName: 'web', replicas: 1 },
    }), 201, 'create Foo');
    await waitFor('the Deployment controller observed the Foo\'s Deployment complete',
      async () => (await m.metric('deployment_rollout_state', { deployment: 'web', state: 'complete' })) === 1);
    assert.equal((await serverWatches()) - before, 1);
  });

  test('a rollout to a new image: RolloutStarted then RolloutComplete, once each', async (t) => {
    const ns = await testNamespace(t, 'dep-rollout');
    const m = await startControllers(t, { namespace: ns, controllers: ['deployment'] });
    await createDeployment(ns, 'web', { replicas: 2, image: 'nginx:1.0' });
    await waitForEvents(m, ns, 'web', 2);
    await waitFor('state complete', async () => (await m.metric('deployment_rollout_state', { deployment: 'web', state: 'complete' })) === 1);

    await setImage(ns, 'web', 'nginx:2.0');
    const events = await waitForEvents(m, ns, 'web', 4);
    assert.deepEqual(summary(events), [
      'Normal RolloutStarted Rollout of revision 1 started x1',
      'Normal RolloutComplete Rollout of revision 1 complete x1',
      'Normal RolloutStarted Rollout of revision 2 started x1',
      'Normal RolloutComplete Rollout of revision 2 complete x1',
    ]);
    const hist = await m.registry.getSingleMetricAsString('deployment_rollout_duration_seconds');
    assert.match(hist, /^deployment_rollout_duration_seconds_count 2$/m);
    assert.equal(await m.metric('deployment_rollout_state', { deployment: 'web', state: 'complete' }), 1);
    assert.equal(await m.metric('deployment_rollout_state', { deployment: 'web', state: 'progressing' }), 0);
  });

  test('a rollout that can never finish: RolloutStalled exactly once', async (t) => {
    const ns = await testNamespace(t, 'dep-stall');
    const m = await startControllers(t, { namespace: ns, controllers: ['deployment'], resyncPeriodMs: 1_000 });
    // No node matches: the Pods stay Pending and the 2 s progress deadline passes.
    await createDeployment(ns, 'stuck', { replicas: 1, progressDeadlineSeconds: 2, nodeSelector: { 'example.com/no-such-node': 'true' } });
    await waitForEvents(m, ns, 'stuck', 2);
    assert.equal(await m.metric('deployment_rollout_state', { deployment: 'stuck', state: 'stalled' }), 1);
    const after = await reconciles(m);
    await waitFor('three more resyncs reconciled it', async () => (await reconciles(m)) >= after + 3, { timeoutMs: 30_000 });
    await m.flushEvents();
    assert.deepEqual(summary(await rolloutEvents(ns, 'stuck')), [
      'Normal RolloutStarted Rollout of revision 1 started x1',
      'Warning RolloutStalled Rollout of revision 1 stalled: ReplicaSet "' + (await rsName(ns, 'stuck')) + '" has timed out progressing. x1',
    ]);
  });

  test('restarting the manager announces nothing new for finished (or stalled) rollouts', async (t) => {
    const ns = await testNamespace(t, 'dep-restart');
    const first = await startControllers(t, { namespace: ns, controllers: ['deployment'] });
    const web = await createDeployment(ns, 'web', { replicas: 2, image: 'nginx:1.0' });
    await createDeployment(ns, 'stuck', { replicas: 1, progressDeadlineSeconds: 2, nodeSelector: { 'example.com/no-such-node': 'true' } });
    await waitForEvents(first, ns, 'web', 2);
    await setImage(ns, 'web', 'nginx:2.0');
    await waitForEvents(first, ns, 'web', 4);
    await waitForEvents(first, ns, 'stuck', 2);
    await first.stop();
    const before = { web: summary(await rolloutEvents(ns, 'web')), stuck: summary(await rolloutEvents(ns, 'stuck')) };
    // creationTimestamp has second precision: the restart must fall in a later second than the creation.
    const created = Date.parse(web.metadata?.creationTimestamp ?? '');
    await waitFor('a later second than the creation', () => Date.now() >= created + 1_000);

    const second = await startControllers(t, { namespace: ns, controllers: ['deployment'], resyncPeriodMs: 1_000 });
    await waitFor('the new manager observed both Deployments', async () =>
      (await second.metric('deployment_rollout_state', { deployment: 'web', state: 'complete' })) === 1 &&
      (await second.metric('deployment_rollout_state', { deployment: 'stuck', state: 'stalled' })) === 1);
    const seen = await reconciles(second);
    await waitFor('two resyncs of both', async () => (await reconciles(second)) >= seen + 4, { timeoutMs: 30_000 });
    await second.flushEvents();
    assert.deepEqual({ web: summary(await rolloutEvents(ns, 'web')), stuck: summary(await rolloutEvents(ns, 'stuck')) }, before);
    assert.equal(before.web.length, 4);
    assert.equal(before.stuck.length, 2);
  });
});

/** The name of a Deployment's newest ReplicaSet (kube-controller-manager's stall message names it). */
async function rsName(ns: string, deployment: string): Promise<string> {
  const list = expectStatus<{ items: Deployment[] }>(await cluster().get(`/apis/apps/v1/namespaces/${ns}/replicasets`), 200, 'list ReplicaSets');
  const d = expectStatus<Deployment>(await cluster().get(`${deploymentsPath(ns)}/${deployment}`), 200, 'get Deployment');
  const rev = d.metadata?.annotations?.[revisionAnnotation];
  const rs = list.items.find((r) => r.metadata?.ownerReferences?.[0]?.name === deployment && r.metadata.annotations?.[revisionAnnotation] === rev);
  return rs?.metadata?.name ?? '?';
}
