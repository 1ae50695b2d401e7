/**
 * SharedIndexInformer: one cache of one resource type (in one namespace scope) shared by every controller that
 * needs it, with any number of event handlers.
 *
 *   Reflector(s) ──transform──▶ DeltaQueue ──pop──▶ processDeltas ─┬─▶ Indexer (cache + indexes) ◀── Lister
 *                                                                   └─▶ ProcessorListener per handler ──▶ handler
 *
 * Scope: `namespaces` empty/undefined = all namespaces with one reflector; N namespaces = N reflectors (one
 * list+watch each) feeding the same DeltaQueue and Indexer. Each reflector's relist replaces only its own
 * namespace's keys (DeltaQueue scoped replace), and the informer is synced once every namespace delivered its
 * first list and the queue drained it. Cluster-scoped resources always use one cluster-wide reflector.
 *
 * Concurrency contract (one event loop, one owner per structure):
 *  - Reflectors write only to the DeltaQueue. The processing loop (`start`) is the only writer of the Indexer; it
 *    pops one key at a time and applies all of its deltas synchronously, so readers never see a partial update.
 *  - Handlers run in their listener's own loop (see listener.ts): they may map objects to keys and enqueue them,
 *    nothing else — no I/O, no mutation of the objects passed (they are the cached ones).
 *  - Controllers read through `lister()` / `getIndexer()`; indexes may be added at any time.
 *
 * Handler failures: a handler that throws or rejects loses that notification for itself only (the other handlers
 * have their own listeners); it is counted in `informer_handler_errors_total{resource,handler}` and logged with rate
 * limiting (handlererrors.ts).
 *
 * Semantics (client-go): handlers added after start are replayed the cache as adds (isInInitialList = true); each
 * registration has its own hasSynced(); a Replaced delta whose resourceVersion did not change is treated as a resync
 * and only reaches handlers whose resync is due; resync (Sync deltas → onUpdate(obj, obj)) at each handler's period.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Counter, Registry } from 'prom-client';
import type { RestClient } from '../client/rest.ts';
import { silentLogger, type Logger } from '../log/logger.ts';
import { globalRegistry } from '../metrics/registry.ts';
import { realClock, type Clock, type Timer } from '../util/clock.ts';
import { DeltaQueue, type Delta } from './deltaqueue.ts';
import { HandlerErrorReporter, handlerErrorsCounter } from './handlererrors.ts';
import { Indexer, type IndexerReader, type Indexers } from './indexer.ts';
import { Lister } from './lister.ts';
import { ProcessorListener, type Notification, type ResourceEventHandler } from './listener.ts';
import { RestListWatcher, type ListWatcher } from './listwatch.ts';
import { deepFreeze, deletionHandlingKey, stripManagedFields } from './object.ts';
import { resourceVersionOf, type KubeObject } from '../apimachinery/meta.ts';
import { Reflector, type ReflectorSink, type ReflectorStatus } from './reflector.ts';
import { reflectorCounters } from './reflectormetrics.ts';
import type { ReflectorConfig, RequestFailure } from './reflectorstate.ts';
import { resourceId, type ResourceType } from '../apimachinery/resource.ts';
import { waitForCacheSync, type WaitForSyncOptions } from './waitforsync.ts';
import { globalWatchCounter, type WatchCounter } from './watchcounter.ts';

/** Keys processed in a row before the processing loop yields to the event loop. */
const POP_BATCH = 256;

export interface ReflectorTuning {
  config?: Partial<ReflectorConfig>;
  /** See ReflectorOptions.watchIdleTimeoutMs. */
  watchIdleTimeoutMs?: number;
}

export interface SharedIndexInformerOptions<T extends KubeObject> {
  resource: ResourceType;
  /** Needed unless `listWatcherFor` is given. */
  client?: RestClient;
  /** Namespaces to list and watch; undefined or [] = all. Ignored for cluster-scoped resources. */
  namespaces?: readonly string[];
  labelSelector?: string;
  fieldSelector?: string;
  /**
   * List and watch metadata only (PartialObjectMetadata, listwatch.ts): the cache holds `{ apiVersion, kind,
   * metadata }` of each object, under the resource's apiVersion and kind. Default false.
   */
  metadataOnly?: boolean;
  /** Default resync period of handlers registered without one (ms; 0 = never). */
  resyncPeriodMs?: number;
  /** Applied to every object before it is queued and cached. Default: stripManagedFields. */
  transform?: (obj: KubeObject) => T;
  indexers?: Indexers<T>;
  /** Use a streaming list (sendInitialEvents) when the server supports it. */
  useWatchList?: boolean;
  reflector?: ReflectorTuning;
  clock?: Clock;
  logger?: Logger;
  random?: () => number;
  watchCounter?: WatchCounter;
  /** Where `informer_handler_errors_total` is registered. Default: the global registry (served on /metrics). */
  registry?: Registry;
  /** Overrides how each namespace ('' = all) is listed and watched (default: RestListWatcher with `client`). */
  listWatcherFor?: (namespace: string) => ListWatcher;
}

