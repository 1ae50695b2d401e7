/**
 * `eventually(fn, opts)`: Gomega's Eventually for node:test — calls `fn` until it returns a value that is not
 * `undefined`, `null` or `false`, and resolves with that value.
 *
 *   const d = await eventually(() => ignoreNotFound(deployments.get('web')));          // the Deployment, once it exists
 *   await eventually(async () => { assert.equal((await cms.get('a')).data?.x, '1'); return true; });   // an assertion
 *
 * Contract: `fn` is called at once, then every `intervalMs` (default 100 ms) after the previous call settled — never
 * two calls at once. A throw or rejection counts as "not yet" (it is remembered) — except a StopTrying (Gomega's
 * StopTrying), which `fn` throws when what it waits for cannot happen any more (the process it waits on exited):
 * eventually rejects with it at once. After `timeoutMs` (default 30 s)
 * it rejects with an Error saying how long it waited and how many calls were made, with the last error's message (and
 * that error as `cause`) or the last value returned. When `signal` aborts it rejects with the signal's reason at once.
 * When RBAC refused the manager under test (startTestEnv's `rbacPaths`: refused.ts) it rejects at once, before each
 * call, with that refusal (an RbacRefusalError naming the rule to add): what it waits for cannot happen without it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { pendingRefusal } from './refused.ts';

/**
 * Thrown by an `eventually` function when what it waits for cannot happen any more; eventually rejects with it at
 * once instead of calling again until its timeout:
 *
 *   await eventually(async () => {
 *     if (manager.exitCode !== null) throw new StopTrying(`main.ts exited ${manager.exitCode}: ${logs}`);
 *     return (await fetch(readyz).catch(() => undefined))?.ok;
 *   });
 */
export class StopTrying extends Error {
  /** 'StopTrying' (what the error prints as). */
  override name = 'StopTrying';
}

/** Options of eventually: timeout, interval, cancellation, and what the timeout message names. */
export interface EventuallyOptions {
  /** Give up after this long (ms). Default 30 000. */
  timeoutMs?: number;
  /** Pause between calls (ms). Default 100. */
  intervalMs?: number;
  /** Aborting it stops the wait (rejects with its reason). */
  signal?: AbortSignal;
  /** Names what is awaited in the timeout message ("the Deployment"); a function is called at the timeout (e.g. to add logs). */
  message?: string | (() => string);
}

/**
 * Calls `fn` until it returns something other than `undefined`, `null` or `false` and resolves with it (Gomega's
 * Eventually); a throw counts as "not yet", a StopTrying rejects at once. Never two calls at once; rejects after
 * `timeoutMs` with the last error or value, with the signal's reason when it aborts, or with an RbacRefusalError once
 * RBAC refused the manager under test.
 */
export async function eventually<T>(fn: () => T | Promise<T>, opts: EventuallyOptions = {}): Promise<Exclude<T, undefined | null | false>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const intervalMs = opts.intervalMs ?? 100;
  const t0 = Date.now();
  let attempts = 0;
  let lastError: unknown;
  let failed: boolean;
  let lastValue: unknown;
  for (;;) {
    opts.signal?.throwIfAborted();
    const refused = pendingRefusal();
    if (refused) throw refused;
    attempts++;
    try {
      const v = await fn();
      failed = false;
      if (v !== undefined && v !== null && v !== false) return v as Exclude<T, undefined | null | false>;
      lastValue = v;
    } catch (err) {
      if (err instanceof StopTrying) throw err;
      failed = true;
      lastError = err;
    }
    if (Date.now() - t0 >= timeoutMs) {
      const message = typeof opts.message === 'function' ? opts.message() : opts.message;
      const what = message ? ` for ${message}` : '';
      const last = failed
        ? `last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`
        : `last value: ${JSON.stringify(lastValue) ?? String(lastValue)}`;
      throw new Error(`eventually: timed out after ${timeoutMs} ms${what} (${attempts} calls); ${last}`, failed ? { cause: lastError } : undefined);
    }
    try {
      await sleep(intervalMs, undefined, opts.signal ? { signal: opts.signal } : {});
    } catch (err) {
      opts.signal?.throwIfAborted(); // the signal's own reason, not the timer's AbortError
      throw err;
    }
  }
}
