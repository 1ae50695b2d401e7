/**
 * Object metadata (metav1): the ONE definition of the core object shapes every layer uses (informer cache, client,
 * events, controllers, generated API types, the public entry point): ObjectMeta, OwnerReference, KubeObject,
 * Condition, LabelSelector. Plain JSON shapes as the API server sends them (timestamps are RFC 3339 strings); an API
 * type is any interface that extends `KubeObject`.
 *
 * Invariant: nothing here imports anything (the bottom of pkg/apimachinery, itself the lowest room of pkg/).
 */

/** metav1.OwnerReference. */
export interface OwnerReference {
  /** The owner's apiVersion (`group/version`, or `v1` for the core group). */
  apiVersion: string;
  /** The owner's kind. */
  kind: string;
  /** The owner's name; owner and dependent share a namespace (or the owner is cluster-scoped). */
  name: string;
  /** The owner's uid: a new object of the same name is a different owner, and the reference no longer holds. */
  uid: string;
  /** True on the one managing controller's reference (at most one per object; see `setControllerReference`). */
  controller?: boolean;
  /** With foreground deletion, the owner is not removed before this dependent is (needs delete permission on the owner). */
  blockOwnerDeletion?: boolean;
}

/** metav1.ObjectMeta (the fields this runtime and its controllers read or write). */
export interface ObjectMeta {
  /** Unique within the namespace (and resource); set at create, never changed. */
  name?: string;
  /** On create without `name`: the server appends 5 random characters to this prefix. */
  generateName?: string;
  /** The namespace; absent for cluster-scoped objects. Never changed after create. */
  namespace?: string;
  /** Set by the server at create; distinguishes objects that had the same name at different times. */
  uid?: string;
  /** Opaque version set by the server on every write: compare for equality only; an update carrying a stale one is 409 Conflict. */
  resourceVersion?: string;
  /** Set by the server: 1 at create, bumped by each change of the desired state (spec), not of metadata or status. */
  generation?: number;
  /** Set by the server at create (RFC 3339, second precision). */
  creationTimestamp?: string;
  /** Set by the server on delete while finalizers remain; the object goes once the last finalizer is removed. */
  deletionTimestamp?: string;
  /** Identifying key/value pairs: selectable by label selectors. */
  labels?: Record<string, string>;
  /** Non-identifying key/value pairs for tools and controllers: not selectable. */
  annotations?: Record<string, string>;
  /** Names of the cleanups that must finish before the object is deleted; none can be added while it is being deleted. */
  finalizers?: string[];
  /** The objects this one depends on: the garbage collector deletes it when every owner is gone. */
  ownerReferences?: OwnerReference[];
  /** Server-side apply's field ownership, written by the server (informer caches drop it). */
  managedFields?: unknown[];
  /** Set by the server with deletionTimestamp: the seconds the object (a Pod) is given to terminate gracefully. */
  deletionGracePeriodSeconds?: number;
  /** Deprecated and no longer set by the server; kept so this is the whole of the server's ObjectMeta. */
  selfLink?: string;
}

/** Any Kubernetes object: typed API objects and informer cache entries. */
export interface KubeObject {
  /** `group/version` (`v1` for the core group); list items and watch events may leave it out. */
  apiVersion?: string;
  /** The kind (PascalCase, e.g. `Deployment`); list items and watch events may leave it out. */
  kind?: string;
  /** Name, namespace, versions, labels, owners, finalizers. */
  metadata?: ObjectMeta;
}

/** metav1.Condition */
export interface Condition {
  /** The condition's type in CamelCase (e.g. `Ready`), unique within the object's conditions. */
  type: string;
  /** Whether the condition holds: 'True', 'False' or 'Unknown'. */
  status: 'True' | 'False' | 'Unknown';
  /** Why, as a CamelCase word for programs (e.g. `Progressing`). */
  reason?: string;
  /** Why, for humans. */
  message?: string;
  /** The metadata.generation this condition was computed from: older than the object's means stale. */
  observedGeneration?: number;
  /** When `status` last changed (RFC 3339); not when the condition was last written. */
  lastTransitionTime?: string;
}

/** metav1.LabelSelectorRequirement (operator In, NotIn, Exists, DoesNotExist). */
export interface LabelSelectorRequirement {
  /** The label key. */
  key: string;
  /** `In`, `NotIn`, `Exists` or `DoesNotExist`. */
  operator: string;
  /** For In and NotIn: the values (non-empty); for Exists and DoesNotExist: empty. */
  values?: string[];
}

/** metav1.LabelSelector (parse with `selectorFromLabelSelector`, labelselector.ts). */
export interface LabelSelector {
  /** Each key must have exactly this value (ANDed with matchExpressions). */
  matchLabels?: Record<string, string>;
  /** Each requirement must hold (ANDed). An empty selector matches everything. */
  matchExpressions?: LabelSelectorRequirement[];
}

/** metadata.resourceVersion, or '' when the object (or its metadata) is absent. */
export function resourceVersionOf(obj: KubeObject | undefined): string {
  return obj?.metadata?.resourceVersion ?? '';
}
