import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { newLogger } from '../log/logger.ts';
import { FakeClock } from '../util/clock.ts';
import type { RateLimiter } from '../workqueue/ratelimiter.ts';
import { Controller, type ControllerOptions, type Reconciler, type Result } from './controller.ts';
import { TerminalError } from './errors.ts';
import type { Request } from './request.ts';

/** Runs every pending microtask (and I/O-free continuation) before returning. Not a time-based wait. */
async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((r) => setImmediate(r));
}

async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await settle();
  return done;
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

async function metric(registry: Registry, name: string, labels: Record<string, string | number>, sample = name): Promise<number | undefined> {
  const m = registry.getSingleMetric(name);
  if (!m) return undefined;
  const data = await m.get();
  return data.values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? name) === sample &&
      Object.entries(labels).every(([k, want]) => v.labels[k] === want),
  )?.value;
}

interface Harness {
  ctl: Controller;
  clock: FakeClock;
  registry: Registry;
  calls: Request[];
  run: AbortController;
  started: Promise<void>;
}

function harness(reconciler: Reconciler, extra: Partial<ControllerOptions> = {}): Harness {
  const clock = new FakeClock();
  const registry = new Registry();
  const calls: Request[] = [];
  const ctl = new Controller({
    name: 'foo',
    clock,
    registry,
    ...extra,
    reconciler: (req, signal, ctx) => {
      calls.push(req);
      return reconciler(req, signal, ctx);
    },
  });
  const run = new AbortController();
  const started = ctl.start(run.signal);
  return { ctl, clock, registry, calls, run, started };
}

const ok: Reconciler = () => Promise.resolve();
const foo = { controller: 'foo' };

