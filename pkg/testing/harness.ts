/**
 * `startManager(mgr, opts)`: runs a ControllerManager in the test's own process until `stop()` — the in-process
 * harness (instead of spawning `node main.ts`).
 *
 *   const running = await startManager(() => { const mgr = new ControllerManager({ kubeConfig: env.kubeConfig }); setup(mgr); return mgr; });
 *   after(() => running.stop());
 *
 * Contract: resolves once the manager's controllers run (caches synced, leading when leader election is on), or
 * rejects with the manager's failure if it stops first (e.g. a CRD not installed: the cache-sync timeout names it),
 * or after `startTimeoutMs` (default 60 s; the manager is stopped). `stop()` aborts the manager's signal (a graceful
 * shutdown: in-flight reconciles finish) and resolves when `start` returned; it rejects if the manager exited
 * non-zero, with its failure. Idempotent. `exited` resolves with the exit code whenever the manager stops; aborting
 * `opts.signal` stops it too.
 *
 * As its ServiceAccount (a manager built on startTestEnv's `managerConnection` with `rbacPaths`): a refusal while
 * starting rejects at once with the rule to add (an RbacRefusalError) instead of waiting for caches that cannot sync,
 * and `stop()` rejects with the first refusal made while this manager ran (it cannot have done its job).
 */
import type { ReconcileContext } from '../controller/controller.ts';
import { silentLogger, type Logger } from '../log/logger.ts';
import type { ControllerManager } from '../runtime/manager.ts';
import { eventually } from './eventually.ts';
import { RefusalRecorder } from './rbac.ts';
import { RbacRefusalError } from './refused.ts';

/**
 * A manager started by startManager: `stop()` shuts it down gracefully (rejects if it exited non-zero); `exited`
 * resolves with its exit code.
 */
export interface RunningManager {
  /** The manager, started (its controllers running, caches synced). */
  readonly manager: ControllerManager;
  /** The exit code `start` resolved with, when it stops (by stop(), the signal, or a failure). */
  readonly exited: Promise<number>;
  /** Stops the manager and waits for it; rejects with its failure when it exited non-zero. */
  stop(): Promise<void>;
}

/** Options of startManager: a signal that stops the manager, and how long its controllers may take to start. */
export interface StartManagerOptions {
  /** Stops the manager when it aborts. */
  signal?: AbortSignal;
  /** How long the controllers may take to start (ms). Default 60 000. */
  startTimeoutMs?: number;
}

/**
 * Runs a ControllerManager in the test's process and resolves once its controllers run (caches synced, leading);
 * rejects with the manager's failure if it stops first, or after `startTimeoutMs` (the manager is then stopped).
 */
export async function startManager(mgr: ControllerManager | (() => ControllerManager), opts: StartManagerOptions = {}): Promise<RunningManager> {
  const manager = typeof mgr === 'function' ? mgr() : mgr;
  const recorder = manager.reader.transport instanceof RefusalRecorder ? manager.reader.transport : undefined;
  const refusedBefore = recorder?.refusals.length ?? 0;
  const ac = new AbortController();
  const onAbort = (): void => ac.abort(opts.signal?.reason);
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  const exited = manager.start(ac.signal).then((c) => {
    opts.signal?.removeEventListener('abort', onAbort);
    return c;
  });
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopping ??= (async () => {
    ac.abort(new Error('startManager: stop()'));
    const c = await exited;
    const refused = recorder?.refusals[refusedBefore];
    if (refused && recorder) throw new RbacRefusalError(refused, recorder.role);
    if (c !== 0) throw new Error(`the manager exited ${c}: ${manager.failure()?.message ?? 'no failure recorded'}`, { cause: manager.failure() });
  })());
  const waiting = new AbortController();
  const started = eventually(() => manager.controllersStarted(), {
    timeoutMs: opts.startTimeoutMs ?? 60_000, intervalMs: 20, message: 'the controllers to start', signal: waiting.signal,
  });
  started.catch(() => {}); // raced below; a rejection after the manager stopped is not an unhandled one
  try {
    const first = await Promise.race([started.then(() => undefined), exited]);
    if (first !== undefined) {
      throw new Error(`the manager stopped (exit ${first}) before its controllers started: ${manager.failure()?.message ?? 'no failure recorded'}`,
        { cause: manager.failure() });
    }
  } catch (err) {
    waiting.abort(err);
    ac.abort(err);
    await exited;
    throw err;
  }
  return { manager, exited, stop };
}

/**
 * The third argument of a Reconciler for calling it directly in a unit test: `key` ("namespace/name"), a logger
 * (default: silent) and a fixed reconcileID.
 *   await reconcile({ namespace: 'a', name: 'x' }, AbortSignal.timeout(5_000), reconcileContext('a/x'));
 */
export function reconcileContext(key: string, log: Logger = silentLogger): ReconcileContext {
  return { key, log, reconcileID: 'unit-test' };
}
