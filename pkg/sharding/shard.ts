/**
 * One replica as a shard: its name, its shard Lease, and the labels the objects it creates inherit.
 *
 * Shard name: the value of the shard label on the objects this replica reconciles, and the holderIdentity of its
 * shard Lease — so it must be a valid label value (≤ 63 characters of [A-Za-z0-9._-], alphanumeric at both ends).
 * The process identity (`hostname_uuid`) is used as is when it qualifies; otherwise a readable prefix of it plus a
 * hash, so two processes never share a name (a restarted Pod is a NEW shard: its predecessor's objects move when
 * the old Lease expires, exactly as a new leader takes over).
 *
 * Shard Lease: `<leader lease>-shard-<hash of the shard name>` in the leader Lease's namespace, labelled
 * `sharding.ts-controller-manager.io/lease-of=<leader lease>` so the sharder lists exactly its group's shards. Held
 * with the leader Lease's timing rules (pkg/manager/leaderelection.ts): a shard acts only while it holds it, stops
 * at the renew deadline, and releases it on a clean shutdown (holder "" → no longer a member, its objects move at
 * once).
 */
import { Gauge, type Registry } from 'prom-client';
import type { Lease, LeaseClient } from '../manager/leaderelection.ts';
import { getOrCreate } from '../metrics/registry.ts';
import { hash32 } from './ring.ts';
import { shardLabelPrefix } from './assignment.ts';

/** Label on every shard Lease: the leader Lease (sharding group) it belongs to. */
export const leaseOfLabel = 'sharding.ts-controller-manager.io/lease-of';

const labelValue = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;

/** The shard name of a process identity (see the file comment). */
export function shardNameOf(identity: string): string {
  if (labelValue.test(identity)) return identity;
  const suffix = hash32(identity).toString(16).padStart(8, '0');
  const prefix = identity.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 63 - 1 - suffix.length).replace(/[^A-Za-z0-9]+$/, '');
  return prefix === '' ? `s-${suffix}` : `${prefix}-${suffix}`;
}

/** The shard Lease's name for a shard of the sharding group `leaderLease`. */
export function shardLeaseName(leaderLease: string, shard: string): string {
  return `${leaderLease}-shard-${hash32(shard).toString(16).padStart(8, '0')}`;
}

/**
 * A LeaseClient that labels the Lease it creates as a member of `leaderLease`'s group. It has no `watchReleases`:
 * nobody stands by for a shard Lease (its name is derived from its one holder's unique shard name, and that holder
 * creates it on its first attempt), so a standby watch would be one stream per replica for nothing. Moving a
 * departed shard's objects is the sharder's job, and it already sees shard Leases released through its informer.
 */
export function labelledLeaseClient(inner: LeaseClient, leaderLease: string): LeaseClient {
  const onServerAnswer = inner.onServerAnswer?.bind(inner);
  return {
    description: inner.description,
    ...(onServerAnswer ? { onServerAnswer } : {}),
    get: (signal) => inner.get(signal),
    update: (lease, signal) => inner.update(lease, signal),
    create: (lease: Lease, signal) => {
      const labels = { ...lease.metadata.labels, [leaseOfLabel]: leaderLease };
      return inner.create({ ...lease, metadata: { ...lease.metadata, labels } }, signal);
    },
  };
}

/**
 * The shard labels an object created by a sharded controller for `owner` must carry, so it lands in the same
 * shard's caches at once (owned objects follow their owner; without it the creating shard would not see what it
 * created until the sharder labelled it). Drain labels are never inherited. Empty when sharding is off.
 */
export function inheritedShardLabels(owner: { metadata?: { labels?: Record<string, string> } }): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(owner.metadata?.labels ?? {})) {
    if (k.startsWith(shardLabelPrefix)) out[k] = v;
  }
  return out;
}

const shardCaches = new WeakMap<Registry, Map<string, () => number>>();

/**
 * `sharding_shard_objects{controller}`: how many objects of `controller` this shard caches (its primary informer's
 * size, read at scrape time) — the per-replica side of the sharder's `sharding_objects`.
 */
export function reportShardObjects(registry: Registry, controller: string, size: () => number): void {
  let sizes = shardCaches.get(registry);
  if (!sizes) shardCaches.set(registry, (sizes = new Map<string, () => number>()));
  sizes.set(controller, size);
  const all = sizes;
  getOrCreate(registry, 'sharding_shard_objects', () => new Gauge({
    name: 'sharding_shard_objects', help: 'Objects of each sharded controller assigned to (and cached by) this shard.',
    labelNames: ['controller'] as const, registers: [registry],
    collect() {
      for (const [c, f] of all) this.set({ controller: c }, f());
    },
  }));
}
