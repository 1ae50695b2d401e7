/**
 * SharedInformerFactory: hands out one SharedIndexInformer per resource type and namespace scope, so every
 * controller of the process shares one list+watch and one cache per type.
 *
 * Scope: given at construction (`namespaces`: [] = all namespaces, one name, or several — parse WATCH_NAMESPACE
 * with parseWatchNamespace) and overridable per call. With several namespaces an informer runs one reflector
 * (list+watch) per namespace into a single cache (see sharedinformer.ts); cluster-scoped types always use one
 * cluster-wide watch regardless of the scope.
 *
 * Identity: informerFor returns the same informer for the same group/version/kind, effective namespace set,
 * selectors and `metadataOnly` (a metadata-only informer and a full one of a type are two list+watches). The first
 * call's `transform` and `indexers` win (indexers can still be added later with addIndexers).
 *
 * Lifecycle: `start(signal)` starts every informer created so far and every one created afterwards;
 * `run(signal)` does the same and resolves once the signal aborted and all informers stopped (a Manager runnable).
 * An informer whose `start` rejects stops the whole `run`: the other informers are stopped and `run` rejects with
 * `informer for <resource> (<Kind>) failed: …`, so the Manager shuts down naming the resource instead of staying
 * up unready (with `start` alone such a failure is only logged). `waitForCacheSync` waits for the informers created
 * so far; `unsyncedCaches()` says which have not synced and why (the reflector's last error), for the Manager's
 * cache-sync timeout message and /readyz.
 *
 * Concurrency: single event loop; the factory's maps are only touched by these methods.
 */
import type { Registry } from 'prom-client';
import type { RestClient } from '../client/rest.ts';
import { silentLogger, type Logger } from '../log/logger.ts';
import { globalRegistry } from '../metrics/registry.ts';
import { realClock, type Clock } from '../util/clock.ts';
import type { Indexers } from './indexer.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { resourceId, type ResourceType } from '../apimachinery/resource.ts';
import { SharedIndexInformer, type ReflectorTuning } from './sharedinformer.ts';
import { registerInformerSyncedGauge } from './syncmetrics.ts';
import { waitForCacheSync } from './waitforsync.ts';
import { WatchCounter } from './watchcounter.ts';

export interface SharedInformerFactoryOptions {
  client: RestClient;
  /** [] or undefined = all namespaces; otherwise the namespaces to watch. */
  namespaces?: readonly string[];
  /** Default resync period of handlers (ms; 0 = never). */
  defaultResyncPeriodMs?: number;
  /**
   * Fill caches with streaming lists (a WATCH with sendInitialEvents=true, synced by the k8s.io/initial-events-end
   * bookmark) instead of paged LISTs; falls back to paged LIST for good when the server refuses. Default false: it
   * did not win at 10 000 objects (bench/watchlist.ts, bench/README.md); proven on a real server in
   * test/watchlist.test.ts.
   */
  useWatchList?: boolean;
  reflector?: ReflectorTuning;
  clock?: Clock;
  logger?: Logger;
  random?: () => number;
  /** Open-watch bookkeeping; default: a counter of this factory. */
  watchCounter?: WatchCounter;
  /** Where informer metrics (`informer_handler_errors_total`) are registered. Default: the global registry. */
  registry?: Registry;
}

/**
 * Options of `informerFor`: namespace scope, label/field selectors, transform, indexers and resync period. The first
 * call for an informer wins its transform and indexers.
 */
export interface InformerForOptions<T extends KubeObject> {
  /** Overrides the factory's namespace scope for this informer ([] = all namespaces). */
  namespaces?: readonly string[];
  /** Cache only the objects matching this label selector (sent with the list and watch): a separate informer. */
  labelSelector?: string;
  /** Cache only the objects matching this field selector (sent with the list and watch): a separate informer. */
  fieldSelector?: string;
  /**
   * List and watch metadata only (PartialObjectMetadata, controller-runtime's `OnlyMetadata`): the API server sends
   * and the cache holds `{ apiVersion, kind, metadata }` of each object, under the resource's apiVersion and kind —
   * for watches that need labels, owners or deletion only (less to transfer, decode and keep). A separate informer.
   */
  metadataOnly?: boolean;
  /** Applied to every object before it is cached (then frozen); default: drop managedFields. */
  transform?: (obj: KubeObject) => T;
  /** Secondary indexes of the cache, by name (the `namespace` index always exists). */
  indexers?: Indexers<T>;
  /** Resync period of this informer's handlers (ms; 0 = never); default the factory's. */
  resyncPeriodMs?: number;
}

