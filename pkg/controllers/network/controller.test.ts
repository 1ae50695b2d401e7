import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import type { Network } from '../../apis/samplecrd/v1/types.ts';
import { v2SubnetsAnnotation, type Network as NetworkV2, type NetworkSpecSubnet } from '../../apis/samplecrd/v2/types.ts';
import { ApiError, type RequestOptions, type Verb } from '../../client/rest.ts';
import { isTerminalError } from '../../controller/index.ts';
import { FakeRecorder } from '../../events/fake.ts';
import { Indexer } from '../../informerfactory/indexer.ts';
import { Lister } from '../../informerfactory/lister.ts';
import { silentLogger } from '../../log/logger.ts';
import { errorForStatus, type Network as NNetwork } from '../../neutron/index.ts';
import { NeutronDouble } from '../../../test/explore/neutron-double.ts';
import { BypassedFinalizers } from '../../runtime/bypassedfinalizer.ts';
import type { AnyNetwork } from './desired.ts';
import { DEFAULT_DRIFT_CHECK_MS, networkReconciler } from './controller.ts';
import { computeStatus, FINALIZER, neutronDescription, uidTag } from './desired.ts';

// ---- fakes ---------------------------------------------------------------------------------------------------------

interface Call { method: Verb; path: string; body: unknown }

/**
 * The API server's writes to one Network: a finalizer patch answers the cached object with the new finalizers and
 * the next resourceVersion (as the server does); other writes answer {}. A GET answers the cached object, or 404.
 * `fail` makes a call fail instead.
 */
class FakeRest {
  readonly calls: Call[] = [];
  fail: ((c: Call) => Error | undefined) | undefined;
  /** What a GET answers when the server's copy differs from the cache's (default: the cached one, or 404). */
  onServer: Network | undefined;
  json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const call = { method, path, body: opts.body };
    this.calls.push(call);
    const err = this.fail?.(call);
    if (err) return Promise.reject(err);
    const cur = cache.getByKey('ns/net');
    if (method === 'GET' && path === objPath) {
      const answer = this.onServer ?? cur;
      return answer ? Promise.resolve(structuredClone(answer) as T) : Promise.reject(new ApiError(404, 'NotFound', 'networks "net" not found', {}));
    }
    if (method === 'PATCH' && path === objPath && cur) {
      const { finalizers } = (opts.body as { metadata: { finalizers: string[] } }).metadata;
      return Promise.resolve({ ...cur, metadata: { ...cur.metadata, finalizers, resourceVersion: String(Number(cur.metadata?.resourceVersion ?? 0) + 1) } } as T);
    }
    return Promise.resolve({} as T);
  }
}

// ---- fixtures ------------------------------------------------------------------------------------------------------

const signal = new AbortController().signal;
const ctx = { log: silentLogger, reconcileID: 'r', key: 'ns/net' };
const req = { namespace: 'ns', name: 'net' };
const UID = 'uid-1';
const TAG = uidTag(UID);
const statusPath = '/apis/samplecrd.k8s.io/v1/namespaces/ns/networks/net/status';
const objPath = '/apis/samplecrd.k8s.io/v1/namespaces/ns/networks/net';
const now = new Date('2024-05-01T10:00:00Z');

function aNetwork(spec: Network['spec'], meta: Network['metadata'] = {}, status?: Network['status']): Network {
  return {
    metadata: { name: 'net', namespace: 'ns', uid: UID, generation: 1, resourceVersion: '5', finalizers: [FINALIZER], ...meta },
    spec, ...(status && { status }),
  };
}

let cache: Indexer<Network>;
let rest: FakeRest;
let neutron: NeutronDouble;
let recorder: FakeRecorder;
let reconcile: ReturnType<typeof networkReconciler>;

beforeEach(() => {
  cache = new Indexer<Network>();
  rest = new FakeRest();
  neutron = new NeutronDouble({ ids: 'sequence' }); // the FAULT-INJECTION double: scripted failures, seeded states
  recorder = new FakeRecorder();
  reconcile = networkReconciler({ networks: new Lister(cache), rest, neutron, recorder, now: () => now });
});

const statusWrites = (): Network['status'][] =>
  rest.calls.filter((c) => c.path === statusPath).map((c) => (c.body as { status: Network['status'] }).status);
const lastReady = (): { status: string; reason?: string; message?: string } | undefined =>
  statusWrites().at(-1)?.conditions?.find((c) => c.type === 'Ready');
/** The Network as it would be cached after the status writes seen so far (the informer's view). */
function withWrittenStatus(net: Network): Network {
  const s = statusWrites().at(-1);
  if (!s) return net;
  return { ...net, status: { ...s, networkID: s.networkID ?? undefined, subnetID: s.subnetID ?? undefined } };
}

// ---- tests ---------------------------------------------------------------------------------------------------------

