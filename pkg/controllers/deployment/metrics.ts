/**
 * Rollout metrics of the Deployment controller:
 *   deployment_rollout_state{namespace,deployment,state}  1 for the Deployment's current state, 0 for the others
 *   deployment_rollout_duration_seconds                   time from an observed RolloutStarted to RolloutComplete
 * A deleted Deployment's series are removed.
 */
import { Gauge, Histogram, type Registry } from 'prom-client';
import { getOrCreate } from '../../metrics/registry.ts';
import { rolloutStates, type RolloutState } from './rollout.ts';

export const rolloutDurationBuckets = [1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

export class RolloutMetrics {
  private readonly state: Gauge<'namespace' | 'deployment' | 'state'>;
  private readonly duration: Histogram;

  constructor(registry: Registry) {
    this.state = getOrCreate(registry, 'deployment_rollout_state', () => new Gauge({
      name: 'deployment_rollout_state',
      help: 'Rollout state of each Deployment in scope (1 for the current state: progressing, complete, stalled or paused).',
      labelNames: ['namespace', 'deployment', 'state'] as const,
      registers: [registry],
    }));
    this.duration = getOrCreate(registry, 'deployment_rollout_duration_seconds', () => new Histogram({
      name: 'deployment_rollout_duration_seconds',
      help: 'Duration of Deployment rollouts, from the observed start of a new revision to its completion.',
      buckets: rolloutDurationBuckets,
      registers: [registry],
    }));
  }

  setState(namespace: string, deployment: string, current: RolloutState): void {
    for (const state of rolloutStates) this.state.set({ namespace, deployment, state }, state === current ? 1 : 0);
  }

  forget(namespace: string, deployment: string): void {
    for (const state of rolloutStates) this.state.remove({ namespace, deployment, state });
  }

  observeDuration(seconds: number): void {
    this.duration.observe(seconds);
  }
}
