/**
 * Indexer: the informer's cache. Objects keyed by `namespace/name` (see object.ts) plus secondary indexes
 * (index name → index value → set of keys), like client-go's threadSafeMap + Indexers.
 *
 * Invariants:
 *  - The `namespace` index (NAMESPACE_INDEX) always exists.
 *  - After every write, each index maps exactly the values its IndexFunc returns for the stored object to the
 *    object's key; empty value sets are removed. `addIndexers` may be called at any time and indexes the items
 *    already stored.
 *  - Reads return the stored objects themselves (no copies): callers must treat them as immutable.
 *
 * Concurrency contract ("thread-safe by design"): exactly one writer — the owning SharedIndexInformer's delta
 * processing loop (or a test). Every method is synchronous, so a reader on the same event loop never observes a
 * half-applied write. Controllers only read (through Lister or IndexerReader).
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { deletionHandlingKey, type DeletedFinalStateUnknown } from './object.ts';
import { metaNamespaceKey } from '../apimachinery/keys.ts';

/** Computes the index values of an object (an object may have several, or none). Must be pure and fast. */
export type IndexFunc<T> = (obj: T) => string[];
/** Index functions by index name. */
export type Indexers<T> = Record<string, IndexFunc<T>>;

export const NAMESPACE_INDEX = 'namespace';

/** Indexes by metadata.namespace ('' for cluster-scoped objects). */
export function namespaceIndexFunc(obj: KubeObject): string[] {
  return [obj.metadata?.namespace ?? ''];
}

/** The read side of the cache, as handed to controllers. */
export interface IndexerReader<T> {
  /** How many objects are cached. */
  readonly size: number;
  /** The object stored under `key` (`namespace/name`, or `name` for cluster-scoped objects), or undefined. */
  getByKey(key: string): T | undefined;
  /** The stored object with the same key as `obj`. */
  get(obj: T): T | undefined;
  /** Every cached object (a new array of the stored, immutable objects). */
  list(): T[];
  /** Every key. */
  listKeys(): string[];
  /** Objects whose IndexFunc `indexName` returned `value`. Throws if the index does not exist. */
  byIndex(indexName: string, value: string): T[];
  /** The keys of the objects whose IndexFunc `indexName` returned `value`. Throws if the index does not exist. */
  indexKeys(indexName: string, value: string): string[];
  /** The values currently present in an index. */
  listIndexFuncValues(indexName: string): string[];
  /** Whether an index of that name exists (`namespace` always does). */
  hasIndex(indexName: string): boolean;
  /** Adds indexes (and indexes existing items). Throws if a name is already taken. */
  addIndexers(indexers: Indexers<T>): void;
}

export interface IndexerOptions<T> {
  indexers?: Indexers<T>;
  keyFunc?: (obj: T) => string;
  /** Called when an IndexFunc throws; the object is then not indexed under that index. Default: rethrow. */
  onIndexError?: (indexName: string, key: string, err: unknown) => void;
}

/**
 * The informer's cache: objects by `namespace/name` key plus secondary indexes (client-go's Indexer). The namespace
 * index always exists; reads return the stored objects, not copies.
 */
export class Indexer<T extends KubeObject> implements IndexerReader<T> {
  private readonly items = new Map<string, T>();
  private readonly indexers = new Map<string, IndexFunc<T>>();
  private readonly indices = new Map<string, Map<string, Set<string>>>();
  private readonly keyFunc: (obj: T) => string;
  private readonly onIndexError: ((indexName: string, key: string, err: unknown) => void) | undefined;

  /** An empty cache with the `namespace` index and `opts.indexers`, keyed by `opts.keyFunc` (default `namespace/name`). */
  constructor(opts: IndexerOptions<T> = {}) {
    this.keyFunc = opts.keyFunc ?? metaNamespaceKey;
    this.onIndexError = opts.onIndexError;
    this.addIndexers({ [NAMESPACE_INDEX]: namespaceIndexFunc, ...opts.indexers });
  }

  /** How many objects are cached. */
  get size(): number {
    return this.items.size;
  }

  /** The key of an object, or of a deletion tombstone (its recorded key). */
  keyOf(obj: T | DeletedFinalStateUnknown<T>): string {
    return deletionHandlingKey(obj as T);
  }

