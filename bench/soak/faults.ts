/**
 * The endurance bench's faults, each with what it measures about the recovery:
 *
 *  - kube-apiserver CRASH (SIGKILL, then started again) and GRACEFUL restart (SIGTERM, waited for up to 90 s, then
 *    started again): from the moment the new kube-apiserver is ready, how long until every informer of every replica
 *    holds a write made right then (the probe objects' annotation: its resourceVersion or a later one) — "caches
 *    watching again" — and until the leader reconciled a change made right then (the probe Foo's replicas reach its
 *    Deployment) — "reconciles again"; whether a replica exited meanwhile (a lost Lease exits by design).
 *  - etcd COMPACTION: the managers' connections are cut (TcpProxy) for `cutMs`, etcd is compacted to its current
 *    revision meanwhile, and the connections restored: watches of Networks (no watch cache: env.ts) resume from a
 *    compacted revision, get 410 and relist. Measured: relists that followed, and the time until caches hold a write
 *    made at the restore.
 *  - neutron-server ERRORS (a share of requests answered 503 by the NeutronProxy) and SLOWNESS (a share delayed by up
 *    to `maxDelayMs`, beyond the client's 10 s timeout: the request still reaches Neutron, late — a create with an
 *    unknown outcome) for a window: counted.
 *  - the LEADER KILLED (SIGKILL): how long until the new leader reconciled the probe change.
 *
 * Probe objects (`probe` Foo, `probe-d` Deployment, `probe-n` Network, label soak=probe, in the first namespace) are
 * never churned; the bench owns them.
 */
import { connect } from 'node:net';
import { isAlive } from '../../test/cluster/controlplane.ts';
import { collectionPath, objectPath } from '../../pkg/apimachinery/paths.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import type { InformerDebug } from '../../pkg/informerfactory/debug.ts';
import { CHURN_LABEL, deployment, resources, type Kind } from './churn.ts';
import type { SoakEnv } from './env.ts';
import type { Replica } from './replicas.ts';

const PROBE: Record<Kind, string> = { foo: 'probe', deployment: 'probe-d', network: 'probe-n' };
/** resourceId of each probe's resource, as /debug/informers names it. */
const PROBE_RESOURCE: Record<Kind, string> = {
  foo: 'foos.samplecontroller.k8s.io/v1alpha1', deployment: 'deployments.apps/v1', network: 'networks.samplecrd.k8s.io/v1',
};

/** What one recovery took, per replica (ms from the fault's end; undefined: not within the timeout). */
export interface Recovery {
  /** ms until every informer of the replica held the probe write. */
  cachesMs: Record<string, number | undefined>;
  /** ms until the leader reconciled the probe change. */
  reconcileMs: number | undefined;
  /** Replica incarnations that exited during the fault or the recovery. */
  exits: string[];
  /** Lists (relists) the replicas began during the fault and recovery, summed. */
  lists: number;
}

