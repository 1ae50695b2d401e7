/**
 * Object identity for the informer cache: the minimal shape of a Kubernetes object this package relies on, the
 * cache key (`namespace/name`, or `name` for cluster-scoped objects, like client-go's MetaNamespaceKeyFunc) and the
 * tombstone a handler receives when a delete was inferred from a relist rather than observed.
 *
 * The informer never looks further into an object than `metadata`; everything else is the caller's type `T`.
 * Types from @kubernetes/client-node (V1Deployment, V1Pod, …) satisfy `KubeObject` structurally.
 */

export interface OwnerReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
  deletionTimestamp?: Date | string;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/**
 * A delete the informer did not observe as a DELETED event: after a relist the object was gone from the server,
 * so the handler gets the last state the cache knew (`obj`, possibly stale) under its `key`.
 */
export interface DeletedFinalStateUnknown<T> {
  readonly kind: 'DeletedFinalStateUnknown';
  readonly key: string;
  readonly obj: T | undefined;
}

export function deletedFinalStateUnknown<T>(key: string, obj: T | undefined): DeletedFinalStateUnknown<T> {
  return { kind: 'DeletedFinalStateUnknown', key, obj };
}

export function isDeletedFinalStateUnknown<T>(x: T | DeletedFinalStateUnknown<T>): x is DeletedFinalStateUnknown<T> {
  return (
    typeof x === 'object' &&
    x !== null &&
    (x as { kind?: unknown }).kind === 'DeletedFinalStateUnknown' &&
    typeof (x as { key?: unknown }).key === 'string' &&
    !('metadata' in x)
  );
}

/** The object of a delete notification, unwrapping a tombstone (undefined if the tombstone carries none). */
export function objectOfDelete<T>(x: T | DeletedFinalStateUnknown<T>): T | undefined {
  return isDeletedFinalStateUnknown(x) ? x.obj : x;
}

/** Builds the cache key from a namespace (empty/undefined for cluster-scoped) and a name. */
export function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

/** `namespace/name`, or `name` for cluster-scoped objects. Throws on an object without metadata.name. */
export function metaNamespaceKey(obj: KubeObject): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error(`object has no metadata.name: ${JSON.stringify(obj).slice(0, 200)}`);
  return keyOf(obj.metadata?.namespace, name);
}

/** Like metaNamespaceKey, but a tombstone yields its stored key (client-go's DeletionHandlingMetaNamespaceKeyFunc). */
export function deletionHandlingKey<T extends KubeObject>(obj: T | DeletedFinalStateUnknown<T>): string {
  return isDeletedFinalStateUnknown(obj) ? obj.key : metaNamespaceKey(obj);
}

/** Splits a key into namespace ('' for cluster-scoped) and name. */
export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function resourceVersionOf(obj: KubeObject | undefined): string {
  return obj?.metadata?.resourceVersion ?? '';
}

/**
 * The default informer transform: drops `metadata.managedFields` (often the largest part of an object and never
 * needed by a controller). Mutates and returns the object it was given; the informer only passes freshly decoded
 * objects that nothing else references.
 */
export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata && 'managedFields' in obj.metadata) delete obj.metadata.managedFields;
  return obj;
}
