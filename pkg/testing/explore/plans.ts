/**
 * Traces and perturbation plans (pure): what an execution recorded, and the plans `explore` derives from the
 * reference execution's trace — Sieve's three classes of perturbation plus write faults:
 *
 *  - intermediate states (`crash`): the whole manager crashes right before, or right after, one write — caches,
 *    queues, in-flight reconciles gone — and a new one starts on the same store;
 *  - stale states (`stale`): from one write on, the manager's view of one resource lags (its watch delivers nothing
 *    new; reads from the watch cache, resourceVersion=0, see the state before that write) until the manager is at
 *    rest, then catches up (lagEndsAtRest: within a bounded number of rests, peers acting or not); optionally the manager restarts at that point first (a new process served by a lagging
 *    API server) — with its view of the resource at the state just before an object's deletion, or, right after an
 *    object is gone, at one of that object's earlier states (before its delete request, before the manager's status
 *    write: the cache of a new leader that never saw it go);
 *  - unobserved states (`unobserved`): the manager's watch of one resource delivers nothing from one change of an
 *    object made by the environment (the workload or a peer) until the next such change of that object — across rests,
 *    while the workload goes on — and then ends with 410 Gone, so the informer relists: the state in between is never
 *    seen (for a create then a delete: the object never is);
 *  - write faults (`fault`): one write answered 409 Conflict without being applied, or applied and then answered
 *    500 or not at all (the client times out).
 *
 * A write is identified across executions by its signature (verb, resource/subresource, namespace/name — a generated
 * name as `<generateName>*`) and its occurrence (the k-th write with that signature), an object's change by the
 * object and k: plans stay meaningful when an execution's resourceVersions differ from the reference's.
 */

/** A write identified across executions: the `occurrence`-th write (1-based) with this signature. */
export interface WriteRef {
  /** `<VERB> <resourceId>[/<subresource>] <namespace>/<name>` (writeSignature). */
  signature: string;
  /** 1 for the first write with this signature in an execution, 2 for the second, … */
  occurrence: number;
}

/** The classes a finding is reported in (the perturbation that exposed it; `reference` for the unperturbed run). */
export type FindingClass = 'intermediate-state' | 'stale-state' | 'unobserved-state' | 'write-fault' | 'reference';

/** Which plan kinds to derive. */
export type PlanKind = 'crash' | 'stale' | 'unobserved' | 'fault';

/** A perturbation plan (see the file comment). */
export type Plan =
  | { kind: 'crash'; when: 'before' | 'after'; write: WriteRef }
  | { kind: 'fault'; fault: 'conflict' | 'error-after' | 'timeout-after'; write: WriteRef }
  | {
    kind: 'stale'; write: WriteRef; resource: string; restart: boolean; viewAt?: ChangeRef;
    /** With restart and viewAt: the new manager is a standby whose caches listed the resource at viewAt (not now). */
    standby?: boolean;
  }
  | { kind: 'unobserved'; resource: string; key: string; from: number; to: number };
// (unobserved: `from` and `to` count the environment's changes of the object only — the workload's and peers' — so
// they name the same changes in an execution where the blind manager made fewer changes of its own.)

/**
 * An object's change identified across executions: the state just before its `change`-th change (1-based) — a stale
 * view's point in the past.
 */
export interface ChangeRef {
  /** The object's resourceId. */
  resource: string;
  /** The object's "namespace/name". */
  key: string;
  /** 1-based: the view is the state just before this change of the object. */
  change: number;
}

/** One entry of an execution's trace. */
export type TraceEntry =
  | { kind: 'step'; index: number; step: string }
  | { kind: 'start'; incarnation: number }
  | { kind: 'crash'; incarnation: number; at: string }
  | {
    kind: 'write'; incarnation: number; signature: string; occurrence: number; status: number | 'reset' | 'timeout'; changed: boolean;
    method: string; resource: string; subresource: string | undefined; action: string;
  }
  | {
    kind: 'change'; rv: number; type: string; resource: string; key: string; change: number; by: string;
    /** For a change by the environment (workload, peer): its ordinal among the environment's changes of this object. */
    envChange?: number;
  }
  | { kind: 'peer'; name: string; wrote: number }
  | { kind: 'reconcile'; incarnation: number; controller: string; key: string; outcome: string }
  | { kind: 'deliver'; incarnation: number; resource: string; type: string; key: string; rv: number }
  | { kind: 'perturb'; what: string }
  | { kind: 'rest'; step: number; outcome: string };

