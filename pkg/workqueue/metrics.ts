/**
 * Work queue metrics with controller-runtime's names, help texts, labels and buckets, so existing dashboards work:
 *
 *   workqueue_depth{name,controller,priority}                gauge: items added and not yet handed out, by priority
 *   workqueue_adds_total{name,controller}                    counter: accepted adds (duplicates are not counted)
 *   workqueue_queue_duration_seconds{name,controller}        histogram: first add → handed to a worker
 *   workqueue_work_duration_seconds{name,controller}         histogram: handed to a worker → done
 *   workqueue_unfinished_work_seconds{name,controller}       gauge: sum of the ages of items being processed
 *   workqueue_longest_running_processor_seconds{name,controller}  gauge: age of the oldest item being processed
 *   workqueue_retries_total{name,controller}                 counter: delayed/rate-limited adds
 *
 * Both labels carry the queue name (controller-runtime sets `controller` = `name` for controller queues).
 * `priority` on workqueue_depth is the item's queue priority as a number ("0" normal, "-100" low), as
 * controller-runtime's priority queue exports it.
 *
 * Families are created once per prom-client Registry (`getOrCreate`); every queue adds its own label values. The two
 * "unfinished work" gauges are computed on scrape (prom-client `collect`) from the processing start times of every
 * live queue registered against that Registry, instead of client-go's 500 ms ticker; `updateUnfinishedWork()` does
 * the same on demand.
 *
 * All durations are measured on the queue's Clock (milliseconds) and exported in seconds.
 *
 * Concurrency: a QueueMetrics instance belongs to one queue and is only called by it, synchronously.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';
import type { Clock } from '../util/clock.ts';

type Labels = 'name' | 'controller';

/** The hooks a queue calls; all synchronous and cheap. */
export interface QueueMetrics<T> {
  /** An item was accepted into the dirty set (at `priority`, default 0). */
  add(item: T, priority?: number): void;
  /** An item was handed to a worker (it waited at `priority`, default 0). */
  get(item: T, priority?: number): void;
  /** A waiting item's priority was raised. */
  priorityChanged?(from: number, to: number): void;
  /** A worker finished an item. */
  done(item: T): void;
  /** An item was scheduled through `addAfter`/`addRateLimited`. */
  retry(): void;
  /** Recomputes workqueue_unfinished_work_seconds and workqueue_longest_running_processor_seconds now. */
  updateUnfinishedWork(): void;
  /** Final update; the queue is shut down and idle, so stop recomputing on scrape. */
  close(): void;
}

/** Metrics that record nothing: the default for queues without a name (client-go does the same). */
export const noopQueueMetrics: QueueMetrics<unknown> = {
  add: () => {},
  get: () => {},
  done: () => {},
  retry: () => {},
  updateUnfinishedWork: () => {},
  close: () => {},
};

/** controller-runtime: prometheus.ExponentialBuckets(10e-9, 10, 12) = 1e-8 … 1e3. */
export const workqueueDurationBuckets: readonly number[] = Array.from({ length: 12 }, (_, i) => Number(`1e${i - 8}`));

/** The `workqueue_*` metric families of a registry (client-go's and controller-runtime's names and labels). */
export interface WorkqueueMetricFamilies {
  /** workqueue_depth: items added and not yet handed out, by priority. */
  depth: Gauge<Labels | 'priority'>;
  /** workqueue_adds_total: accepted adds (duplicates not counted). */
  adds: Counter<Labels>;
  /** workqueue_queue_duration_seconds: from the first add to a worker. */
  latency: Histogram<Labels>;
  /** workqueue_work_duration_seconds: from a worker taking an item to done. */
  workDuration: Histogram<Labels>;
  /** workqueue_unfinished_work_seconds: the sum of the ages of items being processed. */
  unfinished: Gauge<Labels>;
  /** workqueue_longest_running_processor_seconds: the age of the oldest item being processed. */
  longestRunning: Gauge<Labels>;
  /** workqueue_retries_total: delayed and rate-limited adds. */
  retries: Counter<Labels>;
}

/** Live queue metrics per registry, for the on-scrape computation of the unfinished-work gauges. */
const liveByRegistry = new WeakMap<Registry, Set<PromQueueMetrics<unknown>>>();

function liveSet(registry: Registry): Set<PromQueueMetrics<unknown>> {
  let s = liveByRegistry.get(registry);
  if (!s) {
    s = new Set();
    liveByRegistry.set(registry, s);
  }
  return s;
}

