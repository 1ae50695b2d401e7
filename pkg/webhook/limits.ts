/**
 * InFlightLimiter: what the webhook server's requests may hold at once — how many requests are being read or handled
 * (`maxRequests`), and how many bytes of request bodies they hold (`maxBytes`). The server asks for a Ticket when a
 * request to a registered path arrives, reserves body bytes on it (a declared Content-Length at once, a chunked body
 * chunk by chunk, as the bytes arrive) and releases it once the answer is sent; what does not fit is refused (429).
 *
 * Invariants:
 *  - `requests <= maxRequests` and `bytes <= maxBytes` at every moment: `acquire` and `reserve` refuse rather than
 *    pass a bound, and change nothing when they refuse.
 *  - A Ticket's bytes stay counted until `release`, also after the body was read: they stand for the parsed review
 *    and the answer the request still holds while its handler runs.
 *  - `release` returns the ticket's slot and all its bytes exactly once; later calls, and `reserve` after it, do
 *    nothing (reserve answers false).
 * Not thread-safe in any sense that matters: Node runs it on one thread, and every call completes synchronously.
 */

/** One request's share of an InFlightLimiter: its slot and the body bytes reserved so far. */
export interface Ticket {
  /** Body bytes reserved by this ticket so far. */
  readonly bytes: number;
  /** Reserves `n` more body bytes; false (nothing reserved) when the limiter's byte bound would be passed, or released. */
  reserve(n: number): boolean;
  /** Returns the slot and every reserved byte (idempotent). */
  release(): void;
}

/** Bounds the requests in flight and the request body bytes they hold (see the file comment). */
export class InFlightLimiter {
  /** Most requests held at once. */
  readonly maxRequests: number;
  /** Most request body bytes held at once. */
  readonly maxBytes: number;
  private requestCount = 0;
  private byteCount = 0;

  constructor(maxRequests: number, maxBytes: number) {
    this.maxRequests = maxRequests;
    this.maxBytes = maxBytes;
  }

  /** Requests holding a ticket now. */
  get requests(): number {
    return this.requestCount;
  }

  /** Body bytes reserved by all tickets now. */
  get bytes(): number {
    return this.byteCount;
  }

  /** A ticket for one more request, or undefined when `maxRequests` are already in flight. */
  acquire(): Ticket | undefined {
    if (this.requestCount >= this.maxRequests) return undefined;
    this.requestCount++;
    let held = 0;
    let released = false;
    return {
      get bytes(): number {
        return held;
      },
      reserve: (n: number): boolean => {
        if (released || this.byteCount + n > this.maxBytes) return false;
        this.byteCount += n;
        held += n;
        return true;
      },
      release: (): void => {
        if (released) return;
        released = true;
        this.byteCount -= held;
        this.requestCount--;
      },
    };
  }
}