export interface FaultRecord {
  kind: 'apiserver-crash' | 'apiserver-graceful' | 'compaction' | 'neutron-errors' | 'neutron-slow' | 'leader-kill';
  at: number;
  /** How long the fault itself took (ms): the API server down, the cut, the window. */
  durationMs: number;
  recovery?: Recovery;
  /** Requests the NeutronProxy refused or delayed. */
  affected?: number;
  detail?: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves once nothing accepts connections on host:port (polled every 50 ms), or after `timeoutMs`. */
async function waitPortFree(host: string, port: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const listening = await new Promise<boolean>((resolve) => {
      const socket = connect({ host, port });
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (!listening) return;
    await sleep(50);
  }
}

export class Faults {
  readonly records: FaultRecord[] = [];
  private readonly env: SoakEnv;
  private readonly replicas: readonly Replica[];
  private readonly log: (msg: string) => void;
  private probeReplicas = 1;
  private touchSeq = 0;
  private readonly recoveryTimeoutMs: number;

  constructor(env: SoakEnv, replicas: readonly Replica[], log: (msg: string) => void, recoveryTimeoutMs = 180_000) {
    this.env = env;
    this.replicas = replicas;
    this.log = log;
    this.recoveryTimeoutMs = recoveryTimeoutMs;
  }

  /** Creates the probe objects (before the managers start). */
  async createProbes(): Promise<void> {
    const ns = this.env.namespaces[0] ?? 'default';
    const metadata = (name: string): Record<string, unknown> => ({ name, labels: { [CHURN_LABEL]: 'probe' } });
    const bodies: Record<Kind, KubeObject> = {
      foo: { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: metadata(PROBE.foo), spec: { deploymentName: PROBE.foo, replicas: 1 } } as KubeObject,
      deployment: deployment(PROBE.deployment, metadata(PROBE.deployment), 1),
      network: { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: metadata(PROBE.network), spec: { cidr: '10.255.255.0/24' } } as KubeObject,
    };
    for (const k of Object.keys(bodies) as Kind[]) await this.env.rest.json('POST', collectionPath(resources[k], ns), { body: bodies[k] });
  }

  /** Annotates every probe object; resolves the resourceVersion of each write by resourceId (retried while the API server is coming up). */
  private async touch(): Promise<Map<string, bigint>> {
    const ns = this.env.namespaces[0] ?? 'default';
    const rvs = new Map<string, bigint>();
    const seq = String(this.touchSeq++);
    for (const k of Object.keys(PROBE) as Kind[]) {
      for (let attempt = 0; ; attempt++) {
        try {
          const o = await this.env.rest.json<KubeObject>('PATCH', objectPath(resources[k], ns, PROBE[k]), {
            body: { metadata: { annotations: { 'soak/probe': seq } } }, contentType: 'application/merge-patch+json', timeoutMs: 10_000,
          });
          rvs.set(PROBE_RESOURCE[k], BigInt(o.metadata?.resourceVersion ?? '0'));
          break;
        } catch (err) {
          if (attempt > 100) throw err;
          await sleep(100);
        }
      }
    }
    return rvs;
  }

  /** Changes the probe Foo's replicas (1 ↔ 2); resolves the value its Deployment must reach. */
  private async flipProbeFoo(): Promise<number> {
    this.probeReplicas = this.probeReplicas === 1 ? 2 : 1;
    const ns = this.env.namespaces[0] ?? 'default';
    for (let attempt = 0; ; attempt++) {
      try {
        await this.env.rest.json('PATCH', objectPath(resources.foo, ns, PROBE.foo), {
          body: { spec: { replicas: this.probeReplicas } }, contentType: 'application/merge-patch+json', timeoutMs: 10_000,
        });
        return this.probeReplicas;
      } catch (err) {
        if (attempt > 100) throw err;
        await sleep(100);
      }
    }
  }

  /** Lists begun so far, per replica incarnation (a new incarnation counts from zero). */
  private async listsNow(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const r of this.replicas) {
      const informers = await r.debug<InformerDebug[]>('/debug/informers');
      if (!informers) continue;
      let n = 0;
      for (const inf of informers) for (const rf of inf.reflectors) n += rf.lists;
      out.set(r.incarnation, n);
    }
    return out;
  }

  /**
   * From `t0` (performance.now()): writes the probes, then polls every 100 ms until each running replica's informers
   * hold them and the probe Foo's Deployment has the new replicas (both bounded by the recovery timeout).
   */
  private async recover(t0: number, exitsBefore: number, listsBefore: Map<string, number>): Promise<Recovery> {
    const rvs = await this.touch();
    const want = await this.flipProbeFoo();
    const ns = this.env.namespaces[0] ?? 'default';
    const cachesMs: Record<string, number | undefined> = Object.fromEntries(this.replicas.map((r) => [r.name, undefined]));
    let reconcileMs: number | undefined;
    const deadline = t0 + this.recoveryTimeoutMs;
    while (performance.now() < deadline && (reconcileMs === undefined || Object.values(cachesMs).some((v) => v === undefined))) {
      for (const r of this.replicas) {
        if (cachesMs[r.name] !== undefined) continue;
        const informers = await r.debug<InformerDebug[]>('/debug/informers');
        if (!informers) continue;
        const caught = [...rvs].every(([res, rv]) => {
          const inf = informers.find((i) => i.resource === res);
          return inf !== undefined && inf.resourceVersion !== '' && BigInt(inf.resourceVersion) >= rv;
        });
        if (caught) cachesMs[r.name] = performance.now() - t0;
      }
      if (reconcileMs === undefined) {
        const d = await this.env.rest.json<{ spec?: { replicas?: number } }>('GET', objectPath(resources.deployment, ns, PROBE.foo), { timeoutMs: 5000 }).catch(() => undefined);
        if (d?.spec?.replicas === want) reconcileMs = performance.now() - t0;
      }
      await sleep(100);
    }
    const exits = this.replicas.flatMap((r) => r.exits).sort((a, b) => a.at - b.at).slice(exitsBefore).map((e) => e.incarnation);
    let lists = 0;
    for (const [inc, n] of await this.listsNow()) lists += n - (listsBefore.get(inc) ?? 0);
    return { cachesMs, reconcileMs, exits, lists };
  }

  private exitCount(): number {
    return this.replicas.reduce((n, r) => n + r.exits.length, 0);
  }

  /** kube-apiserver stopped (SIGKILL = crash, SIGTERM = graceful, waited for) and started again; then the recovery. */
  async restartApiserver(graceful: boolean): Promise<FaultRecord> {
    const at = Date.now();
    const exitsBefore = this.exitCount();
    const listsBefore = await this.listsNow();
    const cp = this.env.cp;
    const pid = cp.state.components['kube-apiserver']?.pid;
    const t0 = performance.now();
    if (pid) {
      try {
        process.kill(-pid, graceful ? 'SIGTERM' : 'SIGKILL');
      } catch {
        process.kill(pid, graceful ? 'SIGTERM' : 'SIGKILL');
      }
      const deadline = performance.now() + 90_000;
      while (isAlive(pid) && performance.now() < deadline) await sleep(50);
    }
    await cp.stopComponent('kube-apiserver'); // SIGKILLs what is left, forgets the pid
    // The leader of a killed Go process shows as a zombie (isAlive false) while its other threads still exit and hold
    // its listening socket: a restart at once failed with "bind: address already in use" (seen after ~15 min).
    const api = new URL(cp.server);
    await waitPortFree(api.hostname, Number(api.port), 60_000);
    const stoppedMs = performance.now() - t0;
    await cp.startComponent('kube-apiserver');
    const up = performance.now();
    const recovery = await this.recover(up, exitsBefore, listsBefore);
    const rec: FaultRecord = {
      kind: graceful ? 'apiserver-graceful' : 'apiserver-crash', at, durationMs: up - t0, recovery,
      detail: `stopped in ${(stoppedMs / 1000).toFixed(1)} s, serving (/livez/ping) ${((up - t0 - stoppedMs) / 1000).toFixed(1)} s later`,
    };
    this.records.push(rec);
    this.log(`fault ${rec.kind}: down ${(rec.durationMs / 1000).toFixed(1)} s (${rec.detail}); caches ${fmt(recovery.cachesMs)}, reconcile ${fmtMs(recovery.reconcileMs)}, exits ${recovery.exits.join(',') || 'none'}, lists +${recovery.lists}`);
    return rec;
  }

  /** The managers cut off for `cutMs` while etcd is compacted; then the recovery (410 → relist of Networks). */
  async compaction(cutMs: number): Promise<FaultRecord> {
    const at = Date.now();
    const exitsBefore = this.exitCount();
    const listsBefore = await this.listsNow();
    const t0 = performance.now();
    this.env.apiProxy.cut();
    // Writes the managers miss while cut off, then the compaction past them — inside the cut's `cutMs`, not after it:
    // compacting takes longer as etcd's history grows (1–2 s after an hour), and a cut that grew with it (5.3 → 6.7 s
    // over 5 cycles of the 70-min run of 29 Nov 2026 07:27 UTC) cost the leader its Lease (renew deadline 10 s).
    await this.touch();
    const revision = await this.env.cp.compactEtcd();
    await sleep(Math.max(0, cutMs - (performance.now() - t0)));
    this.env.apiProxy.restore();
    const up = performance.now();
    const recovery = await this.recover(up, exitsBefore, listsBefore);
    const rec: FaultRecord = { kind: 'compaction', at, durationMs: up - t0, recovery, detail: `etcd compacted at revision ${revision}` };
    this.records.push(rec);
    this.log(`fault compaction: cut ${(rec.durationMs / 1000).toFixed(1)} s, ${rec.detail}; caches ${fmt(recovery.cachesMs)}, reconcile ${fmtMs(recovery.reconcileMs)}, lists +${recovery.lists}`);
    return rec;
  }

  /** `share` of the managers' Neutron requests answered 503 for `ms`. */
  async neutronErrors(ms: number, share: number, signal?: AbortSignal): Promise<FaultRecord> {
    const at = Date.now();
    let affected = 0;
    this.env.neutronProxy.refuse = () => (Math.random() < share ? (affected++, 503) : undefined);
    await sleep(ms).finally(() => (this.env.neutronProxy.refuse = undefined));
    void signal;
    const rec: FaultRecord = { kind: 'neutron-errors', at, durationMs: ms, affected, detail: `${Math.round(share * 100)} % answered 503` };
    this.records.push(rec);
    this.log(`fault neutron-errors: ${affected} requests answered 503 in ${(ms / 1000).toFixed(0)} s`);
    return rec;
  }

  /** `share` of the managers' Neutron requests delayed by 1 s … `maxDelayMs` (beyond the client's timeout) for `ms`. */
  async neutronSlow(ms: number, share: number, maxDelayMs: number): Promise<FaultRecord> {
    const at = Date.now();
    let affected = 0;
    this.env.neutronProxy.delay = () => (Math.random() < share ? (affected++, 1000 + Math.random() * (maxDelayMs - 1000)) : 0);
    await sleep(ms).finally(() => (this.env.neutronProxy.delay = undefined));
    const rec: FaultRecord = { kind: 'neutron-slow', at, durationMs: ms, affected, detail: `${Math.round(share * 100)} % delayed 1–${maxDelayMs / 1000} s` };
    this.records.push(rec);
    this.log(`fault neutron-slow: ${affected} requests delayed in ${(ms / 1000).toFixed(0)} s`);
    return rec;
  }

  /** The leader SIGKILLed; then how long until the probe change is reconciled (by the other replica, or the restarted one). */
  async killLeader(): Promise<FaultRecord> {
    const at = Date.now();
    const exitsBefore = this.exitCount();
    const listsBefore = await this.listsNow();
    let leader: Replica | undefined;
    for (const r of this.replicas) if (await r.isLeader()) leader = r;
    const killed = leader?.incarnation;
    const t0 = performance.now();
    leader?.kill();
    const recovery = await this.recover(t0, exitsBefore, listsBefore);
    const rec: FaultRecord = { kind: 'leader-kill', at, durationMs: 0, recovery, detail: killed ? `killed ${killed}` : 'no leader found' };
    this.records.push(rec);
    this.log(`fault leader-kill: ${rec.detail}; reconcile ${fmtMs(recovery.reconcileMs)}, caches ${fmt(recovery.cachesMs)}`);
    return rec;
  }
}

const fmtMs = (ms: number | undefined): string => (ms === undefined ? 'not within the timeout' : `${(ms / 1000).toFixed(1)} s`);
const fmt = (m: Record<string, number | undefined>): string => Object.entries(m).map(([k, v]) => `${k} ${fmtMs(v)}`).join(', ');
