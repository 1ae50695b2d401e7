/**
 * Memory limits of the process, computed at scrape time, so an alert can compare usage with the limit from the
 * manager's own metrics (no cAdvisor or kube-state-metrics needed):
 *
 *  - `process_memory_limit_bytes` — the memory limit of the process's cgroup (a container's `limits.memory`), from
 *    `process.constrainedMemory()`, re-read at every scrape (in-place resizes show); not registered at all when the
 *    process starts without a limit (Node reports 0 or 2^64-1 then; an unlabelled prom-client gauge cannot be absent).
 *  - `nodejs_heap_size_limit_bytes` — V8's heap limit (`v8.getHeapStatistics().heap_size_limit`; the image sets it to
 *    half the container limit with --max-old-space-size-percentage=50). A heap that reaches it ends the process with
 *    "JavaScript heap out of memory" even below the cgroup limit.
 *
 * Registered next to prom-client's default process metrics (pkg/manager/metricsserver.ts registerProcessMetrics).
 */
import { getHeapStatistics } from 'node:v8';
import { Gauge, type Registry } from 'prom-client';
import { getOrCreate } from './registry.ts';

/** Limits at or above this are "no limit" (cgroup v1 reports a page-aligned 2^63, Node 2^64-1 without a cgroup). */
const UNLIMITED = 2 ** 60;

function memoryLimit(): number | undefined {
  const limit = process.constrainedMemory();
  return limit > 0 && limit < UNLIMITED ? limit : undefined;
}

export function registerMemoryLimitMetrics(registry: Registry): void {
  if (memoryLimit() !== undefined) getOrCreate(registry, 'process_memory_limit_bytes', () => new Gauge({
    name: 'process_memory_limit_bytes',
    help: 'Memory limit of the process\'s cgroup (container limits.memory) in bytes; absent without a limit.',
    registers: [registry],
    collect(this: Gauge) {
      const limit = memoryLimit();
      if (limit !== undefined) this.set(limit);
    },
  }));
  getOrCreate(registry, 'nodejs_heap_size_limit_bytes', () => new Gauge({
    name: 'nodejs_heap_size_limit_bytes',
    help: 'V8 heap size limit in bytes (--max-old-space-size / --max-old-space-size-percentage).',
    registers: [registry],
    collect(this: Gauge) {
      this.set(getHeapStatistics().heap_size_limit);
    },
  }));
}
