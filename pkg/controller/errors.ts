/**
 * Reconcile error classification.
 *
 * - TerminalError (controller-runtime's reconcile.TerminalError): the reconcile failed in a way retrying cannot fix
 *   (invalid spec, …). The controller logs it, counts it in controller_runtime_terminal_reconcile_errors_total (and in
 *   the error totals), forgets the key's backoff and does NOT requeue; the next event for the object triggers a new
 *   reconcile. `isTerminalError` also finds a TerminalError in an error's `cause` chain (like errors.Is).
 *
 * - "Panic": TypeScript has no panics, so we count as a panic what is almost certainly a programming fault rather
 *   than an operational failure:
 *     1. a thrown value that is not an Error (`throw 'x'`, `throw undefined`, `throw {…}`), or
 *     2. an instance of exactly one of the engine's fault classes — TypeError, ReferenceError, RangeError,
 *        SyntaxError, EvalError, URIError — with no `cause` (the engine never sets one; libraries that use
 *        TypeError for I/O failures, like fetch's "fetch failed", do set one, so those stay ordinary errors).
 *   Subclasses of those built-ins are treated as ordinary errors (a library chose the class on purpose).
 *   A panic is also an error: counted in controller_runtime_reconcile_panics_total AND the error totals, and
 *   requeued with backoff — exactly what controller-runtime does with a recovered panic.
 *
 * - PriorityError (`withPriority(err, priority)`): a failed reconcile that asks for its backoff requeue at a queue
 *   priority — what controller-runtime expresses by returning a Result with Priority together with an error (a
 *   thrown error carries no Result here). Found anywhere in the `cause` chain (the outermost wins); a TerminalError
 *   is still not requeued at all.
 */

export class TerminalError extends Error {
  /** A reconcile failure that retrying cannot fix: logged and counted, never requeued. `options.cause` keeps the original. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TerminalError';
  }

  /** Wraps any thrown value as a TerminalError (the original is kept as `cause`). */
  static from(err: unknown): TerminalError {
    if (err instanceof TerminalError) return err;
    const message = err instanceof Error ? err.message : String(err);
    return new TerminalError(message, { cause: err });
  }
}

/** Whether `err` or an error in its `cause` chain is a TerminalError. */
export function isTerminalError(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 16 && e instanceof Error; depth++) {
    if (e instanceof TerminalError) return true;
    e = e.cause;
  }
  return false;
}

/** An error whose rate-limited requeue goes in at `priority` instead of the request's own (see withPriority). */
export class PriorityError extends Error {
  /** Queue priority of the error requeue (PriorityNormal 0, PriorityLow -100; higher first). */
  readonly priority: number;

  /** Usually made by `withPriority(err, priority)`, which keeps `err` as the cause. */
  constructor(priority: number, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PriorityError';
    this.priority = priority;
  }
}

/** `err` (kept as `cause`, message copied) as a PriorityError: the reconcile's error requeue goes in at `priority`. */
export function withPriority(err: unknown, priority: number): PriorityError {
  const message = err instanceof Error ? err.message : String(err);
  return new PriorityError(priority, message, { cause: err });
}

/** The priority of the first PriorityError in `err`'s `cause` chain, if any. */
export function requeuePriorityOf(err: unknown): number | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 16 && e instanceof Error; depth++) {
    if (e instanceof PriorityError) return e.priority;
    e = e.cause;
  }
  return undefined;
}

const faultClasses: ReadonlySet<unknown> = new Set([TypeError, ReferenceError, RangeError, SyntaxError, EvalError, URIError]);

/** Whether a thrown value counts as a panic (programming fault); see the file comment for the rule. */
export function isPanic(err: unknown): boolean {
  if (!(err instanceof Error)) return true;
  return faultClasses.has(err.constructor) && err.cause === undefined;
}