/** The handle `addEventHandler` returns: whether this handler has synced, and how to remove it. */
export interface HandlerRegistration {
  /** True once the informer synced and this handler has processed every object of the initial list. */
  hasSynced(): boolean;
  /** Unregisters the handler (pending notifications are dropped). */
  remove(): void;
}

export interface AddEventHandlerOptions {
  /** Resync period for this handler in ms (0 = never). Default: the informer's resyncPeriodMs. */
  resyncPeriodMs?: number;
  /**
   * Names the registration in `informer_handler_errors_total{handler}` and in logs (e.g. the controller's name).
   * Default `handler-<n>`: the n-th registration on this informer.
   */
  name?: string;
}

/**
 * One cache of one resource type in one namespace scope, shared by every controller that needs it, with any number
 * of event handlers (client-go's SharedIndexInformer). The cache has one writer, the informer's processing loop.
 */
export class SharedIndexInformer<T extends KubeObject = KubeObject> {
  /** The resource type it lists and watches. */
  readonly resource: ResourceType;
  /** The namespaces listed ([''] = all namespaces or cluster-scoped). */
  readonly scopes: readonly string[];
  /** True when it lists and watches metadata only (the cache holds `{ apiVersion, kind, metadata }`). */
  readonly metadataOnly: boolean;
  /** The label selector sent with its lists and watches (undefined: none): the cache holds the matching objects only. */
  readonly labelSelector: string | undefined;
  /** The field selector sent with its lists and watches (undefined: none). */
  readonly fieldSelector: string | undefined;
  private readonly indexer: Indexer<T>;
  private readonly queue: DeltaQueue<T>;
  private readonly reflectors: Reflector[];
  private readonly listers: Lister<T>;
  private readonly transform: (obj: KubeObject) => T;
  private readonly defaultResyncMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly listeners = new Set<ProcessorListener<T>>();
  private syncing = new Set<ProcessorListener<T>>();
  private resyncTimer: Timer | undefined;
  private readonly handlerErrors: Counter<'resource' | 'handler'>;
  private registrations = 0;
  private started = false;
  private stopped = false;

  /** Lists and watches nothing yet (start(signal) does); usually made by SharedInformerFactory.informerFor. */
  constructor(opts: SharedIndexInformerOptions<T>) {
    this.resource = opts.resource;
    const nsList = opts.resource.namespaced ? [...new Set((opts.namespaces ?? []).filter((n) => n !== ''))] : [];
    this.scopes = nsList.length > 0 ? nsList : [''];
    this.metadataOnly = opts.metadataOnly ?? false;
    this.labelSelector = opts.labelSelector || undefined;
    this.fieldSelector = opts.fieldSelector || undefined;
    this.clock = opts.clock ?? realClock;
    const name = resourceId(opts.resource);
    this.log = (opts.logger ?? silentLogger).child({ informer: this.metadataOnly ? `${name} (metadata)` : name });
    this.transform = opts.transform ?? ((o: KubeObject) => stripManagedFields(o) as T);
    this.defaultResyncMs = opts.resyncPeriodMs ?? 0;
    this.handlerErrors = handlerErrorsCounter(opts.registry ?? globalRegistry);
    this.indexer = new Indexer<T>({
      indexers: opts.indexers,
      onIndexError: (index, key, err) => this.log.error({ err, index, key }, 'index function failed'),
    });
    this.queue = new DeltaQueue<T>({ knownObjects: this.indexer, scopes: this.scopes });
    this.listers = new Lister(this.indexer);
    const counter = opts.watchCounter ?? globalWatchCounter;
    const counters = reflectorCounters(opts.registry ?? globalRegistry, name);
    const listWatcherFor =
      opts.listWatcherFor ??
      ((ns: string): ListWatcher => {
        if (!opts.client) throw new Error(`informer ${name}: a client (or listWatcherFor) is required`);
        return new RestListWatcher({
          client: opts.client,
          resource: opts.resource,
          namespace: ns,
          labelSelector: opts.labelSelector,
          fieldSelector: opts.fieldSelector,
          metadataOnly: opts.metadataOnly,
        });
      });
    this.reflectors = this.scopes.map(
      (ns) =>
        new Reflector({
          name: ns ? `${name} ns=${ns}` : name,
          listWatcher: listWatcherFor(ns),
          sink: this.sinkFor(ns),
          config: { useWatchList: opts.useWatchList ?? false, ...opts.reflector?.config },
          watchIdleTimeoutMs: opts.reflector?.watchIdleTimeoutMs,
          // The client's answers (any request of the process on its transport) end connection-failure backoffs.
          reachability: opts.client?.reachability,
          clock: this.clock,
          logger: opts.logger,
          random: opts.random,
          watchTracker: counter.tracker(opts.resource, ns),
          ...counters,
        }),
    );
  }