  /** Stores `obj` under its key (replacing what was there) and indexes it. */
  add(obj: T): void {
    this.put(this.keyFunc(obj), obj);
  }

  /** The same as add(): stores `obj` under its key and re-indexes it. */
  update(obj: T): void {
    this.put(this.keyFunc(obj), obj);
  }

  /** Deletes by the object's key; a tombstone deletes its key. */
  delete(obj: T | DeletedFinalStateUnknown<T>): void {
    this.deleteByKey(deletionHandlingKey(obj as T));
  }

  /** Removes the object stored under `key` and its index entries; nothing happens if there is none. */
  deleteByKey(key: string): void {
    const old = this.items.get(key);
    if (old === undefined) return;
    this.items.delete(key);
    this.unindex(key, old);
  }

  /** Replaces the whole content (indexes rebuilt). */
  replace(list: readonly T[]): void {
    this.items.clear();
    for (const idx of this.indices.values()) idx.clear();
    for (const obj of list) this.put(this.keyFunc(obj), obj);
  }

  /** The object stored under `key`, or undefined. */
  getByKey(key: string): T | undefined {
    return this.items.get(key);
  }

  get(obj: T): T | undefined {
    return this.items.get(this.keyFunc(obj));
  }

  /** Every stored object (a new array; the objects themselves are not copied). */
  list(): T[] {
    return [...this.items.values()];
  }

  /** Every key. */
  listKeys(): string[] {
    return [...this.items.keys()];
  }

  /** Whether an index of that name exists. */
  hasIndex(indexName: string): boolean {
    return this.indexers.has(indexName);
  }

  /** The keys under `value` in index `indexName`. Throws if the index does not exist. */
  indexKeys(indexName: string, value: string): string[] {
    const idx = this.indices.get(indexName);
    if (!idx) throw new Error(`index ${JSON.stringify(indexName)} does not exist`);
    return [...(idx.get(value) ?? [])];
  }

  byIndex(indexName: string, value: string): T[] {
    const out: T[] = [];
    for (const key of this.indexKeys(indexName, value)) {
      const obj = this.items.get(key);
      if (obj !== undefined) out.push(obj);
    }
    return out;
  }

  listIndexFuncValues(indexName: string): string[] {
    const idx = this.indices.get(indexName);
    if (!idx) throw new Error(`index ${JSON.stringify(indexName)} does not exist`);
    return [...idx.keys()];
  }

  addIndexers(indexers: Indexers<T>): void {
    const names = Object.keys(indexers);
    for (const name of names) {
      if (this.indexers.has(name)) throw new Error(`indexer conflict: ${JSON.stringify(name)} already exists`);
    }
    for (const name of names) {
      const fn = indexers[name] as IndexFunc<T>;
      this.indexers.set(name, fn);
      const idx = new Map<string, Set<string>>();
      this.indices.set(name, idx);
      for (const [key, obj] of this.items) {
        for (const v of this.values(name, fn, key, obj)) addToIndex(idx, v, key);
      }
    }
  }

  private put(key: string, obj: T): void {
    const old = this.items.get(key);
    this.items.set(key, obj);
    if (old !== undefined) this.unindex(key, old);
    for (const [name, fn] of this.indexers) {
      const idx = this.indices.get(name) as Map<string, Set<string>>;
      for (const v of this.values(name, fn, key, obj)) addToIndex(idx, v, key);
    }
  }

  private unindex(key: string, old: T): void {
    for (const [name, fn] of this.indexers) {
      const idx = this.indices.get(name) as Map<string, Set<string>>;
      for (const v of this.values(name, fn, key, old)) {
        const set = idx.get(v);
        if (!set) continue;
        set.delete(key);
        if (set.size === 0) idx.delete(v);
      }
    }
  }

  private values(name: string, fn: IndexFunc<T>, key: string, obj: T): string[] {
    try {
      return fn(obj);
    } catch (err) {
      if (!this.onIndexError) throw err;
      this.onIndexError(name, key, err);
      return [];
    }
  }
}

function addToIndex(idx: Map<string, Set<string>>, value: string, key: string): void {
  let set = idx.get(value);
  if (!set) {
    set = new Set();
    idx.set(value, set);
  }
  set.add(key);
}
