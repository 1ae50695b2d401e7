/**
 * `finalizer()`: kube-rs's `kube::runtime::finalizer` for a reconciler — one call that keeps a finalizer on an object
 * while it lives and runs your cleanup before it goes.
 *
 *   const reconcile: Reconciler = async ({ namespace, name }, signal) => {
 *     const m = memcacheds.get(namespace, name);
 *     if (!m) return;
 *     return finalizer(memcachedApi.namespace(namespace), m, 'example.com/cleanup', {
 *       apply: async (m) => { … create/update what m needs … },
 *       cleanup: async (m) => { … delete what m made (idempotent) … },
 *     }, { signal });
 *   };
 *
 * What it does with the object (as read from the cache, possibly stale):
 * 1. not being deleted, finalizer missing → add it (merge patch fenced by `metadata.resourceVersion`), then `apply`
 *    on the patched object: the finalizer is on the server BEFORE apply creates anything — with one exception the API
 *    server owns (kubernetes#77988): a DELETE already under way when the finalizer was added ignores it and removes
 *    the object, so cleanup never runs. What apply made in the cluster with an ownerReference (setControllerReference)
 *    is collected by the garbage collector anyway; for anything outside the cluster, also record such deletes with
 *    BypassedFinalizers (bypassedfinalizer.ts) and clean up from the state it kept, as the Network controller does;
 * 2. not being deleted, finalizer present → `apply(obj)`;
 * 3. being deleted (deletionTimestamp), finalizer present → `cleanup(obj)`, then remove the finalizer (fenced by
 *    resourceVersion). The object disappears once its last finalizer is gone;
 * 4. being deleted, finalizer missing → nothing (our cleanup is done, someone else's finalizer holds it).
 * Returns what `apply` or `cleanup` returned (undefined in case 4).
 *
 * Stale cache and concurrent writers: a fenced patch answered 409 Conflict re-reads the object from the API server
 * and decides again from the fresh copy (at most 3 times, then the 409 is thrown and the reconcile is retried with
 * backoff). When removing: 404 (the object is already gone) or a fresh copy without our finalizer (removed
 * concurrently) means done, not an error; cleanup is not run again for a re-read. `cleanup` must be idempotent: if
 * the removal fails, the next reconcile runs it again. An error thrown by `apply`/`cleanup` propagates unchanged
 * (and in case 3 the finalizer stays, so the object stays until cleanup succeeds).
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import type { MergePatch } from '../client/options.ts';
import type { ResourceClient } from '../client/typed.ts';
import { isConflict, isNotFound } from '../client/errors.ts';

/** The two sides of `finalizer()`: `apply` while the object lives, `cleanup` once it is being deleted. */
export interface FinalizerHandlers<T, R> {
  /** The object lives and carries the finalizer: reconcile it toward its spec. */
  apply(obj: T): Promise<R>;
  /** The object is being deleted and still carries the finalizer: undo what apply did (idempotent). */
  cleanup(obj: T): Promise<R>;
}

const maxConflicts = 3;

/**
 * Keeps finalizer `name` on `obj` while it lives and runs `handlers.cleanup` before it goes (kube-rs's
 * `runtime::finalizer`): adds the finalizer before the first `apply`, and removes it only after `cleanup` succeeded.
 * Resolves with what `apply` or `cleanup` returned (undefined when the object is being deleted without the finalizer).
 */
export async function finalizer<T extends KubeObject, R>(
  api: ResourceClient<T>, obj: T, name: string, handlers: FinalizerHandlers<T, R>, opts: { signal?: AbortSignal } = {},
): Promise<R | undefined> {
  const { signal } = opts;
  const objName = obj.metadata?.name;
  if (!objName) throw new Error('finalizer: the object has no metadata.name');
  const client = api.type.namespaced && !api.namespaceName ? api.namespace(obj.metadata?.namespace ?? '') : api;
  const setFinalizers = (o: T, list: string[]): Promise<T> =>
    client.patch(objName, { merge: { metadata: { finalizers: list, resourceVersion: o.metadata?.resourceVersion } } as MergePatch<T> }, { signal });
  const reread = async (): Promise<T | undefined> => {
    try {
      return await client.get(objName, { signal });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };

  let current = obj;
  let cleanedUp = false;
  let result: R | undefined;
  let conflicts = 0;
  for (;;) {
    const finalizers = current.metadata?.finalizers ?? [];
    const has = finalizers.includes(name);
    const deleting = Boolean(current.metadata?.deletionTimestamp);
    if (!deleting && has) return handlers.apply(current);
    if (deleting && !has) return cleanedUp ? result : undefined;
    try {
      if (!deleting) {
        current = await setFinalizers(current, [...finalizers, name]);
        continue; // now case 2 with the patched object
      }
      if (!cleanedUp) {
        result = await handlers.cleanup(current);
        cleanedUp = true;
      }
      await setFinalizers(current, finalizers.filter((f) => f !== name));
      return result;
    } catch (err) {
      if (isNotFound(err) && deleting) return result; // already gone: nothing holds it any more
      if (!isConflict(err) || ++conflicts >= maxConflicts) throw err;
      const fresh = await reread();
      if (!fresh) return result; // gone meanwhile
      current = fresh;
    }
  }
}
