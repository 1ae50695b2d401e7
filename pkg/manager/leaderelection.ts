/**
 * Lease-based leader election (coordination.k8s.io/v1), with client-go's semantics.
 *
 * THE LEADERSHIP INVARIANT (what "leader" means here, and when it stops acting):
 *   This process leads from the successful write that acquired the Lease until the first of:
 *     (a) `lastRenewStart + renewDeadline` on the local Clock, where lastRenewStart is the moment the last
 *         SUCCESSFUL acquire/renew request was STARTED (a timer fires at that instant; no loop iteration, sleep or
 *         slow answer can stretch it),
 *     (b) a read showing another holder in a still-valid record,
 *     (c) the campaign being stopped (`run`'s signal) — just before the release write, or without one.
 *   At that instant the term's leadership AbortSignal (handed to `onStartedLeading`) aborts and `isLeader()` turns
 *   false. Everything that acts as leader must hang off that signal: the Manager aborts its controllers and exits
 *   (on loss), reconciles' signals abort, the guarded RestClient refuses every write (`writeGate`), and the event
 *   broadcaster abandons its queue. From that moment this process makes no further guarded API write, and after a
 *   loss it exits (cmd/manager) within renewDeadline + 2 s of the last successful renewal's start.
 *   Why this is safe: every other candidate judges expiry from the local time at which IT observed our last write,
 *   which is no earlier than the write's start, so it cannot acquire before `lastRenewStart + leaseDuration`; with
 *   `leaseDuration > renewDeadline` (the flags require `> renewDeadline + retryPeriod` for extra margin) we stop
 *   first — assuming clock RATES, not clock values, agree.
 *
 * Other contracts:
 *  - Expiry of someone else's lease is judged ONLY by this process's Clock: a lease record is considered valid until
 *    `observedTime + leaseDurationSeconds`, where `observedTime` is the local Clock reading at which this process last
 *    saw the record (holder, times, duration, transitions) change. Timestamps written by other holders are never
 *    compared with the local clock, so clock skew between machines cannot make a lease look expired early.
 *  - Writes use optimistic concurrency: updates carry the resourceVersion that was read; a 409 (or any error) just
 *    means "try again next retry period". Of two candidates racing for a free lease, at most one update succeeds.
 *  - Acquire: try every `retryPeriod × (1 + 1.2·rand)` until the lease is free/expired/ours and our write wins.
 *  - Standby watch (a HINT, never a proof): after its first unsuccessful attempt, a standby whose LeaseClient offers
 *    `watchReleases` watches its one Lease until it leads or its campaign stops (never while leading). An event
 *    showing the Lease released (holderIdentity "") or deleted cuts the current retry sleep short (or, arriving
 *    during an attempt, skips the next sleep) and the standby attempts at once — through the same
 *    `tryAcquireOrRenew`: a fresh GET, the same expiry rule (`observedTime` is set only from what attempts read, as
 *    without the watch; watch events never touch it), the same resourceVersion-guarded write. So the watch can make
 *    an attempt earlier, never make one succeed that would not have succeeded at that moment without it: safety is
 *    exactly that of polling. A watch event showing another holder wakes nobody. Watch failures (errors, 410 Gone,
 *    the stream's end) restart it on the elector's Clock — at once after a session that lasted
 *    ≥ `watchResetMs`, else after a backoff doubling from 1 s to 30 s — logged at info for the first failure in a
 *    row, debug after; polling goes on meanwhile, so the watch never breaks (or delays) the election.
 *  - Renew: every `retryPeriod` after the last success, but never sleeping past the deadline of (a); each attempt is
 *    bounded by that deadline. Stricter than client-go, which measures from a later point. After an attempt that got
 *    no answer at the connection level (refused, reset: `isConnectionFailure`), a LeaseClient offering
 *    `onServerAnswer` ends the retry sleep at the server's next answer to any request of the process, so a cut
 *    shorter than the deadline does not cost the Lease for want of an attempt between the reconnection and the
 *    deadline (the endurance bench's 7 s cuts did, 3 times in 6). A HINT like the standby watch: the attempt it makes
 *    earlier is the same guarded write, so safety is that of polling; at most one early attempt per failed one, and
 *    none after a failure that was an answer (a 409 or 500 retries at the retry period, whatever else answers).
 *  - Release on cancel (client-go's ReleaseOnCancel): when `run`'s signal aborts while leading, the elector asks
 *    `callbacks.mayRelease()` — true only when no guarded work runs any more — and if so writes holderIdentity "" and
 *    leaseDurationSeconds 1 so a standby takes over at once. If not, it writes nothing and the lease expires on its
 *    own. After a loss it never writes: the lease is no longer ours.
 *  - In-flight renew requests are not cut short by `run`'s signal (they are bounded by the renew deadline), so the
 *    release that follows works from an up-to-date resourceVersion.
 *  - `leader_election_master_status{name}` is 1 exactly while `isLeader()` is true, else 0.
 *
 * Concurrency: one `run` per elector (a process has at most one leadership term: after a loss it exits); the
 * LeaseClient is only used from within `run`.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { Gauge, type Registry } from 'prom-client';
import { ApiError, isNotFound, type RestClient } from '../client/rest.ts';
import { isConnectionFailure } from '../client/reachability.ts';
import { RestListWatcher } from '../informerfactory/listwatch.ts';
import { coreResources } from '../apimachinery/resource.ts';
import type { Status } from '../informerfactory/watchdecoder.ts';
import type * as coordinationv1 from '../api/coordination/v1/zz_generated.types.ts';
import type { ObjectMeta } from '../api/meta/v1/zz_generated.types.ts';
import { type Logger, silentLogger } from '../log/logger.ts';
import { getOrCreate, globalRegistry } from '../metrics/registry.ts';
import { type Clock, realClock } from '../util/clock.ts';

/** coordination.k8s.io/v1 LeaseSpec (generated, pkg/api); acquireTime and renewTime are MicroTime: RFC 3339 with 6 fractional digits. */
export type LeaseSpec = coordinationv1.LeaseSpec;