describe('networkReconciler: create and converge', () => {
  test('adds the finalizer before creating anything in Neutron, then creates a tagged network and subnet', async () => {
    const net = aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }, { finalizers: ['other'] });
    cache.add(net);
    rest.fail = (c) => (c.path === objPath && neutron.ops.length > 0 ? new Error('finalizer after a Neutron call') : undefined);
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls[0], { method: 'PATCH', path: objPath, body: { metadata: { finalizers: ['other', FINALIZER], resourceVersion: '5' } } });
    assert.deepEqual(neutron.ops, [
      'listNetworks name=ns/net', `listNetworks tags=${TAG}`, 'createNetwork ns/net', 'addTag networks/id-1', 'createSubnet 10.0.0.0/24', 'addTag subnets/id-2',
    ]);
    const [n] = [...neutron.networks.values()];
    const [s] = [...neutron.subnets.values()];
    assert.deepEqual([n?.tags, n?.description], [[TAG], neutronDescription(UID)]);
    assert.deepEqual([s?.tags, s?.gateway_ip, s?.network_id], [[TAG], '10.0.0.1', n?.id]);
    assert.deepEqual(statusWrites(), [{
      networkID: n?.id, subnetID: s?.id, observedGeneration: 1,
      conditions: [{
        type: 'Ready', status: 'True', reason: 'Synced', message: `Neutron network ${n?.id} with subnet ${s?.id} (10.0.0.0/24, gateway 10.0.0.1)`,
        observedGeneration: 1, lastTransitionTime: '2024-05-01T10:00:00Z',
      }],
    }]);
    assert.deepEqual(recorder.events, [`Normal Synced Synced with Neutron: created network ${n?.id}; created subnet ${s?.id} (10.0.0.0/24, gateway 10.0.0.1)`]);
  });

  test('converged: Neutron is read (one network query by name + the subnets), nothing is written, no event', async () => {
    const net = aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' });
    cache.add(net);
    await reconcile(req, signal, ctx);
    const converged = withWrittenStatus(net);
    cache.update(converged);
    rest.calls.length = 0;
    neutron.ops.length = 0;
    recorder.events.length = 0;
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls, []);
    assert.deepEqual(recorder.events, []);
    assert.deepEqual(neutron.ops, ['listNetworks name=ns/net', 'listSubnets id-1']);
  });

  test('a retry after a crash finds the tagged network and subnet: no duplicates', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    const s = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' })); // no status: the crash came before the status write
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.size, 1);
    assert.equal(neutron.subnets.size, 1);
    assert.equal(neutron.ops.some((o) => o.startsWith('create')), false);
    assert.deepEqual([statusWrites()[0]?.networkID, statusWrites()[0]?.subnetID], [n.id, s.id]);
    assert.deepEqual(recorder.events, [], 'nothing changed in Neutron');
  });

  test('an untagged network from a timed-out create (same name + description) is adopted, not duplicated', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) });
    neutron.addNetwork({ name: 'ns/net', description: 'someone else\'s network with the same name' });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.networks.get(n.id)?.tags, [TAG]);
    assert.equal(neutron.networks.size, 2, 'nothing created, the stranger untouched');
    assert.equal([...neutron.subnets.values()][0]?.network_id, n.id);
    assert.equal(statusWrites()[0]?.networkID, n.id);
  });

  test('a late-committed untagged create next to the tagged network: the tagged one is kept, the leftover deleted', async () => {
    const late = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) }); // older, untagged
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    await reconcile(req, signal, ctx);
    assert.deepEqual([...neutron.networks.keys()], [n.id]);
    assert.ok(neutron.ops.includes(`deleteNetwork ${late.id}`));
    assert.equal(statusWrites()[0]?.networkID, n.id);
  });

  test('a network renamed in Neutron is still found by its tag', async () => {
    const n = neutron.addNetwork({ name: 'renamed by someone', tags: [TAG] });
    neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops, ['listNetworks name=ns/net', `listNetworks tags=${TAG}`, `listSubnets ${n.id}`]);
    assert.equal(statusWrites()[0]?.networkID, n.id);
  });

  test('duplicate tagged networks: the one in status is kept, the others deleted', async () => {
    const a = neutron.addNetwork({ tags: [TAG] });
    const b = neutron.addNetwork({ tags: [TAG] });
    neutron.addSubnet(b.id, '10.0.0.0/24', '10.0.0.1');
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }, {}, { networkID: b.id }));
    await reconcile(req, signal, ctx);
    assert.deepEqual([...neutron.networks.keys()], [b.id]);
    assert.ok(neutron.ops.includes(`deleteNetwork ${a.id}`));
    assert.equal(neutron.subnets.size, 1);
    assert.ok([...neutron.subnets.values()][0]?.tags.includes(TAG), 'an untagged subnet of our network gets the tag');
  });

  test('gateway change: updated in place, fenced by If-Match with the revision read, the default pools moved with it', async () => {
    const n = neutron.addNetwork({ tags: [TAG] });
    const s = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG], revision_number: 4 });
    cache.add(aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.254' }, { generation: 2 }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.filter((o) => o.startsWith('updateSubnet')), [
      `updateSubnet ${s.id} {"gateway_ip":"10.0.0.254","allocation_pools":[{"start":"10.0.0.1","end":"10.0.0.253"}]} if-match=4`,
    ]);
    assert.equal(neutron.subnets.get(s.id)?.gateway_ip, '10.0.0.254');
    assert.equal(neutron.subnets.size, 1);
    assert.equal(statusWrites()[0]?.observedGeneration, 2);
    assert.match(recorder.events[0] ?? '', /updated gateway of subnet id-2 from 10.0.0.1 to 10.0.0.254/);
  });

  test('gateway change with narrowed pools: pools not sent when the gateway is outside them, only the containing pool split otherwise', async () => {
    const n = neutron.addNetwork({ tags: [TAG] });
    const s = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG], allocation_pools: [{ start: '10.0.0.100', end: '10.0.0.200' }, { start: '10.0.0.220', end: '10.0.0.230' }] });
    const net = aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.254' }, { generation: 2 });
    cache.add(net);
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.filter((o) => o.startsWith('updateSubnet')), [`updateSubnet ${s.id} {"gateway_ip":"10.0.0.254"} if-match=1`]);
    assert.deepEqual(neutron.subnets.get(s.id)?.allocation_pools, [{ start: '10.0.0.100', end: '10.0.0.200' }, { start: '10.0.0.220', end: '10.0.0.230' }]);

    neutron.ops.length = 0;
    cache.update({ ...withWrittenStatus(net), metadata: { ...net.metadata, generation: 3 }, spec: { cidr: '10.0.0.0/24', gateway: '10.0.0.150' } });
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.filter((o) => o.startsWith('updateSubnet')), [
      `updateSubnet ${s.id} {"gateway_ip":"10.0.0.150","allocation_pools":[{"start":"10.0.0.100","end":"10.0.0.149"},{"start":"10.0.0.151","end":"10.0.0.200"},{"start":"10.0.0.220","end":"10.0.0.230"}]} if-match=2`,
    ]);
  });

  test('gateway change refused with 412 (the subnet changed since it was read): quiet requeue, no status, no Event; the retry re-reads', async () => {
    const n = neutron.addNetwork({ tags: [TAG] });
    const s = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.254' }, { generation: 2 }));
    const origList = neutron.listSubnets.bind(neutron);
    neutron.listSubnets = async (f, o) => {
      const read = await origList(f, o);
      neutron.listSubnets = origList;
      // Someone narrows the pools between our read and our update.
      const cur = neutron.subnets.get(s.id);
      if (cur) Object.assign(cur, { allocation_pools: [{ start: '10.0.0.10', end: '10.0.0.20' }], revision_number: cur.revision_number + 1 });
      return read;
    };
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    // The only Kubernetes write: the confirmation of the cached copy before the (refused) update.
    assert.deepEqual(rest.calls.map((c) => c.path), [objPath], 'no status write');
    assert.deepEqual(recorder.events, []);
    assert.equal(neutron.subnets.get(s.id)?.gateway_ip, '10.0.0.1', 'not applied over the newer subnet');

    await reconcile(req, signal, ctx);
    assert.deepEqual([neutron.subnets.get(s.id)?.gateway_ip, neutron.subnets.get(s.id)?.allocation_pools], ['10.0.0.254', [{ start: '10.0.0.10', end: '10.0.0.20' }]],
      'applied on the re-read subnet: the narrowed pool kept');
    assert.equal(lastReady()?.status, 'True');
  });

  test('no spec.gateway: Neutron\'s gateway is left alone', async () => {
    const n = neutron.addNetwork({ tags: [TAG] });
    neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.77', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    await reconcile(req, signal, ctx);
    assert.equal(neutron.ops.some((o) => o.startsWith('updateSubnet')), false);
  });

  test('same gateway written differently (IPv6) is not an update', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    neutron.addSubnet(n.id, '2001:db8::/64', '2001:db8::fe', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '2001:DB8:0::/64', gateway: '2001:DB8:0:0::FE' }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.map((o) => o.split(' ')[0]), ['listNetworks', 'listSubnets']);
  });

  test('CIDR change: the old subnet is deleted first, then the new one created', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    const old = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/23', gateway: '10.0.1.254' }, { generation: 3 }, { networkID: n.id, subnetID: old.id }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.slice(2), [`deleteSubnet ${old.id}`, 'createSubnet 10.0.0.0/23', 'addTag subnets/id-3']);
    const [s] = [...neutron.subnets.values()];
    assert.deepEqual([s?.cidr, s?.gateway_ip, neutron.subnets.size], ['10.0.0.0/23', '10.0.1.254', 1]);
    assert.equal(statusWrites()[0]?.subnetID, s?.id);
  });

  test('a stale cache (our finalizer cached, the Network gone, changed or re-created on the server): nothing is created in Neutron, quiet requeue', async () => {
    const cached = aNetwork({ cidr: '10.0.0.0/24' }); // our finalizer, no status: no Neutron network yet
    // The server's answers to the confirming patch (the finalizer list unchanged, guarded by the cached resourceVersion).
    const server: Record<string, ApiError> = {
      gone: new ApiError(404, 'NotFound', 'networks.samplecrd.k8s.io "net" not found', {}),
      'changed or re-created': new ApiError(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again', {}),
    };
    for (const [what, answer] of Object.entries(server)) {
      cache = new Indexer<Network>();
      cache.add(cached);
      rest = new FakeRest();
      neutron = new NeutronDouble({ ids: 'sequence' });
      reconcile = networkReconciler({ networks: new Lister(cache), rest, neutron, recorder, now: () => now });
      rest.fail = () => answer;
      assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true }, what);
      assert.deepEqual(neutron.ops.filter((o) => o.startsWith('create')), [], `${what}: nothing created in Neutron`);
      assert.deepEqual(rest.calls, [{ method: 'PATCH', path: objPath, body: { metadata: { finalizers: [FINALIZER], resourceVersion: '5' } } }], what);
    }
    assert.deepEqual(recorder.events, []);
  });

  test('every Neutron write from a stale cached copy waits for its confirmation: a 409 (old CIDR, old gateway, a duplicate or untagged network) writes nothing in Neutron, quiet requeue', async () => {
    // Each case: Neutron as the current Network left it, and the cache's older copy of that Network (the server answers
    // 409 to the confirming patch). Acting on the copy would delete the subnet the current spec wants (a standby's
    // lagging cache, found by explore), move a gateway back, delete the network the current status names, adopt.
    const cases: Record<string, () => Network> = {
      'old CIDR': () => {
        const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
        const current = neutron.addSubnet(n.id, '10.3.0.0/24', '10.3.0.1', { tags: [TAG] });
        return aNetwork({ cidr: '10.2.0.0/24' }, {}, { networkID: n.id, subnetID: current.id });
      },
      'old gateway': () => {
        const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
        const s = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.254', { tags: [TAG] });
        return aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }, {}, { networkID: n.id, subnetID: s.id });
      },
      'status naming the other of two duplicates': () => {
        const older = neutron.addNetwork({ tags: [TAG] });
        const current = neutron.addNetwork({ tags: [TAG] }); // the current status names this one
        neutron.addSubnet(current.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
        return aNetwork({ cidr: '10.0.0.0/24' }, {}, { networkID: older.id });
      },
      'an untagged network to adopt': () => {
        neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) });
        return aNetwork({ cidr: '10.0.0.0/24' });
      },
    };
    for (const [what, seed] of Object.entries(cases)) {
      cache = new Indexer<Network>();
      rest = new FakeRest();
      neutron = new NeutronDouble({ ids: 'sequence' });
      cache.add(seed());
      const before = structuredClone([[...neutron.networks.values()], [...neutron.subnets.values()]]);
      reconcile = networkReconciler({ networks: new Lister(cache), rest, neutron, recorder, now: () => now });
      rest.fail = () => new ApiError(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again', {});
      assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true }, what);
      assert.deepEqual(neutron.ops.filter((o) => !/^(list|get)/.test(o)), [], `${what}: nothing written to Neutron`);
      assert.deepEqual([[...neutron.networks.values()], [...neutron.subnets.values()]], before, what);
      assert.deepEqual(rest.calls, [{ method: 'PATCH', path: objPath, body: { metadata: { finalizers: [FINALIZER], resourceVersion: '5' } } }], what);
    }
    assert.deepEqual(recorder.events, []);
  });

  test('a cached copy is confirmed once per reconcile, before its first Neutron write; a converged Network or a live copy (the finalizer patch\'s answer) needs no confirming PATCH', async () => {
    // A CIDR change from the cache: two Neutron writes (delete the old subnet, create the new), one confirmation first.
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    const old = neutron.addSubnet(n.id, '10.2.0.0/24', '10.2.0.1', { tags: [TAG] });
    const net = aNetwork({ cidr: '10.2.0.0/23' }, { generation: 2 }, { networkID: n.id, subnetID: old.id });
    cache.add(net);
    const writesAtPatch: number[] = [];
    const writes = (): number => neutron.ops.filter((o) => !/^(list|get)/.test(o)).length;
    rest.fail = (c) => {
      if (c.path === objPath) writesAtPatch.push(writes());
      return undefined;
    };
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.slice(2), [`deleteSubnet ${old.id}`, 'createSubnet 10.2.0.0/23', 'addTag subnets/id-3']);
    assert.deepEqual(writesAtPatch, [0], 'one confirming PATCH, before any Neutron write');
    assert.deepEqual(rest.calls.filter((c) => c.path === objPath), [{ method: 'PATCH', path: objPath, body: { metadata: { finalizers: [FINALIZER], resourceVersion: '5' } } }]);

    // Converged: no write to Neutron, so no confirmation either.
    cache.update(withWrittenStatus(net));
    rest.calls.length = 0;
    neutron.ops.length = 0;
    await reconcile(req, signal, ctx);
    assert.equal(writes(), 0);
    assert.deepEqual(rest.calls, []);

    // Live: without our finalizer, the finalizer patch's answer is the server's object — no second PATCH for the
    // network create, its subnet, the tags.
    cache = new Indexer<Network>();
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }, { finalizers: [] }));
    rest = new FakeRest();
    neutron = new NeutronDouble({ ids: 'sequence' });
    reconcile = networkReconciler({ networks: new Lister(cache), rest, neutron, recorder, now: () => now });
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops.filter((o) => !/^(list|get)/.test(o)), ['createNetwork ns/net', 'addTag networks/id-1', 'createSubnet 10.0.0.0/24', 'addTag subnets/id-2']);
    assert.deepEqual(rest.calls.filter((c) => c.path === objPath), [{ method: 'PATCH', path: objPath, body: { metadata: { finalizers: [FINALIZER], resourceVersion: '5' } } }]);
  });

  test('a Network deleted from the cache: nothing to do', async () => {
    await reconcile(req, signal, ctx);
    assert.deepEqual([rest.calls, neutron.ops], [[], []]);
  });
});

