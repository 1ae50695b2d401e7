/**
 * Reflector: the thin driver that runs the pure state machine of reflectorstate.ts. It owns the machine's state,
 * feeds it events (results of LIST/WATCH requests, timer expiries, stop) and executes the actions it returns with a
 * ListWatcher (HTTP through RestClient) and a Clock.
 *
 * Concurrency contract:
 *  - One request at most is in flight (a LIST page or a WATCH stream), identified by an operation object; results of
 *    an operation that was cancelled or superseded are dropped before they reach the state machine.
 *  - Events are processed one at a time (a re-entrant dispatch is queued), on the event loop; `sink` calls happen
 *    synchronously inside that processing, in stream order. The sink (the informer's DeltaQueue) must not do I/O.
 *  - Watch events of an unknown type are skipped by the decoder (the stream goes on) and logged here at most once a
 *    minute, with the number skipped.
 *  - A sink that throws never stops the reflector: a failed `replace` becomes a `replaceFailed` event (backoff, then
 *    relist) and a failed add/update/delete is logged and skipped (client-go's watchHandler does the same).
 *  - Silent-stream detection: an idle timer runs from the start of a watch request; every chunk received (events,
 *    bookmarks, even blank keep-alive lines) pushes it back. When it expires the machine gets `watchIdle`, which
 *    aborts the stream and re-watches after a backoff.
 *  - `run(signal)` resolves after `signal` aborts and the request in flight has settled.
 *  - `lastError()` is the most recent request failure (list, watch, storing a list) since the last list that reached
 *    the sink: what keeps an informer from syncing (a 404 for a CRD not installed, a 403 from RBAC, a dead
 *    connection), for the cache-sync timeout message and /readyz.
 *  - `status()` counts what the reflector did since it started — lists begun (the first one and every relist: a
 *    first page, the one unpaginated LIST after an expired continue token, or a streaming list) and watch streams
 *    opened (the server answered 200) — and names its phase and since when (the informer debug endpoint,
 *    informer_lists_total and informer_watches_total). `onList` / `onWatch` hooks see each as it happens.
 *  - Wake on reachability (issue 43): while — and only while — the machine is in a Backoff entered after a
 *    connection-level failure (`toRequestFailure` marks it with client/reachability.ts's `isConnectionFailure`),
 *    the reflector is subscribed to `reachability` and feeds it `serverReachable` on the server's next answer; it
 *    unsubscribes as soon as it leaves that phase or stops, so a stopped reflector holds no listener and no timer.
 */
import { isConnectionFailure, type ServerReachability } from '../client/reachability.ts';
import { ApiError } from '../client/rest.ts';
import { silentLogger, type Logger } from '../log/logger.ts';
import { realClock, type Clock, type Timer } from '../util/clock.ts';
import type { ListWatcher } from './listwatch.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import {
  defaultReflectorConfig,
  failureFromStatus,
  initialReflectorState,
  reflectorStep,
  type ReflectorAction,
  type ReflectorConfig,
  type ReflectorEvent,
  type ReflectorState,
  type RequestFailure,
} from './reflectorstate.ts';
import type { WatchTracker } from './watchcounter.ts';
import type { WatchEvent } from './watchdecoder.ts';

/** Where a reflector delivers what it learns (the informer's DeltaQueue, through the transform). */
export interface ReflectorSink {
  replace(items: KubeObject[], resourceVersion: string): void;
  add(obj: KubeObject): void;
  update(obj: KubeObject): void;
  delete(obj: KubeObject): void;
}

export interface ReflectorOptions {
  listWatcher: ListWatcher;
  sink: ReflectorSink;
  /** For logs, e.g. `deployments.apps/v1` or `pods/v1 ns=default`. */
  name?: string;
  config?: Partial<ReflectorConfig>;
  /** Abort and re-watch when a watch delivers no byte for this long. Default: the watch's timeoutSeconds + 30 s. */
  watchIdleTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Uniform [0, 1) source for jitter and watch timeouts. */
  random?: () => number;
  watchTracker?: WatchTracker;
  /**
   * Told when the API server answers any request (the RestClient's `reachability`): a backoff after a
   * connection-level failure then ends within `config.wakeJitterMs`. Default: none (every backoff runs out).
   */
  reachability?: Pick<ServerReachability, 'subscribe'>;
  /** Called when a list begins (not for continue pages) and when a watch stream opens (metrics). */
  onList?: () => void;
  onWatch?: () => void;
}

