/**
 * Network controller against a REAL neutron-server configured like real clouds rather than the fast local default
 * (issue 12): a small page cap (NEUTRON_PAGE_LIMIT=2 → pagination_max_limit), NEUTRON_OVERLAPPING_IPS=false, and
 * faults on the wire injected by a proxy in front of it (test/helpers/neutron.ts NeutronProxy): a create that
 * Neutron commits only after the client timed out. Neutron's state is always checked through the raw `neutronApi`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test, type TestContext } from 'node:test';
import { neutronDescription } from '../pkg/controllers/network/index.ts';
import { waitFor } from './helpers/cluster.ts';
import type { RunningControllers } from './helpers/manager.ts';
import { CONVERGE, createNetwork, getNetwork, NetworkTestBed, patchSpec, readyOf, waitReady } from './helpers/network.ts';
import type { NeutronApi, NeutronProxy } from './helpers/neutron.ts';

const NEUTRON_START_TIMEOUT = 15 * 60_000;
type Json = Record<string, unknown>;

describe('Network controller on a neutron-server with real-cloud settings (page cap 2, no overlapping IPs)', () => {
  let bed: NetworkTestBed;
  let api: NeutronApi;
  let proxy: NeutronProxy;

  before(async () => {
    bed = await NetworkTestBed.start({ pageLimit: 2, overlappingIps: false, proxy: true, timeoutMs: NEUTRON_START_TIMEOUT });
    api = bed.api;
    proxy = bed.proxy ?? assert.fail('no proxy');
  }, { timeout: NEUTRON_START_TIMEOUT });

  after(() => bed?.stop());

  const namespace = (t: TestContext, prefix: string): Promise<string> => bed.namespace(t, prefix);
  const start = (t: TestContext, ns: string): Promise<RunningControllers> => bed.startController(t, ns);

  test('the server really caps pages: a list of 5 comes in pages of 2 with next links', async () => {
    const res = await api.request<{ networks: Json[]; networks_links?: { rel: string }[] }>('GET', '/v2.0/networks?limit=500');
    assert.equal(res.status, 200);
    assert.ok(res.body.networks.length <= 2, `at most 2 per page, got ${res.body.networks.length}`);
  });

  test('late commit: Neutron commits a network create 13 s after the POST (client timeout 10 s): exactly one network, one POST', async (t) => {
    const ns = await namespace(t, 'net-late');
    const name = `${ns}/late`;
    let delayed = false;
    proxy.delay = (r) => {
      if (delayed || r.method !== 'POST' || r.path !== '/v2.0/networks' || !r.body.includes(`"${name}"`)) return 0;
      delayed = true;
      return 13_000;
    };
    t.after(() => {
      proxy.delay = undefined;
    });
    await start(t, ns);
    const uid = (await createNetwork(ns, 'late', { cidr: '10.70.0.0/24' })).metadata?.uid ?? '';
    const ready = await waitReady(ns, 'late', 1);
    await waitFor('the delayed create reached Neutron', () => proxy.delayed.at(-1)?.status, CONVERGE);
    assert.equal(proxy.delayed.at(-1)?.status, 201, 'Neutron committed the delayed create');
    const named = await api.networks({ name });
    assert.deepEqual(named.map((n) => n['id']), [ready.status?.networkID], 'exactly one network: the late one, adopted');
    assert.deepEqual(named[0]?.['tags'], [`k8s-uid:${uid}`]);
    assert.equal(proxy.count('POST', '/v2.0/networks', `"${name}"`), 1, 'no second create while the first one\'s outcome was unknown');
  });

  test('pagination: three untagged leftovers of one Network (more than a page) are all found: one adopted, two deleted', async (t) => {
    const ns = await namespace(t, 'net-pages');
    const uid = (await createNetwork(ns, 'p', { cidr: '10.71.0.0/24' })).metadata?.uid ?? '';
    const leftovers: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await api.request<{ network: Json }>('POST', '/v2.0/networks', { network: { name: `${ns}/p`, description: neutronDescription(uid) } });
      assert.equal(r.status, 201);
      leftovers.push(String(r.body.network['id']));
    }
    await start(t, ns);
    const ready = await waitReady(ns, 'p', 1);
    assert.ok(leftovers.includes(ready.status?.networkID ?? ''), 'one of the leftovers was adopted');
    const named = await api.networks({ name: `${ns}/p` });
    assert.equal(named.length, 1, `exactly one network left (all pages): ${JSON.stringify(named.map((n) => n['id']))}`);
    assert.equal(proxy.count('POST', '/v2.0/networks', `"${ns}/p"`), 0, 'nothing created');
  });

  test('a foreign subnet with a port on our network: never deleted, the gateway still applied; an overlap with it is retried, not terminal', async (t) => {
    const ns = await namespace(t, 'net-foreign');
    const m = await start(t, ns);
    await createNetwork(ns, 'f', { cidr: '10.72.0.0/24', gateway: '10.72.0.1' });
    const first = await waitReady(ns, 'f', 1);
    const networkID = first.status?.networkID ?? '';
    const foreign = await api.request<{ subnet: Json }>('POST', '/v2.0/subnets', { subnet: { network_id: networkID, cidr: '10.72.1.0/24', ip_version: 4, name: 'someone-elses' } });
    assert.equal(foreign.status, 201, JSON.stringify(foreign.body));
    const foreignID = String(foreign.body.subnet['id']);
    const port = await api.request<{ port: Json }>('POST', '/v2.0/ports', { port: { network_id: networkID, fixed_ips: [{ subnet_id: foreignID }] } });
    assert.equal(port.status, 201, JSON.stringify(port.body));

    await patchSpec(ns, 'f', { gateway: '10.72.0.254' });
    await waitReady(ns, 'f', 2);
    assert.equal((await api.subnet(first.status?.subnetID ?? ''))?.['gateway_ip'], '10.72.0.254');
    assert.ok(await api.subnet(foreignID), 'the foreign subnet is still there');
    assert.equal(proxy.count('DELETE', `/v2.0/subnets/${foreignID}`), 0, 'never even tried');

    // 10.72.0.0/23 overlaps the foreign 10.72.1.0/24 (and our 10.72.0.0/24, which must go first): Neutron refuses it (400 "overlaps with another subnet").
    await patchSpec(ns, 'f', { cidr: '10.72.0.0/23', gateway: '10.72.1.254' });
    const conflict = await waitFor('Ready=False NeutronConflict (overlap)', async () => {
      const n = await getNetwork(ns, 'f');
      const c = readyOf(n);
      return c?.status === 'False' && c.observedGeneration === 3 ? n : undefined;
    }, CONVERGE);
    assert.equal(readyOf(conflict)?.reason, 'NeutronConflict', readyOf(conflict)?.message);
    assert.match(readyOf(conflict)?.message ?? '', /overlaps with another subnet/);
    const ours = (await api.subnets({ network_id: networkID })).filter((s) => s['id'] !== foreignID);
    assert.deepEqual(ours.map((s) => [s['cidr'], s['gateway_ip']]), [['10.72.0.0/24', '10.72.0.254']], 'the previous subnet is working (restored)');
    assert.equal(await m.metric('controller_runtime_terminal_reconcile_errors_total', { controller: 'network' }), 0, 'not terminal');

    // The other subnet goes away: the retry (every 30 s) converges.
    assert.equal((await api.request('DELETE', `/v2.0/ports/${String(port.body.port['id'])}`)).status, 204);
    assert.equal((await api.request('DELETE', `/v2.0/subnets/${foreignID}`)).status, 204);
    const fixed = await waitReady(ns, 'f', 3);
    const now = await api.subnets({ network_id: networkID });
    assert.deepEqual(now.map((s) => [s['cidr'], s['gateway_ip']]), [['10.72.0.0/23', '10.72.1.254']]);
    assert.equal(fixed.status?.subnetID, now[0]?.['id']);
  });
});
