/**
 * EventRecorder: core/v1 Events about any object, with client-go's correlation and spam filtering.
 *
 * Semantics:
 *  - Spam filter (first): a token bucket per source (component, host) + involved object (apiVersion, kind,
 *    namespace, name, uid) — burst 25, refilled continuously at 1 token per 5 minutes, as client-go's
 *    EventSourceObjectSpamFilter. An event finding the bucket empty is dropped (logged at debug level).
 *  - Correlation: an event equal to a recent one in (source, object, type, reason, message) — recent meaning the
 *    previous occurrence was less than `correlationWindowMs` (default 10 min) ago and the entry is still in the LRU —
 *    is merged into the existing Event: `count` rises, `lastTimestamp` moves, and the Event is PATCHed; if the PATCH
 *    answers 404 (the Event expired or was deleted) it is created anew with the current count. Otherwise a new Event
 *    named `<object>.<hex timestamp>` is POSTed with count 1.
 *  - Memory: both caches are LRUs bounded by `cacheSize` (default 4096, as client-go); the write queue is bounded by
 *    `queueLimit` (default 1000); pending writes for the same Event are collapsed into one (latest count wins). Unlike
 *    client-go, entries that can no longer change an outcome are dropped (at most once a minute, when an event is
 *    recorded): a correlation whose last occurrence left the window (a repeat starts a new Event either way) and a
 *    spam bucket refilled to the burst (an absent bucket is a full one). So the caches hold what the last window's
 *    events need, not the run's history — full, about 2 MiB of heap (≈ 520 B per event: a correlation and a spam
 *    bucket, keys and messages of the endurance bench's size; recorder.test.ts "memory: full caches" holds it under
 *    3 MiB), which a churning process otherwise filled and kept for good. Under the endurance bench's churn they fill
 *    to the bound in about half an hour (historical, unverified: heap snapshots of a soak's leader at its 13th, 33rd
 *    and 37th minute, 29 Nov 2026, counted by hand — 2 452, 4 096, 4 096 correlations): a bounded rise, not a leak.
 *  - `event()` never blocks and never throws: it validates, filters and enqueues synchronously; up to
 *    `maxConcurrentWrites` (default 4) background writers perform the writes, oldest first. Writes of the SAME Event
 *    never overlap (a writer skips an Event whose previous write is still in flight), so counts only grow; writes of
 *    different Events may complete in any order (as client-go, which gives no cross-Event ordering either). Failed
 *    writes are retried (`maxRetries`, 5xx/transport errors only) and then dropped with a warning. `flush()`
 *    resolves once everything enqueued so far is written or dropped.
 *  - Bounded shutdown: Events are best-effort guarded writes — only the leader writes them (the write gate), but
 *    nothing waits for them beyond a deadline (docs/safety.md, "Shutdown"). `stopSignal` (the leadership signal)
 *    aborting, or `shutdown(signal)`'s signal aborting, ABANDONS the broadcaster at once: everything queued is dropped
 *    (counted in one warning), retries stop, later events are ignored, and `flush()` / `shutdown()` resolve AT ONCE —
 *    without waiting for the writes in flight. Those are handed the abort, but a sink may not honour it (RestClient
 *    never cuts a write that was sent, see rest.ts): they finish, time out or die with the connection on their own.
 *    So a lost lease or a graceful deadline never waits on a hanging write, nor on `queueLimit` × retries × timeouts.
 *
 * Structure (as client-go): one EventBroadcaster per process owns the sink, queue and caches; each controller gets
 * an EventRecorder from `broadcaster.recorderFor("<name>-controller")` (or `new EventRecorder(opts)` stand-alone).
 * Controllers should depend on the one-method `Recorder` interface (`FakeRecorder` in ./fake.ts for their tests).
 *
 * Objects from list responses often lack apiVersion/kind; set them (or pass an ObjectReference) so the Event's
 * involvedObject is complete.
 *
 * Concurrency: single-threaded JS; `event` may be called from any handler or reconcile. Writes: see above.
 */
import { LRUCache } from 'lru-cache';
import type { KubeObject } from '../apimachinery/meta.ts';
import { ApiError, isNotFound, type RestClient } from '../client/rest.ts';
import { type Logger, silentLogger } from '../log/logger.ts';
import { type Clock, realClock } from '../util/clock.ts';

/** The type of an Event (corev1.EventTypeNormal, corev1.EventTypeWarning). */
export type EventType = 'Normal' | 'Warning';

