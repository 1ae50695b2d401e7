/**
 * `informer_lists_total{resource}` and `informer_watches_total{resource}` — counters of what the reflectors of a
 * resource (`resourceId`, e.g. `foos.samplecontroller.k8s.io/v1alpha1`) did: lists begun (the initial list and every
 * relist — after a 410 Gone, a failed list or a failed store) and watch streams opened (the first and every restart:
 * after the server's timeout, an error or a relist). A watch restart every 5–10 min per reflector is normal (the
 * watch timeout); lists rising faster than the restarts of the API server are relists worth a look.
 *
 * Concurrency: single event loop; one family per registry, shared by every informer of the process.
 */
import { Counter, type Registry } from 'prom-client';
import { getOrCreate } from '../metrics/registry.ts';

/** The reflector hooks (ReflectorOptions.onList / onWatch) that count into `registry` for `resource`. */
export function reflectorCounters(registry: Registry, resource: string): { onList: () => void; onWatch: () => void } {
  const lists = getOrCreate(registry, 'informer_lists_total', () => new Counter({
    name: 'informer_lists_total',
    help: 'Lists begun by the informers of the resource: the initial list and every relist.',
    labelNames: ['resource'] as const,
    registers: [registry],
  })).labels({ resource });
  const watches = getOrCreate(registry, 'informer_watches_total', () => new Counter({
    name: 'informer_watches_total',
    help: 'Watch streams opened by the informers of the resource: the first and every restart.',
    labelNames: ['resource'] as const,
    registers: [registry],
  })).labels({ resource });
  return { onList: () => lists.inc(), onWatch: () => watches.inc() };
}