/** Options of derivePlans. */
export interface PlanOptions {
  /** Plan kinds to derive (default all). */
  kinds?: readonly PlanKind[];
  /** At most this many occurrences of one write signature get plans (default 3). */
  maxOccurrences?: number;
  /**
   * At most this many change pairs of one object get unobserved plans, and this many of a gone object's earlier
   * states get a restart with a view of it (default 4).
   */
  maxChangesPerObject?: number;
}

/** The signature of a write: `<VERB> <resourceId>[/<subresource>] <namespace>/<name>`. */
export function writeSignature(method: string, rid: string, subresource: string | undefined, namespace: string | undefined, name: string): string {
  return `${method} ${rid}${subresource ? `/${subresource}` : ''} ${namespace ? `${namespace}/` : ''}${name}`;
}

/** A plan's id: stable across executions, and what `EXPLORE_PLAN` names to replay it. */
export function planId(p: Plan): string {
  switch (p.kind) {
    case 'crash': return `crash-${p.when}:${refText(p.write)}`;
    case 'fault': return `fault-${p.fault}:${refText(p.write)}`;
    case 'stale': return `stale${p.standby ? '-standby' : p.restart ? '-restart' : ''}:${p.resource}${p.viewAt ? `@${changeText(p.viewAt)}` : ''}:${refText(p.write)}`;
    case 'unobserved': return `unobserved:${p.resource} ${p.key}#${p.from}-${p.to}`;
  }
}

/** The class of findings a plan exposes. */
export function planClass(p: Plan): FindingClass {
  switch (p.kind) {
    case 'crash': return 'intermediate-state';
    case 'fault': return 'write-fault';
    case 'stale': return 'stale-state';
    case 'unobserved': return 'unobserved-state';
  }
}

/** What a plan does, in words. */
export function describePlan(p: Plan): string {
  switch (p.kind) {
    case 'crash': return `the manager crashes right ${p.when} write ${refText(p.write)}, and a new one starts on the same store`;
    case 'fault': return p.fault === 'conflict'
      ? `write ${refText(p.write)} is answered 409 Conflict without being applied`
      : `write ${refText(p.write)} is applied and then answered ${p.fault === 'error-after' ? '500' : 'with no answer (timeout)'}`;
    case 'stale': return p.standby && p.viewAt
      ? `the manager restarts right after write ${refText(p.write)} as a standby whose caches listed ${p.resource} just before ${changeText(p.viewAt)}: its view lags there (no watch events since; resourceVersion=0 reads see that state) until it is at rest, then catches up`
      : `${p.restart ? 'the manager restarts right after' : 'from'} write ${refText(p.write)}, ${p.restart ? 'and its' : 'its'} view of ${p.resource} lags (no watch events; resourceVersion=0 reads see the state ${p.viewAt ? `just before ${changeText(p.viewAt)}` : 'before that write'}) until it is at rest, then catches up`;
    case 'unobserved': return `the manager sees nothing of ${p.resource} from the environment's change ${p.from} of ${p.key} until its change ${p.to} (then its watch ends with 410 and the informer relists): the state in between is never observed`;
  }
}

function refText(r: WriteRef): string {
  return `${r.signature}#${r.occurrence}`;
}

function changeText(c: ChangeRef): string {
  return `${c.key}#${c.change}`;
}

