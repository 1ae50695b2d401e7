/**
 * Controller: the generic runner between informer event handlers and a Reconciler (controller-runtime semantics).
 *
 *   informer handler ──enqueue(key)──▶ RateLimitingQueue<string> ──get──▶ N workers ──▶ reconciler(req, signal, ctx)
 *                                             ▲                                                   │
 *                                             └──── forget / addAfter / addRateLimited ◀─ result ─┘
 *
 * Concurrency contract
 *  - Handlers only call `enqueue*`: an O(1) queue add, no I/O, safe at any time (before `start`, while running; a
 *    no-op once shutdown began). Repeated events for one key collapse in the queue.
 *  - Workers are `maxConcurrentReconciles` async loops on the one event loop. Each takes a key from the queue,
 *    reconciles it, applies the result to the queue and calls `done(key)`. The queue hands a key to at most one
 *    worker at a time, so a key is never reconciled twice concurrently; an event that arrives during its reconcile
 *    makes it run again after this one finishes (level-triggered: the reconciler reads current cache state).
 *  - A worker never dies: sync throws, rejections and non-Error throws are all caught and turned into results.
 *  - Workers yield: between two keys a worker gives the event loop a turn (setImmediate) when more keys are queued.
 *    A reconcile that does no I/O (a converged object, read from the cache) resolves through microtasks only, and
 *    the event loop handles I/O only once the microtask queue is empty: without the turn, workers draining a
 *    backlog of such keys would hold every watch event, probe and scrape until the queue was empty — a new
 *    object's event would be enqueued only after the whole initial-list backlog, whatever its priority (measured:
 *    10 000 converged Foos, the new Foo reconciled 3.2 s after ready, when the backlog was done). With it, an event
 *    that arrives during a backlog waits at most one reconcile per worker before it is enqueued.
 *
 * Result handling (in this order, as controller-runtime's reconcileHandler):
 *  - threw a TerminalError (or one in the `cause` chain) → error + terminal counted, key forgotten, NOT requeued;
 *  - threw anything else → error counted (and panic, see errors.ts), `addRateLimited(key)` (per-key exponential
 *    backoff 5 ms → 1000 s, max'ed with a 10 qps / burst 100 bucket by default);
 *  - `{requeueAfter: ms}` with ms > 0 → `forget(key)` + `addAfter(key, ms)`; result `requeue_after`;
 *  - `{requeue: true}` → `addRateLimited(key)`; result `requeue`;
 *  - anything else (void, {}) → `forget(key)`; result `success`.
 * Every requeue (requeueAfter, requeue, error) is queued at `result.priority` when the reconcile returned one (and the
 * priority queue is on), else at the priority the key was handed out with (controller-runtime's Result.Priority). A
 * thrown error carries no Result: its requeue takes the priority of a PriorityError in its cause chain
 * (`throw withPriority(err, p)`, errors.ts), else keeps the key's priority. The queue's de-duplication
 * still keeps the HIGHER of that and any priority an event added meanwhile, and the aging bound still applies: a
 * low `priority` defers a requeue behind real changes, it cannot starve it (pkg/workqueue/queue.ts).
 *
 * Reconcile timeout (`reconcileTimeoutMs`, off by default; controller-runtime's ReconciliationTimeout): each reconcile
 * gets its own signal that also aborts, with a DOMException named "TimeoutError", once the timeout elapses (on the
 * Clock). A reconciler that passes its signal on then rejects, which is an ordinary error: counted, requeued with
 * backoff. `controller_runtime_reconcile_timeouts_total` counts the reconciles whose signal was aborted by the
 * timeout (not by shutdown, which may abort it first), whatever they returned — as controller-runtime counts a
 * context whose deadline, not its parent, ended it. The timeout never abandons a reconcile: the worker waits for
 * the reconciler to return, so a key is still never reconciled twice at once; a reconciler that ignores its signal
 * keeps its worker, and its own result is what counts.
 *
 * Lifecycle
 *  - `start(signal)` runs the workers. When `signal` aborts (or `stop()` is called) the queue is shut down with
 *    drain: no key is handed out any more (queued keys are dropped; they are re-derived from the cache after a
 *    restart) and in-flight reconciles run to completion. `start` resolves when every worker has exited, or when a
 *    graceful timeout expired (then still-running reconciles are abandoned; their late results are ignored).
 *  - The AbortSignal every reconcile receives aborts when shutdown STARTS (start signal aborted, or `stop()`), as
 *    controller-runtime cancels the reconcile context at shutdown: a lost lease must stop API writes at once, and a
 *    SIGTERM should not wait for slow I/O that will simply be redone by the next leader (reconciles are
 *    level-triggered and idempotent). The graceful timeout bounds how long shutdown then waits for reconciles to
 *    return (e.g. one finishing a step that does not take the signal).
 *  - `stop(timeoutMs)` begins the same shutdown and waits at most `timeoutMs` (on the Clock) for in-flight
 *    reconciles. If they do not finish in time it reports `{completed: false, inFlight}` and abandons them.
 *  - Option `gracefulShutdownTimeoutMs` makes the abort of the start signal call `stop(timeoutMs)` by itself.
 *
 * Logs (pino): every reconcile gets a child logger with `controller`, `namespace`, `name` and `reconcileID` (a
 * random UUID), passed to the reconciler as `ctx.log`; a failed reconcile is logged once, by `logReconcileError`
 * (terminal errors at warn without a stack, everything else at error with the stack).
 */
