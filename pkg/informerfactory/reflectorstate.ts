/**
 * The Reflector as an explicit state machine: `reflectorStep(state, event, ctx, config) → { state, actions }`.
 *
 * The step function is pure: no I/O, no clock, no randomness — time (`ctx.now`) and one uniform random number
 * (`ctx.random`, for jitter and the watch timeout) come in with the event, and everything to do comes out as
 * actions that the driver (reflector.ts) executes: LIST a page, open a WATCH, cancel the request in flight,
 * schedule a retry timer, hand objects to the DeltaQueue. Every transition is unit-tested without a server.
 *
 * Ownership: a state is consumed by the step it is passed to. The objects accumulated during a paged list or a
 * streaming list are appended in place (a large list would otherwise be copied once per page or event); never
 * reuse a state after passing it to `reflectorStep`.
 *
 * Phases and transitions (→ actions):
 *
 *   Empty ──start──▶ Listing (paged LIST, limit=500)           or WatchListing (watch-list, when enabled)
 *   Listing ──page with continue──▶ Listing                    → list(continue)
 *   Listing ──last page──▶ Watching                            → replace(all items, list RV), watch(list RV)
 *   Listing ──410 on a continue page──▶ Listing(full)           → list(limit 0)  (expired continue token: ONE
 *                                                                                  unpaginated LIST, as client-go's pager)
 *   Listing(full) ──error (410 included)──▶ Backoff(relist)    (the retry is a paged list again)
 *   Listing ──other error──▶ Backoff(resume: same page, or relist)
 *   WatchListing ──ADDED/MODIFIED/DELETED──▶ WatchListing      (accumulate in a temporary map)
 *   WatchListing ──BOOKMARK k8s.io/initial-events-end──▶ Watching (same stream) → replace(items, bookmark RV)
 *   WatchListing ──refusal (400/403/405/422/501), plain bookmark, end of stream, silence──▶
 *                  Listing, watch-list disabled for good       → cancel, list()
 *   WatchListing ──410, "Too large resource version"──▶ Backoff(relist)  → cancel (ERROR event), scheduleRetry
 *   WatchListing ──other errors──▶ Backoff(relist)
 *   Watching ──ADDED/MODIFIED/DELETED──▶ Watching              → delta(type, obj); RV := obj RV
 *   Watching ──BOOKMARK──▶ Watching                            RV := bookmark RV
 *   Watching ──end after ≥1 s or ≥1 event──▶ Watching          → watch(RV)  (server timeout: resume at once)
 *   Watching ──end <1 s with no event, error, ERROR event, silence──▶ Backoff(resume: watch from RV)
 *   Watching ──410 Gone / ERROR 410 / "too old resource version"──▶ Backoff(relist)
 *                                                              → cancel (ERROR event), scheduleRetry
 *   Watching ──replaceFailed (the sink threw on the list just delivered)──▶ Backoff(relist)
 *                                                              → cancelRequest, scheduleRetry
 *   Backoff ──retryTimer──▶ the resumed phase                  → list / watch
 *   Backoff(wakeable) ──serverReachable──▶ Backoff(not wakeable) → scheduleRetry(wakeJitterMs × random)
 *   any ──stop──▶ Stopped                                      → cancelRequest, cancelTimer
 * Events that do not belong to the current phase (late results of a cancelled request) are ignored.
 *
 * serverReachable (issue 43): the driver learnt that the API server answers again (any response on the same
 * connection target: another informer's request, the leader election's renew). Invariant: it changes nothing except
 * in a Backoff entered because a request got NO answer (`RequestFailure.connection`: refused, reset, timed out, stream
 * cut) — there it replaces the remaining wait with one of at most `wakeJitterMs` (jittered, so the informers woken by
 * one answer do not all LIST in the same millisecond), once per Backoff (a second answer does not push the retry
 * back). A Backoff after an ANSWER (403, 404, 410, 5xx, an ERROR event), a short or silent watch, or a sink that
 * refused the list keeps its full wait; so does every backoff when no answer is seen (the retry timer still runs).
 * The backoff's growth is kept: a woken retry that fails again waits twice as long (unless woken again).
 *
 * The resourceVersion of a streaming list (client-go's rewatchResourceVersion): '' (the most recent state, a
 * consistent snapshot) for the first one and after the last resourceVersion was found unavailable (410 Gone /
 * "too old", or "Too large resource version" from a server whose cache is behind); otherwise the last resourceVersion
 * seen, with resourceVersionMatch=NotOlderThan, so a relist never goes back in time. A sync (replace) clears the
 * unavailable mark. Paged LISTs are always consistent reads (no resourceVersion).
 *
 * replaceFailed: a `replace` action is always the first action of the step that enters Watching, and the driver
 * reports its failure (e.g. a transform returned an object without metadata.name) before any other event and skips
 * the step's remaining actions, so the machine is in that Watching phase when the report arrives, and never stays
 * in a phase whose request was not started. Failures of `delta` actions are the driver's business: logged and
 * skipped, as client-go's watchHandler does.
 *
 * Backoff: base delay 0.8 s doubling to 30 s; the wait is base × (1 + jitter × random), capped at the maximum;
 * the base resets to 0.8 s when the previous error is more than 2 minutes old (i.e. after 2 minutes of health).
 * Every way back to a LIST goes through a backoff too — a 410 is an error for the backoff, as in client-go's
 * ListAndWatch loop, but on a track of its own (`goneBackoff`, growing with 410s only) — so no server answer makes the
 * machine loop on LIST (invariant: between two first-page `list` actions
 * (no continue token, limit > 0) there is a `scheduleRetry`, except after a streaming-list refusal, which happens at
 * most once per reflector; an expired continue token adds one full LIST to a relist, never another paged one).
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { metaNamespaceKey } from '../apimachinery/keys.ts';
import { resourceVersionOf } from '../apimachinery/meta.ts';
import type { Status, WatchEvent } from './watchdecoder.ts';

export const INITIAL_EVENTS_END_ANNOTATION = 'k8s.io/initial-events-end';

export interface ReflectorConfig {
  /** LIST page size (`limit`). */
  pageSize: number;
  /** The watch `timeoutSeconds` is drawn uniformly from [min, max]. */
  minWatchTimeoutSeconds: number;
  maxWatchTimeoutSeconds: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** The backoff resets when the last error is older than this. */
  backoffResetMs: number;
  /** 0 = no jitter; 1 = wait up to twice the base. */
  backoffJitter: number;
  /** A watch that ends sooner than this without delivering any event counts as an error. */
  minWatchDurationMs: number;
  /** Try a streaming list (sendInitialEvents) before falling back to paged LIST. */
  useWatchList: boolean;
  /**
   * When a Backoff after a connection-level failure learns that the server answers again (`serverReachable`), the
   * retry comes after `wakeJitterMs × random` instead of the rest of the wait (0: at once).
   */
  wakeJitterMs: number;
  keyFunc: (obj: KubeObject) => string;
}

