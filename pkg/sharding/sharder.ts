/**
 * Sharder: the one elected replica that assigns every object of every sharded controller to a live shard
 * (assignment.ts is the protocol and its invariant; this file drives it). A Runnable every replica runs, NOT gated
 * by the shard Lease: it campaigns for the leader Lease and works only while it holds it.
 *
 *   shard Leases (label lease-of=<group>) ──▶ membership.ts observe/liveShards ──▶ HashRing ──┐
 *   primaries + owned objects (metadata only, every shard's) ──▶ one queue "controller|ns/name" ─┴▶ decide ──▶ label patch
 *
 * Contracts
 *  - Acts only as leader: its writes go through `writer`, whose write gate is the leader Lease's leadership signal
 *    (refused from the instant this process can no longer prove it leads). Losing the Lease rejects `start` (the
 *    Manager then exits the process, as on a lost shard or leader Lease): two sharders never patch at once, so a
 *    replica judged dead by one sharder is never given work by another.
 *  - Every patch carries the object's resourceVersion: a decision taken on a stale view fails with 409 and is taken
 *    again from the newer cache state (the informer's update event re-queues the object).
 *  - Caches hold metadata only (name, namespace, uid, resourceVersion, labels, ownerReferences, deletionTimestamp):
 *    the sharder watches every object but stores a few hundred bytes of each.
 *  - Membership is what THIS process observed (membership.ts): a new sharder treats every shard Lease it sees as live
 *    for one lease duration, so it never reassigns the objects of a shard that may still act. A membership change
 *    re-decides every object; an object event re-decides that object; objects being deleted are assigned too (a
 *    Network's finalizer needs a shard to remove it).
 *  - Owned objects follow their owner: before an owner is assigned to shard d its owned objects are labelled d; an
 *    owner settled on a shard has its owned objects' labels corrected to that shard (e.g. a Deployment created by
 *    hand with an ownerReference). Drains are for owners only.
 *  - One FIFO queue of "controller|namespace/name" for all controllers, `concurrency` decisions at once (label
 *    patches are the only I/O): the API server's write rate bounds how fast a membership change converges. On a
 *    membership change the objects of controllers that own other types are queued first, so an owned object that is
 *    also another controller's primary (a Foo's Deployment) gets both assignments in one patch (`follow`).
 *
 * Metrics: sharding_members (live shards), sharding_objects{controller,shard} (assignments in the sharder's view,
 * "" = unassigned), sharding_reassignments_total{controller,reason=new|drained|dead}, sharding_drain_duration_seconds
 * {controller} (drain label set → acknowledgement seen).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { keyOf, metaNamespaceKey, splitKey } from '../apimachinery/keys.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { controllerNameOf, controllerOf } from '../apimachinery/ownerref.ts';
import { apiGroupOf } from '../apimachinery/resource.ts';
import type { RequestCodec } from '../controller/request.ts';
import { isConflict, isNotFound, type RestClient } from '../client/rest.ts';
import { Controller, type Reconciler } from '../controller/controller.ts';
import { SharedInformerFactory } from '../informerfactory/factory.ts';
import { deletionHandlingKey } from '../informerfactory/object.ts';
import { objectPath } from '../apimachinery/paths.ts';
import { resourceId, type ResourceType } from '../apimachinery/resource.ts';
import type { SharedIndexInformer } from '../informerfactory/sharedinformer.ts';
import type { Logger } from '../log/logger.ts';
import type { LeaderElector } from '../manager/leaderelection.ts';
import type { Runnable } from '../manager/runnable.ts';
import { getOrCreate } from '../metrics/registry.ts';
import { decide, labelPatch, placementOf, shardLabel, drainLabel } from './assignment.ts';
import { liveShards, nextExpiry, observe, type Observation, type ShardLease } from './membership.ts';
import { HashRing } from './ring.ts';
import { leaseOfLabel } from './shard.ts';

/** A controller that shards: its name (the label suffix), its primary type and the types it owns. */
export interface ShardedController {
  name: string;
  primary: ResourceType;
  owned: readonly ResourceType[];
}