describe('Controller', { timeout: 30_000 }, () => {
  it('reconciles enqueued keys with the parsed request and counts success', async () => {
    const seen: { req: Request; id: string; key: string }[] = [];
    const h = harness((req, _signal, ctx) => {
      seen.push({ req, id: ctx.reconcileID, key: ctx.key });
      return Promise.resolve();
    });
    h.ctl.enqueue('ns1/a');
    h.ctl.enqueueRequest({ namespace: '', name: 'cluster-thing' });
    await settle();
    assert.deepEqual(
      seen.map((s) => [s.req, s.key]),
      [
        [{ namespace: 'ns1', name: 'a' }, 'ns1/a'],
        [{ namespace: '', name: 'cluster-thing' }, 'cluster-thing'],
      ],
    );
    assert.match(seen[0]?.id ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(seen[0]?.id, seen[1]?.id);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'success' }), 2);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'error' }), 0);
    await h.ctl.stop(0);
  });

  it('collapses repeated enqueues of a waiting key into one reconcile', async () => {
    const gate = deferred();
    const h = harness(() => gate.promise);
    h.ctl.enqueue('ns/block'); // occupies the single worker
    await settle();
    for (let i = 0; i < 10; i++) h.ctl.enqueue('ns/a');
    gate.resolve();
    await settle();
    assert.deepEqual(
      h.calls.map((r) => r.name),
      ['block', 'a'],
    );
    await h.ctl.stop(0);
  });

  it('N workers never reconcile the same key concurrently (many adds of few keys)', async () => {
    const running = new Map<string, number>();
    let overlaps = 0;
    let maxParallel = 0;
    let active = 0;
    let adds = 0;
    const keys = ['ns/k0', 'ns/k1', 'ns/k2', 'ns/k3'];
    const ref: { ctl?: Controller } = {};
    const h = harness(
      async (req) => {
        const key = `${req.namespace}/${req.name}`;
        const n = (running.get(key) ?? 0) + 1;
        running.set(key, n);
        if (n > 1) overlaps++;
        active++;
        maxParallel = Math.max(maxParallel, active);
        for (let i = 0; i < 3; i++) {
          // Events keep arriving for every key while reconciles are in flight.
          for (let j = 0; j < 2 && adds < 800; j++) ref.ctl?.enqueue(keys[adds++ % keys.length] as string);
          await new Promise<void>((r) => setImmediate(r));
        }
        active--;
        running.set(key, (running.get(key) ?? 1) - 1);
      },
      { maxConcurrentReconciles: 6 },
    );
    ref.ctl = h.ctl;
    for (const k of keys) h.ctl.enqueue(k);
    while (adds < 800) await settle(1);
    await settle(20);
    const r = await h.ctl.stop(Infinity);
    assert.deepEqual(r, { completed: true, inFlight: 0 });
    assert.equal(overlaps, 0, 'a key was reconciled by two workers at once');
    assert.ok(maxParallel > 1, `workers ran in parallel (max ${maxParallel})`);
    assert.ok(maxParallel <= keys.length, 'at most one reconcile per key');
    assert.ok(h.calls.length > keys.length);
  });

  it('requeues errors with per-key exponential backoff (5 ms, 10 ms, …) and counts them', async () => {
    const h = harness(() => Promise.reject(new Error('API unavailable')));
    h.ctl.enqueue('ns/a');
    await settle();
    assert.equal(h.calls.length, 1);
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 1);
    h.clock.step(4);
    await settle();
    assert.equal(h.calls.length, 1, 'not before 5 ms');
    h.clock.step(1);
    await settle();
    assert.equal(h.calls.length, 2, 'retried after 5 ms');
    h.clock.step(9);
    await settle();
    assert.equal(h.calls.length, 2, 'not before 10 ms');
    h.clock.step(1);
    await settle();
    assert.equal(h.calls.length, 3, 'retried after 10 ms');
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 3);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_errors_total', foo), 3);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'error' }), 3);
    assert.equal(await metric(h.registry, 'controller_runtime_terminal_reconcile_errors_total', foo), 0);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_panics_total', foo), 0);
    assert.equal(await metric(h.registry, 'workqueue_retries_total', { name: 'foo', controller: 'foo' }), 3);
    await h.ctl.stop(0);
  });

  it('uses a custom rate limiter and forgets the key after a success', async () => {
    const log: string[] = [];
    const rateLimiter: RateLimiter<string> = {
      when: (k) => {
        log.push(`when ${k}`);
        return 50;
      },
      forget: (k) => log.push(`forget ${k}`),
      numRequeues: () => 0,
    };
    let fail = true;
    const h = harness(() => (fail ? Promise.reject(new Error('x')) : Promise.resolve()), { rateLimiter });
    h.ctl.enqueue('ns/a');
    await settle();
    fail = false;
    h.clock.step(50);
    await settle();
    assert.deepEqual(log, ['when ns/a', 'forget ns/a']);
    assert.equal(h.calls.length, 2);
    await h.ctl.stop(0);
  });

  it('does not requeue terminal errors (direct or as cause) and forgets their backoff', async () => {
    let n = 0;
    const h = harness(() => {
      n++;
      if (n === 1) return Promise.reject(new Error('transient'));
      if (n === 2) return Promise.reject(new TerminalError('spec.cidr is invalid'));
      return Promise.reject(new Error('wrapped', { cause: new TerminalError('still terminal') }));
    });
    h.ctl.enqueue('ns/a');
    await settle();
    h.clock.step(5);
    await settle();
    assert.equal(h.calls.length, 2);
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 0, 'terminal error forgets the backoff');
    h.clock.step(10_000);
    await settle();
    assert.equal(h.calls.length, 2, 'terminal error is not retried');
    assert.equal(h.ctl.queue.len(), 0);
    h.ctl.enqueue('ns/a'); // a new event reconciles again
    await settle();
    h.clock.step(10_000);
    await settle();
    assert.equal(h.calls.length, 3);
    assert.equal(await metric(h.registry, 'controller_runtime_terminal_reconcile_errors_total', foo), 2);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_errors_total', foo), 3);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'error' }), 3);
    await h.ctl.stop(0);
  });

  it('requeueAfter forgets the backoff and reconciles again after exactly that delay', async () => {
    let n = 0;
    const h = harness((): Promise<Result | void> => {
      n++;
      if (n === 1) return Promise.reject(new Error('first fails'));
      if (n === 2) return Promise.resolve({ requeueAfter: 1000, requeue: true });
      return Promise.resolve();
    });
    h.ctl.enqueue('ns/a');
    await settle();
    h.clock.step(5);
    await settle();
    assert.equal(h.calls.length, 2);
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 0, 'requeueAfter forgets');
    h.clock.step(999);
    await settle();
    assert.equal(h.calls.length, 2);
    h.clock.step(1);
    await settle();
    assert.equal(h.calls.length, 3);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'requeue_after' }), 1);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'requeue' }), 0);
    await h.ctl.stop(0);
  });

  it('requeue: true goes through the rate limiter and is counted as requeue', async () => {
    let n = 0;
    const h = harness((): Promise<Result> => Promise.resolve(++n < 3 ? { requeue: true } : {}));
    h.ctl.enqueue('ns/a');
    await settle();
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 1);
    h.clock.step(5);
    await settle();
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 2);
    h.clock.step(10);
    await settle();
    assert.equal(h.calls.length, 3);
    assert.equal(h.ctl.queue.numRequeues('ns/a'), 0, 'success forgets');
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'requeue' }), 2);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'success' }), 1);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_errors_total', foo), 0);
    await h.ctl.stop(0);
  });

  it('a single worker survives non-Error throws, sync throws and TypeErrors; panics are counted', async () => {
    const h = harness(
      (req: Request): Promise<void> => {
        switch (req.name) {
          case 'string':
            return Promise.reject('just a string'); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- the point of the test
          case 'sync':
            throw new Error('thrown before any await');
          case 'undef': {
            const o = undefined as unknown as { x: { y: number } };
            return Promise.resolve(void o.x.y); // TypeError: a programming fault
          }
          case 'sync-nonerror':
            throw 42; // eslint-disable-line @typescript-eslint/only-throw-error -- the point of the test
          default:
            return Promise.resolve();
        }
      },
      { maxConcurrentReconciles: 1 },
    );
    for (const k of ['ns/string', 'ns/sync', 'ns/undef', 'ns/sync-nonerror', 'ns/fine']) h.ctl.enqueue(k);
    await settle(10);
    assert.deepEqual(
      h.calls.map((r) => r.name),
      ['string', 'sync', 'undef', 'sync-nonerror', 'fine'],
    );
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_panics_total', foo), 3);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_errors_total', foo), 4);
    assert.equal(await metric(h.registry, 'controller_runtime_reconcile_total', { ...foo, result: 'success' }), 1);
    for (const k of ['ns/string', 'ns/sync', 'ns/undef', 'ns/sync-nonerror']) {
      assert.equal(h.ctl.queue.numRequeues(k), 1, `${k} requeued with backoff`);
    }
    await h.ctl.stop(0);
  });

  it('drops malformed keys as terminal errors without calling the reconciler', async () => {
    const h = harness(ok);
    h.ctl.enqueue('a/b/c');
    await settle();
    h.clock.step(10_000);
    await settle();
    assert.equal(h.calls.length, 0);
    assert.equal(await metric(h.registry, 'controller_runtime_terminal_reconcile_errors_total', foo), 1);
    await h.ctl.stop(0);
  });

  it('exports max_concurrent_reconciles, active_workers and reconcile_time with the controller label', async () => {
    const gate = deferred();
    const h = harness(() => gate.promise, { maxConcurrentReconciles: 3 });
    assert.equal(await metric(h.registry, 'controller_runtime_max_concurrent_reconciles', foo), 3);
    assert.equal(await metric(h.registry, 'controller_runtime_active_workers', foo), 0);
    h.ctl.enqueue('ns/a');
    h.ctl.enqueue('ns/b');
    await settle();
    assert.equal(await metric(h.registry, 'controller_runtime_active_workers', foo), 2);
    assert.equal(h.ctl.inFlight(), 2);
    h.clock.step(250);
    gate.resolve();
    await settle();
    assert.equal(await metric(h.registry, 'controller_runtime_active_workers', foo), 0);
    const t = 'controller_runtime_reconcile_time_seconds';
    assert.equal(await metric(h.registry, t, foo, `${t}_count`), 2);
    assert.equal(await metric(h.registry, t, foo, `${t}_sum`), 0.5);
    assert.equal(await metric(h.registry, t, { ...foo, le: 0.2 }, `${t}_bucket`), 0);
    assert.equal(await metric(h.registry, t, { ...foo, le: 0.25 }, `${t}_bucket`), 2);
    await h.ctl.stop(0);
  });

  it('logs each reconcile with controller, namespace, name and reconcileID; errors at error level', async () => {
    const lines: Record<string, unknown>[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    const logger = newLogger({ level: 'debug', destination });
    const h = harness(
      (_req, _signal, ctx) => {
        ctx.log.info({ step: 'custom' }, 'from reconciler');
        return Promise.reject(new Error('nope'));
      },
      { logger },
    );
    h.ctl.enqueue('ns1/a');
    await settle();
    const userLogged = lines.find((l) => l.msg === 'from reconciler');
    const errLine = lines.find((l) => l.msg === 'Reconciler error');
    assert.ok(userLogged && errLine, JSON.stringify(lines));
    for (const l of [userLogged, errLine]) {
      assert.equal(l.controller, 'foo');
      assert.equal(l.namespace, 'ns1');
      assert.equal(l.name, 'a');
      assert.match(String(l.reconcileID), /^[0-9a-f-]{36}$/);
    }
    assert.equal(userLogged.reconcileID, errLine.reconcileID);
    assert.equal(errLine.level, 'error');
    assert.equal((errLine.err as { message?: string }).message, 'nope');
    await h.ctl.stop(0);
  });

  describe('shutdown', () => {
    it('stop waits for in-flight reconciles, hands out no more keys, and start then resolves', async () => {
      const gate = deferred();
      let signalSeen: AbortSignal | undefined;
      const h = harness((_req, signal) => {
        signalSeen = signal;
        return gate.promise;
      });
      h.ctl.enqueue('ns/a');
      h.ctl.enqueue('ns/b'); // queued behind "a" on the single worker
      await settle();
      const stopping = h.ctl.stop(30_000);
      assert.equal(signalSeen?.aborted, true, 'the reconcile signal aborts when shutdown starts (as controller-runtime cancels the reconcile context)');
      assert.equal(await isSettled(stopping), false, 'waits for the in-flight reconcile');
      assert.equal(await isSettled(h.started), false);
      h.ctl.enqueue('ns/c'); // ignored while shutting down
      gate.resolve();
      assert.deepEqual(await stopping, { completed: true, inFlight: 0 });
      await h.started;
      assert.deepEqual(
        h.calls.map((r) => r.name),
        ['a'],
        'no key handed out after shutdown began',
      );
      assert.equal(h.clock.pendingTimers(), 0, 'the timeout timer was cancelled');
    });

    it('stop aborts the reconciles’ signal at once and reports a timeout with the in-flight count', async () => {
      const signals: AbortSignal[] = [];
      const h = harness(
        (_req, signal) => {
          signals.push(signal);
          return new Promise<void>(() => {}); // ignores its signal: never finishes
        },
        { maxConcurrentReconciles: 2 },
      );
      h.ctl.enqueue('ns/a');
      h.ctl.enqueue('ns/b');
      await settle();
      const stopping = h.ctl.stop(1000);
      assert.ok(signals.every((s) => s.aborted), 'aborted when shutdown starts');
      h.clock.step(999);
      assert.equal(await isSettled(stopping), false);
      h.clock.step(1);
      assert.deepEqual(await stopping, { completed: false, inFlight: 2 });
      assert.equal(signals.length, 2);
      assert.ok(signals.every((s) => s.aborted));
      assert.equal(await isSettled(h.started), true, 'start resolves, abandoning the stuck reconciles');
    });

    it('aborting the start signal drains in-flight reconciles and then start resolves', async () => {
      const gate = deferred();
      const h = harness(() => gate.promise);
      h.ctl.enqueue('ns/a');
      h.ctl.enqueue('ns/b');
      await settle();
      h.run.abort();
      assert.equal(await isSettled(h.started), false);
      gate.resolve();
      await h.started;
      assert.deepEqual(
        h.calls.map((r) => r.name),
        ['a'],
      );
    });

    it('aborting the start signal aborts the reconciles’ signal at once: a cooperative reconcile returns without waiting for the timeout', async () => {
      // Issue 11 item 12: the signal used to fire only at the graceful deadline.
      let reconcileSignal: AbortSignal | undefined;
      const h = harness(
        (_req, signal) => {
          reconcileSignal = signal;
          // Cooperative reconcile: gives up when its signal aborts.
          return new Promise<void>((_res, rej) => signal.addEventListener('abort', () => rej(signal.reason as Error)));
        },
        { gracefulShutdownTimeoutMs: 5000 },
      );
      h.ctl.enqueue('ns/a');
      await settle();
      h.run.abort();
      assert.equal(reconcileSignal?.aborted, true);
      await h.started; // no clock step: did not wait for the graceful timeout
      assert.equal(h.ctl.inFlight(), 0);
    });

    it('start on an already-aborted signal returns without reconciling; a second start rejects', async () => {
      const registry = new Registry();
      const calls: string[] = [];
      const ctl = new Controller({
        name: 'bar',
        registry,
        clock: new FakeClock(),
        reconciler: (req) => {
          calls.push(req.name);
          return Promise.resolve();
        },
      });
      ctl.enqueue('ns/a');
      await ctl.start(AbortSignal.abort());
      assert.deepEqual(calls, []);
      await assert.rejects(ctl.start(new AbortController().signal), /already started/);
    });

    it('stop before start completes at once', async () => {
      const ctl = new Controller({ name: 'idle', registry: new Registry(), clock: new FakeClock(), reconciler: ok });
      assert.deepEqual(await ctl.stop(1000), { completed: true, inFlight: 0 });
    });
  });

  it('supports a custom request type through a codec', async () => {
    interface NodeReq {
      node: string;
    }
    const seen: NodeReq[] = [];
    const ctl = new Controller<NodeReq>({
      name: 'nodes',
      registry: new Registry(),
      clock: new FakeClock(),
      codec: { key: (r) => r.node, parse: (k) => ({ node: k }) },
      reconciler: (req) => {
        seen.push(req);
        return Promise.resolve();
      },
    });
    const run = ctl.start(new AbortController().signal);
    ctl.enqueueRequest({ node: 'n1' });
    await settle();
    assert.deepEqual(seen, [{ node: 'n1' }]);
    await ctl.stop(0);
    await run;
  });

  it('rejects invalid options', () => {
    assert.throws(() => new Controller({ name: '', reconciler: ok }), /name is required/);
    assert.throws(
      () => new Controller({ name: 'x', reconciler: ok, maxConcurrentReconciles: 0, registry: new Registry() }),
      /positive integer/,
    );
  });
});
