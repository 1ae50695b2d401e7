import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { Readable } from 'node:stream';
import { ApiError, type RawResponse, type RequestOptions } from '../client/rest.ts';
import { FakeClock } from '../util/clock.ts';
import { isReleased, LeaderElector, RestLeaseClient, microTime, type Lease, type LeaseClient, type LeaderElectorOptions } from './leaderelection.ts';

/**
 * Unit-test fake: an in-memory Lease store with resourceVersion checks and failure injection. Every call resolves
 * through microtasks only, so `settle()` (a few macrotask turns) is enough to let an elector finish its I/O.
 */
class FakeLeaseStore {
  lease: Lease | undefined;
  private rv = 0;
  /** Callers (by identity tag) whose calls fail with a 500, e.g. a partitioned replica. */
  readonly down = new Set<string>();
  /** Callers whose calls get no answer at the connection level (ECONNRESET): a network cut. */
  readonly cut = new Set<string>();
  /** Listeners of LeaseClient.onServerAnswer (clients made with `answers`). */
  private readonly answerListeners = new Set<() => void>();
  /** Callers whose calls never answer until their signal aborts. */
  readonly hang = new Set<string>();
  /** Callers whose calls never answer at all (ignore their signal): a wedged client. */
  readonly wedged = new Set<string>();
  /** Callers whose calls take this long on the given clock (the store changes when the answer is sent). */
  readonly latency = new Map<string, { clock: FakeClock; ms: number }>();
  calls = 0;
  /** Callers whose Lease watch sessions fail at once (watch clients only). */
  readonly watchDown = new Set<string>();
  /** Watch sessions started, and the ones running now (each gets every change of the stored Lease). */
  watchSessions = 0;
  private readonly watchers = new Set<(lease: Lease | undefined) => void>();

  get activeWatches(): number {
    return this.watchers.size;
  }

