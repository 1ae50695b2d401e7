/**
 * The typed resource client: controller-runtime's `client.Client` and kube-rs's `Api<K>` for one resource type.
 *
 *   const cms = mgr.client.resource<ConfigMap>(coreResources.configMaps).namespace('default');
 *   await cms.apply({ metadata: { name: 'settings' }, data: { a: '1' } }, { fieldManager: 'my-controller', force: true });
 *   const cm = await cms.get('settings');
 *   await ignoreNotFound(cms.delete('old', { preconditions: { uid: cm.metadata?.uid } }));
 *
 * Every call is one request through `RestClient.json`, so it has exactly the RestClient's contracts: the write gate
 * (the manager's guarded client refuses writes once leadership is lost), the caller's AbortSignal (cuts reads;
 * refuses writes not yet sent), `rest_client_requests_total`, and ApiError for every non-2xx answer. Reads go to
 * the API server, not to an informer cache: a reconciler reads its cache (a Lister) and uses this for writes and
 * for the rare read the cache cannot answer.
 *
 * Concurrency fences, by call:
 * - `update` (PUT) carries the object's `metadata.resourceVersion`: the server refuses it with 409 Conflict if the
 *   object changed since that version (without a resourceVersion most types accept it unconditionally).
 * - `patch` is unconditional unless the patch itself carries `metadata.resourceVersion` (merge/strategic) or a
 *   `test` operation (JSON patch).
 * - `apply` is unconditional by design: server-side apply merges by field ownership, not by version. The field
 *   manager owns exactly the fields of its last applied configuration; fields set by another manager to a different
 *   value are a 409 Conflict unless `force`. Applying the same configuration again changes nothing (no new
 *   resourceVersion, no watch event).
 * - `delete` is conditional on `preconditions` (uid and/or resourceVersion) when given.
 *
 * A ResourceClient is immutable and stateless: `.namespace(ns)`, `.status()` and `.scale()` return new clients; all
 * are safe to share.
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { collectionPath, objectPath } from '../apimachinery/paths.ts';
import { apiVersionOf, resourceId, type ResourceType } from '../apimachinery/resource.ts';
import {
  applyPatchContentType, deleteBody, listQuery, patchContentType, writeQuery,
  type ApplyConfiguration, type ApplyOptions, type CallOptions, type CreateOptions, type DeleteOptions, type GetOptions,
  type ListOptions, type ObjectList, type Patch, type PatchOptions, type Scale, type Status, type UpdateOptions,
} from './options.ts';
// Not rest.ts: RestClient.resource constructs ResourceClients, so this file sends through the JsonClient interface.
import { ApiError } from './errors.ts';
import type { JsonClient, Query, Verb } from './request.ts';

/** The request options RestClient.json takes, from a call's options. */
function call(opts: CallOptions, extra: { query?: Query; body?: unknown; contentType?: string } = {}): {
  query?: Query; body?: unknown; contentType?: string; signal?: AbortSignal; timeoutMs?: number;
} {
  return { ...extra, ...(opts.signal ? { signal: opts.signal } : {}), ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}) };
}

/** What a resource client and its subresource clients share: the type, the namespace, and how to name a path. */
class Scope {
  readonly rest: JsonClient;
  readonly type: ResourceType;
  /**
   * undefined: all namespaces for list, the object's own `metadata.namespace` for writes of objects. When both are set
   * the client's wins in the path, and the API server refuses a body whose namespace differs (400 BadRequest).
   */
  readonly ns: string | undefined;

  constructor(rest: JsonClient, type: ResourceType, ns: string | undefined) {
    this.rest = rest;
    this.type = type;
    this.ns = ns;
  }

  /** The namespace a call about `obj` (or about a name, when obj is undefined) goes to; throws if one is needed and unknown. */
  namespaceFor(obj?: KubeObject | { metadata?: { namespace?: string } }): string | undefined {
    if (!this.type.namespaced) return undefined;
    const ns = this.ns ?? obj?.metadata?.namespace;
    if (!ns) throw new Error(`${resourceId(this.type)} is namespaced: call .namespace(ns) first${obj ? ' or set metadata.namespace' : ''}`);
    return ns;
  }