/** What a reflector did and where it is now (`Reflector.status()`). */
export interface ReflectorStatus {
  /** The state machine's phase: Empty, Listing, WatchListing, Watching, Backoff or Stopped. */
  phase: string;
  /** For how long it has been in that phase (ms of its clock). */
  phaseForMs: number;
  /** The last resourceVersion seen ('' before the first list). */
  resourceVersion: string;
  /** Lists begun since start: the first and every relist. */
  lists: number;
  /** Watch streams opened since start (the server answered the WATCH). */
  watches: number;
  /** The most recent request failure since the last list reached the cache. */
  lastError: RequestFailure | undefined;
}

/** At most one log line per this interval about skipped watch events of unknown types. */
export const UNKNOWN_EVENT_LOG_INTERVAL_MS = 60_000;

interface Operation {
  readonly controller: AbortController;
  /** clock.now() of the last byte received (or of the request start). */
  lastDataAt: number;
  idleTimer: Timer | undefined;
}

/** Reduces any request error to data for the state machine. */
export function toRequestFailure(err: unknown): RequestFailure {
  if (err instanceof ApiError) return { status: err.status, reason: err.reason, message: err.message };
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return { status: 0, reason: err.name, message: `${err.message}${cause}`, ...(isConnectionFailure(err) ? { connection: true } : {}) };
  }
  return { status: 0, reason: 'Unknown', message: String(err) };
}

export class Reflector {
  private readonly lw: ListWatcher;
  private readonly sink: ReflectorSink;
  private readonly name: string;
  private readonly cfg: ReflectorConfig;
  private readonly idleTimeoutMs: number | undefined;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly tracker: WatchTracker | undefined;
  private state: ReflectorState;
  private op: Operation | undefined;
  private retryTimer: Timer | undefined;
  private readonly inflight = new Set<Promise<void>>();
  private readonly mailbox: ReflectorEvent[] = [];
  private dispatching = false;
  private started = false;
  /** Rate limit of the "unknown watch event type" log: time of the last line, and events skipped since. */
  private unknownLoggedAt = -Infinity;
  private unknownSkipped = 0;
  private lastFailure: RequestFailure | undefined;
  private phaseSince: number;
  private lists = 0;
  private watches = 0;
  private readonly onList: (() => void) | undefined;
  private readonly onWatch: (() => void) | undefined;
  private readonly reachability: Pick<ServerReachability, 'subscribe'> | undefined;
  /** Set while subscribed to `reachability` (the machine is in a wakeable Backoff). */
  private unsubscribe: (() => void) | undefined;

