/**
 * `informer_synced{resource}` — gauge, 1 when every informer of that resource (`resourceId`, e.g.
 * `foos.samplecontroller.k8s.io/v1alpha1`) in this process has synced its cache (initial list delivered), else 0.
 * Computed at scrape time from the running factories; the readiness an alert can see (a replica whose caches never
 * sync is not ready and, as leader, exits after --cache-sync-timeout).
 *
 * Ownership: SharedInformerFactory.run registers itself for as long as it runs; a stopped factory reports nothing.
 * One family per registry, summing (min over) every running factory of the process.
 */
import { Gauge, type Registry } from 'prom-client';
import { getOrCreate } from '../metrics/registry.ts';
import { resourceId, type ResourceType } from '../apimachinery/resource.ts';

export interface SyncSource {
  informers(): readonly { resource: ResourceType; hasSynced(): boolean }[];
}

const sources = new WeakMap<Registry, Set<SyncSource>>();

/** Adds `source` to `registry`'s informer_synced gauge until the returned function is called. */
export function registerInformerSyncedGauge(registry: Registry, source: SyncSource): () => void {
  let set = sources.get(registry);
  if (!set) {
    const mine = new Set<SyncSource>();
    sources.set(registry, (set = mine));
    getOrCreate(registry, 'informer_synced', () => new Gauge({
      name: 'informer_synced',
      help: 'Whether every informer of the resource has synced its cache (1) or not yet (0).',
      labelNames: ['resource'] as const,
      registers: [registry],
      collect(this: Gauge<'resource'>) {
        this.reset();
        const synced = new Map<string, boolean>();
        for (const s of mine) {
          for (const i of s.informers()) {
            const id = resourceId(i.resource);
            synced.set(id, (synced.get(id) ?? true) && i.hasSynced());
          }
        }
        for (const [resource, ok] of synced) this.set({ resource }, ok ? 1 : 0);
      },
    }));
  }
  set.add(source);
  const registered = set;
  return () => void registered.delete(source);
}
