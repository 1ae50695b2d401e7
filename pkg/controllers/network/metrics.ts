/**
 * `networks{ready,reason}` — gauge: how many Networks this manager reconciles, by their Ready condition — computed at
 * scrape time (prom-client `collect`) from the Network informer's cache, so it costs nothing between scrapes and is
 * never older than the cache.
 *
 *  - `ready` is the Ready condition's status (`True`, `False`, `Unknown`) and `reason` its reason (`Synced`,
 *    `NeutronUnavailable`, `InvalidSpec`, …; desired.ts). A Network without a Ready condition, or whose condition
 *    describes an older generation (`observedGeneration` < `metadata.generation`), counts as `Unknown`/`Pending`: the
 *    controller has not reconciled its current spec yet.
 *  - Only a manager whose controllers run reports (`active()`: the leader; with --sharding every shard for the
 *    Networks assigned to it), so `sum` over replicas counts every Network once; standbys (same cache, no controller)
 *    report no series.
 *  - A combination that no Network has any more is dropped at the next scrape (the gauge is reset before each
 *    collect), so it disappears rather than staying at its last value.
 *
 * Ownership: the network controller's setup registers its lister once per manager (`registerNetworksGauge`); the
 * family is created once per registry and sums every registered source (several managers in one process share the
 * global registry in tests).
 */
import { Gauge, type Registry } from 'prom-client';
import type { Network } from '../../apis/samplecrd/v1/types.ts';
import type { Lister } from '../../informerfactory/lister.ts';
import { getOrCreate } from '../../metrics/registry.ts';

export interface NetworksSource {
  lister: Pick<Lister<Network>, 'list'>;
  /** Whether this manager's Network controller runs now (see the file comment). */
  active: () => boolean;
}

const sources = new WeakMap<Registry, Set<NetworksSource>>();

/** The `ready`/`reason` labels of one Network (see the file comment). */
export function readyLabels(net: Network): { ready: string; reason: string } {
  const c = net.status?.conditions?.find((x) => x.type === 'Ready');
  const gen = net.metadata?.generation;
  if (!c || (gen !== undefined && c.observedGeneration !== undefined && c.observedGeneration < gen)) return { ready: 'Unknown', reason: 'Pending' };
  return { ready: c.status, reason: c.reason || 'Unknown' };
}

/** Registers `source` in `registry`'s `networks` gauge (created on first use). Returns a function that removes it. */
export function registerNetworksGauge(registry: Registry, source: NetworksSource): () => void {
  let set = sources.get(registry);
  if (!set) {
    const mine = new Set<NetworksSource>();
    sources.set(registry, (set = mine));
    getOrCreate(registry, 'networks', () => new Gauge({
      name: 'networks',
      help: 'Networks reconciled by this manager, by the status (ready) and reason of their Ready condition (Unknown/Pending: not reconciled at their current generation yet).',
      labelNames: ['ready', 'reason'] as const,
      registers: [registry],
      collect(this: Gauge<'ready' | 'reason'>) {
        this.reset();
        const counts = new Map<string, { ready: string; reason: string; n: number }>();
        for (const s of mine) {
          if (!s.active()) continue;
          for (const net of s.lister.list()) {
            const l = readyLabels(net);
            const k = `${l.ready}\u0000${l.reason}`;
            const e = counts.get(k);
            if (e) e.n++;
            else counts.set(k, { ...l, n: 1 });
          }
        }
        for (const { ready, reason, n } of counts.values()) this.set({ ready, reason }, n);
      },
    }));
  }
  set.add(source);
  const registered = set;
  return () => void registered.delete(source);
}