import { randomUUID } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Registry } from 'prom-client';
import { silentLogger, type Logger } from '../log/logger.ts';
import { globalRegistry } from '../metrics/registry.ts';
import { realClock, type Clock } from '../util/clock.ts';
import { PriorityNormal } from '../workqueue/queue.ts';
import { RateLimitingQueue, type RateLimitingWorkQueue } from '../workqueue/ratelimiting.ts';
import type { RateLimiter } from '../workqueue/ratelimiter.ts';
import { isPanic, isTerminalError, requeuePriorityOf } from './errors.ts';
import { controllerMetricFamilies, reconcileResultLabels, type ControllerMetricFamilies, type ReconcileResultLabel } from './metrics.ts';
import { requestCodec, type Request, type RequestCodec } from './request.ts';

/** What a reconcile asks for next. Durations are milliseconds. */
export interface Result {
  /** Reconcile again after this many ms (the key's failure backoff is reset). Wins over `requeue`. */
  requeueAfter?: number;
  /** Reconcile again after the rate limiter's delay (counts as a requeue for backoff). */
  requeue?: boolean;
  /**
   * Queue priority of this key's requeue (see the file comment; PriorityNormal 0, PriorityLow -100, higher first).
   * Default: the priority the key was handed out with. Ignored when the priority queue is off or nothing requeues.
   */
  priority?: number;
}

/** Per-reconcile context handed to the reconciler. */
export interface ReconcileContext {
  /** Logger with controller, namespace, name and reconcileID fields. */
  log: Logger;
  /** A random UUID per reconcile call (in every log line of it), as controller-runtime's. */
  reconcileID: string;
  /** The work-queue key this reconcile is for. */
  key: string;
}

/**
 * Reconciles one object. `signal` aborts when the controller's shutdown starts (SIGTERM, lost lease), or when the
 * reconcile timeout elapses (reason: a DOMException named "TimeoutError"); pass it to every API and Neutron call so
 * no write starts after that.
 * Throw (or reject) to retry with backoff; throw a TerminalError to give up until the next event.
 */
export type Reconciler<Req = Request> = (req: Req, signal: AbortSignal, ctx: ReconcileContext) => Promise<Result | void>;