export const defaultReflectorConfig: ReflectorConfig = {
  pageSize: 500,
  minWatchTimeoutSeconds: 300,
  maxWatchTimeoutSeconds: 600,
  backoffInitialMs: 800,
  backoffMaxMs: 30_000,
  backoffResetMs: 120_000,
  backoffJitter: 1.0,
  minWatchDurationMs: 1000,
  useWatchList: false,
  wakeJitterMs: 1000,
  keyFunc: metaNamespaceKey,
};

/** A failed request, reduced to data: HTTP status (0 = transport error / broken stream), Status reason, message. */
export interface RequestFailure {
  status: number;
  reason: string;
  message: string;
  /**
   * True when the request got no answer from the server at the connection level (refused, reset, timed out, stream
   * cut): the Backoff it causes ends when the server is known to answer again (`serverReachable`).
   */
  connection?: boolean;
}

export interface BackoffState {
  /** Base delay of the next backoff. */
  delayMs: number;
  /** ctx.now of the last error, if any. */
  lastErrorAt: number | undefined;
}

/** What to do when a backoff ends. */
export type Resume =
  | { op: 'relist' }
  | { op: 'listPage'; continueToken: string; items: KubeObject[] }
  | { op: 'watch' };

export type Phase =
  | { name: 'Empty' }
  /** `full`: the one unpaginated LIST that replaces a paged list whose continue token expired. */
  | { name: 'Listing'; continueToken: string | undefined; items: KubeObject[]; full: boolean }
  | { name: 'WatchListing'; items: Map<string, KubeObject>; startedAt: number }
  | { name: 'Watching'; startedAt: number; events: number }
  /** `wakeable`: entered after a connection-level failure and not yet woken — `serverReachable` ends the wait. */
  | { name: 'Backoff'; resume: Resume; delayMs: number; wakeable: boolean }
  | { name: 'Stopped' };

