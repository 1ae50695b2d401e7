/**
 * Owner references: the controller ownerReference of an object (metav1.GetControllerOf), how an owned object (a
 * Deployment) names its owner (a Foo), and a new controller reference. Pure functions over metadata.
 *
 * Invariant: an object has at most one ownerReference with `controller: true`; `controllerOf` returns that one.
 */
import type { KubeObject, OwnerReference } from './meta.ts';
import { apiGroupOf } from './resource.ts';

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