describe('networkReconciler: invalid specs and Neutron errors', () => {
  test('invalid spec: Ready=False InvalidSpec + Warning, TerminalError, no Neutron call, no finalizer', async () => {
    const net = aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.1.1' }, { finalizers: [] });
    cache.add(net);
    await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
    assert.deepEqual(neutron.ops, []);
    assert.deepEqual(rest.calls.map((c) => c.path), [statusPath]);
    assert.deepEqual(lastReady(), {
      type: 'Ready', status: 'False', reason: 'InvalidSpec', message: 'spec.gateway 10.0.1.1 is not inside spec.cidr 10.0.0.0/24',
      observedGeneration: 1, lastTransitionTime: '2024-05-01T10:00:00Z',
    });
    assert.deepEqual(recorder.events, ['Warning InvalidSpec spec.gateway 10.0.1.1 is not inside spec.cidr 10.0.0.0/24']);

    // Once recorded (e.g. after a restart, or a resync), the same generation is left alone.
    cache.update(withWrittenStatus(net));
    await reconcile(req, signal, ctx);
    assert.equal(rest.calls.length, 1);
    assert.equal(recorder.events.length, 1);
  });

  test('a dual-stack Network seen through v1 (the v2-subnets annotation) is not reconciled: no Neutron call, no write', async () => {
    // What a v1 read of a two-subnet v2 object looks like (conversion.ts): the first subnet in spec, the rest in the
    // annotation. As v1 the controller would take the IPv6 subnet for a stale one of ours and delete it.
    const net = aNetwork({ cidr: '10.0.0.0/24' }, { annotations: { [v2SubnetsAnnotation]: '{"spec":[{"cidr":"fd00::/64"}]}' } });
    cache.add(net);
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops, []);
    assert.deepEqual(rest.calls, []);
    assert.deepEqual(recorder.events, []);
  });

  test('Neutron 400: Ready=False NeutronRejected + one Warning, TerminalError; not retried for that generation', async () => {
    const net = aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' });
    cache.add(net);
    neutron.failNext('createSubnet', errorForStatus({ status: 400, type: 'InvalidInput', message: 'Invalid input for operation: Gateway is not valid on subnet.' }));
    await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
    const [n] = [...neutron.networks.values()];
    assert.equal(statusWrites()[0]?.networkID, n?.id, 'the network that was created is recorded');
    assert.equal(statusWrites()[0]?.subnetID, null, 'cleared (merge patch null)');
    assert.deepEqual(lastReady()?.reason, 'NeutronRejected');
    assert.match(lastReady()?.message ?? '', /Gateway is not valid on subnet/);
    assert.deepEqual(recorder.events, ['Warning NeutronRejected Neutron rejected the request: Invalid input for operation: Gateway is not valid on subnet.']);

    const opsBefore = neutron.ops.length;
    cache.update(withWrittenStatus(net));
    for (let i = 0; i < 3; i++) await reconcile(req, signal, ctx);
    assert.equal(neutron.ops.length, opsBefore, 'no Neutron call for the rejected generation');

    // A new generation is tried again.
    cache.update({ ...withWrittenStatus(net), metadata: { ...net.metadata, generation: 2 }, spec: { cidr: '10.0.0.0/24', gateway: '10.0.0.2' } });
    await reconcile(req, signal, ctx);
    assert.equal(lastReady()?.status, 'True');
    assert.equal(neutron.subnets.size, 1);
  });

  test('Neutron unavailable: Ready=False NeutronUnavailable, one Warning per condition change, plain error (backoff)', async () => {
    const net = aNetwork({ cidr: '10.0.0.0/24' });
    cache.add(net);
    const down = (): Error => errorForStatus({ status: 0, type: 'ConnectionError', message: 'connect ECONNREFUSED' });
    neutron.failNext('listNetworks', down(), down());
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err) && /ECONNREFUSED/.test((err as Error).message));
    assert.deepEqual([lastReady()?.status, lastReady()?.reason], ['False', 'NeutronUnavailable']);
    cache.update(withWrittenStatus(net));
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err));
    assert.equal(statusWrites().length, 1, 'same condition: not rewritten');
    assert.deepEqual(recorder.events, ['Warning NeutronUnavailable Neutron is unavailable (ConnectionError); retrying with backoff']);
    await reconcile(req, signal, ctx);
    assert.equal(lastReady()?.status, 'True');
    assert.equal(neutron.networks.size, 1);
  });

  test('Neutron unavailable during the drift check of a Ready Network: status left Ready', async () => {
    const net = aNetwork({ cidr: '10.0.0.0/24' });
    cache.add(net);
    await reconcile(req, signal, ctx);
    cache.update(withWrittenStatus(net));
    rest.calls.length = 0;
    neutron.failNext('listNetworks', errorForStatus({ status: 503, type: 'HTTP503', message: 'down' }));
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err));
    assert.deepEqual(rest.calls, []);
  });

  test('a timed-out subnet create that happened is found on the retry', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    const origCreate = neutron.createSubnet.bind(neutron);
    let first = true;
    neutron.createSubnet = async (spec, o) => {
      const s = await origCreate({ ...spec, tags: [] }, o); // POST happened, tagging did not, response lost
      if (first) {
        first = false;
        throw errorForStatus({ status: 0, type: 'Timeout', message: 'no complete response within 10000 ms' });
      }
      return s;
    };
    await assert.rejects(reconcile(req, signal, ctx));
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.size, 1);
    assert.equal(neutron.subnets.size, 1);
    assert.deepEqual([...neutron.subnets.values()][0]?.tags, [TAG]);
  });

  test('subnet create 400 because a late earlier create committed meanwhile: retried (not NeutronRejected), then adopted', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    const origCreate = neutron.createSubnet.bind(neutron);
    neutron.createSubnet = (spec) => {
      neutron.addSubnet(n.id, spec.cidr, '10.0.0.1'); // the earlier POST commits now
      neutron.createSubnet = origCreate;
      return Promise.reject(errorForStatus({ status: 400, type: 'InvalidInput', message: 'Requested subnet with cidr: 10.0.0.0/24 for network: x overlaps with another subnet' }));
    };
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err) && /a subnet appeared/.test((err as Error).message));
    assert.equal(statusWrites().length, 0, 'not reported as a rejection');
    assert.deepEqual(recorder.events, []);
    await reconcile(req, signal, ctx);
    assert.equal(neutron.subnets.size, 1);
    assert.equal(lastReady()?.status, 'True');
  });

  test('a finalizer patch conflict (409: the Network changed since it was cached) requeues quietly without touching Neutron', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }, { finalizers: [] }));
    rest.fail = () => new ApiError(409, 'Conflict', 'the object has been modified', {});
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.deepEqual(neutron.ops, []);
    assert.deepEqual(recorder.events, []);
  });

  test('fencing: the status write carries the resourceVersion it was derived from — after adding the finalizer, the one the server answered', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }, { finalizers: [] }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(rest.calls.map((c) => [c.path, (c.body as { metadata: { resourceVersion?: string } }).metadata.resourceVersion]), [[objPath, '5'], [statusPath, '6']]);
    const converged = { ...withWrittenStatus(aNetwork({ cidr: '10.0.0.0/24' }, { resourceVersion: '9' })), spec: { cidr: '10.0.0.0/24', gateway: '10.0.0.9' } };
    cache.update({ ...converged, metadata: { ...converged.metadata, generation: 2 } });
    rest.calls.length = 0;
    await reconcile(req, signal, ctx);
    // The gateway update is derived from the cached copy: confirmed first, guarded by the same resourceVersion.
    assert.deepEqual(rest.calls.map((c) => [c.path, (c.body as { metadata: { resourceVersion?: string } }).metadata.resourceVersion]), [[objPath, '9'], [statusPath, '9']]);
  });

  test('a status write refused with 409 requeues quietly; the Neutron changes made are still reported (Normal Event)', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    rest.fail = (c) => (c.path === statusPath ? new ApiError(409, 'Conflict', 'the object has been modified', {}) : undefined);
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.equal(neutron.networks.size, 1);
    assert.deepEqual(recorder.events.map((e) => e.split(' ').slice(0, 2).join(' ')), ['Normal Synced']);
  });
});