export interface BaseControllerOptions<Req> {
  /** Controller name: the `controller` label of every metric, the queue's metric name and the `controller` log field. */
  name: string;
  reconciler: Reconciler<Req>;
  /** Number of workers. Default 1. */
  maxConcurrentReconciles?: number;
  /** Default: defaultControllerRateLimiter() on `clock`. */
  rateLimiter?: RateLimiter<string>;
  logger?: Logger;
  /** Default: globalRegistry. */
  registry?: Registry;
  /** Default: realClock. */
  clock?: Clock;
  /** When set, aborting the start signal behaves as `stop(gracefulShutdownTimeoutMs)`. */
  gracefulShutdownTimeoutMs?: number;
  /**
   * Priority queue (default true): `enqueue(key, priority)` orders the queue by priority (see priority.ts). false =
   * plain FIFO (every priority is treated as normal).
   */
  priorityQueue?: boolean;
  /** Aging bound of the priority queue (ms): a waiting key goes first after this long. Default 30 s. */
  maxQueueWaitMs?: number;
  /**
   * Abort each reconcile's signal with a TimeoutError after this many ms (see the file comment). Default: no timeout
   * (undefined, 0 or Infinity), as controller-runtime's ReconciliationTimeout.
   */
  reconcileTimeoutMs?: number;
}

/** `codec` is optional for the default `{namespace, name}` request and required for any other request type. */
export type ControllerOptions<Req = Request> = BaseControllerOptions<Req> &
  ([Req] extends [Request] ? ([Request] extends [Req] ? { codec?: RequestCodec<Req> } : { codec: RequestCodec<Req> }) : { codec: RequestCodec<Req> });

/** What `Controller.stop` reports: whether the in-flight reconciles finished within the timeout. */
export interface StopResult {
  /** True when every in-flight reconcile finished within the timeout. */
  completed: boolean;
  /** Reconciles still running when `stop` returned (0 when completed). */
  inFlight: number;
}

/** Largest delay setTimeout accepts; longer timeouts are treated as "no timeout". */
const maxTimerMs = 2_147_483_647;

function hasNamespacedName(req: unknown): req is Request {
  return (
    typeof req === 'object' &&
    req !== null &&
    typeof (req as Partial<Request>).namespace === 'string' &&
    typeof (req as Partial<Request>).name === 'string'
  );
}

/**
 * Runs a Reconciler over a rate-limited work queue of keys (controller-runtime's controller): handlers enqueue keys,
 * workers reconcile them, a key is never reconciled twice at once, and failures are retried with per-key backoff.
 */
export class Controller<Req = Request> {
  /** The controller's name: the `controller` label of its metrics and the field of its logs. */
  readonly name: string;
  /** Controllers act on the cluster: the Manager runs them only on the leader. */
  readonly needLeaderElection = true;
  /** The controller's queue (exposed for handlers that need addAfter, and for tests). */
  readonly queue: RateLimitingWorkQueue<string>;
  /** The effective reconcile timeout (ms, > 0 and finite); undefined = none. */
  readonly reconcileTimeoutMs: number | undefined;

  private readonly reconciler: Reconciler<Req>;
  private readonly codec: RequestCodec<Req>;
  private readonly workers: number;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly metrics: ControllerMetricFamilies;
  private readonly labels: { controller: string };
  private readonly gracefulShutdownTimeoutMs: number | undefined;
  /** Aborted when shutdown starts; every reconcile receives its signal. */
  private readonly reconcileAbort = new AbortController();
  private readonly priorities: boolean;
  /** Resolved when a stop timeout expired: `start` stops waiting for abandoned reconciles. */
  private readonly abandoned: { promise: Promise<void>; resolve: () => void };
  private started = false;
  private drained: Promise<void> | undefined;
  private inFlightCount = 0;