export interface SharderOptions {
  /** Campaigns for the leader Lease (the sharding group's name is its lease name). */
  elector: LeaderElector;
  /** Sharding group: the leader Lease's name; shard Leases carry lease-of=<group>. */
  group: string;
  /** Namespace of the shard Leases. */
  leaseNamespace: string;
  /** Ungated client for the sharder's informers. */
  reader: RestClient;
  /** Client gated by `elector.leadership`: the label patches. */
  writer: RestClient;
  /** Namespaces of the sharded objects ([] = all). */
  namespaces: readonly string[];
  /** Delete a shard Lease this long after it expired (ms; a released one at once). Default 10 min. */
  leaseGcAfterMs?: number;
  /** Concurrent decisions per controller. Default 16. */
  concurrency?: number;
  logger: Logger;
  registry: Registry;
}

/** A sharder work item: one object of one sharded controller. */
interface ShardRequest { controller: string; namespace: string; name: string }

const shardRequestCodec: RequestCodec<ShardRequest> = {
  key: (r) => `${r.controller}|${keyOf(r.namespace, r.name)}`,
  parse: (key) => {
    const bar = key.indexOf('|');
    return { controller: key.slice(0, bar), ...splitKey(key.slice(bar + 1)) };
  },
};

const leaseResource: ResourceType = { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true };
const ownerIndex = 'sharding-owner';

/** The metadata the sharder keeps of an object. */
function metadataOnly(obj: KubeObject): KubeObject {
  const m = obj.metadata ?? {};
  return {
    apiVersion: obj.apiVersion, kind: obj.kind,
    metadata: {
      name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion, labels: m.labels,
      ownerReferences: m.ownerReferences, deletionTimestamp: m.deletionTimestamp,
    },
  };
}


interface Metrics {
  members: Gauge;
  objects: Gauge<'controller' | 'shard'>;
  reassignments: Counter<'controller' | 'reason'>;
  drains: Histogram<'controller'>;
}

export class Sharder implements Runnable {
  readonly name = 'sharder';
  readonly needLeaderElection = false;
  private readonly opts: SharderOptions;
  private readonly controllers: ShardedController[] = [];
  private readonly log: Logger;
  private readonly metrics: Metrics;
  /** While leading: the caches, the ring and the per-controller decision queues. */
  private state: {
    primaries: Map<string, SharedIndexInformer<KubeObject>>;
    owned: Map<string, SharedIndexInformer<KubeObject>[]>;
    queue: Controller<ShardRequest>;
    ring: HashRing;
    live: Set<string>;
  } | undefined;
  /**
   * controller/key → when its drain label was set (for the drain duration) and on which object (UID): a drain ends in
   * an assignment of that same object. Set by the decider; removed by the assignment, by the decider finding the
   * object gone, and by the primary's delete event (an object deleted mid-drain is never decided again).
   */
  private readonly drainStarted = new Map<string, { at: number; uid: string | undefined }>();

  constructor(opts: SharderOptions) {
    this.opts = opts;
    this.log = opts.logger.child({ component: 'sharder' });
    const registry = opts.registry;
    const objects = getOrCreate(registry, 'sharding_objects', () => new Gauge({
      name: 'sharding_objects', help: 'Objects of each sharded controller per assigned shard, as the sharder sees them ("" = unassigned). Only the sharder (leader) reports it.',
      labelNames: ['controller', 'shard'] as const, registers: [registry],
    }));
    this.metrics = {
      members: getOrCreate(registry, 'sharding_members', () => new Gauge({
        name: 'sharding_members', help: 'Live shards (valid shard Leases) as the sharder sees them; 0 when this replica is not the sharder.', registers: [registry],
      })),
      objects,
      reassignments: getOrCreate(registry, 'sharding_reassignments_total', () => new Counter({
        name: 'sharding_reassignments_total', help: 'Objects assigned to a shard, by reason: new (never assigned), drained (moved from a live shard after its acknowledgement), dead (moved from a shard whose Lease expired).',
        labelNames: ['controller', 'reason'] as const, registers: [registry],
      })),
      drains: getOrCreate(registry, 'sharding_drain_duration_seconds', () => new Histogram({
        name: 'sharding_drain_duration_seconds', help: 'From setting the drain label to seeing the old shard\'s acknowledgement.',
        labelNames: ['controller'] as const, buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers: [registry],
      })),
    };
  }

  /** Adds a sharded controller (before `start`). */
  register(c: ShardedController): void {
    if (this.state) throw new Error('Sharder.register after start');
    this.controllers.push(c);
  }

