/**
 * Consistent-hash ring: which shard owns a key. Each live shard contributes `virtualNodes` points on a 32-bit ring;
 * a key belongs to the shard of the first point at or after the key's hash (wrapping around).
 *
 * Properties (tested in ring.test.ts):
 *  - Deterministic: the same members and key give the same shard in every replica (no shared state, no randomness);
 *    member order does not matter.
 *  - Balanced: with the default 2 000 virtual nodes per shard the ring's own imbalance is about 2 %, below the
 *    sampling noise of a few thousand keys (measured over 200 random 3-shard rings × 3 000 keys: worst shard 10.7 %
 *    off a third; with 100 virtual nodes 33 %, and 14 % of the rings had a shard > 15 % off).
 *  - Stable under membership change: adding a shard moves only keys to the new shard (about 1/(N+1) of them);
 *    removing one moves only that shard's keys. No key moves between two shards that stay.
 *
 * Pure and immutable: build a new ring when membership changes.
 */

/** Default virtual nodes per shard (see "Balanced"; a ring of 4 shards is 8 000 points, built in about a millisecond). */
export const defaultVirtualNodes = 2000;

/** FNV-1a over UTF-16 code units, then murmur3's fmix32 finaliser so nearby inputs spread over the whole ring. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class HashRing {
  readonly members: readonly string[];
  private readonly points: Uint32Array;
  private readonly owners: string[];

  constructor(members: Iterable<string>, virtualNodes = defaultVirtualNodes) {
    if (!Number.isInteger(virtualNodes) || virtualNodes < 1) throw new Error(`virtualNodes must be a positive integer, got ${virtualNodes}`);
    this.members = [...new Set(members)].sort();
    const entries: { point: number; owner: string }[] = [];
    for (const m of this.members) {
      for (let i = 0; i < virtualNodes; i++) entries.push({ point: hash32(`${m}#${i}`), owner: m });
    }
    // Ties (astronomically rare) are broken by member name so every replica agrees.
    entries.sort((a, b) => a.point - b.point || (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0));
    this.points = Uint32Array.from(entries, (e) => e.point);
    this.owners = entries.map((e) => e.owner);
  }

  /** The shard owning `key`, or undefined when the ring has no members. */
  lookup(key: string): string | undefined {
    const n = this.points.length;
    if (n === 0) return undefined;
    const h = hash32(key);
    let lo = 0;
    let hi = n; // first index with points[i] >= h
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.points[mid] as number) < h) lo = mid + 1;
      else hi = mid;
    }
    return this.owners[lo === n ? 0 : lo];
  }
}
