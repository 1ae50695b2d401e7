/**
 * Manager: starts Runnables, gates controllers on leadership and cache sync, and shuts everything down in order.
 *
 * Lifecycle (one `start` per Manager):
 *  1. Runnables with `needLeaderElection: false` (informers, health/metrics servers) start at once, and so does the
 *     leader election campaign (if configured) and the `waitForCacheSync` hook.
 *  2. Leader-gated runnables (controllers) start once BOTH this replica leads (immediately when leader election is
 *     off) AND `waitForCacheSync` resolved (true/undefined). `false` or a rejection is fatal, and so is not syncing
 *     within `cacheSyncTimeoutMs` of becoming leader (controller-runtime's CacheSyncTimeout, default 2 min; the
 *     error names the caches from `unsyncedCaches()`), so a leader never holds the Lease with no controllers.
 *  3. Shutdown, when the signal aborts or a runnable fails (rejects):
 *       a. abort leader-gated runnables (they stop handing out keys; their reconciles' signals abort) and wait,
 *       b. then `afterGatedStopped`: a BEST-EFFORT flush of what they queued (Events). It gets the time up to the
 *          flush deadline — the graceful deadline minus the release's share, min(`releaseGraceMs`, half the
 *          timeout) — and is then told to abandon (its signal aborts) and must stop within `abandonGraceMs`
 *          WITHOUT waiting for writes in flight. An abandoned flush is not a failure (exit code stays 0): Events
 *          never hold the Lease (docs/safety.md, "Shutdown"),
 *       c. then stop the election, which releases the lease ONLY if a and b completed — client-go's ReleaseOnCancel
 *          contract: the Lease is released only when no guarded work runs (guarded work = the leader-gated
 *          runnables and their reconciles' writes; a flush that did not stop when told to also counts). Otherwise it
 *          is left to expire,
 *       d. then abort the remaining runnables (informers, servers) and wait for them.
 *     One deadline, `gracefulShutdownTimeoutMs`, covers a–d; runnables still running when it passes are named in the
 *     log and the exit code becomes 1. The lease release gets at least `releaseGraceMs` even past the deadline.
 *     Exit code 0 after a clean shutdown on the signal; 1 after a runnable failure or a timeout.
 *  4. Losing the lease — the leadership signal from `onStartedLeading` aborting (the instant the elector can no longer
 *     prove it leads) or the campaign resolving "lost" — at ANY time, also in the middle of a graceful shutdown:
 *     leader-gated and all other runnables are aborted WITHOUT waiting, and `start` resolves 1 at once. The caller
 *     must exit the process immediately (no chance for two leaders to act).
 *
 * `start` never rejects. Runnables added after `start` begin as their group allows; adding during shutdown throws.
 */
import { type Logger, silentLogger } from '../log/logger.ts';
import { type Clock, realClock } from '../util/clock.ts';
import type { LeaderElection } from './leaderelection.ts';
import type { Runnable } from './runnable.ts';

/** Exit code of a clean shutdown. */
export const exitOK = 0;
/** How long an abandoned flush (Events) may take to stop before the lease is kept unreleased. */
const abandonGraceMs = 1_000;
/** Exit code of a failed run: a runnable, the leader election or the cache sync failed, or shutdown timed out. */
export const exitFailure = 1;

/** Options of `new Manager(opts)`. */
export interface ManagerOptions {
  /** Leader election; undefined = off (leader-gated runnables start as soon as caches sync). */
  leaderElection?: LeaderElection;
  /**
   * Resolves when the informer caches the controllers read from are synced (false = gave up). Called once at start
   * with a signal that aborts when shutdown begins. Undefined = nothing to wait for.
   */
  waitForCacheSync?: (signal: AbortSignal) => Promise<boolean | void>;
  /** How long a graceful shutdown waits for the runnables to stop before it gives up (exit 1). */
  gracefulShutdownTimeoutMs: number;
  /**
   * How long, from becoming leader (from start without leader election), the caches may take to sync before that
   * is fatal. Default 2 min (controller-runtime's CacheSyncTimeout). 0 = no limit.
   */
  cacheSyncTimeoutMs?: number;
  /**
   * The caches not synced yet, one line each naming the resource (and why, when known: the informer's last request
   * failure), for the cache-sync timeout error: SharedInformerFactory.unsyncedCaches.
   */
  unsyncedCaches?: () => string[];
  /**
   * Called once on a graceful shutdown after the leader-gated runnables stopped, before the lease is released: flush
   * what they queued (Events), best effort. Its signal aborts at the flush deadline (see step 3b) or on loss: then
   * resolve at once, without waiting for writes in flight.
   */
  afterGatedStopped?: (signal: AbortSignal) => Promise<void>;
  /** Minimum time given to the lease release even when the graceful deadline has passed (default 5 s). */
  releaseGraceMs?: number;
  /** The clock of its timers and time measurements (default the real one; a fake in tests). */
  clock?: Clock;
  /** Where it logs (default nowhere). */
  logger?: Logger;
}

