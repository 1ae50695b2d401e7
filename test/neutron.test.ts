/**
 * pkg/neutron against a REAL neutron-server (Debian's, started by hack/neutron/up.sh through test/helpers/neutron.ts
 * in a private state dir). Every effect is checked with the raw-HTTP `neutronApi`, independently of the client.
 * The first run on a machine installs neutron-server from Debian (minutes); later runs start it in seconds.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import {
  isRetryable, NeutronAuthError, NeutronBadRequestError, NeutronClient, NeutronConflictError, NeutronError,
  NeutronNotFoundError,
} from '../pkg/neutron/index.ts';
import { neutronApi, neutronProcesses, startNeutron, type NeutronApi, type NeutronInstance } from './helpers/neutron.ts';

const START_TIMEOUT = 15 * 60_000;
const rnd = (): string => randomBytes(4).toString('hex');

describe('Neutron client against a real neutron-server (noauth)', () => {
  let neutron: NeutronInstance | undefined;
  let client: NeutronClient;
  let api: NeutronApi;

  before(async () => {
    neutron = await startNeutron();
    client = NeutronClient.fromCloudsYaml({ path: neutron.cloudsYaml, cloud: 'local', env: {} });
    api = neutronApi(neutron.endpoint);
  }, { timeout: START_TIMEOUT });
  after(async () => {
    await neutron?.stop();
  });

  it('reads the clouds.yaml that up.sh wrote', async () => {
    assert.equal(await client.endpoint(), neutron?.endpoint);
    assert.equal((await api.request('GET', '/')).status, 200);
  });

  it('creates a network with a tag and finds it by tag', async () => {
    const tag = `tscm-test-${rnd()}`;
    const name = `net-${rnd()}`;
    const created = await client.createNetwork({ name, tags: [tag] });
    await client.createNetwork({ name }); // same name, no tag: names are not identities
    assert.equal(created.name, name);
    assert.deepEqual(created.tags, [tag]);

    const seen = await api.network(created.id);
    assert.deepEqual(seen?.['tags'], [tag], 'the tag is really stored');
    assert.deepEqual((await api.networks({ tags: tag })).map((n) => n['id']), [created.id]);

    const found = await client.listNetworks({ tags: [tag] });
    assert.deepEqual(found.map((n) => n.id), [created.id]);
    assert.equal((await client.listNetworks({ name })).length, 2);
    assert.deepEqual(await client.listNetworks({ tags: [tag, `absent-${rnd()}`] }), [], 'tags= means all of them');
    assert.deepEqual((await client.listNetworks({ tagsAny: [tag, `absent-${rnd()}`] })).map((n) => n.id), [created.id]);
  });

  it('adds tags to an existing network and pages through a tag query', async () => {
    const tag = `tscm-page-${rnd()}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const n = await client.createNetwork({ name: `page-${i}` });
      await client.addNetworkTag(n.id, tag);
      await client.addNetworkTag(n.id, tag); // idempotent
      ids.push(n.id);
    }
    assert.equal((await api.networks({ tags: tag })).length, 5);
    const listed = await client.listNetworks({ tags: [tag] }, { pageSize: 2 });
    assert.deepEqual(listed.map((n) => n.id).sort(), [...ids].sort());
    assert.equal(new Set(listed.map((n) => n.id)).size, 5, 'no duplicates across pages');
    assert.deepEqual(await client.getTags('networks', ids[0] ?? ''), [tag]);
    await client.removeTag('networks', ids[0] ?? '', tag);
    assert.deepEqual((await api.network(ids[0] ?? ''))?.['tags'], []);
  });

  it('updates a network (revision_number increases; a stale If-Match revision is refused)', async () => {
    const n = await client.createNetwork({ name: `upd-${rnd()}` });
    const updated = await client.updateNetwork(n.id, { name: 'renamed', description: 'd' }, { ifRevision: n.revision_number });
    assert.equal(updated.name, 'renamed');
    assert.ok(updated.revision_number > n.revision_number);
    assert.equal((await api.network(n.id))?.['name'], 'renamed');
    await assert.rejects(client.updateNetwork(n.id, { name: 'again' }, { ifRevision: n.revision_number }), (e: Error) =>
      e instanceof NeutronError && e.status === 412 && e.type === 'RevisionNumberConstraintFailed' && !isRetryable(e));
    assert.equal((await api.network(n.id))?.['name'], 'renamed');
  });

  it('creates a subnet with cidr and gateway, lists it by network, and updates the gateway', async () => {
    const n = await client.createNetwork({ name: `sub-${rnd()}` });
    const s = await client.createSubnet({ network_id: n.id, cidr: '10.20.0.0/24', gateway_ip: '10.20.0.1', name: 'a' });
    assert.equal(s.cidr, '10.20.0.0/24');
    assert.equal(s.gateway_ip, '10.20.0.1');
    assert.equal(s.ip_version, 4);
    assert.deepEqual(s.allocation_pools, [{ start: '10.20.0.2', end: '10.20.0.254' }]);
    const seen = await api.subnet(s.id);
    assert.equal(seen?.['cidr'], '10.20.0.0/24');
    assert.equal(seen?.['gateway_ip'], '10.20.0.1');
    assert.equal(seen?.['network_id'], n.id);
    assert.deepEqual((await api.network(n.id))?.['subnets'], [s.id]);

    assert.deepEqual((await client.listSubnets({ networkId: n.id })).map((x) => x.id), [s.id]);

    // The pool starts at .2; a gateway outside it (but inside the cidr) is accepted once the pool leaves room.
    const moved = await client.updateSubnet(s.id, { allocation_pools: [{ start: '10.20.0.10', end: '10.20.0.250' }], gateway_ip: '10.20.0.254' });
    assert.equal(moved.gateway_ip, '10.20.0.254');
    assert.equal((await api.subnet(s.id))?.['gateway_ip'], '10.20.0.254');
    assert.equal((await client.getSubnet(s.id)).gateway_ip, '10.20.0.254');

    await assert.rejects(client.updateSubnet(s.id, { gateway_ip: '10.20.0.100' }), (e: Error) =>
      e instanceof NeutronConflictError && e.type === 'GatewayConflictWithAllocationPools' && !isRetryable(e));
    assert.equal((await api.subnet(s.id))?.['gateway_ip'], '10.20.0.254');

    const none = await client.updateSubnet(s.id, { gateway_ip: null });
    assert.equal(none.gateway_ip, null);
  });

  it('a bad CIDR is a NeutronBadRequestError (InvalidInput) and creates nothing', async () => {
    const n = await client.createNetwork({ name: `bad-${rnd()}` });
    for (const cidr of ['10.0.0.0/33', 'not-a-cidr', '300.1.2.0/24']) {
      await assert.rejects(client.createSubnet({ network_id: n.id, cidr }), (e: Error) =>
        e instanceof NeutronBadRequestError && e.status === 400 && e.type === 'InvalidInput' && !isRetryable(e), cidr);
    }
    assert.deepEqual(await api.subnets({ network_id: n.id }), []);
    // Overlapping subnets on one network are refused too.
    await client.createSubnet({ network_id: n.id, cidr: '10.30.0.0/24' });
    await assert.rejects(client.createSubnet({ network_id: n.id, cidr: '10.30.0.0/25' }), NeutronBadRequestError);
    assert.equal((await api.subnets({ network_id: n.id })).length, 1);
  });

  it('an unknown id is a NeutronNotFoundError', async () => {
    const unknown = '8b2a0f32-6c07-4c1b-9f5c-4c7c1f4f0000';
    for (const [what, call] of [
      ['getNetwork', () => client.getNetwork(unknown)],
      ['getNetwork(non-uuid)', () => client.getNetwork('no-such-network')],
      ['updateNetwork', () => client.updateNetwork(unknown, { name: 'x' })],
      ['deleteNetwork', () => client.deleteNetwork(unknown)],
      ['getSubnet', () => client.getSubnet(unknown)],
      ['deleteSubnet', () => client.deleteSubnet(unknown)],
      ['createSubnet on unknown network', () => client.createSubnet({ network_id: unknown, cidr: '10.40.0.0/24' })],
    ] as const) {
      await assert.rejects(call(), (e: Error) => e instanceof NeutronNotFoundError && e.status === 404 && !isRetryable(e), what);
    }
    await assert.rejects(client.getNetwork(unknown), (e: Error) => e instanceof NeutronNotFoundError && e.type === 'NetworkNotFound');
    await assert.rejects(client.getSubnet(unknown), (e: Error) => e instanceof NeutronNotFoundError && e.type === 'SubnetNotFound');
  });

  it('deleting a network with subnets deletes the subnets', async () => {
    const n = await client.createNetwork({ name: `del-${rnd()}` });
    const s1 = await client.createSubnet({ network_id: n.id, cidr: '10.50.0.0/24' });
    const s2 = await client.createSubnet({ network_id: n.id, cidr: '10.51.0.0/24' });
    await client.deleteNetwork(n.id);
    assert.equal(await api.network(n.id), undefined);
    assert.equal(await api.subnet(s1.id), undefined);
    assert.equal(await api.subnet(s2.id), undefined);
    assert.deepEqual(await api.subnets({ network_id: n.id }), []);
    await assert.rejects(client.deleteNetwork(n.id), NeutronNotFoundError);
  });

  it('deleting a network that still has ports is a NeutronConflictError (NetworkInUse)', async () => {
    const n = await client.createNetwork({ name: `inuse-${rnd()}` });
    await client.createSubnet({ network_id: n.id, cidr: '10.60.0.0/24' });
    const port = await api.request<{ port: { id: string } }>('POST', '/v2.0/ports', { port: { network_id: n.id } });
    assert.equal(port.status, 201);
    await assert.rejects(client.deleteNetwork(n.id), (e: Error) =>
      e instanceof NeutronConflictError && e.status === 409 && e.type === 'NetworkInUse' && !isRetryable(e));
    assert.ok(await api.network(n.id), 'still there');
    assert.equal((await api.request('DELETE', `/v2.0/ports/${port.body.port.id}`)).status, 204);
    await client.deleteNetwork(n.id);
    assert.equal(await api.network(n.id), undefined);
  });

  it('hack/neutron/down.sh stops the server and its workers and removes the state dir', async () => {
    assert.ok(neutron);
    const dir = neutron.dir;
    const pids = neutronProcesses(dir);
    assert.ok(pids.length >= 2, `expected the server and its forked workers, got ${pids.join(',')}`);
    await neutron.stop();
    assert.deepEqual(neutronProcesses(dir), [], 'no neutron process of this dir remains');
    for (const pid of pids) assert.equal(existsSync(`/proc/${pid}/cmdline`) && neutronProcesses(dir).includes(pid), false);
    assert.equal(existsSync(dir), false, 'state dir removed');
    await assert.rejects(api.request('GET', '/'), 'the port no longer answers');
  });
});

describe('per-project isolation (NEUTRON_AUTH=keystonecontext)', () => {
  let neutron: NeutronInstance | undefined;

  before(async () => {
    neutron = await startNeutron({ auth: 'keystonecontext' });
  }, { timeout: START_TIMEOUT });
  after(async () => {
    await neutron?.stop();
  });

  const as = (project: string): NeutronClient => NeutronClient.fromCloudsYaml({ path: neutron?.cloudsYaml, cloud: 'local', env: {} }, {
    headers: { 'X-User-Id': `user-${project}`, 'X-Project-Id': project, 'X-Roles': 'member' },
  });

  it('each project sees only its own networks; no identity is a NeutronAuthError', async () => {
    assert.ok(neutron);
    const a = as('project-a');
    const b = as('project-b');
    const na = await a.createNetwork({ name: 'mine', tags: ['iso'] });
    assert.equal(na.project_id, 'project-a');
    assert.deepEqual((await a.listNetworks({ tags: ['iso'] })).map((n) => n.id), [na.id]);
    assert.deepEqual(await b.listNetworks({ tags: ['iso'] }), []);
    await assert.rejects(b.getNetwork(na.id), NeutronNotFoundError);

    const anonymous = NeutronClient.fromCloudsYaml({ path: neutron.cloudsYaml, cloud: 'local', env: {} });
    await assert.rejects(anonymous.listNetworks(), (e: Error) => e instanceof NeutronAuthError && e.status === 401);

    const raw = await neutronApi(neutron.endpoint, { 'X-User-Id': 'u', 'X-Project-Id': 'project-a', 'X-Roles': 'member' }).networks({ tags: 'iso' });
    assert.deepEqual(raw.map((n) => n['id']), [na.id]);
  });
});

describe('pagination on a server that caps pages (NEUTRON_PAGE_LIMIT=2 → pagination_max_limit)', () => {
  let neutron: NeutronInstance | undefined;

  before(async () => {
    neutron = await startNeutron({ pageLimit: 2 });
  }, { timeout: START_TIMEOUT });
  after(async () => {
    await neutron?.stop();
  });

  it('lists every match although the server answers 2 per page to a limit of 500', async () => {
    assert.ok(neutron);
    const client = NeutronClient.fromCloudsYaml({ path: neutron.cloudsYaml, cloud: 'local', env: {} });
    const tag = `paged-${rnd()}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await client.createNetwork({ name: `p${i}`, tags: [tag] })).id);
    const page = await neutronApi(neutron.endpoint).request<{ networks: unknown[] }>('GET', `/v2.0/networks?tags=${tag}&limit=500`);
    assert.equal(page.body.networks.length, 2, 'the server really caps the page');
    const got = await client.listNetworks({ tags: [tag] });
    assert.deepEqual(got.map((n) => n.id).sort(), [...ids].sort());
  });
});
