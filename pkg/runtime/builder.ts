/**
 * ControllerBuilder: declares a controller on a ControllerManager in the shape of controller-runtime's builder and
 * kube-rs's `Controller` — the primary type, the types it owns, extra watches with a mapping function, options, and
 * the reconcile function:
 *
 *   mgr.controller('foo')
 *     .for<Foo>(fooResource)                                  // reconcile requests are Foos' namespace/name
 *     .owns(deploymentResource)                               // a Deployment event → the Foo in its controller ownerRef
 *     .watches<Deployment>(deploymentResource, (d) => [...])  // any mapping: object → requests (or "ns/name" keys)
 *     .withOptions({ concurrency: 2 })
 *     .rbac({ resource: deploymentResource, verbs: ['create', 'patch'], why: 'creates and corrects its Deployment' })
 *     .complete(reconcile);                                   // (req, signal, ctx) → void | {requeue} | {requeueAfter}
 *                                                             //   throw → retry with backoff; TerminalError → give up
 *
 * What each source enqueues, and at which queue priority (the priority queue is on by default; priority.ts):
 *  - `for`: add → the object (low priority when from the initial list), update → the object (low on a resync: same
 *    resourceVersion), delete → the object's key. An `update` filter may drop updates.
 *  - Predicates (predicate.ts; `for(type, { predicates })`, `owns(type, { predicates })`, `watches(type, map,
 *    { predicates })`): an event of that source is mapped only if it passes all of its predicates (create / update /
 *    delete as the informer reports it). They belong to their source alone: `owns` and `watches` of one type share
 *    one handler, and each applies its own predicates to each event.
 *  - `owns`: the object's controller ownerReference, when its kind and API group are the primary's, names the
 *    request (same namespace); on update both the old and the new owner; only owners present in the primary's cache.
 *  - `watches`: the mapping function's requests for the object (on update: for the old and the new object).
 *  - Resyncs (update with the same resourceVersion) of owned and watched types are not mapped: the primary's own
 *    resync already re-queues every primary, so mapping them too would only reconcile each primary again.
 * Several sources on one type (e.g. `owns` and `watches` of Deployments) share ONE handler registration: each event
 * is mapped by all of them and every key is enqueued once. Informers are the manager's shared ones: a type watched by
 * two controllers is listed and cached once.
 *
 * RBAC (pkg/rbac/permission.ts; `gen rbac` writes the role from it): each source records that its informer lists and
 * watches its type, `owns` that blockOwnerDeletion needs `update` on the primary's `finalizers`, and `.rbac(...)` what
 * the reconcile calls beyond that (its writes, status, live reads) — on the manager's ledger, read only by `gen rbac`.
 *
 * Contract: declare before `mgr.start`; handlers only map and enqueue (no I/O); the reconcile reads from listers
 * (`builder.informer()` and `builder.informerOf(type)`) and writes through `mgr.client`. Without sharding the
 * controller runs only on the leader.
 *
 * Standby: the handlers enqueue only once the controller started (this replica leads, its caches synced). At its
 * start the controller enqueues every primary in the cache, as an initial-list add (low priority), every key its
 * `bypassedFinalizers` hold (ForOptions), and maps every cached object of its `owns` / `watches` sources — as
 * controller-runtime, whose sources start with the controller and replay an informer's contents to a handler added
 * late. Events before the start are dropped: what they said is in the cache by then, and a deletion leaves nothing to
 * reconcile (a deletion that bypassed the finalizer does: `bypassedFinalizers` records it on every replica). Queued
 * instead, they grew a standby's queue by every key it ever saw, deleted objects' keys included, since nobody takes
 * from it (the endurance bench's standby; test/standby-queue.test.ts). A key a controller enqueues itself
 * (`controller.enqueue`) is queued at any time.
 *
 * Sharding (`mgr` built with `sharding`; pkg/sharding/assignment.ts has the protocol): the controller shards by its
 * primary object. Its primary informer and the informers of the types it `owns` select only objects labelled
 * `shard.ts-controller-manager.io/<controller>=<this shard>` (types only `watches`ed stay unfiltered), the sharder is
 * told the primary and owned types, and every reconcile first looks at the primary in the cache: labelled to drain →
 * no reconcile; this shard acknowledges instead (removes its labels, JSON-patch `test`ed so a stale acknowledgement
 * changes nothing). The queue never hands a key to two workers, so the acknowledgement happens after the key's
 * in-flight reconcile finished — the drain handshake's "after any in-flight reconcile". Updates that change the
 * shard or drain label always enqueue (the `update` predicate cannot hide a drain request). Objects a reconcile
 * creates for an owner must carry `inheritedShardLabels(owner)` (pkg/sharding/shard.ts) to be in this shard's cache.
 */
