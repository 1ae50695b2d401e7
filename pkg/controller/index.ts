/** The generic controller runner: workers over a rate-limited work queue, reconcile result handling, metrics. */
export {
  Controller,
  type BaseControllerOptions,
  type ControllerOptions,
  type ReconcileContext,
  type Reconciler,
  type Result,
  type StopResult,
} from './controller.ts';
export { PriorityError, TerminalError, isPanic, isTerminalError, requeuePriorityOf, withPriority } from './errors.ts';
export { parseRequestKey, requestCodec, requestKey, type Request, type RequestCodec } from './request.ts';
export {
  controllerMetricFamilies,
  reconcileResultLabels,
  reconcileTimeBuckets,
  type ControllerMetricFamilies,
  type ReconcileResultLabel,
} from './metrics.ts';
