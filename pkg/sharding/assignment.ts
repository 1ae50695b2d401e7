/**
 * Shard assignment protocol (issue 13), as pure decisions — the sharder's `decide` and a shard's `shardView`. The
 * drivers (membership Leases, label patches, label-selected informers) apply them; nothing here does I/O.
 *
 * Labels on every object of a sharded controller `<c>` (and on the objects it owns, which follow their owner):
 *   shard.ts-controller-manager.io/<c> = <shard>   the one shard that may reconcile the object
 *   drain.ts-controller-manager.io/<c> = "true"    the sharder asks that shard to let go of it
 *
 * Invariant — never two actors: at any instant at most one shard may reconcile an object. A shard acts on an object
 * only while it carries that shard's label, no drain label, and the shard holds its own shard Lease (a shard that
 * cannot renew its Lease stops acting at once, exactly as a leader that loses the leader Lease does). The sharder
 * moves an object between two LIVE shards only through a drain: it sets the drain label; the old shard stops taking
 * new reconciles of the object, waits for the one in flight, then acknowledges by removing BOTH labels; only an
 * object with no shard label is assigned anew. An object of a DEAD shard (its Lease expired, so it no longer acts)
 * is reassigned at once. Every sharder patch carries the object's resourceVersion, so a patch decided on a stale
 * view fails with 409 and is decided again.
 *
 * Sharder transitions (`decide`; desired = the ring's shard for the object's key; live = shards with a valid Lease):
 *   | shard label | drain | label's shard | desired   | action                                   |
 *   |-------------|-------|---------------|-----------|------------------------------------------|
 *   | none        | any   | —             | none      | none (no live shard: wait)                |
 *   | none        | any   | —             | d         | assign d (sets the shard, clears drain)   |
 *   | s           | no    | live          | s         | none (in place)                          |
 *   | s           | no    | live          | d ≠ s     | drain (ask s to let go)                  |
 *   | s           | yes   | live          | any       | none (wait for s to acknowledge)         |
 *   | s           | any   | dead          | d         | assign d (s no longer acts)              |
 *   | s           | any   | dead          | none      | none (no live shard: wait)                |
 * A drain is never cancelled (if membership flips back, the object returns after the acknowledgement): cancelling
 * would race with the acknowledgement for no gain.
 *
 * Owned objects (a Foo's Deployment) carry their owner's shard label, never a drain label: shards reconcile owners,
 * not owned objects, so only the owner needs the drain. When the sharder assigns an owner to shard d it first labels
 * the owner's owned objects d and only then the owner, so d's caches hold the owned objects before d may reconcile
 * the owner (otherwise d would see "Deployment missing" and try to create it: a harmless 409, but a wasted write).
 *
 * Shard view (`shardView`, for shard `me`): own label without drain → "active" (reconcile); own label with drain →
 * "draining" (no new reconcile; acknowledge once none is in flight); anything else → "foreign" (the shard's
 * informers select only its own label, so it does not even cache these).
 */

export const shardLabelPrefix = 'shard.ts-controller-manager.io/';
export const drainLabelPrefix = 'drain.ts-controller-manager.io/';

export function shardLabel(controller: string): string {
  return `${shardLabelPrefix}${controller}`;
}

export function drainLabel(controller: string): string {
  return `${drainLabelPrefix}${controller}`;
}

/** What the sharder sees of one object. */
export interface Placement {
  /** Value of the shard label, if any. */
  shard: string | undefined;
  /** Whether the drain label is set. */
  drain: boolean;
}

export type Decision =
  | { kind: 'none'; why: 'in-place' | 'no-live-shard' | 'awaiting-drain' }
  | { kind: 'assign'; shard: string; from: string | undefined }
  | { kind: 'drain'; from: string; to: string };

/** The sharder's decision for one object (table in the file comment). */
export function decide(p: Placement, desired: string | undefined, live: ReadonlySet<string>): Decision {
  if (p.shard === undefined || !live.has(p.shard)) {
    if (desired === undefined) return { kind: 'none', why: 'no-live-shard' };
    return { kind: 'assign', shard: desired, from: p.shard };
  }
  if (p.drain) return { kind: 'none', why: 'awaiting-drain' };
  if (desired === undefined || desired === p.shard) return { kind: 'none', why: 'in-place' };
  return { kind: 'drain', from: p.shard, to: desired };
}

/** The placement read from an object's labels. */
export function placementOf(labels: Readonly<Record<string, string>> | undefined, controller: string): Placement {
  const shard = labels?.[shardLabel(controller)];
  return { shard: shard === undefined || shard === '' ? undefined : shard, drain: labels?.[drainLabel(controller)] === 'true' };
}

/** The label patch (merge-patch `metadata.labels`) that carries out a decision; undefined for "none". */
export function labelPatch(d: Decision, controller: string): Record<string, string | null> | undefined {
  switch (d.kind) {
    case 'assign':
      return { [shardLabel(controller)]: d.shard, [drainLabel(controller)]: null };
    case 'drain':
      return { [drainLabel(controller)]: 'true' };
    case 'none':
      return undefined;
  }
}

/** The patch with which a draining shard acknowledges: it removes both labels. */
export function acknowledgePatch(controller: string): Record<string, null> {
  return { [shardLabel(controller)]: null, [drainLabel(controller)]: null };
}

/**
 * The JSON patch (application/json-patch+json) with which shard `shard` acknowledges a drain: a `test` that the
 * shard label still names `shard` — the fence: the API server answers 422 and changes nothing when the object was
 * meanwhile assigned elsewhere — then the removal of both labels (`acknowledgePatch`).
 */
export function acknowledgeJsonPatch(controller: string, shard: string): { op: 'test' | 'remove'; path: string; value?: string }[] {
  const path = (l: string): string => `/metadata/labels/${l.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  return [
    { op: 'test', path: path(shardLabel(controller)), value: shard },
    ...Object.keys(acknowledgePatch(controller)).map((l) => ({ op: 'remove' as const, path: path(l) })),
  ];
}

export type ShardView = 'active' | 'draining' | 'foreign';

/** How shard `me` must treat an object with these labels. */
export function shardView(labels: Readonly<Record<string, string>> | undefined, controller: string, me: string): ShardView {
  const p = placementOf(labels, controller);
  if (p.shard !== me) return 'foreign';
  return p.drain ? 'draining' : 'active';
}