describe('networkReconciler: deletion', () => {
  const deleting = (meta: Network['metadata'] = {}): Network =>
    aNetwork({ cidr: '10.0.0.0/24' }, { deletionTimestamp: '2024-05-01T09:00:00Z', finalizers: ['other', FINALIZER], ...meta });

  test('deletes the tagged network(s) and the untagged leftover, then removes only our finalizer', async () => {
    const a = neutron.addNetwork({ tags: [TAG] });
    neutron.addSubnet(a.id, '10.0.0.0/24', '10.0.0.1');
    const leftover = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) });
    const stranger = neutron.addNetwork({ name: 'ns/net' });
    cache.add(deleting());
    await reconcile(req, signal, ctx);
    assert.deepEqual([...neutron.networks.keys()], [stranger.id]);
    assert.equal(neutron.subnets.size, 0);
    assert.deepEqual(rest.calls, [{ method: 'PATCH', path: objPath, body: { metadata: { finalizers: ['other'], resourceVersion: '5' } } }]);
    assert.deepEqual(recorder.events, [`Normal Deleted Deleted Neutron network ${a.id}, ${leftover.id}`]);
  });

  test('already gone in Neutron (404 or nothing found): the finalizer is removed', async () => {
    const a = neutron.addNetwork({ tags: [TAG] });
    neutron.failNext('deleteNetwork', errorForStatus({ status: 404, type: 'NetworkNotFound', message: 'gone' }));
    cache.add(deleting());
    await reconcile(req, signal, ctx);
    assert.ok(neutron.ops.includes(`deleteNetwork ${a.id}`));
    assert.equal(rest.calls.length, 1);
    assert.deepEqual(recorder.events, []);
  });

  test('409 NetworkInUse: Ready=False DeleteFailed + Warning Event, error (backoff), finalizer kept', async () => {
    neutron.addNetwork({ tags: [TAG] });
    neutron.failNext('deleteNetwork', errorForStatus({ status: 409, type: 'NetworkInUse', message: 'Unable to complete operation on network. There are one or more ports still in use on the network.' }));
    cache.add(deleting());
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err) && /NetworkInUse/.test((err as Error).message));
    assert.deepEqual(rest.calls.map((c) => c.path), [statusPath], 'the condition only: finalizer kept');
    assert.deepEqual([lastReady()?.status, lastReady()?.reason], ['False', 'DeleteFailed']);
    assert.match(recorder.events[0] ?? '', /^Warning DeleteFailed Cannot delete Neutron network id-1: NetworkInUse: Unable to complete/);
  });

  test('Neutron unavailable: Ready=False DeleteFailed (once per condition change), error (backoff), finalizer kept', async () => {
    const down = (): Error => errorForStatus({ status: 0, type: 'ConnectionError', message: 'refused' });
    neutron.failNext('listNetworks', down(), down());
    cache.add(deleting());
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err));
    assert.deepEqual(rest.calls.map((c) => c.path), [statusPath]);
    assert.match(lastReady()?.message ?? '', /^Cannot delete the Neutron network: Neutron is unavailable \(ConnectionError\)/);
    cache.update(withWrittenStatus(deleting()));
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err));
    assert.equal(rest.calls.length, 1, 'same condition: not rewritten');
    assert.equal(recorder.events.length, 1, 'one Warning');
  });

  test('without our finalizer: nothing to do; an object already gone when the finalizer is removed is fine', async () => {
    cache.add(deleting({ finalizers: ['other'] }));
    await reconcile(req, signal, ctx);
    assert.deepEqual([rest.calls, neutron.ops], [[], []]);
    cache.update(deleting());
    rest.fail = () => new ApiError(404, 'NotFound', 'gone', {});
    await reconcile(req, signal, ctx);
  });

  test('a Network that was rejected is still cleaned up on deletion', async () => {
    neutron.addNetwork({ tags: [TAG] });
    const rejected = computeStatus(aNetwork({ cidr: 'not-a-cidr' }), { networkID: undefined, subnetID: undefined, ready: false, reason: 'NeutronRejected', message: 'x' }, now);
    cache.add({ ...deleting(), status: rejected });
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.size, 0);
  });
});

