/**
 * Fencing by precondition (issue 23, docs/safety.md "Fencing") on the REAL API server (etcd + kube-apiserver are
 * enough: TEST_CLUSTER_MODE=minimal works). A late write — e.g. an old leader's, delivered after the lease moved and
 * the new leader wrote — is played here by running the controller's own reconciler against a cache that is one version
 * behind the object (exactly what the old leader's informer held when it built the write). The API server must refuse
 * it (409 Conflict, from the resourceVersion in the merge patch) and the object must keep the newer write; the
 * reconciler must answer `{ requeue: true }` without an error or a Warning Event.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { fooReconciler } from '../pkg/controllers/foo/controller.ts';
import { newDeployment } from '../pkg/controllers/foo/desired.ts';
import type { Deployment } from '../pkg/controllers/deployment/types.ts';
import { FINALIZER, networkReconciler, type NeutronNetworkAPI } from '../pkg/controllers/network/index.ts';
import { FakeRecorder } from '../pkg/events/fake.ts';
import { Indexer } from '../pkg/informerfactory/indexer.ts';
import { Lister } from '../pkg/informerfactory/lister.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import type { Network as NeutronNetwork, Subnet } from '../pkg/neutron/index.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';

const foosPath = (ns: string): string => `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`;
const deploymentsPath = (ns: string): string => `/apis/apps/v1/namespaces/${ns}/deployments`;
const networksPath = (ns: string): string => `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks`;
const mergePatchHeaders = { headers: { 'content-type': 'application/merge-patch+json' } };

async function mergePatch<T>(path: string, body: unknown): Promise<T> {
  return expectStatus<T>(await cluster().request('PATCH', path, body, mergePatchHeaders), 200, `patch ${path}`);
}

async function get<T>(path: string): Promise<T> {
  return expectStatus<T>(await cluster().get(path), 200, `get ${path}`);
}

const ctx = (key: string): { log: typeof silentLogger; reconcileID: string; key: string } => ({ log: silentLogger, reconcileID: 'late', key });

describe('fencing: a write built from a stale cache is refused by the API server (409) and requeued quietly', () => {
  before(installCRDs);

  test('Foo status: a patch from an old cached Foo is refused; the newer status stays', async (t) => {
    const ns = await testNamespace(t, 'fence-foo');
    const rest = new RestClient({ kubeConfig: adminKubeConfig(), userAgent: 'fencing-test' });
    const foo = expectStatus<Foo>(await cluster().request('POST', foosPath(ns), {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f' }, spec: { deploymentName: 'f-web', replicas: 2 },
    }), 201, 'create Foo');
    const d = newDeployment(foo);
    const dep = expectStatus<Deployment>(await cluster().request('POST', deploymentsPath(ns), d), 201, 'create Deployment');

    // The old leader's cache: the Foo as created (no status) and its Deployment with 1 available replica.
    const foos = new Indexer<Foo>();
    const deployments = new Indexer<Deployment>();
    foos.add(foo);
    deployments.add({ ...dep, status: { availableReplicas: 1 } });

    // Meanwhile the new leader wrote a newer status (the Foo's resourceVersion moved on).
    const newer = await mergePatch<Foo>(`${foosPath(ns)}/f/status`, { status: { availableReplicas: 2 } });
    assert.notEqual(newer.metadata?.resourceVersion, foo.metadata?.resourceVersion);

    // The old leader's late status write.
    const recorder = new FakeRecorder();
    const reconcile = fooReconciler({ foos: new Lister(foos), deployments: new Lister(deployments), rest, recorder });
    const result = await reconcile({ namespace: ns, name: 'f' }, new AbortController().signal, ctx(`${ns}/f`));

    assert.deepEqual(result, { requeue: true }, 'the 409 requeues quietly (no error)');
    assert.deepEqual(recorder.events, [], 'no Event: nothing was synced');
    const now = await get<Foo>(`${foosPath(ns)}/f`);
    assert.equal(now.status?.availableReplicas, 2, 'the newer status is kept');
    assert.equal(now.metadata?.resourceVersion, newer.metadata?.resourceVersion, 'the Foo was not written at all');
  });

  test('Deployment replica drift: a patch from an old cached Deployment is refused; the newer spec stays', async (t) => {
    const ns = await testNamespace(t, 'fence-dep');
    const rest = new RestClient({ kubeConfig: adminKubeConfig(), userAgent: 'fencing-test' });
    const foo = expectStatus<Foo>(await cluster().request('POST', foosPath(ns), {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f' }, spec: { deploymentName: 'f-web', replicas: 3 },
    }), 201, 'create Foo');
    const dep = expectStatus<Deployment>(await cluster().request('POST', deploymentsPath(ns), { ...newDeployment(foo), spec: { ...newDeployment(foo).spec, replicas: 1 } }), 201, 'create Deployment');

    const foos = new Indexer<Foo>();
    const deployments = new Indexer<Deployment>();
    foos.add(foo);
    deployments.add(dep); // replicas 1: the old leader sees drift (Foo wants 3)

    // Meanwhile the new leader acted on a newer Foo (replicas 5, the old leader never saw it) and scaled the Deployment.
    const newer = await mergePatch<Deployment>(`${deploymentsPath(ns)}/f-web`, { spec: { replicas: 5 } });

    const recorder = new FakeRecorder();
    const reconcile = fooReconciler({ foos: new Lister(foos), deployments: new Lister(deployments), rest, recorder });
    const result = await reconcile({ namespace: ns, name: 'f' }, new AbortController().signal, ctx(`${ns}/f`));

    assert.deepEqual(result, { requeue: true });
    assert.deepEqual(recorder.events, []);
    const now = await get<Deployment>(`${deploymentsPath(ns)}/f-web`);
    assert.equal(now.spec?.replicas, 5, 'the newer replica count is kept');
    // generation, not resourceVersion: on the full control plane the Deployment controller writes status meanwhile.
    assert.equal(now.metadata?.generation, newer.metadata?.generation, 'no spec write after the newer one');
  });

  test('Network status: a patch from an old cached Network is refused; the newer status stays', async (t) => {
    const ns = await testNamespace(t, 'fence-net');
    const rest = new RestClient({ kubeConfig: adminKubeConfig(), userAgent: 'fencing-test' });
    const created = expectStatus<Network>(await cluster().request('POST', networksPath(ns), {
      apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'n', finalizers: [FINALIZER] }, spec: { cidr: '10.0.0.0/24' },
    }), 201, 'create Network');
    t.after(async () => {
      await cluster().request('PATCH', `${networksPath(ns)}/n`, { metadata: { finalizers: null } }, mergePatchHeaders);
    });

    // Neutron as the old leader saw it (a fake: only the Kubernetes write is under test here).
    const network: NeutronNetwork = {
      id: 'net-old', name: `${ns}/n`, description: '', project_id: 'p', admin_state_up: true, status: 'ACTIVE', shared: false,
      subnets: ['sub-old'], tags: [`k8s-uid:${created.metadata?.uid ?? ''}`], revision_number: 1,
    };
    const subnet: Subnet = {
      id: 'sub-old', name: '', description: '', network_id: 'net-old', project_id: 'p', cidr: '10.0.0.0/24', gateway_ip: '10.0.0.1',
      ip_version: 4, allocation_pools: [], enable_dhcp: true, dns_nameservers: [], host_routes: [], tags: network.tags, revision_number: 1,
    };
    const neutron: NeutronNetworkAPI = {
      projectId: () => Promise.resolve(undefined),
      getNetwork: () => Promise.resolve(network),
      listNetworks: () => Promise.resolve([network]),
      listSubnets: () => Promise.resolve([subnet]),
      createNetwork: () => assert.fail('no create'),
      deleteNetwork: () => assert.fail('no delete'),
      addTag: () => assert.fail('no tag'),
      createSubnet: () => assert.fail('no create'),
      updateSubnet: () => assert.fail('no update'),
      deleteSubnet: () => assert.fail('no delete'),
    };
    const networks = new Indexer<Network>();
    networks.add(created);

    // The new leader recorded newer Neutron ids.
    const newer = await mergePatch<Network>(`${networksPath(ns)}/n/status`, { status: { networkID: 'net-new', subnetID: 'sub-new', observedGeneration: 1 } });

    const recorder = new FakeRecorder();
    const reconcile = networkReconciler({ networks: new Lister(networks), rest, neutron, recorder });
    const result = await reconcile({ namespace: ns, name: 'n' }, new AbortController().signal, ctx(`${ns}/n`));

    assert.deepEqual(result, { requeue: true });
    assert.deepEqual(recorder.events.filter((e) => e.startsWith('Warning')), []);
    const now = await get<Network>(`${networksPath(ns)}/n`);
    assert.deepEqual([now.status?.networkID, now.status?.subnetID], ['net-new', 'sub-new'], 'the newer status is kept');
    assert.equal(now.metadata?.resourceVersion, newer.metadata?.resourceVersion);
  });

  test('Network finalizer: its removal from an old cached (deleting) Network is refused once the Network changed; the finalizer and the change stay', async (t) => {
    const ns = await testNamespace(t, 'fence-fin');
    const rest = new RestClient({ kubeConfig: adminKubeConfig(), userAgent: 'fencing-test' });
    t.after(() => rest.close());
    const created = expectStatus<Network>(await cluster().request('POST', networksPath(ns), {
      apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'n', finalizers: [FINALIZER] }, spec: { cidr: '10.0.0.0/24' },
    }), 201, 'create Network');
    t.after(async () => {
      await cluster().request('PATCH', `${networksPath(ns)}/n`, { metadata: { finalizers: null } }, mergePatchHeaders);
    });
    // The user deletes it: the finalizer keeps it, with a deletionTimestamp. The old leader's cache holds this version.
    expectStatus(await cluster().request('DELETE', `${networksPath(ns)}/n`), 200, 'delete Network');
    const deleting = await get<Network>(`${networksPath(ns)}/n`);
    assert.ok(deleting.metadata?.deletionTimestamp, 'being deleted');

    // Neutron as the old leader saw it (a fake: only the Kubernetes write is under test here): one tagged network,
    // which the finalizer deletes before removing itself.
    const network: NeutronNetwork = {
      id: 'net-1', name: `${ns}/n`, description: '', project_id: 'p', admin_state_up: true, status: 'ACTIVE', shared: false,
      subnets: [], tags: [`k8s-uid:${created.metadata?.uid ?? ''}`], revision_number: 1,
    };
    const deletedInNeutron: string[] = [];
    const neutron: NeutronNetworkAPI = {
      projectId: () => Promise.resolve(undefined),
      getNetwork: () => Promise.resolve(network),
      listNetworks: () => Promise.resolve(deletedInNeutron.includes(network.id) ? [] : [network]),
      listSubnets: () => Promise.resolve([]),
      createNetwork: () => assert.fail('no create'),
      deleteNetwork: (id: string) => {
        deletedInNeutron.push(id);
        return Promise.resolve();
      },
      addTag: () => assert.fail('no tag'),
      createSubnet: () => assert.fail('no create'),
      updateSubnet: () => assert.fail('no update'),
      deleteSubnet: () => assert.fail('no delete'),
    };
    const networks = new Indexer<Network>();
    networks.add(deleting);

    // Meanwhile someone else writes the Network (a label): its resourceVersion moves on.
    const newer = await mergePatch<Network>(`${networksPath(ns)}/n`, { metadata: { labels: { touched: 'yes' } } });

    const recorder = new FakeRecorder();
    const reconcile = networkReconciler({ networks: new Lister(networks), rest, neutron, recorder });
    const result = await reconcile({ namespace: ns, name: 'n' }, new AbortController().signal, ctx(`${ns}/n`));

    assert.deepEqual(deletedInNeutron, ['net-1'], 'the reconcile got as far as the finalizer removal');
    assert.deepEqual(result, { requeue: true }, 'the 409 is a quiet requeue');
    assert.deepEqual(recorder.events.filter((e) => e.startsWith('Warning')), []);
    const now = await get<Network>(`${networksPath(ns)}/n`);
    assert.deepEqual(now.metadata?.finalizers, [FINALIZER], 'the finalizer stays: the late removal was refused');
    assert.equal(now.metadata?.labels?.['touched'], 'yes');
    assert.equal(now.metadata?.resourceVersion, newer.metadata?.resourceVersion, 'no write after the newer one');
  });
});
