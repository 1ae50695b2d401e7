/**
 * Manager: starts Runnables, gates controllers on leadership and cache sync, and shuts everything down in order.
 *
 * Lifecycle (one `start` per Manager):
 *  1. Runnables with `needLeaderElection: false` (informers, health/metrics servers) start at once, and so does the
 *     leader election campaign (if configured) and the `waitForCacheSync` hook.
 *  2. Leader-gated runnables (controllers) start once BOTH this replica leads (immediately when leader election is
 *     off) AND `waitForCacheSync` resolved (true/undefined). `false` or a rejection is fatal.
 *  3. Shutdown, when the signal aborts or a runnable fails (rejects):
 *       a. abort leader-gated runnables (they stop handing out keys; in-flight reconciles finish) and wait for them,
 *       b. then stop the election, which releases the lease (so no standby can lead while our controllers still run),
 *       c. then abort the remaining runnables (informers, servers) and wait for them.
 *     One deadline, `gracefulShutdownTimeoutMs`, covers a–c; runnables still running when it passes are named in the
 *     log and the exit code becomes 1. The lease release gets at least `releaseGraceMs` even past the deadline.
 *     Exit code 0 after a clean shutdown on the signal; 1 after a runnable failure or a timeout.
 *  4. Losing the lease: leader-gated and all other runnables are aborted WITHOUT waiting, and `start` resolves 1 at
 *     once. The caller must exit the process immediately (no chance for two leaders to act).
 *
 * `start` never rejects. Runnables added after `start` begin as their group allows; adding during shutdown throws.
 */
import { type Logger, silentLogger } from '../log/logger.ts';
import { type Clock, realClock } from '../util/clock.ts';
import type { LeaderElection } from './leaderelection.ts';
import type { Runnable } from './runnable.ts';

export const exitOK = 0;
export const exitFailure = 1;

export interface ManagerOptions {
  /** Leader election; undefined = off (leader-gated runnables start as soon as caches sync). */
  leaderElection?: LeaderElection;
  /**
   * Resolves when the informer caches the controllers read from are synced (false = gave up). Called once at start
   * with a signal that aborts when shutdown begins. Undefined = nothing to wait for.
   */
  waitForCacheSync?: (signal: AbortSignal) => Promise<boolean | void>;
  gracefulShutdownTimeoutMs: number;
  /** Minimum time given to the lease release even when the graceful deadline has passed (default 5 s). */
  releaseGraceMs?: number;
  clock?: Clock;
  logger?: Logger;
}

type StopReason = { kind: 'signal' } | { kind: 'lost' } | { kind: 'failed'; name: string; err: unknown };

interface Running {
  name: string;
  promise: Promise<unknown>;
  done: boolean;
}

