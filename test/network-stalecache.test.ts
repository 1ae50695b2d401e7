/**
 * The Network controller's stale-cache fence (pkg/controllers/network/controller.ts confirmOnce; docs/controllers.md),
 * on the real kube-apiserver and a REAL neutron-server: Neutron is written to only from a copy of the Network the API
 * server has just confirmed. The endurance bench found a new leader creating a Neutron network from its cached
 * copy of a Network already finalized and gone — a leak nobody deletes.
 *
 * The reconciler is built as the controller builds it (networkReconciler over a Lister, the real RestClient, the real
 * Neutron client, a real EventRecorder), but its cache is an Indexer this test fills with a copy read from the server
 * EARLIER — as a lagging informer would hold it: our finalizer, no status, no Neutron network yet. The server then
 * moves on (the Network deleted, changed, or deleted and re-created under the same name), and the reconcile of the
 * stale copy must create nothing in Neutron (counted through Neutron's own API: by the UID's tag and description, and
 * overall), requeue quietly (no error, no Event). Likewise for a converged copy whose CIDR the user has changed since
 * (d): every Neutron write from a cached copy waits for the confirmation, so the stale spec neither deletes the
 * current subnet nor re-creates the old one (found by explore's stale-standby plans). The test runs as admin; the manager's RBAC grants the verb the
 * confirmation uses (patch on networks), which test/deploy.test.ts proves in a deployment.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import { RestClient } from '../pkg/client/rest.ts';
import type { Reconciler } from '../pkg/controller/index.ts';
import { networkReconciler } from '../pkg/controllers/network/controller.ts';
import { FINALIZER, neutronDescription, uidTag } from '../pkg/controllers/network/desired.ts';
import { EventRecorder, RestEventSink } from '../pkg/events/recorder.ts';
import { Indexer } from '../pkg/informerfactory/indexer.ts';
import { Lister } from '../pkg/informerfactory/lister.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { NeutronClient } from '../pkg/neutron/index.ts';
import { adminKubeConfig, cluster, expectStatus } from './helpers/cluster.ts';
import { eventsFor, getNetwork, NetworkTestBed, networksPath } from './helpers/network.ts';

const NEUTRON_START_TIMEOUT = 15 * 60_000;
const mergePatch = { headers: { 'content-type': 'application/merge-patch+json' } };

describe('a Network reconciled from a stale cached copy (gone, changed, or re-created on the server) creates nothing in Neutron and requeues quietly; from a current copy exactly one network is created', () => {
  let bed: NetworkTestBed;
  let rest: RestClient;
  let neutron: NeutronClient;
  let recorder: EventRecorder;

  before(async () => {
    bed = await NetworkTestBed.start({ timeoutMs: NEUTRON_START_TIMEOUT });
    rest = new RestClient({ kubeConfig: adminKubeConfig(), registry: new Registry(), userAgent: 'network-stalecache-test' });
    neutron = NeutronClient.fromCloudsYaml({ path: bed.cloudsYaml, cloud: 'local', env: {} }, { timeoutMs: 30_000 });
    recorder = new EventRecorder({ sink: new RestEventSink(rest), component: 'network-controller' });
  }, { timeout: NEUTRON_START_TIMEOUT });

  after(async () => {
    await recorder?.broadcaster.shutdown();
    await rest?.close();
    await bed?.stop();
  });

  /** A Network with our finalizer already on it (as a previous leader left it) and no status: no Neutron network yet. */
  async function createWithFinalizer(ns: string, name: string, cidr: string): Promise<Network> {
    return expectStatus<Network>(await cluster().request('POST', networksPath(ns), {
      apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name, finalizers: [FINALIZER] }, spec: { cidr },
    }), 201, `create Network ${name}`);
  }

  /** A fresh namespace and Network `name` in it (our finalizer, no status), and the copy a cache would hold of it now. */
  async function cachedNetwork(t: TestContext, prefix: string, name: string, cidr: string): Promise<{ ns: string; cached: Network; uid: string }> {
    const ns = await bed.namespace(t, prefix);
    const cached = await createWithFinalizer(ns, name, cidr);
    return { ns, cached, uid: cached.metadata?.uid ?? '' };
  }

  /** Deletes it on the server for good: DELETE, then the finalizer removed (what a previous leader's finalize does). */
  async function deleteForGood(ns: string, name: string): Promise<void> {
    expectStatus(await cluster().request('DELETE', `${networksPath(ns)}/${name}`), 200, `delete Network ${name}`);
    expectStatus(await cluster().request('PATCH', `${networksPath(ns)}/${name}`, { metadata: { finalizers: null } }, mergePatch), 200, `remove the finalizer of ${name}`);
    assert.equal(await getNetwork(ns, name), undefined, `${name} is gone from the server`);
  }

  /** Every network neutron-server has (no filter in the query), and those of `uid` among them (its tag or its description). */
  async function neutronNetworks(uid: string): Promise<{ all: number; ours: string[] }> {
    const all = await bed.api.networks();
    const ours = all.filter((n) => (Array.isArray(n['tags']) && (n['tags'] as unknown[]).includes(uidTag(uid))) || n['description'] === neutronDescription(uid));
    return { all: all.length, ours: ours.map((n) => String(n['id'])) };
  }

  /** The reconciler as the controller builds it, reading `cached` from its lister (an Indexer this test fills). */
  function reconcilerWith(cached: Network): { cache: Indexer<Network>; reconcile: () => Promise<unknown> } {
    const cache = new Indexer<Network>();
    cache.add(cached);
    const reconciler: Reconciler = networkReconciler({ networks: new Lister(cache), rest, neutron, recorder });
    const [namespace, name] = [cached.metadata?.namespace ?? '', cached.metadata?.name ?? ''];
    const key = `${namespace}/${name}`;
    // The outcome, or the error the reconcile threw (the Neutron counts are asserted before it).
    const reconcile = (): Promise<unknown> => reconciler({ namespace, name }, AbortSignal.timeout(120_000), { log: silentLogger, reconcileID: 'stale-cache-test', key })
      .then((r) => r, (err: unknown) => err);
    return { cache, reconcile };
  }

  /** Every Event recorded about Network `name` (the recorder flushed first). */
  async function eventsOf(ns: string, name: string): Promise<string[]> {
    await recorder.flush();
    return (await eventsFor(ns, name)).map((e) => `${e.type} ${e.reason}`);
  }

  /** The outcome of reconciling a stale copy of `ns/name`: no Neutron network of `uid`, none more overall, a quiet requeue, no Event. */
  async function assertNothingCreated(ns: string, name: string, uid: string, before: { all: number }, result: unknown): Promise<void> {
    const after = await neutronNetworks(uid);
    assert.deepEqual(after.ours, [], `no Neutron network of ${uid} from the stale copy`);
    assert.equal(after.all, before.all, 'no network more in Neutron overall');
    assert.deepEqual(result, { requeue: true }, 'a quiet requeue');
    assert.deepEqual(await eventsOf(ns, name), [], 'no Event (no Warning)');
  }

  test('control: the cached copy is current — exactly one Neutron network is created (tagged with the UID) and recorded in status', async (t: TestContext) => {
    const { ns, cached, uid } = await cachedNetwork(t, 'stale-ctl', 'cur', '10.90.0.0/24');
    const before = await neutronNetworks(uid);
    const { reconcile } = reconcilerWith(cached);

    const result = await reconcile();
    const after = await neutronNetworks(uid);
    assert.equal(after.ours.length, 1, `one Neutron network of ${uid}`);
    assert.equal(after.all, before.all + 1, 'one network more in Neutron overall');
    assert.ok(!(result instanceof Error), String(result));
    assert.ok(typeof (result as { requeueAfter?: unknown }).requeueAfter === 'number', `converged: the next drift check is scheduled (${JSON.stringify(result)})`);
    assert.deepEqual((await bed.api.network(after.ours[0] ?? ''))?.['tags'], [uidTag(uid)], 'tagged with the UID');
    assert.equal((await getNetwork(ns, 'cur'))?.status?.networkID, after.ours[0], 'status records it');
    assert.deepEqual(await eventsOf(ns, 'cur'), ['Normal Synced']);
  });

  test('(a) the Network deleted on the server (finalizer removed, gone) while the cache holds it with our finalizer and no status: nothing created in Neutron, quiet requeue, no Event', async (t: TestContext) => {
    const { ns, cached, uid } = await cachedNetwork(t, 'stale-gone', 'gone', '10.91.0.0/24');
    await deleteForGood(ns, 'gone');
    const before = await neutronNetworks(uid);
    const { reconcile } = reconcilerWith(cached);

    await assertNothingCreated(ns, 'gone', uid, before, await reconcile());
  });

  test('(b) the Network changed on the server after it was cached (a label: new resourceVersion): nothing created from the stale copy, quiet requeue; from the fresh copy the create happens exactly once', async (t: TestContext) => {
    const { ns, cached, uid } = await cachedNetwork(t, 'stale-changed', 'changed', '10.92.0.0/24');
    const changed = expectStatus<Network>(await cluster().request('PATCH', `${networksPath(ns)}/changed`, { metadata: { labels: { edited: 'after-the-cache' } } }, mergePatch), 200, 'label the Network');
    assert.notEqual(changed.metadata?.resourceVersion, cached.metadata?.resourceVersion);
    const before = await neutronNetworks(uid);
    const { cache, reconcile } = reconcilerWith(cached);

    await assertNothingCreated(ns, 'changed', uid, before, await reconcile());

    // The informer catches up: the fresh copy in the cache.
    cache.update(await getNetwork(ns, 'changed') ?? assert.fail('the Network is there'));
    const fresh = await reconcile();
    const afterFresh = await neutronNetworks(uid);
    assert.equal(afterFresh.ours.length, 1, `one Neutron network of ${uid}`);
    assert.equal(afterFresh.all, before.all + 1, 'one network more in Neutron overall');
    assert.ok(typeof (fresh as { requeueAfter?: unknown }).requeueAfter === 'number', `converged (${String(fresh instanceof Error ? fresh : JSON.stringify(fresh))})`);
    // Again, from the copy the server now has (status written): the network is found, not created again.
    cache.update(await getNetwork(ns, 'changed') ?? assert.fail('the Network is there'));
    await reconcile();
    assert.deepEqual(await neutronNetworks(uid), afterFresh, 'still exactly one');
    assert.deepEqual(await eventsOf(ns, 'changed'), ['Normal Synced']);
  });

  test('(c) the Network deleted and re-created under the same name (a new UID) after it was cached: nothing created in Neutron for the old UID or the new one, quiet requeue, no Event', async (t: TestContext) => {
    const { ns, cached, uid: oldUid } = await cachedNetwork(t, 'stale-recreated', 'again', '10.93.0.0/24');
    await deleteForGood(ns, 'again');
    const recreated = await createWithFinalizer(ns, 'again', '10.93.0.0/24');
    const newUid = recreated.metadata?.uid ?? '';
    assert.notEqual(newUid, oldUid);
    const before = await neutronNetworks(oldUid);
    const { reconcile } = reconcilerWith(cached);

    await assertNothingCreated(ns, 'again', oldUid, before, await reconcile());
    assert.deepEqual((await neutronNetworks(newUid)).ours, [], 'none of the new UID either (its own reconcile, from its own copy, creates it)');
  });

  test('(d) the CIDR changed on the server after a converged copy was cached (the new subnet made from the fresh copy): the stale copy deletes nothing and creates nothing in Neutron, quiet requeue, no Event', async (t: TestContext) => {
    const [cidrA, cidrB] = ['10.94.0.0/24', '10.95.0.0/24'];
    const { ns, cached } = await cachedNetwork(t, 'stale-cidr', 'cidr', cidrA);
    const { cache, reconcile } = reconcilerWith(cached);
    const serverCopy = async (): Promise<Network> => await getNetwork(ns, 'cidr') ?? assert.fail('the Network is there');
    /** The subnets on the Network's Neutron network (id and CIDR), and how many neutron-server has overall. */
    const subnetsOf = async (networkId: string): Promise<{ all: number; ours: string[] }> => {
      const all = await bed.api.subnets();
      return { all: all.length, ours: all.filter((s) => s['network_id'] === networkId).map((s) => `${String(s['id'])} ${String(s['cidr'])}`) };
    };

    // Converged at CIDR A, from a current copy; the cache's copy of it then (spec A, status A) is what goes stale.
    assert.ok(typeof ((await reconcile()) as { requeueAfter?: unknown }).requeueAfter === 'number', 'converged at A');
    const stale = await serverCopy();
    const networkId = stale.status?.networkID ?? assert.fail('status names the Neutron network');
    assert.deepEqual((await subnetsOf(networkId)).ours.map((s) => s.split(' ')[1]), [cidrA]);

    // The user changes the CIDR; the reconcile of the fresh copy makes the B subnet (and deletes A's).
    expectStatus(await cluster().request('PATCH', `${networksPath(ns)}/cidr`, { spec: { cidr: cidrB } }, mergePatch), 200, 'change the CIDR');
    cache.update(await serverCopy());
    assert.ok(typeof ((await reconcile()) as { requeueAfter?: unknown }).requeueAfter === 'number', 'converged at B');
    const atB = await subnetsOf(networkId);
    assert.deepEqual(atB.ours.map((s) => s.split(' ')[1]), [cidrB]);
    const events = await eventsOf(ns, 'cidr');

    // A lagging cache still holds the copy of A: reconciled from it, nothing is deleted or created in Neutron.
    cache.update(stale);
    const result = await reconcile();
    assert.deepEqual(await subnetsOf(networkId), atB, 'the B subnet kept (same id), no A subnet, no subnet more or less overall');
    assert.deepEqual(result, { requeue: true }, 'a quiet requeue');
    assert.deepEqual(await eventsOf(ns, 'cidr'), events, 'no Event more');
    assert.deepEqual((await serverCopy()).spec, { cidr: cidrB }, 'the spec on the server untouched');

    // The informer catches up: the fresh copy is converged, nothing more happens in Neutron.
    cache.update(await serverCopy());
    await reconcile();
    assert.deepEqual(await subnetsOf(networkId), atB);
  });
});
