/**
 * Counts open watch streams per resource and namespace ('' = all namespaces / cluster-scoped), so tests and
 * debugging can prove that one informer means one watch. A stream counts as open from the server's 200 answer until
 * the stream ends, fails or is aborted. Single event loop; no locking needed.
 */
import { resourceId, type ResourceType } from '../apimachinery/resource.ts';

export interface WatchTracker {
  opened(): void;
  closed(): void;
}

export class WatchCounter {
  private readonly counts = new Map<string, number>();

  /** Hooks for one reflector's watches. */
  tracker(resource: ResourceType, namespace = ''): WatchTracker {
    const key = `${resourceId(resource)}|${namespace}`;
    return {
      opened: () => this.counts.set(key, (this.counts.get(key) ?? 0) + 1),
      closed: () => {
        const n = (this.counts.get(key) ?? 0) - 1;
        if (n > 0) this.counts.set(key, n);
        else this.counts.delete(key);
      },
    };
  }

  /** Open watches of a resource in one namespace, or across all namespaces when `namespace` is undefined. */
  count(resource: ResourceType, namespace?: string): number {
    const id = resourceId(resource);
    if (namespace !== undefined) return this.counts.get(`${id}|${namespace}`) ?? 0;
    let total = 0;
    for (const [k, n] of this.counts) if (k.startsWith(`${id}|`)) total += n;
    return total;
  }

  /** Total open watches. */
  total(): number {
    let total = 0;
    for (const n of this.counts.values()) total += n;
    return total;
  }

  /** `{ "<resourceId>|<namespace>": count }` of every open watch. */
  snapshot(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }
}

/** The process-wide counter used when none is injected. */
export const globalWatchCounter = new WatchCounter();