import { keyOf, metaNamespaceKey } from '../apimachinery/keys.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { controllerNameOf } from '../apimachinery/ownerref.ts';
import { Controller, type Reconciler, type Result } from '../controller/controller.ts';
import { addPriority, PriorityNormal, updatePriority } from '../controller/priority.ts';
import { requestKey, type Request } from '../controller/request.ts';
import type { InformerForOptions } from '../informerfactory/factory.ts';
import { deletionHandlingKey, objectOfDelete, type DeletedFinalStateUnknown } from '../informerfactory/object.ts';
import { objectPath } from '../apimachinery/paths.ts';
import { resourceId, type ResourceType } from '../apimachinery/resource.ts';
import { ApiError } from '../client/rest.ts';
import type { SharedIndexInformer } from '../informerfactory/sharedinformer.ts';
import type { Runnable } from '../manager/runnable.ts';
import type { RateLimiter } from '../workqueue/ratelimiter.ts';
import { acknowledgeJsonPatch, drainLabel, shardLabel, shardView } from '../sharding/assignment.ts';
import { reportShardObjects } from '../sharding/shard.ts';
import type { Sharder } from '../sharding/sharder.ts';
import type { JsonClient } from '../client/request.ts';
import type { Logger } from '../log/logger.ts';
import type { Registry } from 'prom-client';
import { passesAll, type Predicate, type PredicateEvent } from './predicate.ts';
import { contributionOf, informerVerbs, recordPermission, type Permission } from '../rbac/permission.ts';
import type { BypassedFinalizers } from './bypassedfinalizer.ts';

/**
 * What a ControllerBuilder needs of the manager it declares a controller on — ControllerManager implements it
 * (manager.ts). Defined here, not imported from manager.ts, because the manager constructs builders
 * (`mgr.controller(name)`): the dependency points one way, manager.ts → builder.ts.
 */
export interface ControllerHost {
  /** The manager's shared informer of `resource` (one per type and options). */
  informer<T extends KubeObject>(resource: ResourceType, opts?: InformerForOptions<T>): SharedIndexInformer<T>;
  /** Registers the finished controller as a leader-only runnable whose start waits for `hasSynced`. */
  add(r: Runnable, hasSynced: readonly (() => boolean)[]): void;
  /** Records the completed controller (ControllerManager.controllers()); optional for other hosts. */
  registerController?(c: Controller<unknown>): void;
  /** The guarded client (write gate: leadership); the builder's drain acknowledgement PATCHes through it. */
  readonly client: JsonClient;
  readonly logger: Logger;
  readonly registry: Registry;
  /** This replica's shard name with --sharding; undefined without. */
  readonly shardName: string | undefined;
  readonly sharder: Pick<Sharder, 'register'> | undefined;
  /** The manager's defaults for every controller (a builder option overrides each). */
  readonly opts: Readonly<{
    maxQueueWaitMs?: number; reconcileTimeoutMs?: number; gracefulShutdownTimeoutMs?: number; priorityQueue?: boolean;
    observeReconciles?: (e: ReconcileObservation) => void;
  }>;
}

/** Maps an object of a watched type to the requests (or "namespace/name" keys) to reconcile. */
export type MapFunc<T> = (obj: T) => Iterable<Request | string>;

