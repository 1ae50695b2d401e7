/**
 * A checkpoint of the endurance bench, taken while the churn is paused: first every object must converge, then each
 * replica's caches must equal the API server's state.
 *
 * Converged (polled until true, or the timeout):
 *  - every Foo has its Deployment (`spec.deploymentName`, controlled by the Foo) at the Foo's replicas, Ready, and the
 *    Foo's `status.availableReplicas` equals the Deployment's;
 *  - no Deployment controlled by a Foo that no longer exists (kube-controller-manager's garbage collector);
 *  - every Network Ready=True at its generation (condition and status), with its Neutron ids; none left being deleted;
 *  - Neutron holds exactly the networks it should: per live Network one network tagged `k8s-uid:<uid>` (its
 *    `status.networkID`) with one subnet of the Network's CIDR and gateway; no tagged network of a Network that is
 *    gone (leaked), no second one of a Network (duplicated), and no network the controller made without its tag (its
 *    description names a UID) left over;
 *  - the leader's Deployment controller reports exactly the Deployments that exist, each `complete`
 *    (deployment_rollout_state);
 *  - every standby's work queues are empty (workqueue_depth): a standby queues nothing (pkg/runtime/builder.ts,
 *    "Standby"), and what it would queue nobody takes — a key there is a leak.
 * Caches equal (polled, after convergence): for every informer of every running replica (/debug/informers?keys=1),
 * the keys and resourceVersions equal a LIST of the same resource, scope and selectors from kube-apiserver.
 *
 * What it reads comes from kube-apiserver and neutron-server directly (never through the proxies or the managers'
 * code): the managers are what is checked.
 */
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { collectionPath } from '../../pkg/apimachinery/paths.ts';
import type { ResourceType } from '../../pkg/apimachinery/resource.ts';
import type { RestClient } from '../../pkg/client/rest.ts';
import type { InformerDebug } from '../../pkg/informerfactory/debug.ts';
import { neutronApi } from '../../test/helpers/neutron.ts';
import { resources } from './churn.ts';
import { parseSamples } from './promtext.ts';
import type { Replica } from './replicas.ts';

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };
type Json = Record<string, unknown>;

export interface ConvergenceReport {
  /** What is not converged yet, one line each (empty = converged). */
  problems: string[];
  counts: { foos: number; deployments: number; networks: number; neutronNetworks: number; leaked: number; duplicated: number; untagged: number };
}

export interface CacheMismatch { replica: string; resource: string; missing: number; extra: number; stale: number; examples: string[] }

export interface CheckpointResult {
  at: number;
  converged: boolean;
  convergeMs: number;
  report: ConvergenceReport;
  cachesEqual: boolean;
  cacheMs: number;
  /** Informers compared (replica × informer). */
  cachesCompared: number;
  mismatches: CacheMismatch[];
}