  constructor(opts: ReflectorOptions) {
    this.lw = opts.listWatcher;
    this.sink = opts.sink;
    this.name = opts.name ?? 'reflector';
    this.cfg = { ...defaultReflectorConfig, ...opts.config };
    this.idleTimeoutMs = opts.watchIdleTimeoutMs;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger).child({ resource: this.name });
    this.random = opts.random ?? Math.random;
    this.tracker = opts.watchTracker;
    this.state = initialReflectorState(this.cfg);
    this.phaseSince = this.clock.now();
    this.onList = opts.onList;
    this.onWatch = opts.onWatch;
    this.reachability = opts.reachability;
  }

  /** Counts and phase (see the module comment); a snapshot. */
  status(): ReflectorStatus {
    return {
      phase: this.state.phase.name, phaseForMs: this.clock.now() - this.phaseSince, resourceVersion: this.state.resourceVersion,
      lists: this.lists, watches: this.watches, lastError: this.lastFailure,
    };
  }

  /** The last resourceVersion seen from a list, an event or a bookmark ('' before the first list). */
  lastSyncResourceVersion(): string {
    return this.state.resourceVersion;
  }

  /** The most recent request failure since the last list stored in the sink (undefined: none). */
  lastError(): RequestFailure | undefined {
    return this.lastFailure;
  }

  /** The machine's current state (read-only; for tests and debugging). */
  currentState(): Readonly<ReflectorState> {
    return this.state;
  }

  /** Lists and watches until `signal` aborts. May be called once. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.started) throw new Error(`${this.name}: reflector already started`);
    this.started = true;
    if (signal.aborted) return;
    await new Promise<void>((resolve) => {
      signal.addEventListener(
        'abort',
        () => {
          this.dispatch({ type: 'stop' });
          resolve();
        },
        { once: true },
      );
      this.dispatch({ type: 'start' });
    });
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private dispatch(event: ReflectorEvent): void {
    this.mailbox.push(event);
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (let ev = this.mailbox.shift(); ev !== undefined; ev = this.mailbox.shift()) {
        this.noteFailure(ev);
        const now = this.clock.now();
        const { state, actions } = reflectorStep(this.state, ev, { now, random: this.random() }, this.cfg);
        if (state.phase.name !== this.state.phase.name) this.phaseSince = now;
        this.state = state;
        for (const a of actions) {
          if (!this.executeGuarded(a)) break;
        }
      }
    } finally {
      this.dispatching = false;
    }
    this.syncReachability();
  }

  /** Subscribed to `reachability` exactly while the machine waits in a wakeable Backoff (see the module comment). */
  private syncReachability(): void {
    const phase = this.state.phase;
    const waiting = phase.name === 'Backoff' && phase.wakeable;
    if (waiting && !this.unsubscribe && this.reachability) {
      this.unsubscribe = this.reachability.subscribe(() => this.dispatch({ type: 'serverReachable' }));
    } else if (!waiting && this.unsubscribe) {
      this.unsubscribe();
      this.unsubscribe = undefined;
    }
  }

  /** Remembers the failure an event reports (lastError). */
  private noteFailure(ev: ReflectorEvent): void {
    if (ev.type === 'listError' || ev.type === 'watchError') this.lastFailure = ev.failure;
    else if (ev.type === 'replaceFailed') this.lastFailure = { status: 0, reason: 'ReplaceFailed', message: `storing the list failed: ${ev.message}` };
    else if (ev.type === 'watchEvent' && ev.event.type === 'ERROR') this.lastFailure = failureFromStatus(ev.event.object);
  }

  /**
   * Runs one action; an exception never escapes (it would leave the machine in a phase whose request or timer was
   * never started). A failed `replace` is reported to the machine ahead of any other event (it backs off and
   * relists) and the rest of that step's actions are skipped (returns false); a failed delta is logged and skipped.
   */
  private executeGuarded(a: ReflectorAction): boolean {
    try {
      this.execute(a);
      return true;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (a.type === 'replace') {
        this.log.error({ err, items: a.items.length, resourceVersion: a.resourceVersion }, 'storing the list failed');
        this.mailbox.unshift({ type: 'replaceFailed', message });
        return false;
      }
      if (a.type === 'delta') {
        const m = a.object.metadata;
        this.log.error({ err, delta: a.delta, namespace: m?.namespace, name: m?.name }, 'storing a watch event failed; event skipped');
        return true;
      }
      this.log.error({ err, action: a.type }, 'reflector action failed');
      return true;
    }
  }

  private execute(a: ReflectorAction): void {
    switch (a.type) {
      case 'list':
        if (a.continueToken === undefined) {
          this.lists++;
          this.onList?.();
        }
        this.track(this.runList(this.newOp(), a.continueToken, a.limit));
        return;
      case 'watch':
        if (a.sendInitialEvents) { // a streaming list: a list too
          this.lists++;
          this.onList?.();
        }
        this.track(this.runWatch(this.newOp(), a));
        return;
      case 'cancelRequest':
        this.cancelOp();
        return;
      case 'scheduleRetry':
        this.retryTimer?.cancel();
        this.retryTimer = this.clock.setTimer(a.delayMs, () => {
          this.retryTimer = undefined;
          this.dispatch({ type: 'retryTimer' });
        });
        return;
      case 'cancelTimer':
        this.retryTimer?.cancel();
        this.retryTimer = undefined;
        return;
      case 'replace':
        this.log.debug({ items: a.items.length, resourceVersion: a.resourceVersion }, 'replace from list');
        this.sink.replace(a.items, a.resourceVersion);
        this.lastFailure = undefined;
        return;
      case 'delta':
        if (a.delta === 'Added') this.sink.add(a.object);
        else if (a.delta === 'Updated') this.sink.update(a.object);
        else this.sink.delete(a.object);
        return;
      case 'log':
        this.log[a.level](a.message);
        return;
    }
  }

  private track(p: Promise<void>): void {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  private newOp(): Operation {
    this.cancelOp();
    const op: Operation = { controller: new AbortController(), lastDataAt: this.clock.now(), idleTimer: undefined };
    this.op = op;
    return op;
  }

  private cancelOp(): void {
    const op = this.op;
    if (!op) return;
    this.op = undefined;
    op.idleTimer?.cancel();
    op.controller.abort(new Error('request cancelled by the reflector'));
  }

  /** Marks the operation finished (if still current) and feeds its final event. */
  private finish(op: Operation, event: ReflectorEvent): void {
    if (this.op !== op) return;
    this.op = undefined;
    op.idleTimer?.cancel();
    this.dispatch(event);
  }

  private async runList(op: Operation, continueToken: string | undefined, limit: number): Promise<void> {
    try {
      const page = await this.lw.list({ continueToken, limit, signal: op.controller.signal });
      this.finish(op, { type: 'listPage', items: page.items, continueToken: page.continueToken, resourceVersion: page.resourceVersion });
    } catch (err) {
      this.finish(op, { type: 'listError', failure: toRequestFailure(err) });
    }
  }

  /** Logs skipped events of unknown types at most once per UNKNOWN_EVENT_LOG_INTERVAL_MS, with a count. */
  private unknownEventType(type: string): void {
    this.unknownSkipped++;
    const now = this.clock.now();
    if (now - this.unknownLoggedAt < UNKNOWN_EVENT_LOG_INTERVAL_MS) return;
    this.log.warn({ eventType: type, skipped: this.unknownSkipped }, 'skipping watch events of unknown type');
    this.unknownLoggedAt = now;
    this.unknownSkipped = 0;
  }

  private armIdle(op: Operation, timeoutMs: number): void {
    const due = op.lastDataAt + timeoutMs - this.clock.now();
    op.idleTimer = this.clock.setTimer(due, () => {
      op.idleTimer = undefined;
      if (this.op !== op) return;
      if (this.clock.now() - op.lastDataAt >= timeoutMs) this.dispatch({ type: 'watchIdle' });
      else this.armIdle(op, timeoutMs);
    });
  }

  private async runWatch(op: Operation, a: Extract<ReflectorAction, { type: 'watch' }>): Promise<void> {
    this.armIdle(op, this.idleTimeoutMs ?? (a.timeoutSeconds + 30) * 1000);
    let stream: AsyncIterable<WatchEvent<KubeObject>>;
    try {
      stream = await this.lw.watch({
        resourceVersion: a.resourceVersion,
        timeoutSeconds: a.timeoutSeconds,
        sendInitialEvents: a.sendInitialEvents,
        signal: op.controller.signal,
        onData: () => {
          op.lastDataAt = this.clock.now();
        },
        onUnknownEventType: (type) => this.unknownEventType(type),
      });
    } catch (err) {
      this.finish(op, { type: 'watchError', failure: toRequestFailure(err) });
      return;
    }
    op.lastDataAt = this.clock.now();
    this.tracker?.opened();
    this.watches++;
    this.onWatch?.();
    try {
      for await (const event of stream) {
        if (this.op !== op) break;
        this.dispatch({ type: 'watchEvent', event });
        if (this.op !== op) break;
      }
      this.finish(op, { type: 'watchEnded' });
    } catch (err) {
      this.finish(op, { type: 'watchError', failure: toRequestFailure(err) });
    } finally {
      this.tracker?.closed();
      op.controller.abort(new Error('watch finished'));
    }
  }
}
