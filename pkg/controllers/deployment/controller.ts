/**
 * Deployment controller: observes the rollouts of every Deployment in scope and announces their transitions as
 * Events on the Deployment (RolloutStarted, RolloutComplete, RolloutStalled) and log lines, and exports
 * deployment_rollout_state / deployment_rollout_duration_seconds. It writes nothing but Events.
 *
 *   shared Deployment informer ──any event──▶ queue "ns/name" ──▶ reconcile: lister.get → observeRollout → step
 *                                                                   (records in memory) → events, logs, metrics
 *
 * The state machine is in rollout.ts (what is announced when, and why a restart announces nothing for finished
 * rollouts). Reconciles never await, so the in-memory records need no locking; each key is handled by one worker.
 */
import type { Registry } from 'prom-client';
import type { Reconciler } from '../../controller/index.ts';
import type { Recorder } from '../../events/recorder.ts';
import type { Lister } from '../../informerfactory/lister.ts';
import { keyOf } from '../../apimachinery/keys.ts';
import type { ControllerSetup } from '../setup.ts';
import { RolloutMetrics } from './metrics.ts';
import { existedBefore, observeRollout, step, type RolloutRecord } from './rollout.ts';
import { deploymentResource, type Deployment } from './types.ts';

export const deploymentControllerName = 'deployment';

export interface RolloutObserverDeps {
  deployments: Lister<Deployment>;
  recorder: Recorder;
  registry: Registry;
  /** Wall clock (ms). Default Date.now. */
  now?: () => number;
}

/**
 * The reconciler plus `markStarted`, which the runnable calls when the controller starts (on becoming leader):
 * Deployments created before that moment are adopted silently on first sight.
 */
export function rolloutObserver(deps: RolloutObserverDeps): { reconcile: Reconciler; markStarted(): void; records: ReadonlyMap<string, RolloutRecord> } {
  const now = deps.now ?? Date.now;
  const metrics = new RolloutMetrics(deps.registry);
  const records = new Map<string, RolloutRecord>();
  let startedAtMs = now();

  const reconcile: Reconciler = ({ namespace, name }, _signal, { log }) => {
    const key = keyOf(namespace, name);
    const d = deps.deployments.get(namespace, name);
    if (!d) {
      if (records.delete(key)) log.debug('Deployment deleted; forgetting its rollout state');
      metrics.forget(namespace, name);
      return Promise.resolve();
    }
    const o = observeRollout(d);
    const s = step(records.get(key), o, now(), existedBefore(d, startedAtMs));
    records.set(key, s.record);
    metrics.setState(namespace, name, s.record.state);
    if (s.adopted) log.debug({ state: o.state, revision: o.revision }, 'Adopted the rollout state of an existing Deployment');
    else if (s.from !== o.state) {
      // A scale-only change (the completed revision, no rollout in flight, nothing announced) moves complete ↔
      // progressing on every replicas edit: a debug line, or it drowns the log (issue 43: 66 % of a soak's lines).
      const scaleOnly = s.announcements.length === 0 && s.record.rollout === undefined && o.revision !== '' &&
        o.revision === s.record.completedRevision && (s.from === 'complete' || s.from === 'progressing') && (o.state === 'complete' || o.state === 'progressing');
      (scaleOnly ? log.debug : log.info).call(log, { from: s.from || 'none', to: o.state, revision: o.revision, detail: o.message }, 'Rollout state changed');
    }
    const ref = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: d.metadata };
    for (const a of s.announcements) {
      deps.recorder.event(ref, a.type, a.reason, a.message);
      (a.type === 'Warning' ? log.warn : log.info).call(log, { reason: a.reason, revision: o.revision, durationSeconds: a.durationSeconds }, a.message);
      if (a.durationSeconds !== undefined) metrics.observeDuration(a.durationSeconds);
    }
    return Promise.resolve();
  };
  return { reconcile, markStarted: () => { startedAtMs = now(); }, records };
}

/** The rollout observer's declaration: Deployments are the primary type; it marks its start to adopt old rollouts. */
export const deploymentControllerSetup: ControllerSetup = {
  name: deploymentControllerName,
  setup(mgr, { concurrency }) {
    const builder = mgr.controller(deploymentControllerName).for<Deployment>(deploymentResource);
    const observer = rolloutObserver({
      deployments: builder.informer().lister(), recorder: mgr.recorderFor(`${deploymentControllerName}-controller`), registry: mgr.registry,
    });
    // Resyncs too (the default): level-triggered, and a no-op unless the state changed.
    return builder
      .withOptions({ ...(concurrency !== undefined ? { concurrency } : {}), onStart: () => observer.markStarted() })
      .complete(observer.reconcile);
  },
};
