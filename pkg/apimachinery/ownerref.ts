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

/** An owner as setControllerReference takes it: a live object (name, uid) with its apiVersion and kind. */
export type Owner = Required<Pick<KubeObject, 'apiVersion' | 'kind'>> & KubeObject;

/**
 * Thrown by setControllerReference when the object already has a controller ownerReference to another owner
 * (controller-runtime's AlreadyOwnedError): two controllers must never fight over one object.
 */
export class AlreadyOwnedError extends Error {
  /** The controller reference `obj` already has (another owner). */
  readonly owner: OwnerReference;
  /** `obj` is already controlled by `owner`: the message names both. */
  constructor(obj: KubeObject, owner: OwnerReference) {
    const { namespace, name } = obj.metadata ?? {};
    super(`${obj.kind ?? 'object'} ${namespace ? `${namespace}/` : ''}${name ?? ''} is already controlled by ${owner.kind} ${owner.name} (uid ${owner.uid}): refusing to set a second controller reference`);
    this.name = 'AlreadyOwnedError';
    this.owner = owner;
  }
}

function sameObject(a: OwnerReference, b: OwnerReference): boolean {
  return apiGroupOf(a.apiVersion) === apiGroupOf(b.apiVersion) && a.kind === b.kind && a.name === b.name;
}

/** A namespaced owner must be in the object's namespace; a cluster-scoped object can only have cluster-scoped owners. */
function validateOwner(owner: KubeObject, obj: KubeObject): void {
  const ownerNs = owner.metadata?.namespace ?? '';
  if (!ownerNs) return;
  const objNs = obj.metadata?.namespace ?? '';
  if (!objNs) throw new Error(`cluster-scoped resource must not have a namespace-scoped owner, owner's namespace ${ownerNs}`);
  if (objNs !== ownerNs) throw new Error(`cross-namespace owner references are disallowed, owner's namespace ${ownerNs}, obj's namespace ${objNs}`);
}

/** Replaces the reference to the same owner (group, kind, name) or appends `ref`. */
function upsertOwnerRef(obj: KubeObject, ref: OwnerReference): void {
  const metadata = (obj.metadata ??= {});
  const refs = [...(metadata.ownerReferences ?? [])];
  const i = refs.findIndex((r) => sameObject(r, ref));
  if (i >= 0) refs[i] = ref;
  else refs.push(ref);
  metadata.ownerReferences = refs;
}

/**
 * Makes `owner` the controller of `obj` (controllerutil.SetControllerReference): sets a controller ownerReference
 * (controller and blockOwnerDeletion true) in `obj.metadata.ownerReferences`, in place. Idempotent for the same owner
 * (its reference is replaced, e.g. by one with a new uid after the owner was recreated).
 * Throws AlreadyOwnedError if another object is already the controller, and an Error for an owner in another
 * namespace or a namespaced owner of a cluster-scoped object (the garbage collector would ignore or misread it).
 */
export function setControllerReference(owner: Owner, obj: KubeObject): void {
  validateOwner(owner, obj);
  const ref = newControllerRef(owner);
  const existing = controllerOf(obj);
  if (existing && !sameObject(existing, ref)) throw new AlreadyOwnedError(obj, existing);
  upsertOwnerRef(obj, ref);
}

/**
 * Adds `owner` as a non-controller owner of `obj` (controllerutil.SetOwnerReference), in place: the object goes when
 * its last owner goes. Replaces an existing reference to the same owner (keeping its `controller` flag).
 */
export function setOwnerReference(owner: Owner, obj: KubeObject): void {
  validateOwner(owner, obj);
  const { name, uid } = owner.metadata ?? {};
  if (!name || !uid) throw new Error('owner must have metadata.name and metadata.uid');
  const ref: OwnerReference = { apiVersion: owner.apiVersion, kind: owner.kind, name, uid };
  const existing = obj.metadata?.ownerReferences?.find((r) => sameObject(r, ref));
  upsertOwnerRef(obj, existing?.controller ? { ...ref, controller: true, blockOwnerDeletion: existing.blockOwnerDeletion ?? true } : ref);
}
