/**
 * Objects the API server deleted while they still carried our finalizer — so without our cleanup.
 *
 * A finalizer is meant to hold an object until its controller removed it. The API server breaks that in one race
 * (kubernetes/kubernetes#77988, open; not fixed in v1.34–v1.37): a DELETE reads the object, finds no finalizer, and
 * removes it from etcd moments later without looking again — so a finalizer a controller added in between (and was
 * answered 200 for) is ignored, and whatever the controller created after adding it outlives the object. Nothing
 * will ever reconcile that object again: it is gone, and its key's next reconcile finds nothing in the cache.
 * test/network-finalizer-race.test.ts opens that window on a real API server.
 *
 * The informer's delete still tells: its final state (or a relist's tombstone, the cache's last state) carries our
 * finalizer and NO deletionTimestamp — the DELETE removed it at once, the deletion never began. A normal deletion's
 * final state carries our finalizer too, but with a deletionTimestamp: when an update removes an object's last
 * finalizer the API server deletes it instead of storing the update, and the watch's DELETED event carries the last
 * stored state — finalizer included (test/bypassedfinalizer.test.ts shows it on the real API server; mistaken for a
 * bypass, every normal deletion cost a GET and a Neutron listing on the leader, and a record held for good on a
 * standby: the endurance bench, issue 43). This records the final states that show the bypass, by key, for the
 * reconcile to run the cleanup from:
 *
 *   const bypassed = new BypassedFinalizers<MyKind>(FINALIZER);
 *   mgr.controller('my').for<MyKind>(myResource, { bypassedFinalizers: bypassed })
 *     .complete(reconcile);                                     // reconcile: bypassed.get(key) → cleanup, done()
 *
 * The builder's delete handler (builder.ts, ForOptions.bypassedFinalizers) offers each delete to `observe` before it
 * enqueues the key, in the same handler — so the reconcile of the key finds the record — on a standby too, and the
 * controller's start enqueues the keys waiting. (Observed from a handler of its own on the informer, a record could
 * come after the builder's enqueue of the same delete was handled: handlers run on their own queues.)
 *
 * Ownership: the builder's delete handler writes (observe), the reconcile of the key reads and clears (get, done);
 * also a reconcile that learns from a write's 404 that the object it just worked on is gone records it (record).
 * Memory: one entry per such deletion until its cleanup succeeded; on a standby replica entries wait until it leads
 * (its start enqueues their keys). Besides real bypasses, a relist's tombstone of an object whose whole deletion fell in
 * a watch gap looks the same (finalizer, no deletionTimestamp cached): its cleanup finds nothing to delete. In memory
 * only: a process that dies before the cleanup takes it with it (and one that starts after the deletion never sees
 * it) — the race's rarity times a crash; docs/safety.md says what is left.
 */
import { metaNamespaceKey } from '../apimachinery/keys.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { objectOfDelete, type DeletedFinalStateUnknown } from '../informerfactory/object.ts';

/**
 * The final states, by key, of objects the informer saw leave while they still carried `finalizer` (see the file
 * comment): `observe` in an informer's delete handler, `get` / `done` in the reconcile of the key. A delete is not proof
 * the object is gone — an informer with a label selector also sees an object that stopped matching it as a delete
 * (e.g. a shard move) — so confirm with the API server (GET: 404, or another UID) before cleaning up.
 */
export class BypassedFinalizers<T extends KubeObject> {
  /** The finalizer whose presence in a final state marks a deletion that skipped the cleanup. */
  readonly finalizer: string;
  private readonly byKey = new Map<string, T>();

  /** For the objects of one controller that keeps `finalizer` on them. */
  constructor(finalizer: string) {
    this.finalizer = finalizer;
  }

  /**
   * An informer delete: its final state is recorded when it still carries the finalizer and no deletionTimestamp
   * (with one, the deletion went through the finalizers: see the file comment); returns its key then.
   */
  observe(deleted: T | DeletedFinalStateUnknown<T>): string | undefined {
    const last = objectOfDelete(deleted);
    if (!last?.metadata?.finalizers?.includes(this.finalizer) || last.metadata.deletionTimestamp) return undefined;
    return this.record(last);
  }

  /** The keys waiting (for a controller's start: enqueue each). */
  keys(): string[] {
    return [...this.byKey.keys()];
  }

  /** Records `obj` (known gone, our finalizer on it) for cleanup; returns its key. A later record of the key wins. */
  record(obj: T): string {
    const key = metaNamespaceKey(obj);
    this.byKey.set(key, obj);
    return key;
  }

  /** The last state of the object of `key` that went without our cleanup, if one is waiting. */
  get(key: string): T | undefined {
    return this.byKey.get(key);
  }

  /** The cleanup of `obj` succeeded: forgets it (not a newer record of the same key with another UID). */
  done(obj: T): void {
    const key = metaNamespaceKey(obj);
    if (this.byKey.get(key)?.metadata?.uid === obj.metadata?.uid) this.byKey.delete(key);
  }

  /** Entries waiting (tests, metrics). */
  get size(): number {
    return this.byKey.size;
  }
}