  /**
   * A LeaseClient of the caller `tag`; with `watch`, it has `watchReleases` as RestLeaseClient's contract says: the
   * current state first, then every change (put/create/update/remove) until the signal aborts.
   */
  client(tag: string, opts: { watch?: boolean; answers?: boolean } = {}): LeaseClient {
    const call = <T>(fn: () => T, signal?: AbortSignal): Promise<T> => {
      this.calls++;
      if (this.wedged.has(tag)) return new Promise(() => {});
      const slow = this.latency.get(tag);
      if (slow) {
        return new Promise<T>((resolve, reject) => {
          const timer = slow.clock.setTimer(slow.ms, () => {
            try {
              resolve(fn());
            } catch (err) {
              reject(err instanceof Error ? err : new Error(String(err)));
            }
          });
          signal?.addEventListener('abort', () => {
            timer.cancel();
            reject(signal.reason as Error);
          }, { once: true });
        });
      }
      if (this.hang.has(tag)) {
        return new Promise((_, reject) => {
          signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        });
      }
      if (this.down.has(tag)) return Promise.reject(new ApiError(500, 'InternalError', 'unavailable', undefined));
      if (this.cut.has(tag)) return Promise.reject(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
      try {
        return Promise.resolve(fn());
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    };
    const watchReleases = (onRelease: () => void, signal: AbortSignal): Promise<void> => {
      this.watchSessions++;
      if (this.watchDown.has(tag)) return Promise.reject(new ApiError(500, 'InternalError', 'watch unavailable', undefined));
      return new Promise<void>((resolve) => {
        if (isReleased(this.lease)) onRelease();
        const watcher = (lease: Lease | undefined): void => {
          if (isReleased(lease)) onRelease();
        };
        this.watchers.add(watcher);
        signal.addEventListener('abort', () => {
          this.watchers.delete(watcher);
          resolve();
        }, { once: true });
      });
    };
    return {
      description: 'ns/lock',
      ...(opts.watch ? { watchReleases } : {}),
      ...(opts.answers ? { onServerAnswer: (l: () => void) => (this.answerListeners.add(l), () => void this.answerListeners.delete(l)) } : {}),
      get: (signal) => call(() => (this.lease ? structuredClone(this.lease) : undefined), signal),
      create: (lease, signal) =>
        call(() => {
          if (this.lease) throw new ApiError(409, 'AlreadyExists', 'exists', undefined);
          this.lease = { ...structuredClone(lease), metadata: { name: 'lock', namespace: 'ns', resourceVersion: String(++this.rv) } };
          this.notify();
          return structuredClone(this.lease);
        }, signal),
      update: (lease, signal) =>
        call(() => {
          if (!this.lease) throw new ApiError(404, 'NotFound', 'gone', undefined);
          if (lease.metadata.resourceVersion !== this.lease.metadata.resourceVersion) {
            throw new ApiError(409, 'Conflict', 'the object has been modified', undefined);
          }
          this.lease = { ...structuredClone(lease), metadata: { ...lease.metadata, resourceVersion: String(++this.rv) } };
          this.notify();
          return structuredClone(this.lease);
        }, signal),
    };
  }

  /** The API server answered some request of the process (another informer's, say): RestClient.reachability's event. */
  serverAnswered(): void {
    for (const l of [...this.answerListeners]) l();
  }

  /** Writes a record as another process would. */
  put(spec: Lease['spec']): void {
    this.lease = { metadata: { name: 'lock', namespace: 'ns', resourceVersion: String(++this.rv) }, spec };
    this.notify();
  }

  /** Deletes the Lease as another process (or an operator) would. */
  remove(): void {
    this.lease = undefined;
    this.notify();
  }

  private notify(): void {
    const lease = this.lease && structuredClone(this.lease);
    for (const w of [...this.watchers]) w(lease);
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Advances the fake clock in small steps, letting async work register its timers between steps. */
async function advance(clock: FakeClock, ms: number, step = 100, check?: () => void): Promise<void> {
  await settle();
  for (let done = 0; done < ms; done += step) {
    clock.step(Math.min(step, ms - done));
    await settle();
    check?.();
  }
}

interface Harness {
  elector: LeaderElector;
  events: string[];
  ac: AbortController;
  result: Promise<string>;
  registry: Registry;
  /** The leadership signal handed to onStartedLeading (undefined until leading). */
  leadership: () => AbortSignal | undefined;
}

function start(store: FakeLeaseStore, clock: FakeClock, tag: string, extra: Partial<LeaderElectorOptions> = {}, mayRelease?: () => boolean): Harness {
  const registry = new Registry();
  let wall = Date.parse('2030-01-01T00:00:00Z');
  const elector = new LeaderElector({
    lock: store.client(tag),
    name: 'lock',
    identity: tag,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    clock,
    wallClock: () => new Date((wall += 1000)),
    random: () => 0,
    registry,
    ...extra,
  });
  const events: string[] = [];
  const ac = new AbortController();
  let leadership: AbortSignal | undefined;
  const result = elector.run(ac.signal, {
    onStartedLeading: (signal) => {
      leadership = signal;
      events.push('started');
    },
    onStoppedLeading: () => events.push('stopped'),
    onNewLeader: (id) => events.push(`leader:${id}`),
    ...(mayRelease ? { mayRelease } : {}),
  });
  return { elector, events, ac, result, registry, leadership: () => leadership };
}

async function gauge(registry: Registry): Promise<number | undefined> {
  const m = await registry.getSingleMetric('leader_election_master_status')?.get();
  return m?.values.find((v) => v.labels.name === 'lock')?.value;
}

test('acquires a free (absent) lease at once', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  assert.equal(a.elector.isLeader(), true);
  assert.deepEqual(a.events, ['leader:a', 'started']);
  assert.equal(store.lease?.spec?.holderIdentity, 'a');
  assert.equal(store.lease?.spec?.leaseDurationSeconds, 15);
  assert.equal(store.lease?.spec?.leaseTransitions, 0);
  assert.equal(await gauge(a.registry), 1);
  a.ac.abort();
  assert.equal(await a.result, 'stopped');
  assert.equal(await gauge(a.registry), 0);
});

test('acquires a released lease (empty holder) at once', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.put({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 3, renewTime: microTime(new Date()) });
  const a = start(store, clock, 'a');
  await settle();
  assert.equal(a.elector.isLeader(), true);
  assert.equal(store.lease?.spec?.leaseTransitions, 4);
  a.ac.abort();
  await a.result;
});

test('does not acquire a lease held by another holder that keeps renewing', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2030-01-01T00:00:00.000000Z', leaseTransitions: 0 });
  const b = start(store, clock, 'b');
  for (let i = 0; i < 20; i++) {
    await advance(clock, 5_000);
    // The other holder renews: the record changes, so b's observation restarts.
    store.put({ ...store.lease?.spec, renewTime: `2030-01-01T00:00:${String(i + 10).padStart(2, '0')}.000000Z` });
    assert.equal(b.elector.isLeader(), false, `iteration ${i}`);
  }
  assert.equal(store.lease?.spec?.holderIdentity, 'other');
  assert.deepEqual(b.events, ['leader:other']);
  assert.equal(await gauge(b.registry), 0);
  b.ac.abort();
  assert.equal(await b.result, 'stopped');
  assert.deepEqual(b.events, ['leader:other'], 'no stopped callback when never leading');
});

test('takes over after leaseDuration of LOCAL time since the record last changed, even if renewTime is in the future', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2999-01-01T00:00:00.000000Z', acquireTime: '2999-01-01T00:00:00.000000Z', leaseTransitions: 7 });
  const b = start(store, clock, 'b');
  const t0 = clock.now();
  await settle();
  assert.equal(b.elector.isLeader(), false);
  // Attempts happen every 2 s; the one at t0+14 s still sees a valid lease.
  await advance(clock, 14_900);
  assert.equal(b.elector.isLeader(), false, 'still valid just before leaseDuration');
  await advance(clock, 2_000);
  assert.equal(b.elector.isLeader(), true, 'expired by local time');
  assert.ok(clock.now() - t0 >= 15_000);
  assert.equal(store.lease?.spec?.holderIdentity, 'b');
  assert.equal(store.lease?.spec?.leaseTransitions, 8);
  assert.notEqual(store.lease?.spec?.acquireTime, '2999-01-01T00:00:00.000000Z');
  b.ac.abort();
  await b.result;
});