/** coordination.k8s.io/v1 Lease (generated, pkg/api), with the name the elector always knows. */
export interface Lease extends Omit<coordinationv1.Lease, 'metadata'> {
  metadata: ObjectMeta & { name: string };
}

/**
 * Storage of one Lease object. `get` resolves undefined when the Lease does not exist; `update` must fail when the
 * stored resourceVersion differs from `lease.metadata.resourceVersion`; `create` must fail when the Lease exists.
 */
export interface LeaseClient {
  /** "namespace/name", for logs. */
  readonly description: string;
  get(signal?: AbortSignal): Promise<Lease | undefined>;
  create(lease: Lease, signal?: AbortSignal): Promise<Lease>;
  update(lease: Lease, signal?: AbortSignal): Promise<Lease>;
  /**
   * Optional: ONE watch session on the Lease, for a standby's wake-ups (see "Standby watch" above). Reads the Lease's
   * current state first and calls `onRelease` if it is absent or released (so nothing released between an elector's
   * poll and the watch's start is missed), then streams its changes from that state's resourceVersion, calling
   * `onRelease` for every event showing it released (holderIdentity "") or deleted — and for nothing else. Resolves
   * when the stream ends normally, rejects on any failure (including an ERROR event such as 410 Gone); the caller
   * restarts it. Aborting `signal` ends it promptly (resolving or rejecting). Fakes may leave it out: the elector then
   * only polls.
   */
  watchReleases?(onRelease: () => void, signal: AbortSignal): Promise<void>;
  /**
   * Optional: calls `listener` after each later answer of the API server (any status) to any request on this
   * client's connection, until the returned function is called (RestClient.reachability). The renew loop retries at
   * the next answer after a connection-level failure (see "Renew" above). Fakes may leave it out.
   */
  onServerAnswer?(listener: () => void): () => void;
}

/** True when a Lease record has no holder (released, or never held). */
export function isReleased(lease: Lease | undefined): boolean {
  return (lease?.spec?.holderIdentity ?? '') === '';
}