  objectPath(name: string, obj?: KubeObject | { metadata?: { namespace?: string } }, subresource?: string): string {
    if (!name) throw new Error(`${resourceId(this.type)}: a name is required`);
    const path = objectPath(this.type, this.namespaceFor(obj), name);
    return subresource ? `${path}/${subresource}` : path;
  }

  /**
   * `obj` with `apiVersion` and `kind` filled from the resource type where absent: custom resources (decoded as
   * unstructured) are refused without them; built-ins accept both.
   */
  typed<O extends object>(obj: O): O & { apiVersion: string; kind: string } {
    const o = obj as O & KubeObject;
    return { ...obj, apiVersion: o.apiVersion ?? apiVersionOf(this.type), kind: o.kind ?? this.type.kind };
  }

  send<R>(method: Verb, path: string, opts: ReturnType<typeof call>): Promise<R> {
    return this.rest.json<R>(method, path, opts);
  }
}

function nameOf(obj: KubeObject): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error('the object has no metadata.name');
  return name;
}

/**
 * What user code holds as "the client": JSON requests (`json`) plus typed clients per resource type (`resource`).
 * RestClient implements it against an API server; `ts-controller-manager/testing`'s FakeClient implements it in
 * memory (its conformance suite, test/fakeclient-conformance.test.ts, runs the same cases on both). Code that takes
 * an ApiClient instead of a RestClient can be unit-tested on the fake.
 */
export interface ApiClient extends JsonClient {
  /** A typed client of `type` on this client (typed.ts). */
  resource<T extends KubeObject = KubeObject>(type: ResourceType): ResourceClient<T>;
}

/** A typed client of one resource type, in one namespace or (list only) all of them. */
export class ResourceClient<T extends KubeObject> {
  readonly #s: Scope;

  /**
   * A client of `type` over `rest` (usually `client.resource(type)` instead), in `namespace` or, without one, all
   * namespaces (list only) or a cluster-scoped type. Throws for a namespace with a cluster-scoped type.
   */
  constructor(rest: JsonClient, type: ResourceType, namespace?: string) {
    if (namespace && !type.namespaced) throw new Error(`${resourceId(type)} is cluster-scoped: no namespace allowed`);
    this.#s = new Scope(rest, type, namespace || undefined);
  }

  /** The resource type this client reads and writes. */
  get type(): ResourceType {
    return this.#s.type;
  }

  /** The namespace of this client; undefined for cluster-scoped types and for an all-namespaces client. */
  get namespaceName(): string | undefined {
    return this.#s.ns;
  }

  /** The same client in namespace `ns`. Throws for a cluster-scoped type. */
  namespace(ns: string): ResourceClient<T> {
    if (!ns) throw new Error(`${resourceId(this.#s.type)}: namespace must not be empty`);
    return new ResourceClient<T>(this.#s.rest, this.#s.type, ns);
  }

  /** GET one object from the API server (not a cache). 404 → ApiError (see ignoreNotFound). */
  async get(name: string, opts: GetOptions = {}): Promise<T> {
    return this.#s.send<T>('GET', this.#s.objectPath(name), call(opts, { query: { resourceVersion: opts.resourceVersion } }));
  }

  /** One page (or, without `limit`, all) of the collection: in this client's namespace, or all namespaces. */
  async list(opts: ListOptions = {}): Promise<ObjectList<T>> {
    return this.#s.send<ObjectList<T>>('GET', collectionPath(this.#s.type, this.#s.ns), call(opts, { query: listQuery(opts) }));
  }