// ---- issue 12: clouds unlike the local default -------------------------------------------------------------------

describe('networkReconciler: a Network deleted with our finalizer still on it (kubernetes#77988)', () => {
  // The real race on a real API server and neutron-server: test/network-finalizer-race.test.ts. Here, each way the
  // reconciler learns of it, with the Neutron double.
  let bypassed: BypassedFinalizers<AnyNetwork>;
  beforeEach(() => {
    bypassed = new BypassedFinalizers<AnyNetwork>(FINALIZER);
    reconcile = networkReconciler({ networks: new Lister(cache), rest, neutron, recorder, now: () => now, bypassed });
  });

  test('the informer\'s delete carries our finalizer: the reconcile of the key (the cache empty) deletes the Neutron networks of that UID, nothing else', async () => {
    const ours = neutron.addNetwork({ tags: [TAG] });
    neutron.addSubnet(ours.id, '10.0.0.0/24', '10.0.0.1');
    const leftover = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) });
    const stranger = neutron.addNetwork({ name: 'ns/net' });
    assert.equal(bypassed.observe(aNetwork({ cidr: '10.0.0.0/24' }, { finalizers: ['other'] })), undefined, 'a final state without our finalizer: a normal deletion, nothing recorded');
    assert.equal(bypassed.observe(aNetwork({ cidr: '10.0.0.0/24' })), 'ns/net');
    assert.equal(await reconcile(req, signal, ctx), undefined);
    assert.deepEqual([...neutron.networks.keys()], [stranger.id], `${ours.id} and ${leftover.id} deleted`);
    assert.equal(neutron.subnets.size, 0);
    assert.deepEqual(rest.calls.map((c) => `${c.method} ${c.path}`), [`GET ${objPath}`], 'one read (404: gone), no write');
    assert.equal(bypassed.size, 0, 'forgotten once cleaned up');
    await reconcile(req, signal, ctx);
    assert.equal(neutron.ops.filter((o) => o.startsWith('deleteNetwork')).length, 2, 'not cleaned up twice');
  });

  test('a Neutron failure during that cleanup: error (backoff), the entry kept, the retry finishes it', async () => {
    neutron.addNetwork({ tags: [TAG] });
    bypassed.observe(aNetwork({ cidr: '10.0.0.0/24' }));
    neutron.failNext('deleteNetwork', errorForStatus({ status: 503, type: 'ServiceUnavailable', message: 'down' }));
    await assert.rejects(reconcile(req, signal, ctx));
    assert.equal([bypassed.size, neutron.networks.size].join(), '1,1');
    await reconcile(req, signal, ctx);
    assert.equal([bypassed.size, neutron.networks.size].join(), '0,0');
  });

  test('a Network that left the cache with our finalizer but still exists (moved out of this shard\'s label selector): the GET answers it, nothing deleted in Neutron', async () => {
    const ours = neutron.addNetwork({ tags: [TAG] });
    const net = aNetwork({ cidr: '10.0.0.0/24' });
    bypassed.observe(net);
    rest.onServer = net; // the server still has it; this shard's informer (the cache) does not
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.has(ours.id), true, 'the living Network\'s Neutron network is kept');
    assert.equal(bypassed.size, 0, 'forgotten');
  });

  test('re-created under the same name before the cleanup: the old UID\'s networks are deleted, the new Network reconciled', async () => {
    const old = neutron.addNetwork({ tags: [TAG] });
    bypassed.observe(aNetwork({ cidr: '10.0.0.0/24' }));
    cache.add(aNetwork({ cidr: '10.1.0.0/24' }, { uid: 'uid-2' }));
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.has(old.id), false);
    assert.deepEqual([...neutron.networks.values()].map((n) => n.tags), [[uidTag('uid-2')]]);
    assert.equal(lastReady()?.status, 'True');
  });

  test('the status write after creating answers 404 (gone while we worked, our finalizer on it): recorded, quiet requeue; the requeue deletes what was made', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    rest.fail = (c) => (c.path === statusPath ? new ApiError(404, 'NotFound', 'networks "net" not found', {}) : undefined);
    assert.deepEqual(await reconcile(req, signal, ctx), { requeue: true });
    assert.equal(neutron.networks.size, 1, 'created before the 404');
    cache.delete(aNetwork({ cidr: '10.0.0.0/24' })); // the informer catches up (its delete may or may not carry the finalizer)
    await reconcile(req, signal, ctx);
    assert.equal([neutron.networks.size, neutron.subnets.size, bypassed.size].join(), '0,0,0');
  });
});