/**
 * LeaseClient over the API server: GET/POST/PUT /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME], and
 * `watchReleases` as a GET of the Lease then a watch of the collection with `fieldSelector=metadata.name=NAME` from
 * the resourceVersion read (RestListWatcher's watch: the same client, so the same shared Transport and its one
 * HTTP/2 connection; RBAC: `watch` on leases next to get/create/update).
 */
export class RestLeaseClient implements LeaseClient {
  readonly description: string;
  readonly onServerAnswer?: (listener: () => void) => () => void;
  private readonly rest: Pick<RestClient, 'json' | 'request'>;
  private readonly namespace: string;
  private readonly name: string;
  private readonly watcher: RestListWatcher;

  /** `rest.reachability`, when the client has one (a RestClient does), gives `onServerAnswer`. */
  constructor(rest: Pick<RestClient, 'json' | 'request'> & Partial<Pick<RestClient, 'reachability'>>, namespace: string, name: string) {
    this.rest = rest;
    const reachability = rest.reachability;
    if (reachability) this.onServerAnswer = (listener) => reachability.subscribe(listener);
    this.namespace = namespace;
    this.name = name;
    this.description = `${namespace}/${name}`;
    this.watcher = new RestListWatcher({ client: rest, resource: coreResources.leases, namespace, fieldSelector: `metadata.name=${name}` });
  }