async function listAll(rest: RestClient, resource: ResourceType, query: Record<string, string> = {}): Promise<Obj[]> {
  const out: Obj[] = [];
  let cont: string | undefined;
  do {
    const page = await rest.json<{ items: Obj[]; metadata?: { continue?: string } }>('GET', collectionPath(resource, undefined), {
      query: { limit: '500', ...query, ...(cont ? { continue: cont } : {}) },
    });
    out.push(...page.items);
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return out;
}

const key = (o: KubeObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** One look at the whole world: what is not converged (see the module comment). */
export async function convergence(rest: RestClient, neutronEndpoint: string, leader: Replica | undefined, standbys: readonly Replica[] = []): Promise<ConvergenceReport> {
  const problems: string[] = [];
  const [foos, deployments, networks] = await Promise.all([
    listAll(rest, resources.foo), listAll(rest, resources.deployment), listAll(rest, resources.network),
  ]);
  const deps = new Map(deployments.map((d) => [key(d), d]));
  const fooUids = new Set(foos.map((f) => f.metadata?.uid));
  for (const f of foos) {
    if (f.metadata?.deletionTimestamp) continue;
    const d = deps.get(`${f.metadata?.namespace}/${str(f.spec?.['deploymentName'])}`);
    const want = Number(f.spec?.['replicas'] ?? 1);
    if (!d) problems.push(`Foo ${key(f)}: no Deployment`);
    else if (!d.metadata?.ownerReferences?.some((r) => r.controller && r.uid === f.metadata?.uid)) problems.push(`Foo ${key(f)}: Deployment not controlled by it`);
    else if (Number(d.spec?.['replicas']) !== want) problems.push(`Foo ${key(f)}: Deployment replicas ${String(d.spec?.['replicas'])}, want ${want}`);
    else if (Number(d.status?.['availableReplicas'] ?? 0) !== want || Number(d.status?.['observedGeneration'] ?? 0) < Number(d.metadata?.generation ?? 0)) {
      problems.push(`Foo ${key(f)}: Deployment not rolled out (available ${Number(d.status?.['availableReplicas'] ?? 0)} of ${want})`);
    } else if (Number(f.status?.['availableReplicas'] ?? -1) !== want) problems.push(`Foo ${key(f)}: status.availableReplicas ${String(f.status?.['availableReplicas'])}, want ${want}`);
  }
  for (const d of deployments) {
    const owner = d.metadata?.ownerReferences?.find((r) => r.controller && r.kind === 'Foo');
    if (owner && !fooUids.has(owner.uid)) problems.push(`Deployment ${key(d)}: its Foo is gone (not garbage-collected yet)`);
    if (!owner && (Number(d.status?.['availableReplicas'] ?? 0) !== Number(d.spec?.['replicas'] ?? 1) || Number(d.status?.['updatedReplicas'] ?? 0) !== Number(d.spec?.['replicas'] ?? 1))) {
      problems.push(`Deployment ${key(d)}: not rolled out`);
    }
  }

  // Networks and Neutron.
  const neutron = neutronApi(neutronEndpoint);
  const [nNets, nSubnets] = await Promise.all([neutron.networks(), neutron.subnets()]);
  const live = new Map<string, Obj>();
  for (const n of networks) {
    if (n.metadata?.deletionTimestamp) {
      problems.push(`Network ${key(n)}: still being deleted`);
      continue;
    }
    live.set(n.metadata?.uid ?? '', n);
    const ready = (n.status?.['conditions'] as { type: string; status: string; observedGeneration?: number; reason?: string }[] | undefined)?.find((c) => c.type === 'Ready');
    const gen = n.metadata?.generation;
    if (ready?.status !== 'True' || ready.observedGeneration !== gen || n.status?.['observedGeneration'] !== gen) {
      problems.push(`Network ${key(n)}: not Ready at generation ${gen} (${ready?.status ?? 'no condition'} ${ready?.reason ?? ''} at ${ready?.observedGeneration ?? '-'})`);
    }
  }
  const byUid = new Map<string, Json[]>();
  let untagged = 0;
  for (const net of nNets) {
    const tag = ((net['tags'] as string[] | undefined) ?? []).find((t) => t.startsWith('k8s-uid:'));
    if (!tag) {
      if (/uid [0-9a-f-]{36}/.test(str(net['description']))) {
        untagged++;
        problems.push(`Neutron network ${str(net['id'])} (${str(net['name'])}): made by the controller, never tagged`);
      }
      continue;
    }
    const uid = tag.slice('k8s-uid:'.length);
    byUid.set(uid, [...(byUid.get(uid) ?? []), net]);
  }
  let leaked = 0;
  let duplicated = 0;
  for (const [uid, nets] of byUid) {
    const n = live.get(uid);
    if (!n) {
      leaked += nets.length;
      problems.push(`Neutron: ${nets.length} network(s) of a Network that is gone (uid ${uid}): leaked`);
      continue;
    }
    if (nets.length > 1) {
      duplicated += nets.length - 1;
      problems.push(`Neutron: ${nets.length} networks of Network ${key(n)}: duplicated`);
    }
    const net = nets.find((x) => x['id'] === n.status?.['networkID']);
    if (!net) {
      problems.push(`Network ${key(n)}: status.networkID ${str(n.status?.['networkID'])} is not its tagged Neutron network`);
      continue;
    }
    const subs = nSubnets.filter((s) => s['network_id'] === net['id'] && ((s['tags'] as string[] | undefined) ?? []).includes(`k8s-uid:${uid}`));
    if (subs.length !== 1 || subs[0]?.['cidr'] !== n.spec?.['cidr'] || subs[0]?.['gateway_ip'] !== (n.spec?.['gateway'] ?? subs[0]?.['gateway_ip'])) {
      problems.push(`Network ${key(n)}: Neutron subnets ${JSON.stringify(subs.map((s) => [s['cidr'], s['gateway_ip']]))}, want [${String(n.spec?.['cidr'])}, ${String(n.spec?.['gateway'])}]`);
    }
  }
  for (const [uid, n] of live) if (!byUid.has(uid)) problems.push(`Network ${key(n)}: no Neutron network tagged with its uid`);

  // The leader's rollout observer: one series set per existing Deployment, each complete.
  const text = await leader?.current?.metrics().catch(() => undefined);
  if (!text) problems.push('no leader answering /metrics');
  else {
    const states = new Map<string, string>();
    for (const s of parseSamples(text)) {
      if (s.name === 'deployment_rollout_state' && s.value === 1) states.set(`${s.labels['namespace']}/${s.labels['deployment']}`, s.labels['state'] ?? '');
    }
    for (const d of deployments) {
      const st = states.get(key(d));
      if (st !== 'complete') problems.push(`Deployment ${key(d)}: the leader's rollout state is ${st ?? 'absent'}, want complete`);
    }
    const exist = new Set(deployments.map(key));
    const stale = [...states.keys()].filter((k) => !exist.has(k));
    if (stale.length) problems.push(`deployment_rollout_state: ${stale.length} series of Deployments that are gone (e.g. ${stale[0]})`);
  }
  for (const r of standbys) {
    const m = await r.current?.metrics().catch(() => undefined);
    if (!m || /^leader_election_master_status\{[^}]*\} 1$/m.test(m)) continue; // restarting, or leading meanwhile
    const queued = parseSamples(m).filter((x) => x.name === 'workqueue_depth').reduce((n, x) => n + x.value, 0);
    if (queued > 0) problems.push(`standby ${r.incarnation}: ${queued} keys queued (a standby queues nothing)`);
  }
  return {
    problems,
    counts: { foos: foos.length, deployments: deployments.length, networks: networks.length, neutronNetworks: nNets.length, leaked, duplicated, untagged },
  };
}

/** One comparison of every informer of every running replica with kube-apiserver (see the module comment). */
export async function compareCaches(rest: RestClient, replicas: readonly Replica[]): Promise<{ compared: number; mismatches: CacheMismatch[] }> {
  const mismatches: CacheMismatch[] = [];
  let compared = 0;
  for (const r of replicas) {
    const informers = await r.debug<InformerDebug[]>('/debug/informers?keys=1');
    if (!informers) {
      mismatches.push({ replica: r.incarnation, resource: '(all)', missing: 0, extra: 0, stale: 0, examples: ['/debug/informers did not answer'] });
      continue;
    }
    for (const inf of informers) {
      compared++;
      const [group, version] = inf.resource.includes('/') ? splitResource(inf.resource) : ['', inf.resource];
      const resource: ResourceType = { group, version, resource: inf.resource.split('.')[0]?.split('/')[0] ?? '', kind: inf.kind, namespaced: true };
      const scopes = inf.namespaces.length ? inf.namespaces : [undefined];
      const server = new Map<string, string>();
      for (const ns of scopes) {
        let cont: string | undefined;
        do {
          const page = await rest.json<{ items: Obj[]; metadata?: { continue?: string } }>('GET', collectionPath(resource, ns), {
            query: { limit: '500', ...(inf.labelSelector ? { labelSelector: inf.labelSelector } : {}), ...(inf.fieldSelector ? { fieldSelector: inf.fieldSelector } : {}), ...(cont ? { continue: cont } : {}) },
          });
          for (const o of page.items) server.set(o.metadata?.namespace ? key(o) : (o.metadata?.name ?? ''), o.metadata?.resourceVersion ?? '');
          cont = page.metadata?.continue || undefined;
        } while (cont);
      }
      const cache = new Map(Object.entries(inf.keys ?? {}));
      const missing = [...server.keys()].filter((k) => !cache.has(k));
      const extra = [...cache.keys()].filter((k) => !server.has(k));
      const stale = [...server].filter(([k, rv]) => cache.has(k) && cache.get(k) !== rv).map(([k]) => k);
      if (missing.length || extra.length || stale.length) {
        mismatches.push({
          replica: r.incarnation, resource: inf.resource, missing: missing.length, extra: extra.length, stale: stale.length,
          examples: [...missing.slice(0, 3).map((k) => `missing ${k}`), ...extra.slice(0, 3).map((k) => `extra ${k}`), ...stale.slice(0, 3).map((k) => `stale ${k} (cache ${cache.get(k)}, server ${server.get(k)})`)],
        });
      }
    }
  }
  return { compared, mismatches };
}

/** `foos.samplecontroller.k8s.io/v1alpha1` → [group, version]; `deployments.apps/v1` → ['apps', 'v1']; `configmaps/v1` → ['', 'v1']. */
function splitResource(id: string): [string, string] {
  const [plural, version] = id.split('/') as [string, string];
  const dot = plural.indexOf('.');
  return [dot < 0 ? '' : plural.slice(dot + 1), version];
}

/**
 * Waits (polling every 3 s) until everything converged, then until every cache equals the server; `timeoutMs` for
 * each. Records how long each took and what was still wrong at the end.
 */
export async function checkpoint(rest: RestClient, neutronEndpoint: string, replicas: readonly Replica[], leader: () => Promise<Replica | undefined>,
  opts: { convergeTimeoutMs: number; cacheTimeoutMs: number; signal?: AbortSignal }): Promise<CheckpointResult> {
  const at = Date.now();
  let report: ConvergenceReport = { problems: ['not looked yet'], counts: { foos: 0, deployments: 0, networks: 0, neutronNetworks: 0, leaked: 0, duplicated: 0, untagged: 0 } };
  const t0 = performance.now();
  while (!opts.signal?.aborted) {
    const lead = await leader();
    report = await convergence(rest, neutronEndpoint, lead, replicas.filter((r) => r !== lead)).catch((err: unknown) => ({ ...report, problems: [`looking failed: ${String(err)}`] }));
    if (report.problems.length === 0 || performance.now() - t0 > opts.convergeTimeoutMs) break;
    await new Promise((r) => setTimeout(r, 3000));
  }
  const convergeMs = performance.now() - t0;
  const t1 = performance.now();
  let caches = { compared: 0, mismatches: [] as CacheMismatch[] };
  while (!opts.signal?.aborted) {
    caches = await compareCaches(rest, replicas).catch((err: unknown) => ({ compared: 0, mismatches: [{ replica: '?', resource: '?', missing: 0, extra: 0, stale: 0, examples: [String(err)] }] }));
    if (caches.mismatches.length === 0 || performance.now() - t1 > opts.cacheTimeoutMs) break;
    await new Promise((r) => setTimeout(r, 3000));
  }
  return {
    at, converged: report.problems.length === 0, convergeMs, report: { ...report, problems: report.problems.slice(0, 30) },
    cachesEqual: caches.mismatches.length === 0, cacheMs: performance.now() - t1, cachesCompared: caches.compared, mismatches: caches.mismatches,
  };
}