test('a past renewTime does not make a freshly observed lease look expired', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2000-01-01T00:00:00.000000Z', leaseTransitions: 0 });
  const b = start(store, clock, 'b');
  await advance(clock, 10_000);
  assert.equal(b.elector.isLeader(), false);
  b.ac.abort();
  await b.result;
});

test('renews every retry period while leading, keeping acquireTime and transitions', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  const acquired = structuredClone(store.lease?.spec);
  const renewTimes = new Set<string | undefined>([acquired?.renewTime]);
  for (let i = 0; i < 10; i++) {
    await advance(clock, 2_000);
    renewTimes.add(store.lease?.spec?.renewTime);
    assert.equal(a.elector.isLeader(), true);
  }
  assert.equal(renewTimes.size, 11, 'one renewal per retry period');
  assert.equal(store.lease?.spec?.acquireTime, acquired?.acquireTime);
  assert.equal(store.lease?.spec?.leaseTransitions, 0);
  a.elector.watchdog();
  a.ac.abort();
  await a.result;
});

test('gives up leadership when renewals fail for renewDeadline, without writing', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  const acquiredAt = clock.now();
  store.down.add('a');
  let settledResult: string | undefined;
  void a.result.then((r) => (settledResult = r));
  await advance(clock, 9_900);
  assert.equal(a.elector.isLeader(), true, 'still leader before the deadline');
  assert.equal(settledResult, undefined);
  await advance(clock, 200);
  assert.equal(settledResult, 'lost');
  assert.equal(a.elector.isLeader(), false);
  assert.ok(clock.now() - acquiredAt <= 10_100);
  assert.deepEqual(a.events, ['leader:a', 'started', 'stopped']);
  assert.equal(await gauge(a.registry), 0);
  assert.equal(store.lease?.spec?.holderIdentity, 'a', 'no release after a loss');
});

