/**
 * ApiError: a Kubernetes `Status` answer of the API server (any non-2xx), or a transport-level failure with status 0,
 * and the predicates controllers test it with (isNotFound, isConflict, isAlreadyExists).
 *
 * Invariant (fromResponse): `status` is the HTTP status; `reason` is the Status reason when the body was a Status
 * carrying one, else the HTTP reason phrase ('Unknown' for an unlisted code); `message` starts with
 * `<METHOD> <path>: HTTP <status>`, and a non-Status body adds at most 200 characters of it on one line.
 */
import type { RawResponse } from './request.ts';

/** A Kubernetes `Status` error from the API server (or a transport-level failure with status 0). */
export class ApiError extends Error {
  /** The HTTP status code (404, 409, …); 0 for a transport-level failure (no answer). */
  readonly status: number;
  /** The Status's reason (`NotFound`, `Conflict`, `AlreadyExists`, …), else the HTTP status text. */
  readonly reason: string;
  /** The answer's body: the parsed Status object, or its text when it was not JSON. */
  readonly body: unknown;

  /** Usually made by the client (see fromResponse); the message names the request. */
  constructor(status: number, reason: string, message: string, body: unknown) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.body = body;
  }

  /** The error of a non-2xx answer: reason and message from its Status body, else one bounded line of its text. */
  static async fromResponse(method: string, path: string, res: RawResponse): Promise<ApiError> {
    const text = await res.text().catch(() => '');
    let body: unknown = text;
    let reason = statusTexts[res.status] ?? 'Unknown';
    let message = `${method} ${path}: HTTP ${res.status}`;
    try {
      body = JSON.parse(text) as unknown;
      const status = body as { reason?: string; message?: string };
      if (status.reason) reason = status.reason;
      if (status.message) message = `${message} ${reason}: ${status.message}`;
    } catch {
      // Not a Status (e.g. kube-apiserver's "404 page not found\n" for an unknown API group): one line, bounded.
      const line = text.trim().replace(/\s*\n\s*/g, ' ').slice(0, 200);
      if (line) message = `${message}: ${line}`;
    }
    return new ApiError(res.status, reason, message, body);
  }
}

/** Whether `err` is an ApiError with HTTP status 404 (apierrors.IsNotFound). */
export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404;
}

/** Whether `err` is an ApiError with HTTP status 409 (apierrors.IsConflict; also true for AlreadyExists). */
export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409;
}

/** Whether `err` is an ApiError 409 with reason AlreadyExists (apierrors.IsAlreadyExists). */
export function isAlreadyExists(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409 && err.reason === 'AlreadyExists';
}

const statusTexts: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  409: 'Conflict', 410: 'Gone', 422: 'Unprocessable Entity', 429: 'Too Many Requests', 500: 'Internal Server Error',
  502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};