describe('networkReconciler: issue 12', () => {
  let clock: number;
  const timeout = (): Error => errorForStatus({ status: 0, type: 'Timeout', message: 'no complete response within 10000 ms' });
  const SETTLE = 60_000;
  function reconcilerWithClock(): ReturnType<typeof networkReconciler> {
    clock = now.getTime();
    return networkReconciler({ networks: new Lister(cache), rest, neutron, recorder, now: () => new Date(clock), createSettleMs: SETTLE });
  }
  const creates = (): string[] => neutron.ops.filter((o) => o.startsWith('createNetwork'));

  test('1: a create that times out but commits late: no second create until the outcome is known, then adopted', async () => {
    const r = reconcilerWithClock();
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    neutron.createNetwork = (): Promise<NNetwork> => {
      neutron.ops.push('createNetwork (lost)');
      return Promise.reject(timeout()); // the POST is still being processed by the server
    };
    await assert.rejects(r(req, signal, ctx), (err) => !isTerminalError(err));
    clock += 5; // the work queue's first retry
    const res = await r(req, signal, ctx);
    assert.equal(creates().length, 1, 'no second POST while the first one\'s outcome is unknown');
    assert.ok(res && (res.requeueAfter ?? 0) > 0 && (res.requeueAfter ?? 0) <= SETTLE, `requeued to look again: ${JSON.stringify(res)}`);
    neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) }); // the late commit
    clock += SETTLE;
    await r(req, signal, ctx);
    assert.equal(neutron.networks.size, 1, 'exactly one network');
    assert.equal(creates().length, 1);
    assert.deepEqual([...neutron.networks.values()][0]?.tags, [TAG]);
    assert.equal(lastReady()?.status, 'True');
  });

  test('1: a create committed after the settle delay is swept by the follow-up lookup', async () => {
    const r = reconcilerWithClock();
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    const origCreate = neutron.createNetwork.bind(neutron);
    neutron.createNetwork = (): Promise<NNetwork> => {
      neutron.createNetwork = origCreate;
      return Promise.reject(timeout());
    };
    await assert.rejects(r(req, signal, ctx));
    clock += SETTLE + 1;
    const res = await r(req, signal, ctx); // nothing appeared: create now
    assert.equal(neutron.networks.size, 1);
    assert.ok(res && (res.requeueAfter ?? Infinity) <= SETTLE, `a sweep is scheduled: ${JSON.stringify(res)}`);
    const late = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) }); // later than anyone waits
    cache.update(withWrittenStatus(aNetwork({ cidr: '10.0.0.0/24' })));
    clock += res?.requeueAfter ?? 0;
    await r(req, signal, ctx);
    assert.equal(neutron.networks.has(late.id), false, 'the late leftover was deleted');
    assert.equal(neutron.networks.size, 1);
  });

  test('1: after a restart, the first check of a Ready Network is a full lookup (sweeps a late commit of the previous process)', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    const s = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    const net = aNetwork({ cidr: '10.0.0.0/24' });
    cache.add(net);
    const ready = computeStatus(net, { networkID: n.id, subnetID: s.id, ready: true, reason: 'Synced', message: 'm' }, now);
    cache.update({ ...net, status: ready });
    const late = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) }); // the dead process's earlier POST
    await reconcile(req, signal, ctx); // a fresh reconciler = a new process
    assert.deepEqual([...neutron.networks.keys()], [n.id], 'the leftover is deleted');
    assert.ok(neutron.ops.includes(`deleteNetwork ${late.id}`));
    neutron.ops.length = 0;
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops, ['listNetworks name=ns/net', `listSubnets ${n.id}`], 'later checks: by name (one listing), as every check');
  });

  test('2: a Keystone 404 while deleting is an auth failure: the finalizer stays; Ready=False DeleteFailed and a Warning say why', async () => {
    neutron.addNetwork({ tags: [TAG] });
    neutron.failNext('deleteNetwork', errorForStatus({ status: 401, type: 'NotFound', message: 'Could not find Application Credential' }));
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }, { deletionTimestamp: '2024-05-01T09:00:00Z' }));
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err));
    assert.deepEqual(rest.calls.map((c) => c.path), [statusPath], 'finalizer kept');
    assert.equal(neutron.networks.size, 1);
    assert.deepEqual([lastReady()?.status, lastReady()?.reason], ['False', 'DeleteFailed']);
    assert.match(lastReady()?.message ?? '', /^Cannot delete Neutron network id-1: Neutron authentication failed \(HTTP 401 NotFound: Could not find Application Credential\)/);
    assert.deepEqual(recorder.events, [`Warning DeleteFailed ${lastReady()?.message ?? ''}`]);
  });

  for (const [what, spec] of [
    ['gateway = IPv4 network address', { cidr: '10.9.0.0/24', gateway: '10.9.0.0' }],
    ['gateway = IPv4 broadcast address', { cidr: '10.9.0.0/24', gateway: '10.9.0.255' }],
    ['prefix length 0', { cidr: '0.0.0.0/0' }],
    ['IPv6 prefix length 0', { cidr: '::/0' }],
  ] as const) {
    test(`3: ${what} is refused before touching Neutron, and the working subnet stays`, async () => {
      const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
      const old = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
      cache.add(aNetwork(spec, { generation: 2 }, { networkID: n.id, subnetID: old.id }));
      await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
      assert.deepEqual(neutron.ops, [], 'no Neutron call');
      assert.equal(lastReady()?.reason, 'InvalidSpec');
      assert.deepEqual([...neutron.subnets.keys()], [old.id]);
    });
  }

  test('3: a CIDR change Neutron rejects leaves the old subnet working (new subnet created before the old is deleted); status keeps naming it', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    const old = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.8.0.0/24' }, { generation: 2 }, { networkID: n.id, subnetID: old.id }));
    neutron.failNext('createSubnet', errorForStatus({ status: 400, type: 'InvalidInput', message: 'something only Neutron knows' }));
    await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
    assert.ok(neutron.subnets.has(old.id), 'the old subnet is still there');
    assert.equal(lastReady()?.reason, 'NeutronRejected');
    assert.equal(statusWrites().at(-1)?.subnetID, old.id, 'status.subnetID names the subnet that exists');
  });

  test('3: an overlapping CIDR change (must delete first) that Neutron rejects restores the old subnet', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/23' }, { generation: 2 }));
    neutron.failNext('createSubnet', errorForStatus({ status: 400, type: 'InvalidInput', message: 'something only Neutron knows' }));
    await assert.rejects(reconcile(req, signal, ctx), (err) => isTerminalError(err));
    const subnets = [...neutron.subnets.values()];
    assert.deepEqual(subnets.map((s) => [s.cidr, s.gateway_ip, s.tags]), [['10.0.0.0/24', '10.0.0.1', [TAG]]], 'the old subnet is back');
    assert.equal(lastReady()?.reason, 'NeutronRejected');
    assert.equal(statusWrites().at(-1)?.subnetID, subnets[0]?.id, 'status names the restored subnet');
    assert.deepEqual(neutron.signals.filter((c) => c.op === 'createSubnet').map((c) => c.signal), [signal, signal], 'the restore takes the reconcile\'s signal');
  });

  test('3: once the reconcile\'s signal is aborted (shutdown, leadership lost), the restore sends nothing to Neutron', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/23' }, { generation: 2 }));
    const ac = new AbortController();
    neutron.failNext('createSubnet', errorForStatus({ status: 400, type: 'InvalidInput', message: 'something only Neutron knows' }));
    // The signal aborts while the refusal is being handled (after the look for a late subnet): the double refuses an
    // aborted call, so only the restore's own check of the signal stands between the abort and a create.
    const origList = neutron.listSubnets.bind(neutron);
    neutron.listSubnets = (f, o) => origList(f, o).then((r) => {
      if (neutron.ops.some((op) => op.startsWith('createSubnet'))) ac.abort(new Error('leadership lost'));
      return r;
    });
    await assert.rejects(reconcile(req, ac.signal, ctx));
    assert.deepEqual(neutron.aborted, [], 'nothing was attempted with the aborted signal');
    const after = neutron.ops.slice(neutron.ops.findIndex((o) => o.startsWith('createSubnet')) + 1);
    assert.deepEqual(after.filter((o) => o.startsWith('createSubnet') || o.startsWith('addTag')), [], 'no restore after the abort');
  });

  test('4: an overlap 400 (allow_overlapping_ips = False: another network has the CIDR) is NeutronConflict, retried every 30 s (±10 %), not terminal', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    neutron.failNext('createSubnet', errorForStatus({ status: 400, type: 'InvalidInput', message: 'Invalid input for operation: Requested subnet with cidr: 10.0.0.0/24 for network: x overlaps with another subnet.' }));
    const res = await reconcile(req, signal, ctx).then((r) => r, (err: unknown) => {
      assert.ok(!isTerminalError(err), 'not terminal');
      return undefined;
    });
    assert.ok(res && (res.requeueAfter ?? 0) >= 27_000 && (res.requeueAfter ?? 0) <= 33_000, `retried every 30 s ± 10 % (docs/controllers.md): ${JSON.stringify(res)}`);
    assert.equal(lastReady()?.status, 'False');
    assert.equal(lastReady()?.reason, 'NeutronConflict');
    assert.match(lastReady()?.message ?? '', /overlaps with another subnet/);
    cache.update(withWrittenStatus(aNetwork({ cidr: '10.0.0.0/24' })));
    await reconcile(req, signal, ctx); // the other subnet went away
    assert.equal(lastReady()?.status, 'True');
  });

  test('5: lookups are scoped to the token\'s project: another project\'s look-alike network is not adopted', async () => {
    neutron.project = 'mine';
    const theirs = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID), project_id: 'other', tags: [TAG] });
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.networks.get(theirs.id)?.tags, [TAG], 'untouched');
    assert.equal([...neutron.subnets.values()].some((s) => s.network_id === theirs.id), false);
    const ours = [...neutron.networks.values()].filter((n) => n.project_id === 'mine');
    assert.equal(ours.length, 1);
    assert.equal(statusWrites().at(-1)?.networkID, ours[0]?.id);
  });

  test('6: subnets the controller did not create are never deleted; one that cannot be deleted does not block the gateway', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', tags: [TAG] });
    const ours = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    const foreign = neutron.addSubnet(n.id, '10.7.0.0/24', '10.7.0.1'); // someone else's, with a port
    neutron.failNext('deleteSubnet', errorForStatus({ status: 409, type: 'SubnetInUse', message: 'One or more ports have an IP allocation from this subnet.' }));
    cache.add(aNetwork({ cidr: '10.0.0.0/24', gateway: '10.0.0.254' }, { generation: 2 }));
    await reconcile(req, signal, ctx);
    assert.ok(neutron.subnets.has(foreign.id), 'the foreign subnet stays');
    assert.equal(neutron.ops.some((o) => o.startsWith('deleteSubnet')), false);
    assert.equal(neutron.subnets.get(ours.id)?.gateway_ip, '10.0.0.254');
    assert.equal(lastReady()?.status, 'True');
  });

  test('9: Retry-After on a 503 is honoured (requeueAfter, within 1 s – 10 min), 403 is reported as a policy error with the server message', async () => {
    cache.add(aNetwork({ cidr: '10.0.0.0/24' }));
    neutron.failNext('listNetworks', errorForStatus({ status: 503, type: 'HTTP503', message: 'busy', retryAfterMs: 42_000 }));
    const res = await reconcile(req, signal, ctx).catch((err: unknown) => err);
    assert.deepEqual(res, { requeueAfter: 42_000 });
    assert.equal(lastReady()?.reason, 'NeutronUnavailable');
    // Bounded to 1 s – 10 min.
    for (const [asked, kept] of [[10, 1_000], [3_600_000, 600_000]] as const) {
      neutron.failNext('listNetworks', errorForStatus({ status: 503, type: 'HTTP503', message: 'busy', retryAfterMs: asked }));
      assert.deepEqual(await reconcile(req, signal, ctx).catch((err: unknown) => err), { requeueAfter: kept }, `Retry-After of ${asked} ms`);
    }

    neutron.failNext('createNetwork', errorForStatus({ status: 403, type: 'PolicyNotAuthorized', message: 'rule:create_network is disallowed by policy' }));
    await assert.rejects(reconcile(req, signal, ctx), (err) => !isTerminalError(err));
    assert.equal(lastReady()?.reason, 'NeutronForbidden');
    assert.match(lastReady()?.message ?? '', /rule:create_network is disallowed by policy/);
  });

  test('8: a Ready Network is checked again after the drift period, by a listing (name + description, tag), and repaired', async () => {
    const r = reconcilerWithClock();
    const reconcile = r;
    const net = aNetwork({ cidr: '10.0.0.0/24' });
    cache.add(net);
    const res = await reconcile(req, signal, ctx);
    assert.deepEqual(res, { requeueAfter: SETTLE }, 'first the sweep after the create');
    cache.update(withWrittenStatus(net));
    clock += SETTLE;
    const swept = await reconcile(req, signal, ctx);
    assert.ok(swept && (swept.requeueAfter ?? 0) >= 0.9 * DEFAULT_DRIFT_CHECK_MS && (swept.requeueAfter ?? 0) <= 1.1 * DEFAULT_DRIFT_CHECK_MS, `then the drift check period: ${JSON.stringify(swept)}`);
    const id = statusWrites().at(-1)?.networkID ?? '';
    neutron.ops.length = 0;
    const again = await reconcile(req, signal, ctx);
    assert.deepEqual(neutron.ops, ['listNetworks name=ns/net', `listSubnets ${id}`], 'one listing by name finds it');
    assert.ok(again && (again.requeueAfter ?? 0) > 0);
    // A duplicate whose create committed long after every settle window (no sweep pending): found by the drift check.
    const late = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID) });
    clock += again?.requeueAfter ?? 0;
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.has(late.id), false, 'the late duplicate is deleted by the drift check');
    assert.deepEqual([...neutron.networks.keys()], [id]);
    const [s] = [...neutron.subnets.values()];
    await neutron.deleteSubnet(s?.id ?? ''); // someone deletes the subnet in Neutron
    await reconcile(req, signal, ctx);
    assert.equal(neutron.subnets.size, 1, 'recreated');
    await neutron.deleteNetwork(id); // ... and then the network
    cache.update(withWrittenStatus(net));
    await reconcile(req, signal, ctx);
    assert.equal(neutron.networks.size, 1, 'recreated');
    assert.notEqual(statusWrites().at(-1)?.networkID, id);
  });
});

