/**
 * Ready-made index: objects by the UID of their controller ownerReference (the one with `controller: true`).
 * Lets a controller find "the Deployments owned by this Foo" from the cache:
 *
 *   deployments.addIndexers(controllerOwnerUIDIndex);
 *   deployments.getIndexer().byIndex(CONTROLLER_OWNER_UID_INDEX, foo.metadata.uid)
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { controllerOf } from '../apimachinery/ownerref.ts';
import type { IndexFunc, Indexers } from './indexer.ts';

export { controllerOf };

/** Name of the index of objects by the uid of their controller owner reference (see controllerOwnerUIDIndex). */
export const CONTROLLER_OWNER_UID_INDEX = 'controllerOwnerUID';

export const controllerOwnerUIDIndexFunc: IndexFunc<KubeObject> = (obj) => {
  const ref = controllerOf(obj);
  return ref?.uid ? [ref.uid] : [];
};

/** `{ controllerOwnerUID: controllerOwnerUIDIndexFunc }`, to pass to addIndexers. */
export const controllerOwnerUIDIndex: Indexers<KubeObject> = {
  [CONTROLLER_OWNER_UID_INDEX]: controllerOwnerUIDIndexFunc,
};
