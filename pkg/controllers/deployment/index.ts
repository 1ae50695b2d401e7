/** Deployment rollout observer (events + metrics) on the shared Deployment informer. */
export { deploymentControllerName, deploymentControllerSetup, rolloutObserver, type RolloutObserverDeps } from './controller.ts';
export { RolloutMetrics, rolloutDurationBuckets } from './metrics.ts';
export * from './rollout.ts';
export * from './types.ts';
