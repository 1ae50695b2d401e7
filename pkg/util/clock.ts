/**
 * Clock: the one source of time for queues, reflectors and leader election, so tests can drive time by hand.
 *
 * Invariants:
 *  - `now()` is monotonic milliseconds for the real clock (performance.timeOrigin + performance.now()), never
 *    wall-clock adjustments; durations are always computed from two `now()` readings of the same clock.
 *  - Real `setTimer` callbacks run later on the event loop; FakeClock fires due timers synchronously inside `step()`,
 *    earliest first (ties in creation order).
 */

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds; monotonic for the real clock. */
  now(): number;
  /** Runs `fn` once after `ms` milliseconds unless cancelled. Real timers are unref'd: they never keep the process alive. */
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function sleepWith(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      timer.cancel();
      reject(signal?.reason as Error);
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export class RealClock implements Clock {
  now(): number {
    return performance.timeOrigin + performance.now();
  }

  setTimer(ms: number, fn: () => void): Timer {
    const handle = setTimeout(fn, Math.max(0, ms));
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }
}

export const realClock: Clock = new RealClock();

interface FakeTimer {
  due: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/** A clock that moves only when the test calls `step`/`set`. Due timers fire synchronously, earliest first. */
export class FakeClock implements Clock {
  private time: number;
  private seq = 0;
  private timers: FakeTimer[] = [];

  constructor(start = 1_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const t: FakeTimer = { due: this.time + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(t);
    return {
      cancel: () => {
        t.cancelled = true;
      },
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  /** Advances time by `ms`, firing every timer that falls due on the way (timers added meanwhile included). */
  step(ms: number): void {
    this.set(this.time + ms);
  }

  set(target: number): void {
    for (;;) {
      const next = this.timers
        .filter((t) => !t.cancelled && t.due <= target)
        .sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.time = Math.max(this.time, next.due);
      next.fn();
    }
    this.time = Math.max(this.time, target);
    this.timers = this.timers.filter((t) => !t.cancelled);
  }

  /** Number of pending (not yet fired, not cancelled) timers. */
  pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }
}
