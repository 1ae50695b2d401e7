/**
 * Status conditions (`status.conditions`, metav1.Condition): k8s.io/apimachinery's meta.SetStatusCondition,
 * FindStatusCondition, RemoveStatusCondition, IsStatusConditionTrue/False, IsStatusConditionPresentAndEqual.
 * Pure functions over a conditions array, which they change in place (as the Go functions change the slice behind a
 * pointer); each setter returns whether anything changed, so a caller writes the status only when it did.
 *
 * Invariants (setStatusCondition):
 * - at most one condition per `type`; a new type is appended;
 * - `lastTransitionTime` changes ONLY when `status` changes (or the type is new): to the given condition's own
 *   `lastTransitionTime` if it has one, else to `now()`. A new reason, message or observedGeneration is copied
 *   without touching it — so "Ready=False since 10:02" stays true while the message changes every reconcile;
 * - returns true iff status, reason, message or observedGeneration changed (or the type was added).
 */

/** The fields of metav1.Condition these helpers read and write (generated condition types fit it). */
export interface ConditionLike {
  /** The key: at most one condition per type. */
  type: string;
  /** 'True', 'False' or 'Unknown'; a change moves `lastTransitionTime`. */
  status: string;
  /** A CamelCase word for programs. */
  reason?: string;
  /** For humans. */
  message?: string;
  /** The metadata.generation the condition was computed from. */
  observedGeneration?: number;
  /** When `status` last changed (RFC 3339, second precision); set by `setStatusCondition` when not given. */
  lastTransitionTime?: string;
}

/** RFC 3339 with second precision, as the API server stores metav1.Time ("2024-01-02T03:04:05Z"). */
export function nowRFC3339(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

/** The condition of `type`, or undefined. */
export function findStatusCondition<C extends ConditionLike>(conditions: readonly C[] | undefined, type: string): C | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Sets `condition` in `conditions` (see the invariants above); true if anything changed. */
export function setStatusCondition<C extends ConditionLike>(conditions: C[], condition: NoInfer<C>, now: () => string = nowRFC3339): boolean {
  const existing = findStatusCondition(conditions, condition.type);
  if (!existing) {
    conditions.push({ ...condition, lastTransitionTime: condition.lastTransitionTime || now() });
    return true;
  }
  let changed = false;
  if (existing.status !== condition.status) {
    existing.status = condition.status;
    existing.lastTransitionTime = condition.lastTransitionTime || now();
    changed = true;
  }
  if (existing.reason !== condition.reason) {
    existing.reason = condition.reason;
    changed = true;
  }
  if (existing.message !== condition.message) {
    existing.message = condition.message;
    changed = true;
  }
  if (existing.observedGeneration !== condition.observedGeneration) {
    existing.observedGeneration = condition.observedGeneration;
    changed = true;
  }
  return changed;
}

/** Removes the condition of `type`; true if there was one. */
export function removeStatusCondition(conditions: ConditionLike[], type: string): boolean {
  const i = conditions.findIndex((c) => c.type === type);
  if (i < 0) return false;
  conditions.splice(i, 1);
  return true;
}

/** True iff the condition of `type` is present with `status`. */
export function isStatusConditionPresentAndEqual(conditions: readonly ConditionLike[] | undefined, type: string, status: string): boolean {
  return findStatusCondition(conditions, type)?.status === status;
}

/** True iff the condition of `type` is present and "True" (absent is not true). */
export function isStatusConditionTrue(conditions: readonly ConditionLike[] | undefined, type: string): boolean {
  return isStatusConditionPresentAndEqual(conditions, type, 'True');
}

/** True iff the condition of `type` is present and "False" (absent is not false either). */
export function isStatusConditionFalse(conditions: readonly ConditionLike[] | undefined, type: string): boolean {
  return isStatusConditionPresentAndEqual(conditions, type, 'False');
}
