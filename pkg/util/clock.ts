/**
 * Clock: the one source of time for queues, reflectors and leader election, so tests can drive time by hand.
 *
 * Invariants:
 *  - `now()` is monotonic milliseconds for the real clock (performance.timeOrigin + performance.now()), never
 *    wall-clock adjustments; durations are always computed from two `now()` readings of the same clock.
 *  - Real `setTimer` callbacks run later on the event loop; FakeClock fires due timers synchronously inside `step()`,
 *    earliest first (ties in creation order).
 *  - `setTimer(ms)` takes any delay: a timer of 30 days fires after 30 days on both clocks (the real clock chains
 *    platform timers, which overflow above 2^31-1 ms), Infinity never fires, and ms <= 0 or NaN means 0. Callers
 *    therefore never need to clamp durations that come from users (flags, requeueAfter, resync periods).
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

/** Largest delay Node's setTimeout honours (2^31-1 ms, about 24.8 days); a larger one fires after 1 ms. */
export const MAX_TIMEOUT_MS = 2_147_483_647;

/** The platform timer functions RealClock runs on (injectable so tests can check what it asks the platform for). */
export interface TimerHost {
  now(): number;
  setTimeout(fn: () => void, ms: number): { unref(): unknown };
  clearTimeout(handle: ReturnType<TimerHost['setTimeout']>): void;
}

const nodeHost: TimerHost = {
  now: () => performance.timeOrigin + performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export class RealClock implements Clock {
  private readonly host: TimerHost;

  constructor(host: TimerHost = nodeHost) {
    this.host = host;
  }

  now(): number {
    return this.host.now();
  }

  /**
   * Delays above MAX_TIMEOUT_MS are chained: the host timer is armed for at most MAX_TIMEOUT_MS, and when it fires
   * the rest is measured from `now()` against the deadline fixed at the call, so the callback runs once, `ms` after
   * the call (to the platform timer's precision, however late a chunk ran), and the process wakes about once every
   * 24.8 days meanwhile (Infinity: never fires).
   * Non-positive and NaN delays mean "as soon as possible" (0).
   */
  setTimer(ms: number, fn: () => void): Timer {
    const delay = ms > 0 ? ms : 0;
    if (delay <= MAX_TIMEOUT_MS) {
      const handle = this.host.setTimeout(fn, delay);
      handle.unref();
      return { cancel: () => this.host.clearTimeout(handle) };
    }
    const deadline = this.host.now() + delay;
    let handle: ReturnType<TimerHost['setTimeout']> | undefined;
    const arm = (left: number): void => {
      const chunk = Math.min(left, MAX_TIMEOUT_MS);
      handle = this.host.setTimeout(() => {
        const rest = deadline - this.host.now();
        // Only a capped chunk is re-armed: an uncapped one is the platform's own "ms have passed".
        if (chunk === MAX_TIMEOUT_MS && rest > 0) arm(rest);
        else {
          handle = undefined;
          fn();
        }
      }, chunk);
      handle.unref();
    };
    arm(delay);
    return {
      cancel: () => {
        if (handle !== undefined) this.host.clearTimeout(handle);
        handle = undefined;
      },
    };
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
    const t: FakeTimer = { due: this.time + (ms > 0 ? ms : 0), seq: this.seq++, fn, cancelled: false };
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