  async start(signal: AbortSignal): Promise<void> {
    // The campaign is stopped only after the decision workers stopped, so the release never races a patch.
    const campaign = new AbortController();
    let leading: Promise<void> | undefined;
    let leadErr: unknown;
    const onAbort = (): void => {
      void (leading ?? Promise.resolve()).finally(() => campaign.abort());
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const result = await this.opts.elector.run(campaign.signal, {
        onStartedLeading: (leadership) => {
          const stop = AbortSignal.any([signal, leadership]);
          leading = this.lead(stop).catch((err: unknown) => {
            leadErr = err;
            campaign.abort();
          });
        },
        mayRelease: () => true,
      });
      await leading;
      if (leadErr !== undefined) throw leadErr instanceof Error ? leadErr : new Error('sharder failed', { cause: leadErr });
      if (result === 'lost') throw new Error(`sharder lost the leader Lease ${this.opts.leaseNamespace}/${this.opts.group}`);
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.metrics.members.set(0);
    }
  }

  /** Works as the sharder until `signal` aborts (shutdown or lost leadership). */
  private async lead(signal: AbortSignal): Promise<void> {
    const o = this.opts;
    this.log.info({ controllers: this.controllers.map((c) => c.name) }, 'became the sharder');
    const factory = new SharedInformerFactory({
      client: o.reader, namespaces: o.namespaces, defaultResyncPeriodMs: 0, logger: o.logger, registry: o.registry,
    });
    const leases = factory.informerFor<ShardLease & KubeObject>(leaseResource, {
      namespaces: [o.leaseNamespace], labelSelector: `${leaseOfLabel}=${o.group}`,
    });
    const state: NonNullable<Sharder['state']> = this.state = {
      primaries: new Map(), owned: new Map(), ring: new HashRing([]), live: new Set(),
      queue: new Controller<ShardRequest>({
        name: 'sharder', codec: shardRequestCodec, maxConcurrentReconciles: o.concurrency ?? 16, logger: o.logger, registry: o.registry,
        priorityQueue: false, reconciler: (req, sig, ctx) => {
          const decider = deciders.get(req.controller);
          return decider ? decider({ namespace: req.namespace, name: req.name }, sig, ctx) : Promise.resolve();
        },
      }),
    };
    const deciders = new Map<string, Reconciler>();
    const queue = state.queue;
    for (const c of this.controllers) {
      // The API server sends these as PartialObjectMetadata (metadataOnly): the sharder never reads a spec or status.
      const primary = factory.informerFor(c.primary, { metadataOnly: true, transform: metadataOnly });
      state.primaries.set(c.name, primary);
      const owned = c.owned.map((r) => {
        const inf = factory.informerFor(r, { metadataOnly: true, transform: metadataOnly });
        if (!inf.getIndexer().hasIndex(ownerIndex)) {
          inf.addIndexers({ [ownerIndex]: (obj) => {
            const ref = controllerOf(obj);
            return ref ? [`${apiGroupOf(ref.apiVersion)}/${ref.kind}/${keyOf(obj.metadata?.namespace, ref.name)}`] : [];
          } });
        }
        return inf;
      });
      state.owned.set(c.name, owned);
      deciders.set(c.name, this.decider(c, primary, owned));
      const enqueue = (key: string): void => queue.enqueue(`${c.name}|${key}`);
      const labelsChanged = (a: KubeObject, b: KubeObject): boolean =>
        a.metadata?.labels?.[shardLabel(c.name)] !== b.metadata?.labels?.[shardLabel(c.name)] ||
        a.metadata?.labels?.[drainLabel(c.name)] !== b.metadata?.labels?.[drainLabel(c.name)];
      primary.addEventHandler({
        onAdd: (obj) => enqueue(metaNamespaceKey(obj)),
        onUpdate: (old, obj) => { if (labelsChanged(old, obj)) enqueue(metaNamespaceKey(obj)); },
        onDelete: (obj) => { this.drainStarted.delete(`${c.name}/${deletionHandlingKey(obj)}`); },
      }, { name: 'sharder' });
      for (const inf of owned) {
        const toOwner = (obj: KubeObject): void => {
          const owner = controllerNameOf(obj, c.primary.kind, c.primary.group);
          if (owner !== undefined) enqueue(keyOf(c.primary.namespaced ? obj.metadata?.namespace : undefined, owner));
        };
        inf.addEventHandler({ onAdd: toOwner, onUpdate: (old, obj) => { if (labelsChanged(old, obj)) toOwner(obj); } }, { name: 'sharder' });
      }
    }

    // Membership: re-observed on every Lease event and when the earliest live Lease may expire.
    let observations = new Map<string, Observation>();
    let expiryTimer: NodeJS.Timeout | undefined;
    const remember = (): void => {
      const now = performance.now();
      observations = observe(observations, leases.getIndexer().list(), now);
      const live = liveShards(observations, now);
      const changed = live.size !== state.live.size || [...live].some((s) => !state.live.has(s));
      if (changed) {
        this.log.info({ shards: [...live].sort(), before: [...state.live].sort() }, 'shard membership changed');
        state.live = live;
        state.ring = new HashRing(live);
        this.metrics.members.set(live.size);
        // Owners first (see the file comment: their owned objects' other assignments ride along).
        const ordered = [...this.controllers].sort((a, b) => b.owned.length - a.owned.length);
        for (const c of ordered) {
          for (const obj of state.primaries.get(c.name)?.getIndexer().list() ?? []) queue.enqueue(`${c.name}|${metaNamespaceKey(obj)}`);
        }
      }
      collectGarbage(now);
      clearTimeout(expiryTimer);
      const next = nextExpiry(observations, now);
      if (next !== undefined && !signal.aborted) expiryTimer = setTimeout(remember, Math.max(1, next - now + 1));
    };
    leases.addEventHandler({ onAdd: remember, onUpdate: remember, onDelete: remember }, { name: 'sharder' });
    // Every restarted replica is a new shard with a new Lease: delete the Leases of departed shards, preconditioned on
    // the version judged. A RELEASED Lease (holder "") at once: its shard released it after it stopped acting, and a
    // Lease is never re-acquired by a shard that released it (one term per process). A Lease that merely expired
    // after leaseGcAfterMs more (its holder may be partitioned; if it comes back it creates a new one and rejoins).
    // A refused or failed delete is tried again no sooner than a minute later (no 403 storm without the RBAC rule).
    const gcAfterMs = o.leaseGcAfterMs ?? 600_000;
    const notBefore = new Map<string, number>();
    const collectGarbage = (now: number): void => {
      for (const [name, ob] of observations) {
        const due = ob.holder === '' ? ob.observedAt : ob.observedAt + ob.durationMs + gcAfterMs;
        if (now < Math.max(due, notBefore.get(name) ?? 0)) continue;
        const rv = leases.getIndexer().getByKey(keyOf(o.leaseNamespace, name))?.metadata?.resourceVersion;
        if (!rv) continue;
        notBefore.set(name, Infinity); // one delete in flight
        void o.writer.json('DELETE', objectPath(leaseResource, o.leaseNamespace, name), {
          body: { preconditions: { resourceVersion: rv } }, signal,
        }).then(() => this.log.info({ lease: name, shard: ob.holder }, 'deleted the Lease of a departed shard'), (err: unknown) => {
          if (isNotFound(err) || isConflict(err) || signal.aborted) {
            notBefore.delete(name);
            return;
          }
          this.log.warn({ err, lease: name }, 'could not delete a departed shard\'s Lease; trying again in a minute');
          notBefore.set(name, performance.now() + 60_000);
        });
      }
      for (const name of notBefore.keys()) if (!observations.has(name)) notBefore.delete(name);
    };

    const collect = (): void => {
      const g = this.metrics.objects;
      g.reset();
      for (const c of this.controllers) {
        const counts = new Map<string, number>();
        for (const obj of state.primaries.get(c.name)?.getIndexer().list() ?? []) {
          const s = placementOf(obj.metadata?.labels, c.name).shard ?? '';
          counts.set(s, (counts.get(s) ?? 0) + 1);
        }
        for (const [shard, n] of counts) g.set({ controller: c.name, shard }, n);
      }
    };
    const collectTimer = setInterval(collect, 5_000);
    collectTimer.unref();

    const informers = factory.run(signal);
    try {
      if (!(await factory.waitForCacheSync({ signal }))) return;
      remember();
      await queue.start(signal);
    } finally {
      clearTimeout(expiryTimer);
      clearInterval(collectTimer);
      this.metrics.objects.reset();
      this.state = undefined;
      await informers;
    }
  }