test('renewals cut off at the connection level: the next answer of the server retries at once, so a cut shorter than the renew deadline keeps the lease', async () => {
  // The endurance bench (issue 43): a 7 s network cut (etcd compaction fault) cost the leader its Lease 3 times in 6:
  // the connection was back 1.4 s before the deadline, but the retry after the last failure was due 0.2 s after it.
  for (const answers of [true, false]) {
    const clock = new FakeClock();
    const store = new FakeLeaseStore();
    const a = start(store, clock, 'a', { lock: store.client('a', { answers }) });
    await settle();
    const acquiredAt = clock.now(); // the last successful write's start: the deadline is acquiredAt + 10 s
    await advance(clock, 500);
    store.cut.add('a'); // renewals at +2, +4, +6 and +8 s fail with ECONNRESET
    const beforeCut = store.lease?.spec?.renewTime;
    await advance(clock, 8_100);
    assert.equal(store.lease?.spec?.renewTime, beforeCut, 'no renewal got through the cut');
    store.cut.delete('a');
    store.serverAnswered(); // +8.6 s: some other request of the process was answered
    await advance(clock, 100);
    const renewed = store.lease?.spec?.renewTime; // +8.7 s: before the retry period's next attempt (+10 s)
    await advance(clock, 3_000);
    if (answers) {
      assert.equal(a.elector.isLeader(), true, 'still leader past the deadline of the last renewal before the cut');
      assert.notEqual(renewed, beforeCut, 'renewed within 0.1 s of the server answering, before the next retry period');
      assert.ok(clock.now() - acquiredAt > 10_000);
    } else {
      // Without the hint (a LeaseClient without onServerAnswer), polling alone: the retry due at +10 s is too late.
      assert.equal(a.elector.isLeader(), false, 'polling only: lost at the deadline');
      assert.equal(await a.result, 'lost');
    }
    a.ac.abort();
    await a.result;
  }
});

test('a server answer does not wake a renewal that failed with an answer (500): it retries at its retry period', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a', { lock: store.client('a', { answers: true }) });
  await settle();
  await advance(clock, 2_100); // renewed at +2 s
  store.down.add('a');
  await advance(clock, 2_000); // the renewal at +4 s answered 500
  const calls = store.calls;
  for (let i = 0; i < 5; i++) {
    store.serverAnswered();
    await settle();
  }
  assert.equal(store.calls, calls, 'no attempt on a server answer after a failure that was itself an answer');
  await advance(clock, 2_000);
  assert.ok(store.calls > calls, 'the retry period still retries');
  a.ac.abort();
  await a.result;
});

test('a renewal that hangs is cut off at the renew deadline', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  store.hang.add('a');
  let settledResult: string | undefined;
  void a.result.then((r) => (settledResult = r));
  await advance(clock, 9_900);
  assert.equal(settledResult, undefined);
  await advance(clock, 200);
  assert.equal(settledResult, 'lost');
});

test('leadership signal: aborts at the renew deadline instant, measured from the start of the last successful renewal', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  const leadership = a.leadership();
  assert.ok(leadership && !leadership.aborted);
  await advance(clock, 2_000); // one renewal at +2 s (instant answer): deadline +12 s
  store.hang.add('a');
  // Until the deadline, at every 100 ms step: still leader, and the signal not aborted (not a moment early).
  await advance(clock, 9_900, 100, () => {
    assert.equal(a.elector.isLeader(), true, 'leader until last renewal start + renewDeadline');
    assert.equal(leadership.aborted, false, 'the signal does not abort before the deadline');
  });
  assert.equal(leadership.aborted, false);
  await advance(clock, 100);
  assert.equal(leadership.aborted, true, 'aborted at last renewal start + renewDeadline');
  assert.equal(a.elector.isLeader(), false);
  assert.match(String((leadership.reason as Error).message), /renew deadline/);
  assert.equal(await a.result, 'lost');
});

test('a slow successful acquisition does not extend leadership past its start + renewDeadline', async () => {
  // Issue 11 item 4: after a write that answered late, the elector slept a whole retry period before re-checking its
  // deadline, so it believed it led until start + renewDeadline + retryPeriod (a standby can take over at
  // start + leaseDuration).
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.latency.set('a', { clock, ms: 4_500 }); // GET + POST: the acquisition started at t0 succeeds at t0+9 s
  const t0 = clock.now();
  const a = start(store, clock, 'a');
  const violations: number[] = [];
  let led = false;
  await advance(clock, 14_000, 50, () => {
    if (a.elector.isLeader()) led = true;
    if (a.elector.isLeader() && clock.now() > t0 + 10_000) violations.push(clock.now() - t0);
  });
  assert.equal(led, true, 'the slow acquisition succeeded');
  assert.deepEqual(violations, [], 'leader past the write start + renewDeadline');
  assert.equal(a.leadership()?.aborted, true);
});

