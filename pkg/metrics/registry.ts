/**
 * Prometheus registries. `globalRegistry` is what the manager serves on /metrics (controller-runtime's
 * metrics.Registry); components take a `Registry` option defaulting to it, so tests can use private ones.
 *
 * Metric families are created at most once per registry (`getOrCreate`), because every queue/controller/client of
 * one process shares one family and adds its own label values.
 */
import { Registry, type Metric } from 'prom-client';

/** The process-wide metrics registry (controller-runtime's metrics.Registry): the default of every metric here. */
export const globalRegistry = new Registry();

/** Returns the metric `name` registered in `registry`, creating it with `create` (which must register it) once. */
export function getOrCreate<T extends Metric>(registry: Registry, name: string, create: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? create();
}
