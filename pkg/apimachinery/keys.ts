/**
 * Object keys: `namespace/name`, or `name` for cluster-scoped objects — client-go's MetaNamespaceKeyFunc and
 * SplitMetaNamespaceKey. The informer cache, listers, work queues and reconcile requests all key objects this way.
 *
 * Invariants: `splitKey(keyOf(ns, name))` gives back `{ namespace: ns ?? '', name }` for every name without '/'
 * (Kubernetes names never contain one); a cluster-scoped key has no '/'.
 */
import type { KubeObject } from './meta.ts';

/** Builds the cache/work-queue key from a namespace (empty/undefined for cluster-scoped) and a name. */
export function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). Throws on an object
 * without metadata.name.
 */
export function metaNamespaceKey(obj: KubeObject): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error(`object has no metadata.name: ${JSON.stringify(obj).slice(0, 200)}`);
  return keyOf(obj.metadata?.namespace, name);
}

/** Splits a key into namespace ('' for cluster-scoped) and name. */
export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
