import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, MAX_TIMEOUT_MS, RealClock, type TimerHost } from './clock.ts';

const DAY = 86_400_000;

/**
 * A TimerHost with a hand-driven time line: records every delay RealClock asks the host for and fires due
 * callbacks when the test advances time. Like Node, it refuses (here: fails the test on) delays it cannot represent.
 */
class ScriptedHost implements TimerHost {
  time = 0;
  readonly requested: number[] = [];
  private timers = new Map<object, { due: number; fn: () => void }>();

  now = (): number => this.time;

  setTimeout = (fn: () => void, ms: number): { unref(): void } => {
    this.requested.push(ms);
    assert.ok(ms >= 0 && ms <= MAX_TIMEOUT_MS, `host asked for a delay of ${ms} ms (Node would overflow it to 1 ms)`);
    const handle = { unref: (): void => undefined };
    this.timers.set(handle, { due: this.time + ms, fn });
    return handle;
  };

  clearTimeout = (handle: object): void => {
    this.timers.delete(handle);
  };

  pending(): number {
    return this.timers.size;
  }

  /** Advances to `target`, firing due timers earliest first. */
  advanceTo(target: number): void {
    for (;;) {
      const next = [...this.timers.entries()].filter(([, t]) => t.due <= target).sort((a, b) => a[1].due - b[1].due)[0];
      if (!next) break;
      this.timers.delete(next[0]);
      this.time = Math.max(this.time, next[1].due);
      next[1].fn();
    }
    this.time = target;
  }
}

describe('RealClock.setTimer', () => {
  it('a 30-day timer fires after 30 days, never earlier, with two host timers (no busy waking)', () => {
    const host = new ScriptedHost();
    const clock = new RealClock(host);
    let fired = 0;
    clock.setTimer(30 * DAY, () => fired++);
    host.advanceTo(MAX_TIMEOUT_MS);
    assert.equal(fired, 0, 'not after the first host timer');
    host.advanceTo(30 * DAY - 1);
    assert.equal(fired, 0, 'not a millisecond early');
    host.advanceTo(30 * DAY);
    assert.equal(fired, 1);
    assert.deepEqual(host.requested, [MAX_TIMEOUT_MS, 30 * DAY - MAX_TIMEOUT_MS]);
    assert.equal(host.pending(), 0);
  });

  it('the remainder is measured from the clock, so a late first chunk does not stretch the total', () => {
    const host = new ScriptedHost();
    const clock = new RealClock(host);
    let fired = 0;
    clock.setTimer(MAX_TIMEOUT_MS + 1000, () => fired++);
    // The event loop was busy: the first chunk runs 600 ms late.
    host.time = MAX_TIMEOUT_MS + 600;
    host.advanceTo(MAX_TIMEOUT_MS + 600);
    assert.deepEqual(host.requested, [MAX_TIMEOUT_MS, 400]);
    host.advanceTo(MAX_TIMEOUT_MS + 1000);
    assert.equal(fired, 1);
  });

  it('cancel works in every chunk', () => {
    const host = new ScriptedHost();
    const clock = new RealClock(host);
    let fired = 0;
    const t = clock.setTimer(3 * MAX_TIMEOUT_MS, () => fired++);
    host.advanceTo(MAX_TIMEOUT_MS + 5);
    assert.equal(host.pending(), 1, 'the second chunk is armed');
    t.cancel();
    assert.equal(host.pending(), 0);
    host.advanceTo(10 * MAX_TIMEOUT_MS);
    assert.equal(fired, 0);
  });

  it('Infinity never fires and keeps exactly one host timer armed', () => {
    const host = new ScriptedHost();
    const clock = new RealClock(host);
    let fired = 0;
    clock.setTimer(Infinity, () => fired++);
    for (let i = 1; i <= 5; i++) host.advanceTo(i * MAX_TIMEOUT_MS);
    assert.equal(fired, 0);
    assert.equal(host.pending(), 1);
    assert.equal(host.requested.length, 6);
  });

  it('short, zero, negative and NaN delays are passed through as one host timer (0 for the last three)', () => {
    const host = new ScriptedHost();
    const clock = new RealClock(host);
    for (const ms of [250, 0, -5, Number.NaN]) clock.setTimer(ms, () => undefined);
    assert.deepEqual(host.requested, [250, 0, 0, 0]);
  });

  it('with the real event loop: a delay above 2^31-1 ms neither fires early nor warns', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    let fired = false;
    const t = new RealClock().setTimer(MAX_TIMEOUT_MS + 1, () => (fired = true));
    // Unfixed, Node turns the delay into 1 ms; a 1 ms timer scheduled after ours runs after it would have fired.
    await new Promise((resolve) => setTimeout(resolve, 20));
    t.cancel();
    process.off('warning', onWarning);
    assert.equal(fired, false);
    assert.deepEqual(warnings.filter((w) => w === 'TimeoutOverflowWarning'), []);
  });
});