  /** Registers a handler. After start, the cache is replayed to it as adds. Throws once the informer stopped. */
  addEventHandler(handler: ResourceEventHandler<T>, opts: AddEventHandlerOptions = {}): HandlerRegistration {
    if (this.stopped) throw new Error(`informer ${resourceId(this.resource)} has stopped; handler not added`);
    const period = opts.resyncPeriodMs ?? this.defaultResyncMs;
    const ordinal = ++this.registrations;
    const name = opts.name ?? `handler-${ordinal}`;
    const reporter = new HandlerErrorReporter({
      counter: this.handlerErrors, resource: resourceId(this.resource), handler: name, clock: this.clock, logger: this.log,
    });
    const listener = new ProcessorListener<T>(handler, period, this.log, {
      onError: (err, n) => reporter.report(err, n.type),
    });
    listener.nextResyncAt = this.clock.now() + period;
    this.listeners.add(listener);
    if (this.started) {
      for (const obj of this.indexer.list()) listener.add({ type: 'add', obj, isInInitialList: true });
      void listener.run();
      this.armResync();
    }
    const registration: HandlerRegistration = {
      hasSynced: () => this.listeners.has(listener) && this.hasSynced() && listener.pendingInitial === 0,
      remove: () => {
        if (this.listeners.delete(listener)) listener.stop();
        this.syncing.delete(listener);
      },
    };
    return registration;
  }

  /** Adds indexes; existing items are indexed at once. */
  addIndexers(indexers: Indexers<T>): void {
    this.indexer.addIndexers(indexers);
  }

  /** Read access to the cache and its indexes. */
  getIndexer(): IndexerReader<T> {
    return this.indexer;
  }

  /** The Lister on the cache (get, list by namespace and label selector): the objects are frozen, never copies. */
  lister(): Lister<T> {
    return this.listers;
  }

  /** True once the initial list of every namespace has been delivered into the cache. */
  hasSynced(): boolean {
    return this.queue.hasSynced();
  }

  /**
   * Why the informer has not synced yet: the latest request failure of each namespace still without its first list
   * (`ns=<namespace>: ` prefixed when several), e.g. a 404 for a CRD that is not installed or a 403 from RBAC.
   * Undefined when synced or when nothing failed (the list is just not finished).
   */
  syncError(): string | undefined {
    if (this.hasSynced()) return undefined;
    const parts: string[] = [];
    this.reflectors.forEach((r, i) => {
      const f = r.lastError();
      if (!f || r.lastSyncResourceVersion() !== '') return; // this namespace has listed; another one holds the sync
      const scope = this.scopes[i] ?? '';
      parts.push(`${this.scopes.length > 1 ? `ns=${scope}: ` : ''}${describeFailure(f, this.resource)}`);
    });
    return parts.length > 0 ? parts.join('; ') : undefined;
  }

  /** Resolves true once synced (false on timeout/abort). */
  waitForSync(opts: WaitForSyncOptions = {}): Promise<boolean> {
    return waitForCacheSync([() => this.hasSynced()], { clock: this.clock, ...opts });
  }

  /**
   * The resourceVersion the cache reflects ('' before the first list). With several namespaces, the highest of
   * their versions (resourceVersions come from one etcd, so they compare as integers in practice).
   */
  lastSyncResourceVersion(): string {
    const rvs = this.reflectors.map((r) => r.lastSyncResourceVersion()).filter((rv) => rv !== '');
    if (rvs.length <= 1) return rvs[0] ?? '';
    if (!rvs.every((rv) => /^\d+$/.test(rv))) return rvs[rvs.length - 1] as string;
    return rvs.reduce((a, b) => (BigInt(b) > BigInt(a) ? b : a));
  }

  /**
   * True while every reflector of this informer is watching — not listing, relisting or backing off — so its cache
   * follows the server (`explore` waits for this before it calls a manager at rest).
   */
  isWatching(): boolean {
    return this.reflectors.length > 0 && this.reflectors.every((r) => r.currentState().phase.name === 'Watching');
  }

  /**
   * Each reflector's counts and phase (one per namespace of the scope, in `scopes` order): lists, watch streams
   * opened, phase and since when (the informer debug endpoint).
   */
  reflectorStatus(): (ReflectorStatus & { namespace: string })[] {
    return this.reflectors.map((r, i) => ({ namespace: this.scopes[i] ?? '', ...r.status() }));
  }

  /** Whether start() was called. */
  isStarted(): boolean {
    return this.started;
  }

