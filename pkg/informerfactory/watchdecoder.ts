/**
 * Incremental decoding of a Kubernetes watch stream: newline-delimited JSON objects `{"type": …, "object": …}`.
 *
 * Invariants:
 *  - Nothing is buffered beyond the current, incomplete line: received chunks are kept as a list of byte views and
 *    joined once per line when its newline arrives, so the cost is linear in the bytes received (no repeated string
 *    concatenation) and a UTF-8 character split across chunks is decoded correctly.
 *  - A JSON event cut across chunks is reassembled; empty lines (keep-alives) are skipped.
 *  - A stream that ends with a non-empty, unterminated line was cut in the middle of an event: the generator throws
 *    WatchDecodeError("stream cut in the middle of an event"); a caller must treat it like a network error (the
 *    events already yielded are valid; resume from the last resourceVersion seen).
 *  - A line that is not a well-formed watch event throws WatchDecodeError. A well-formed event whose `type` is not
 *    one of ADDED/MODIFIED/DELETED/BOOKMARK/ERROR (a newer server's) is skipped, as client-go's reflector skips
 *    events it does not understand, and reported to `onUnknownType`; it never fails the stream.
 *
 * Concurrency: one generator consumes one stream; abort the underlying request (AbortSignal) to stop early, or
 * `return()` the generator (which cancels the stream's reader).
 */

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

const eventTypes: ReadonlySet<string> = new Set<WatchEventType>(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);

export interface WatchEvent<T = unknown> {
  type: WatchEventType;
  /** The object for ADDED/MODIFIED/DELETED; a partial object with metadata.resourceVersion for BOOKMARK; a Status for ERROR. */
  object: T;
}

/** A `Status` object as sent in an ERROR event (and as the body of error responses). */
export interface Status {
  kind?: string;
  status?: string;
  code?: number;
  reason?: string;
  message?: string;
}

export class WatchDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WatchDecodeError';
  }
}

/** A well-formed watch event of a type this client does not know (thrown by parseWatchEvent, skipped by the stream). */
export class UnknownWatchEventTypeError extends WatchDecodeError {
  readonly eventType: string;
  constructor(eventType: string, line: string) {
    super(`unknown watch event type ${JSON.stringify(eventType)}: ${line.slice(0, 200)}`);
    this.name = 'UnknownWatchEventTypeError';
    this.eventType = eventType;
  }
}

/** What can be decoded: an undici/web ReadableStream, a Node Readable, or any async iterable of bytes or strings. */
export type ByteSource = AsyncIterable<Uint8Array | string> | ReadableStream<Uint8Array>;

export interface DecodeOptions {
  /** Called for every chunk received (before decoding), with its size: lets a caller detect a silent stream. */
  onData?: (bytes: number) => void;
  /** Called for every event skipped because its type is unknown (see the module comment). */
  onUnknownType?: (type: string) => void;
}

const NEWLINE = 0x0a;
const encoder = new TextEncoder();

/**
 * Splits a byte stream into lines. Chunks are pushed as they come; complete lines are returned. Only the bytes of
 * the current unterminated line are retained.
 */
export class LineSplitter {
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });

  /** Feeds a chunk; returns the complete lines it terminated (without '\n'), in order. */
  push(chunk: Uint8Array): string[] {
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl < 0) break;
      lines.push(this.take(chunk.subarray(start, nl)));
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.pending.push(chunk.subarray(start));
      this.pendingBytes += chunk.length - start;
    }
    return lines;
  }

  /** Number of bytes of an unterminated line held back. */
  get buffered(): number {
    return this.pendingBytes;
  }

  /** The unterminated rest at end of stream ('' when the stream ended on a line boundary). */
  finish(): string {
    return this.take(new Uint8Array(0));
  }

  private take(tail: Uint8Array): string {
    let bytes: Uint8Array;
    if (this.pending.length === 0) {
      bytes = tail;
    } else {
      bytes = new Uint8Array(this.pendingBytes + tail.length);
      let off = 0;
      for (const p of this.pending) {
        bytes.set(p, off);
        off += p.length;
      }
      bytes.set(tail, off);
      this.pending = [];
      this.pendingBytes = 0;
    }
    try {
      return this.decoder.decode(bytes);
    } catch {
      throw new WatchDecodeError('watch stream line is not valid UTF-8');
    }
  }
}

/** Parses one line into a watch event; throws WatchDecodeError when it is not one (UnknownWatchEventTypeError for a well-formed event of an unknown type). */
export function parseWatchEvent<T = unknown>(line: string): WatchEvent<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (err) {
    throw new WatchDecodeError(`invalid JSON in watch stream: ${(err as Error).message}: ${line.slice(0, 200)}`);
  }
  const ev = parsed as { type?: unknown; object?: unknown };
  if (typeof ev !== 'object' || ev === null || typeof ev.type !== 'string') {
    throw new WatchDecodeError(`not a watch event: ${line.slice(0, 200)}`);
  }
  if (typeof ev.object !== 'object' || ev.object === null) {
    throw new WatchDecodeError(`watch event without an object: ${line.slice(0, 200)}`);
  }
  if (!eventTypes.has(ev.type)) throw new UnknownWatchEventTypeError(ev.type, line);
  return { type: ev.type as WatchEventType, object: ev.object as T };
}

function toBytes(chunk: Uint8Array | string): Uint8Array {
  return typeof chunk === 'string' ? encoder.encode(chunk) : chunk;
}

/** Yields watch events as their lines complete. See the module comment for the error contract. */
export async function* decodeWatchStream<T = unknown>(
  source: ByteSource,
  opts: DecodeOptions = {},
): AsyncGenerator<WatchEvent<T>, void, undefined> {
  const splitter = new LineSplitter();
  // Web ReadableStreams are async iterable in Node; iterating cancels the stream when the consumer stops early.
  for await (const raw of source as AsyncIterable<Uint8Array | string>) {
    const chunk = toBytes(raw);
    opts.onData?.(chunk.length);
    for (const line of splitter.push(chunk)) {
      if (line.trim() === '') continue;
      let event: WatchEvent<T>;
      try {
        event = parseWatchEvent<T>(line);
      } catch (err) {
        if (!(err instanceof UnknownWatchEventTypeError)) throw err;
        opts.onUnknownType?.(err.eventType);
        continue;
      }
      yield event;
    }
  }
  if (splitter.buffered > 0) {
    let rest: string;
    try {
      rest = splitter.finish();
    } catch {
      rest = '?'; // an incomplete UTF-8 sequence: cut inside a character
    }
    if (rest.trim() !== '') throw new WatchDecodeError('stream cut in the middle of an event');
  }
}
