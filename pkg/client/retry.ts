/**
 * When the API server says "not now, try again in N seconds", the client tries again — client-go's `checkWait` /
 * `IsNextRetry` (rest/with_retry.go), with one deliberate difference for writes.
 *
 * client-go: a response is retried when its status is 429 or ≥ 500 AND it carries `Retry-After` with an integer
 * number of seconds (`strconv.Atoi`), up to `maxRetries` (10 by default), waiting the header's seconds; any verb whose
 * body can be replayed. Every attempt after the first is counted in `rest_client_request_retries_total{code,verb,host}`
 * with the code of THAT attempt's answer.
 *
 * Here (invariants of `retryDelayMs`):
 * - no `Retry-After`, or one that is not a non-negative integer (the HTTP-date form is not read, as client-go): no retry;
 * - 429 + Retry-After: retried for EVERY verb. A 429 means the server refused the request before doing it (priority
 *   and fairness rejected it, or the storage of a just-created resource is still (re)initializing), so a retried
 *   POST cannot create twice;
 * - 5xx + Retry-After: retried for GET only. A write answered 5xx may have been applied (a 504 after the commit), so
 *   re-sending a POST/PUT/PATCH/DELETE could apply it twice or answer 404/409 for our own first attempt; the caller
 *   (a reconcile, which is retried with backoff anyway) decides. client-go retries these too — this is stricter;
 * - the delay is the header's seconds, capped at `maxDelayMs`; at most `maxRetries` retries per request.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Verb } from './request.ts';

export interface RetryPolicy {
  /** Retries per request after the first attempt (client-go: 10). 0 turns retrying off. */
  maxRetries: number;
  /** Upper bound of one wait, whatever `Retry-After` asks (a server asking for minutes is waited on for this long). */
  maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { maxRetries: 10, maxDelayMs: 10_000 };

/** The seconds of a `Retry-After` header in delta-seconds form, else undefined (absent, a date, negative, junk). */
export function retryAfterSeconds(headers: IncomingHttpHeaders): number | undefined {
  const raw: string | string[] | undefined = headers['retry-after'];
  const value = (typeof raw === 'string' ? raw : raw?.[0])?.trim();
  if (!value || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

/**
 * How long to wait before retrying a request that was answered `status` with `headers`, or undefined when it must
 * not be retried. `attempt` counts the retries already made (0 after the first answer).
 */
export function retryDelayMs(method: Verb, status: number, headers: IncomingHttpHeaders, attempt: number, policy: RetryPolicy): number | undefined {
  if (attempt >= policy.maxRetries) return undefined;
  if (status !== 429 && !(status >= 500 && method === 'GET')) return undefined;
  const seconds = retryAfterSeconds(headers);
  if (seconds === undefined) return undefined;
  return Math.min(seconds * 1000, policy.maxDelayMs);
}

