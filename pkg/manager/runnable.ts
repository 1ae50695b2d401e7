/**
 * Runnable: the one lifecycle contract of everything the Manager starts (informers, servers, controllers).
 *
 * Contract:
 *  - `start(signal)` begins work and returns a promise that settles only when the runnable has stopped.
 *  - After `signal` aborts, the runnable stops taking new work, finishes (or abandons) in-flight work, releases its
 *    resources and then resolves. It must not reject merely because the signal aborted.
 *  - Rejecting (before or after the abort) reports a failure; the Manager treats a failure as fatal and shuts down.
 *  - Resolving before the signal aborts means "done early" (not an error).
 *  - `start` is called at most once per instance.
 *  - A runnable that resolves after ABANDONING work that still runs (a controller whose own graceful timeout expired
 *    with reconciles in flight) says so through `stillRunning()`: the Manager counts it as not stopped, so the
 *    shutdown reports the timeout (exit 1) and the lease is not released while that work can still write.
 */
export interface Runnable {
  /** Unique, human-readable name used in logs (e.g. "controller/foo", "informer/apps/v1/deployments", "metrics-server"). */
  readonly name: string;
  /** True for runnables that may act only while this replica holds the leader-election lease (controllers). */
  readonly needLeaderElection: boolean;
  /** Runs until `signal` aborts (or the work is done) and settles only once stopped; rejecting is a fatal failure. */
  start(signal: AbortSignal): Promise<void>;
  /** Work this runnable abandoned that is still running after `start` resolved (default: none). */
  stillRunning?(): boolean;
}

/** Builds a Runnable from a function (handy for servers and tests). */
export function runnable(name: string, needLeaderElection: boolean, start: (signal: AbortSignal) => Promise<void>): Runnable {
  return { name, needLeaderElection, start };
}

/** A promise that resolves when `signal` aborts (immediately if it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
