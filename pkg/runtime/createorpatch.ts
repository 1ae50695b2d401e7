/**
 * `createOrPatch()`: controller-runtime's controllerutil.CreateOrPatch — read the object from the API server, let
 * `mutate` bring it to the state you want, then create it if it was missing or send only the difference.
 *
 *   const { result } = await createOrPatch(configMapApi.namespace(ns), { metadata: { name: 'settings' } }, (cm) => {
 *     cm.data = { ...cm.data, a: '1' };
 *     setControllerReference(owner, cm);
 *   }, { signal });
 *   // result: 'created' | 'updated' | 'updatedStatus' | 'updatedStatusOnly' | 'unchanged'
 *
 * Contract:
 * - GET by the key of `obj` (`metadata.name`, and the namespace of the client or of the object). On 404, `mutate` on a
 *   copy of `obj` with the namespace filled in, then create → 'created'. Otherwise `mutate(current)` on a copy of what the server has.
 * - `mutate` must not change the name or namespace (an Error, nothing sent).
 * - the rest of the object (everything but `status`) is compared with what was read; a difference is sent as ONE JSON
 *   merge patch (RFC 7386: only the changed fields, `null` for removed keys, lists whole) carrying the
 *   `metadata.resourceVersion` that was read, so a concurrent change answers 409 Conflict instead of being overwritten
 *   (controller-runtime's MergeFrom with optimistic lock; the reconcile is retried). A changed `status` is sent
 *   the same way to the status subresource. Results as controller-runtime's: 'updated' (object only),
 *   'updatedStatus' (object and status), 'updatedStatusOnly', 'unchanged' (nothing sent).
 * - the returned `object` is the server's answer to the last write, or what was read when nothing was sent.
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { mergePatchDiff } from '../apimachinery/mergepatch.ts';
import { isNotFound } from '../client/errors.ts';
import type { MergePatch } from '../client/options.ts';
import type { ResourceClient } from '../client/typed.ts';

/** What createOrPatch did (controller-runtime's OperationResult). */
export type OperationResult = 'created' | 'updated' | 'updatedStatus' | 'updatedStatusOnly' | 'unchanged';

/**
 * Reads the object of `obj`'s key, lets `mutate` bring it to the wanted state, then creates it if missing or sends
 * only the difference as a merge patch (controller-runtime's controllerutil.CreateOrPatch); `mutate` must not change
 * the name or namespace.
 */
export async function createOrPatch<T extends KubeObject>(
  api: ResourceClient<T>, obj: T, mutate: (obj: T) => void | Promise<void>, opts: { signal?: AbortSignal; fieldManager?: string } = {},
): Promise<{ result: OperationResult; object: T }> {
  const { signal, fieldManager } = opts;
  const name = obj.metadata?.name;
  if (!name) throw new Error('createOrPatch: the object has no metadata.name');
  const client = api.type.namespaced && !api.namespaceName ? api.namespace(obj.metadata?.namespace ?? '') : api;
  const key = (o: T): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

  let current: T | undefined;
  try {
    current = await client.get(name, { signal });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (!current) {
    // The namespace is filled in from the client, so mutate sees the key the object will have (owner checks need it).
    const wanted = structuredClone(obj);
    const namespace = client.namespaceName;
    if (namespace) wanted.metadata = { ...wanted.metadata, namespace };
    await mutate(wanted);
    if (wanted.metadata?.name !== name || wanted.metadata.namespace !== namespace) {
      throw new Error(`createOrPatch: mutate changed the object's key to ${key(wanted)}`);
    }
    return { result: 'created', object: await client.create(wanted, { signal, ...(fieldManager ? { fieldManager } : {}) }) };
  }
  const before = structuredClone(current);
  await mutate(current);
  if (key(current) !== key(before)) throw new Error(`createOrPatch: mutate changed the object's key from ${key(before)} to ${key(current)}`);

  const { status: statusBefore, ...restBefore } = before as T & { status?: unknown };
  const { status: statusAfter, ...restAfter } = current as T & { status?: unknown };
  const objectPatch = mergePatchDiff(restBefore, restAfter);
  const statusPatch = mergePatchDiff({ status: statusBefore }, { status: statusAfter });
  const rv = before.metadata?.resourceVersion;
  const fenced = (patch: Record<string, unknown>): MergePatch<T> =>
    ({ ...patch, metadata: { ...(patch['metadata'] as object | undefined), resourceVersion: rv } }) as MergePatch<T>;
  const write = { signal, ...(fieldManager ? { fieldManager } : {}) };
  let object = before;
  if (objectPatch) object = await client.patch(name, { merge: fenced(objectPatch) }, write);
  // After an object patch the resourceVersion moved: the status patch is fenced by the new one.
  if (statusPatch) {
    const statusRv = object.metadata?.resourceVersion;
    object = await client.status().patch(name, { merge: { ...statusPatch, metadata: { resourceVersion: statusRv } } as MergePatch<T> }, write);
  }
  const result: OperationResult = objectPatch ? (statusPatch ? 'updatedStatus' : 'updated') : statusPatch ? 'updatedStatusOnly' : 'unchanged';
  return { result, object };
}