  private collection(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.namespace)}/leases`;
  }

  async get(signal?: AbortSignal): Promise<Lease | undefined> {
    try {
      return await this.rest.json<Lease>('GET', `${this.collection()}/${encodeURIComponent(this.name)}`, { signal });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  create(lease: Lease, signal?: AbortSignal): Promise<Lease> {
    const body: Lease = {
      ...lease,
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { ...lease.metadata, name: this.name, namespace: this.namespace },
    };
    return this.rest.json<Lease>('POST', this.collection(), { body, signal });
  }

  update(lease: Lease, signal?: AbortSignal): Promise<Lease> {
    const body: Lease = { ...lease, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' };
    return this.rest.json<Lease>('PUT', `${this.collection()}/${encodeURIComponent(this.name)}`, { body, signal });
  }

  /**
   * See LeaseClient.watchReleases. The server ends the stream after 5–10 min (timeoutSeconds, jittered). When the
   * resourceVersion read is too old for the server's watch window (410 Gone — a Lease nobody wrote for a while), the
   * session watches from "now" instead (no resourceVersion: the server first sends the Lease's current state as
   * ADDED), so an unchanged Lease cannot keep the watch failing.
   */
  async watchReleases(onRelease: () => void, signal: AbortSignal): Promise<void> {
    const current = await this.get(signal);
    if (isReleased(current)) onRelease();
    const rv = current?.metadata.resourceVersion ?? '';
    try {
      await this.stream(rv, onRelease, signal);
    } catch (err) {
      if (rv === '' || !(err instanceof ApiError && err.status === 410) || signal.aborted) throw err;
      await this.stream('', onRelease, signal);
    }
  }

  private async stream(resourceVersion: string, onRelease: () => void, signal: AbortSignal): Promise<void> {
    const events = await this.watcher.watch({ resourceVersion, timeoutSeconds: Math.round(300 * (1 + Math.random())), sendInitialEvents: false, signal });
    for await (const ev of events) {
      if (ev.type === 'ERROR') {
        const st = ev.object as Status;
        throw new ApiError(st.code ?? 0, st.reason ?? 'Unknown', `watch ${this.description}: ${st.message ?? 'ERROR event'}`, st);
      }
      if (ev.type === 'DELETED' || ((ev.type === 'ADDED' || ev.type === 'MODIFIED') && isReleased(ev.object as Lease))) onRelease();
    }
  }
}

/** hostname + "_" + random UUID: unique per process, so a restarted pod never mistakes the old lease for its own. */
export function defaultIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}

/** Formats a wall-clock time as a Kubernetes MicroTime ("2006-01-02T15:04:05.000000Z"). */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export interface LeaderCallbacks {
  /**
   * Called once when this process becomes leader, with the term's leadership signal: it aborts at the instant this
   * process can no longer prove it holds the Lease (see the invariant above), and just before a release.
   */
  onStartedLeading?: (leadership: AbortSignal) => void;
  /**
   * Asked once when `run`'s signal aborted while leading: may the Lease be released now? Return true only when no
   * guarded work runs any more (client-go's ReleaseOnCancel contract). Default: true.
   */
  mayRelease?: () => boolean;
  /** Called once when leadership ends (lost, or released on cancel), after the release write. */
  onStoppedLeading?: () => void;
  /** Called whenever the observed holder changes (including to ourselves); "" = nobody. */
  onNewLeader?: (identity: string) => void;
}

/** How `run` ended: "stopped" = its signal aborted (lease released if we led and mayRelease allowed); "lost" = leadership lost. */
export type ElectionResult = 'stopped' | 'lost';

/** What the Manager needs from leader election (the LeaderElector, or a fake in tests). */
export interface LeaderElection {
  /** The Lease's name. */
  readonly name: string;
  /**
   * Campaigns until `signal` aborts or leadership is lost. Never rejects for expected failures (API errors are
   * retried). Resolves "stopped" after releasing the lease if the signal aborted, "lost" if leadership was lost.
   */
  run(signal: AbortSignal, callbacks?: LeaderCallbacks): Promise<ElectionResult>;
  /** Whether this replica holds the Lease now. */
  isLeader(): boolean;
}

export interface LeaderElectorOptions {
  lock: LeaseClient;
  /** Label value of `leader_election_master_status{name}`; usually the lease name. */
  name: string;
  /** Defaults to `defaultIdentity()`. */
  identity?: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Default true: write an immediately expirable record when `run`'s signal aborts while leading. */
  releaseOnCancel?: boolean;
  /** Extra time past leaseDuration before the watchdog check fails (default 10 s). */
  watchdogToleranceMs?: number;
  clock?: Clock;
  /** Wall clock for the timestamps written into the record (informational only). Default `() => new Date()`. */
  wallClock?: () => Date;
  /** Jitter source in [0, 1) for the acquire period. Default Math.random. */
  random?: () => number;
  /** A standby's Lease watch session that lasted at least this long restarts at once, else after a backoff (default 30 s). */
  watchResetMs?: number;
  logger?: Logger;
  registry?: Registry;
}

/** client-go's JitterFactor for the acquire loop. */
const jitterFactor = 1.2;
/** Backoff between failed standby watch sessions: doubles from the first to the last. */
const watchBackoffMinMs = 1_000;
const watchBackoffMaxMs = 30_000;

function recordKey(spec: LeaseSpec | undefined): string {
  const s = spec ?? {};
  return JSON.stringify([s.holderIdentity ?? '', s.leaseDurationSeconds ?? 0, s.acquireTime ?? '', s.renewTime ?? '', s.leaseTransitions ?? 0]);
}

function masterStatus(registry: Registry): Gauge<'name'> {
  return getOrCreate(registry, 'leader_election_master_status', () => new Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. \'name\' is the string used to identify the lease. Please make sure to group by name.',
    labelNames: ['name'] as const,
    registers: [registry],
  }));
}

/**
 * Lease-based leader election with client-go's semantics; see the file comment for the leadership invariant (the
 * term's signal aborts before any other candidate can acquire the Lease).
 */
export class LeaderElector implements LeaderElection {
  /** The Lease's name. */
  readonly name: string;
  /** This replica's holder identity in the Lease. */
  readonly identity: string;
  private readonly lock: LeaseClient;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly releaseOnCancel: boolean;
  private readonly watchdogToleranceMs: number;
  private readonly clock: Clock;
  private readonly wallClock: () => Date;
  private readonly random: () => number;
  private readonly watchResetMs: number;
  private readonly log: Logger;
  private readonly gauge: Gauge<'name'>;

  private leading = false;
  private running = false;
  private ran = false;
  /** The one leadership term of this elector: aborted at the instant leadership ends (see the invariant). */
  private readonly termAc = new AbortController();
  /** Set once the term began (leading). */
  private term: AbortController | undefined;
  /** Fires at lastRenewStart + renewDeadline while leading. */
  private termTimer: { cancel(): void } | undefined;
  /** The last Lease we read or wrote, and the local Clock time at which its record last changed. */
  private observed: Lease | undefined;
  private observedTime = 0;
  /** The error of the last failed acquire/renew request (undefined after a success or a refusal we decided). */
  private lastFailure: unknown;
  /** Clock time at which the last successful acquire/renew request was started. */
  private lastRenewStart = 0;
  private callbacks: LeaderCallbacks = {};
  /** Last holder passed to onNewLeader ("" initially: a free lease is not news). */
  private reportedLeader = '';
  /** Standby only: set by the Lease watch when it saw a release; consumed by the acquire loop. */
  private releaseHint = false;
  /** Standby only: cuts the current retry sleep short (set while the acquire loop sleeps). */
  private wake: (() => void) | undefined;

  /** Campaigns for nothing yet (run() does). Throws unless leaseDuration > renewDeadline > 1.2 × retryPeriod > 0. */
  constructor(opts: LeaderElectorOptions) {
    if (!(opts.leaseDurationMs > opts.renewDeadlineMs)) throw new Error('leaseDuration must be greater than renewDeadline');
    if (!(opts.renewDeadlineMs > jitterFactor * opts.retryPeriodMs)) throw new Error('renewDeadline must be greater than 1.2 × retryPeriod');
    if (!(opts.retryPeriodMs > 0)) throw new Error('retryPeriod must be positive');
    this.lock = opts.lock;
    this.name = opts.name;
    this.identity = opts.identity ?? defaultIdentity();
    this.leaseDurationMs = opts.leaseDurationMs;
    this.renewDeadlineMs = opts.renewDeadlineMs;
    this.retryPeriodMs = opts.retryPeriodMs;
    this.releaseOnCancel = opts.releaseOnCancel ?? true;
    this.watchdogToleranceMs = opts.watchdogToleranceMs ?? 10_000;
    this.clock = opts.clock ?? realClock;
    this.wallClock = opts.wallClock ?? (() => new Date());
    this.random = opts.random ?? Math.random;
    this.watchResetMs = opts.watchResetMs ?? 30_000;
    this.log = (opts.logger ?? silentLogger).child({ component: 'leader-election', lease: opts.lock.description, identity: this.identity });
    this.gauge = masterStatus(opts.registry ?? globalRegistry);
    this.gauge.set({ name: this.name }, 0);
  }

  /** Whether this replica holds the Lease now. */
  isLeader(): boolean {
    return this.leading;
  }

  /**
   * The leadership signal of this elector's one term (the same one `onStartedLeading` receives), usable before the
   * campaign starts — e.g. as a RestClient `writeGate`. Not aborted while campaigning or leading; aborted at the
   * instant leadership ends (see the invariant), or when the campaign ends without ever leading.
   */
  get leadership(): AbortSignal {
    return this.termAc.signal;
  }

  /** Identity of the holder in the last observed record ("" = none / unknown). */
  leader(): string {
    return this.observed?.spec?.holderIdentity ?? '';
  }

  /**
   * Healthz check (client-go's HealthzAdaptor): throws when this elector led and its campaign is still running but
   * has not renewed for longer than leaseDuration + tolerance — i.e. the renew loop is wedged (leadership itself
   * already ended at the renew deadline; this makes the wedge visible to the kubelet).
   */
  watchdog(): void {
    if (!this.running || !this.term) return;
    const since = this.clock.now() - this.lastRenewStart;
    if (since > this.leaseDurationMs + this.watchdogToleranceMs) {
      throw new Error(`leader has not renewed lease ${this.lock.description} for ${Math.round(since / 1000)}s`);
    }
  }

  async run(signal: AbortSignal, callbacks: LeaderCallbacks = {}): Promise<ElectionResult> {
    if (this.running) throw new Error('LeaderElector.run is already running');
    if (this.ran) throw new Error('LeaderElector.run can be called once (one leadership term per elector)');
    this.running = true;
    this.ran = true;
    this.callbacks = callbacks;
    try {
      this.log.info('attempting to acquire leader lease');
      if (!(await this.acquire(signal))) return 'stopped';
      const term = this.startTerm();
      this.log.info('successfully acquired lease');
      this.call(() => callbacks.onStartedLeading?.(term.signal));
      const result = await this.renewLoop(signal, term.signal);
      if (result === 'lost') {
        this.endTerm(new Error('leader election lost'));
        this.log.error('leader election lost');
      } else if (!term.signal.aborted && this.releaseOnCancel && this.mayRelease(callbacks)) {
        this.endTerm(new Error('leader election stopped: releasing the lease'));
        // Logged when leadership ended, before the release write: another candidate may log its acquisition before
        // this process has read the release's answer ("released leader lease"), never before this line.
        this.log.info('stopped leading: releasing the lease');
        await this.release();
      } else {
        if (!term.signal.aborted && this.releaseOnCancel) this.log.warn('not releasing the lease: guarded work is still running; it expires on its own');
        this.endTerm(new Error('leader election stopped'));
      }
      this.call(() => callbacks.onStoppedLeading?.());
      return result;
    } finally {
      this.endTerm(new Error('leader election ended'));
      this.running = false;
    }
  }

  private mayRelease(callbacks: LeaderCallbacks): boolean {
    try {
      return callbacks.mayRelease?.() ?? true;
    } catch (err) {
      this.log.error({ err }, 'mayRelease callback threw; not releasing');
      return false;
    }
  }

  /** Begins a term after a successful acquisition: leading, and the deadline timer armed. */
  private startTerm(): AbortController {
    const term = this.termAc;
    this.term = term;
    this.setLeading(true);
    this.armDeadline();
    return term;
  }

  /** (Re)arms the timer that ends the term at lastRenewStart + renewDeadline. */
  private armDeadline(): void {
    this.termTimer?.cancel();
    const due = this.lastRenewStart + this.renewDeadlineMs - this.clock.now();
    this.termTimer = this.clock.setTimer(Math.max(0, due), () => {
      this.log.warn({ renewDeadlineMs: this.renewDeadlineMs }, 'failed to renew lease within the renew deadline');
      this.endTerm(new Error(`leadership lost: lease not renewed within the renew deadline (${this.renewDeadlineMs} ms)`));
    });
  }

  /** Ends the current term (idempotent): not leading from this instant, leadership signal aborted. */
  private endTerm(reason: Error): void {
    this.termTimer?.cancel();
    this.termTimer = undefined;
    this.setLeading(false);
    if (!this.termAc.signal.aborted) this.termAc.abort(reason);
  }

  private setLeading(v: boolean): void {
    this.leading = v;
    this.gauge.set({ name: this.name }, v ? 1 : 0);
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ err }, 'leader election callback threw');
    }
  }

  /**
   * Tries until acquired (true) or the signal aborts (false). After the first unsuccessful attempt the standby's
   * Lease watch (if the LeaseClient has one) runs until this returns; a release it sees wakes the loop early.
   */
  private async acquire(signal: AbortSignal): Promise<boolean> {
    const standby = new AbortController();
    let watching = false;
    try {
      for (;;) {
        if (signal.aborted) return false;
        // A release seen before this attempt's GET is reflected by the GET itself.
        this.releaseHint = false;
        const attempt = this.deadline(this.renewDeadlineMs, signal);
        const ok = await this.tryAcquireOrRenew(attempt.signal).finally(attempt.cancel);
        if (ok) return true;
        if (signal.aborted) return false;
        if (!watching) {
          watching = true;
          void this.watchReleases(AbortSignal.any([signal, standby.signal]));
        }
        // A release seen while the attempt ran (possibly after its GET): attempt again at once.
        if (this.releaseHint) {
          this.log.debug('lease release seen during the attempt: retrying at once');
          continue;
        }
        if (!(await this.standbySleep(this.retryPeriodMs * (1 + jitterFactor * this.random()), signal))) return false;
      }
    } finally {
      standby.abort(new Error('standby ended'));
      this.wake = undefined;
    }
  }

  /** The acquire loop's retry sleep, cut short by a release hint. Resolves false when `signal` aborted. */
  private async standbySleep(ms: number, signal: AbortSignal): Promise<boolean> {
    const cut = new AbortController();
    const onAbort = (): void => cut.abort(signal.reason);
    if (signal.aborted) return false;
    signal.addEventListener('abort', onAbort, { once: true });
    this.wake = () => cut.abort(new Error('lease released'));
    try {
      await this.clock.sleep(ms, cut.signal);
    } catch {
      // woken by a release hint, or stopped: told apart below
    } finally {
      this.wake = undefined;
      signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) return false;
    if (cut.signal.aborted) this.log.info('lease released: attempting to acquire it now');
    return true;
  }

  /** Called by the Lease watch for a released/deleted Lease: wakes the acquire loop (a hint; see the contract). */
  private onReleaseSeen(): void {
    this.releaseHint = true;
    this.wake?.();
  }

  /**
   * The standby's Lease watch: sessions of `lock.watchReleases`, restarted until `signal` aborts (the standby leads
   * or its campaign stopped). Never rejects; failures are logged at info (first in a row) or debug.
   */
  private async watchReleases(signal: AbortSignal): Promise<void> {
    const lock = this.lock;
    if (!lock.watchReleases) return;
    const onRelease = (): void => {
      if (!signal.aborted) this.onReleaseSeen();
    };
    let backoffMs = 0;
    let failures = 0;
    while (!signal.aborted) {
      const began = this.clock.now();
      try {
        await lock.watchReleases(onRelease, signal);
        if (signal.aborted) return;
        failures = 0;
        this.log.debug('lease watch ended; restarting it');
      } catch (err) {
        if (signal.aborted) return;
        failures++;
        if (failures === 1) this.log.info({ err }, 'lease watch failed (polling goes on); restarting it');
        else this.log.debug({ err, failures }, 'lease watch failed again (polling goes on); restarting it');
      }
      backoffMs = this.clock.now() - began >= this.watchResetMs ? 0 : Math.min(watchBackoffMaxMs, backoffMs > 0 ? backoffMs * 2 : watchBackoffMinMs);
      if (backoffMs > 0) {
        try {
          await this.clock.sleep(backoffMs, signal);
        } catch {
          return;
        }
      }
    }
  }

  /**
   * Renews every retryPeriod (never sleeping past the term's deadline); returns "lost" (the term ended: deadline or
   * another holder) or "stopped" (signal aborted while still leading).
   */
  private async renewLoop(signal: AbortSignal, leadership: AbortSignal): Promise<ElectionResult> {
    const sleepSignal = AbortSignal.any([signal, leadership]);
    const sleep = async (ms: number, wakeOnAnswer = false): Promise<ElectionResult | undefined> => {
      // After a connection-level failure: the server's next answer ends the sleep (see "Renew" in the file comment).
      const woken = new AbortController();
      const unsubscribe = wakeOnAnswer ? this.lock.onServerAnswer?.(() => woken.abort()) : undefined;
      try {
        await this.clock.sleep(ms, unsubscribe ? AbortSignal.any([sleepSignal, woken.signal]) : sleepSignal);
      } catch {
        // fall through to the checks below
      } finally {
        unsubscribe?.();
      }
      if (leadership.aborted) return 'lost';
      if (signal.aborted) return 'stopped';
      return undefined;
    };
    for (;;) {
      const wake = await sleep(Math.min(this.retryPeriodMs, this.lastRenewStart + this.renewDeadlineMs - this.clock.now()));
      if (wake) return wake;
      // Retry within the deadline measured from the start of the last successful write.
      for (;;) {
        const remaining = this.lastRenewStart + this.renewDeadlineMs - this.clock.now();
        if (remaining <= 0 || leadership.aborted) return 'lost';
        // Not tied to `signal`: a renewal in flight at shutdown completes so the release sees our latest write.
        const attempt = this.deadline(remaining, leadership);
        const ok = await this.tryAcquireOrRenew(attempt.signal).finally(attempt.cancel);
        if (leadership.aborted) return 'lost'; // a success that raced the deadline timer does not revive the term
        if (ok) {
          this.armDeadline();
          break;
        }
        const holder = this.leader();
        if (holder !== this.identity && holder !== '' && this.isObservedValid()) {
          this.log.warn({ holder }, 'lease is held by another candidate');
          this.endTerm(new Error(`leadership lost: lease is held by ${holder}`));
          return 'lost';
        }
        if (signal.aborted) return 'stopped';
        const left = this.lastRenewStart + this.renewDeadlineMs - this.clock.now();
        if (left <= 0) continue;
        const w = await sleep(Math.min(this.retryPeriodMs, left), isConnectionFailure(this.lastFailure));
        if (w) return w;
      }
    }
  }

  /** An AbortSignal that fires after `ms` on the elector's Clock (or when `parent` aborts). */
  private deadline(ms: number, parent?: AbortSignal): { signal: AbortSignal; cancel: () => void } {
    const ac = new AbortController();
    const timer = this.clock.setTimer(ms, () => ac.abort(new Error(`lease request timed out after ${ms}ms`)));
    const onAbort = (): void => ac.abort(parent?.reason);
    parent?.addEventListener('abort', onAbort, { once: true });
    return {
      signal: ac.signal,
      cancel: () => {
        timer.cancel();
        parent?.removeEventListener('abort', onAbort);
      },
    };
  }

  private isObservedValid(): boolean {
    const secs = this.observed?.spec?.leaseDurationSeconds ?? 0;
    return this.observedTime + secs * 1000 > this.clock.now();
  }

  /** Records `lease` as observed; resets observedTime only when the record changed. */
  private observe(lease: Lease): void {
    if (recordKey(lease.spec) !== recordKey(this.observed?.spec)) this.observedTime = this.clock.now();
    this.observed = lease;
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder !== this.reportedLeader) {
      this.reportedLeader = holder;
      this.log.info({ holder }, 'new leader observed');
      this.call(() => this.callbacks.onNewLeader?.(holder));
    }
  }

  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const start = this.clock.now();
    const now = microTime(this.wallClock());
    const leaseDurationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    let current: Lease | undefined;
    this.lastFailure = undefined;
    try {
      current = await this.lock.get(signal);
    } catch (err) {
      this.lastFailure = err;
      this.log.warn({ err }, 'error retrieving lease');
      return false;
    }
    if (!current) {
      try {
        const created = await this.lock.create(
          {
            metadata: { name: '' },
            spec: { holderIdentity: this.identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          },
          signal,
        );
        this.observe(created);
        this.lastRenewStart = start;
        return true;
      } catch (err) {
        this.lastFailure = err;
        this.log.info({ err }, 'error creating lease');
        return false;
      }
    }

    this.observe(current);
    const spec = current.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    if (holder !== '' && holder !== this.identity && this.isObservedValid()) {
      this.log.debug({ holder }, 'lease is held by another candidate and has not yet expired');
      return false;
    }
    const ours = holder === this.identity;
    const next: Lease = {
      ...current,
      spec: {
        ...spec,
        holderIdentity: this.identity,
        leaseDurationSeconds,
        renewTime: now,
        acquireTime: ours ? (spec.acquireTime ?? now) : now,
        leaseTransitions: ours ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      const updated = await this.lock.update(next, signal);
      this.observe(updated);
      this.lastRenewStart = start;
      return true;
    } catch (err) {
      this.lastFailure = err;
      this.log.info({ err }, ours ? 'failed to renew lease' : 'failed to acquire lease');
      return false;
    }
  }

  /** Writes an immediately expirable record if the lease is still ours. Best effort: failures are logged. */
  private async release(): Promise<void> {
    const attempt = this.deadline(this.renewDeadlineMs);
    try {
      const current = await this.lock.get(attempt.signal);
      if (!current || (current.spec?.holderIdentity ?? '') !== this.identity) return;
      const now = microTime(this.wallClock());
      const released = await this.lock.update(
        {
          ...current,
          spec: {
            ...current.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: current.spec?.leaseTransitions ?? 0,
          },
        },
        attempt.signal,
      );
      this.observe(released);
      this.log.info('released leader lease');
    } catch (err) {
      this.log.error({ err }, 'failed to release lease');
    } finally {
      attempt.cancel();
    }
  }
}