/** WATCH_NAMESPACE: '' or unset = all namespaces ([]), 'a' = ['a'], 'a,b' = ['a', 'b'] (blanks dropped, deduplicated). */
export function parseWatchNamespace(value: string | undefined): string[] {
  return [...new Set((value ?? '').split(',').map((s) => s.trim()).filter((s) => s !== ''))];
}

function normalizeScope(resource: ResourceType, namespaces: readonly string[]): string[] {
  if (!resource.namespaced) return [];
  return [...new Set(namespaces.filter((n) => n !== ''))].sort();
}

/**
 * Hands out one SharedIndexInformer per resource type, namespace scope and selectors, so every controller of the
 * process shares one list+watch and one cache per type (client-go's SharedInformerFactory).
 */
export class SharedInformerFactory {
  /** Counts the watches open per resource and namespace (opts.watchCounter, or this factory's own). */
  readonly watchCounter: WatchCounter;
  private readonly opts: SharedInformerFactoryOptions;
  private readonly namespaces: readonly string[];
  private readonly byKey = new Map<string, SharedIndexInformer<KubeObject>>();
  private readonly runs = new Set<Promise<void>>();
  private signal: AbortSignal | undefined;
  /** Set while `run` is running: stops it with the first informer failure. */
  private onFailure: ((err: Error) => void) | undefined;
  private readonly clock: Clock;
  private readonly log: Logger;

  /** Creates no informer and starts nothing: informerFor() creates, start(signal) runs them. */
  constructor(opts: SharedInformerFactoryOptions) {
    this.opts = opts;
    this.namespaces = opts.namespaces ?? [];
    this.watchCounter = opts.watchCounter ?? new WatchCounter();
    this.clock = opts.clock ?? realClock;
    this.log = opts.logger ?? silentLogger;
  }

  /** The shared informer for a resource type in the factory's (or the given) namespace scope. */
  informerFor<T extends KubeObject = KubeObject>(resource: ResourceType, opts: InformerForOptions<T> = {}): SharedIndexInformer<T> {
    const scope = normalizeScope(resource, opts.namespaces ?? this.namespaces);
    const key = [
      `${resource.group}/${resource.version}/${resource.kind}`,
      scope.join(','),
      opts.labelSelector ?? '',
      opts.fieldSelector ?? '',
      opts.metadataOnly ? 'metadata' : '',
    ].join('|');
    const existing = this.byKey.get(key);
    if (existing) return existing as unknown as SharedIndexInformer<T>;

    const informer = new SharedIndexInformer<T>({
      resource,
      client: this.opts.client,
      namespaces: scope,
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
      metadataOnly: opts.metadataOnly,
      transform: opts.transform,
      indexers: opts.indexers,
      resyncPeriodMs: opts.resyncPeriodMs ?? this.opts.defaultResyncPeriodMs,
      useWatchList: this.opts.useWatchList,
      reflector: this.opts.reflector,
      clock: this.clock,
      logger: this.log,
      random: this.opts.random,
      watchCounter: this.watchCounter,
      registry: this.opts.registry,
    });
    // Informers of different T share one map; callers get back the T they asked for (a cast, as in client-go).
    this.byKey.set(key, informer as unknown as SharedIndexInformer<KubeObject>);
    if (this.signal && !this.signal.aborted) this.startOne(informer as unknown as SharedIndexInformer<KubeObject>, this.signal);
    return informer;
  }

