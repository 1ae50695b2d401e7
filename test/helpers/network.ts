/**
 * The set-up shared by the Network controller's integration tests (test/network*.test.ts, test/neutron-keystone.test.ts):
 * Network objects on the test control plane (create, read, patch, wait for conditions, Events), and a `NetworkTestBed`
 * — a private real neutron-server (optionally behind a counting `NeutronProxy`), the CRDs, the in-process Network
 * controller wired to it, and the namespaces the tests used, whose leftover Networks lose their finalizer at the end
 * (no controller is left to remove it).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Network, NetworkSpec } from '../../pkg/apis/samplecrd/v1/types.ts';
import type { ControlPlane } from '../cluster/controlplane.ts';
import { cluster, expectStatus, testNamespace, waitFor } from './cluster.ts';
import { installCRDs } from './crds.ts';
import { startControllers, type RunningControllers } from './manager.ts';
import { keystoneToken, NeutronProxy, neutronApi, startNeutron, type NeutronApi, type NeutronInstance, type StartNeutronOptions } from './neutron.ts';

/** neutron-server answers in 0.2–0.6 s per request on a loaded 2-core machine (seconds behind Keystone): be generous. */
export const CONVERGE = { timeoutMs: 180_000, intervalMs: 250 };

export const networksPath = (ns: string): string => `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks`;

export async function createNetwork(ns: string, name: string, spec: Network['spec']): Promise<Network> {
  return expectStatus<Network>(await cluster().request('POST', networksPath(ns), {
    apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name }, spec,
  }), 201, `create Network ${name}`);
}

export async function getNetwork(ns: string, name: string): Promise<Network | undefined> {
  const res = await cluster().get(`${networksPath(ns)}/${name}`);
  return res.status === 404 ? undefined : expectStatus<Network>(res, 200, `get Network ${name}`);
}

export async function patchSpec(ns: string, name: string, spec: Partial<NetworkSpec>): Promise<Network> {
  return expectStatus<Network>(await cluster().request('PATCH', `${networksPath(ns)}/${name}`, { spec },
    { headers: { 'content-type': 'application/merge-patch+json' } }), 200, `patch Network ${name}`);
}

export async function deleteNetwork(ns: string, name: string): Promise<void> {
  expectStatus(await cluster().request('DELETE', `${networksPath(ns)}/${name}`), 200, `delete Network ${name}`);
}

export const readyOf = (n: Network | undefined): { status: string; reason?: string; message?: string; observedGeneration?: number } | undefined =>
  n?.status?.conditions?.find((c) => c.type === 'Ready');

/**
 * The real-node proof that a Network reached Neutron (test/node.e2e.ts, test/helm.e2e.ts): waits (90 s) until Network
 * `ns/name` on `cp` is Ready=True (read through v1), then lists every network neutron-server has with Keystone's admin
 * token — no tag filter in the query, the count is judged here — and asserts that exactly one is tagged with the
 * object's uid. Returns that tag (`k8s-uid:<uid>`).
 */
export async function waitReadyInNeutron(cp: ControlPlane, ns: string, name: string, uid: string, neutron: NeutronInstance): Promise<string> {
  await waitFor(`the Network ${ns}/${name} Ready`, async () => {
    const res = await cp.get(`${networksPath(ns)}/${name}`);
    const conds = (JSON.parse(res.body) as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ?? [];
    return conds.some((c) => c.type === 'Ready' && c.status === 'True');
  }, { timeoutMs: 90_000, intervalMs: 500 });
  const tag = `k8s-uid:${uid}`;
  const admin = (await keystoneToken(neutron.keystoneUrl ?? '', 'admin')).token;
  const all = await neutronApi(neutron.endpoint, { 'x-auth-token': admin }).networks();
  const tagged = all.filter((n) => Array.isArray(n.tags) && (n.tags as unknown[]).includes(tag));
  assert.equal(tagged.length, 1, `one Neutron network tagged ${tag} among ${all.length}: ${JSON.stringify(all)}`);
  return tag;
}

/** Waits for Ready=True; with `generation`, at that generation (the condition's and the status's observedGeneration). */
export async function waitReady(ns: string, name: string, generation?: number): Promise<Network> {
  return waitFor(`Network ${name} Ready${generation === undefined ? '' : ` at generation ${generation}`}`, async () => {
    const n = await getNetwork(ns, name);
    const c = readyOf(n);
    if (c?.status !== 'True') return undefined;
    if (generation === undefined) return n;
    return c.observedGeneration === generation && n?.status?.observedGeneration === generation ? n : undefined;
  }, CONVERGE);
}

export async function waitCondition(ns: string, name: string, status: string, reason: string): Promise<Network> {
  return waitFor(`Network ${name} Ready=${status} ${reason}`, async () => {
    const n = await getNetwork(ns, name);
    const c = readyOf(n);
    return c?.status === status && c.reason === reason ? n : undefined;
  }, CONVERGE);
}

export interface CoreEvent { type: string; reason: string; message: string; count?: number; metadata: { resourceVersion: string } }

/** The Events of Network `name`, oldest first. */
export async function eventsFor(ns: string, name: string): Promise<CoreEvent[]> {
  const sel = encodeURIComponent(`involvedObject.kind=Network,involvedObject.name=${name}`);
  const list = expectStatus<{ items: CoreEvent[] }>(await cluster().get(`/api/v1/namespaces/${ns}/events?fieldSelector=${sel}`), 200, 'list events');
  return list.items.sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion));
}