/** Derives the perturbation plans of a reference trace (see the file comment), in a deterministic order. */
export function derivePlans(trace: readonly TraceEntry[], opts: PlanOptions = {}): Plan[] {
  const kinds = new Set<PlanKind>(opts.kinds ?? ['crash', 'stale', 'unobserved', 'fault']);
  const maxOcc = opts.maxOccurrences ?? 3;
  const maxChanges = opts.maxChangesPerObject ?? 4;
  const plans: Plan[] = [];
  const watched = [...new Set(trace.flatMap((e) => (e.kind === 'deliver' ? [e.resource] : [])))].sort();
  const deletionsBefore = new Map<string, ChangeRef[]>();
  /** Per signature, how many of its writes changed something so far: the cap counts those too (a write that changes
   * something after many that did not — an idempotent apply — still gets its plans). */
  const changing = new Map<string, number>();
  /** Per object ("<resource> <key>"), its changes since it was last created. */
  const lifetime = new Map<string, number[]>();
  /** Objects gone (DELETED) since the last manager write, each with the earlier states a restart sees it in. */
  let gone: ChangeRef[] = [];
  for (const e of trace) {
    if (e.kind === 'change') {
      const id = `${e.resource} ${e.key}`;
      const changes = e.type === 'ADDED' ? [] : (lifetime.get(id) ?? []);
      changes.push(e.change);
      lifetime.set(id, changes);
      if (e.type === 'DELETED') {
        deletionsBefore.set(e.resource, [...(deletionsBefore.get(e.resource) ?? []), { resource: e.resource, key: e.key, change: e.change }]);
        if (watched.includes(e.resource)) gone.push(...earlierStates(changes, maxChanges).map((change) => ({ resource: e.resource, key: e.key, change })));
      }
    }
    if (e.kind !== 'write') continue;
    if (kinds.has('stale') && e.method !== 'EXTERNAL' && typeof e.status === 'number' && e.status < 300 && gone.length > 0) {
      // Restarted right after an object is gone (at the manager's first write since: usually the finalizer's removal
      // that deleted it, whatever its occurrence), with a view of it in one of its earlier states — a new leader whose
      // cache never saw the deletion, the delete request, or its own status write. One plan per such state.
      const write = { signature: e.signature, occurrence: e.occurrence };
      for (const viewAt of gone) plans.push({ kind: 'stale', write, resource: viewAt.resource, restart: true, viewAt, standby: true });
      gone = [];
    }
    const nthChange = e.changed ? (changing.get(e.signature) ?? 0) + 1 : Infinity;
    if (e.changed) changing.set(e.signature, nthChange);
    if (e.occurrence > maxOcc && nthChange > maxOcc) continue;
    const write = { signature: e.signature, occurrence: e.occurrence };
    const ok = typeof e.status === 'number' && e.status < 300;
    if (kinds.has('crash')) plans.push({ kind: 'crash', when: 'before', write }, { kind: 'crash', when: 'after', write });
    if (kinds.has('fault')) {
      if (e.method === 'PUT' || e.method === 'PATCH') plans.push({ kind: 'fault', fault: 'conflict', write });
      // (an external write — method EXTERNAL, a world's WorldPoints.write — has no 409 of Kubernetes' kind)
      if (ok) plans.push({ kind: 'fault', fault: 'error-after', write }, { kind: 'fault', fault: 'timeout-after', write });
    }
    if (kinds.has('stale') && ok && e.method !== 'EXTERNAL') {
      for (const resource of watched) {
        plans.push({ kind: 'stale', write, resource, restart: false }, { kind: 'stale', write, resource, restart: true });
        // Time travel to just before an object of this resource was deleted (the last two deletions before this
        // write): a restarted manager then reads, from the watch cache, an object that is gone or re-created since.
        for (const viewAt of deletionsBefore.get(resource)?.slice(-2) ?? []) plans.push({ kind: 'stale', write, resource, restart: true, viewAt });
      }
    }
  }
  if (kinds.has('unobserved')) {
    // Consecutive changes of one object made by the environment (the workload, a peer), not by a manager.
    const byObject = new Map<string, number[]>();
    for (const e of trace) {
      if (e.kind !== 'change' || !watched.includes(e.resource) || e.envChange === undefined) continue;
      const id = `${e.resource} ${e.key}`;
      byObject.set(id, [...(byObject.get(id) ?? []), e.envChange]);
    }
    for (const [id, changes] of [...byObject.entries()].sort(([a], [b]) => a.localeCompare(b))) {
      const [resource = '', key = ''] = id.split(' ');
      for (let i = 0; i + 1 < changes.length && i < maxChanges; i++) {
        plans.push({ kind: 'unobserved', resource, key, from: changes[i] ?? 0, to: changes[i + 1] ?? 0 });
      }
    }
  }
  return plans;
}

/**
 * The earlier states of a gone object a restarted manager may see it in, as the changes they came just before: of its
 * changes since it was created (`changes`, the last one its DELETED), every one from the second to the one before the
 * DELETED (the state just before the DELETED change has a plan of its own) — at most `max`: the first `max - 1` (the
 * states before the manager's first writes: its finalizer, its status) and the last (just before the delete request).
 */
function earlierStates(changes: readonly number[], max: number): number[] {
  const states = changes.slice(1, -1);
  if (max <= 0) return [];
  return states.length <= max ? states : [...states.slice(0, max - 1), ...states.slice(-1)];
}

/**
 * How many rests of the manager a lag lasts at most (see lagEndsAtRest).
 */
export const maxLagRests = 2;

/**
 * Whether a lag (a stale plan's, or an unobserved gap in the last settle) ends at the manager's `rest`-th rest since it
 * began (1 for the first): at the first rest at which no peer changed anything, and at the latest at its
 * `maxLagRests`-th rest even while peers keep acting — a real watch that falls behind still delivers within bounded
 * time. (Unbounded, a manager that re-creates from its stale view what a peer such as the garbage collector deletes
 * would never catch up: a liveness finding explore made, not the controller.) Pure.
 */
export function lagEndsAtRest(rest: number, peersChanged: boolean): boolean {
  return !peersChanged || rest >= maxLagRests;
}