/** The object an Event is about (corev1.ObjectReference). */
export interface ObjectReference {
  /** The object's `group/version`. */
  apiVersion?: string;
  /** The object's kind. */
  kind?: string;
  /** The object's namespace (also the Event's); absent for cluster-scoped objects. */
  namespace?: string;
  /** The object's name. */
  name?: string;
  /** The object's uid. */
  uid?: string;
  /** The version of the object the event is about. */
  resourceVersion?: string;
  /** A part of the object (e.g. `spec.containers{web}`), when the event is about that part. */
  fieldPath?: string;
}


export interface CoreEvent {
  apiVersion: 'v1';
  kind: 'Event';
  metadata: { name: string; namespace: string; resourceVersion?: string };
  involvedObject: ObjectReference;
  reason: string;
  message: string;
  type: EventType;
  source: { component: string; host?: string };
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  reportingComponent: string;
  reportingInstance: string;
}

export interface EventPatch {
  count: number;
  lastTimestamp: string;
  message: string;
}

/** Where Events are written (the API server, or a fake in tests). Errors reject with ApiError where possible. */
export interface EventSink {
  create(event: CoreEvent, signal?: AbortSignal): Promise<unknown>;
  patch(namespace: string, name: string, patch: EventPatch, signal?: AbortSignal): Promise<unknown>;
}

/**
 * The copy of an Event handed to `EventSink.create`. Ownership contract: the sink OWNS what it is given — it may keep
 * it (a fake sink records it) or serialise it later (RestClient stringifies the body only after awaiting the
 * credentials) — while the recorder keeps mutating its own correlated Event (`count`, `lastTimestamp`) as the same
 * event recurs, and `involvedObject` may be the caller's ObjectReference. So every object level is copied. A CoreEvent
 * is exactly three objects deep with only primitive leaves (metadata, involvedObject, source), so this spread copy is
 * a full deep copy — at a fraction of `structuredClone`'s cost (issue 30: 4.3 → 0.08 µs per Event). A field added to
 * CoreEvent that is an object must be copied here too (recorder.test.ts checks the copy is deep).
 */
export function snapshot(ev: CoreEvent): CoreEvent {
  return { ...ev, metadata: { ...ev.metadata }, involvedObject: { ...ev.involvedObject }, source: { ...ev.source } };
}

/** EventSink over /api/v1/namespaces/NS/events (POST, and JSON merge PATCH of count/lastTimestamp/message). */
export class RestEventSink implements EventSink {
  private readonly rest: Pick<RestClient, 'json'>;

  constructor(rest: Pick<RestClient, 'json'>) {
    this.rest = rest;
  }

  create(event: CoreEvent, signal?: AbortSignal): Promise<unknown> {
    return this.rest.json('POST', `/api/v1/namespaces/${encodeURIComponent(event.metadata.namespace)}/events`, { body: event, signal });
  }

