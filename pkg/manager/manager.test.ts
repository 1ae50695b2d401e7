import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { FakeClock } from '../util/clock.ts';
import type { ElectionResult, LeaderCallbacks, LeaderElection } from './leaderelection.ts';
import { Manager, installSignalHandlers, type ManagerOptions } from './manager.ts';
import type { Runnable } from './runnable.ts';

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Unit-test fake runnable: logs start/abort/stop; stops on abort at once, or only when `finish()` is called. */
class FakeRunnable implements Runnable {
  readonly name: string;
  readonly needLeaderElection: boolean;
  private readonly log: string[];
  private readonly manualStop: boolean;
  started = false;
  /** Resolve on abort but report abandoned work still running (a controller past its own graceful timeout). */
  abandonedWork = false;
  private resolve: () => void = () => {};
  private reject: (err: Error) => void = () => {};

  constructor(log: string[], name: string, needLeaderElection: boolean, opts: { manualStop?: boolean } = {}) {
    this.log = log;
    this.name = name;
    this.needLeaderElection = needLeaderElection;
    this.manualStop = opts.manualStop ?? false;
  }

  stillRunning(): boolean {
    return this.abandonedWork;
  }

  start(signal: AbortSignal): Promise<void> {
    this.started = true;
    this.log.push(`start:${this.name}`);
    return new Promise((resolve, reject) => {
      this.resolve = () => {
        this.log.push(`stop:${this.name}`);
        resolve();
      };
      const onAbort = (): void => {
        this.log.push(`abort:${this.name}`);
        if (!this.manualStop) this.resolve();
      };
      this.reject = (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Completes a manual stop (in-flight work finished). */
  finish(): void {
    this.resolve();
  }

  fail(err: Error): void {
    this.reject(err);
  }
}

/** Unit-test fake of LeaderElection: the test decides when we lead or lose; abort while leading logs a release. */
class FakeElection implements LeaderElection {
  readonly name = 'lock';
  private readonly log: string[];
  private leading = false;
  private callbacks: LeaderCallbacks = {};
  private settle: (r: ElectionResult) => void = () => {};
  /** The current term's leadership signal (as the real elector: aborted at loss and before a release). */
  readonly term = new AbortController();

  constructor(log: string[]) {
    this.log = log;
  }

  run(signal: AbortSignal, callbacks: LeaderCallbacks = {}): Promise<ElectionResult> {
    this.callbacks = callbacks;
    this.log.push('campaign');
    return new Promise((resolve) => {
      this.settle = resolve;
      signal.addEventListener('abort', () => {
        if (this.leading) {
          if (this.callbacks.mayRelease?.() ?? true) this.log.push('release');
          else this.log.push('no-release');
        }
        this.leading = false;
        this.term.abort(new Error('stopped'));
        resolve('stopped');
      }, { once: true });
    });
  }

  isLeader(): boolean {
    return this.leading;
  }

  lead(): void {
    this.leading = true;
    this.callbacks.onStartedLeading?.(this.term.signal);
  }

  /** Leadership ends (deadline passed or another holder seen): the signal aborts at once; `run` resolves later. */
  lose(opts: { resolveRun?: boolean } = {}): void {
    this.leading = false;
    this.log.push('lost');
    this.term.abort(new Error('leadership lost'));
    if (opts.resolveRun ?? true) this.settle('lost');
  }
}

function deferred(): { promise: Promise<boolean>; resolve: (v: boolean) => void } {
  let resolve!: (v: boolean) => void;
  const promise = new Promise<boolean>((r) => (resolve = r));
  return { promise, resolve };
}

function setup(opts: Partial<ManagerOptions> & { manualStopController?: boolean } = {}) {
  const log: string[] = [];
  const clock = new FakeClock();
  const election = new FakeElection(log);
  const sync = deferred();
  const mgr = new Manager({
    leaderElection: election,
    waitForCacheSync: () => {
      log.push('wait-sync');
      return sync.promise;
    },
    gracefulShutdownTimeoutMs: 30_000,
    clock,
    ...opts,
  });
  const informer = new FakeRunnable(log, 'informer', false);
  const server = new FakeRunnable(log, 'server', false);
  const controller = new FakeRunnable(log, 'controller', true, { manualStop: opts.manualStopController });
  mgr.add(informer);
  mgr.add(controller);
  mgr.add(server);
  const ac = new AbortController();
  let exitCode: number | undefined;
  const done = mgr.start(ac.signal).then((c) => (exitCode = c));
  /** This replica leads and its caches are synced (the common start of a test about what follows). */
  const leadAndSync = async (): Promise<void> => {
    election.lead();
    sync.resolve(true);
    await settle();
  };
  return { log, clock, election, sync, mgr, informer, server, controller, ac, done, code: () => exitCode, leadAndSync };
}

test('controllers start only after leading AND cache sync; others start at once', async () => {
  const t = setup();
  await settle();
  assert.deepEqual(t.log, ['start:informer', 'start:server', 'campaign', 'wait-sync']);
  t.election.lead();
  await settle();
  assert.equal(t.controller.started, false, 'leading but caches not synced');
  t.sync.resolve(true);
  await settle();
  assert.equal(t.controller.started, true);
  assert.equal(t.mgr.controllersStarted(), true);
  t.ac.abort();
  assert.equal(await t.done, 0);
});

test('cache sync first, then leadership', async () => {
  const t = setup();
  t.sync.resolve(true);
  await settle();
  assert.equal(t.controller.started, false, 'synced but not leading');
  t.election.lead();
  await settle();
  assert.equal(t.controller.started, true);
  t.ac.abort();
  await t.done;
});

test('without leader election controllers start right after cache sync', async () => {
  const t = setup({ leaderElection: undefined });
  await settle();
  assert.equal(t.controller.started, false);
  t.sync.resolve(true);
  await settle();
  assert.equal(t.controller.started, true);
  assert.ok(!t.log.includes('campaign'));
  t.ac.abort();
  assert.equal(await t.done, 0);
});

test('graceful shutdown order: controllers drain, then the lease is released, then the rest stop', async () => {
  const t = setup({ manualStopController: true });
  await t.leadAndSync();
  t.log.length = 0;
  t.ac.abort();
  await settle();
  assert.deepEqual(t.log, ['abort:controller'], 'waits for in-flight reconciles before anything else');
  t.controller.finish();
  await settle();
  assert.deepEqual(t.log, ['abort:controller', 'stop:controller', 'release', 'abort:informer', 'stop:informer', 'abort:server', 'stop:server']);
  assert.equal(t.code(), 0);
});

test('graceful shutdown timeout: stuck controllers are reported, the lease is NOT released (ReleaseOnCancel), exit code 1', async () => {
  // Issue 11 item 2: releasing while abandoned reconciles still run would let a standby lead next to them.
  const t = setup({ manualStopController: true, gracefulShutdownTimeoutMs: 5_000 });
  await t.leadAndSync();
  t.ac.abort();
  await settle();
  t.clock.step(4_999);
  await settle();
  assert.ok(!t.log.includes('release'));
  t.clock.step(1);
  await settle();
  assert.ok(!t.log.includes('release'), 'not released while the controller still runs');
  assert.ok(t.log.includes('no-release'));
  assert.ok(t.log.includes('stop:server'));
  assert.equal(t.election.term.signal.aborted, true, 'leadership ended: guarded writes are refused from now on');
  assert.equal(t.code(), 1);
});

test('a controller that resolves but abandoned reconciles still running (its own graceful timeout) is not stopped: no release, exit 1', async () => {
  // The race CI met: the controller's own timer (same timeout) fired first, it resolved, and the Manager released
  // the lease and exited 0 while the abandoned reconciles still ran. `stillRunning()` (Runnable contract) closes it.
  const t = setup({ gracefulShutdownTimeoutMs: 5_000 });
  await t.leadAndSync();
  t.controller.abandonedWork = true;
  t.ac.abort();
  await settle();
  assert.ok(t.log.includes('stop:controller'), 'the controller resolved at once');
  t.clock.step(5_000);
  await settle();
  assert.ok(!t.log.includes('release'), 'not released while abandoned reconciles run');
  assert.ok(t.log.includes('no-release'));
  assert.equal(t.code(), 1);
});

test('the lease lost during a graceful shutdown: exit 1 at once, no release (issue 11 item 3)', async () => {
  const t = setup({ manualStopController: true });
  await t.leadAndSync();
  t.ac.abort();
  await settle();
  assert.equal(t.code(), undefined, 'waiting for the in-flight reconciles');
  t.election.lose({ resolveRun: false });
  await settle();
  assert.equal(t.code(), 1, 'resolves without waiting for the graceful timeout');
  assert.ok(!t.log.includes('release'));
  assert.ok(t.log.includes('abort:informer'));
});

test('the leadership signal aborting is a loss even before the campaign returns', async () => {
  const t = setup({ manualStopController: true });
  await t.leadAndSync();
  t.log.length = 0;
  t.election.lose({ resolveRun: false });
  await settle();
  assert.equal(t.code(), 1);
  assert.ok(t.log.includes('abort:controller'));
  assert.ok(!t.log.includes('release'));
});

test('guarded writes are flushed after controllers stop and before the release; the flush is bounded', async () => {
  const order: string[] = [];
  let flushSignal: AbortSignal | undefined;
  const t = setup({
    manualStopController: true, gracefulShutdownTimeoutMs: 5_000,
    afterGatedStopped: (signal) => {
      flushSignal = signal;
      order.push('flush');
      return new Promise(() => {}); // never finishes on its own (e.g. Events to an unreachable API server)
    },
  });
  await t.leadAndSync();
  t.log.length = 0;
  t.ac.abort();
  await settle();
  assert.deepEqual(order, []);
  t.controller.finish();
  await settle();
  assert.deepEqual(order, ['flush']);
  assert.ok(!t.log.includes('release'));
  t.clock.step(5_000);
  await settle();
  assert.equal(flushSignal?.aborted, true, 'told to abandon at the graceful deadline');
  t.clock.step(1_000);
  await settle();
  assert.ok(t.log.includes('no-release'), 'a flush that did not stop keeps the lease unreleased');
  assert.ok(t.log.includes('stop:server'));
  assert.equal(t.code(), 1);
});

test('hanging Event writes never hold the Lease: the flush is abandoned at its deadline, released before the graceful deadline, exit 0', async () => {
  // Issue 23: the flush waits on writes that never answer and ignore their abort (RestClient never cuts a write); the
  // broadcaster resolves its flush when told to abandon. The release must still come within the graceful timeout.
  let flushSignal: AbortSignal | undefined;
  const t = setup({
    gracefulShutdownTimeoutMs: 10_000, releaseGraceMs: 5_000,
    afterGatedStopped: (signal) => {
      flushSignal = signal;
      t.log.push('flush');
      return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    },
  });
  await t.leadAndSync();
  t.log.length = 0;
  t.ac.abort();
  await settle();
  assert.deepEqual(t.log.slice(0, 3), ['abort:controller', 'stop:controller', 'flush']);
  t.clock.step(4_999);
  await settle();
  assert.equal(flushSignal?.aborted, false, 'the flush gets the time before the release share');
  assert.ok(!t.log.includes('release'));
  t.clock.step(1);
  await settle();
  assert.equal(flushSignal?.aborted, true, 'abandoned at graceful timeout − min(releaseGraceMs, timeout/2)');
  assert.ok(t.log.includes('release'), 'released at 5 s, within the 10 s graceful timeout');
  assert.equal(t.code(), 0, 'abandoning best-effort Events is not a failure');
});

test('a flush that completes runs between the controllers stopping and the release', async () => {
  const t = setup({ afterGatedStopped: () => {
    t.log.push('flush');
    return Promise.resolve();
  } });
  await t.leadAndSync();
  t.log.length = 0;
  t.ac.abort();
  await settle();
  assert.deepEqual(t.log.slice(0, 4), ['abort:controller', 'stop:controller', 'flush', 'release']);
  assert.equal(t.code(), 0);
});

test('cache sync timeout (counted from leading): fatal, the error names the caches not synced (issue 11 item 5)', async () => {
  const t = setup({ cacheSyncTimeoutMs: 120_000, unsyncedCaches: () => ['samplecontroller.k8s.io/v1alpha1/foos'] });
  await settle();
  t.clock.step(200_000);
  await settle();
  assert.equal(t.code(), undefined, 'a standby waits as long as it takes');
  t.election.lead();
  await settle();
  t.clock.step(119_999);
  await settle();
  assert.equal(t.code(), undefined);
  t.clock.step(1);
  await settle();
  assert.equal(t.code(), 1);
  assert.equal(t.controller.started, false);
  assert.match(t.mgr.failure()?.message ?? '', /timed out waiting for cache sync after 2m0s.*samplecontroller\.k8s\.io\/v1alpha1\/foos/);
});



test('losing the lease stops controllers at once and exits non-zero without releasing', async () => {
  const t = setup({ manualStopController: true });
  await t.leadAndSync();
  t.log.length = 0;
  t.election.lose();
  await settle();
  assert.equal(t.code(), 1, 'resolves without waiting for in-flight work');
  assert.ok(t.log.includes('abort:controller'));
  assert.ok(!t.log.includes('release'));
  assert.ok(t.log.includes('abort:informer'));
});

test('a failing runnable triggers an ordered shutdown with exit code 1', async () => {
  const t = setup();
  await t.leadAndSync();
  t.log.length = 0;
  t.informer.fail(new Error('watch broke for good'));
  await settle();
  assert.deepEqual(t.log, ['abort:controller', 'stop:controller', 'release', 'abort:server', 'stop:server']);
  assert.equal(t.code(), 1);
});

test('cache sync giving up is fatal; controllers never start', async () => {
  const t = setup();
  t.election.lead();
  t.sync.resolve(false);
  await settle();
  assert.equal(t.controller.started, false);
  assert.equal(t.code(), 1);
  assert.ok(t.log.includes('release'));
});

test('signal before leadership: controllers never start, exit 0', async () => {
  const t = setup();
  await settle();
  t.ac.abort();
  await settle();
  assert.equal(t.code(), 0);
  assert.equal(t.controller.started, false);
  await t.leadAndSync();
  assert.equal(t.controller.started, false);
});

test('runnables added after start join their group; duplicates and late adds are rejected', async () => {
  const t = setup();
  await settle();
  const late = new FakeRunnable(t.log, 'late-controller', true);
  const lateInformer = new FakeRunnable(t.log, 'late-informer', false);
  t.mgr.add(late);
  t.mgr.add(lateInformer);
  await settle();
  assert.equal(lateInformer.started, true);
  assert.equal(late.started, false);
  await t.leadAndSync();
  assert.equal(late.started, true);
  const after = new FakeRunnable(t.log, 'after-gate', true);
  t.mgr.add(after);
  await settle();
  assert.equal(after.started, true);
  assert.throws(() => t.mgr.add(new FakeRunnable(t.log, 'informer', false)), /already added/);
  t.ac.abort();
  await t.done;
  assert.throws(() => t.mgr.add(new FakeRunnable(t.log, 'x', false)), /shutting down/);
});

test('first signal aborts gracefully, second exits 1 at once', () => {
  const proc = Object.assign(new EventEmitter(), { exits: [] as number[], exit(code: number) { this.exits.push(code); } });
  const { signal, dispose } = installSignalHandlers(proc);
  assert.equal(signal.aborted, false);
  proc.emit('SIGTERM', 'SIGTERM');
  assert.equal(signal.aborted, true);
  assert.deepEqual(proc.exits, []);
  proc.emit('SIGINT', 'SIGINT');
  assert.deepEqual(proc.exits, [1]);
  dispose();
  assert.equal(proc.listenerCount('SIGTERM'), 0);
  assert.equal(proc.listenerCount('SIGINT'), 0);
});
