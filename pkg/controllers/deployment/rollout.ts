/**
 * Rollout state of a Deployment, derived from the object alone, and the transitions worth announcing.
 * Pure functions: no I/O, no clock (the caller passes `nowMs`), so every case is unit-tested.
 *
 * State (as `kubectl rollout status` judges it, plus paused):
 *   paused       spec.paused
 *   progressing  the deployment controller has not observed the latest spec yet (observedGeneration < generation),
 *                or not all replicas are updated / old replicas remain / updated replicas are not all available
 *   stalled      the Progressing condition has reason ProgressDeadlineExceeded
 *   complete     otherwise
 *
 * A rollout is identified by the Deployment's revision annotation (deployment.kubernetes.io/revision, the revision of
 * its newest ReplicaSet): a new revision (first rollout, template change, rollback) while progressing starts a rollout;
 * a scale-only change keeps the revision and is not announced as a rollout (its stall still is).
 *
 * Announcements (each at most once per rollout / stall episode):
 *   RolloutStarted   (Normal)  a revision other than the last completed one is progressing (or stalled)
 *   RolloutStalled   (Warning) the rollout reached ProgressDeadlineExceeded; again only after it progressed meanwhile
 *   RolloutComplete  (Normal)  a rollout we knew of is complete (also Started+Complete when the whole rollout
 *                              happened between two observations)
 * Nothing is announced while paused (the state is still recorded).
 *
 * Restart / failover: the record lives in memory only. A Deployment seen for the first time is ADOPTED silently —
 * its current state becomes the record as if we had been watching — when it was created before this controller
 * started (`existedBeforeStart`): whatever it did then was the previous instance's (or nobody's) to announce.
 * Only Deployments created after the start are treated as new ("nothing seen yet"), so their first rollout is
 * announced. Consequences: a finished rollout is never re-announced after a restart, a rollout in flight at restart
 * gets its RolloutComplete (but no second RolloutStarted, and no duration), and transitions that happened while no
 * instance was running are not announced (the state gauge still shows them).
 */
import { revisionAnnotation, type Deployment, type DeploymentSpec } from './types.ts';

export const rolloutStates = ['progressing', 'complete', 'stalled', 'paused'] as const;
export type RolloutState = (typeof rolloutStates)[number];

/** The state ignoring spec.paused (what the rollout would be doing), the effective state and a human-readable detail. */
export interface RolloutObservation {
  uid: string;
  revision: string;
  paused: boolean;
  /** State ignoring pause. */
  progress: Exclude<RolloutState, 'paused'>;
  /** Effective state: 'paused' when paused, else `progress`. */
  state: RolloutState;
  message: string;
}

export function observeRollout(d: Deployment): RolloutObservation {
  const spec: Partial<DeploymentSpec> = d.spec ?? {};
  const st = d.status ?? {};
  const paused = spec.paused === true;
  const base = { uid: d.metadata?.uid ?? '', revision: d.metadata?.annotations?.[revisionAnnotation] ?? '', paused };
  const out = (progress: RolloutObservation['progress'], message: string): RolloutObservation =>
    ({ ...base, progress, state: paused ? 'paused' : progress, message: paused ? `paused (${message})` : message });

  if ((st.observedGeneration ?? 0) < (d.metadata?.generation ?? 0)) {
    return out('progressing', 'waiting for the deployment spec update to be observed');
  }
  const cond = st.conditions?.find((c) => c.type === 'Progressing');
  if (cond?.reason === 'ProgressDeadlineExceeded') {
    return out('stalled', cond.message ?? 'exceeded its progress deadline');
  }
  const desired = spec.replicas ?? 1;
  const updated = st.updatedReplicas ?? 0;
  const replicas = st.replicas ?? 0;
  const available = st.availableReplicas ?? 0;
  if (updated < desired) return out('progressing', `${updated} out of ${desired} new replicas have been updated`);
  if (replicas > updated) return out('progressing', `${replicas - updated} old replicas are pending termination`);
  if (available < updated) return out('progressing', `${available} of ${updated} updated replicas are available`);
  return out('complete', 'successfully rolled out');
}

