/**
 * Controller metrics with controller-runtime's names, help texts, labels and buckets:
 *
 *   controller_runtime_reconcile_total{controller,result}      result ∈ success, error, requeue, requeue_after
 *   controller_runtime_reconcile_errors_total{controller}      every failed reconcile (terminal and panics included)
 *   controller_runtime_terminal_reconcile_errors_total{controller}
 *   controller_runtime_reconcile_panics_total{controller}
 *   controller_runtime_reconcile_timeouts_total{controller}   reconciles whose signal the reconcile timeout aborted
 *   controller_runtime_reconcile_time_seconds{controller}      histogram, every reconcile whatever its outcome
 *   controller_runtime_max_concurrent_reconciles{controller}   gauge, set when the controller starts
 *   controller_runtime_active_workers{controller}              gauge, workers currently inside a reconcile
 *
 * Families are created once per Registry (`getOrCreate`); each controller adds its `controller` label value.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';

export type ReconcileResultLabel = 'success' | 'error' | 'requeue' | 'requeue_after';
export const reconcileResultLabels: readonly ReconcileResultLabel[] = ['success', 'error', 'requeue', 'requeue_after'];

/** controller-runtime's reconcile_time_seconds buckets (5 ms … 60 s). */
export const reconcileTimeBuckets: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75,
  2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

export interface ControllerMetricFamilies {
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileErrors: Counter<'controller'>;
  terminalReconcileErrors: Counter<'controller'>;
  reconcilePanics: Counter<'controller'>;
  reconcileTimeouts: Counter<'controller'>;
  reconcileTime: Histogram<'controller'>;
  maxConcurrentReconciles: Gauge<'controller'>;
  activeWorkers: Gauge<'controller'>;
}

export function controllerMetricFamilies(registry: Registry = globalRegistry): ControllerMetricFamilies {
  const registers = [registry];
  const controller: 'controller'[] = ['controller'];
  const counter = (name: string, help: string): Counter<'controller'> =>
    getOrCreate(registry, name, () => new Counter({ name, help, labelNames: controller, registers }));
  const gauge = (name: string, help: string): Gauge<'controller'> =>
    getOrCreate(registry, name, () => new Gauge({ name, help, labelNames: controller, registers }));
  return {
    reconcileTotal: getOrCreate(
      registry,
      'controller_runtime_reconcile_total',
      () =>
        new Counter({
          name: 'controller_runtime_reconcile_total',
          help: 'Total number of reconciliations per controller',
          labelNames: ['controller', 'result'],
          registers,
        }),
    ),
    reconcileErrors: counter('controller_runtime_reconcile_errors_total', 'Total number of reconciliation errors per controller'),
    terminalReconcileErrors: counter(
      'controller_runtime_terminal_reconcile_errors_total',
      'Total number of terminal reconciliation errors per controller',
    ),
    reconcilePanics: counter('controller_runtime_reconcile_panics_total', 'Total number of reconciliation panics per controller'),
    reconcileTimeouts: counter('controller_runtime_reconcile_timeouts_total', 'Total number of reconciliation timeouts per controller'),
    reconcileTime: getOrCreate(
      registry,
      'controller_runtime_reconcile_time_seconds',
      () =>
        new Histogram({
          name: 'controller_runtime_reconcile_time_seconds',
          help: 'Length of time per reconciliation per controller',
          buckets: [...reconcileTimeBuckets],
          labelNames: controller,
          registers,
        }),
    ),
    maxConcurrentReconciles: gauge(
      'controller_runtime_max_concurrent_reconciles',
      'Maximum number of concurrent reconciles per controller',
    ),
    activeWorkers: gauge('controller_runtime_active_workers', 'Number of currently used workers per controller'),
  };
}