/** Options of the primary type (`for`): an update filter, informer options and event predicates. */
export interface ForOptions<T extends KubeObject> {
  /** Predicate on updates of the primary type: false drops the update (adds and deletes always pass). */
  update?: (oldObj: T, newObj: T) => boolean;
  /** Informer options of the primary type (transform, extra indexers via the informer). */
  informer?: InformerForOptions<T>;
  /** Event predicates of the primary type (predicate.ts): an event is enqueued only if it passes all of them. */
  predicates?: readonly Predicate<T>[];
  /**
   * Deletions that skipped the finalizer (kubernetes#77988; bypassedfinalizer.ts): each primary delete is offered to
   * `observe` before its key is enqueued — in the same handler, so the reconcile of the key finds the record — and a
   * recorded key is enqueued even when a delete predicate would drop it. Records are kept on a standby too; the
   * controller's start enqueues every key waiting (file comment, "Standby").
   */
  bypassedFinalizers?: BypassedFinalizers<T>;
}

/** Options of an `owns` or `watches` source. */
export interface SourceOptions<T extends KubeObject = KubeObject> {
  /** Event predicates of this source (predicate.ts): an event is mapped only if it passes all of them. */
  predicates?: readonly Predicate<T>[];
  /**
   * Watch this source's metadata only (controller-runtime's `builder.OnlyMetadata`): its informer is the manager's
   * metadata-only informer of the type (`InformerForOptions.metadataOnly`), whose objects are `{ apiVersion, kind,
   * metadata }`; read them in the reconcile with `informerOf(resource, { metadataOnly: true })`.
   */
  metadataOnly?: boolean;
}

/** Options of one controller (`withOptions`); unset fields take the manager's defaults. */
export interface BuilderOptions {
  /** Workers (concurrent reconciles of different keys). Default 1. */
  concurrency?: number;
  /** Priority queue on (default: the manager's `priorityQueue`, itself default true) or plain FIFO. */
  priorityQueue?: boolean;
  /** Aging bound of the priority queue (ms): nothing waits longer behind higher priorities. Default: the manager's, 30 s. */
  maxQueueWaitMs?: number;
  /** Per-key backoff of failed reconciles. Default: 5 ms → 1000 s exponential, max'ed with 10 qps / burst 100. */
  rateLimiter?: RateLimiter<string>;
  /** How long shutdown waits for running reconciles (ms). Default: the manager's graceful shutdown timeout. */
  gracefulShutdownTimeoutMs?: number;
  /** Abort each reconcile's signal with a TimeoutError after this long (ms); 0 = none. Default: the manager's, none. */
  reconcileTimeoutMs?: number;
  /** Called when the controller starts (on becoming leader, caches synced), before the first reconcile. */
  onStart?: () => void;
}

interface Mapper {
  map: (obj: KubeObject, enqueue: (key: string) => void) => void;
  predicates: readonly Predicate[] | undefined;
}

interface Source {
  resource: ResourceType;
  metadataOnly: boolean;
  mappers: Mapper[];
}

/**
 * Declares one controller on a ControllerManager (controller-runtime's builder): `for` the primary type, `owns` and
 * `watches` further sources, `withOptions`, then `complete(reconcile)`. Obtained from `mgr.controller(name)`; each
 * builder completes once, and a controller needs a primary type (`for`) before `complete`.
 */
export class ControllerBuilder<P extends KubeObject = KubeObject> {
  private primary: {
    resource: ResourceType; informer: SharedIndexInformer<P>; update: ((o: P, n: P) => boolean) | undefined; predicates: readonly Predicate<P>[] | undefined;
    bypassed: BypassedFinalizers<P> | undefined;
  } | undefined;
  private readonly sources = new Map<string, Source>();
  /** resourceIds of the owned types (sharded like the primary). */
  private readonly owned = new Map<string, ResourceType>();
  private options: BuilderOptions = {};
  private completed = false;
  private readonly mgr: ControllerHost;
  /** The controller's name: in its metrics, logs and work queue (unique per manager). */
  readonly name: string;

  /** Usually obtained from `mgr.controller(name)`. */
  constructor(mgr: ControllerHost, name: string) {
    this.mgr = mgr;
    this.name = name;
  }

  /** The primary type: its objects' keys are the reconcile requests. Call once, first. */
  for<T extends KubeObject>(resource: ResourceType, opts: ForOptions<T> = {}): ControllerBuilder<T> {
    if (this.primary) throw new Error(`controller ${this.name}: for() called twice`);
    const self = this as unknown as ControllerBuilder<T>;
    const informerOpts = this.shardSelector === undefined ? opts.informer : {
      ...opts.informer, labelSelector: [opts.informer?.labelSelector, this.shardSelector].filter(Boolean).join(','),
    };
    self.primary = {
      resource, informer: this.mgr.informer<T>(resource, informerOpts), update: opts.update, predicates: opts.predicates, bypassed: opts.bypassedFinalizers,
    };
    this.record({ resource, verbs: informerVerbs, why: 'for' });
    return self;
  }