export interface RolloutRecord {
  uid: string;
  state: RolloutState;
  /** Revision of the last rollout known to be complete ('' = none yet). */
  completedRevision: string;
  /** The rollout in flight, if any. `startedAtMs` is unset when it was adopted mid-flight. */
  rollout?: { revision: string; startedAtMs?: number; stalled: boolean };
}

export type RolloutReason = 'RolloutStarted' | 'RolloutComplete' | 'RolloutStalled';

export interface Announcement {
  reason: RolloutReason;
  type: 'Normal' | 'Warning';
  message: string;
  /** On RolloutComplete when the start was seen. */
  durationSeconds?: number;
}

export interface Step {
  record: RolloutRecord;
  announcements: Announcement[];
  /** Previous effective state ('' when the Deployment is new to us or was adopted just now). */
  from: RolloutState | '';
  adopted: boolean;
}

/** The record of a Deployment first seen in this state, with nothing to announce. */
export function adopt(o: RolloutObservation): RolloutRecord {
  const inFlight = o.progress !== 'complete' && o.revision !== '';
  return {
    uid: o.uid,
    state: o.state,
    completedRevision: o.progress === 'complete' ? o.revision : '',
    ...(inFlight ? { rollout: { revision: o.revision, stalled: o.progress === 'stalled' } } : {}),
  };
}

/**
 * One observation of a Deployment. `prev` is the record from the last observation (undefined if none, or for
 * another object of the same name); `existedBeforeStart` says whether an unknown Deployment is adopted silently.
 */
export function step(prev: RolloutRecord | undefined, o: RolloutObservation, nowMs: number, existedBeforeStart: boolean): Step {
  const known = prev !== undefined && prev.uid === o.uid;
  if (!known && existedBeforeStart) return { record: adopt(o), announcements: [], from: '', adopted: true };

  const announcements: Announcement[] = [];
  let completedRevision = known ? prev.completedRevision : '';
  let rollout = known && prev.rollout ? { ...prev.rollout } : undefined;
  const rev = o.revision;
  const label = rev ? `revision ${rev}` : 'the current revision';

  if (!o.paused) {
    const isNewRevision = rev !== '' && rev !== completedRevision && rev !== rollout?.revision;
    if (isNewRevision && o.progress !== 'complete') {
      rollout = { revision: rev, startedAtMs: nowMs, stalled: false };
      announcements.push({ reason: 'RolloutStarted', type: 'Normal', message: `Rollout of revision ${rev} started` });
    }
    if (o.progress === 'stalled') {
      rollout ??= { revision: rev, stalled: false };
      if (!rollout.stalled) {
        rollout.stalled = true;
        announcements.push({ reason: 'RolloutStalled', type: 'Warning', message: `Rollout of ${label} stalled: ${o.message}` });
      }
    } else if (o.progress === 'progressing' && rollout) {
      rollout.stalled = false;
    } else if (o.progress === 'complete') {
      if (!rollout && isNewRevision) {
        // The whole rollout happened between two observations: announce both ends.
        announcements.push({ reason: 'RolloutStarted', type: 'Normal', message: `Rollout of revision ${rev} started` });
        rollout = { revision: rev, stalled: false };
      }
      if (rollout) {
        const a: Announcement = { reason: 'RolloutComplete', type: 'Normal', message: `Rollout of ${label} complete` };
        if (rollout.startedAtMs !== undefined) a.durationSeconds = Math.max(0, nowMs - rollout.startedAtMs) / 1000;
        announcements.push(a);
        rollout = undefined;
      }
      completedRevision = rev;
    }
  }
  const record: RolloutRecord = { uid: o.uid, state: o.state, completedRevision, ...(rollout ? { rollout } : {}) };
  return { record, announcements, from: known ? prev.state : '', adopted: false };
}

/**
 * Whether a Deployment existed before `startedAtMs` (then a first sighting is adopted silently). creationTimestamp
 * has second precision, so anything created in the start's second counts as new. A missing timestamp counts as old.
 */
export function existedBefore(d: Deployment, startedAtMs: number): boolean {
  const created = Date.parse(d.metadata?.creationTimestamp ?? '');
  if (Number.isNaN(created)) return true;
  return created < Math.floor(startedAtMs / 1000) * 1000;
}
