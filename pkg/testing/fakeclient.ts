/**
 * FakeClient: an in-memory API server behind the client interface user code holds (`ApiClient`: `json` and
 * `resource<T>(type)` → the real ResourceClient/StatusClient), with listers that read its store — controller-runtime's
 * fake client with a scheme, for unit tests of reconcilers without a control plane.
 *
 *   const fake = new FakeClient({ crdPaths: ['crd.yaml'], resources: [coreResources.deployments] });
 *   await fake.resource(coreResources.namespaces).create({ metadata: { name: 'a' } });
 *   const reconcile = myReconciler(fake.host());             // informer(type).lister() + client, as on a ControllerManager
 *   await reconcile({ namespace: 'a', name: 'x' }, signal, reconcileContext('a/x'));
 *
 * Semantics it implements as kube-apiserver does (each proven on both by test/fakeclient-conformance.test.ts):
 *  - request bodies are taken as JSON, as RestClient sends them (a Date becomes its ISO string, undefined members are
 *    left out, null in a list); the caller's object is copied, never kept.
 *  - resourceVersion: one counter for the whole store, bumped by every write that changes something; a write that
 *    changes nothing (an identical update, an empty merge patch) keeps the resourceVersion.
 *  - update (PUT) with a stale `metadata.resourceVersion` → 409 Conflict; a custom resource without one → 422.
 *  - 404 NotFound (get/update/patch/delete of a missing object, a namespace that does not exist on create),
 *    409 AlreadyExists, `generateName` (5 random characters from the API server's alphabet).
 *  - finalizers: delete of an object with finalizers sets `deletionTimestamp` (and bumps `generation`); the write
 *    that removes the last finalizer deletes it; no new finalizer can be added while deleting (422).
 *  - status subresource (when the type has one): create drops `status`; update/patch of the main resource keep the
 *    stored status; update/patch of `/status` change only `status`. `metadata.generation` starts at 1 and is bumped
 *    by a change outside metadata and status (custom resources) or of `spec` (built-ins that have a generation;
 *    Deployments also count annotations, as the server does).
 *  - list: label selectors (every operator), field selectors on metadata.name/metadata.namespace, limit/continue.
 *  - patches: JSON merge patch (RFC 7386; `metadata.resourceVersion` in it is a precondition), JSON patch (RFC 6902;
 *    a failed `test` → 422); strategic merge patch → 415 for custom resources, as the real server.
 *  - delete preconditions (uid, resourceVersion → 409), dryRun on every write; create with a resourceVersion → 500,
 *    update whose body names another namespace → 400 or another uid → 409.
 *  - custom resources (validation/customresource.ts): every write body is pruned of fields the CRD version's schema
 *    does not declare, nulls of non-nullable fields are dropped or defaulted, `default:`s are filled in; the object
 *    is validated against the schema as kube-openapi validates it (types, formats, required, enum, bounds, lengths,
 *    patterns, item and property counts, int-or-string, list-type set/map duplicates; /status only `status`): 422
 *    Invalid with the server's message and `details.causes` (the order of several errors is the fake's own); then
 *    the CEL rules (`x-kubernetes-validations`, validation/cel.ts, with oldSelf on update). A CRD the server refuses
 *    is refused by addCRD (422, pkg/codegen/structural.ts); one whose patterns the fake cannot evaluate as the server
 *    would is refused with FakeUnsupportedError; CEL rules it cannot evaluate are left unchecked and named at addCRD
 *    (`unchecked`, a process warning), or refused with `uncheckedRules: 'refuse'` (CEL cost is not estimated).
 *  - metadata of every built-in and custom kind (validation/objectmeta.ts): name rule, generateName, labels,
 *    annotation keys and size, finalizer names → 422 with the server's messages.
 *  - built-in defaults (validation/builtins.ts): Deployment, ReplicaSet, Pod templates, Pod (with the default
 *    admission plugins' tolerations and priority), Service (cluster IP and node ports allocated by the fake), Secret
 *    (stringData → data), Namespace; resource quantities stored in canonical form (validation/quantity.ts).
 *  - server-side apply: creates the object from the configuration, or merges it into the stored object (maps key by
 *    key, lists replaced), for exactly the cases whose result does not depend on field ownership; it keeps no
 *    `managedFields`. Everything else is REFUSED with FakeUnsupportedError, never answered differently:
 *    apply without `force` that changes a value already set (the server's answer depends on who owns it), a list
 *    that differs from both the applied list and this field manager's previous configuration (list merging by key
 *    needs managedFields), and a field this manager applied before and now leaves out (removal depends on ownership).
 *
 * Refused with FakeUnsupportedError (a loud failure, never a silent difference): watches (`json` cannot stream),
 * strategic merge patch of built-ins, `fieldValidation: 'Strict'`, delete with propagationPolicy Foreground or
 * Orphan (needs the garbage collector), the `scale` subresource, field selectors other than metadata.name/namespace,
 * and the server-side apply cases above. Not modelled (documented in docs/testing.md): validation of built-in kinds
 * beyond metadata, admission beyond the defaults above, managedFields, garbage collection, other controllers (as in
 * envtest).
 *
 * Listers (`informer(type).lister()`) read an Indexer updated synchronously by every write: a reconciler sees its
 * own writes at once (a real cache lags; that is what the envtest tests are for).
 *
 * Concurrency: single event loop; every call completes its write before its promise resolves. Returned objects are
 * copies: mutating one never changes the store.
 */
import { randomUUID } from 'node:crypto';
import { keyOf } from '../apimachinery/keys.ts';
import { parseSelector } from '../apimachinery/labelselector.ts';
import { jsonEqual } from '../apimachinery/mergepatch.ts';
import type { KubeObject, ObjectMeta } from '../apimachinery/meta.ts';
import { apiVersionOf, coreResources, resourceId, type ResourceType } from '../apimachinery/resource.ts';
import { ApiError } from '../client/errors.ts';
import type { JsonPatchOperation } from '../client/options.ts';
import type { RequestOptions, Verb } from '../client/request.ts';
import { ResourceClient, type ApiClient } from '../client/typed.ts';
import { Indexer, type IndexerReader } from '../informerfactory/indexer.ts';
import { Lister } from '../informerfactory/lister.ts';
import { stripManagedFields } from '../informerfactory/object.ts';
import type { ReconcilerHost } from '../runtime/manager.ts';
import { readCRDs, type CustomResourceDefinition } from './crds.ts';
import { invalidStatus, type FieldError } from '../codegen/fielderrors.ts';
import { validateCRDSchemas } from '../codegen/structural.ts';
import type { ValidationSchema } from '../codegen/openapivalidate.ts';
import { decode, uncheckable, validateSchema } from './validation/customresource.ts';
import { CelUnsupportedError, compileRules, type CelValidator } from './validation/cel.ts';
import { validateObjectMeta, type NameRule } from './validation/objectmeta.ts';
import { defaultBuiltin, type ServiceAllocator } from './validation/builtins.ts';
import { FakeEvents } from './fakeevents.ts';

