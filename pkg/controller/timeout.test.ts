/**
 * The reconcile timeout (controller-runtime's ReconciliationTimeout): each reconcile's signal aborts with a
 * TimeoutError after `reconcileTimeoutMs` on the controller's Clock (a FakeClock here: time moves only by `step`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../util/clock.ts';
import { Controller, type Reconciler } from './controller.ts';

/** Runs every pending microtask (and I/O-free continuation) before returning. Not a time-based wait. */
async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((r) => setImmediate(r));
}

async function counter(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const data = await registry.getSingleMetric(name)?.get();
  return data?.values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))?.value;
}

function harness(reconciler: Reconciler, reconcileTimeoutMs?: number): { ctl: Controller; clock: FakeClock; registry: Registry; calls: () => number } {
  const clock = new FakeClock();
  const registry = new Registry();
  let calls = 0;
  const ctl = new Controller({
    name: 'foo', clock, registry,
    ...(reconcileTimeoutMs === undefined ? {} : { reconcileTimeoutMs }),
    reconciler: (req, signal, ctx) => {
      calls++;
      return reconciler(req, signal, ctx);
    },
  });
  void ctl.start(new AbortController().signal);
  return { ctl, clock, registry, calls: () => calls };
}

const foo = { controller: 'foo' };
const timeouts = (registry: Registry): Promise<number | undefined> => counter(registry, 'controller_runtime_reconcile_timeouts_total', foo);
const errors = (registry: Registry): Promise<number | undefined> => counter(registry, 'controller_runtime_reconcile_total', { ...foo, result: 'error' });
const successes = (registry: Registry): Promise<number | undefined> => counter(registry, 'controller_runtime_reconcile_total', { ...foo, result: 'success' });

describe('reconcile timeout', { timeout: 30_000 }, () => {
  it('aborts the signal with a TimeoutError when it elapses; the rejection is an error requeued with backoff and counted as a timeout', async () => {
    const reasons: unknown[] = [];
    const h = harness(async (_req, signal) => {
      signal.addEventListener('abort', () => reasons.push(signal.reason), { once: true });
      await h.clock.sleep(60_000, signal); // a slow call that takes the signal
    }, 100);
    h.ctl.enqueue('ns/a');
    await settle();
    assert.equal(h.calls(), 1);
    h.clock.step(99);
    await settle();
    assert.equal(reasons.length, 0, 'not aborted before the timeout');
    assert.equal(await timeouts(h.registry), 0, 'exported as 0 from start');
    h.clock.step(1);
    await settle();
    assert.equal(reasons.length, 1);
    assert.ok(reasons[0] instanceof DOMException);
    assert.equal(reasons[0].name, 'TimeoutError');
    assert.equal(await timeouts(h.registry), 1);
    assert.equal(await errors(h.registry), 1);
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 1, 'requeued through the rate limiter');
    h.clock.step(5); // the first backoff step
    await settle();
    assert.equal(h.calls(), 2, 'retried after the backoff');
    await h.ctl.stop(0);
  });

  it('a reconcile that finishes in time is not counted and leaves no timer behind', async () => {
    const h = harness(async (_req, signal) => {
      await h.clock.sleep(50, signal);
    }, 100);
    h.ctl.enqueue('ns/a');
    await settle();
    h.clock.step(50);
    await settle();
    assert.equal(await successes(h.registry), 1);
    assert.equal(h.clock.pendingTimers(), 0, 'the timeout timer was cancelled');
    h.clock.step(1_000);
    assert.equal(await timeouts(h.registry), 0);
    await h.ctl.stop(0);
  });

  it('follows controller-runtime: a reconciler that ignores its signal keeps its worker, its own result counts, the timeout is counted', async () => {
    let finish!: () => void;
    let aborted = false;
    const h = harness(async (_req, signal) => {
      signal.addEventListener('abort', () => (aborted = true), { once: true });
      await new Promise<void>((r) => (finish = r)); // ignores the signal
    }, 100);
    h.ctl.enqueue('ns/a');
    await settle();
    h.clock.step(100);
    await settle();
    assert.ok(aborted);
    h.ctl.enqueue('ns/a');
    await settle();
    assert.equal(h.calls(), 1, 'the key is not handed out again while its reconcile still runs');
    assert.equal(h.ctl.inFlight(), 1);
    finish();
    await settle();
    assert.equal(await timeouts(h.registry), 1);
    assert.equal(await successes(h.registry), 1, 'the reconcile resolved: success');
    assert.equal(await errors(h.registry), 0);
    assert.equal(h.calls(), 2, 'the event that arrived meanwhile reconciles it again');
    finish();
    await h.ctl.stop(0);
  });

  it('shutdown aborting first is not a timeout: the signal carries the shutdown reason', async () => {
    const reasons: unknown[] = [];
    const h = harness(async (_req, signal) => {
      signal.addEventListener('abort', () => reasons.push(signal.reason), { once: true });
      await h.clock.sleep(60_000, signal);
    }, 100);
    h.ctl.enqueue('ns/a');
    await settle();
    const stopped = h.ctl.stop(Infinity);
    await settle();
    h.clock.step(100); // the timeout would elapse now
    assert.deepEqual(await stopped, { completed: true, inFlight: 0 });
    assert.equal(reasons.length, 1);
    assert.ok(reasons[0] instanceof Error);
    assert.match(reasons[0].message, /shutting down/);
    assert.equal(await timeouts(h.registry), 0);
  });

  it('is off by default (and with 0 or Infinity): the signal stays live however long the reconcile runs', async () => {
    for (const ms of [undefined, 0, Infinity]) {
      let signal: AbortSignal | undefined;
      const h = harness(async (_req, s) => {
        signal = s;
        await h.clock.sleep(365 * 24 * 3600_000, s);
      }, ms);
      assert.equal(h.ctl.reconcileTimeoutMs, undefined);
      h.ctl.enqueue('ns/a');
      await settle();
      h.clock.step(364 * 24 * 3600_000);
      await settle();
      assert.equal(signal?.aborted, false, `reconcileTimeoutMs ${String(ms)}`);
      assert.equal(await timeouts(h.registry), 0);
      await h.ctl.stop(0);
    }
  });

  it('rejects a negative or NaN timeout', () => {
    for (const ms of [-1, Number.NaN]) {
      assert.throws(() => new Controller({ name: 'x', registry: new Registry(), reconciler: () => Promise.resolve(), reconcileTimeoutMs: ms }),
        /reconcileTimeoutMs must be >= 0/);
    }
  });
});
