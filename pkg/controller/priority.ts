/**
 * Which queue priority an informer event gets (controller-runtime's priority queue, on by default here):
 *  - objects delivered by the initial list (and the replay of the cache to a late handler) → PriorityLow;
 *  - resyncs (an update whose resourceVersion did not change) → PriorityLow;
 *  - everything else — a new object, a real update, a delete after the cache synced → PriorityNormal.
 * So after a restart, a leader change or a resync, a real change goes before the backlog; the queue's aging bound
 * (workqueue Queue `maxWaitMs`) guarantees the backlog still drains (see pkg/workqueue/queue.ts).
 */
import { PriorityLow, PriorityNormal } from '../workqueue/queue.ts';

export { PriorityLow, PriorityNormal };

interface Versioned {
  metadata?: { resourceVersion?: string } | undefined;
}

/** Priority of an add notification. */
export function addPriority(isInInitialList: boolean | undefined): number {
  return isInInitialList ? PriorityLow : PriorityNormal;
}

/** Priority of an update notification: a resync (same resourceVersion) is low. */
export function updatePriority(old: Versioned, obj: Versioned): number {
  const rv = obj.metadata?.resourceVersion;
  return rv !== undefined && rv === old.metadata?.resourceVersion ? PriorityLow : PriorityNormal;
}
