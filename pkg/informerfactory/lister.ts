/**
 * Lister<T>: typed, read-only queries on an informer's cache; never calls the API server.
 *
 * Returned objects are the cached ones (shared with every other controller): treat them as immutable and copy
 * (structuredClone) before modifying one to send an update.
 */
import { NAMESPACE_INDEX, type IndexerReader } from './indexer.ts';
import { keyOf } from '../apimachinery/keys.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { parseSelector, type Selector } from '../apimachinery/labelselector.ts';

/**
 * Typed read-only queries on an informer's cache; never calls the API server. Returns the cached objects themselves:
 * treat them as immutable and copy before modifying.
 */
export class Lister<T extends KubeObject> {
  private readonly indexer: IndexerReader<T>;

  /** A lister reading `indexer` (informers make theirs: use `informer.lister()`). */
  constructor(indexer: IndexerReader<T>) {
    this.indexer = indexer;
  }

  /** The cached object, or undefined. `namespace` is '' or undefined for cluster-scoped objects. */
  get(namespace: string | undefined, name: string): T | undefined {
    return this.indexer.getByKey(keyOf(namespace, name));
  }

  /** The cached object under `key` (`namespace/name`, or `name` when cluster-scoped), or undefined. */
  getByKey(key: string): T | undefined {
    return this.indexer.getByKey(key);
  }

  /**
   * Objects in `namespace` (undefined or '' = all namespaces / cluster-scoped) whose labels match `selector`
   * (a string such as `app=web,tier!=db` or a parsed Selector; undefined = all).
   */
  list(namespace?: string, selector?: string | Selector): T[] {
    const sel = typeof selector === 'string' ? parseSelector(selector) : selector;
    const candidates = namespace ? this.indexer.byIndex(NAMESPACE_INDEX, namespace) : this.indexer.list();
    if (!sel || sel.empty) return candidates;
    return candidates.filter((o) => sel.matches(o.metadata?.labels));
  }

  /** A lister bound to one namespace. */
  namespace(namespace: string): NamespaceLister<T> {
    return {
      get: (name) => this.get(namespace, name),
      list: (selector) => this.list(namespace, selector),
    };
  }
}

export interface NamespaceLister<T> {
  get(name: string): T | undefined;
  list(selector?: string | Selector): T[];
}