test('mayRelease=false at cancel: no release write, leadership signal aborted, result stopped', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a', {}, () => false);
  await settle();
  const rv = store.lease?.metadata.resourceVersion;
  a.ac.abort();
  assert.equal(await a.result, 'stopped');
  assert.equal(store.lease?.metadata.resourceVersion, rv, 'nothing written');
  assert.equal(store.lease?.spec?.holderIdentity, 'a');
  assert.equal(a.leadership()?.aborted, true);
});

test('the leadership signal aborts before the release write is sent', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  let abortedAtRelease: boolean | undefined;
  const a = start(store, clock, 'a');
  await settle();
  const leadership = a.leadership();
  assert.ok(leadership);
  leadership.addEventListener('abort', () => (abortedAtRelease = store.lease?.spec?.holderIdentity === 'a'));
  a.ac.abort();
  await a.result;
  assert.equal(abortedAtRelease, true, 'aborted while the record still named us, i.e. before the release');
  assert.equal(store.lease?.spec?.holderIdentity, '');
});

test('loses at once when another holder is observed in the record', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  store.put({ ...store.lease?.spec, holderIdentity: 'usurper' });
  let settledResult: string | undefined;
  void a.result.then((r) => (settledResult = r));
  await advance(clock, 2_000);
  assert.equal(settledResult, 'lost');
  assert.equal(store.lease?.spec?.holderIdentity, 'usurper');
});

test('release on cancel writes an immediately expirable record and a standby takes over at its next attempt', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a');
  await settle();
  const b = start(store, clock, 'b');
  await advance(clock, 4_000);
  assert.equal(b.elector.isLeader(), false);
  a.ac.abort();
  assert.equal(await a.result, 'stopped');
  assert.deepEqual(a.events, ['leader:a', 'started', 'leader:', 'stopped']);
  assert.equal(store.lease?.spec?.holderIdentity, '');
  assert.equal(store.lease?.spec?.leaseDurationSeconds, 1);
  assert.equal(a.elector.isLeader(), false);
  await advance(clock, 2_000);
  assert.equal(b.elector.isLeader(), true, 'took over within one retry period');
  assert.equal(store.lease?.spec?.leaseTransitions, 1);
  b.ac.abort();
  await b.result;
});

test('releaseOnCancel=false leaves the record alone', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a', { releaseOnCancel: false });
  await settle();
  a.ac.abort();
  await a.result;
  assert.equal(store.lease?.spec?.holderIdentity, 'a');
  assert.equal(store.lease?.spec?.leaseDurationSeconds, 15);
});

test('two electors on one store never both lead, through races, partitions and takeovers', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  let seed = 42;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const a = start(store, clock, 'a', { random });
  const b = start(store, clock, 'b', { random });
  let leaderChanges = 0;
  let last = '';
  const check = (): void => {
    assert.ok(!(a.elector.isLeader() && b.elector.isLeader()), `both lead at ${clock.now()}`);
    const now = a.elector.isLeader() ? 'a' : b.elector.isLeader() ? 'b' : '';
    if (now && now !== last) {
      leaderChanges++;
      last = now;
    }
  };
  await advance(clock, 10_000, 50, check);
  const first = last;
  assert.ok(first === 'a' || first === 'b');
  // Partition the leader: it must step down before the other can take over.
  store.down.add(first);
  await advance(clock, 40_000, 50, check);
  const second = first === 'a' ? 'b' : 'a';
  assert.equal(last, second);
  assert.equal((first === 'a' ? a : b).elector.isLeader(), false);
  assert.equal(await (first === 'a' ? a : b).result, 'lost');
  assert.equal(leaderChanges, 2);
  (second === 'a' ? a : b).ac.abort();
  await (second === 'a' ? a : b).result;
});

