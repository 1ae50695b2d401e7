/**
 * waitForCacheSync: polls sync predicates (informer.hasSynced, registration.hasSynced, …) until all are true.
 * Resolves true when synced, false on timeout or abort; never rejects. Polls every 100 ms on the given Clock (so a
 * FakeClock test steps time to make progress).
 */
import { realClock, type Clock } from '../util/clock.ts';

export interface WaitForSyncOptions {
  /** Give up after this long (default: wait until synced or aborted). */
  timeoutMs?: number;
  signal?: AbortSignal;
  clock?: Clock;
  pollIntervalMs?: number;
}

export async function waitForCacheSync(checks: ReadonlyArray<() => boolean>, opts: WaitForSyncOptions = {}): Promise<boolean> {
  const clock = opts.clock ?? realClock;
  const poll = opts.pollIntervalMs ?? 100;
  const deadline = opts.timeoutMs === undefined ? Infinity : clock.now() + opts.timeoutMs;
  for (;;) {
    if (checks.every((c) => c())) return true;
    if (opts.signal?.aborted) return false;
    const left = deadline - clock.now();
    if (left <= 0) return false;
    try {
      await clock.sleep(Math.min(poll, left), opts.signal);
    } catch {
      return false;
    }
  }
}