export interface ReflectorState {
  readonly phase: Phase;
  /** Last resourceVersion seen (list, event or bookmark); '' before the first list. */
  readonly resourceVersion: string;
  /** Whether the next relist tries a streaming list. Becomes 'disabled' for good after a refusal. */
  readonly watchList: 'enabled' | 'disabled';
  /**
   * The server said `resourceVersion` is gone or not yet known to it (410 / too large) and no list has been stored
   * since: the next streaming list asks for the most recent state ('') instead of resourceVersion.
   */
  readonly resourceVersionUnavailable: boolean;
  /** The backoff of every failure but the relists after a 410 (see `goneBackoff`). */
  readonly backoff: BackoffState;
  /**
   * The backoff of the relists after a 410 (relistAfterGone), kept apart: it grows only with 410s, so a server that
   * always answers 410 gets relists 0.8 s → 30 s apart, while the first 410 after an outage (kube-apiserver restarted
   * or the connection cut, during which `backoff` grew) relists after the initial delay.
   */
  readonly goneBackoff: BackoffState;
}

export type ReflectorEvent =
  | { type: 'start' }
  | { type: 'listPage'; items: KubeObject[]; continueToken: string | undefined; resourceVersion: string }
  | { type: 'listError'; failure: RequestFailure }
  | { type: 'watchEvent'; event: WatchEvent<KubeObject> }
  | { type: 'watchEnded' }
  | { type: 'watchError'; failure: RequestFailure }
  | { type: 'watchIdle' }
  | { type: 'retryTimer' }
  /** The API server answered a request of this process (see the module comment). */
  | { type: 'serverReachable' }
  /** The driver's sink threw while taking a `replace` (the list did not reach the cache). */
  | { type: 'replaceFailed'; message: string }
  | { type: 'stop' };

export type ReflectorAction =
  /** `limit` 0: no limit, one unpaginated LIST. */
  | { type: 'list'; continueToken: string | undefined; limit: number }
  | { type: 'watch'; resourceVersion: string; timeoutSeconds: number; sendInitialEvents: boolean }
  | { type: 'cancelRequest' }
  | { type: 'scheduleRetry'; delayMs: number }
  | { type: 'cancelTimer' }
  | { type: 'replace'; items: KubeObject[]; resourceVersion: string }
  | { type: 'delta'; delta: 'Added' | 'Updated' | 'Deleted'; object: KubeObject }
  | { type: 'log'; level: 'debug' | 'info' | 'warn'; message: string };

export interface StepContext {
  /** Current time in ms (the driver's Clock). */
  now: number;
  /** A uniform random number in [0, 1). */
  random: number;
}

export interface StepResult {
  state: ReflectorState;
  actions: ReflectorAction[];
}

export function initialReflectorState(config: Pick<ReflectorConfig, 'useWatchList' | 'backoffInitialMs'>): ReflectorState {
  return {
    phase: { name: 'Empty' },
    resourceVersion: '',
    watchList: config.useWatchList ? 'enabled' : 'disabled',
    resourceVersionUnavailable: false,
    backoff: { delayMs: config.backoffInitialMs, lastErrorAt: undefined },
    goneBackoff: { delayMs: config.backoffInitialMs, lastErrorAt: undefined },
  };
}

/** 410 Gone, or an error that says the requested resourceVersion is no longer available. */
export function isGone(f: RequestFailure): boolean {
  return f.status === 410 || /too old resource version/i.test(f.message);
}

/** The server has not seen the requested resourceVersion yet (its cache is behind): client-go's isTooLargeResourceVersionError. */
export function isResourceVersionTooLarge(f: RequestFailure): boolean {
  return /too large resource version/i.test(f.message);
}

/** The server refused a streaming list: it does not support it (or not for this client). */
export function isWatchListRefusal(f: RequestFailure): boolean {
  return [400, 403, 405, 422, 501].includes(f.status);
}

export function failureFromStatus(s: Status): RequestFailure {
  return { status: s.code ?? 0, reason: s.reason ?? 'Unknown', message: s.message ?? JSON.stringify(s) };
}