/** Thrown for what the fake does not model: the message names the feature. Never an ApiError. */
export class FakeUnsupportedError extends Error {
  /** `feature`: what is not supported, named in the message (e.g. 'the scale subresource'). */
  constructor(feature: string) {
    super(`FakeClient does not support ${feature}; test this against a real API server (startTestEnv)`);
    this.name = 'FakeUnsupportedError';
  }
}

/** How the fake treats one resource type. */
export interface FakeResource {
  /** The group, version, resource, kind and scope served. */
  type: ResourceType;
  /** The type has a `/status` subresource. */
  statusSubresource?: boolean;
  /** Objects carry metadata.generation (custom resources and most built-ins with a spec). */
  generation?: boolean;
  /** A change of metadata.annotations bumps the generation too (Deployments: annotations are copied to ReplicaSets). */
  annotationsBumpGeneration?: boolean;
  /** A custom resource (CRD): unconditional update refused (422), strategic merge patch 415. */
  custom?: boolean;
  /** How names are checked (422 on create and update): 'subdomain' (custom resources, most built-ins), 'label' (Namespace, Service); none if unset. */
  nameRule?: NameRule;
  /** openAPIV3Schema of a CRD version: bodies are pruned and defaulted by it, objects validated against it. */
  schema?: ValidationSchema;
  /** The compiled CEL rules (`x-kubernetes-validations`) of the schema, when it has any. */
  cel?: CelValidator;
}

/** Options of `new FakeClient(opts)`: the resource types it serves (built-ins, extra types, CRDs), initial objects, clock. */
export interface FakeClientOptions {
  /** Resource types besides the built-in table (ResourceType: a built-in's behaviour if known, else a plain type). */
  resources?: (ResourceType | FakeResource)[];
  /** CRD manifests (files or directories, as startTestEnv's): every served version, its scope, status subresource and defaults. */
  crdPaths?: string[];
  /** Objects to start with, created in order as by `create` (a missing namespace is created first; `status` is kept). */
  objects?: KubeObject[];
  /** The clock of creation and deletion timestamps. Default: Date.now. */
  now?: () => number;
  /**
   * The source of randomness of uids and `generateName` suffixes, [0, 1): a seeded one makes a run's identities
   * repeatable (`explore` replays plans by seed). Default: crypto's randomUUID and Math.random.
   */
  random?: () => number;
  /**
   * CEL rules (`x-kubernetes-validations`) the fake cannot evaluate as kube-apiserver does — a Kubernetes CEL library
   * function cel-js lacks (`isSorted`, `quantity`, `format.*`, …), `optionalOldSelf`, a rule over a byte, duration or
   * date string: `'warn'` (default) leaves those rules unchecked and says so when the CRD is added — in `unchecked`,
   * and once per process on stderr (a process warning, code TSCM_FAKE_UNCHECKED) — while every other rule is checked;
   * `'refuse'` makes addCRD throw FakeUnsupportedError naming them. Test such rules against a real API server.
   */
  uncheckedRules?: 'warn' | 'refuse';
}

/** The unchecked-rule warnings already printed by this process (each once, however many fakes a test makes). */
const warnedUnchecked = new Set<string>();

/**
 * One committed change of a FakeClient's store, as a watch event carries it: `object` is the stored object (its
 * resourceVersion the change's; for DELETED the last state with the deletion's resourceVersion). Shared, not a copy:
 * do not mutate it.
 */
export interface FakeChange {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  resource: ResourceType;
  object: KubeObject;
}

/** Built-ins: status subresource and generation as kube-apiserver has them. */
const builtins: FakeResource[] = [
  { type: coreResources.namespaces, statusSubresource: true, nameRule: 'label' },
  { type: coreResources.configMaps, nameRule: 'subdomain' },
  { type: coreResources.secrets, nameRule: 'subdomain' },
  { type: coreResources.events, nameRule: 'subdomain' },
  { type: coreResources.leases, nameRule: 'subdomain' },
  { type: coreResources.services, statusSubresource: true, nameRule: 'label' },
  { type: coreResources.pods, statusSubresource: true, generation: true, nameRule: 'subdomain' },
  { type: coreResources.nodes, statusSubresource: true, nameRule: 'subdomain' },
  { type: coreResources.deployments, statusSubresource: true, generation: true, annotationsBumpGeneration: true, nameRule: 'subdomain' },
  { type: coreResources.replicaSets, statusSubresource: true, generation: true, nameRule: 'subdomain' },
];

type Json = Record<string, unknown>;
interface Stored { obj: KubeObject & Json }
interface Target { res: FakeResource; namespace: string | undefined; name: string | undefined; sub: string | undefined }

const nameAlphabet = 'bcdfghjklmnpqrstvwxz2456789';
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
/**
 * A deep copy with JSON's semantics — what a request body becomes on the wire and what the server stores: `toJSON()`
 * is honoured (a Date becomes its ISO string), object members that are undefined, functions or symbols are left out
 * and in arrays become null, non-finite numbers become null; a bigint throws, as JSON.stringify does. Every copy the
 * fake makes (bodies in, objects out, cache entries) goes through it: a walk of plain JSON copies a Deployment in
 * ~2.7 µs where structuredClone takes ~14 µs (JSON.parse(JSON.stringify()) ~9 µs), and a warm run of
 * examples/memcached/reconcile.test.ts's scenario went from 4.0 to 2.9 ms (docs/testing.md "How much faster").
 */
function clone<T>(v: T): T {
  return jsonCopy(v, false) as T;
}

function jsonCopy(v: unknown, inArray: boolean): unknown {
  switch (typeof v) {
    case 'string': case 'boolean': return v;
    case 'number': return Number.isFinite(v) ? v : null;
    case 'undefined': case 'function': case 'symbol': return inArray ? null : undefined;
    case 'bigint': throw new TypeError('Do not know how to serialize a BigInt');
    default: break;
  }
  if (v === null) return null;
  const o = v as { toJSON?: unknown };
  if (typeof o.toJSON === 'function') return jsonCopy((o.toJSON as () => unknown)(), inArray);
  if (Array.isArray(v)) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = jsonCopy(v[i], true);
    return out;
  }
  const out: Json = {};
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    const c = jsonCopy((v as Json)[k], false);
    if (c !== undefined) out[k] = c;
  }
  return out;
}

/**
 * An in-memory API server behind the client interface (`ApiClient`), with listers on its store (controller-runtime's
 * fake client): for unit tests of reconcilers without a control plane. Implements resourceVersion, conflicts,
 * NotFound/AlreadyExists and finalizers as kube-apiserver does (test/fakeclient-conformance.test.ts proves each on both)
 * and refuses what it does not implement with FakeUnsupportedError.
 */
