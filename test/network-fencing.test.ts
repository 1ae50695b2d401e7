/**
 * Network controller, issue 23 (docs/safety.md "Fencing"), on the real control plane and a REAL neutron-server behind
 * the test's NeutronProxy (test/helpers/neutron.ts): subnet updates fenced by `If-Match: revision_number` and limited
 * to what the controller owns, the status naming the subnet that exists, a deletion refused by Neutron's auth made
 * visible, a duplicate network whose create commits after every settle window swept by the drift check, and no
 * Neutron request once the reconcile's signal is aborted. Neutron's state is always checked through the raw
 * `neutronApi`; the proxy only injects faults and counts (its `gate` holds one request until the test has acted).
 */
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, test, type TestContext } from 'node:test';
import { waitFor } from './helpers/cluster.ts';
import { CONVERGE, createNetwork, deleteNetwork, eventsFor, getNetwork, NetworkTestBed, patchSpec, readyOf, waitReady } from './helpers/network.ts';
import type { NeutronApi, NeutronProxy, SeenRequest } from './helpers/neutron.ts';

const NEUTRON_START_TIMEOUT = 15 * 60_000;
const FINALIZER = 'samplecrd.k8s.io/neutron';
type Json = Record<string, unknown>;

describe('Network controller on a real neutron-server: fencing and the issue-23 fixes', () => {
  let bed: NetworkTestBed;
  let api: NeutronApi;
  let proxy: NeutronProxy;

  before(async () => {
    bed = await NetworkTestBed.start({ proxy: true, timeoutMs: NEUTRON_START_TIMEOUT });
    api = bed.api;
    proxy = bed.proxy ?? assert.fail('no proxy');
  }, { timeout: NEUTRON_START_TIMEOUT });

  after(() => bed?.stop());

  const namespace = (t: TestContext, prefix: string): Promise<string> => bed.namespace(t, prefix);
  const resetProxy = (t: TestContext): void => {
    t.after(() => {
      proxy.gate = undefined;
      proxy.delay = undefined;
      proxy.refuse = undefined;
    });
  };
  const pools = async (id: string): Promise<unknown> => (await api.subnet(id))?.['allocation_pools'];

  test('a gateway change keeps a narrowed allocation pool; a gateway inside it splits only that pool', async (t) => {
    const ns = await namespace(t, 'fence-pools');
    await bed.startController(t, ns);
    await createNetwork(ns, 'p', { cidr: '10.80.0.0/24', gateway: '10.80.0.1' });
    const subnetID = (await waitReady(ns, 'p', 1)).status?.subnetID ?? '';
    const narrowed = await api.request('PUT', `/v2.0/subnets/${subnetID}`, { subnet: { allocation_pools: [{ start: '10.80.0.100', end: '10.80.0.200' }] } });
    assert.equal(narrowed.status, 200, `an operator narrows the pool: ${JSON.stringify(narrowed.body)}`);

    await patchSpec(ns, 'p', { gateway: '10.80.0.254' });
    await waitReady(ns, 'p', 2);
    assert.equal((await api.subnet(subnetID))?.['gateway_ip'], '10.80.0.254');
    assert.deepEqual(await pools(subnetID), [{ start: '10.80.0.100', end: '10.80.0.200' }], 'the narrowed pool survives');

    await patchSpec(ns, 'p', { gateway: '10.80.0.150' });
    await waitReady(ns, 'p', 3);
    assert.equal((await api.subnet(subnetID))?.['gateway_ip'], '10.80.0.150');
    assert.deepEqual(await pools(subnetID), [{ start: '10.80.0.100', end: '10.80.0.149' }, { start: '10.80.0.151', end: '10.80.0.200' }], 'only that pool, split around the gateway');
  });

  test('a subnet changed between the controller\'s read and its update: If-Match answers 412, the retry re-reads quietly, the other change is kept', async (t) => {
    const ns = await namespace(t, 'fence-412');
    resetProxy(t);
    const m = await bed.startController(t, ns);
    await createNetwork(ns, 'r', { cidr: '10.81.0.0/24', gateway: '10.81.0.1' });
    const subnetID = (await waitReady(ns, 'r', 1)).status?.subnetID ?? '';
    const updatePath = `/v2.0/subnets/${subnetID}`;
    let raced = false;
    // The controller's first update waits here while someone else narrows the pool (revision_number moves on).
    proxy.gate = (r) => {
      if (raced || r.method !== 'PUT' || r.path !== updatePath) return undefined;
      raced = true;
      return api.request('PUT', updatePath, { subnet: { allocation_pools: [{ start: '10.81.0.10', end: '10.81.0.20' }] } })
        .then((res) => assert.equal(res.status, 200, JSON.stringify(res.body)));
    };
    const since = Date.now();
    await patchSpec(ns, 'r', { gateway: '10.81.0.254' });
    await waitReady(ns, 'r', 2);
    assert.ok(raced, 'the race was played');
    const s = await api.subnet(subnetID);
    assert.equal(s?.['gateway_ip'], '10.81.0.254');
    assert.deepEqual(s?.['allocation_pools'], [{ start: '10.81.0.10', end: '10.81.0.20' }], 'the concurrent change is not overwritten');
    assert.equal(proxy.count('PUT', updatePath, 'gateway_ip', since), 2, 'the stale update (412) and the one after re-reading');
    await m.flushEvents();
    assert.deepEqual((await eventsFor(ns, 'r')).filter((e) => e.type === 'Warning').map((e) => e.reason), [], 'quiet: no Warning');
    assert.equal(await m.metric('controller_runtime_reconcile_errors_total', { controller: 'network' }), 0, 'quiet: no reconcile error');
  });

  test('a disjoint CIDR change Neutron refuses: the old subnet stays and status.subnetID keeps naming it', async (t) => {
    const ns = await namespace(t, 'fence-keep');
    await bed.startController(t, ns);
    await createNetwork(ns, 'k', { cidr: '10.82.0.0/24' });
    const first = await waitReady(ns, 'k', 1);
    const [networkID, subnetID] = [first.status?.networkID ?? '', first.status?.subnetID ?? ''];
    // Someone else's subnet on our network overlaps the new CIDR: Neutron refuses it (400 "overlaps with another subnet").
    const foreign = await api.request<{ subnet: Json }>('POST', '/v2.0/subnets', { subnet: { network_id: networkID, cidr: '10.83.0.0/25', ip_version: 4, name: 'someone-elses' } });
    assert.equal(foreign.status, 201, JSON.stringify(foreign.body));

    await patchSpec(ns, 'k', { cidr: '10.83.0.0/24' }); // disjoint from 10.82.0.0/24: the new one would be created first
    const refused = await waitFor('Ready=False at generation 2', async () => {
      const n = await getNetwork(ns, 'k');
      const c = readyOf(n);
      return c?.status === 'False' && c.observedGeneration === 2 ? n : undefined;
    }, CONVERGE);
    assert.match(readyOf(refused)?.message ?? '', /overlaps with another subnet/);
    assert.ok(await api.subnet(subnetID), 'the old subnet still exists');
    assert.equal(refused.status?.subnetID, subnetID, 'and status names it');
    assert.equal(refused.status?.networkID, networkID);
  });

  test('a deletion Neutron refuses (auth): Ready=False DeleteFailed and a Warning; the finalizer stays; it completes once auth works', async (t) => {
    const ns = await namespace(t, 'fence-auth');
    resetProxy(t);
    const m = await bed.startController(t, ns);
    await createNetwork(ns, 'a', { cidr: '10.84.0.0/24' });
    const networkID = (await waitReady(ns, 'a', 1)).status?.networkID ?? '';
    proxy.refuse = (r) => (r.method === 'DELETE' && r.path === `/v2.0/networks/${networkID}` ? 401 : undefined);

    await deleteNetwork(ns, 'a');
    const blocked = await waitFor('Ready=False DeleteFailed', async () => {
      const n = await getNetwork(ns, 'a');
      return readyOf(n)?.reason === 'DeleteFailed' ? n : undefined;
    }, { timeoutMs: 60_000, intervalMs: 250 });
    assert.equal(readyOf(blocked)?.status, 'False');
    assert.match(readyOf(blocked)?.message ?? '', new RegExp(`^Cannot delete Neutron network ${networkID}: Neutron authentication failed \\(HTTP 401`));
    assert.deepEqual(blocked.metadata?.finalizers, [FINALIZER], 'the finalizer stays');
    assert.ok(await api.network(networkID), 'the Neutron network is still there');
    await m.flushEvents();
    const warnings = (await eventsFor(ns, 'a')).filter((e) => e.type === 'Warning');
    assert.deepEqual(warnings.map((e) => e.reason), ['DeleteFailed']);
    assert.match(warnings[0]?.message ?? '', /authentication failed/);

    proxy.refuse = undefined;
    await waitFor('Network gone once Neutron accepts the delete', async () => (await getNetwork(ns, 'a')) === undefined, CONVERGE);
    assert.equal(await api.network(networkID), undefined);
  });

  test('a network whose create commits after every settle window (30 s after the POST) is deleted by the drift check', async (t) => {
    const ns = await namespace(t, 'fence-late');
    resetProxy(t);
    const name = `${ns}/late`;
    let delayed = false;
    proxy.delay = (r) => {
      if (delayed || r.method !== 'POST' || r.path !== '/v2.0/networks' || !r.body.includes(`"${name}"`)) return 0;
      delayed = true;
      return 30_000; // the client gives up after 10 s; settle 2 s; the sweep 2 s after the next create has run long before
    };
    await bed.startController(t, ns, { createSettleMs: 2_000, driftCheckMs: 5_000 });
    await createNetwork(ns, 'late', { cidr: '10.85.0.0/24' });
    const ready = await waitReady(ns, 'late', 1);
    assert.equal(proxy.count('POST', '/v2.0/networks', `"${name}"`), 2, 'the first POST timed out; a second one was made after the settle window');
    await waitFor('the delayed create reached Neutron', () => proxy.delayed.at(-1)?.status, CONVERGE);
    assert.equal(proxy.delayed.at(-1)?.status, 201, 'Neutron committed the late create: a duplicate now exists');
    await waitFor('the duplicate deleted by a drift check', async () => {
      const named = await api.networks({ name });
      return named.length === 1 && named[0]?.['id'] === ready.status?.networkID;
    }, { timeoutMs: 60_000, intervalMs: 250 });
    assert.equal((await getNetwork(ns, 'late'))?.status?.networkID, ready.status?.networkID, 'the recorded network is the one kept');
  });

  test('once the reconcile\'s signal is aborted (stop), restoring a subnet after a refused CIDR change sends nothing more to Neutron', async (t) => {
    const ns = await namespace(t, 'fence-abort');
    resetProxy(t);
    const m = await bed.startController(t, ns);
    await createNetwork(ns, 's', { cidr: '10.86.0.0/24' });
    const networkID = (await waitReady(ns, 's', 1)).status?.networkID ?? '';
    // Someone else's subnet overlapping the new CIDR: the old subnet is deleted first (it overlaps too), Neutron refuses
    // the new one, and the controller restores the old one — whose POST waits at the proxy while the controller stops.
    const foreign = await api.request<{ subnet: Json }>('POST', '/v2.0/subnets', { subnet: { network_id: networkID, cidr: '10.86.1.0/24', ip_version: 4, name: 'someone-elses' } });
    assert.equal(foreign.status, 201, JSON.stringify(foreign.body));
    let abortedAt = 0;
    let gated: SeenRequest | undefined;
    let stopped: Promise<unknown> | undefined;
    proxy.gate = (r) => {
      if (gated || r.method !== 'POST' || r.path !== '/v2.0/subnets' || !r.body.includes('"10.86.0.0/24"')) return undefined;
      gated = r;
      // The restore POST is on the wire; now the controller stops (m.stop aborts the manager's signal at once, and with
      // it every reconcile's signal), and Neutron's answer arrives 1 s later (fault injection: an answer that is slow).
      stopped = m.stop().then(() => undefined, (err: unknown) => err);
      abortedAt = Date.now();
      return delay(1_000);
    };
    await patchSpec(ns, 's', { cidr: '10.86.0.0/23' });
    await waitFor('the controller stopped during the restore', () => abortedAt > 0, CONVERGE);
    assert.equal(await stopped, undefined, 'a clean stop');
    // The restore POST (sent before the stop) was forwarded and commits; nothing may follow it.
    await waitFor('the restore POST committed', async () => (await api.subnets({ network_id: networkID })).some((s) => s['cidr'] === '10.86.0.0/24'), CONVERGE);
    await delay(3_000); // an observation window: a restore that ignored the abort tags the subnet right after its POST's answer
    const afterAbort = proxy.seen.filter((r) => r !== gated && r.at >= abortedAt);
    assert.deepEqual(afterAbort.map((r) => `${r.method} ${r.path}`), [], 'no Neutron request after the stop began');
  });
});