type StopReason = { kind: 'signal' } | { kind: 'lost' } | { kind: 'failed'; name: string; err: unknown };

interface Running {
  name: string;
  promise: Promise<unknown>;
  done: boolean;
  /** The runnable's `stillRunning` (Runnable contract): done but with abandoned work still running. */
  stillRunning?: () => boolean;
}

/**
 * Starts Runnables, gates leader-election runnables (controllers) on leadership and cache sync, and shuts everything
 * down in order (see the file comment for the lifecycle). One `start` per Manager.
 */
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
  private lost = false;
  private lose: () => void = () => {};
  private failureErr: Error | undefined;

  /** Starts nothing: add runnables, then start(signal). */
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

  /** The error behind a failure shutdown (a runnable that failed, the cache-sync timeout), if any. */
  failure(): Error | undefined {
    return this.failureErr;
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
        if (reason.kind === 'failed') {
          this.failureErr = reason.err instanceof Error ? reason.err : new Error(String(reason.err));
        }
        resolve(reason);
      };
    });
    const lostLeadership = new Promise<'lost'>((resolve) => {
      this.lose = () => {
        if (this.lost) return;
        this.lost = true;
        // Synchronously, in the same tick as the leadership signal: controllers abort their reconciles' signals
        // before any other callback can start I/O.
        this.gatedAc.abort(new Error('leader election lost'));
        resolve('lost');
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
    let gatedStopped = false;
    const le = this.opts.leaderElection;
    if (le) {
      election = le
        .run(electionAc.signal, {
          onStartedLeading: (leadership) => {
            this.log.info({ lease: le.name }, 'became leader');
            // The instant the elector can no longer prove leadership. After a stop of the campaign (release or
            // not) the abort is expected; before it, it is a loss.
            leadership.addEventListener('abort', () => {
              if (!electionAc.signal.aborted) this.lose();
            }, { once: true });
            if (leadership.aborted && !electionAc.signal.aborted) this.lose();
            elected();
          },
          mayRelease: () => gatedStopped && !this.lost,
        })
        .then(
          (result) => {
            if (result === 'lost') this.lose();
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
    let syncDone = false;
    void synced.then(() => (syncDone = true));
    let syncTimer: { cancel(): void } | undefined;
    const syncTimeoutMs = this.opts.cacheSyncTimeoutMs ?? 120_000;
    void leading.then(() => {
      if (syncDone || this.stopping || !(syncTimeoutMs > 0)) return;
      syncTimer = this.clock.setTimer(syncTimeoutMs, () => {
        if (syncDone || this.stopping) return;
        const names = this.opts.unsyncedCaches?.() ?? [];
        const err = new Error(`timed out waiting for cache sync after ${formatMs(syncTimeoutMs)}${names.length ? `: not synced: ${names.join(', ')}` : ''}`);
        syncAc.abort(err);
        this.stop({ kind: 'failed', name: 'cache-sync', err });
      });
    });
    void Promise.all([leading, synced]).then(([, ok]) => {
      syncTimer?.cancel();
      if (this.stopping) return;
      if (!ok) {
        const names = this.opts.unsyncedCaches?.() ?? [];
        this.stop({ kind: 'failed', name: 'cache-sync', err: new Error(`caches did not sync${names.length ? `: not synced: ${names.join(', ')}` : ''}`) });
        return;
      }
      this.gateOpen = true;
      this.log.info('starting leader-election runnables');
      const gated = this.pending.filter((p) => p.needLeaderElection);
      this.pending.length = 0;
      for (const r of gated) this.launch(r, 'gated');
    });

    const first = await Promise.race([stopped, lostLeadership]);
    signal.removeEventListener('abort', onAbort);
    syncAc.abort();
    syncTimer?.cancel();
    if (first === 'lost') return this.exitOnLoss();

    // A loss at any point of the graceful sequence ends it at once (issue 11 item 3).
    const outcome = await Promise.race([
      this.gracefulShutdown(first, electionAc, election, () => (gatedStopped = true)),
      lostLeadership,
    ]);
    if (outcome === 'lost') return this.exitOnLoss();
    return outcome;
  }

  /** Leadership lost: abort everything, do not wait for anything; the caller exits the process. */
  private exitOnLoss(): number {
    this.stopping = true;
    this.log.error('leader election lost: stopping controllers and exiting');
    this.gatedAc.abort(new Error('leader election lost'));
    this.otherAc.abort(new Error('leader election lost'));
    return exitFailure;
  }

  private async gracefulShutdown(
    reason: StopReason, electionAc: AbortController, election: Promise<unknown>, markGatedStopped: () => void,
  ): Promise<number> {
    if (reason.kind === 'failed') this.log.error({ err: reason.err, runnable: reason.name }, 'runnable failed: shutting down');
    else this.log.info('shutdown signal received: stopping');
    const deadline = this.clock.now() + this.opts.gracefulShutdownTimeoutMs;
    let timedOut = false;

    this.gatedAc.abort(new Error('shutting down'));
    const stuckGated = await this.waitFor(this.running.gated, deadline);
    if (stuckGated.length > 0) {
      timedOut = true;
      this.log.error({ runnables: stuckGated }, 'graceful shutdown timed out waiting for leader-election runnables; the lease will not be released');
    } else if (this.opts.afterGatedStopped) {
      const flushAc = new AbortController();
      const entry: Running = { name: 'flush events', promise: Promise.resolve(), done: false };
      entry.promise = this.opts.afterGatedStopped(flushAc.signal)
        .catch((err: unknown) => this.log.error({ err }, 'flushing events failed'))
        .finally(() => (entry.done = true));
      // The release's share of the graceful timeout is kept free: Events are best effort (step 3b).
      const releaseShare = Math.min(this.opts.releaseGraceMs ?? 5_000, this.opts.gracefulShutdownTimeoutMs / 2);
      if ((await this.waitFor([entry], deadline - releaseShare)).length > 0) {
        flushAc.abort(new Error('event flush deadline'));
        // Abandoning is prompt for a well-behaved flush; one that does not stop keeps the lease unreleased.
        if ((await this.waitFor([entry], this.clock.now() + abandonGraceMs)).length > 0) {
          timedOut = true;
          this.log.error('flushing events did not stop when abandoned; the lease will not be released');
        } else {
          this.log.warn('event flush deadline passed: queued and in-flight Events abandoned (best effort); releasing the lease');
        }
      }
      if (entry.done && !this.lost) markGatedStopped();
    } else if (!this.lost) {
      markGatedStopped();
    }

    electionAc.abort();
    const releaseBy = Math.max(deadline, this.clock.now() + (this.opts.releaseGraceMs ?? 5_000));
    const electionEntry: Running = { name: 'leader-election', promise: election, done: false };
    void election.then(() => (electionEntry.done = true));
    if ((await this.waitFor([electionEntry], releaseBy)).length > 0) {
      timedOut = true;
      this.log.error('timed out releasing the leader election lease');
    }

    this.otherAc.abort(new Error('shutting down'));
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
    const entry: Running = { name: r.name, promise: Promise.resolve(), done: false, ...(r.stillRunning ? { stillRunning: () => r.stillRunning?.() === true } : {}) };
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
    // Done with abandoned work still running (a controller past its own graceful timeout) counts as still running.
    return entries.filter((e) => !e.done || e.stillRunning?.() === true).map((e) => e.name);
  }
}

/** "2m0s"-style duration for messages. */
function formatMs(ms: number): string {
  const m = Math.floor(ms / 60_000);
  const sec = (ms % 60_000) / 1000;
  return m > 0 ? `${m}m${sec}s` : `${sec}s`;
}

export { installSignalHandlers, type SignalHandlers, type SignalSource } from './signals.ts';