describe('networkReconciler: samplecrd.k8s.io/v2 (one subnet per IP family)', () => {
  const v2StatusPath = '/apis/samplecrd.k8s.io/v2/namespaces/ns/networks/net/status';
  let cacheV2: Indexer<NetworkV2>;
  let reconcileV2: ReturnType<typeof networkReconciler>;
  const aNetworkV2 = (subnets: NetworkSpecSubnet[], status?: NetworkV2['status']): NetworkV2 => ({
    metadata: { name: 'net', namespace: 'ns', uid: UID, generation: 1, resourceVersion: '5', finalizers: [FINALIZER] },
    spec: { subnets }, ...(status && { status }),
  });
  const v2Writes = (): NetworkV2['status'][] =>
    rest.calls.filter((c) => c.path === v2StatusPath).map((c) => (c.body as { status: NetworkV2['status'] }).status);

  beforeEach(() => {
    cacheV2 = new Indexer<NetworkV2>();
    reconcileV2 = networkReconciler({ version: 'v2', networks: new Lister(cacheV2), rest, neutron, recorder, now: () => now });
  });

  test('dual-stack: one network, one tagged subnet per family, status.subnets in spec order; converged = 2 Neutron reads, no write', async () => {
    const net = aNetworkV2([{ cidr: '2001:db8::/64' }, { cidr: '10.0.0.0/24', gateway: '10.0.0.1' }]);
    cacheV2.add(net);
    await reconcileV2(req, signal, ctx);
    assert.deepEqual(neutron.ops, [
      'listNetworks name=ns/net', `listNetworks tags=${TAG}`, 'createNetwork ns/net', 'addTag networks/id-1',
      'createSubnet 2001:db8::/64', 'addTag subnets/id-2', 'createSubnet 10.0.0.0/24', 'addTag subnets/id-3',
    ]);
    const [status] = v2Writes();
    assert.deepEqual(status?.subnets, [{ cidr: '2001:db8::/64', subnetID: 'id-2' }, { cidr: '10.0.0.0/24', subnetID: 'id-3' }]);
    assert.equal(status?.networkID, 'id-1');
    assert.deepEqual([...neutron.subnets.values()].map((s) => [s.cidr, s.tags]), [['2001:db8::/64', [TAG]], ['10.0.0.0/24', [TAG]]]);

    cacheV2.update({ ...net, status: { ...status, subnets: status?.subnets ?? [] } });
    rest.calls.length = 0;
    neutron.ops.length = 0;
    await reconcileV2(req, signal, ctx);
    assert.deepEqual(neutron.ops, ['listNetworks name=ns/net', 'listSubnets id-1']);
    assert.deepEqual(rest.calls, []);
  });

  test('Neutron refuses the second family: Ready=False NeutronRejected, status names only the subnet that exists', async () => {
    cacheV2.add(aNetworkV2([{ cidr: '10.0.0.0/24' }, { cidr: '2001:db8::/64' }]));
    neutron.failNext('createSubnet', undefined, errorForStatus({ status: 400, type: 'InvalidInput', message: 'Invalid input for operation: no.' }));
    await assert.rejects(reconcileV2(req, signal, ctx), (err) => isTerminalError(err));
    const last = v2Writes().at(-1);
    assert.deepEqual(last?.subnets, [{ cidr: '10.0.0.0/24', subnetID: 'id-2' }]);
    assert.equal(last?.conditions?.find((c) => c.type === 'Ready')?.reason, 'NeutronRejected');
  });

  test('a family dropped from the spec: its subnet of ours is deleted, someone else\'s is left alone, the other family kept', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID), tags: [TAG] });
    const s4 = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    const s6 = neutron.addSubnet(n.id, '2001:db8::/64', '2001:db8::1', { tags: [TAG] });
    const foreign = neutron.addSubnet(n.id, '2001:db8:1::/64', null, { tags: ['someone-else'] });
    cacheV2.add(aNetworkV2([{ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }], {
      networkID: n.id, subnets: [{ cidr: '10.0.0.0/24', subnetID: s4.id }, { cidr: '2001:db8::/64', subnetID: s6.id }],
    }));
    await reconcileV2(req, signal, ctx);
    assert.deepEqual([...neutron.subnets.keys()].sort(), [s4.id, foreign.id].sort());
    assert.deepEqual(v2Writes().at(-1)?.subnets, [{ cidr: '10.0.0.0/24', subnetID: s4.id }]);
  });

  test('one family swapped for the other: the new family\'s subnet is created before the dropped one is deleted', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID), tags: [TAG] });
    const s4 = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    cacheV2.add(aNetworkV2([{ cidr: '2001:db8::/64' }], { networkID: n.id, subnets: [{ cidr: '10.0.0.0/24', subnetID: s4.id }] }));
    await reconcileV2(req, signal, ctx);
    const created = neutron.ops.indexOf('createSubnet 2001:db8::/64');
    assert.ok(created >= 0 && created < neutron.ops.indexOf(`deleteSubnet ${s4.id}`), neutron.ops.join(', '));
    assert.deepEqual([...neutron.subnets.values()].map((x) => x.cidr), ['2001:db8::/64']);
  });

  test('a CIDR change within a family is v1\'s, per subnet: the new subnet first, then the old deleted; refused by Neutron, the old one kept and keyed by its CIDR; the other family untouched', async () => {
    const n = neutron.addNetwork({ name: 'ns/net', description: neutronDescription(UID), tags: [TAG] });
    const s4 = neutron.addSubnet(n.id, '10.0.0.0/24', '10.0.0.1', { tags: [TAG] });
    const s6 = neutron.addSubnet(n.id, '2001:db8::/64', '2001:db8::1', { tags: [TAG] });
    const status = { networkID: n.id, subnets: [{ cidr: '10.0.0.0/24', subnetID: s4.id }, { cidr: '2001:db8::/64', subnetID: s6.id }] };
    // Refused: the old IPv4 subnet stays and status keeps naming it, under its Neutron CIDR.
    cacheV2.add(aNetworkV2([{ cidr: '10.8.0.0/24' }, { cidr: '2001:db8::/64' }], status));
    neutron.failNext('createSubnet', errorForStatus({ status: 400, type: 'InvalidInput', message: 'something only Neutron knows' }));
    await assert.rejects(reconcileV2(req, signal, ctx), (err) => isTerminalError(err));
    assert.deepEqual([...neutron.subnets.keys()].sort(), [s4.id, s6.id].sort());
    assert.deepEqual(v2Writes().at(-1)?.subnets, [{ cidr: '10.0.0.0/24', subnetID: s4.id }, { cidr: '2001:db8::/64', subnetID: s6.id }]);
    // Accepted: created before the old one is deleted (never fewer working subnets); IPv6 not touched.
    neutron.ops.length = 0;
    await reconcileV2(req, signal, ctx);
    const creates = neutron.ops.findIndex((o) => o === 'createSubnet 10.8.0.0/24');
    assert.ok(creates >= 0 && creates < neutron.ops.indexOf(`deleteSubnet ${s4.id}`), neutron.ops.join(', '));
    assert.ok(!neutron.ops.some((o) => o.includes(s6.id) || o.includes('2001:db8::/64')), neutron.ops.join(', '));
    const [, v6] = v2Writes().at(-1)?.subnets ?? [];
    assert.deepEqual(v2Writes().at(-1)?.subnets?.[0]?.cidr, '10.8.0.0/24');
    assert.deepEqual(v6, { cidr: '2001:db8::/64', subnetID: s6.id });
  });

  test('the shared check: InvalidSpec with its v2 message, no Neutron call', async () => {
    cacheV2.add(aNetworkV2([{ cidr: '10.0.0.0/24' }, { cidr: '10.1.0.0/24' }]));
    await assert.rejects(reconcileV2(req, signal, ctx), (err) => isTerminalError(err));
    assert.deepEqual(neutron.ops, []);
    assert.equal(v2Writes().at(-1)?.conditions?.find((c) => c.type === 'Ready')?.message,
      'spec.subnets[0].cidr 10.0.0.0/24 and spec.subnets[1].cidr 10.1.0.0/24 are both IPv4; a Network has at most one IPv4 and one IPv6 subnet');
  });
});