/** Returns (creating once) the seven workqueue families in `registry`. */
export function workqueueMetricFamilies(registry: Registry = globalRegistry): WorkqueueMetricFamilies {
  const labelNames: Labels[] = ['name', 'controller'];
  const registers = [registry];
  const refresh = (): void => {
    for (const m of liveSet(registry)) m.updateUnfinishedWork();
  };
  return {
    depth: getOrCreate(
      registry,
      'workqueue_depth',
      () => new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames: [...labelNames, 'priority'] as const, registers }),
    ),
    adds: getOrCreate(
      registry,
      'workqueue_adds_total',
      () =>
        new Counter({
          name: 'workqueue_adds_total',
          help: 'Total number of adds handled by workqueue',
          labelNames,
          registers,
        }),
    ),
    latency: getOrCreate(
      registry,
      'workqueue_queue_duration_seconds',
      () =>
        new Histogram({
          name: 'workqueue_queue_duration_seconds',
          help: 'How long in seconds an item stays in workqueue before being requested',
          buckets: [...workqueueDurationBuckets],
          labelNames,
          registers,
        }),
    ),
    workDuration: getOrCreate(
      registry,
      'workqueue_work_duration_seconds',
      () =>
        new Histogram({
          name: 'workqueue_work_duration_seconds',
          help: 'How long in seconds processing an item from workqueue takes.',
          buckets: [...workqueueDurationBuckets],
          labelNames,
          registers,
        }),
    ),
    unfinished: getOrCreate(
      registry,
      'workqueue_unfinished_work_seconds',
      () =>
        new Gauge({
          name: 'workqueue_unfinished_work_seconds',
          help:
            'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration. ' +
            'Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate ' +
            'at which this increases.',
          labelNames,
          registers,
          collect: refresh,
        }),
    ),
    longestRunning: getOrCreate(
      registry,
      'workqueue_longest_running_processor_seconds',
      () =>
        new Gauge({
          name: 'workqueue_longest_running_processor_seconds',
          help: 'How many seconds has the longest running processor for workqueue been running.',
          labelNames,
          registers,
          collect: refresh,
        }),
    ),
    retries: getOrCreate(
      registry,
      'workqueue_retries_total',
      () =>
        new Counter({
          name: 'workqueue_retries_total',
          help: 'Total number of retries handled by workqueue',
          labelNames,
          registers,
        }),
    ),
  };
}

/** Options of newQueueMetrics: the queue's label values, registry and clock. */
export interface QueueMetricsOptions {
  /** Value of the `name` label. */
  name: string;
  /** Value of the `controller` label; defaults to `name` (as controller-runtime does). */
  controller?: string;
  /** Where the families are registered (default the process-wide registry). */
  registry?: Registry;
  /** The clock of the durations and ages measured. */
  clock: Clock;
}

class PromQueueMetrics<T> implements QueueMetrics<T> {
  private readonly f: WorkqueueMetricFamilies;
  private readonly labels: Record<Labels, string>;
  private readonly clock: Clock;
  private readonly live: Set<PromQueueMetrics<unknown>>;
  /** First add time of each item in the dirty set (a re-add of a dirty item keeps the first time). */
  private readonly addTimes = new Map<T, number>();
  /** Hand-out time of each item being processed. */
  private readonly processingStartTimes = new Map<T, number>();

  constructor(opts: QueueMetricsOptions) {
    const registry = opts.registry ?? globalRegistry;
    this.f = workqueueMetricFamilies(registry);
    this.labels = { name: opts.name, controller: opts.controller ?? opts.name };
    this.clock = opts.clock;
    // Export every series at 0 from the start, as client_golang's WithLabelValues does.
    this.f.depth.inc({ ...this.labels, priority: '0' }, 0);
    this.f.adds.inc(this.labels, 0);
    this.f.retries.inc(this.labels, 0);
    this.f.latency.zero(this.labels);
    this.f.workDuration.zero(this.labels);
    this.f.unfinished.set(this.labels, 0);
    this.f.longestRunning.set(this.labels, 0);
    this.live = liveSet(registry);
    this.live.add(this);
  }

  add(item: T, priority = 0): void {
    this.f.adds.inc(this.labels);
    this.f.depth.inc({ ...this.labels, priority: String(priority) });
    if (!this.addTimes.has(item)) this.addTimes.set(item, this.clock.now());
  }

  priorityChanged(from: number, to: number): void {
    this.f.depth.dec({ ...this.labels, priority: String(from) });
    this.f.depth.inc({ ...this.labels, priority: String(to) });
  }

  get(item: T, priority = 0): void {
    const now = this.clock.now();
    this.f.depth.dec({ ...this.labels, priority: String(priority) });
    this.processingStartTimes.set(item, now);
    const added = this.addTimes.get(item);
    if (added !== undefined) {
      this.f.latency.observe(this.labels, (now - added) / 1000);
      this.addTimes.delete(item);
    }
  }

  done(item: T): void {
    const started = this.processingStartTimes.get(item);
    if (started !== undefined) {
      this.f.workDuration.observe(this.labels, (this.clock.now() - started) / 1000);
      this.processingStartTimes.delete(item);
    }
  }

  retry(): void {
    this.f.retries.inc(this.labels);
  }

  updateUnfinishedWork(): void {
    const now = this.clock.now();
    let total = 0;
    let longest = 0;
    for (const started of this.processingStartTimes.values()) {
      const age = (now - started) / 1000;
      total += age;
      if (age > longest) longest = age;
    }
    this.f.unfinished.set(this.labels, total);
    this.f.longestRunning.set(this.labels, longest);
  }

  close(): void {
    this.updateUnfinishedWork();
    this.live.delete(this);
  }
}

/** Prometheus-backed metrics for one queue. */
export function newQueueMetrics<T>(opts: QueueMetricsOptions): QueueMetrics<T> {
  return new PromQueueMetrics<T>(opts);
}