export class FakeClient implements ApiClient {
  private readonly types = new Map<string, FakeResource>();
  private readonly store = new Map<string, Map<string, Stored>>();
  /** The fake informers' caches per resourceId, each with its namespace scope. */
  private readonly caches = new Map<string, { indexer: Indexer<KubeObject>; inScope: (o: KubeObject) => boolean; copy: (o: KubeObject) => KubeObject }[]>();
  /** Last server-side apply configuration per object uid and field manager (+ '/status'). */
  private readonly applied = new Map<string, Map<string, Json>>();
  private rv = 1000;
  private readonly now: () => number;
  private readonly random: (() => number) | undefined;
  private readonly listeners = new Set<(c: FakeChange) => void>();
  /** The Event recorders of host(), made on first use. */
  private events: FakeEvents | undefined;
  private readonly uncheckedRules: 'warn' | 'refuse';
  /**
   * The CEL rules of the added CRDs this fake does not evaluate (FakeClientOptions.uncheckedRules 'warn'), one line
   * each: the CRD, version, field, rule and the function it cannot evaluate. Empty when every rule is checked.
   */
  readonly unchecked: string[] = [];

  /** An empty store (but for `opts.objects`) serving the built-in types, `opts.resources` and the CRDs of `opts.crdPaths`. */
  constructor(opts: FakeClientOptions = {}) {
    this.now = opts.now ?? Date.now;
    this.random = opts.random;
    this.uncheckedRules = opts.uncheckedRules ?? 'warn';
    for (const b of builtins) this.types.set(resourceId(b.type), b);
    for (const crd of opts.crdPaths?.length ? readCRDs(opts.crdPaths) : []) this.addCRD(crd);
    for (const r of opts.resources ?? []) {
      const spec: FakeResource = 'type' in r ? r : (this.types.get(resourceId(r)) ?? { type: r });
      this.types.set(resourceId(spec.type), spec);
    }
    for (const o of opts.objects ?? []) this.seed(o);
  }

  /**
   * Registers the served versions of a CustomResourceDefinition. A CRD kube-apiserver would refuse (its schemas break
   * the structural-schema rules, an unsupported type, a default that does not validate…) is refused the same way:
   * an ApiError 422 with the server's message and causes (pkg/codegen/structural.ts). A CRD the fake cannot check as
   * the server would (validation/customresource.ts `uncheckable`) is refused with FakeUnsupportedError naming it; CEL
   * rules it cannot evaluate are named in `unchecked` and a warning, or refused (FakeClientOptions.uncheckedRules).
   */
  addCRD(crd: CustomResourceDefinition): void {
    const errs = validateCRDSchemas(crd);
    if (errs.length) {
      const name = crd.metadata?.name ?? '';
      const body = invalidStatus('apiextensions.k8s.io', 'CustomResourceDefinition', name, errs);
      throw new ApiError(422, 'Invalid', `FakeClient: ${String(body['message'])}`, body);
    }
    const cels = new Map<string, CelValidator>();
    const uncheckedRules: string[] = [];
    const cannot = (crd.spec?.versions ?? []).flatMap((v) => {
      const schema = v.schema?.openAPIV3Schema as ValidationSchema | undefined;
      const rules = compileRules(schema);
      if (rules.validator) cels.set(v.name, rules.validator);
      uncheckedRules.push(...rules.unsupported.map((w) => `${v.name}: ${w}`));
      return uncheckable(schema).map((w) => `${v.name}: ${w}`);
    });
    if (this.uncheckedRules === 'refuse') cannot.push(...uncheckedRules);
    if (cannot.length) throw new FakeUnsupportedError(`the CRD ${crd.metadata?.name ?? ''}: ${cannot.join('; ')}`);
    if (uncheckedRules.length) {
      const lines = uncheckedRules.map((w) => `the CRD ${crd.metadata?.name ?? ''}: ${w}`);
      this.unchecked.push(...lines);
      const text = `FakeClient does not check ${lines.length === 1 ? 'this CEL rule' : 'these CEL rules'} (every other rule is checked; test them against a real API server, startTestEnv):\n  ${lines.join('\n  ')}`;
      if (!warnedUnchecked.has(text)) {
        warnedUnchecked.add(text);
        process.emitWarning(text, { code: 'TSCM_FAKE_UNCHECKED' });
      }
    }
    const spec = crd.spec;
    for (const v of spec?.versions ?? []) {
      if (v.served === false) continue;
      const type: ResourceType = {
        group: spec?.group ?? '', version: v.name, resource: spec?.names?.plural ?? '', kind: spec?.names?.kind ?? '', namespaced: spec?.scope !== 'Cluster',
      };
      this.types.set(resourceId(type), {
        type, custom: true, generation: true, statusSubresource: v.subresources?.status !== undefined, nameRule: 'subdomain',
        ...(v.schema?.openAPIV3Schema ? { schema: v.schema.openAPIV3Schema } : {}),
        ...(cels.has(v.name) ? { cel: cels.get(v.name) } : {}),
      });
    }
  }

  /**
   * Calls `listener` synchronously with every committed change, in resourceVersion order (what a watch of every type
   * would deliver); returns the function that unsubscribes. A listener must not write to the fake.
   */
  subscribe(listener: (c: FakeChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The store's current resourceVersion (what a consistent LIST would answer). */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** The resource types served (built-ins, `opts.resources`, every served version of the CRDs). */
  resourceTypes(): ResourceType[] {
    return [...this.types.values()].map((r) => r.type);
  }

  /** A typed client of `type` on this fake (the real ResourceClient). */
  resource<T extends KubeObject = KubeObject>(type: ResourceType): ResourceClient<T> {
    return new ResourceClient<T>(this, type);
  }

  /**
   * A fake informer of `type`: `lister()` and `getIndexer()` read a cache updated synchronously by every write
   * (filled with what is stored now). `namespaces` limits it, as a manager's WATCH_NAMESPACE does; `metadataOnly`
   * caches `{ apiVersion, kind, metadata }` as a real metadata-only informer does.
   */
  informer<T extends KubeObject>(type: ResourceType, opts: { namespaces?: readonly string[]; metadataOnly?: boolean } = {}): FakeInformer<T> {
    const res = this.resolve(type);
    const scope = opts.namespaces?.length ? new Set(opts.namespaces) : undefined;
    const indexer = new Indexer<T>();
    const inScope = (o: KubeObject): boolean => !scope || scope.has(o.metadata?.namespace ?? '');
    const copy = opts.metadataOnly ? metadataCopy : cacheCopy;
    for (const { obj } of this.bucket(res).values()) if (inScope(obj)) indexer.add(copy(obj) as T);
    const list = this.caches.get(resourceId(res.type)) ?? [];
    list.push({ indexer: indexer as unknown as Indexer<KubeObject>, inScope, copy });
    this.caches.set(resourceId(res.type), list);
    return new FakeInformer<T>(type, indexer);
  }

  /**
   * This fake as a ReconcilerHost (`informer(type).lister()`, `client`, and `recorderFor(component)`, whose Events are
   * stored in this fake at once: fakeevents.ts), the shape ControllerManager has.
   */
  host(): ReconcilerHost {
    const events = (this.events ??= new FakeEvents(this, this.now));
    return {
      client: this, informer: <T extends KubeObject>(type: ResourceType, opts?: { metadataOnly?: boolean }) => this.informer<T>(type, opts),
      recorderFor: (component: string) => events.recorderFor(component),
    };
  }

  /** Every stored object of `type` (copies), in key order: for assertions. */
  objects<T extends KubeObject>(type: ResourceType): T[] {
    return [...this.bucket(this.resolve(type)).entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, s]) => clone(s.obj) as T);
  }