  /** Whether it stopped (its signal aborted and everything it ran ended). */
  isStopped(): boolean {
    return this.stopped;
  }

  /** Lists, watches and dispatches until `signal` aborts; resolves once everything stopped. May be called once. */
  async start(signal: AbortSignal): Promise<void> {
    if (this.started) throw new Error(`informer ${resourceId(this.resource)} already started`);
    this.started = true;
    this.log.info({ namespaces: this.scopes }, 'starting informer');
    for (const l of this.listeners) void l.run();
    this.armResync();
    const runs = this.reflectors.map((r) => r.run(signal));
    const loop = (async (): Promise<void> => {
      let popped = 0;
      while (await this.queue.pop((deltas, initial) => this.processDeltas(deltas, initial), signal)) {
        // A big relist queues thousands of keys; let timers and sockets run between batches.
        if (++popped % POP_BATCH === 0) await yieldToEventLoop();
      }
    })();
    await Promise.all([...runs, loop]);
    this.stopped = true;
    this.resyncTimer?.cancel();
    this.queue.close();
    for (const l of this.listeners) l.stop();
    this.log.info('informer stopped');
  }

  private sinkFor(scope: string): ReflectorSink {
    // Every cached object is deep-frozen after the transform (object.ts deepFreeze): what a Lister, an Indexer or a
    // handler hands out cannot be mutated in place. The transform itself still gets the fresh, mutable decode.
    const tf = (obj: KubeObject): T => {
      let out: T;
      try {
        out = this.transform(obj);
      } catch (err) {
        this.log.error({ err }, 'transform failed; caching the object untransformed');
        out = obj as T;
      }
      return deepFreeze(out);
    };
    return {
      replace: (items, rv) => {
        const out: T[] = new Array<T>(items.length);
        for (let i = 0; i < items.length; i++) out[i] = tf(items[i] as KubeObject);
        this.queue.replace(out, rv, scope);
      },
      add: (obj) => this.queue.add(tf(obj)),
      update: (obj) => this.queue.update(tf(obj)),
      delete: (obj) => this.queue.delete(tf(obj)),
    };
  }

  private processDeltas(deltas: readonly Delta<T>[], isInInitialList: boolean): void {
    for (const d of deltas) {
      try {
        if (d.type === 'Deleted') {
          this.indexer.deleteByKey(deletionHandlingKey(d.object));
          this.distribute({ type: 'delete', obj: d.object }, false);
          continue;
        }
        const obj = d.object as T;
        const old = this.indexer.get(obj);
        if (old !== undefined) {
          this.indexer.update(obj);
          const rv = resourceVersionOf(obj);
          const isSync = d.type === 'Sync' || (d.type === 'Replaced' && rv !== '' && resourceVersionOf(old) === rv);
          this.distribute({ type: 'update', oldObj: old, newObj: obj }, isSync);
        } else {
          this.indexer.add(obj);
          this.distribute({ type: 'add', obj, isInInitialList }, false);
        }
      } catch (err) {
        this.log.error({ err, delta: d.type }, 'cannot apply delta');
      }
    }
  }

  private distribute(n: Notification<T>, isSync: boolean): void {
    for (const l of isSync ? this.syncing : this.listeners) l.add(n);
  }

  /** Arms one timer for the earliest handler resync due. */
  private armResync(): void {
    this.resyncTimer?.cancel();
    this.resyncTimer = undefined;
    if (!this.started || this.stopped) return;
    let next = Infinity;
    for (const l of this.listeners) if (l.resyncPeriodMs > 0) next = Math.min(next, l.nextResyncAt);
    if (next === Infinity) return;
    this.resyncTimer = this.clock.setTimer(next - this.clock.now(), () => {
      this.resyncTimer = undefined;
      const now = this.clock.now();
      const due = new Set<ProcessorListener<T>>();
      for (const l of this.listeners) {
        if (l.resyncPeriodMs > 0 && now >= l.nextResyncAt) {
          due.add(l);
          l.nextResyncAt = now + l.resyncPeriodMs;
        }
      }
      this.syncing = due;
      if (due.size > 0) this.queue.resync();
      this.armResync();
    });
  }
}

/** A request failure in one line: the API server's message, plus what a 404 on a collection usually means. */
function describeFailure(f: RequestFailure, resource: ResourceType): string {
  const text = f.status && !f.message.includes(`HTTP ${f.status}`) ? `HTTP ${f.status} ${f.reason}: ${f.message}` : f.message;
  if (f.status !== 404) return text;
  return `${text} (the API server does not serve ${resource.kind} ${resource.group ? `${resource.group}/` : ''}${resource.version}: ${resource.group ? 'is its CustomResourceDefinition installed?' : 'wrong version?'})`;
}
