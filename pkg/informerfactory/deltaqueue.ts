/**
 * DeltaQueue: client-go's DeltaFIFO. A FIFO of object keys; each queued key carries the ordered list of changes
 * (deltas) seen for it since it was last popped, so a consumer sees every change of an object once, in order,
 * and keys are processed in the order they first became dirty.
 *
 * Semantics:
 *  - Delta types: Added, Updated, Deleted, Replaced (an object present in a full relist), Sync (periodic resync).
 *  - Compaction: when the last two deltas of a key are both Deleted they collapse into one (the observed delete is
 *    preferred over a tombstone; otherwise the older one is kept).
 *  - `delete(obj)` of a key that is neither queued nor in `knownObjects` is ignored (nothing to tell anyone).
 *  - `replace(list, rv, scope)` is all or nothing: it throws before changing anything when an object has no key
 *    (the reflector then relists with backoff). Otherwise it queues Replaced for every listed object, then a
 *    Deleted tombstone (DeletedFinalStateUnknown with the last known state) for every key of that scope that is
 *    queued or known to the store but missing from the list. Scope '' means every key; a namespace name restricts deletion detection
 *    to keys of that namespace (used when one cache is fed by one reflector per namespace).
 *  - `resync()` queues Sync for every object of `knownObjects` whose key has no pending deltas.
 *  - hasSynced(): every scope named at construction has delivered its first replace, and every key queued at the
 *    moment the last of them did has been popped and processed.
 *
 * Concurrency contract: producers (reflector drivers) and the single consumer (the informer's processing loop)
 * share one event loop. Every method except `pop` is synchronous; `pop` waits for a key, then calls `process`
 * synchronously with all deltas of that key removed from the queue, so the consumer's store is never observed
 * mid-update. `knownObjects` (the informer's Indexer) is read during replace/resync and written only by `process`.
 */
import { NAMESPACE_INDEX } from './indexer.ts';
import {
  deletedFinalStateUnknown, deletionHandlingKey, isDeletedFinalStateUnknown, type DeletedFinalStateUnknown,
} from './object.ts';
import { splitKey } from '../apimachinery/keys.ts';
import type { KubeObject } from '../apimachinery/meta.ts';

export type DeltaType = 'Added' | 'Updated' | 'Deleted' | 'Replaced' | 'Sync';

export interface Delta<T> {
  readonly type: DeltaType;
  readonly object: T | DeletedFinalStateUnknown<T>;
}

/** The store the queue consults for deletion detection and resync (the informer's Indexer). */
export interface KnownObjects<T> {
  getByKey(key: string): T | undefined;
  listKeys(): string[];
  indexKeys(indexName: string, value: string): string[];
}

export interface DeltaQueueOptions<T> {
  knownObjects: KnownObjects<T>;
  /**
   * Scopes that must each deliver a first `replace` before the queue can be synced: [''] (the default) for one
   * list of everything, or the namespace names when one reflector per namespace feeds the queue.
   */
  scopes?: readonly string[];
}

export type DeltaProcessor<T> = (deltas: readonly Delta<T>[], isInInitialList: boolean) => void;

const COMPACT_AT = 1024;

export class DeltaQueue<T extends KubeObject> {
  private readonly items = new Map<string, Delta<T>[]>();
  /** Keys in FIFO order from `head`; a key is in here exactly once iff `items` has it. */
  private keys: string[] = [];
  private head = 0;
  private readonly knownObjects: KnownObjects<T>;
  private readonly scopes: ReadonlySet<string>;
  private readonly populatedScopes = new Set<string>();
  private populated = false;
  private initialPopulationCount = 0;
  private closed = false;
  private waiters: Array<() => void> = [];

  constructor(opts: DeltaQueueOptions<T>) {
    this.knownObjects = opts.knownObjects;
    this.scopes = new Set(opts.scopes ?? ['']);
    if (this.scopes.size === 0) throw new Error('DeltaQueue needs at least one scope');
  }

  /** Number of keys waiting. */
  get length(): number {
    return this.keys.length - this.head;
  }

  /** Queued keys in pop order (for tests and debugging). */
  queuedKeys(): string[] {
    return this.keys.slice(this.head);
  }

  /** Pending deltas of a key (a copy). */
  deltasOf(key: string): Delta<T>[] {
    return [...(this.items.get(key) ?? [])];
  }

  add(obj: T): void {
    this.queueAction('Added', obj);
  }

