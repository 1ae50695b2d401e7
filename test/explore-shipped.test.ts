/**
 * `explore` (issue 40) applied to what we ship: each controller's own setup — the code main.ts runs — under every
 * perturbation plan explore derives from a small workload (crashes around each write, stale views, unobserved states,
 * write faults), in-memory API server only. Each run must report no finding, and enough plans must have run for that
 * to mean something. Bounded runs (part of `make test`); the long run is `make explore`.
 *
 * A finding here is either a bug of the controller (fix it, with a test that failed before) or a flaw of explore: the
 * replay line it prints runs the one plan again with both traces.
 */
import assert from 'node:assert/strict';
import { registerHooks } from 'node:module';
import { describe, test, type TestContext } from 'node:test';
import type { Memcached } from '../examples/memcached/api/example/v1alpha1/zz_generated.types.ts';
import type { ConfigMap, Namespace } from '../pkg/api/core/v1/zz_generated.types.ts';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import type { Network as NetworkV2 } from '../pkg/apis/samplecrd/v2/types.ts';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { deploymentControllerSetup } from '../pkg/controllers/deployment/controller.ts';
import { fooControllerSetup } from '../pkg/controllers/foo/controller.ts';
import { networkControllerSetup } from '../pkg/controllers/network/controller.ts';
import { networkResource, networkV2Resource, neutronName, uidTag } from '../pkg/controllers/network/desired.ts';
import { parseCIDR, sameCIDR, sameIP } from '../pkg/controllers/network/ipnet.ts';
import { create, expectNoFindings, explore, patch, remove, settle, type ExploreEndState, type ExploreReport, type Invariant } from '../pkg/testing/index.ts';
import { NeutronDouble, type NetworkInventory } from './explore/neutron-double.ts';
import { deploymentStatusPeer } from './explore/peers.ts';

/**
 * The plans ran and none found anything; `atLeast`: how many plans the workload must yield (so 0 findings means
 * something). With `t`, one diagnostic line says how many ran and how long it took.
 */
function expectClean(report: ExploreReport, atLeast: number, t?: TestContext): void {
  t?.diagnostic(`${report.name}: ${report.executed} plans (${report.notTriggered} not triggered), ${report.findings.length} findings, ${(report.durationMs / 1000).toFixed(1)} s`);
  expectNoFindings(report);
  assert.ok(report.executed >= atLeast, `${report.name}: ${report.executed} plans ran, expected at least ${atLeast}`);
  assert.ok(report.executed - report.notTriggered >= atLeast * 0.9, `${report.name}: only ${report.executed - report.notTriggered} of ${report.executed} plans happened`);
  assert.deepEqual(report.inconclusive, [], `${report.name}: inconclusive plans`);
}

const demo = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } };

/**
 * Occurrences of one write signature that get plans: `fallback` here (a bounded run for make test); `make explore` sets
 * EXPLORE_OCCURRENCES (5) for the long run.
 */
const occurrences = (fallback: number): number => Number(process.env['EXPLORE_OCCURRENCES']) || fallback;

// ---- Foo, Deployment -------------------------------------------------------------------------------------------------

describe('explore: the Foo controller (no finding in any plan)', () => {
  test('create, scale, delete', async () => {
    const foo = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { namespace: 'demo', name: 'foo' }, spec: { deploymentName: 'foo-dep', replicas: 1 } };
    expectClean(await explore({
      name: 'foo', crdPaths: ['config/crd/bases'], setup: (mgr) => fooControllerSetup.setup(mgr, {}), peers: [deploymentStatusPeer],
      workload: [create(demo), create(foo), settle(), patch(foo, { spec: { replicas: 3 } }), settle(), remove(foo)],
      plans: { maxOccurrences: occurrences(3) },
    }), 30);
  });
});

describe('explore: the Deployment controller (no finding in any plan)', () => {
  test('create, a template change, scale', async () => {
    const web = {
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { namespace: 'demo', name: 'web' },
      spec: { replicas: 1, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'web:1' }] } } },
    };
    expectClean(await explore({
      name: 'deployment', crdPaths: ['config/crd/bases'], setup: (mgr) => deploymentControllerSetup.setup(mgr, {}), peers: [deploymentStatusPeer],
      // It writes nothing but Events (never compared: best effort, and a restart adopts rollouts silently by design):
      // its Event writes are the plan points, and what must hold under every plan is that no rollout is reported
      // stalled — none stalls here.
      plans: { events: true, maxOccurrences: occurrences(3) },
      invariants: [{
        name: 'no Warning Event (no rollout stalled)',
        check: (end) => end.objects<KubeObject & { type?: string; reason?: string }>(coreResources.events).filter((e) => e.type === 'Warning').map((e) => e.reason).join(', ') || undefined,
      }],
      workload: [
        create(demo), create(web), settle(), patch(web, { spec: { template: { spec: { containers: [{ name: 'web', image: 'web:2' }] } } } }), settle(),
        patch(web, { spec: { replicas: 3 } }), settle(),
      ],
    }), 20);
  });
});

// ---- Network ---------------------------------------------------------------------------------------------------------

