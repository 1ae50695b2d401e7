/**
 * Shard membership from shard Leases, judged the way client-go's leader election judges a Lease: by what THIS process
 * observed, never by comparing the holder's timestamps with the local clock (clocks of two machines may disagree).
 *
 * Every replica holds its own shard Lease (holderIdentity = its shard name) and renews it like the leader Lease. The
 * sharder keeps, per Lease, the last record it saw and the local monotonic time it first saw that record. A shard is
 * live while its record changed within its leaseDurationSeconds of local time:
 *
 *   | event                                   | observation                    | live?                               |
 *   |-----------------------------------------|--------------------------------|-------------------------------------|
 *   | Lease seen for the first time           | record, observedAt = now       | yes, until observedAt + duration    |
 *   | same record seen again                  | unchanged (observedAt kept)    | only until observedAt + duration    |
 *   | record changed (a renewal)              | record, observedAt = now       | yes, until the new deadline         |
 *   | holderIdentity empty (released)         | record, observedAt = now       | no (a released Lease is not a shard)|
 *   | Lease gone from the list                | dropped                        | no                                  |
 *
 * A shard judged dead has stopped acting by then: it stops as soon as it cannot renew within its renew deadline,
 * which is shorter than the lease duration (same contract as the leader; pkg/manager/leaderelection.ts).
 */

/** The fields of a coordination.k8s.io/v1 Lease this module reads. */
export interface ShardLease {
  metadata?: { name?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string; acquireTime?: string; leaseTransitions?: number };
}

export interface Observation {
  /** The record as a comparable string (holder, duration, renew/acquire times, transitions). */
  record: string;
  holder: string;
  durationMs: number;
  /** Local monotonic time (ms) when this record was first seen. */
  observedAt: number;
}

function recordOf(l: ShardLease): string {
  const s = l.spec ?? {};
  return JSON.stringify([s.holderIdentity ?? '', s.leaseDurationSeconds ?? 0, s.renewTime ?? '', s.acquireTime ?? '', s.leaseTransitions ?? 0]);
}

/** The next observations after listing `leases` at local time `now` (pure: `prev` is not modified). */
export function observe(prev: ReadonlyMap<string, Observation>, leases: readonly ShardLease[], now: number): Map<string, Observation> {
  const next = new Map<string, Observation>();
  for (const l of leases) {
    const name = l.metadata?.name;
    if (!name) continue;
    const record = recordOf(l);
    const before = prev.get(name);
    next.set(name, before && before.record === record ? before : {
      record, holder: l.spec?.holderIdentity ?? '', durationMs: (l.spec?.leaseDurationSeconds ?? 0) * 1000, observedAt: now,
    });
  }
  return next;
}

/** Shard names (holder identities) live at local time `now`. */
export function liveShards(observations: ReadonlyMap<string, Observation>, now: number): Set<string> {
  const live = new Set<string>();
  for (const o of observations.values()) {
    if (o.holder !== '' && now < o.observedAt + o.durationMs) live.add(o.holder);
  }
  return live;
}

/** When the membership may next change without a new observation (the earliest expiry still ahead), or undefined. */
export function nextExpiry(observations: ReadonlyMap<string, Observation>, now: number): number | undefined {
  let next: number | undefined;
  for (const o of observations.values()) {
    const at = o.observedAt + o.durationMs;
    if (o.holder !== '' && at > now && (next === undefined || at < next)) next = at;
  }
  return next;
}