/** The next backoff wait and bookkeeping (exported for tests). */
export function nextBackoff(
  b: BackoffState,
  ctx: StepContext,
  cfg: Pick<ReflectorConfig, 'backoffInitialMs' | 'backoffMaxMs' | 'backoffResetMs' | 'backoffJitter'>,
): { waitMs: number; backoff: BackoffState } {
  const healthy = b.lastErrorAt !== undefined && ctx.now - b.lastErrorAt > cfg.backoffResetMs;
  const base = healthy ? cfg.backoffInitialMs : b.delayMs;
  const waitMs = Math.min(cfg.backoffMaxMs, Math.round(base * (1 + cfg.backoffJitter * ctx.random)));
  return { waitMs, backoff: { delayMs: Math.min(cfg.backoffMaxMs, base * 2), lastErrorAt: ctx.now } };
}

function watchTimeoutSeconds(ctx: StepContext, cfg: ReflectorConfig): number {
  const span = Math.max(0, cfg.maxWatchTimeoutSeconds - cfg.minWatchTimeoutSeconds);
  return cfg.minWatchTimeoutSeconds + Math.min(span, Math.floor(ctx.random * (span + 1)));
}

function relist(state: ReflectorState, ctx: StepContext, cfg: ReflectorConfig, pre: ReflectorAction[] = []): StepResult {
  if (state.watchList === 'enabled') {
    return {
      state: { ...state, phase: { name: 'WatchListing', items: new Map(), startedAt: ctx.now } },
      actions: [
        ...pre,
        {
          type: 'watch',
          resourceVersion: state.resourceVersionUnavailable ? '' : state.resourceVersion,
          timeoutSeconds: watchTimeoutSeconds(ctx, cfg),
          sendInitialEvents: true,
        },
      ],
    };
  }
  return {
    state: { ...state, phase: { name: 'Listing', continueToken: undefined, items: [], full: false } },
    actions: [...pre, { type: 'list', continueToken: undefined, limit: cfg.pageSize }],
  };
}

function watch(state: ReflectorState, ctx: StepContext, cfg: ReflectorConfig, pre: ReflectorAction[] = []): StepResult {
  return {
    state: { ...state, phase: { name: 'Watching', startedAt: ctx.now, events: 0 } },
    actions: [
      ...pre,
      {
        type: 'watch',
        resourceVersion: state.resourceVersion,
        timeoutSeconds: watchTimeoutSeconds(ctx, cfg),
        sendInitialEvents: false,
      },
    ],
  };
}

function backoff(
  state: ReflectorState,
  resume: Resume,
  what: string,
  failure: RequestFailure,
  ctx: StepContext,
  cfg: ReflectorConfig,
  pre: ReflectorAction[] = [],
  level: 'info' | 'warn' = 'warn',
  retrying = 'retrying',
): StepResult {
  const { waitMs, backoff: b } = nextBackoff(state.backoff, ctx, cfg);
  return {
    state: { ...state, phase: { name: 'Backoff', resume, delayMs: waitMs, wakeable: failure.connection === true }, backoff: b },
    actions: [
      ...pre,
      { type: 'log', level, message: `${what}: ${describe(failure)}; ${retrying} in ${waitMs} ms` },
      { type: 'scheduleRetry', delayMs: waitMs },
    ],
  };
}

/**
 * The resourceVersion we asked for is gone (410 / "too old resource version"): relist — after a backoff, as client-go's
 * ListAndWatch loop does, so a server or proxy that always answers 410 gets relists 0.8 s → 30 s apart instead of a
 * tight LIST loop. Unlike client-go, that backoff is its own (`goneBackoff`): a 410 is an answer, so the waits that
 * grew while the server was unreachable do not delay the relist that follows it (issue 43: a cache blind for up to
 * 12.8 s more after kube-apiserver came back). Routine after etcd compaction, hence info, not warn.
 */
function relistAfterGone(state: ReflectorState, what: string, failure: RequestFailure, ctx: StepContext, cfg: ReflectorConfig, pre: ReflectorAction[] = []): StepResult {
  // On its own track (goneBackoff): the wait grows with 410s only, not with the outage that preceded this one.
  const r = backoff({ ...state, resourceVersionUnavailable: true, backoff: state.goneBackoff }, { op: 'relist' }, what, failure, ctx, cfg, pre, 'info', 'relisting');
  return { ...r, state: { ...r.state, backoff: state.backoff, goneBackoff: r.state.backoff } };
}

