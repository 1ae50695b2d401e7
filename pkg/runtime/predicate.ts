/**
 * Event predicates (controller-runtime's pkg/predicate): filters on the events of a `for`, `owns` or `watches`
 * source, before they are mapped to requests. Each method says whether an event of that kind passes; a method left
 * out passes everything (predicate.Funcs). With several predicates on one source, an event must pass ALL of them
 * (controller-runtime's `WithPredicates`); `and`, `or` and `not` combine them.
 *
 * The ready-made ones filter only updates (create and delete pass), as controller-runtime's:
 * - `generationChanged`: `metadata.generation` changed — a spec change of types that count generations (CRDs with a
 *   status subresource, Deployments, …); status-only updates, metadata-only updates AND resyncs (an update with the
 *   same object) are dropped. Types without generation never pass an update.
 * - `labelsChanged` / `annotationsChanged`: the label / annotation map changed (deep equality; absent = empty).
 * `generation`, `labels` and `annotations` changes are typically combined with `or`, e.g.
 * `or(generationChanged, labelsChanged)` (controller-runtime's usual `predicate.Or(GenerationChangedPredicate{},
 * LabelChangedPredicate{})`).
 *
 * Invariant: predicates are pure and synchronous (they run in the informer's handler: no I/O).
 */
import type { KubeObject } from '../apimachinery/meta.ts';

/**
 * An event filter for `for`/`owns`/`watches` (controller-runtime's predicate.Funcs): an event is enqueued only when
 * the method for its kind returns true; an absent method passes every event of that kind.
 */
export interface Predicate<T extends KubeObject = KubeObject> {
  /** An object appeared (also the initial list). Default: pass. */
  create?(obj: T): boolean;
  /** An object changed (also a resync: old and new have the same resourceVersion). Default: pass. */
  update?(oldObj: T, newObj: T): boolean;
  /** An object was deleted (possibly its last known state). Default: pass. */
  delete?(obj: T): boolean;
}

export type PredicateEvent<T> = { type: 'create'; obj: T } | { type: 'update'; oldObj: T; obj: T } | { type: 'delete'; obj: T };

/** Whether `event` passes `p` (an absent method passes). */
export function passes<T extends KubeObject>(p: Predicate<T>, event: PredicateEvent<T>): boolean {
  switch (event.type) {
    case 'create': return p.create?.(event.obj) ?? true;
    case 'update': return p.update?.(event.oldObj, event.obj) ?? true;
    case 'delete': return p.delete?.(event.obj) ?? true;
  }
}

/** Whether `event` passes every predicate of `ps` (true for none). */
export function passesAll<T extends KubeObject>(ps: readonly Predicate<T>[] | undefined, event: PredicateEvent<T>): boolean {
  return ps?.every((p) => passes(p, event)) ?? true;
}

function mapEqual(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => b !== undefined && Object.hasOwn(b, k) && b[k] === a?.[k]);
}

/** Updates pass only when `metadata.generation` changed (controller-runtime GenerationChangedPredicate). */
export const generationChanged: Predicate = {
  update: (o, n) => o.metadata?.generation !== undefined && n.metadata?.generation !== undefined && o.metadata.generation !== n.metadata.generation,
};

/** Updates pass only when the labels changed (controller-runtime LabelChangedPredicate). */
export const labelsChanged: Predicate = {
  update: (o, n) => !mapEqual(o.metadata?.labels, n.metadata?.labels),
};

/** Updates pass only when the annotations changed (controller-runtime AnnotationChangedPredicate). */
export const annotationsChanged: Predicate = {
  update: (o, n) => !mapEqual(o.metadata?.annotations, n.metadata?.annotations),
};

/** An event passes when it passes every one of `ps`. */
export function and<T extends KubeObject>(...ps: Predicate<T>[]): Predicate<T> {
  return {
    create: (obj) => passesAll(ps, { type: 'create', obj }),
    update: (oldObj, obj) => passesAll(ps, { type: 'update', oldObj, obj }),
    delete: (obj) => passesAll(ps, { type: 'delete', obj }),
  };
}

/** An event passes when it passes at least one of `ps`. */
export function or<T extends KubeObject>(...ps: Predicate<T>[]): Predicate<T> {
  return {
    create: (obj) => ps.some((p) => passes(p, { type: 'create', obj })),
    update: (oldObj, obj) => ps.some((p) => passes(p, { type: 'update', oldObj, obj })),
    delete: (obj) => ps.some((p) => passes(p, { type: 'delete', obj })),
  };
}

/** An event passes when it does not pass `p`. */
export function not<T extends KubeObject>(p: Predicate<T>): Predicate<T> {
  return {
    create: (obj) => !passes(p, { type: 'create', obj }),
    update: (oldObj, obj) => !passes(p, { type: 'update', oldObj, obj }),
    delete: (obj) => !passes(p, { type: 'delete', obj }),
  };
}