  /** Starts nothing (the Manager calls start(signal)); throws without a name. Usually made by ControllerBuilder. */
  constructor(opts: ControllerOptions<Req>) {
    if (!opts.name) throw new Error('controller name is required');
    const workers = opts.maxConcurrentReconciles ?? 1;
    if (!Number.isInteger(workers) || workers < 1) {
      throw new Error(`controller ${opts.name}: maxConcurrentReconciles must be a positive integer, got ${workers}`);
    }
    this.name = opts.name;
    this.reconciler = opts.reconciler;
    // The conditional options type guarantees a codec unless Req is exactly Request.
    this.codec = (opts as { codec?: RequestCodec<Req> }).codec ?? (requestCodec as unknown as RequestCodec<Req>);
    this.workers = workers;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger).child({ controller: opts.name });
    const registry = opts.registry ?? globalRegistry;
    this.metrics = controllerMetricFamilies(registry);
    this.labels = { controller: opts.name };
    this.gracefulShutdownTimeoutMs = opts.gracefulShutdownTimeoutMs;
    this.priorities = opts.priorityQueue ?? true;
    const timeoutMs = opts.reconcileTimeoutMs;
    if (timeoutMs !== undefined && !(timeoutMs >= 0)) {
      throw new Error(`controller ${opts.name}: reconcileTimeoutMs must be >= 0, got ${timeoutMs}`);
    }
    this.reconcileTimeoutMs = timeoutMs !== undefined && timeoutMs > 0 && Number.isFinite(timeoutMs) ? timeoutMs : undefined;
    this.queue = new RateLimitingQueue<string>({
      name: opts.name,
      registry,
      clock: this.clock,
      ...(opts.maxQueueWaitMs !== undefined ? { maxWaitMs: opts.maxQueueWaitMs } : {}),
      ...(opts.rateLimiter ? { rateLimiter: opts.rateLimiter } : {}),
    });
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.abandoned = { promise, resolve };
  }

  /**
   * Queues `key` ("ns/name", or "name" for cluster-scoped objects) at `priority` (default PriorityNormal; use
   * `addPriority`/`updatePriority` from priority.ts in event handlers). Cheap; no I/O.
   */
  enqueue(key: string, priority: number = PriorityNormal): void {
    this.queue.add(key, this.priorities ? priority : PriorityNormal);
  }

  /** Queues the key of `req`. */
  enqueueRequest(req: Req, priority: number = PriorityNormal): void {
    this.enqueue(this.codec.key(req), priority);
  }

  /** Queues `key` after `ms` milliseconds (earliest pending deadline wins). */
  enqueueAfter(key: string, ms: number): void {
    this.queue.addAfter(key, ms);
  }

  /**
   * Runnable contract: true while reconciles run after `start` resolved — those abandoned at the graceful timeout.
   * The Manager then does not count this controller as stopped (no lease release, exit 1).
   */
  stillRunning(): boolean {
    return this.inFlightCount > 0;
  }

  /** Number of reconciles running now. */
  inFlight(): number {
    return this.inFlightCount;
  }

  /**
   * Runs the workers until `signal` aborts (or `stop` is called), then drains in-flight reconciles (see the file
   * comment). Rejects only if called twice.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.started) throw new Error(`controller ${this.name}: already started`);
    this.started = true;

    for (const result of reconcileResultLabels) this.metrics.reconcileTotal.inc({ ...this.labels, result }, 0);
    this.metrics.reconcileErrors.inc(this.labels, 0);
    this.metrics.terminalReconcileErrors.inc(this.labels, 0);
    this.metrics.reconcilePanics.inc(this.labels, 0);
    this.metrics.reconcileTimeouts.inc(this.labels, 0);
    this.metrics.maxConcurrentReconciles.set(this.labels, this.workers);
    this.metrics.activeWorkers.set(this.labels, 0);

    const onAbort = (): void => {
      if (this.gracefulShutdownTimeoutMs === undefined) void this.beginShutdown();
      else void this.stop(this.gracefulShutdownTimeoutMs);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });

    this.log.info({ workerCount: this.workers }, 'Starting workers');
    const workers = Array.from({ length: this.workers }, () => this.worker());
    try {
      const how = await Promise.race([
        Promise.all(workers).then(() => 'finished' as const),
        this.abandoned.promise.then(() => 'abandoned' as const),
      ]);
      if (how === 'finished') this.log.info('All workers finished');
      else this.log.warn({ inFlight: this.inFlightCount }, 'Stopped with reconciles still running (graceful timeout expired)');
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Stops handing out keys and waits up to `timeoutMs` for in-flight reconciles. On timeout, aborts the reconciles'
   * signal and resolves `{completed: false, inFlight}`. Safe before `start` and when called repeatedly.
   * `timeoutMs` of Infinity (or beyond setTimeout's range) waits without limit.
   */
  async stop(timeoutMs: number): Promise<StopResult> {
    const drained = this.beginShutdown();
    let timer: { cancel(): void } | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      if (timeoutMs <= maxTimerMs) timer = this.clock.setTimer(Math.max(0, timeoutMs), () => resolve('timeout'));
    });
    const outcome = await Promise.race([drained.then(() => 'drained' as const), timedOut]);
    timer?.cancel();
    if (outcome === 'drained') return { completed: true, inFlight: 0 };
    const inFlight = this.inFlightCount;
    this.log.warn({ inFlight, timeoutMs }, 'Graceful shutdown timeout expired; abandoning in-flight reconciles');
    this.abandoned.resolve();
    return { completed: inFlight === 0, inFlight };
  }

  private beginShutdown(): Promise<void> {
    if (!this.drained) {
      this.log.info({ inFlight: this.inFlightCount }, 'Shutdown signal received: aborting in-flight reconciles and waiting for them to return');
      this.reconcileAbort.abort(new Error(`controller ${this.name}: shutting down`));
      this.drained = this.queue.shutDownWithDrain();
    }
    return this.drained;
  }

  private async worker(): Promise<void> {
    for (;;) {
      const next = await this.queue.get();
      if (next.shutdown) return;
      await this.processItem(next.item);
      // A turn of the event loop before the next key (see "Concurrency contract"): I/O waiting meanwhile — watch
      // events and the priorities they carry, probes, scrapes — is handled first.
      if (this.queue.len() > 0) await yieldToEventLoop();
    }
  }

  /** Reconciles one key and hands it back to the queue. Never rejects. */
  private async processItem(key: string): Promise<void> {
    this.inFlightCount++;
    this.metrics.activeWorkers.inc(this.labels);
    try {
      await this.reconcileHandler(key);
    } catch (err) {
      // Only reachable through a fault in result handling itself (e.g. a throwing log stream): keep the worker alive.
      this.log.error({ err, key }, 'Internal error while handling a reconcile result');
    } finally {
      this.queue.done(key);
      this.inFlightCount--;
      this.metrics.activeWorkers.dec(this.labels);
    }
  }

  /**
   * With a reconcile timeout: a signal for one reconcile that aborts on shutdown (with the shutdown's reason) or when
   * the timeout elapses (with a TimeoutError), whichever comes first. `end()` releases the timer and the shutdown
   * listener and says whether the timeout was what aborted it. Undefined without a timeout (the shared signal).
   */
  private withTimeout(): { signal: AbortSignal; end(): boolean } | undefined {
    const ms = this.reconcileTimeoutMs;
    if (ms === undefined) return undefined;
    const shutdown = this.reconcileAbort.signal;
    const ac = new AbortController();
    const onShutdown = (): void => ac.abort(shutdown.reason);
    if (shutdown.aborted) onShutdown();
    else shutdown.addEventListener('abort', onShutdown, { once: true });
    const timeout = new DOMException(`reconcile timed out after ${ms} ms`, 'TimeoutError');
    const timer = this.clock.setTimer(ms, () => ac.abort(timeout));
    return {
      signal: ac.signal,
      end: () => {
        timer.cancel();
        shutdown.removeEventListener('abort', onShutdown);
        return ac.signal.reason === timeout;
      },
    };
  }

  private count(result: ReconcileResultLabel): void {
    this.metrics.reconcileTotal.inc({ ...this.labels, result });
  }

  private async reconcileHandler(key: string): Promise<void> {
    const reconcileID = randomUUID();
    let req: Req;
    try {
      req = this.codec.parse(key);
    } catch (err) {
      // A key that cannot be parsed will never reconcile: drop it like a terminal error.
      this.queue.forget(key);
      this.metrics.terminalReconcileErrors.inc(this.labels);
      this.metrics.reconcileErrors.inc(this.labels);
      this.count('error');
      this.log.error({ err, key, reconcileID }, 'Invalid work queue key; dropping it');
      return;
    }
    const fields = hasNamespacedName(req) ? { namespace: req.namespace, name: req.name } : { key };
    const log = this.log.child({ ...fields, reconcileID });

    log.debug('Reconciling');
    const started = this.clock.now();
    let failed = false;
    let error: unknown;
    let result: Result | void = undefined;
    const deadline = this.withTimeout();
    try {
      result = await this.reconciler(req, deadline?.signal ?? this.reconcileAbort.signal, { log, reconcileID, key });
    } catch (err) {
      failed = true;
      error = err;
    } finally {
      if (deadline?.end()) this.metrics.reconcileTimeouts.inc(this.labels);
    }
    const seconds = (this.clock.now() - started) / 1000;
    this.metrics.reconcileTime.observe(this.labels, seconds);

    if (failed) {
      const panic = isPanic(error);
      const terminal = !panic && isTerminalError(error);
      if (panic) this.metrics.reconcilePanics.inc(this.labels);
      if (terminal) {
        this.metrics.terminalReconcileErrors.inc(this.labels);
        this.queue.forget(key);
      } else {
        const priority = this.priorities ? requeuePriorityOf(error) : undefined;
        this.queue.addRateLimited(key, priority !== undefined && Number.isFinite(priority) ? priority : undefined);
      }
      this.metrics.reconcileErrors.inc(this.labels);
      this.count('error');
      if (this.reconcileAbort.signal.aborted && !panic) {
        // Expected: the reconcile gave up because shutdown aborted its signal; the next leader redoes it.
        log.info({ err: error, durationSeconds: seconds }, 'Reconcile aborted by shutdown');
      } else {
        logReconcileError(log, error, { terminal, panic, durationSeconds: seconds });
      }
      return;
    }

    const r: Partial<Result> = typeof result === 'object' && result !== null ? result : {};
    // undefined: the queue keeps the priority the key was handed out with.
    const priority = this.priorities && typeof r.priority === 'number' && Number.isFinite(r.priority) ? r.priority : undefined;
    if (typeof r.requeueAfter === 'number' && r.requeueAfter > 0) {
      this.queue.forget(key);
      this.queue.addAfter(key, r.requeueAfter, priority);
      this.count('requeue_after');
      log.debug({ requeueAfter: r.requeueAfter, durationSeconds: seconds }, 'Reconcile done, requeue after delay');
    } else if (r.requeue === true) {
      this.queue.addRateLimited(key, priority);
      this.count('requeue');
      log.debug({ durationSeconds: seconds }, 'Reconcile done, requeue');
    } else {
      this.queue.forget(key);
      this.count('success');
      log.debug({ durationSeconds: seconds }, 'Reconcile successful');
    }
  }
}

/**
 * How a failed reconcile is logged (once per failed reconcile):
 *  - TerminalError (a spec the user must fix, e.g. an empty deploymentName): `warn`, message and `error` (the error's
 *    message, no stack) — not a fault of the manager, and the Warning Event already tells the user;
 *  - panic (isPanic: a bug): `error` "Observed a panic in reconciler" with `err` (stack included);
 *  - any other error (retried with backoff): `error` "Reconciler error" with `err` (stack included).
 */
export function logReconcileError(log: Logger, error: unknown, f: { terminal: boolean; panic: boolean; durationSeconds: number }): void {
  if (f.terminal) {
    const message = error instanceof Error ? error.message : String(error);
    log.warn({ error: message, terminal: true, durationSeconds: f.durationSeconds }, 'Reconciler error (terminal: not retried until the object changes)');
    return;
  }
  log.error({ err: error, terminal: false, panic: f.panic, durationSeconds: f.durationSeconds }, f.panic ? 'Observed a panic in reconciler' : 'Reconciler error');
}