export interface NetworkTestBedOptions extends StartNeutronOptions {
  /**
   * Put a counting NeutronProxy in front of neutron-server and write a clouds.yaml whose cloud `local` (auth none)
   * points at it (noauth servers only). Default false: the clouds.yaml hack/neutron/up.sh wrote.
   */
  proxy?: boolean;
}

/** A real neutron-server for one test file, and the namespaces its tests used. Create in `before`, `stop()` in `after`. */
export class NetworkTestBed {
  readonly neutron: NeutronInstance;
  /** Raw view of Neutron (no identity headers: noauth servers). */
  readonly api: NeutronApi;
  /** With `proxy: true`. */
  readonly proxy: NeutronProxy | undefined;
  /** clouds.yaml for the controller: the proxy's (cloud `local`) or up.sh's. */
  readonly cloudsYaml: string;
  private readonly namespaces: string[] = [];
  private crds: Promise<void> | undefined;

  private constructor(neutron: NeutronInstance, proxy: NeutronProxy | undefined, cloudsYaml: string) {
    this.neutron = neutron;
    this.api = neutronApi(neutron.endpoint);
    this.proxy = proxy;
    this.cloudsYaml = cloudsYaml;
  }

  static async start(opts: NetworkTestBedOptions = {}): Promise<NetworkTestBed> {
    const neutron = await startNeutron(opts);
    if (!opts.proxy) return new NetworkTestBed(neutron, undefined, neutron.cloudsYaml);
    const proxy = await NeutronProxy.start(neutron.endpoint);
    const cloudsYaml = join(mkdtempSync(join(tmpdir(), 'tscm-net-clouds-')), 'clouds.yaml');
    writeFileSync(cloudsYaml, `clouds:\n  local:\n    auth_type: none\n    auth:\n      endpoint: ${proxy.endpoint}\n    region_name: RegionOne\n`);
    return new NetworkTestBed(neutron, proxy, cloudsYaml);
  }

  /** A fresh test namespace (the CRDs installed first, once), remembered for the finalizer clean-up. */
  async namespace(t: TestContext, prefix: string): Promise<string> {
    await (this.crds ??= installCRDs());
    const ns = await testNamespace(t, prefix);
    this.namespaces.push(ns);
    return ns;
  }

  /**
   * The Network controller in-process (test/helpers/manager.ts's wiring) for `ns`, using `cloud` of `cloudsYaml`;
   * `createSettleMs` / `driftCheckMs` shorten its timers (NetworkReconcilerDeps).
   */
  startController(t: TestContext, ns: string, opts: { cloudsYaml?: string; cloud?: string; resyncPeriodMs?: number; concurrency?: number; createSettleMs?: number; driftCheckMs?: number } = {}): Promise<RunningControllers> {
    return startControllers(t, {
      namespace: ns, controllers: ['network'],
      neutron: {
        cloudConfig: opts.cloudsYaml ?? this.cloudsYaml, cloud: opts.cloud ?? 'local',
        ...(opts.createSettleMs !== undefined && { createSettleMs: opts.createSettleMs }),
        ...(opts.driftCheckMs !== undefined && { driftCheckMs: opts.driftCheckMs }),
      },
      ...(opts.resyncPeriodMs !== undefined && { resyncPeriodMs: opts.resyncPeriodMs }),
      ...(opts.concurrency !== undefined && { concurrency: opts.concurrency }),
    });
  }

  /** Removes the finalizer of every Network left in the tests' namespaces, closes the proxy, stops neutron-server. */
  async stop(): Promise<void> {
    for (const ns of this.namespaces) {
      const list = await cluster().get(networksPath(ns));
      if (list.status !== 200) continue;
      for (const n of (JSON.parse(list.body) as { items: Network[] }).items) {
        await cluster().request('PATCH', `${networksPath(ns)}/${n.metadata?.name ?? ''}`, { metadata: { finalizers: null } },
          { headers: { 'content-type': 'application/merge-patch+json' } });
      }
    }
    await this.proxy?.close();
    await this.neutron.stop();
  }
}
