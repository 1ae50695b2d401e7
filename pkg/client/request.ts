/**
 * The request shapes of the API client: verbs, query parameters, per-request options, the unread response, and
 * `JsonClient` — the one method the typed client (typed.ts) needs of a RestClient (rest.ts).
 *
 * Invariant: types only, and no import from rest.ts or typed.ts: rest.ts constructs typed clients and typed.ts
 * sends through a JsonClient, so both depend on this file and neither on the other's definitions of these shapes.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';

/** The HTTP methods the client sends. */
export type Verb = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type Query = Record<string, string | number | boolean | undefined>;

/** Options of one raw request: query, body, content type, cancellation and timeout. */
export interface RequestOptions {
  /** Query parameters (undefined values are left out). */
  query?: Query;
  /** JSON-serialised unless a string. */
  body?: unknown;
  /** Defaults to application/json; use application/merge-patch+json etc. for PATCH. */
  contentType?: string;
  /**
   * The Accept header; default application/json. A JSON media type with parameters asks the API server for another
   * representation, e.g. `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json`
   * (metadata only, with plain JSON as the fallback for servers that cannot).
   */
  accept?: string;
  /** Aborting it cuts a GET; a write is refused if it aborted before the write was sent. */
  signal?: AbortSignal;
  /** Timeout for the whole request, body included. Default 30 s; 0 = none (watches: pass your own signal). */
  timeoutMs?: number;
}

/** A response whose body has not been read: stream it (`body` is an async iterable of bytes) or read `text()`. */
export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as bytes; iterate it, or call `text()` / `dump()`. Ending or destroying it releases the request. */
  body: Readable;
  text(): Promise<string>;
  /** Discards the body (frees the stream for reuse). */
  dump(): Promise<void>;
}

/**
 * What a typed client sends through: one request whose JSON answer is decoded, with non-2xx answers thrown as
 * ApiError (errors.ts). RestClient implements it with its write gate, metrics and timeouts.
 */
export interface JsonClient {
  json<T>(method: Verb, path: string, opts?: RequestOptions): Promise<T>;
}