test('watchdog fails when the leader has not renewed for leaseDuration + tolerance', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const a = start(store, clock, 'a', { watchdogToleranceMs: 1_000 });
  await settle();
  a.elector.watchdog();
  store.wedged.add('a');
  // The wedged request ignores its deadline signal, so the renew loop is stuck. Leadership itself ended at the
  // renew deadline (timer), but the campaign never returns: the watchdog makes that visible.
  await advance(clock, 16_000);
  assert.equal(a.elector.isLeader(), false);
  assert.equal(a.leadership()?.aborted, true);
  assert.doesNotThrow(() => a.elector.watchdog());
  await advance(clock, 1_100);
  assert.throws(() => a.elector.watchdog(), /has not renewed lease ns\/lock/);
});

test('rejects inconsistent timings', () => {
  const store = new FakeLeaseStore();
  const base = { lock: store.client('x'), name: 'lock', registry: new Registry() };
  assert.throws(() => new LeaderElector({ ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }), /leaseDuration/);
  assert.throws(() => new LeaderElector({ ...base, leaseDurationMs: 15_000, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 }), /renewDeadline/);
});

test('RestLeaseClient maps to the coordination.k8s.io/v1 Lease endpoints', async () => {
  const calls: { method: string; path: string; body?: unknown }[] = [];
  let notFound = true;
  const rest = {
    json: <T>(method: string, path: string, opts: { body?: unknown } = {}): Promise<T> => {
      calls.push({ method, path, body: opts.body });
      if (method === 'GET' && notFound) return Promise.reject(new ApiError(404, 'NotFound', 'not found', undefined));
      return Promise.resolve((opts.body ?? { metadata: { name: 'l' } }) as T);
    },
    request: (): Promise<RawResponse> => Promise.reject(new Error('no watch in this test')),
  };
  const c = new RestLeaseClient(rest, 'ns', 'my.lease');
  assert.equal(await c.get(), undefined);
  notFound = false;
  assert.deepEqual(await c.get(), { metadata: { name: 'l' } });
  await c.create({ metadata: { name: '' }, spec: { holderIdentity: 'x' } });
  await c.update({ metadata: { name: 'my.lease', resourceVersion: '5' }, spec: { holderIdentity: 'x' } });
  assert.deepEqual(calls.map((c) => `${c.method} ${c.path}`), [
    'GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/my.lease',
    'GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/my.lease',
    'POST /apis/coordination.k8s.io/v1/namespaces/ns/leases',
    'PUT /apis/coordination.k8s.io/v1/namespaces/ns/leases/my.lease',
  ]);
  assert.deepEqual(calls[2]?.body, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'my.lease', namespace: 'ns' },
    spec: { holderIdentity: 'x' },
  });
  assert.equal((calls[3]?.body as Lease).metadata.resourceVersion, '5');
  rest.json = () => Promise.reject(new ApiError(403, 'Forbidden', 'no', undefined));
  await assert.rejects(c.get(), /no/);
});