  /**
   * Every item, fetched in pages of `limit` (default 500, as client-go's pager) following `metadata.continue`: one
   * consistent snapshot. If a continue token expired (410 Gone: the snapshot was compacted away, after ~5 min) the
   * list is read again in one request, as client-go's pager does.
   */
  async listAll(opts: Omit<ListOptions, 'limit' | 'continue'> & { limit?: number } = {}): Promise<T[]> {
    const items: T[] = [];
    let cont: string | undefined;
    do {
      let page: ObjectList<T>;
      try {
        page = await this.list({ ...opts, limit: opts.limit ?? 500, ...(cont ? { continue: cont } : {}) });
      } catch (err) {
        if (!cont || !(err instanceof ApiError) || err.status !== 410) throw err;
        return (await this.list({ ...opts, limit: undefined })).items;
      }
      items.push(...page.items);
      cont = page.metadata.continue || undefined;
    } while (cont);
    return items;
  }

  /**
   * POST a new object (its namespace: this client's, else `metadata.namespace`; apiVersion/kind filled from the
   * resource type where absent, as for update and apply). Answers the stored object (with
   * uid, resourceVersion, defaults). 409 AlreadyExists if the name is taken (see ignoreAlreadyExists).
   */
  async create(obj: T, opts: CreateOptions = {}): Promise<T> {
    const path = collectionPath(this.#s.type, this.#s.namespaceFor(obj));
    return this.#s.send<T>('POST', path, call(opts, { query: writeQuery(opts), body: this.#s.typed(obj) }));
  }

  /**
   * PUT the whole object (every field not in `obj` is reset). Fenced by `metadata.resourceVersion`: 409 Conflict if
   * the stored object is newer. Changes to `status` are ignored for types with a status subresource (use status()).
   */
  async update(obj: T, opts: UpdateOptions = {}): Promise<T> {
    return this.#s.send<T>('PUT', this.#s.objectPath(nameOf(obj), obj), call(opts, { query: writeQuery(opts), body: this.#s.typed(obj) }));
  }

  /** PATCH `name` with a merge, JSON or strategic merge patch (see Patch). Answers the patched object. */
  async patch(name: string, patch: Patch<T>, opts: PatchOptions = {}): Promise<T> {
    const { contentType, body } = patchContentType(patch);
    return this.#s.send<T>('PATCH', this.#s.objectPath(name), call(opts, { query: writeQuery(opts), body, contentType }));
  }

  /**
   * Server-side apply: creates the object or merges `config` into it; afterwards `opts.fieldManager` owns exactly
   * the fields in `config` (see the file comment for conflicts and `force`). Answers the resulting object. Applying
   * the same configuration twice is a no-op on the server (same resourceVersion).
   */
  async apply(config: ApplyConfiguration<T>, opts: ApplyOptions): Promise<T> {
    return this.#s.send<T>('PATCH', this.#s.objectPath(config.metadata.name, config), applyCall(this.#s, config, opts));
  }

  /**
   * DELETE `name`. Answers the object when it still exists afterwards (finalizers, foreground deletion, a grace
   * period: `metadata.deletionTimestamp` is set) or when the type answers with the deleted object, else a Status.
   * 404 if already gone (see ignoreNotFound); 409 Conflict if a precondition does not hold.
   */
  async delete(name: string, opts: DeleteOptions = {}): Promise<T | Status> {
    const body = deleteBody(opts);
    return this.#s.send<T | Status>('DELETE', this.#s.objectPath(name), call(opts, body ? { body } : {}));
  }

  /** The `/status` subresource: writes here change only `status` (and the main resource's writes ignore it). */
  status(): StatusClient<T> {
    return new StatusClient<T>(this.#s.rest, this.#s.type, this.#s.ns);
  }

  /** The `/scale` subresource (autoscaling/v1 Scale). */
  scale(): ScaleClient {
    return new ScaleClient(this.#s.rest, this.#s.type, this.#s.ns);
  }
}

function applyCall<T extends KubeObject>(scope: Scope, config: ApplyConfiguration<T>, opts: ApplyOptions): ReturnType<typeof call> {
  if (!opts.fieldManager) throw new Error('server-side apply needs a fieldManager');
  return call(opts, { query: writeQuery(opts), body: scope.typed(config), contentType: applyPatchContentType });
}

/**
 * The `/status` subresource of a type that enables it (CRDs with `subresources.status`, most built-ins). Writes here
 * change `status` only (changes to `spec` in the body are ignored) and leave `metadata.generation` alone; writes to
 * the main resource ignore `status`. Same fences as the main resource.
 */
export class StatusClient<T extends KubeObject> {
  readonly #s: Scope;

  /** The /status client of `type` over `rest` in `namespace` (usually `resourceClient.status()` instead). */
  constructor(rest: JsonClient, type: ResourceType, namespace?: string) {
    this.#s = new Scope(rest, type, namespace || undefined);
  }

  /** GET the object through /status (the whole object, as the server answers it). 404 → ApiError. */
  async get(name: string, opts: GetOptions = {}): Promise<T> {
    return this.#s.send<T>('GET', this.#s.objectPath(name, undefined, 'status'), call(opts, { query: { resourceVersion: opts.resourceVersion } }));
  }

  /** PUT the object's status; fenced by `metadata.resourceVersion` like update(). */
  async update(obj: T, opts: UpdateOptions = {}): Promise<T> {
    return this.#s.send<T>('PUT', this.#s.objectPath(nameOf(obj), obj, 'status'), call(opts, { query: writeQuery(opts), body: this.#s.typed(obj) }));
  }

  /** PATCH the status (merge, JSON or strategic patch); changes outside `status` in the patch are ignored. */
  async patch(name: string, patch: Patch<T>, opts: PatchOptions = {}): Promise<T> {
    const { contentType, body } = patchContentType(patch);
    return this.#s.send<T>('PATCH', this.#s.objectPath(name, undefined, 'status'), call(opts, { query: writeQuery(opts), body, contentType }));
  }

  /** Server-side apply of status fields: the field manager owns the status fields in `config` (separately from its spec fields). */
  async apply(config: ApplyConfiguration<T>, opts: ApplyOptions): Promise<T> {
    return this.#s.send<T>('PATCH', this.#s.objectPath(config.metadata.name, config, 'status'), applyCall(this.#s, config, opts));
  }
}

/**
 * The `/scale` subresource: reads and writes `spec.replicas` through autoscaling/v1 Scale, without the rest of the
 * object. `update` is fenced by the Scale's `metadata.resourceVersion` (the object's) when it carries one.
 */
export class ScaleClient {
  readonly #s: Scope;

  /** The /scale client of `type` over `rest` in `namespace` (usually `resourceClient.scale()` instead). */
  constructor(rest: JsonClient, type: ResourceType, namespace?: string) {
    this.#s = new Scope(rest, type, namespace || undefined);
  }

  /** GET the object's Scale: desired replicas in `spec`, observed replicas and the Pod selector in `status`. */
  async get(name: string, opts: GetOptions = {}): Promise<Scale> {
    return this.#s.send<Scale>('GET', this.#s.objectPath(name, undefined, 'scale'), call(opts, { query: { resourceVersion: opts.resourceVersion } }));
  }

  /** PUT the Scale: sets `spec.replicas` of object `name`; 409 when `scale.metadata.resourceVersion` is stale. */
  async update(name: string, scale: Scale, opts: UpdateOptions = {}): Promise<Scale> {
    const body: Scale = { apiVersion: 'autoscaling/v1', kind: 'Scale', ...scale, metadata: { ...scale.metadata, name, ...(this.#s.ns ? { namespace: this.#s.ns } : {}) } };
    return this.#s.send<Scale>('PUT', this.#s.objectPath(name, undefined, 'scale'), call(opts, { query: writeQuery(opts), body }));
  }

  /** PATCH the Scale, e.g. `{ merge: { spec: { replicas: 3 } } }`. */
  async patch(name: string, patch: Patch<Scale>, opts: PatchOptions = {}): Promise<Scale> {
    const { contentType, body } = patchContentType(patch);
    return this.#s.send<Scale>('PATCH', this.#s.objectPath(name, undefined, 'scale'), call(opts, { query: writeQuery(opts), body, contentType }));
  }
}