export class Manager {
  private readonly opts: ManagerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly pending: Runnable[] = [];
  private readonly names = new Set<string>();
  private readonly running: { gated: Running[]; other: Running[] } = { gated: [], other: [] };
  private readonly gatedAc = new AbortController();
  private readonly otherAc = new AbortController();
  private started = false;
  private gateOpen = false;
  private stopping = false;
  private stop: (reason: StopReason) => void = () => {};

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger).child({ component: 'manager' });
  }

  /** Registers a runnable (names must be unique). */
  add(r: Runnable): void {
    if (this.stopping) throw new Error(`cannot add runnable ${r.name}: manager is shutting down`);
    if (this.names.has(r.name)) throw new Error(`runnable ${JSON.stringify(r.name)} already added`);
    this.names.add(r.name);
    if (!this.started) {
      this.pending.push(r);
    } else if (!r.needLeaderElection) {
      this.launch(r, 'other');
    } else if (this.gateOpen) {
      this.launch(r, 'gated');
    } else {
      this.pending.push(r);
    }
  }

  /** True once leader-gated runnables have been started (leading and caches synced). */
  controllersStarted(): boolean {
    return this.gateOpen;
  }

  /** Runs until shutdown; resolves with the process exit code. See the module comment for the ordering. */
  async start(signal: AbortSignal): Promise<number> {
    if (this.started) throw new Error('Manager.start called twice');
    this.started = true;
    const stopped = new Promise<StopReason>((resolve) => {
      this.stop = (reason) => {
        if (this.stopping) return;
        this.stopping = true;
        resolve(reason);
      };
    });
    const onAbort = (): void => this.stop({ kind: 'signal' });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });

    for (const r of this.pending.filter((p) => !p.needLeaderElection)) this.launch(r, 'other');

    const syncAc = new AbortController();
    const electionAc = new AbortController();
    let elected!: () => void;
    const leading = new Promise<void>((resolve) => (elected = resolve));
    let election: Promise<unknown> = Promise.resolve();
    const le = this.opts.leaderElection;
    if (le) {
      election = le
        .run(electionAc.signal, {
          onStartedLeading: () => {
            this.log.info({ lease: le.name }, 'became leader');
            elected();
          },
        })
        .then(
          (result) => {
            if (result === 'lost') this.stop({ kind: 'lost' });
          },
          (err: unknown) => this.stop({ kind: 'failed', name: `leader-election/${le.name}`, err }),
        );
    } else {
      elected();
    }

    const synced = (async (): Promise<boolean> => {
      try {
        return (await this.opts.waitForCacheSync?.(syncAc.signal)) !== false;
      } catch (err) {
        if (!this.stopping) this.log.error({ err }, 'waiting for cache sync failed');
        return false;
      }
    })();
    void Promise.all([leading, synced]).then(([, ok]) => {
      if (this.stopping) return;
      if (!ok) {
        this.stop({ kind: 'failed', name: 'cache-sync', err: new Error('caches did not sync') });
        return;
      }
      this.gateOpen = true;
      this.log.info('starting leader-election runnables');
      const gated = this.pending.filter((p) => p.needLeaderElection);
      this.pending.length = 0;
      for (const r of gated) this.launch(r, 'gated');
    });

    const reason = await stopped;
    signal.removeEventListener('abort', onAbort);
    syncAc.abort();

    if (reason.kind === 'lost') {
      this.log.error('leader election lost: stopping controllers and exiting');
      this.gatedAc.abort();
      this.otherAc.abort();
      return exitFailure;
    }

    if (reason.kind === 'failed') this.log.error({ err: reason.err, runnable: reason.name }, 'runnable failed: shutting down');
    else this.log.info('shutdown signal received: stopping');
    const deadline = this.clock.now() + this.opts.gracefulShutdownTimeoutMs;
    let timedOut = false;

    this.gatedAc.abort();
    const stuckGated = await this.waitFor(this.running.gated, deadline);
    if (stuckGated.length > 0) {
      timedOut = true;
      this.log.error({ runnables: stuckGated }, 'graceful shutdown timed out waiting for leader-election runnables');
    }

    electionAc.abort();
    const releaseBy = Math.max(deadline, this.clock.now() + (this.opts.releaseGraceMs ?? 5_000));
    const electionEntry: Running = { name: 'leader-election', promise: election, done: false };
    void election.then(() => (electionEntry.done = true));
    if ((await this.waitFor([electionEntry], releaseBy)).length > 0) {
      timedOut = true;
      this.log.error('timed out releasing the leader election lease');
    }

    this.otherAc.abort();
    const stuckOther = await this.waitFor(this.running.other, deadline);
    if (stuckOther.length > 0) {
      timedOut = true;
      this.log.error({ runnables: stuckOther }, 'graceful shutdown timed out waiting for runnables');
    }
    const code = reason.kind === 'failed' || timedOut ? exitFailure : exitOK;
    this.log.info({ exitCode: code }, 'stopped');
    return code;
  }

  private launch(r: Runnable, group: 'gated' | 'other'): void {
    const sig = group === 'gated' ? this.gatedAc.signal : this.otherAc.signal;
    const entry: Running = { name: r.name, promise: Promise.resolve(), done: false };
    this.log.debug({ runnable: r.name }, 'starting runnable');
    let started: Promise<void>;
    try {
      started = r.start(sig);
    } catch (err) {
      started = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    entry.promise = started
      .then(
        () => {
          if (!sig.aborted) this.log.info({ runnable: r.name }, 'runnable finished');
        },
        (err: unknown) => {
          this.log.error({ err, runnable: r.name }, 'runnable failed');
          this.stop({ kind: 'failed', name: r.name, err });
        },
      )
      .finally(() => {
        entry.done = true;
      });
    this.running[group].push(entry);
  }

  /** Waits until every entry is done or the deadline passes; returns the names still running. */
  private async waitFor(entries: Running[], deadline: number): Promise<string[]> {
    const remaining = deadline - this.clock.now();
    const all = Promise.all(entries.map((e) => e.promise));
    if (remaining > 0) {
      let timer: { cancel(): void } | undefined;
      const expired = new Promise<void>((resolve) => (timer = this.clock.setTimer(remaining, resolve)));
      await Promise.race([all, expired]);
      timer?.cancel();
    } else {
      await Promise.race([all, new Promise<void>((resolve) => setImmediate(resolve))]);
    }
    return entries.filter((e) => !e.done).map((e) => e.name);
  }
}

/** What installSignalHandlers needs from `process` (an EventEmitter fake in tests). */
export interface SignalSource {
  on(event: 'SIGTERM' | 'SIGINT', listener: (signal: NodeJS.Signals) => void): unknown;
  off(event: 'SIGTERM' | 'SIGINT', listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): void;
}

/**
 * The first SIGTERM/SIGINT aborts the returned signal (graceful shutdown); a second one exits with code 1 at once.
 * `dispose` removes the handlers.
 */
export function installSignalHandlers(proc: SignalSource, logger: Logger = silentLogger): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  const handler = (sig: NodeJS.Signals): void => {
    if (!ac.signal.aborted) {
      logger.info({ signal: sig }, 'received signal: shutting down gracefully (send again to exit immediately)');
      ac.abort(new Error(`received ${sig}`));
      return;
    }
    logger.warn({ signal: sig }, 'received second signal: exiting immediately');
    proc.exit(exitFailure);
  };
  proc.on('SIGTERM', handler);
  proc.on('SIGINT', handler);
  return {
    signal: ac.signal,
    dispose: () => {
      proc.off('SIGTERM', handler);
      proc.off('SIGINT', handler);
    },
  };
}