  /** Starts every informer not yet started, and every informer created later, until `signal` aborts. */
  start(signal: AbortSignal): void {
    this.signal = signal;
    for (const informer of this.byKey.values()) {
      if (!informer.isStarted()) this.startOne(informer, signal);
    }
  }

  /**
   * start(signal), then resolves once the signal aborted and every informer stopped. Rejects (after stopping every
   * informer) when an informer's start rejected, with an error naming its resource.
   */
  async run(signal: AbortSignal): Promise<void> {
    const ac = new AbortController();
    const onAbort = (): void => ac.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    let failure: Error | undefined;
    // informer_synced (syncmetrics.ts) reports this factory's informers while it runs.
    const unregister = registerInformerSyncedGauge(this.opts.registry ?? globalRegistry, this);
    this.onFailure = (err) => {
      failure ??= err;
      ac.abort(err);
    };
    try {
      this.start(ac.signal);
      if (!ac.signal.aborted) await new Promise<void>((resolve) => ac.signal.addEventListener('abort', () => resolve(), { once: true }));
      while (this.runs.size > 0) await Promise.allSettled([...this.runs]);
    } finally {
      unregister();
      this.onFailure = undefined;
      signal.removeEventListener('abort', onAbort);
    }
    if (failure) throw failure;
  }

  /** Resolves true once every informer created so far has synced; false on timeout or abort. */
  waitForCacheSync(opts: { timeoutMs?: number; signal?: AbortSignal; pollIntervalMs?: number } = {}): Promise<boolean> {
    const informers = [...this.byKey.values()];
    return waitForCacheSync(
      informers.map((i) => () => i.hasSynced()),
      { clock: this.clock, ...opts },
    );
  }

  /** Sync state per informer, keyed `<resourceId>[ metadata][ ns=a,b]` (diagnostics, /readyz details). */
  syncStatus(): Record<string, boolean> {
    const out: Record<string, boolean> = {};
    for (const i of this.byKey.values()) {
      const ns = i.scopes.filter((s) => s !== '');
      out[`${resourceId(i.resource)}${i.metadataOnly ? ' metadata' : ''}${ns.length ? ` ns=${ns.join(',')}` : ''}`] = i.hasSynced();
    }
    return out;
  }

  /**
   * The informers not synced yet, one line each: `<resourceId> (<Kind>[, metadata])[ ns=a,b]`, and when a request
   * failed, `: ` and the latest failure (e.g. `foos.samplecontroller.k8s.io/v1alpha1 (Foo): GET /apis/…: HTTP 404
   * NotFound: the server could not find the requested resource (… is its CustomResourceDefinition installed?)`).
   * `excuse` leaves out the unsynced informers it returns true for.
   */
  unsyncedCaches(excuse?: (informer: SharedIndexInformer<KubeObject>) => boolean): string[] {
    const out: string[] = [];
    for (const i of this.byKey.values()) {
      if (i.hasSynced() || excuse?.(i)) continue;
      const ns = i.scopes.filter((s) => s !== '');
      const why = i.syncError();
      out.push(`${resourceId(i.resource)} (${i.resource.kind}${i.metadataOnly ? ', metadata' : ''})${ns.length ? ` ns=${ns.join(',')}` : ''}${why ? `: ${why}` : ''}`);
    }
    return out;
  }

  /** Every informer created so far. */
  informers(): SharedIndexInformer<KubeObject>[] {
    return [...this.byKey.values()];
  }

  /** Open watch streams of a resource (in one namespace, or summed over namespaces when undefined). */
  openWatches(resource: ResourceType, namespace?: string): number {
    return this.watchCounter.count(resource, namespace);
  }

  private startOne(informer: SharedIndexInformer<KubeObject>, signal: AbortSignal): void {
    const p = informer.start(signal).catch((err: unknown) => {
      const id = resourceId(informer.resource);
      this.log.error({ err, resource: id }, 'informer failed');
      const message = err instanceof Error ? err.message : String(err);
      this.onFailure?.(new Error(`informer for ${id} (${informer.resource.kind}) failed: ${message}`, { cause: err }));
    });
    this.runs.add(p);
    void p.finally(() => this.runs.delete(p));
  }
}
