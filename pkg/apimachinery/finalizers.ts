/**
 * Finalizer lists (controller-runtime's controllerutil.ContainsFinalizer / AddFinalizer / RemoveFinalizer): pure
 * functions on `metadata.finalizers`, changing the object in place and saying whether they did.
 *
 * Invariant: a finalizer appears at most once; order of the others is kept.
 */
import type { KubeObject } from './meta.ts';

/** Whether `obj` carries `finalizer` (controllerutil.ContainsFinalizer). */
export function containsFinalizer(obj: KubeObject, finalizer: string): boolean {
  return obj.metadata?.finalizers?.includes(finalizer) ?? false;
}

/** Appends `finalizer` unless present; true if added. */
export function addFinalizer(obj: KubeObject, finalizer: string): boolean {
  if (containsFinalizer(obj, finalizer)) return false;
  const metadata = (obj.metadata ??= {});
  metadata.finalizers = [...(metadata.finalizers ?? []), finalizer];
  return true;
}

/** Removes every occurrence of `finalizer`; true if one was there. */
export function removeFinalizer(obj: KubeObject, finalizer: string): boolean {
  if (!containsFinalizer(obj, finalizer) || !obj.metadata) return false;
  obj.metadata.finalizers = (obj.metadata.finalizers ?? []).filter((f) => f !== finalizer);
  return true;
}
