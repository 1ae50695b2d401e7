/** Work queues for controllers: dedup + one-at-a-time queue, delays, rate-limited retries, metrics. */
export { Queue, type WorkQueue, type GetResult, type QueueOptions } from './queue.ts';
export { DelayingQueue, type DelayingWorkQueue, type DelayingQueueOptions } from './delaying.ts';
export { RateLimitingQueue, type RateLimitingWorkQueue, type RateLimitingQueueOptions } from './ratelimiting.ts';
export {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
  type BucketRateLimiterOptions,
  type RateLimiter,
} from './ratelimiter.ts';
export {
  newQueueMetrics,
  noopQueueMetrics,
  workqueueDurationBuckets,
  workqueueMetricFamilies,
  type QueueMetrics,
  type QueueMetricsOptions,
  type WorkqueueMetricFamilies,
} from './metrics.ts';