  /** With sharding: the label selector of this shard's objects of this controller; undefined without sharding. */
  private get shardSelector(): string | undefined {
    const shard = this.mgr.shardName;
    return shard === undefined ? undefined : `${shardLabel(this.name)}=${shard}`;
  }

  /**
   * The informer this controller uses for `resource`: with sharding, a type it `owns` is cached for this shard only
   * (call after `owns`); otherwise the manager's shared informer. `metadataOnly`: the metadata-only one (a source
   * declared with `metadataOnly`).
   */
  informerOf<T extends KubeObject>(resource: ResourceType, opts: { metadataOnly?: boolean } = {}): SharedIndexInformer<T> {
    const selector = this.shardSelector;
    const metadataOnly = opts.metadataOnly ? { metadataOnly: true } : {};
    return selector !== undefined && this.owned.has(resourceId(resource))
      ? this.mgr.informer<T>(resource, { labelSelector: selector, ...metadataOnly })
      : this.mgr.informer<T>(resource, metadataOnly);
  }

  /** The primary's informer (shared), e.g. to add an index before `complete`. */
  informer(): SharedIndexInformer<P> {
    return this.requirePrimary('informer()').informer;
  }

  /** Objects of `resource` controlled by a primary (controller ownerReference of the primary's kind and group). */
  owns<T extends KubeObject = KubeObject>(resource: ResourceType, opts: SourceOptions<T> = {}): this {
    const primary = this.requirePrimary('owns()');
    const { kind, group, namespaced } = primary.resource;
    const owners = primary.informer.lister();
    this.owned.set(resourceId(resource), resource);
    this.record({ resource, verbs: informerVerbs, why: 'owns' });
    this.record({ resource: primary.resource, subresource: 'finalizers', verbs: ['update'], why: 'blockOwnerDeletion on what it owns' });
    this.source(resource, opts.metadataOnly).mappers.push({
      map: (obj, enqueue) => {
        const owner = controllerNameOf(obj, kind, group);
        if (owner === undefined) return;
        const namespace = namespaced ? (obj.metadata?.namespace ?? '') : '';
        if (owners.get(namespace, owner)) enqueue(keyOf(namespace, owner));
      },
      predicates: opts.predicates,
    });
    return this;
  }

  /** Objects of `resource`, mapped to requests by `map` (controller-runtime's EnqueueRequestsFromMapFunc). */
  watches<T extends KubeObject>(resource: ResourceType, map: MapFunc<T>, opts: SourceOptions<T> = {}): this {
    this.requirePrimary('watches()');
    this.record({ resource, verbs: informerVerbs, why: 'watches' });
    this.source(resource, opts.metadataOnly).mappers.push({
      map: (obj, enqueue) => {
        for (const r of map(obj as T)) enqueue(typeof r === 'string' ? r : requestKey(r));
      },
      predicates: opts.predicates,
    });
    return this;
  }

  /**
   * Declares what the reconcile calls beyond its informers — writes, status and finalizer updates, live reads — so
   * `gen rbac` grants exactly that (pkg/rbac/permission.ts). Records only; changes nothing at run time. Throws on a
   * permission RBAC cannot express (no verbs, no resource).
   *   .rbac({ resource: guestbookResource, subresource: 'status', verbs: ['patch'], why: 'the Ready condition' })
   */
  rbac(...permissions: Permission[]): this {
    for (const p of permissions) recordPermission(this.mgr, contributionOf(p, this.name));
    return this;
  }

  /** Records that this controller needs `p` (a source's informer, blockOwnerDeletion). */
  private record(p: Permission): void {
    recordPermission(this.mgr, contributionOf(p, this.name));
  }

  /** Workers, queue, rate limiter and timeouts of this controller (merged over earlier calls). */
  withOptions(opts: BuilderOptions): this {
    this.options = { ...this.options, ...opts };
    return this;
  }

