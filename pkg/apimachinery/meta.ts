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

/** metav1.LabelSelector (parse with `selectorFromLabelSelector`, labelselector.ts). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/** metadata.resourceVersion, or '' when the object (or its metadata) is absent. */
export function resourceVersionOf(obj: KubeObject | undefined): string {
  return obj?.metadata?.resourceVersion ?? '';
}