test('RestLeaseClient.watchReleases: GET, then a field-selected watch from that resourceVersion; only releases and deletions call back', async () => {
  const held = (holder: string, rv: string): Lease => ({ metadata: { name: 'my.lease', namespace: 'ns', resourceVersion: rv }, spec: { holderIdentity: holder } });
  let stream: object[] = [];
  /** What a watch without resourceVersion gets. */
  let fromNow: object[] = [];
  const requests: { path: string; query: RequestOptions['query'] }[] = [];
  const rest = {
    json: <T>(): Promise<T> => Promise.resolve(held('a', '7') as T),
    request: (_method: string, path: string, opts: RequestOptions = {}): Promise<RawResponse> => {
      requests.push({ path, query: opts.query });
      const events = opts.query?.['resourceVersion'] === undefined ? fromNow : stream;
      const body = Readable.from(events.map((e) => `${JSON.stringify(e)}\n`));
      return Promise.resolve({ status: 200, headers: {}, body, text: () => Promise.resolve(''), dump: () => Promise.resolve() });
    },
  };
  const c = new RestLeaseClient(rest, 'ns', 'my.lease');
  stream = [
    { type: 'MODIFIED', object: held('b', '8') },
    { type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } },
    { type: 'MODIFIED', object: held('', '10') },
    { type: 'ADDED', object: held('c', '11') },
    { type: 'DELETED', object: held('c', '12') },
  ];
  let released = 0;
  await c.watchReleases(() => released++, new AbortController().signal);
  assert.equal(released, 2, 'the release (MODIFIED, holder "") and the deletion; not the held records');
  assert.equal(requests[0]?.path, '/apis/coordination.k8s.io/v1/namespaces/ns/leases');
  assert.equal(requests[0]?.query?.['watch'], 'true');
  assert.equal(requests[0]?.query?.['fieldSelector'], 'metadata.name=my.lease');
  assert.equal(requests[0]?.query?.['resourceVersion'], '7', 'from the resourceVersion the GET read');

  // A released Lease at the start calls back at once (nothing released between a poll and the watch is missed); a
  // resourceVersion too old for the watch (410) is replaced by a watch from now, which starts with the current state.
  rest.json = <T>(): Promise<T> => Promise.resolve(held('', '20') as T);
  const gone = { type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } };
  stream = [gone];
  fromNow = [{ type: 'ADDED', object: held('', '30') }, { type: 'MODIFIED', object: held('d', '31') }];
  released = 0;
  requests.length = 0;
  await c.watchReleases(() => released++, new AbortController().signal);
  assert.equal(released, 2, 'the GET, then the watch-from-now\'s initial ADDED');
  assert.deepEqual(requests.map((r) => r.query?.['resourceVersion']), ['20', undefined]);

  // Any other failure, or a 410 from "now", ends the session with the error (the elector restarts it).
  fromNow = [gone];
  await assert.rejects(c.watchReleases(() => released++, new AbortController().signal), (err: unknown) => err instanceof ApiError && err.status === 410);
  stream = [{ type: 'ERROR', object: { kind: 'Status', code: 500, reason: 'InternalError', message: 'boom' } }];
  await assert.rejects(c.watchReleases(() => released++, new AbortController().signal), (err: unknown) => err instanceof ApiError && err.status === 500);
});

/** A standby (retry period 2 s, no jitter) of a lease held by "other" and valid for 15 s. */
function standbyOfHeldLease(store: FakeLeaseStore, clock: FakeClock, tag: string, watch: boolean): Harness {
  if (!store.lease) store.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2030-01-01T00:00:00.000000Z', leaseTransitions: 0 });
  return start(store, clock, tag, { lock: store.client(tag, { watch }) });
}

test('standby watch: a released Lease wakes the standby, which acquires without the clock moving', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const b = standbyOfHeldLease(store, clock, 'b', true);
  await settle();
  assert.equal(b.elector.isLeader(), false);
  assert.equal(store.activeWatches, 1, 'the watch started after the first unsuccessful attempt');
  const t0 = clock.now();
  store.put({ holderIdentity: '', leaseDurationSeconds: 1, renewTime: '2030-01-01T00:00:05.000000Z', leaseTransitions: 0 });
  await settle();
  assert.equal(clock.now(), t0, 'no time passed: not a poll');
  assert.equal(b.elector.isLeader(), true, 'acquired on the watch\'s hint');
  assert.equal(store.lease?.spec?.holderIdentity, 'b');
  assert.equal(store.lease?.spec?.leaseTransitions, 1);
  assert.equal(store.activeWatches, 0, 'no watch while leading');
  b.ac.abort();
  assert.equal(await b.result, 'stopped');

  // Control: the same standby without a watch waits for its next poll (2 s later here).
  const clock2 = new FakeClock();
  const store2 = new FakeLeaseStore();
  const c = standbyOfHeldLease(store2, clock2, 'c', false);
  await settle();
  store2.put({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 0 });
  await settle();
  assert.equal(c.elector.isLeader(), false, 'polling alone has not seen the release yet');
  await advance(clock2, 2_000);
  assert.equal(c.elector.isLeader(), true, 'at the next poll');
  c.ac.abort();
  await c.result;
});

test('standby watch: a deleted Lease wakes the standby, which creates it at once', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const b = standbyOfHeldLease(store, clock, 'b', true);
  await settle();
  store.remove();
  await settle();
  assert.equal(b.elector.isLeader(), true);
  assert.equal(store.lease?.spec?.holderIdentity, 'b');
  b.ac.abort();
  await b.result;
});