/**
 * The Neutron double's inventory with every UUID (the Networks' uids, in tags and descriptions) replaced by its rank of
 * first appearance: uids differ between executions (a Network created after Events got other draws of the seeded
 * source), what they link does not — the invariant `neutronMatchesNetworks` checks each against the stored Network.
 */
function inventoryWithoutUids(neutron: NeutronDouble): unknown {
  const ranks = new Map<string, string>();
  const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
  return JSON.parse(JSON.stringify(neutron.inventory()).replace(uuid, (u) => {
    if (!ranks.has(u)) ranks.set(u, `<uid ${ranks.size + 1}>`);
    return ranks.get(u) ?? u;
  })) as unknown;
}

/**
 * What must hold in every end state, whatever the path: every Neutron network and subnet is tagged with the uid of a
 * stored Network of its name (nothing leaked, nothing of a deleted or re-created Network kept); every stored Network
 * has at most one Neutron network; a Ready one names it and its subnets in status, and they match its spec.
 */
function neutronMatchesNetworks(version: 'v1' | 'v2'): Invariant<NeutronDouble> {
  return {
    name: 'Neutron matches the Networks',
    check(end: ExploreEndState<NeutronDouble>): string | undefined {
      const nets = version === 'v1' ? end.objects<Network>(networkResource) : end.objects<NetworkV2>(networkV2Resource);
      const byTag = new Map(nets.map((n) => [uidTag(n.metadata?.uid ?? ''), n]));
      const inventory: NetworkInventory[] = end.world.inventory();
      for (const n of inventory) {
        const owner = n.tags.map((t) => byTag.get(t)).find((o) => o !== undefined);
        if (!owner || neutronName(owner) !== n.name) return `Neutron network ${n.id} (${n.name}, tags ${n.tags.join(',')}) belongs to no stored Network`;
        for (const s of n.subnets) if (!s.tags.includes(uidTag(owner.metadata?.uid ?? ''))) return `subnet ${s.id} of ${n.id} is not tagged as its Network's`;
      }
      for (const net of nets) {
        const tag = uidTag(net.metadata?.uid ?? '');
        const mine = inventory.filter((n) => n.tags.includes(tag));
        if (mine.length > 1) return `${neutronName(net)} has ${mine.length} Neutron networks: ${mine.map((n) => n.id).join(', ')}`;
        const ready = net.status?.conditions?.find((c) => c.type === 'Ready');
        if (ready?.status !== 'True' || net.status?.observedGeneration !== net.metadata?.generation) continue;
        const [network] = mine;
        if (!network || network.id !== net.status?.networkID) return `${neutronName(net)} is Ready with networkID ${net.status?.networkID ?? 'none'}, Neutron has ${network?.id ?? 'none'}`;
        const want = version === 'v1'
          ? [{ cidr: (net as Network).spec?.cidr ?? '', gateway: (net as Network).spec?.gateway, id: (net as Network).status?.subnetID }]
          : ((net as NetworkV2).spec?.subnets ?? []).map((s) => ({ ...s, id: (net as NetworkV2).status?.subnets?.find((x) => x.cidr === s.cidr)?.subnetID }));
        if (network.subnets.length !== want.length) return `${neutronName(net)} wants ${want.length} subnet(s), Neutron has ${network.subnets.length}`;
        for (const w of want) {
          const s = network.subnets.find((x) => x.id === w.id);
          const [want, has] = [parseCIDR(w.cidr), parseCIDR(s?.cidr ?? '')];
          if (!s || !want || !has || !sameCIDR(want, has) || (w.gateway !== undefined && !sameIP(s.gateway, w.gateway))) {
            return `${neutronName(net)} is Ready with subnet ${w.id ?? 'none'} for ${w.cidr}${w.gateway ? ` gateway ${w.gateway}` : ''}; Neutron has ${JSON.stringify(network.subnets.map((x) => [x.id, x.cidr, x.gateway]))}`;
          }
        }
      }
      return undefined;
    },
  };
}

/** Explores the Network controller (`version`) through its setup, on a fresh NeutronDouble per execution. */
function exploreNetwork(version: 'v1' | 'v2', workload: Parameters<typeof explore>[0]['workload'], concurrency: number): Promise<ExploreReport> {
  return explore<NeutronDouble>({
    name: `network ${version} (concurrency ${concurrency})`,
    crdPaths: [version === 'v1' ? 'config/crd/bases' : 'config/crd/v2'],
    world: (points) => new NeutronDouble({ points }),
    externalState: inventoryWithoutUids,
    invariants: [neutronMatchesNetworks(version)],
    // createSettleMs: the sweep after a create runs within explore's horizon (1 s), so it is part of every fixpoint;
    // the drift check (60 s) is scheduled, not pending: periodic work has no fixpoint.
    setup: (mgr, neutron) => networkControllerSetup.setup(mgr, {
      concurrency, neutron: { cloudConfig: undefined, cloud: undefined, client: neutron, createSettleMs: 5, driftCheckMs: 60_000, networkVersion: version },
    }),
    workload,
    // Neutron's writes are plan points too (the double routes them through explore's points): 2 occurrences of each
    // write signature keep make test's run bounded.
    plans: { maxOccurrences: occurrences(2) },
  });
}