  /** Counts an assignment of `obj` for `c` (and the drain it ended, if this sharder started one on this object). */
  private assigned(c: ShardedController, obj: KubeObject, from: string | undefined): void {
    const drainKey = `${c.name}/${metaNamespaceKey(obj)}`;
    const drain = this.drainStarted.get(drainKey);
    this.drainStarted.delete(drainKey);
    const started = drain !== undefined && drain.uid === obj.metadata?.uid ? drain.at : undefined;
    const reason = from !== undefined ? 'dead' : started !== undefined ? 'drained' : 'new';
    if (reason === 'drained' && started !== undefined) this.metrics.drains.observe({ controller: c.name }, (performance.now() - started) / 1000);
    this.metrics.reassignments.inc({ controller: c.name, reason });
  }

  /** The decision for one object of controller `c` (assignment.ts `decide`), carried out by label patches. */
  private decider(c: ShardedController, primary: SharedIndexInformer<KubeObject>, owned: SharedIndexInformer<KubeObject>[]): Reconciler {
    const writer = this.opts.writer;
    const patch = async (r: ResourceType, obj: KubeObject, labels: Record<string, string | null>, signal: AbortSignal): Promise<void> => {
      const m = obj.metadata ?? {};
      await writer.json('PATCH', objectPath(r, m.namespace ?? '', m.name ?? ''), {
        body: { metadata: { resourceVersion: m.resourceVersion, labels } }, contentType: 'application/merge-patch+json', signal,
      });
    };
    /**
     * Labels every owned object of `owner` that is not on `shard` with `shard`. An owned object that is also the
     * primary of another sharded controller (a Foo's Deployment for the Deployment observer) gets that controller's
     * pending assignment in the same patch: one write instead of two when a shard's objects move.
     */
    const follow = async (owner: KubeObject, shard: string, signal: AbortSignal): Promise<void> => {
      const state = this.state;
      const ownerKey = `${c.primary.group}/${c.primary.kind}/${metaNamespaceKey(owner)}`;
      for (const [i, inf] of owned.entries()) {
        const resource = c.owned[i] as ResourceType;
        const alsoPrimaryOf = this.controllers.filter((c2) => c2 !== c && resourceId(c2.primary) === resourceId(resource));
        for (const obj of inf.getIndexer().byIndex(ownerIndex, ownerKey)) {
          if (obj.metadata?.labels?.[shardLabel(c.name)] === shard) continue;
          const labels: Record<string, string | null> = { [shardLabel(c.name)]: shard };
          const assigned: [ShardedController, string | undefined][] = [];
          for (const c2 of state ? alsoPrimaryOf : []) {
            const d2 = decide(placementOf(obj.metadata?.labels, c2.name), state?.ring.lookup(metaNamespaceKey(obj)), state?.live ?? new Set());
            if (d2.kind === 'assign') {
              Object.assign(labels, labelPatch(d2, c2.name));
              assigned.push([c2, d2.from]);
            }
          }
          await patch(resource, obj, labels, signal);
          for (const [c2, from] of assigned) this.assigned(c2, obj, from);
        }
      }
    };
    return async ({ namespace, name }, signal) => {
      const state = this.state;
      if (!state) return;
      const key = keyOf(namespace, name);
      const drainKey = `${c.name}/${key}`;
      const obj = primary.lister().get(namespace, name);
      if (!obj) {
        this.drainStarted.delete(drainKey);
        return;
      }
      const placement = placementOf(obj.metadata?.labels, c.name);
      const d = decide(placement, state.ring.lookup(key), state.live);
      try {
        switch (d.kind) {
          case 'none':
            if (placement.shard !== undefined && !placement.drain && state.live.has(placement.shard)) await follow(obj, placement.shard, signal);
            return;
          case 'drain':
            await patch(c.primary, obj, labelPatch(d, c.name) ?? {}, signal);
            this.drainStarted.set(drainKey, { at: performance.now(), uid: obj.metadata?.uid });
            this.log.debug({ controller: c.name, key, from: d.from, to: d.to }, 'draining');
            return;
          case 'assign': {
            await follow(obj, d.shard, signal);
            await patch(c.primary, obj, labelPatch(d, c.name) ?? {}, signal);
            this.assigned(c, obj, d.from);
            return;
          }
        }
      } catch (err) {
        // Deleted meanwhile (404): nothing to assign. A stale view (409): decide again from the newer cache state
        // (with backoff; the informer may not have delivered the newer version yet).
        if (isNotFound(err)) return;
        if (isConflict(err)) return { requeue: true };
        throw err;
      }
    };
  }
}