  /** The JSON request interface of RestClient, answered from memory (ApiError for non-2xx, as RestClient). */
  json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    try {
      if (opts.signal?.aborted) throw opts.signal.reason; // what throwIfAborted() throws, without its first-call cost
      return Promise.resolve(this.handle(method, path, opts) as T);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * The synchronous form of `json`: the answer, or the ApiError thrown (for an in-process API server that must apply a
   * write before its caller's next step, e.g. `explore`'s MemoryApiServer).
   */
  serve(method: Verb, path: string, opts: RequestOptions = {}): unknown {
    return this.handle(method, path, opts);
  }

  // --- request routing ---

  private handle(method: Verb, path: string, opts: RequestOptions): unknown {
    const [p = '', qs] = path.split('?', 2);
    const query: Record<string, unknown> = qs ? { ...Object.fromEntries(new URLSearchParams(qs)), ...opts.query } : { ...opts.query };
    if (query['watch'] === 'true' || query['watch'] === true) throw new FakeUnsupportedError('watch (json() cannot stream; use informer(type) for a cache)');
    if (query['fieldValidation'] === 'Strict') throw new FakeUnsupportedError("fieldValidation 'Strict' (the fake does not validate)");
    const t = this.route(method, p);
    const dryRun = query['dryRun'] === 'All';
    const body = opts.body === undefined ? undefined : (typeof opts.body === 'string' ? JSON.parse(opts.body) as unknown : clone(opts.body));
    if (t.sub === 'scale') throw new FakeUnsupportedError('the scale subresource');
    if (t.sub !== undefined && (t.sub !== 'status' || !t.res.statusSubresource)) throw this.notFoundPath(method, path);
    if (t.name === undefined) {
      if (method === 'GET') return this.list(t, query);
      if (method === 'POST') return this.create(t, asObject(body), dryRun, method, path);
      throw this.error(method, path, 405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
    }
    switch (method) {
      case 'GET': return clone(this.mustGet(t, method, path).obj);
      case 'PUT': return this.update(t, asObject(body), dryRun, method, path);
      case 'PATCH': return this.patch(t, body, opts.contentType ?? 'application/json', query, dryRun, method, path);
      case 'DELETE': {
        const o = isObj(body) ? body : {};
        return this.delete(t, o, dryRun || (Array.isArray(o['dryRun']) && o['dryRun'].includes('All')), method, path);
      }
      default: throw this.error(method, path, 405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }
  }

  /** Parses `/api/v1/...` and `/apis/<group>/<version>/...` into the resource type, namespace, name and subresource. */
  private route(method: string, path: string): Target {
    const segs = path.split('/').filter(Boolean).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api') [group, version, rest] = ['', segs[1] ?? '', segs.slice(2)];
    else if (segs[0] === 'apis') [group, version, rest] = [segs[1] ?? '', segs[2] ?? '', segs.slice(3)];
    else throw this.notFoundPath(method, path);
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && this.types.has(`${rest[2]}${group ? `.${group}` : ''}/${version}`)) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [resource, name, sub] = rest;
    const res = this.types.get(`${resource}${group ? `.${group}` : ''}/${version}`);
    if (!res || (res.type.namespaced && namespace === undefined && name !== undefined)) throw this.notFoundPath(method, path);
    return { res, namespace, name, sub };
  }

  private resolve(type: ResourceType): FakeResource {
    const res = this.types.get(resourceId(type));
    if (!res) throw new Error(`FakeClient: ${resourceId(type)} is not registered (options.resources or crdPaths)`);
    return res;
  }

  private bucket(res: FakeResource): Map<string, Stored> {
    const id = resourceId(res.type);
    let b = this.store.get(id);
    if (!b) this.store.set(id, (b = new Map<string, Stored>()));
    return b;
  }

  // --- verbs ---

  private list(t: Target, query: Record<string, unknown>): unknown {
    const sel = typeof query['labelSelector'] === 'string' && query['labelSelector'] ? parseSelector(query['labelSelector']) : undefined;
    const fields = parseFieldSelector(typeof query['fieldSelector'] === 'string' ? query['fieldSelector'] : '');
    let items = [...this.bucket(t.res).entries()]
      .filter(([, s]) => t.namespace === undefined || s.obj.metadata?.namespace === t.namespace)
      .filter(([, s]) => !sel || sel.matches(s.obj.metadata?.labels))
      .filter(([, s]) => fields.every(([f, op, v]) => ((f === 'metadata.name' ? s.obj.metadata?.name : s.obj.metadata?.namespace) === v) === (op === '=')))
      .sort(([a], [b]) => a.localeCompare(b));
    const cont = typeof query['continue'] === 'string' && query['continue'] ? Buffer.from(query['continue'], 'base64url').toString() : undefined;
    if (cont !== undefined) items = items.filter(([k]) => k > cont);
    const limit = Number(query['limit'] ?? 0);
    const page = limit > 0 ? items.slice(0, limit) : items;
    const more = limit > 0 && items.length > limit;
    const last = page.at(-1)?.[0];
    return {
      apiVersion: apiVersionOf(t.res.type), kind: `${t.res.type.kind}List`,
      metadata: {
        resourceVersion: String(this.rv),
        ...(more && last !== undefined ? { continue: Buffer.from(last).toString('base64url'), remainingItemCount: items.length - limit } : {}),
      },
      items: page.map(([, s]) => clone(s.obj)),
    };
  }

  private create(t: Target, body: Json, dryRun: boolean, method: string, path: string): unknown {
    const meta = (isObj(body['metadata']) ? body['metadata'] : {}) as ObjectMeta & Json;
    const { res } = t;
    if (res.type.namespaced) {
      if (meta.namespace && t.namespace && meta.namespace !== t.namespace) {
        throw this.error(method, path, 400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
      }
      this.checkNamespace(t.namespace ?? '', method, path);
    }
    if (meta.resourceVersion) throw this.error(method, path, 500, 'InternalError', 'resourceVersion should not be set on objects to be created');
    let name = meta.name;
    const random = this.random ?? Math.random;
    if (!name && meta.generateName) name = meta.generateName + Array.from({ length: 5 }, () => nameAlphabet[Math.floor(random() * nameAlphabet.length)]).join('');
    if (!name) throw this.invalid(method, path, res, '', 'metadata.name: Required value: name or generateName is required');
    const key = keyOf(t.namespace, name);
    if (this.bucket(res).has(key)) throw this.error(method, path, 409, 'AlreadyExists', `${qualified(res)} "${name}" already exists`);
    const obj = { ...body, apiVersion: apiVersionOf(res.type), kind: res.type.kind } as KubeObject & Json;
    const m: ObjectMeta & Json = { ...meta, name, uid: this.random ? uuidFrom(this.random) : randomUUID(), creationTimestamp: this.timestamp() };
    if (res.type.namespaced) m.namespace = t.namespace ?? '';
    delete m.resourceVersion; delete m.deletionTimestamp; delete m['deletionGracePeriodSeconds']; delete m.managedFields; delete m.generation;
    if (res.generation) m.generation = 1;
    obj.metadata = m;
    if (res.custom) decode(obj, res.schema);
    if (res.statusSubresource) delete obj['status'];
    if (res.type === coreResources.namespaces || resourceId(res.type) === resourceId(coreResources.namespaces)) {
      obj['spec'] = { finalizers: ['kubernetes'] };
      obj['status'] = { phase: 'Active' };
    }
    if (!res.custom) defaultBuiltin(resourceId(res.type), obj, undefined, this.allocator);
    this.validate(method, path, res, name, this.errorsOf(res, obj, false, undefined));
    if (dryRun) return clone(obj);
    return clone(this.commit(res, key, obj));
  }

  private update(t: Target, body: Json, dryRun: boolean, method: string, path: string): unknown {
    const name = (body['metadata'] as ObjectMeta | undefined)?.name;
    if (name !== t.name) throw this.error(method, path, 400, 'BadRequest', `the name of the object (${name ?? ''}) does not match the name on the URL (${t.name ?? ''})`);
    const meta = body['metadata'] as ObjectMeta;
    if (t.res.type.namespaced && meta.namespace && meta.namespace !== t.namespace) {
      throw this.error(method, path, 400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
    }
    const existing = this.mustGet(t, method, path);
    if (meta.uid && meta.uid !== existing.obj.metadata?.uid) {
      throw this.error(method, path, 409, 'Conflict', `Operation cannot be fulfilled on ${qualified(t.res)} "${t.name ?? ''}": Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${existing.obj.metadata?.uid ?? ''}`);
    }
    return this.write(t, existing, body, dryRun, method, path);
  }

  private patch(t: Target, body: unknown, contentType: string, query: Record<string, unknown>, dryRun: boolean, method: string, path: string): unknown {
    const type = contentType.split(';')[0]?.trim();
    if (type === 'application/apply-patch+yaml') return this.apply(t, asObject(body), query, dryRun, method, path);
    if (type === 'application/strategic-merge-patch+json') {
      if (t.res.custom) throw this.error(method, path, 415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`);
      throw new FakeUnsupportedError('strategic merge patch (patch strategies of built-in types are not modelled)');
    }
    const existing = this.mustGet(t, method, path);
    let next: Json;
    if (type === 'application/merge-patch+json') {
      next = mergePatch(clone(existing.obj), body) as Json;
    } else if (type === 'application/json-patch+json') {
      if (!Array.isArray(body)) throw this.error(method, path, 400, 'BadRequest', 'a JSON patch must be an array of operations');
      try {
        next = jsonPatch(clone(existing.obj), body as JsonPatchOperation[]);
      } catch (err) {
        // The server's message says no more than this; the fake's reason is kept in the body's details.
        const e = this.error(method, path, 422, 'Invalid', 'the server rejected our request due to an error in our request');
        (e.body as Json)['details'] = { causes: [{ message: (err as Error).message }] };
        throw e;
      }
    } else {
      throw this.error(method, path, 415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${contentType}`);
    }
    return this.write(t, existing, next, dryRun, method, path);
  }

  /** Server-side apply within the limits of the file comment. */
  private apply(t: Target, config: Json, query: Record<string, unknown>, dryRun: boolean, method: string, path: string): unknown {
    const manager = typeof query['fieldManager'] === 'string' ? query['fieldManager'] : '';
    if (!manager) throw this.error(method, path, 400, 'BadRequest', 'PATCH requests with apply content type require fieldManager');
    const force = query['force'] === true || query['force'] === 'true';
    const meta = (config['metadata'] ?? {}) as ObjectMeta;
    if (meta.name !== t.name) throw this.error(method, path, 400, 'BadRequest', `the name of the object (${meta.name ?? ''}) does not match the name on the URL (${t.name ?? ''})`);
    const isStatus = t.sub === 'status';
    const existing = this.bucket(t.res).get(keyOf(t.namespace, t.name ?? ''));
    // What this apply owns: for /status only `status`, for the main resource everything but status (when it has a subresource).
    const owned: Json = clone(isStatus ? { status: config['status'] } : config);
    delete owned['apiVersion']; delete owned['kind'];
    if (!isStatus && t.res.statusSubresource) delete owned['status'];
    if (isObj(owned['metadata'])) {
      const m = { ...owned['metadata'] };
      delete m['name']; delete m['namespace']; delete m['resourceVersion'];
      if (Object.keys(m).length) owned['metadata'] = m; else delete owned['metadata'];
    }
    const slot = `${manager}${isStatus ? '/status' : ''}`;
    if (!existing) {
      if (isStatus) throw this.error(method, path, 404, 'NotFound', `${qualified(t.res)} "${t.name ?? ''}" not found`);
      const created = this.create(t, clone(config), dryRun, method, path) as KubeObject;
      if (!dryRun) this.remember(created, slot, owned);
      return created;
    }
    const rvWanted = meta.resourceVersion;
    if (rvWanted && rvWanted !== existing.obj.metadata?.resourceVersion) throw this.conflict(method, path, t);
    const previous = this.applied.get(existing.obj.metadata?.uid ?? '')?.get(slot) ?? {};
    for (const p of leafPaths(previous)) {
      if (getPath(owned, p) === undefined) {
        throw new FakeUnsupportedError(`server-side apply that leaves out a field this field manager applied before (${p.join('.')}): whether the server removes it depends on managedFields`);
      }
    }
    const merged = clone(existing.obj) as Json;
    mergeApplied(merged, owned, previous, force, []);
    const result = this.write(t, existing, { ...merged, metadata: { ...(merged['metadata'] as Json), resourceVersion: existing.obj.metadata?.resourceVersion } }, dryRun, method, path) as KubeObject;
    if (!dryRun) this.remember(result, slot, owned);
    return result;
  }

  /**
   * Remembers what `slot` applied: its configuration, with each list as the server stored it (defaults filled in), so
   * that the next apply recognises the list as still its own.
   */
  private remember(obj: KubeObject, slot: string, owned: Json): void {
    const uid = obj.metadata?.uid ?? '';
    let m = this.applied.get(uid);
    if (!m) this.applied.set(uid, (m = new Map<string, Json>()));
    const config = clone(owned);
    for (const p of leafPaths(config)) {
      const parent = getPath(config, p.slice(0, -1));
      if (Array.isArray(getPath(config, p)) && isObj(parent)) parent[p.at(-1) ?? ''] = clone(getPath(obj, p));
    }
    m.set(slot, config);
  }

  private delete(t: Target, opts: Json, dryRun: boolean, method: string, path: string): unknown {
    const existing = this.mustGet(t, method, path);
    const policy = opts['propagationPolicy'];
    if (policy === 'Foreground' || policy === 'Orphan') throw new FakeUnsupportedError(`delete with propagationPolicy ${policy} (it needs the garbage collector)`);
    const pre = (isObj(opts['preconditions']) ? opts['preconditions'] : {}) as { uid?: string; resourceVersion?: string };
    const m = existing.obj.metadata ?? {};
    if (pre.uid && pre.uid !== m.uid) {
      throw this.error(method, path, 409, 'Conflict', `Operation cannot be fulfilled on ${qualified(t.res)} "${t.name ?? ''}": Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${m.uid ?? ''}`);
    }
    if (pre.resourceVersion && pre.resourceVersion !== m.resourceVersion) {
      throw this.error(method, path, 409, 'Conflict', `Operation cannot be fulfilled on ${qualified(t.res)} "${t.name ?? ''}": Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${m.resourceVersion ?? ''}`);
    }
    const key = keyOf(t.namespace, t.name ?? '');
    const isNamespace = resourceId(t.res.type) === resourceId(coreResources.namespaces);
    if ((m.finalizers?.length ?? 0) > 0 || isNamespace) {
      if (m.deletionTimestamp) return clone(existing.obj);
      const next = clone(existing.obj);
      const nm = next.metadata as ObjectMeta & Json;
      nm.deletionTimestamp = this.timestamp();
      nm['deletionGracePeriodSeconds'] = 0;
      if ((nm.generation ?? 0) > 0) nm.generation = (nm.generation ?? 0) + 1;
      if (isNamespace) next['status'] = { ...(next['status'] as Json | undefined), phase: 'Terminating' };
      return clone(dryRun ? next : this.commit(t.res, key, next));
    }
    if (!dryRun) this.remove(t.res, key);
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name: t.name, group: t.res.type.group, kind: t.res.type.resource, uid: m.uid } };
  }

  /**
   * An update (PUT, patch result, apply result) of `existing` to `incoming`: resourceVersion fence, subresource
   * separation, immutable metadata, generation, finalizer rules; no change → no write. `incoming` is a private copy
   * that write takes over (every caller passes a parsed or cloned body, or a merge result): it is not copied again.
   */
  private write(t: Target, existing: Stored, incoming: Json, dryRun: boolean, method: string, path: string): unknown {
    const { res } = t;
    const old = existing.obj;
    const om = old.metadata ?? {};
    const inMeta = (isObj(incoming['metadata']) ? incoming['metadata'] : {}) as ObjectMeta & Json;
    if (inMeta.resourceVersion) {
      if (inMeta.resourceVersion !== om.resourceVersion) throw this.conflict(method, path, t);
    } else if (res.custom) {
      throw this.invalid(method, path, res, t.name ?? '', 'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update');
    }
    let next: KubeObject & Json;
    if (res.custom) decode(incoming, res.schema);
    if (t.sub === 'status') {
      next = clone(old);
      if (incoming['status'] === undefined) delete next['status']; else next['status'] = clone(incoming['status']);
    } else {
      next = { ...incoming, apiVersion: apiVersionOf(res.type), kind: res.type.kind };
      const m: ObjectMeta & Json = { ...inMeta };
      for (const k of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation', 'name', 'namespace'] as const) {
        const v = (om as Json)[k];
        if (v === undefined) delete (m as Json)[k]; else (m as Json)[k] = v;
      }
      delete m.managedFields;
      next.metadata = m;
      if (res.statusSubresource) {
        if (old['status'] === undefined) delete next['status']; else next['status'] = clone(old['status']);
      }
      if (!res.custom) defaultBuiltin(resourceId(res.type), next, old, this.allocator);
      if (om.deletionTimestamp) {
        const added = (m.finalizers ?? []).filter((f) => !(om.finalizers ?? []).includes(f));
        if (added.length) {
          throw this.invalid(method, path, res, t.name ?? '', `metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(', ')}}`);
        }
      }
      if (res.generation && specChanged(res, old, next)) m.generation = (om.generation ?? 0) + 1;
    }
    this.validate(method, path, res, t.name ?? '', this.errorsOf(res, next, t.sub === 'status', old));
    (next.metadata as ObjectMeta).resourceVersion = om.resourceVersion;
    if (jsonEqual(next, old)) return clone(old);
    const key = keyOf(t.namespace, t.name ?? '');
    if (dryRun) return clone(next);
    if (next.metadata?.deletionTimestamp && (next.metadata.finalizers?.length ?? 0) === 0) {
      this.rv++;
      next.metadata.resourceVersion = String(this.rv);
      this.remove(res, key, false, next);
      return clone(next);
    }
    return clone(this.commit(res, key, next));
  }

  // --- store ---

  private commit(res: FakeResource, key: string, obj: KubeObject & Json): KubeObject & Json {
    (obj.metadata as ObjectMeta).resourceVersion = String(++this.rv);
    const existed = this.bucket(res).has(key);
    this.bucket(res).set(key, { obj });
    for (const c of this.caches.get(resourceId(res.type)) ?? []) if (c.inScope(obj)) c.indexer.update(c.copy(obj));
    this.notify(existed ? 'MODIFIED' : 'ADDED', res, obj);
    return obj;
  }

  /** Removes the object at `key`; `last` is its final state (default: the stored one, given the deletion's resourceVersion). */
  private remove(res: FakeResource, key: string, bump = true, last?: KubeObject & Json): void {
    if (bump) this.rv++;
    const stored = this.bucket(res).get(key);
    this.bucket(res).delete(key);
    if (stored) this.applied.delete(stored.obj.metadata?.uid ?? '');
    for (const c of this.caches.get(resourceId(res.type)) ?? []) c.indexer.deleteByKey(key);
    const final = last ?? (stored && { ...stored.obj, metadata: { ...stored.obj.metadata, resourceVersion: String(this.rv) } });
    if (final) this.notify('DELETED', res, final);
  }

  private notify(type: FakeChange['type'], res: FakeResource, object: KubeObject): void {
    for (const l of this.listeners) l({ type, resource: res.type, object });
  }

  private seed(o: KubeObject): void {
    const [group, version] = (o.apiVersion ?? '').includes('/') ? (o.apiVersion ?? '').split('/') : ['', o.apiVersion ?? ''];
    const res = [...this.types.values()].find((r) => r.type.group === group && r.type.version === version && r.type.kind === o.kind);
    if (!res) throw new Error(`FakeClient: no registered resource for ${o.apiVersion ?? '?'} ${o.kind ?? '?'}`);
    const ns = res.type.namespaced ? (o.metadata?.namespace ?? 'default') : undefined;
    const nsKey = keyOf(undefined, ns ?? '');
    if (ns !== undefined && !this.bucket(this.resolve(coreResources.namespaces)).has(nsKey)) {
      this.seed({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    }
    const status = (o as Json)['status'];
    const created = this.create({ res, namespace: ns, name: undefined, sub: undefined }, clone(o) as Json, false, 'POST', '(seed)') as KubeObject & Json;
    if (status !== undefined && res.statusSubresource) {
      const s = this.bucket(res).get(keyOf(ns, created.metadata?.name ?? ''));
      if (s) this.commit(res, keyOf(ns, created.metadata?.name ?? ''), { ...s.obj, status: clone(status) });
    }
  }

  private checkNamespace(ns: string, method: string, path: string): void {
    const n = this.bucket(this.resolve(coreResources.namespaces)).get(ns);
    if (!n) throw this.error(method, path, 404, 'NotFound', `namespaces "${ns}" not found`);
    if (n.obj.metadata?.deletionTimestamp) {
      throw this.error(method, path, 403, 'Forbidden', `unable to create new content in namespace ${ns} because it is being terminated`);
    }
  }

  private mustGet(t: Target, method: string, path: string): Stored {
    const s = this.bucket(t.res).get(keyOf(t.namespace, t.name ?? ''));
    if (!s) throw this.error(method, path, 404, 'NotFound', `${qualified(t.res)} "${t.name ?? ''}" not found`);
    return s;
  }

  private timestamp(): string {
    return new Date(Math.floor(this.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
  }

  // --- errors, shaped as RestClient's ApiError.fromResponse makes them ---

  private error(method: string, path: string, status: number, reason: string, message: string): ApiError {
    const body = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code: status };
    return new ApiError(status, reason, `${method} ${path}: HTTP ${status} ${reason}: ${message}`, body);
  }

  private invalid(method: string, path: string, res: FakeResource, name: string, detail: string): ApiError {
    return this.error(method, path, 422, 'Invalid', `${res.type.kind}${res.type.group ? `.${res.type.group}` : ''} "${name}" is invalid: ${detail}`);
  }

  /**
   * The Service registry's allocator: cluster IPs from 10.0.0.0/24 (.2–.254; .1 is the kubernetes Service's on a real
   * cluster) and node ports from 30000–32767, each free in the stored Services, drawn from the random source.
   */
  private readonly allocator: ServiceAllocator = {
    clusterIP: () => {
      const used = new Set(this.storedServices().flatMap((s) => [s.spec?.clusterIP, ...(s.spec?.clusterIPs ?? [])]));
      const free = Array.from({ length: 253 }, (_, i) => `10.0.0.${i + 2}`).filter((ip) => !used.has(ip));
      const ip = free[Math.floor((this.random ?? Math.random)() * free.length)];
      if (!ip) throw new ApiError(500, 'InternalError', 'failed to allocate a serviceIP: range is full', undefined);
      return ip;
    },
    nodePort: (taken) => {
      const used = new Set<unknown>(taken);
      for (const n of this.storedServices().flatMap((s) => [s.spec?.healthCheckNodePort, ...(s.spec?.ports ?? []).map((p) => p.nodePort)])) used.add(n);
      for (let i = 0; i < 10_000; i++) {
        const port = 30000 + Math.floor((this.random ?? Math.random)() * 2768);
        if (!used.has(port)) return port;
      }
      throw new ApiError(500, 'InternalError', 'failed to allocate a nodePort: range is full', undefined);
    },
  };

  private storedServices(): { spec?: { clusterIP?: string; clusterIPs?: string[]; healthCheckNodePort?: number; ports?: { nodePort?: number }[] } }[] {
    return [...(this.store.get(resourceId(coreResources.services))?.values() ?? [])].map((s) => s.obj as never);
  }

  /** The validation errors of `obj` about to be stored: metadata (by the type's name rule), then a custom resource's schema. */
  private errorsOf(res: FakeResource, obj: Json, statusOnly: boolean, old: Json | undefined): FieldError[] {
    const meta = isObj(obj['metadata']) ? obj['metadata'] : {};
    try {
      return [
        ...(res.nameRule ? validateObjectMeta(meta, res.nameRule) : []),
        ...(res.custom ? validateSchema(obj, res.schema, statusOnly, res.cel, old) : []),
      ];
    } catch (err) {
      if (err instanceof CelUnsupportedError) throw new FakeUnsupportedError(err.message);
      throw err;
    }
  }

  /** Throws the server's 422 Invalid answer (message and details.causes) when `errs` is not empty. */
  private validate(method: string, path: string, res: FakeResource, name: string, errs: FieldError[]): void {
    if (errs.length === 0) return;
    const body = invalidStatus(res.type.group, res.type.kind, name, errs);
    throw new ApiError(422, 'Invalid', `${method} ${path}: HTTP 422 Invalid: ${String(body['message'])}`, body);
  }

  private conflict(method: string, path: string, t: Target): ApiError {
    return this.error(method, path, 409, 'Conflict',
      `Operation cannot be fulfilled on ${qualified(t.res)} "${t.name ?? ''}": the object has been modified; please apply your changes to the latest version and try again`);
  }

  private notFoundPath(method: string, path: string): ApiError {
    return this.error(method, path, 404, 'NotFound', 'the server could not find the requested resource');
  }
}

/** A version-4 UUID from a [0, 1) random source (repeatable for a seeded one). */
function uuidFrom(random: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(random() * 16).toString(16));
  hex[12] = '4';
  hex[16] = (8 + Math.floor(random() * 4)).toString(16);
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A fake informer: a cache kept current by the FakeClient's writes (see FakeClient.informer). */
export class FakeInformer<T extends KubeObject> {
  /** The resource type it caches. */
  readonly resource: ResourceType;
  readonly #indexer: Indexer<T>;
  readonly #lister: Lister<T>;

  /** Made by `FakeClient.informer(type)`, which fills `indexer` and keeps it current. */
  constructor(resource: ResourceType, indexer: Indexer<T>) {
    this.resource = resource;
    this.#indexer = indexer;
    this.#lister = new Lister(indexer);
  }

  /** A Lister on the cache (get by namespace/name, list by namespace and label selector), as a real informer's. */
  lister(): Lister<T> {
    return this.#lister;
  }

  /** The cache itself, read-only (byIndex, listKeys, …), as a real informer's getIndexer(). */
  getIndexer(): IndexerReader<T> {
    return this.#indexer;
  }

  /** Always true: the cache is filled at creation and never lags. */
  hasSynced(): boolean {
    return true;
  }
}

/** What an informer caches: a copy without managedFields (the real informers' default transform). */
function cacheCopy(obj: KubeObject): KubeObject {
  return stripManagedFields(clone(obj));
}

/** What a metadata-only informer caches: `{ apiVersion, kind, metadata }` (metadata without managedFields). */
function metadataCopy(obj: KubeObject): KubeObject {
  const c = cacheCopy(obj);
  return { apiVersion: c.apiVersion, kind: c.kind, metadata: c.metadata ?? {} };
}

function asObject(body: unknown): Json {
  if (!isObj(body)) throw new ApiError(400, 'BadRequest', 'the request body must be a JSON object', undefined);
  return body;
}

/** `configmaps`, `deployments.apps`: how the API server names a resource in messages. */
function qualified(res: FakeResource): string {
  return res.type.group ? `${res.type.resource}.${res.type.group}` : res.type.resource;
}

/** Whether an update bumps metadata.generation: spec (built-ins) or anything outside metadata/status (custom resources). */
function specChanged(res: FakeResource, a: Json, b: Json): boolean {
  if (res.annotationsBumpGeneration && !jsonEqual((a['metadata'] as ObjectMeta | undefined)?.annotations, (b['metadata'] as ObjectMeta | undefined)?.annotations)) return true;
  if (!res.custom) return !jsonEqual(a['spec'], b['spec']);
  const strip = (o: Json): Json => {
    const c: Json = { ...o };
    delete c['metadata']; delete c['apiVersion']; delete c['kind'];
    if (res.statusSubresource) delete c['status'];
    return c;
  };
  return !jsonEqual(strip(a), strip(b));
}

function parseFieldSelector(s: string): [string, '=' | '!=', string][] {
  if (!s) return [];
  return s.split(',').map((part) => {
    const m = /^\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (!m || (m[1] !== 'metadata.name' && m[1] !== 'metadata.namespace')) {
      throw new FakeUnsupportedError(`the field selector ${JSON.stringify(part)} (only metadata.name and metadata.namespace are modelled)`);
    }
    return [m[1], m[2] === '!=' ? '!=' : '=', m[3] ?? ''];
  });
}

/** RFC 7386 merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return clone(patch);
  const out: Json = isObj(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6902 JSON patch; throws on a failed test or a missing path. */
export function jsonPatch(doc: Json, ops: readonly JsonPatchOperation[]): Json {
  const parse = (ptr: string): string[] => {
    if (ptr === '') return [];
    if (!ptr.startsWith('/')) throw new Error(`invalid JSON pointer ${ptr}`);
    return ptr.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  };
  const parentOf = (root: Json, segs: string[]): [Json | unknown[], string] => {
    let cur: unknown = root;
    for (const s of segs.slice(0, -1)) {
      cur = Array.isArray(cur) ? cur[Number(s)] : isObj(cur) ? cur[s] : undefined;
      if (cur === undefined) throw new Error(`missing path: /${segs.join('/')}`);
    }
    if (!Array.isArray(cur) && !isObj(cur)) throw new Error(`missing path: /${segs.join('/')}`);
    return [cur, segs.at(-1) ?? ''];
  };
  const read = (root: Json, ptr: string): unknown => {
    let cur: unknown = root;
    for (const s of parse(ptr)) {
      cur = Array.isArray(cur) ? cur[Number(s)] : isObj(cur) ? cur[s] : undefined;
      if (cur === undefined) throw new Error(`missing path: ${ptr}`);
    }
    return cur;
  };
  const put = (root: Json, ptr: string, value: unknown, replace: boolean): void => {
    const [parent, last] = parentOf(root, parse(ptr));
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (!Number.isInteger(i) || i < 0 || i > parent.length || (replace && i >= parent.length)) throw new Error(`invalid index in ${ptr}`);
      if (replace) parent[i] = value; else parent.splice(i, 0, value);
    } else {
      if (replace && !(last in parent)) throw new Error(`missing path: ${ptr}`);
      parent[last] = value;
    }
  };
  const del = (root: Json, ptr: string): void => {
    const [parent, last] = parentOf(root, parse(ptr));
    if (Array.isArray(parent)) {
      const i = Number(last);
      if (!Number.isInteger(i) || i < 0 || i >= parent.length) throw new Error(`missing path: ${ptr}`);
      parent.splice(i, 1);
    } else {
      if (!(last in parent)) throw new Error(`missing path: ${ptr}`);
      delete parent[last];
    }
  };
  for (const op of ops) {
    switch (op.op) {
      case 'add': put(doc, op.path, clone(op.value), false); break;
      case 'replace': put(doc, op.path, clone(op.value), true); break;
      case 'remove': del(doc, op.path); break;
      case 'test': if (!jsonEqual(read(doc, op.path), op.value)) throw new Error(`testing value ${op.path} failed`); break;
      case 'copy': put(doc, op.path, clone(read(doc, op.from)), false); break;
      case 'move': { const v = read(doc, op.from); del(doc, op.from); put(doc, op.path, v, false); break; }
    }
  }
  return doc;
}

/** Paths of the leaves of a configuration (a list is one leaf). */
function leafPaths(o: unknown, prefix: string[] = []): string[][] {
  if (!isObj(o)) return prefix.length ? [prefix] : [];
  const out: string[][] = [];
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined) continue;
    out.push(...(isObj(v) && Object.keys(v).length > 0 ? leafPaths(v, [...prefix, k]) : [[...prefix, k]]));
  }
  return out;
}

function getPath(o: unknown, path: string[]): unknown {
  let cur = o;
  for (const p of path) cur = isObj(cur) ? cur[p] : undefined;
  return cur;
}

/**
 * Merges an apply configuration into the stored object (in place), refusing what needs managedFields: without
 * force a changed value; a list that equals neither the applied one nor this manager's previous one.
 */
function mergeApplied(target: Json, config: Json, previous: unknown, force: boolean, at: string[]): void {
  for (const [k, v] of Object.entries(config)) {
    if (v === undefined) continue;
    const path = [...at, k];
    const cur = target[k];
    const prev = isObj(previous) ? previous[k] : undefined;
    if (isObj(v) && (isObj(cur) || cur === undefined)) {
      const sub: Json = isObj(cur) ? cur : {};
      mergeApplied(sub, v, prev, force, path);
      target[k] = sub;
      continue;
    }
    if (cur === undefined || jsonEqual(cur, v)) {
      target[k] = clone(v);
      continue;
    }
    if (Array.isArray(cur) && !jsonEqual(cur, prev)) {
      throw new FakeUnsupportedError(`server-side apply of the list ${path.join('.')} over a list that other writers changed (merging list items by key needs managedFields)`);
    }
    if (!force) {
      throw new FakeUnsupportedError(`server-side apply without force that changes ${path.join('.')} (whether that is a 409 conflict depends on field ownership, i.e. managedFields)`);
    }
    target[k] = clone(v);
  }
}