describe('explore: the Network controller with a Neutron double (no finding in any plan)', () => {
  const v1 = (name: string, spec: Network['spec']): Network => ({ apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { namespace: 'demo', name }, spec });
  const a = v1('a', { cidr: '10.0.0.0/24', gateway: '10.0.0.1' });
  const b = v1('b', { cidr: '10.1.0.0/24' });
  const c = v1('c', { cidr: '10.2.0.0/24' });
  // Three Networks made; a gateway moved in place, a CIDR widened (the old subnet overlaps: deleted first) and one
  // moved to a disjoint CIDR (created first); one deleted through the finalizer while another changes.
  const workload = [
    create(demo), create(a), create(b), create(c), settle(),
    patch(a, { spec: { gateway: '10.0.0.254' } }), patch(b, { spec: { cidr: '10.1.0.0/23' } }), settle(),
    patch(c, { spec: { cidr: '10.3.0.0/24' } }), remove(b), settle(),
  ];

  // Two workers: besides every plan, a crash at one reconcile's write can cut another one between two Neutron calls
  // (about a third of the crash plans do: the double's `cut`).
  test('v1: create, gateway and CIDR changes, deletion', async (t) => {
    expectClean(await exploreNetwork('v1', workload, 2), 65, t);
  });

  test('v2 (dual-stack): created with two subnets, the IPv4 gateway moved and the IPv6 subnet dropped, another IPv6 one added', async (t) => {
    const d: NetworkV2 = {
      apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { namespace: 'demo', name: 'd' },
      spec: { subnets: [{ cidr: '10.4.0.0/24', gateway: '10.4.0.1' }, { cidr: 'fd00:4::/64' }] },
    };
    const v4 = { cidr: '10.4.0.0/24', gateway: '10.4.0.254' };
    expectClean(await exploreNetwork('v2', [
      create(demo), create(d), settle(),
      patch(d, { spec: { subnets: [v4] } }), settle(),
      patch(d, { spec: { subnets: [v4, { cidr: 'fd00:5::/64' }] } }), settle(),
    ], 1), 25, t);
  });
});

// ---- The examples ----------------------------------------------------------------------------------------------------
// Each imports the package by its name, as a user's project does: resolve it to this repository's sources (the
// condition tsconfig.json's customConditions name), so the examples and explore share one copy of the runtime.
// examples/webhook is not here: it declares admission webhooks and no controller — nothing writes, so explore has no
// plan to derive, and the in-memory API server does not call webhooks (its requests are the FakeClient's, without
// admission): examples/webhook/main.test.ts tests it on a real API server.
registerHooks({ resolve: (specifier, context, next) => next(specifier, { ...context, conditions: [...context.conditions, 'ts-controller-manager-source'] }) });
const { setupCopier } = await import('../examples/configmap-copier/main.ts');
const { setupMemcached } = await import('../examples/memcached/main.ts');

describe('explore: the examples (no finding in any plan)', () => {
  test('configmap-copier: two sources copied, one changed, a namespace starts and one stops receiving, a source deleted', async (t) => {
    const namespace = (name: string, receive: boolean): Namespace => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: receive ? { 'copier.example.com/receive': 'true' } : {} } });
    const source = (name: string, data: Record<string, string>): ConfigMap => ({
      apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'apps', name, labels: { 'copier.example.com/source': 'true' } }, data,
    });
    const settings = source('settings', { level: 'info' });
    const flags = source('flags', { beta: 'on' });
    expectClean(await explore({
      name: 'configmap-copier', setup: (mgr) => setupCopier(mgr),
      workload: [
        create(namespace('apps', false)), create(namespace('r1', true)), create(namespace('r2', false)), create(settings), create(flags), settle(),
        patch(settings, { data: { level: 'debug' } }), patch(namespace('r2', false), { metadata: { labels: { 'copier.example.com/receive': 'true' } } }), settle(),
        patch(namespace('r1', true), { metadata: { labels: { 'copier.example.com/receive': null } } }), remove(flags), settle(),
      ],
    }), 90, t);
  });

  test('memcached (server-side apply): two made, one scaled, one deleted through its finalizer', async (t) => {
    const memcached = (name: string, size: number): Memcached => ({ apiVersion: 'example.ts-controller-manager.io/v1alpha1', kind: 'Memcached', metadata: { namespace: 'demo', name }, spec: { size } });
    expectClean(await explore({
      name: 'memcached', crdPaths: ['examples/memcached/crd.yaml'], setup: (mgr) => setupMemcached(mgr), peers: [deploymentStatusPeer],
      workload: [create(demo), create(memcached('sessions', 1)), create(memcached('cache', 2)), settle(), patch(memcached('sessions', 1), { spec: { size: 3 } }), remove(memcached('cache', 2)), settle()],
      // Every reconcile applies the Deployment again (a no-op apply when nothing changed): the apply that scales it is
      // the 5th of its signature, but the 2nd that changes something — within the cap (plans.ts counts both).
      plans: { maxOccurrences: occurrences(3) },
    }), 150, t);
  });
});
