import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../util/clock.ts';
import { Controller, type Result } from './controller.ts';
import { TerminalError, withPriority } from './errors.ts';
import { addPriority, PriorityLow, PriorityNormal, updatePriority } from './priority.ts';

/** Runs a 1-worker controller over keys queued before start; resolves the reconcile order. */
async function order(priorityQueue: boolean | undefined, adds: [string, number][]): Promise<string[]> {
  const seen: string[] = [];
  const ac = new AbortController();
  const ctl = new Controller({
    name: `pq-${String(priorityQueue)}`, registry: new Registry(),
    ...(priorityQueue === undefined ? {} : { priorityQueue }),
    reconciler: ({ namespace, name }) => {
      seen.push(`${namespace}/${name}`);
      if (seen.length === adds.length) ac.abort();
      return Promise.resolve();
    },
  });
  for (const [key, p] of adds) ctl.enqueue(key, p);
  await ctl.start(ac.signal);
  return seen;
}

describe('controller priority queue', () => {
  const adds: [string, number][] = [['ns/backlog-1', PriorityLow], ['ns/backlog-2', PriorityLow], ['ns/new', PriorityNormal]];

  it('is on by default: a real change goes before the initial-list backlog', async () => {
    assert.deepEqual(await order(undefined, adds), ['ns/new', 'ns/backlog-1', 'ns/backlog-2']);
  });

  it('priorityQueue: false is plain FIFO', async () => {
    assert.deepEqual(await order(false, adds), ['ns/backlog-1', 'ns/backlog-2', 'ns/new']);
  });

  // Found by bench/priority.ts (10 000 converged Foos): reconciles that do no I/O resolve as microtasks only, so
  // workers that never gave the event loop a turn kept the informer's watch events (and /metrics, /readyz) waiting
  // until the whole backlog was done — the new Foo came last whatever its priority.
  for (const workers of [1, 8]) {
    it(`workers yield to the event loop between reconciles (${workers} worker${workers > 1 ? 's' : ''}): an event during a CPU-only backlog goes first`, async () => {
      const backlog = 2000;
      const seen: string[] = [];
      const ac = new AbortController();
      const ctl = new Controller({
        name: `pq-yield-${workers}`, registry: new Registry(), maxConcurrentReconciles: workers,
        reconciler: ({ name }) => {
          seen.push(name);
          if (seen.length === backlog + 1) ac.abort();
          return Promise.resolve(); // converged: no I/O
        },
      });
      for (let i = 0; i < backlog; i++) ctl.enqueue(`ns/backlog-${i}`, PriorityLow);
      const started = ctl.start(ac.signal);
      // An informer event arrives from I/O: a macrotask, after the workers started on the backlog.
      setImmediate(() => ctl.enqueue('ns/new', PriorityNormal));
      await started;
      const at = seen.indexOf('new');
      assert.ok(at >= 0 && at <= 2 * workers, `the new key was reconciled after ${at} of ${backlog} backlog keys`);
    });
  }

  it('event priorities: initial list and resyncs are low, real changes normal', () => {
    assert.equal(addPriority(true), PriorityLow);
    assert.equal(addPriority(false), PriorityNormal);
    assert.equal(updatePriority({ metadata: { resourceVersion: '5' } }, { metadata: { resourceVersion: '5' } }), PriorityLow);
    assert.equal(updatePriority({ metadata: { resourceVersion: '5' } }, { metadata: { resourceVersion: '6' } }), PriorityNormal);
  });
});

/**
 * One worker on a FakeClock. 'ns/a' is enqueued at `initial`; its first reconcile returns `first` (or throws). Then
 * 'ns/x' holds the worker while the requeue of 'a' falls due, and only AFTER that 'ns/b' is enqueued at
 * PriorityNormal. Resolves the order of the reconciles after 'x': 'a' first unless its requeue went in below normal.
 */
async function afterRequeue(first: Result | Error, initial: number, priorityQueue = true): Promise<string[]> {
  const clock = new FakeClock();
  const seen: string[] = [];
  let release!: () => void;
  const ctl = new Controller({
    name: 'requeue-priority', registry: new Registry(), clock, priorityQueue,
    reconciler: ({ name }) => {
      seen.push(name);
      if (name === 'x') return new Promise<void>((r) => (release = r));
      if (name === 'a' && seen.length === 1) return first instanceof Error ? Promise.reject(first) : Promise.resolve(first);
      return Promise.resolve();
    },
  });
  const ac = new AbortController();
  const started = ctl.start(ac.signal);
  const settle = async (): Promise<void> => { for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r)); };
  ctl.enqueue('ns/a', initial);
  await settle();
  ctl.enqueue('ns/x');
  await settle();
  clock.step(10); // the requeue of 'a' (requeueAfter 10 ms, or the first 5 ms backoff step) falls due: queued now
  ctl.enqueue('ns/b');
  release();
  await settle();
  ac.abort();
  await started;
  assert.deepEqual(seen.slice(0, 2), ['a', 'x']);
  return seen.slice(2);
}

describe('priority in the reconcile result (controller-runtime Result.Priority)', () => {
  it('requeueAfter is queued at result.priority; without one it keeps the priority the key was handed out with', async () => {
    assert.deepEqual(await afterRequeue({ requeueAfter: 10, priority: PriorityLow }, PriorityNormal), ['b', 'a']);
    assert.deepEqual(await afterRequeue({ requeueAfter: 10 }, PriorityNormal), ['a', 'b']);
    assert.deepEqual(await afterRequeue({ requeueAfter: 10 }, PriorityLow), ['b', 'a']);
    assert.deepEqual(await afterRequeue({ requeueAfter: 10, priority: PriorityNormal }, PriorityLow), ['a', 'b']);
  });

  it('requeue: true is queued at result.priority', async () => {
    assert.deepEqual(await afterRequeue({ requeue: true, priority: PriorityLow }, PriorityNormal), ['b', 'a']);
    assert.deepEqual(await afterRequeue({ requeue: true }, PriorityNormal), ['a', 'b']);
    assert.deepEqual(await afterRequeue({ requeue: true, priority: PriorityNormal }, PriorityLow), ['a', 'b']);
  });

  it('an error requeue keeps the priority the key was handed out with (a thrown error carries no Result)', async () => {
    assert.deepEqual(await afterRequeue(new Error('boom'), PriorityLow), ['b', 'a']);
    assert.deepEqual(await afterRequeue(new Error('boom'), PriorityNormal), ['a', 'b']);
  });

  it('an error requeue takes the priority of withPriority(err, p), also deeper in the cause chain', async () => {
    assert.deepEqual(await afterRequeue(withPriority(new Error('boom'), PriorityLow), PriorityNormal), ['b', 'a']);
    assert.deepEqual(await afterRequeue(withPriority(new Error('boom'), PriorityNormal), PriorityLow), ['a', 'b']);
    assert.deepEqual(await afterRequeue(new Error('wrapped', { cause: withPriority('boom', PriorityLow) }), PriorityNormal), ['b', 'a']);
    assert.deepEqual(await afterRequeue(withPriority(new Error('boom'), PriorityLow), PriorityNormal, false), ['a', 'b'], 'ignored without the priority queue');
  });

  it('a TerminalError with a priority is still not requeued', async () => {
    assert.deepEqual(await afterRequeue(withPriority(new TerminalError('bad spec'), PriorityNormal), PriorityNormal), ['b']);
  });

  it('is ignored with the priority queue off (plain FIFO)', async () => {
    assert.deepEqual(await afterRequeue({ requeueAfter: 10, priority: PriorityLow }, PriorityNormal, false), ['a', 'b']);
  });
});