describe('FakeClock', () => {
  it('fires a 30-day timer at 30 days and a NaN delay at once', () => {
    const clock = new FakeClock(0);
    const fired: string[] = [];
    clock.setTimer(30 * DAY, () => fired.push('30d'));
    clock.setTimer(Number.NaN, () => fired.push('nan'));
    clock.step(0);
    assert.deepEqual(fired, ['nan']);
    clock.step(30 * DAY - 1);
    assert.deepEqual(fired, ['nan']);
    clock.step(1);
    assert.deepEqual(fired, ['nan', '30d']);
  });
});

describe('FakeClock ordering and time', () => {
  it('fires due timers earliest first (ties in creation order), each at its own time, including timers added while stepping', () => {
    const clock = new FakeClock(1_000);
    const fired: string[] = [];
    clock.setTimer(30, () => fired.push(`b@${clock.now()}`));
    clock.setTimer(10, () => {
      fired.push(`a@${clock.now()}`);
      clock.setTimer(5, () => fired.push(`a2@${clock.now()}`)); // due at 1 015, inside this step
    });
    clock.setTimer(30, () => fired.push(`c@${clock.now()}`));
    const cancelled = clock.setTimer(20, () => fired.push('cancelled'));
    cancelled.cancel();
    assert.equal(clock.pendingTimers(), 3);
    clock.step(100);
    assert.deepEqual(fired, ['a@1010', 'a2@1015', 'b@1030', 'c@1030']);
    assert.equal(clock.now(), 1_100);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('never goes back in time: set() to an earlier instant leaves now() where it was', () => {
    const clock = new FakeClock(500);
    clock.set(400);
    assert.equal(clock.now(), 500);
  });

  it('sleep resolves when time reaches it; an abort (before or during) rejects with the reason and drops the timer', async () => {
    const clock = new FakeClock(0);
    let woke = false;
    const s = clock.sleep(50).then(() => (woke = true));
    clock.step(49);
    await Promise.resolve();
    assert.equal(woke, false);
    clock.step(1);
    await s;
    assert.equal(woke, true);

    const ac = new AbortController();
    const during = clock.sleep(1_000, ac.signal);
    assert.equal(clock.pendingTimers(), 1);
    ac.abort(new Error('stop now'));
    await assert.rejects(during, /stop now/);
    assert.equal(clock.pendingTimers(), 0, 'the aborted sleep leaves no timer behind');
    await assert.rejects(clock.sleep(10, ac.signal), /stop now/, 'already aborted: rejects at once');
    assert.equal(clock.pendingTimers(), 0);
  });
});

describe('RealClock', () => {
  it('sleep: an abort rejects with the reason and cancels the host timer', async () => {
    const host = new ScriptedHost();
    const clock = new RealClock(host);
    const ac = new AbortController();
    const p = clock.sleep(5_000, ac.signal);
    assert.equal(host.pending(), 1);
    ac.abort(new Error('shutting down'));
    await assert.rejects(p, /shutting down/);
    assert.equal(host.pending(), 0);
  });

  it('sleep resolves on the real event loop, and now() never decreases', async () => {
    const clock = new RealClock();
    const t0 = clock.now();
    await clock.sleep(5);
    let prev = clock.now();
    assert.ok(prev >= t0);
    for (let i = 0; i < 10_000; i++) {
      const t = clock.now();
      assert.ok(t >= prev, 'monotonic');
      prev = t;
    }
  });

  it('timers are unref\'d: a pending hour-long timer does not keep the process alive', async () => {
    const { execFile } = await import('node:child_process');
    const script = `import { realClock } from ${JSON.stringify(new URL('./clock.ts', import.meta.url).href)};
      realClock.setTimer(3_600_000, () => { console.log('fired'); });`;
    const out = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 }, (_err, stdout) => {
        resolve({ code: child.exitCode, stdout });
      });
    });
    assert.equal(out.code, 0, 'exited by itself (not killed by the 60 s guard)');
    assert.equal(out.stdout.trim(), '');
  });
});
