/** process_memory_limit_bytes / nodejs_heap_size_limit_bytes (process.ts); the cgroup case runs in test/observability.test.ts. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getHeapStatistics } from 'node:v8';
import { Registry } from 'prom-client';
import { registerMemoryLimitMetrics } from './process.ts';

test('nodejs_heap_size_limit_bytes is V8\'s heap limit; process_memory_limit_bytes only with a real cgroup limit', async () => {
  const registry = new Registry();
  registerMemoryLimitMetrics(registry);
  registerMemoryLimitMetrics(registry); // idempotent per registry
  const heap = await registry.getSingleMetric('nodejs_heap_size_limit_bytes')?.get();
  assert.deepEqual(heap?.values.map((v) => v.value), [getHeapStatistics().heap_size_limit]);
  const limit = await registry.getSingleMetric('process_memory_limit_bytes')?.get();
  const c = process.constrainedMemory();
  assert.deepEqual(limit?.values.map((v) => v.value) ?? [], c > 0 && c < 2 ** 60 ? [c] : [], `constrainedMemory() = ${c}`);
});
