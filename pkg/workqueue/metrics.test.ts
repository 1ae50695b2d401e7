import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { FakeClock } from '../util/clock.ts';
import { RateLimitingQueue } from './ratelimiting.ts';
import { Queue } from './queue.ts';
import { workqueueDurationBuckets } from './metrics.ts';

type Labels = Record<string, string | number>;

async function value(registry: Registry, metric: string, labels: Labels, sample = metric): Promise<number | undefined> {
  const m = registry.getSingleMetric(metric);
  assert.ok(m, `metric ${metric} is registered`);
  const data = await m.get();
  const hit = data.values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? metric) === sample &&
      Object.entries(labels).every(([k, want]) => v.labels[k] === want),
  );
  return hit?.value;
}

const foo = { name: 'foo', controller: 'foo' };

describe('workqueue metrics', () => {
  it('uses controller-runtime buckets: 1e-8 … 1e3, factor 10', () => {
    assert.equal(workqueueDurationBuckets.length, 12);
    assert.equal(workqueueDurationBuckets[0], 1e-8);
    assert.equal(workqueueDurationBuckets[11], 1e3);
    assert.equal(workqueueDurationBuckets[5], 1e-3);
  });

  it('exports every series at zero as soon as a named queue exists', async () => {
    const registry = new Registry();
    new Queue<string>({ name: 'foo', registry, clock: new FakeClock() });
    for (const m of [
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_retries_total',
      'workqueue_unfinished_work_seconds',
      'workqueue_longest_running_processor_seconds',
    ]) {
      assert.equal(await value(registry, m, foo), 0, m);
    }
    assert.equal(await value(registry, 'workqueue_queue_duration_seconds', foo, 'workqueue_queue_duration_seconds_count'), 0);
    assert.equal(await value(registry, 'workqueue_work_duration_seconds', foo, 'workqueue_work_duration_seconds_count'), 0);
  });

  it('counts depth, adds (not duplicates), retries and observes durations on the fake clock', async () => {
    const registry = new Registry();
    const clock = new FakeClock();
    const q = new RateLimitingQueue<string>({ name: 'foo', registry, clock });

    q.add('a');
    q.add('b');
    q.add('a'); // duplicate: not counted
    assert.equal(await value(registry, 'workqueue_adds_total', foo), 2);
    assert.equal(await value(registry, 'workqueue_depth', foo), 2);

    clock.step(2000);
    const r = await q.get();
    assert.equal(r.item, 'a');
    assert.equal(await value(registry, 'workqueue_depth', foo), 1);
    assert.equal(await value(registry, 'workqueue_queue_duration_seconds', foo, 'workqueue_queue_duration_seconds_sum'), 2);
    assert.equal(await value(registry, 'workqueue_queue_duration_seconds', foo, 'workqueue_queue_duration_seconds_count'), 1);
    assert.equal(
      await value(registry, 'workqueue_queue_duration_seconds', { ...foo, le: 1 }, 'workqueue_queue_duration_seconds_bucket'),
      0,
    );
    assert.equal(
      await value(registry, 'workqueue_queue_duration_seconds', { ...foo, le: 10 }, 'workqueue_queue_duration_seconds_bucket'),
      1,
    );

    clock.step(1000);
    const rb = await q.get(); // b waited 3 s
    assert.equal(rb.item, 'b');
    clock.step(2000);
    // a has been processing 3 s, b 2 s: computed on scrape.
    assert.equal(await value(registry, 'workqueue_unfinished_work_seconds', foo), 5);
    assert.equal(await value(registry, 'workqueue_longest_running_processor_seconds', foo), 3);

    q.done('a');
    assert.equal(await value(registry, 'workqueue_work_duration_seconds', foo, 'workqueue_work_duration_seconds_sum'), 3);
    assert.equal(await value(registry, 'workqueue_unfinished_work_seconds', foo), 2);
    q.done('b');
    assert.equal(await value(registry, 'workqueue_work_duration_seconds', foo, 'workqueue_work_duration_seconds_count'), 2);
    assert.equal(await value(registry, 'workqueue_longest_running_processor_seconds', foo), 0);

    q.addRateLimited('a');
    q.addAfter('c', 10);
    q.addAfter('d', 0);
    assert.equal(await value(registry, 'workqueue_retries_total', foo), 3);
    assert.equal(await value(registry, 'workqueue_adds_total', foo), 3, 'immediate addAfter is an add');
    clock.step(10);
    assert.equal(await value(registry, 'workqueue_adds_total', foo), 5);
    assert.equal(await value(registry, 'workqueue_depth', foo), 3);
  });

  it('counts an add of an item being processed in depth until it is handed out again', async () => {
    const registry = new Registry();
    const clock = new FakeClock();
    const q = new Queue<string>({ name: 'foo', registry, clock });
    q.add('a');
    await q.get();
    q.add('a');
    assert.equal(await value(registry, 'workqueue_depth', foo), 1);
    q.done('a');
    await q.get();
    assert.equal(await value(registry, 'workqueue_depth', foo), 0);
  });

  it('several queues share one family per registry, with their own labels', async () => {
    const registry = new Registry();
    const clock = new FakeClock();
    const q1 = new Queue<string>({ name: 'foo', registry, clock });
    const q2 = new Queue<string>({ name: 'bar', controller: 'bar-ctl', registry, clock });
    q1.add('x');
    q2.add('x');
    q2.add('y');
    assert.equal(await value(registry, 'workqueue_adds_total', foo), 1);
    assert.equal(await value(registry, 'workqueue_adds_total', { name: 'bar', controller: 'bar-ctl' }), 2);
  });

  it('records nothing for an unnamed queue', () => {
    const registry = new Registry();
    const q = new Queue<string>({ registry, clock: new FakeClock() });
    q.add('a');
    assert.equal(registry.getSingleMetric('workqueue_adds_total'), undefined);
  });

  it('stops updating unfinished work after a shut-down queue is idle', async () => {
    const registry = new Registry();
    const clock = new FakeClock();
    const q = new Queue<string>({ name: 'foo', registry, clock });
    q.add('a');
    await q.get();
    clock.step(1000);
    q.shutDown();
    assert.equal(await value(registry, 'workqueue_unfinished_work_seconds', foo), 1, 'still in flight after shutDown');
    q.done('a');
    clock.step(5000);
    assert.equal(await value(registry, 'workqueue_unfinished_work_seconds', foo), 0);
  });
});