test('standby watch: an event showing another holder wakes nobody, and a hint never shortens a valid lease', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const b = standbyOfHeldLease(store, clock, 'b', true);
  await settle();
  const calls = store.calls;
  store.put({ holderIdentity: 'other2', leaseDurationSeconds: 15, renewTime: '2030-01-01T00:00:03.000000Z', leaseTransitions: 1 });
  await settle();
  assert.equal(store.calls, calls, 'no attempt on a held record');
  assert.equal(b.elector.isLeader(), false);

  // A release that another candidate wins before the woken standby reads: the standby attempts at once, reads the
  // new holder's fresh record, and waits out a full lease duration of its own time from that read (as polling does).
  store.put({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 1 });
  store.put({ holderIdentity: 'other3', leaseDurationSeconds: 15, renewTime: '2030-01-01T00:00:04.000000Z', leaseTransitions: 2 });
  await settle();
  assert.equal(store.calls, calls + 1, 'one attempt (a GET) on the hint');
  assert.equal(b.elector.isLeader(), false, 'the lease other3 holds is still valid');
  const seen = clock.now();
  await advance(clock, 14_900);
  assert.equal(b.elector.isLeader(), false, 'still valid just before leaseDuration since the standby saw it');
  await advance(clock, 2_100);
  assert.equal(b.elector.isLeader(), true, 'expired by local time');
  assert.ok(clock.now() - seen >= 15_000);
  b.ac.abort();
  await b.result;
});

test('standby watch: a failing watch is restarted with backoff while the poll loop keeps working', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.watchDown.add('b');
  const b = standbyOfHeldLease(store, clock, 'b', true);
  await settle();
  assert.equal(store.watchSessions, 1);
  const gets = store.calls;
  // Restarts after 1 s, then 2 s later, then 4 s later (doubling).
  await advance(clock, 900);
  assert.equal(store.watchSessions, 1);
  await advance(clock, 100);
  assert.equal(store.watchSessions, 2);
  await advance(clock, 2_000);
  assert.equal(store.watchSessions, 3);
  assert.ok(store.calls - gets >= 1, 'polls went on meanwhile');
  store.watchDown.delete('b');
  await advance(clock, 4_000);
  assert.equal(store.watchSessions, 4);
  assert.equal(store.activeWatches, 1, 'the watch runs again');
  assert.equal(b.elector.isLeader(), false);
  const t0 = clock.now();
  store.put({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 0 });
  await settle();
  assert.equal(clock.now(), t0);
  assert.equal(b.elector.isLeader(), true, 'the restarted watch woke the standby');
  b.ac.abort();
  await b.result;
});

test('standby watch: a watch that never works leaves polling intact (acquires after local expiry)', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  store.watchDown.add('b');
  const b = standbyOfHeldLease(store, clock, 'b', true);
  const t0 = clock.now();
  await advance(clock, 14_900);
  assert.equal(b.elector.isLeader(), false);
  await advance(clock, 2_100);
  assert.equal(b.elector.isLeader(), true, 'polling acquired the expired lease');
  assert.ok(clock.now() - t0 >= 15_000);
  // Sessions at 0, 1, 3, 7 and 15 s (backoff 1, 2, 4, 8 s): bounded, and none once leading.
  const sessions = store.watchSessions;
  assert.ok(sessions <= 5, `${sessions} watch sessions`);
  await advance(clock, 60_000, 1_000);
  assert.equal(store.watchSessions, sessions, 'no watch while leading');
  b.ac.abort();
  await b.result;
});

test('standby watch: stopping the campaign stops the watch', async () => {
  const clock = new FakeClock();
  const store = new FakeLeaseStore();
  const b = standbyOfHeldLease(store, clock, 'b', true);
  await settle();
  assert.equal(store.activeWatches, 1);
  b.ac.abort();
  assert.equal(await b.result, 'stopped');
  await settle();
  assert.equal(store.activeWatches, 0);
});

test('microTime has six fractional digits', () => {
  assert.equal(microTime(new Date('2030-01-02T03:04:05.678Z')), '2030-01-02T03:04:05.678000Z');
});