  /** Builds the controller, registers its handlers and adds it to the manager (leader-gated). */
  complete(reconcile: Reconciler): Controller {
    const primary = this.requirePrimary('complete()');
    if (this.completed) throw new Error(`controller ${this.name}: complete() called twice`);
    this.completed = true;
    const o = this.options;
    const maxQueueWaitMs = o.maxQueueWaitMs ?? this.mgr.opts.maxQueueWaitMs;
    const reconcileTimeoutMs = o.reconcileTimeoutMs ?? this.mgr.opts.reconcileTimeoutMs;
    const shard = this.mgr.shardName;
    const controller = new Controller({
      name: this.name,
      reconciler: observed(this.name, shard === undefined ? reconcile : this.drainAware(reconcile, primary, shard), this.mgr.opts.observeReconciles),
      maxConcurrentReconciles: o.concurrency ?? 1,
      logger: this.mgr.logger,
      registry: this.mgr.registry,
      gracefulShutdownTimeoutMs: o.gracefulShutdownTimeoutMs ?? this.mgr.opts.gracefulShutdownTimeoutMs ?? 30_000,
      priorityQueue: o.priorityQueue ?? this.mgr.opts.priorityQueue ?? true,
      ...(maxQueueWaitMs !== undefined ? { maxQueueWaitMs } : {}),
      ...(reconcileTimeoutMs !== undefined ? { reconcileTimeoutMs } : {}),
      ...(o.rateLimiter ? { rateLimiter: o.rateLimiter } : {}),
    });

    // Set at the controller's start, before its replay of the caches (file comment, "Standby").
    let started = false;
    const enqueueKey = (key: string, priority?: number): void => {
      if (started) controller.enqueue(key, priority);
    };
    const enqueue = (obj: P, priority: number): void => enqueueKey(metaNamespaceKey(obj), priority);
    const { update, predicates, bypassed } = primary;
    // Handlers are named after the controller: informer_handler_errors_total{handler} says whose handler threw.
    const registrations = [primary.informer.addEventHandler({
      onAdd: (obj, initial) => {
        if (passesAll(predicates, { type: 'create', obj })) enqueue(obj, addPriority(initial));
      },
      onUpdate: (old, obj) => {
        const passed = (!update || update(old, obj)) && passesAll(predicates, { type: 'update', oldObj: old, obj });
        if (passed || (shard !== undefined && placementChanged(this.name, old, obj))) enqueue(obj, updatePriority(old, obj));
      },
      onDelete: (obj: P | DeletedFinalStateUnknown<P>) => {
        const last = objectOfDelete(obj);
        // Recorded on every replica, before the enqueue (ForOptions.bypassedFinalizers).
        const recorded = bypassed?.observe(obj) !== undefined;
        // Without a last known state (nothing to test) the delete passes: never lose a deletion.
        if (recorded || !last || passesAll(predicates, { type: 'delete', obj: last })) enqueueKey(deletionHandlingKey(obj));
      },
    }, { name: this.name })];
    // What the start enqueues: every cached object as its informer's initial list would (file comment, "Standby").
    const replays: (() => void)[] = [() => {
      for (const obj of primary.informer.getIndexer().list()) {
        if (passesAll(predicates, { type: 'create', obj })) enqueue(obj, addPriority(true));
      }
      for (const key of bypassed?.keys() ?? []) enqueueKey(key);
    }];
    for (const source of this.sources.values()) {
      /** Every key a mapper whose predicates pass `event` derives from any of `objs`, enqueued once. */
      const map = (priority: number, event: PredicateEvent<KubeObject>, ...objs: KubeObject[]): void => {
        if (!started) return;
        const keys = new Set<string>();
        for (const m of source.mappers) {
          if (!passesAll(m.predicates, event)) continue;
          for (const obj of objs) m.map(obj, (k) => keys.add(k));
        }
        for (const k of keys) controller.enqueue(k, priority);
      };
      const informer = this.informerOf(source.resource, { metadataOnly: source.metadataOnly });
      replays.push(() => {
        for (const obj of informer.getIndexer().list()) map(addPriority(true), { type: 'create', obj }, obj);
      });
      registrations.push(informer.addEventHandler({
        onAdd: (obj, initial) => map(addPriority(initial), { type: 'create', obj }, obj),
        onUpdate: (old, obj) => {
          if (old.metadata?.resourceVersion === obj.metadata?.resourceVersion) return; // resync: see the file comment
          map(PriorityNormal, { type: 'update', oldObj: old, obj }, obj, old);
        },
        onDelete: (obj) => {
          const last = objectOfDelete(obj);
          if (last) map(PriorityNormal, { type: 'delete', obj: last }, last);
        },
      }, { name: this.name }));
    }

    const runnable: Runnable = {
      name: this.name,
      needLeaderElection: true,
      start: (signal) => {
        started = true;
        for (const replay of replays) replay();
        o.onStart?.();
        return controller.start(signal);
      },
      stillRunning: () => controller.stillRunning(),
    };
    this.mgr.add(runnable, registrations.map((r) => () => r.hasSynced()));
    this.mgr.registerController?.(controller as Controller<unknown>);
    if (shard !== undefined) {
      this.mgr.sharder?.register({ name: this.name, primary: primary.resource, owned: [...this.owned.values()] });
      reportShardObjects(this.mgr.registry, this.name, () => primary.informer.getIndexer().size);
    }
    return controller;
  }

