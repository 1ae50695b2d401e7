/**
 * The Network controller reconciling samplecrd.k8s.io/v2 (dual-stack) Networks, on a private kube-apiserver with the
 * two-version CRD of config/crd/v2 (the shared cluster keeps config/crd/bases: v1 requests there need no webhook) and
 * a REAL neutron-server (hack/neutron/up.sh). Neutron's state is checked through the raw `neutronApi`.
 *
 * One Neutron network per Network with one subnet per spec subnet, all tagged `k8s-uid:<uid>`; status.subnets keyed by
 * the spec's CIDRs; drift repaired per family; a family removed from the spec loses its subnet, one added gets one;
 * InvalidSpec from the shared check with no Neutron call; deletion removes the network and its subnets, then the
 * finalizer.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { Network as NetworkV2 } from '../pkg/apis/samplecrd/v2/types.ts';
import { networkControllerSetup, uidTag } from '../pkg/controllers/network/index.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import { waitFor } from './helpers/cluster.ts';
import { neutronApi, startNeutron, type NeutronApi, type NeutronInstance } from './helpers/neutron.ts';

const repoRoot = join(import.meta.dirname, '..');
const NS = 'default';
const path = (name = ''): string => `/apis/samplecrd.k8s.io/v2/namespaces/${NS}/networks${name ? `/${name}` : ''}`;
const CONVERGE = { timeoutMs: 120_000, intervalMs: 250 };
type Json = Record<string, unknown>;

describe('Network controller, samplecrd.k8s.io/v2 on a real neutron-server', () => {
  let env: TestEnv;
  let neutron: NeutronInstance;
  let api: NeutronApi;
  let stopManager: (() => Promise<void>) | undefined;

  before(async () => {
    [env, neutron] = await Promise.all([
      startTestEnv({ crdPaths: [join(repoRoot, 'config', 'crd', 'v2')] }),
      startNeutron({ timeoutMs: 15 * 60_000 }),
    ]);
    api = neutronApi(neutron.endpoint);
    const mgr = new ControllerManager({
      kubeConfig: env.kubeConfig, namespaces: [NS], registry: new Registry(), logger: silentLogger, gracefulShutdownTimeoutMs: 10_000,
    });
    const controller = networkControllerSetup.setup(mgr, {
      concurrency: 1, neutron: { cloudConfig: neutron.cloudsYaml, cloud: 'local', networkVersion: 'v2', driftCheckMs: 2_000, createSettleMs: 2_000 },
    });
    assert.ok(controller, 'the network controller set up for v2');
    const ac = new AbortController();
    const exited = mgr.start(ac.signal);
    stopManager = async () => {
      ac.abort();
      assert.equal(await exited, 0, 'the manager stops cleanly');
    };
  });

  after(async () => {
    await stopManager?.();
    await Promise.all([env?.stop(), neutron?.stop()]);
  });

  const create = async (name: string, spec: NetworkV2['spec']): Promise<NetworkV2> => {
    const res = await env.client.request('POST', path(), { body: { apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { name }, spec } });
    const text = await res.text();
    assert.equal(res.status, 201, text);
    return JSON.parse(text) as NetworkV2;
  };
  const get = async (name: string): Promise<NetworkV2 | undefined> => {
    const res = await env.client.request('GET', path(name));
    const text = await res.text();
    return res.status === 404 ? undefined : (JSON.parse(text) as NetworkV2);
  };
  const ready = (n: NetworkV2 | undefined): Json | undefined => n?.status?.conditions?.find((c) => c.type === 'Ready') as Json | undefined;
  /** The Network once Ready=True for its current generation and `check` holds. */
  const waitReady = (name: string, check: (n: NetworkV2) => boolean = () => true): Promise<NetworkV2> => waitFor(`Network ${name} Ready`, async () => {
    const n = await get(name);
    const c = ready(n);
    return n && c?.['status'] === 'True' && c['observedGeneration'] === n.metadata?.generation && check(n) ? n : undefined;
  }, CONVERGE);
  const subnetsOf = async (networkID: string): Promise<Json[]> => api.subnets({ network_id: networkID });

  test('a dual-stack Network: one Neutron network, one tagged subnet per family, status.subnets by spec CIDR', async () => {
    const created = await create('dual', { subnets: [{ cidr: '10.20.0.0/24', gateway: '10.20.0.1' }, { cidr: '2001:db8:20::/64' }] });
    const n = await waitReady('dual', (x) => (x.status?.subnets?.length ?? 0) === 2);
    const tag = uidTag(created.metadata?.uid ?? '');
    const networks = await api.networks({ tags: tag });
    assert.equal(networks.length, 1, 'one Neutron network');
    assert.equal(networks[0]?.['id'], n.status?.networkID);
    const subnets = await subnetsOf(n.status?.networkID ?? '');
    assert.deepEqual(subnets.map((s) => [s['cidr'], s['ip_version'], (s['tags'] as string[]).includes(tag)]).sort(),
      [['10.20.0.0/24', 4, true], ['2001:db8:20::/64', 6, true]]);
    assert.equal(subnets.find((s) => s['ip_version'] === 4)?.['gateway_ip'], '10.20.0.1');
    assert.deepEqual(n.status?.subnets, [
      { cidr: '10.20.0.0/24', subnetID: subnets.find((s) => s['ip_version'] === 4)?.['id'] },
      { cidr: '2001:db8:20::/64', subnetID: subnets.find((s) => s['ip_version'] === 6)?.['id'] },
    ]);
    assert.match(String(ready(n)?.['message']), /^Neutron network \S+ with subnets \S+ \(10\.20\.0\.0\/24, gateway 10\.20\.0\.1\), \S+ \(2001:db8:20::\/64, gateway 2001:db8:20::\)$/); // Neutron 21's default IPv6 gateway: the first address
  });

  test('drift: the IPv6 subnet deleted in Neutron is re-created; the IPv4 one is left alone', async () => {
    const before6 = await waitReady('dual', (x) => (x.status?.subnets?.length ?? 0) === 2);
    const [s4, s6] = before6.status?.subnets ?? [];
    assert.ok(s4 && s6);
    assert.equal((await api.request('DELETE', `/v2.0/subnets/${s6.subnetID}`)).status, 204);
    const after6 = await waitReady('dual', (x) => x.status?.subnets?.[1]?.subnetID !== s6.subnetID && x.status?.subnets?.length === 2);
    assert.equal(after6.status?.subnets?.[0]?.subnetID, s4.subnetID, 'the IPv4 subnet kept its id');
    const subnets = await subnetsOf(after6.status?.networkID ?? '');
    assert.deepEqual(subnets.map((s) => s['id']).sort(), [s4.subnetID, after6.status?.subnets?.[1]?.subnetID].sort());
  });

  test('a family removed from the spec loses its subnet; added back (with a gateway) gets a new one', async () => {
    const n = await get('dual');
    const s4 = n?.status?.subnets?.[0]?.subnetID;
    let res = await env.client.request('PATCH', path('dual'), { body: { spec: { subnets: [{ cidr: '10.20.0.0/24', gateway: '10.20.0.1' }] } }, contentType: 'application/merge-patch+json' });
    assert.equal(res.status, 200, await res.text());
    const single = await waitReady('dual', (x) => x.status?.subnets?.length === 1);
    assert.deepEqual(single.status?.subnets, [{ cidr: '10.20.0.0/24', subnetID: s4 }]);
    assert.deepEqual((await subnetsOf(single.status?.networkID ?? '')).map((s) => s['id']), [s4]);

    res = await env.client.request('PATCH', path('dual'), {
      body: { spec: { subnets: [{ cidr: '2001:db8:21::/64', gateway: '2001:db8:21::fe' }, { cidr: '10.20.0.0/24', gateway: '10.20.0.1' }] } },
      contentType: 'application/merge-patch+json',
    });
    assert.equal(res.status, 200, await res.text());
    const dual = await waitReady('dual', (x) => x.status?.subnets?.length === 2);
    assert.equal(dual.status?.subnets?.[0]?.cidr, '2001:db8:21::/64', 'status follows the spec order');
    assert.equal(dual.status?.subnets?.[1]?.subnetID, s4);
    const v6 = await api.subnet(dual.status?.subnets?.[0]?.subnetID ?? '');
    assert.equal(v6?.['gateway_ip'], '2001:db8:21::fe');
  });

  test('a spec the shared check refuses (multicast): Ready=False InvalidSpec with its message, no Neutron network', async () => {
    const created = await create('bad', { subnets: [{ cidr: '10.30.0.0/24' }, { cidr: 'ff05::/64' }] });
    const n = await waitFor('Network bad InvalidSpec', async () => {
      const x = await get('bad');
      return ready(x)?.['reason'] === 'InvalidSpec' ? x : undefined;
    }, CONVERGE);
    assert.equal(ready(n)?.['status'], 'False');
    assert.equal(ready(n)?.['message'], 'spec.subnets[1].cidr ff05::/64 is a multicast range (ff00::/8); Neutron refuses such subnets with DHCP enabled');
    assert.deepEqual(await api.networks({ tags: uidTag(created.metadata?.uid ?? '') }), []);
  });

  test('deletion removes the Neutron network and its subnets, then the finalizer', async () => {
    const n = await get('dual');
    const networkID = n?.status?.networkID ?? '';
    assert.ok(networkID);
    assert.ok(n?.metadata?.finalizers?.includes('samplecrd.k8s.io/neutron'));
    for (const name of ['dual', 'bad']) assert.equal((await env.client.request('DELETE', path(name))).status, 200);
    await waitFor('both Networks gone', async () => (await get('dual')) === undefined && (await get('bad')) === undefined, CONVERGE);
    assert.equal(await api.network(networkID), undefined);
    assert.deepEqual(await api.subnets({ network_id: networkID }), []);
  });
});
