/**
 * Core object types and helpers — the ONE definition every layer uses (informer cache, events, controllers, the
 * public entry point): object metadata, owner references, label selectors, conditions, cache keys and
 * `controllerOf`. Plain JSON shapes as the API server sends them (timestamps are RFC 3339 strings); an API type is
 * any interface that extends `KubeObject`.
 *
 * Nothing here imports anything: this is the bottom layer.
 */

/** metav1.OwnerReference. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** metav1.ObjectMeta (the fields this runtime and its controllers read or write). */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
}

/** Any Kubernetes object: typed API objects and informer cache entries. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** metav1.Condition */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

/** metav1.LabelSelectorRequirement (operator In, NotIn, Exists, DoesNotExist). */
export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** metav1.LabelSelector (parse with informerfactory's `selectorFromLabelSelector`). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/** The API group of an apiVersion ("apps/v1" → "apps", "v1" → ""). */
export function apiGroupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

/**
 * The name of the object of `kind` in API `group` that controls `obj` (its controller ownerReference), if any —
 * how an owned object (a Deployment) finds its owner (a Foo).
 */
export function controllerNameOf(obj: KubeObject, kind: string, group: string): string | undefined {
  const ref = controllerOf(obj);
  return ref && ref.kind === kind && apiGroupOf(ref.apiVersion) === group ? ref.name : undefined;
}

/** The controller ownerReference of an object, if any (metav1.GetControllerOf; at most one has controller: true). */
export function controllerOf(obj: KubeObject): OwnerReference | undefined {
  return obj.metadata?.ownerReferences?.find((r) => r.controller === true);
}

/** A new controller ownerReference pointing at `owner` (controller and blockOwnerDeletion true). */
export function newControllerRef(owner: Required<Pick<KubeObject, 'apiVersion' | 'kind'>> & KubeObject): OwnerReference {
  const { name, uid } = owner.metadata ?? {};
  if (!name || !uid) throw new Error('owner must have metadata.name and metadata.uid');
  return { apiVersion: owner.apiVersion, kind: owner.kind, name, uid, controller: true, blockOwnerDeletion: true };
}

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

export function resourceVersionOf(obj: KubeObject | undefined): string {
  return obj?.metadata?.resourceVersion ?? '';
}