  update(obj: T): void {
    this.queueAction('Updated', obj);
  }

  /** Queues a Deleted delta; ignored when the key is neither queued nor known. */
  delete(obj: T | DeletedFinalStateUnknown<T>): void {
    const key = deletionHandlingKey(obj as T);
    if (!this.items.has(key) && this.knownObjects.getByKey(key) === undefined) return;
    this.queueAction('Deleted', obj);
  }

  replace(list: readonly T[], _resourceVersion: string, scope = ''): void {
    // Every key first: an object without one throws here, before the queue changed (all or nothing).
    const keys = list.map((obj) => deletionHandlingKey(obj));
    const listed = new Set<string>(keys);
    for (let i = 0; i < list.length; i++) this.queueAction('Replaced', list[i] as T, keys[i]);
    const inScope = (key: string): boolean => scope === '' || splitKey(key).namespace === scope;

    // Keys still queued but absent from the list: the deletion was missed while disconnected.
    for (const [key, deltas] of this.items) {
      if (listed.has(key) || !inScope(key)) continue;
      const newest = deltas[deltas.length - 1];
      let last: T | undefined;
      if (newest) last = isDeletedFinalStateUnknown(newest.object) ? newest.object.obj : newest.object;
      this.queueAction('Deleted', deletedFinalStateUnknown(key, last));
    }
    // Keys in the store, not queued, absent from the list.
    const known = scope === '' ? this.knownObjects.listKeys() : this.knownObjects.indexKeys(NAMESPACE_INDEX, scope);
    for (const key of known) {
      if (listed.has(key) || this.items.has(key)) continue;
      this.queueAction('Deleted', deletedFinalStateUnknown(key, this.knownObjects.getByKey(key)));
    }

    if (!this.populated) {
      this.populatedScopes.add(scope);
      if ([...this.scopes].every((s) => this.populatedScopes.has(s))) {
        this.populated = true;
        this.initialPopulationCount = this.length;
      }
    }
  }

  /** Queues Sync for every known object without pending deltas. */
  resync(): void {
    for (const key of this.knownObjects.listKeys()) {
      if (this.items.has(key)) continue;
      const obj = this.knownObjects.getByKey(key);
      if (obj !== undefined) this.queueAction('Sync', obj);
    }
  }

  hasSynced(): boolean {
    return this.populated && this.initialPopulationCount === 0;
  }

  /**
   * Waits for a key, removes it with all its deltas and calls `process` with them. Resolves true after processing,
   * false when the queue is closed (or `signal` aborts) while empty. An exception from `process` propagates (the key
   * is not re-queued).
   */
  async pop(process: DeltaProcessor<T>, signal?: AbortSignal): Promise<boolean> {
    while (this.length === 0) {
      if (this.closed || signal?.aborted) return false;
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        this.waiters.push(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    }
    const key = this.keys[this.head] as string;
    this.keys[this.head] = '';
    this.head++;
    if (this.head >= COMPACT_AT && this.head * 2 >= this.keys.length) {
      this.keys = this.keys.slice(this.head);
      this.head = 0;
    }
    const deltas = this.items.get(key) ?? [];
    this.items.delete(key);
    const isInInitialList = !this.hasSynced();
    try {
      process(deltas, isInInitialList);
    } finally {
      if (this.initialPopulationCount > 0) this.initialPopulationCount--;
    }
    return true;
  }

  /** Wakes pending pops; they resolve false once the queue is empty. */
  close(): void {
    this.closed = true;
    this.wakeAll();
  }

  private queueAction(type: DeltaType, obj: T | DeletedFinalStateUnknown<T>, key = deletionHandlingKey(obj as T)): void {
    let deltas = this.items.get(key);
    if (!deltas) {
      deltas = [];
      this.items.set(key, deltas);
      this.keys.push(key);
    }
    deltas.push({ type, object: obj });
    compactDeletes(deltas);
    this.wakeAll();
  }

  private wakeAll(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

/** Collapses two trailing Deleted deltas into one, preferring an observed delete over a tombstone. */
function compactDeletes<T>(deltas: Delta<T>[]): void {
  const n = deltas.length;
  if (n < 2) return;
  const newer = deltas[n - 1] as Delta<T>;
  const older = deltas[n - 2] as Delta<T>;
  if (newer.type !== 'Deleted' || older.type !== 'Deleted') return;
  deltas[n - 2] = isDeletedFinalStateUnknown(older.object) ? newer : older;
  deltas.length = n - 1;
}