function fallbackToList(state: ReflectorState, why: string, ctx: StepContext, cfg: ReflectorConfig, cancel: boolean): StepResult {
  const pre: ReflectorAction[] = cancel ? [{ type: 'cancelRequest' }] : [];
  pre.push({ type: 'log', level: 'info', message: `streaming list not usable (${why}); falling back to paged LIST for good` });
  return relist({ ...state, watchList: 'disabled' }, ctx, cfg, pre);
}

function describe(f: RequestFailure): string {
  return f.status ? `HTTP ${f.status} ${f.reason}: ${f.message}` : f.message;
}

const unchanged = (state: ReflectorState): StepResult => ({ state, actions: [] });

/** The transition function. See the module comment for the table. */
export function reflectorStep(
  state: ReflectorState,
  event: ReflectorEvent,
  ctx: StepContext,
  cfg: ReflectorConfig = defaultReflectorConfig,
): StepResult {
  const phase = state.phase;
  if (phase.name === 'Stopped') return unchanged(state);
  if (event.type === 'stop') {
    return { state: { ...state, phase: { name: 'Stopped' } }, actions: [{ type: 'cancelRequest' }, { type: 'cancelTimer' }] };
  }

  switch (phase.name) {
    case 'Empty':
      return event.type === 'start' ? relist(state, ctx, cfg) : unchanged(state);

    case 'Listing':
      switch (event.type) {
        case 'listPage': {
          for (const item of event.items) phase.items.push(item);
          if (event.continueToken) {
            return {
              state: { ...state, phase: { name: 'Listing', continueToken: event.continueToken, items: phase.items, full: phase.full } },
              actions: [{ type: 'list', continueToken: event.continueToken, limit: cfg.pageSize }],
            };
          }
          const listed = { ...state, resourceVersion: event.resourceVersion, resourceVersionUnavailable: false };
          return watch(listed, ctx, cfg, [{ type: 'replace', items: phase.items, resourceVersion: event.resourceVersion }]);
        }
        case 'listError': {
          if (phase.continueToken !== undefined && event.failure.status === 410) {
            // client-go's pager (FullListIfExpired): a paged list that outlasts the compaction window would expire
            // again if restarted, so fall back to ONE unpaginated LIST; if that fails, the backoff relists paged.
            return {
              state: { ...state, phase: { name: 'Listing', continueToken: undefined, items: [], full: true } },
              actions: [
                { type: 'log', level: 'info', message: `continue token expired (${event.failure.message}); falling back to one full LIST` },
                { type: 'list', continueToken: undefined, limit: 0 },
              ],
            };
          }
          const resume: Resume =
            phase.continueToken !== undefined
              ? { op: 'listPage', continueToken: phase.continueToken, items: phase.items }
              : { op: 'relist' };
          return backoff(state, resume, 'list failed', event.failure, ctx, cfg);
        }
        default:
          return unchanged(state);
      }

    case 'WatchListing':
      switch (event.type) {
        case 'watchEvent': {
          const ev = event.event;
          switch (ev.type) {
            case 'ADDED':
            case 'MODIFIED':
              phase.items.set(cfg.keyFunc(ev.object), ev.object);
              return unchanged(state);
            case 'DELETED':
              phase.items.delete(cfg.keyFunc(ev.object));
              return unchanged(state);
            case 'BOOKMARK': {
              if (ev.object.metadata?.annotations?.[INITIAL_EVENTS_END_ANNOTATION] !== 'true') {
                return fallbackToList(state, 'bookmark without the initial-events-end annotation', ctx, cfg, true);
              }
              const rv = resourceVersionOf(ev.object);
              return {
                state: { ...state, resourceVersion: rv, resourceVersionUnavailable: false, phase: { name: 'Watching', startedAt: phase.startedAt, events: 1 } },
                actions: [{ type: 'replace', items: [...phase.items.values()], resourceVersion: rv }],
              };
            }
            case 'ERROR': {
              const failure = failureFromStatus(ev.object);
              if (isGone(failure) || isResourceVersionTooLarge(failure)) {
                return relistAfterGone(state, 'streaming list expired', failure, ctx, cfg, [{ type: 'cancelRequest' }]);
              }
              if (isWatchListRefusal(failure)) return fallbackToList(state, describe(failure), ctx, cfg, true);
              return backoff(state, { op: 'relist' }, 'streaming list failed', failure, ctx, cfg, [{ type: 'cancelRequest' }]);
            }
          }
          return unchanged(state);
        }
        case 'watchError':
          if (isGone(event.failure) || isResourceVersionTooLarge(event.failure)) {
            return relistAfterGone(state, 'streaming list expired', event.failure, ctx, cfg);
          }
          if (isWatchListRefusal(event.failure)) return fallbackToList(state, describe(event.failure), ctx, cfg, false);
          return backoff(state, { op: 'relist' }, 'streaming list failed', event.failure, ctx, cfg);
        case 'watchEnded':
          return fallbackToList(state, 'stream ended before the initial-events-end bookmark', ctx, cfg, false);
        case 'watchIdle':
          return fallbackToList(state, 'no initial-events-end bookmark before the idle timeout', ctx, cfg, true);
        default:
          return unchanged(state);
      }

    case 'Watching':
      switch (event.type) {
        case 'watchEvent': {
          const ev = event.event;
          const events = phase.events + 1;
          switch (ev.type) {
            case 'ADDED':
            case 'MODIFIED':
            case 'DELETED': {
              const delta = ev.type === 'ADDED' ? 'Added' : ev.type === 'MODIFIED' ? 'Updated' : 'Deleted';
              return {
                state: {
                  ...state,
                  resourceVersion: resourceVersionOf(ev.object) || state.resourceVersion,
                  phase: { ...phase, events },
                },
                actions: [{ type: 'delta', delta, object: ev.object }],
              };
            }
            case 'BOOKMARK':
              return {
                state: { ...state, resourceVersion: resourceVersionOf(ev.object) || state.resourceVersion, phase: { ...phase, events } },
                actions: [],
              };
            case 'ERROR': {
              const failure = failureFromStatus(ev.object);
              if (isGone(failure)) return relistAfterGone(state, 'watch expired', failure, ctx, cfg, [{ type: 'cancelRequest' }]);
              return backoff(state, { op: 'watch' }, 'watch error event', failure, ctx, cfg, [{ type: 'cancelRequest' }]);
            }
          }
          return unchanged(state);
        }
        case 'watchEnded':
          if (phase.events === 0 && ctx.now - phase.startedAt < cfg.minWatchDurationMs) {
            const failure = { status: 0, reason: 'ShortWatch', message: 'very short watch: ended without an event' };
            return backoff(state, { op: 'watch' }, 'watch ended', failure, ctx, cfg);
          }
          return watch(state, ctx, cfg);
        case 'watchError':
          if (isGone(event.failure)) return relistAfterGone(state, 'watch expired', event.failure, ctx, cfg);
          return backoff(state, { op: 'watch' }, 'watch failed', event.failure, ctx, cfg);
        case 'watchIdle': {
          const failure = { status: 0, reason: 'Idle', message: 'no data on the watch stream within the idle timeout' };
          return backoff(state, { op: 'watch' }, 'watch stalled', failure, ctx, cfg, [{ type: 'cancelRequest' }]);
        }
        case 'replaceFailed': {
          const failure = { status: 0, reason: 'ReplaceFailed', message: event.message };
          return backoff(state, { op: 'relist' }, 'the list could not be stored', failure, ctx, cfg, [{ type: 'cancelRequest' }], 'warn', 'relisting');
        }
        default:
          return unchanged(state);
      }

    case 'Backoff': {
      if (event.type === 'serverReachable') {
        if (!phase.wakeable) return unchanged(state);
        const delayMs = Math.round(cfg.wakeJitterMs * ctx.random);
        return {
          state: { ...state, phase: { ...phase, delayMs, wakeable: false } },
          actions: [
            { type: 'log', level: 'info', message: `the API server answers again; retrying in ${delayMs} ms instead of the backoff's ${phase.delayMs} ms` },
            { type: 'scheduleRetry', delayMs },
          ],
        };
      }
      if (event.type !== 'retryTimer') return unchanged(state);
      const resume = phase.resume;
      switch (resume.op) {
        case 'relist':
          return relist(state, ctx, cfg);
        case 'listPage':
          return {
            state: { ...state, phase: { name: 'Listing', continueToken: resume.continueToken, items: resume.items, full: false } },
            actions: [{ type: 'list', continueToken: resume.continueToken, limit: cfg.pageSize }],
          };
        case 'watch':
          return watch(state, ctx, cfg);
      }
    }
  }
}
