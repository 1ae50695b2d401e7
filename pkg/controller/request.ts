/**
 * Reconcile requests and their work-queue keys.
 *
 * The work queue holds string keys (dedup needs value equality); the controller turns a key back into a request
 * just before calling the reconciler. The default request is `{namespace, name}` with client-go's key format:
 * "namespace/name" for namespaced objects and "name" for cluster-scoped ones (namespace '').
 */

export interface Request {
  /** The object's namespace; '' for a cluster-scoped object. */
  namespace: string;
  /** The object's name. */
  name: string;
}

/** Converts requests to queue keys and back. `parse(key(r))` must equal `r`; `parse` throws on malformed keys. */
export interface RequestCodec<Req> {
  key(req: Req): string;
  parse(key: string): Req;
}

/** The queue key of a Request: `namespace/name`, or `name` when the namespace is '' (the inverse of parseRequestKey). */
export function requestKey(req: Request): string {
  return req.namespace === '' ? req.name : `${req.namespace}/${req.name}`;
}

/** The Request of a queue key: `name` (cluster-scoped) or `namespace/name`; throws on any other form. */
export function parseRequestKey(key: string): Request {
  const parts = key.split('/');
  if (parts.length === 1 && parts[0] !== '') return { namespace: '', name: key };
  if (parts.length === 2 && parts[0] !== '' && parts[1] !== '') {
    return { namespace: parts[0] as string, name: parts[1] as string };
  }
  throw new Error(`unexpected key format: ${JSON.stringify(key)}`);
}

export const requestCodec: RequestCodec<Request> = { key: requestKey, parse: parseRequestKey };
