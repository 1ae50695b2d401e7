/**
 * The small slice of Kubernetes object metadata the controllers use, shared by every API type here.
 * (client-node's generated models are classes with optional everything; informers hand us plain JSON objects.)
 */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
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
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
}

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

/** The controller ownerReference of an object, if any (at most one may have controller: true). */
export function controllerOf(obj: KubeObject): OwnerReference | undefined {
  return obj.metadata?.ownerReferences?.find((r) => r.controller === true);
}

/** A new controller ownerReference pointing at `owner` (controller and blockOwnerDeletion true). */
export function newControllerRef(owner: Required<Pick<KubeObject, 'apiVersion' | 'kind'>> & KubeObject): OwnerReference {
  const { name, uid } = owner.metadata ?? {};
  if (!name || !uid) throw new Error('owner must have metadata.name and metadata.uid');
  return { apiVersion: owner.apiVersion, kind: owner.kind, name, uid, controller: true, blockOwnerDeletion: true };
}