  patch(namespace: string, name: string, patch: EventPatch, signal?: AbortSignal): Promise<unknown> {
    return this.rest.json('PATCH', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events/${encodeURIComponent(name)}`, {
      body: patch,
      contentType: 'application/merge-patch+json',
      signal,
    });
  }
}

/** What controllers depend on: one method, fire-and-forget. */
export interface Recorder {
  /**
   * Records an Event about `obj` (`Normal` or `Warning`, a CamelCase `reason`, a message for humans); returns at
   * once: the write happens in the background and never throws into the caller.
   */
  event(obj: KubeObject | ObjectReference, type: EventType, reason: string, message: string): void;
}

export interface EventRecorderOptions {
  sink: EventSink;
  /** source.component / reportingComponent, e.g. "foo-controller". */
  component: string;
  /** source.host (optional, as in client-go) and reportingInstance (defaults to the host name given here or ""). */
  host?: string;
  clock?: Clock;
  /** Wall clock for timestamps and names. Default `() => new Date()`. */
  wallClock?: () => Date;
  logger?: Logger;
  correlationWindowMs?: number;
  /** Spam filter burst (default 25) and refill interval per token (default 5 min). */
  burst?: number;
  refillIntervalMs?: number;
  /** Entries per LRU cache (default 4096). */
  cacheSize?: number;
  /** Pending writes before new ones are dropped (default 1000). */
  queueLimit?: number;
  /** Writes in flight at once, each for a different Event (default 4). */
  maxConcurrentWrites?: number;
  /** Retries of a failed write on 5xx/transport errors (default 3), `retryDelayMs` apart (default 1 s). */
  maxRetries?: number;
  retryDelayMs?: number;
  /** When this aborts (e.g. leadership lost), the broadcaster abandons everything at once (see the module comment). */
  stopSignal?: AbortSignal;
}

/** How often, at most, the caches are swept of entries that can no longer change an outcome. */
const sweepIntervalMs = 60_000;

/** Longest message kept (client-go's events API limit); longer ones are truncated. */
export const maxMessageLength = 1024;

interface Correlated {
  event: CoreEvent;
  /** Clock time of the latest occurrence. */
  lastSeen: number;
}

interface Pending {
  op: 'create' | 'patch';
  event: CoreEvent;
}

interface Bucket {
  tokens: number;
  last: number;
}

/** Builds an ObjectReference from an object (or passes a reference through). */
export function objectReference(obj: KubeObject | ObjectReference): ObjectReference {
  if ('metadata' in obj && obj.metadata) {
    const m = obj.metadata;
    return { apiVersion: obj.apiVersion, kind: obj.kind, namespace: m.namespace, name: m.name, uid: m.uid, resourceVersion: m.resourceVersion };
  }
  const r = obj as ObjectReference;
  return { apiVersion: r.apiVersion, kind: r.kind, namespace: r.namespace, name: r.name, uid: r.uid, resourceVersion: r.resourceVersion, fieldPath: r.fieldPath };
}

/**
 * EventBroadcaster: the shared part of a family of recorders — one sink, one write queue, one spam filter and one
 * correlation cache (client-go's Broadcaster + EventCorrelator). Create one per process; hand each controller
 * `recorderFor("<name>-controller")`.
 */
export class EventBroadcaster {
  private readonly opts: Omit<EventRecorderOptions, 'component'>;
  private readonly clock: Clock;
  private readonly wallClock: () => Date;
  private readonly log: Logger;
  private readonly buckets: LRUCache<string, Bucket>;
  private readonly correlated: LRUCache<string, Correlated>;
  private readonly queue = new Map<string, Pending>();
  /** Keys of Events being written now (never two writes of one Event at once). */
  private readonly writing = new Set<string>();
  private writers = 0;
  private active = false;
  private idle: Promise<void> = Promise.resolve();
  private markIdle: () => void = () => {};
  private closed = false;
  private seq = 0;
  /** Aborted when the broadcaster is abandoned: cancels the write in flight (if the sink honours it) and retry pauses. */
  private readonly abandonAc = new AbortController();
  /** Clock time of the last sweep of entries that can no longer change an outcome (see "Memory" above). */
  private lastSweep: number;
  /** The options' correlation window, spam burst and refill interval, defaults applied. */
  private readonly windowMs: number;
  private readonly burst: number;
  private readonly refillMs: number;
  /** Resolves when abandoned: flush() and shutdown() stop waiting for writes in flight then. */
  private readonly abandoned = new Promise<void>((resolve) => this.abandonAc.signal.addEventListener('abort', () => resolve(), { once: true }));

  /** Writes nothing yet; `recorderFor(component)` hands out recorders that share its queue and sink. */
  constructor(opts: Omit<EventRecorderOptions, 'component'>) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.wallClock = opts.wallClock ?? (() => new Date());
    this.log = (opts.logger ?? silentLogger).child({ component: 'event-recorder' });
    const max = opts.cacheSize ?? 4096;
    this.buckets = new LRUCache({ max });
    this.correlated = new LRUCache({ max });
    this.lastSweep = this.clock.now();
    this.windowMs = opts.correlationWindowMs ?? 600_000;
    this.burst = opts.burst ?? 25;
    this.refillMs = opts.refillIntervalMs ?? 300_000;
    const stop = opts.stopSignal;
    if (stop?.aborted) this.abandon(stop.reason);
    else stop?.addEventListener('abort', () => this.abandon(stop.reason), { once: true });
  }

  /** A recorder whose events carry `component` as source.component / reportingComponent. */
  recorderFor(component: string): EventRecorder {
    return new EventRecorder({ broadcaster: this, component });
  }

  /**
   * Resolves once every write enqueued before the call (and any enqueued meanwhile) is done or dropped — or at once
   * when the broadcaster is abandoned (writes still in flight then are not waited for).
   */
  async flush(): Promise<void> {
    while (this.active && !this.abandonAc.signal.aborted) await Promise.race([this.idle, this.abandoned]);
  }

  /**
   * Stops accepting events and flushes the queue; if `signal` aborts first, abandons what is left and resolves at
   * once, even while a write is in flight that ignores the abort (a hanging Event POST never holds the caller).
   */
  async shutdown(signal?: AbortSignal): Promise<void> {
    this.closed = true;
    if (signal?.aborted) this.abandon(signal.reason);
    const onAbort = (): void => this.abandon(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await this.flush();
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Closes, drops the queue and aborts the write in flight (idempotent). */
  abandon(reason?: unknown): void {
    this.closed = true;
    if (this.queue.size > 0) {
      this.log.warn({ dropped: this.queue.size, reason: reason instanceof Error ? reason.message : String(reason) }, 'event broadcaster stopped; queued events dropped');
    }
    this.queue.clear();
    if (!this.abandonAc.signal.aborted) this.abandonAc.abort(reason);
  }

  /** Entries in the correlation cache and the spam filter now (for tests and debugging). */
  cachedEntries(): { correlated: number; spamFilter: number } {
    return { correlated: this.correlated.size, spamFilter: this.buckets.size };
  }

  /** See the module comment; never throws. */
  record(component: string, obj: KubeObject | ObjectReference, type: EventType, reason: string, message: string): void {
    try {
      if (this.closed) return;
      if (type !== 'Normal' && type !== 'Warning') {
        this.log.error({ type, reason }, 'unsupported event type; dropped');
        return;
      }
      const ref = objectReference(obj);
      if (!ref.name) {
        this.log.error({ reason, ref }, 'event about an object without a name; dropped');
        return;
      }
      this.sweep();
      const host = this.opts.host;
      const objectKey = JSON.stringify([component, host ?? '', ref.apiVersion ?? '', ref.kind ?? '', ref.namespace ?? '', ref.name, ref.uid ?? '']);
      if (!this.allow(objectKey)) {
        this.log.debug({ kind: ref.kind, namespace: ref.namespace, name: ref.name, reason }, 'event dropped by the spam filter');
        return;
      }
      const msg = truncateMessage(message);
      const key = JSON.stringify([objectKey, type, reason, msg]);
      const now = this.clock.now();
      const stamp = eventTimestamp(this.wallClock());
      const prior = this.correlated.get(key);
      let pending: Pending;
      if (prior && now - prior.lastSeen < this.windowMs) {
        prior.lastSeen = now;
        prior.event.count++;
        prior.event.lastTimestamp = stamp;
        pending = { op: 'patch', event: prior.event };
      } else {
        const event = newCoreEvent({ component, ...(host ? { host } : {}), ref, type, reason, message: msg, stamp, suffix: this.uniqueSuffix() });
        this.correlated.set(key, { event, lastSeen: now });
        pending = { op: 'create', event };
      }
      this.enqueue(key, pending);
    } catch (err) {
      this.log.error({ err, reason }, 'recording event failed');
    }
  }

  /**
   * Drops the entries that can no longer change an outcome (see "Memory" above), at most once per sweep interval:
   * O(cacheSize) then, nothing in between.
   */
  private sweep(): void {
    const now = this.clock.now();
    if (now - this.lastSweep < sweepIntervalMs) return;
    this.lastSweep = now;
    const stale: string[] = [];
    for (const [key, c] of this.correlated.entries()) if (now - c.lastSeen >= this.windowMs) stale.push(key);
    for (const key of stale) this.correlated.delete(key);
    stale.length = 0;
    for (const [key, b] of this.buckets.entries()) if (b.tokens + (now - b.last) / this.refillMs >= this.burst) stale.push(key);
    for (const key of stale) this.buckets.delete(key);
  }

  /** Spam filter: a passive token bucket per source+object. */
  private allow(objectKey: string): boolean {
    const now = this.clock.now();
    const b = this.buckets.get(objectKey) ?? { tokens: this.burst, last: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.last) / this.refillMs);
    b.last = now;
    const ok = b.tokens >= 1;
    if (ok) b.tokens -= 1;
    this.buckets.set(objectKey, b);
    return ok;
  }

  /** Hex nanoseconds like client-go's name suffix, made unique within this process by a sequence number. */
  private uniqueSuffix(): string {
    const ms = BigInt(this.wallClock().getTime());
    return (ms * 1_000_000n + BigInt(this.seq++ % 1_000_000)).toString(16);
  }

  private enqueue(key: string, pending: Pending): void {
    const queued = this.queue.get(key);
    if (queued) {
      // That Event is already waiting. A pending create of the same object carries the newest count (the object is
      // shared); a new Event (window passed) replaces the stale pending write.
      if (queued.event !== pending.event) this.queue.set(key, pending);
    } else if (this.queue.size >= (this.opts.queueLimit ?? 1000)) {
      this.log.warn({ reason: pending.event.reason }, 'event queue full; event dropped');
      return;
    } else {
      this.queue.set(key, pending);
    }
    if (!this.active) {
      this.active = true;
      this.idle = new Promise((resolve) => (this.markIdle = resolve));
    }
    this.startWriters();
  }

  /**
   * Starts writers up to the limit while queued work outnumbers the IDLE writers (a writer whose write is in flight
   * is busy: counting it as available queued a trickle of Events behind one hanging write, for its whole timeout).
   */
  private startWriters(): void {
    const max = this.opts.maxConcurrentWrites ?? 4;
    while (this.writers < max && this.writers - this.writing.size < this.queue.size) {
      this.writers++;
      void this.writer();
    }
  }

  /** Takes the oldest pending write whose Event is not being written already. */
  private take(): [string, Pending] | undefined {
    for (const entry of this.queue) {
      if (!this.writing.has(entry[0])) {
        this.queue.delete(entry[0]);
        return entry;
      }
    }
    return undefined;
  }

  private async writer(): Promise<void> {
    // Never write in the caller's stack.
    await Promise.resolve();
    try {
      for (;;) {
        const next = this.take();
        if (!next) return;
        const [key, pending] = next;
        if (this.abandonAc.signal.aborted) continue; // abandoned: drop what is left
        this.writing.add(key);
        try {
          await this.write(pending);
        } finally {
          this.writing.delete(key);
        }
      }
    } finally {
      this.writers--;
      if (this.writers === 0) {
        if (this.queue.size > 0) {
          this.startWriters(); // only Events that were in flight were left: write them now
        } else {
          this.active = false;
          this.markIdle();
        }
      }
    }
  }

  private async write(p: Pending): Promise<void> {
    const maxRetries = this.opts.maxRetries ?? 3;
    const ev = p.event;
    const ctx = { kind: ev.involvedObject.kind, namespace: ev.involvedObject.namespace, name: ev.involvedObject.name, reason: ev.reason };
    const signal = this.abandonAc.signal;
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) return;
      try {
        if (p.op === 'patch') {
          try {
            await this.opts.sink.patch(ev.metadata.namespace, ev.metadata.name, { count: ev.count, lastTimestamp: ev.lastTimestamp, message: ev.message }, signal);
            return;
          } catch (err) {
            if (!isNotFound(err)) throw err;
            // The Event expired or was deleted: create it again, keeping the count.
          }
        }
        await this.opts.sink.create(snapshot(ev), signal);
        return;
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiError && err.status === 409 && p.op === 'create') return; // already written
        const retriable = !(err instanceof ApiError) || err.status === 0 || err.status === 429 || err.status >= 500;
        if (!retriable || attempt >= maxRetries) {
          this.log.warn({ err, ...ctx }, 'could not write event; dropped');
          return;
        }
        this.log.debug({ err, ...ctx, attempt }, 'writing event failed; retrying');
        try {
          await this.clock.sleep(this.opts.retryDelayMs ?? 1_000, signal);
        } catch {
          return; // abandoned
        }
      }
    }
  }
}

/** Records events for one source component. `new EventRecorder(opts)` brings its own broadcaster. */
export class EventRecorder implements Recorder {
  readonly broadcaster: EventBroadcaster;
  readonly component: string;

  constructor(opts: EventRecorderOptions | { broadcaster: EventBroadcaster; component: string }) {
    this.broadcaster = 'broadcaster' in opts ? opts.broadcaster : new EventBroadcaster(opts);
    this.component = opts.component;
  }

  /** Fire and forget: never blocks, never throws. */
  event(obj: KubeObject | ObjectReference, type: EventType, reason: string, message: string): void {
    this.broadcaster.record(this.component, obj, type, reason, message);
  }

  /** Flushes the (shared) broadcaster. */
  flush(): Promise<void> {
    return this.broadcaster.flush();
  }
}

/** metav1.Time: RFC 3339 with second precision. */
export function eventTimestamp(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** An Event's message as recorded: at most maxMessageLength characters (longer ones end in "..."). */
export function truncateMessage(message: string): string {
  return message.length > maxMessageLength ? message.slice(0, maxMessageLength - 3) + '...' : message;
}

/**
 * The Event a recorder creates for the first occurrence (count 1) of `reason`/`message` about `ref`: named
 * `<object name>.<suffix>` in the object's namespace (`default` for a cluster-scoped object), `message` as given
 * (truncate it first).
 */
export function newCoreEvent(o: {
  component: string; host?: string; ref: ObjectReference; type: EventType; reason: string; message: string; stamp: string; suffix: string;
}): CoreEvent {
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${o.ref.name ?? ''}.${o.suffix}`, namespace: o.ref.namespace || 'default' },
    involvedObject: o.ref,
    reason: o.reason,
    message: o.message,
    type: o.type,
    source: o.host ? { component: o.component, host: o.host } : { component: o.component },
    firstTimestamp: o.stamp,
    lastTimestamp: o.stamp,
    count: 1,
    reportingComponent: o.component,
    reportingInstance: o.host ?? '',
  };
}
