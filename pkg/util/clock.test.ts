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