  /** Wraps `reconcile` for a shard: a primary labelled to drain is acknowledged, not reconciled (file comment). */
  private drainAware(reconcile: Reconciler, primary: NonNullable<ControllerBuilder<P>['primary']>, shard: string): Reconciler {
    const client = this.mgr.client;
    const name = this.name;
    return async (req, signal, ctx) => {
      const obj = primary.informer.lister().get(req.namespace, req.name);
      if (!obj || shardView(obj.metadata?.labels, name, shard) !== 'draining') return reconcile(req, signal, ctx);
      const m = obj.metadata ?? {};
      try {
        await client.json('PATCH', objectPath(primary.resource, m.namespace ?? '', m.name ?? ''), {
          body: acknowledgeJsonPatch(name, shard), contentType: 'application/json-patch+json', signal,
        });
        ctx.log.info('drained: handed over to another shard');
      } catch (err) {
        // 404: gone; 422: the test failed (no longer ours — already acknowledged).
        if (!(err instanceof ApiError && (err.status === 404 || err.status === 422))) throw err;
      }
    };
  }

  private requirePrimary(what: string): NonNullable<ControllerBuilder<P>['primary']> {
    if (!this.primary) throw new Error(`controller ${this.name}: call for() before ${what}`);
    return this.primary;
  }

  /** The source of `resource` (one per type and representation: a metadata-only watch is another informer). */
  private source(resource: ResourceType, metadataOnly = false): Source {
    const id = `${resourceId(resource)}${metadataOnly ? '|metadata' : ''}`;
    let s = this.sources.get(id);
    if (!s) this.sources.set(id, (s = { resource, metadataOnly, mappers: [] }));
    return s;
  }
}

/** One finished reconcile, as ControllerManagerOptions.observeReconciles sees it. */
export interface ReconcileObservation {
  controller: string;
  /** "namespace/name". */
  key: string;
  /** What the reconciler returned, or undefined when it threw. */
  result: Result | undefined;
  /** What it threw, if it did. */
  error: unknown;
}

/** `reconcile`, reporting each finished call to `observe` (unchanged without one). */
function observed(controller: string, reconcile: Reconciler, observe: ((e: ReconcileObservation) => void) | undefined): Reconciler {
  if (!observe) return reconcile;
  return async (req, signal, ctx) => {
    const key = req.namespace ? `${req.namespace}/${req.name}` : req.name;
    try {
      const result = await reconcile(req, signal, ctx);
      observe({ controller, key, result: result ?? undefined, error: undefined });
      return result;
    } catch (error) {
      observe({ controller, key, result: undefined, error });
      throw error;
    }
  };
}

/** Whether an update changed this controller's shard or drain label. */
function placementChanged(controller: string, a: KubeObject, b: KubeObject): boolean {
  const la = a.metadata?.labels;
  const lb = b.metadata?.labels;
  return la?.[shardLabel(controller)] !== lb?.[shardLabel(controller)] || la?.[drainLabel(controller)] !== lb?.[drainLabel(controller)];
}
