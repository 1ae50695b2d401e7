/**
 * MemoryApiServer: the FakeClient's store served as a Kubernetes API server to whole ControllerManagers, in the test's
 * process — LIST, GET, every write the FakeClient implements, and WATCH — with the perturbations `explore` needs:
 * a manager's connection can be killed between two writes (a crash), its watches can lag behind the store (a watch
 * cache that is behind), lose a stretch of events to a relist (a 410 after which the informer relists), and a write
 * can be answered with a fault (a 409 without applying it, a 500 or no answer after applying it).
 *
 * FAULT-INJECTION DOUBLE: the semantics of every request are the FakeClient's (held to kube-apiserver by
 * test/fakeclient-conformance.test.ts); what is added here is only the watch protocol and what kube-apiserver's watch
 * cache is allowed to do to a client. A behaviour proven only here is not proven: `explore` also runs on a real API
 * server (`explore({ env })`).
 *
 * What the server may do, and what it never does (kube-apiserver's guarantees, which the perturbations keep):
 *  - A consistent read (LIST or GET without resourceVersion, every write and its answer) always sees the current store.
 *  - A read from the watch cache (LIST or GET with resourceVersion=0, or resourceVersionMatch=NotOlderThan) may see an
 *    earlier state: the state at the connection's lag point while its view of that resource lags.
 *  - A watch delivers every change of its resource after its resourceVersion, in order, exactly once — but may deliver
 *    them late (a lagging view holds them) — or ends with a 410 Gone ERROR event, after which the client must relist
 *    (the changes between its last event and the relist are then never seen one by one).
 *  - Label-selected watches get ADDED/DELETED when an object starts/stops matching, as kube-apiserver sends them.
 *
 * Concurrency: single event loop. A request is handled synchronously when sent (so the order of writes is the order
 * of `send` calls) and answered on the next turn of the event loop (`setImmediate`); a watch event is queued on each
 * matching stream synchronously with the change, and read by the client whenever it reads. A killed connection
 * answers nothing more: requests in flight and later ones fail with ECONNRESET, its watch streams end with that error.
 */
import { Readable } from 'node:stream';
import type { IncomingHttpHeaders } from 'node:http';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { keyOf } from '../../apimachinery/keys.ts';
import { parseSelector, type Selector } from '../../apimachinery/labelselector.ts';
import { apiVersionOf, resourceId, type ResourceType } from '../../apimachinery/resource.ts';
import { ApiError } from '../../client/errors.ts';
import type { SendOptions, WireResponse } from '../../client/connection.ts';
import type { RequestTransport } from '../../client/transport.ts';
import type { RequestOptions, Verb } from '../../client/request.ts';
import { ResourceClient, type ApiClient } from '../../client/typed.ts';
import { FakeClient, type FakeChange, type FakeClientOptions } from '../fakeclient.ts';

/** One committed change of the store, numbered by its resourceVersion. */
export interface StoreChange {
  /** The resourceVersion the change made. */
  rv: number;
  /** As a watch event's type. */
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  /** The object's type. */
  resource: ResourceType;
  /** resourceId of `resource`. */
  rid: string;
  /** "namespace/name" (or "name"). */
  key: string;
  /** The object as stored (frozen). */
  object: KubeObject;
  /** Who wrote it: a connection's name, or 'workload' for the test's own writes. */
  by: string;
}

/** A write a connection is about to send to the store (what an interceptor decides about). */
export interface WriteRequest {
  /** The connection's name (one per manager incarnation). */
  connection: string;
  /** POST, PUT, PATCH or DELETE. */
  method: Verb;
  /** The type written. */
  resource: ResourceType;
  /** resourceId of `resource`. */
  rid: string;
  /** The object's namespace (undefined: cluster-scoped). */
  namespace: string | undefined;
  /** The object's name; for a create, `metadata.name` of the body, or `<generateName>*`. */
  name: string;
  /** 'status', …; undefined for the object itself. */
  subresource: string | undefined;
  /** The request body, parsed. */
  body: unknown;
}

/**
 * What to do with a write: apply it and answer (`apply`); kill the connection before it reaches the store
 * (`crash-before`) or right after the store applied it (`crash-after`); answer 409 Conflict without applying it
 * (`conflict`); apply it and answer 500 (`error-after`) or give no answer (`timeout-after`: the client sees its
 * request time out).
 */
export type WriteAction = 'apply' | 'crash-before' | 'crash-after' | 'conflict' | 'error-after' | 'timeout-after';

/** What the server tells its observer (explore's trace). */
export type ServerRecord =
  | { kind: 'request'; connection: string; method: Verb; path: string; status: number | 'reset' | 'timeout'; write?: WriteRequest; changed?: boolean; action?: WriteAction }
  | { kind: 'deliver'; connection: string; rid: string; type: string; key: string; rv: number }
  | { kind: 'relist-forced'; connection: string; rid: string };

export interface MemoryApiServerOptions extends FakeClientOptions {
  /** Decides each write of a connection (default: apply). */
  interceptWrite?: (w: WriteRequest) => WriteAction;
  /** Sees every request, delivered watch event and forced relist. */
  observe?: (r: ServerRecord) => void;
}

const notFoundStatus = (path: string): ApiError =>
  new ApiError(404, 'NotFound', `GET ${path}: the server could not find the requested resource`, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: 'the server could not find the requested resource' });

/** Parses `/api/v1/...` and `/apis/<group>/<version>/...` into a served type, namespace, name and subresource. */
interface Route { res: ResourceType; rid: string; namespace: string | undefined; name: string | undefined; sub: string | undefined }

/** A lag of one resource's view on one connection (see MemoryConnection.lag). */
interface Lag {
  /** Reads from the watch cache see the store as of this resourceVersion. */
  atRv: number;
  /** The connection's first consistent LIST of the resource is still to be answered as of `atRv` (a standby's). */
  listed: boolean;
}

/**
 * The in-memory API server: one FakeClient store, its change history, and the connections of the managers under
 * test. `store` is also the client the test's workload writes with (recorded as 'workload').
 */
export class MemoryApiServer {
  /** The store; writes through it are the workload's (they are never intercepted). */
  readonly store: FakeClient;
  /** Every committed change, in resourceVersion order. */
  readonly history: StoreChange[] = [];
  private readonly connections = new Set<MemoryConnection>();
  private readonly byKind = new Map<string, ResourceType>();
  private readonly routes = new Map<string, ResourceType>();
  /** Who the store's next change is attributed to (set while a connection's write is applied). */
  private writer = 'workload';
  /** Decides each write of a connection (undefined: apply). */
  interceptWrite: ((w: WriteRequest) => WriteAction) | undefined;
  /** Sees every request, delivered watch event and forced relist. */
  observe: ((r: ServerRecord) => void) | undefined;
  /** Called with every change before it goes to the watches (a perturbation may start holding them). */
  beforeDispatch: ((c: StoreChange) => void) | undefined;
  /** Called with every change after it went to the watches (a perturbation may end there). */
  afterDispatch: ((c: StoreChange) => void) | undefined;
  /** Bumped by every request and every delivered event: `explore` reads it to tell whether anything happened. */
  activity = 0;
  /** The first request the store could not answer as an API server would (FakeUnsupportedError), if any. */
  unsupported: Error | undefined;

  /** An empty store as a FakeClient of `opts` (types, CRDs, objects, seeded randomness) would be, with no connection. */
  constructor(opts: MemoryApiServerOptions = {}) {
    this.store = new FakeClient(opts);
    this.interceptWrite = opts.interceptWrite;
    this.observe = opts.observe;
    for (const t of this.store.resourceTypes()) {
      this.byKind.set(`${apiVersionOf(t)}/${t.kind}`, t);
      this.routes.set(`${t.group}/${t.version}/${t.resource}`, t);
    }
    this.store.subscribe((c) => this.onChange(c));
  }

  /** The served type of an object's apiVersion and kind; throws for one not served. */
  typeOf(obj: Pick<KubeObject, 'apiVersion' | 'kind'>): ResourceType {
    const t = this.byKind.get(`${obj.apiVersion ?? ''}/${obj.kind ?? ''}`);
    if (!t) throw new Error(`explore: ${obj.apiVersion ?? '?'} ${obj.kind ?? '?'} is not served (add its CRD to crdPaths, or the type to resources)`);
    return t;
  }

  /**
   * A client of the store whose writes are attributed to `who` in the history (the workload, a peer controller):
   * never intercepted, answered at once.
   */
  clientAs(who: string): ApiClient {
    const client: ApiClient = {
      json: <T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> => {
        try {
          opts.signal?.throwIfAborted();
          this.writer = who;
          return Promise.resolve(this.store.serve(method, path, opts) as T);
        } catch (err) {
          return Promise.reject(err instanceof Error ? err : new Error(String(err)));
        } finally {
          this.writer = 'workload';
        }
      },
      resource: <T extends KubeObject>(type: ResourceType): ResourceClient<T> => new ResourceClient<T>(client, type),
    };
    return client;
  }

  /** The types served (every one is compared). */
  resourceTypes(): ResourceType[] {
    return this.store.resourceTypes();
  }

  /** Every stored object of `type` (copies), in key order. */
  objects<T extends KubeObject>(type: ResourceType): T[] {
    return this.store.objects<T>(type);
  }

  /** Nothing to release (RealApiServer deletes its namespaces). */
  close(): Promise<void> {
    return Promise.resolve();
  }

  /** In memory, answers come on the next turn of the event loop: rest needs no quiet time. */
  readonly quietMs = 0;

  /** A new connection (one manager incarnation's transport), named in the trace. */
  connect(name: string): MemoryConnection {
    const c = new MemoryConnection(this, name);
    this.connections.add(c);
    return c;
  }

  /** The store's objects of resource `rid` as of resourceVersion `rv` (from the history). */
  stateAt(rid: string, rv: number): Map<string, KubeObject> {
    const out = new Map<string, KubeObject>();
    for (const c of this.history) {
      if (c.rv > rv) break;
      if (c.rid !== rid) continue;
      if (c.type === 'DELETED') out.delete(c.key);
      else out.set(c.key, c.object);
    }
    return out;
  }

  /** The current resourceVersion as a number. */
  get rv(): number {
    return Number(this.store.resourceVersion);
  }

  /** Routes an API path; undefined for a path that names no served collection or object. For MemoryConnection (not for tests). */
  route(path: string): Route | undefined {
    const segs = path.split('/').filter(Boolean).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api') [group, version, rest] = ['', segs[1] ?? '', segs.slice(2)];
    else if (segs[0] === 'apis') [group, version, rest] = [segs[1] ?? '', segs[2] ?? '', segs.slice(3)];
    else return undefined;
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && this.routes.has(`${group}/${version}/${rest[2] ?? ''}`)) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [resource, name, sub] = rest;
    const res = this.routes.get(`${group}/${version}/${resource ?? ''}`);
    if (!res) return undefined;
    return { res, rid: resourceId(res), namespace, name, sub };
  }

  /** Serves a connection's request from the store (a write is attributed to it); throws ApiError. For MemoryConnection (not for tests). */
  serveAs(connection: string, method: Verb, path: string, opts: { body?: string; contentType?: string }): unknown {
    this.writer = connection;
    try {
      return this.store.serve(method, path, opts);
    } finally {
      this.writer = 'workload';
    }
  }

  /** Counts and reports a request, delivery or forced relist. For MemoryConnection (not for tests). */
  record(r: ServerRecord): void {
    this.activity++;
    this.observe?.(r);
  }

  /** A killed connection leaves the server. For MemoryConnection (not for tests). */
  forget(c: MemoryConnection): void {
    this.connections.delete(c);
  }

  private onChange(c: FakeChange): void {
    const object = deepFreeze(structuredClone(c.object));
    const m = object.metadata ?? {};
    const change: StoreChange = {
      rv: Number(m.resourceVersion), type: c.type, resource: c.resource, rid: resourceId(c.resource),
      key: keyOf(m.namespace, m.name ?? ''), object, by: this.writer,
    };
    this.history.push(change);
    this.activity++;
    this.beforeDispatch?.(change);
    for (const conn of this.connections) conn.dispatch(change);
    this.afterDispatch?.(change);
  }
}

/** A watch stream of one connection: its filter, the keys it has shown as present, events held while lagging. */
interface WatchStream {
  rid: string;
  namespace: string | undefined;
  labels: Selector | undefined;
  fields: [string, boolean, string][];
  /** Keys this stream has shown as present (ADDED/MODIFIED last), for selector transitions. */
  present: Set<string>;
  /** The resourceVersion of the last change this stream processed (delivered or held). */
  lastRv: number;
  readable: Readable;
  /** Changes processed while the stream's resource is held on this connection, in order. */
  held: StoreChange[];
}

/**
 * One manager incarnation's connection to the MemoryApiServer: a RequestTransport (hand it to
 * `new ControllerManager({ transport })`). `kill()` is the crash; `lag`/`release`/`gap` perturb its watches.
 */
export class MemoryConnection implements RequestTransport {
  readonly cluster = { server: 'https://memory.explore.invalid' };
  /** Names the connection (one manager incarnation) in traces. */
  readonly name: string;
  private readonly server: MemoryApiServer;
  private readonly streams = new Set<WatchStream>();
  /** Resources whose watch events are held on this connection, with the lag point of their cached reads. */
  private readonly lags = new Map<string, Lag>();
  private dead = false;
  /** Called once when the connection is killed (explore aborts the manager on it: a crashed process acts no more). */
  onKill: (() => void) | undefined;

  /** A live connection of `server` (MemoryApiServer.connect makes them). */
  constructor(server: MemoryApiServer, name: string) {
    this.server = server;
    this.name = name;
  }

  /** True once killed. */
  get killed(): boolean {
    return this.dead;
  }

  headers(): Promise<Record<string, string>> {
    return Promise.resolve({});
  }

  invalidate(): void {}

  /**
   * The crash: nothing of this connection reaches the store any more. Requests in flight and later ones fail with
   * ECONNRESET; watch streams end with that error. Idempotent.
   */
  kill(): void {
    if (this.dead) return;
    this.dead = true;
    for (const s of this.streams) s.readable.destroy(reset());
    this.streams.clear();
    this.server.forget(this);
    this.onKill?.();
  }

  /**
   * From now on, this connection's view of resource `rid` lags: its watches hold every change (delivered in order by
   * `release`), and its reads from the watch cache (resourceVersion=0) see the store as of `atRv` (default: now).
   * `standby`: besides, the connection's first consistent LIST of `rid` (an informer's first) is answered as of `atRv`
   * too — the list a standby manager made then (consistent at the time), before its watch fell behind; a watch from
   * there replays the changes since, held. Its later consistent reads are current, as always.
   */
  lag(rid: string, atRv: number = this.server.rv, standby = false): void {
    if (!this.lags.has(rid)) this.lags.set(rid, { atRv, listed: standby });
  }

  /** Resources this connection's view holds back (lag or gap). */
  lagging(): string[] {
    return [...this.lags.keys()];
  }

  /** Ends the lag of `rid` (all when omitted): held changes are delivered in order; cached reads are current again. */
  release(rid?: string): void {
    for (const r of rid === undefined ? [...this.lags.keys()] : [rid]) {
      if (!this.lags.delete(r)) continue;
      for (const s of this.streams) {
        if (s.rid !== r) continue;
        const held = s.held.splice(0);
        for (const c of held) this.emit(s, c);
      }
    }
  }

  /**
   * Ends the lag of `rid` the other way: the held changes are never delivered one by one; every watch of `rid` gets
   * a 410 Gone ERROR event and ends, so the informer relists and sees only the current state (changes in between are
   * coalesced; an object created and deleted in between is never seen).
   */
  expire(rid: string): void {
    if (!this.lags.delete(rid)) return;
    for (const s of [...this.streams]) {
      if (s.rid !== rid) continue;
      s.held.length = 0;
      this.server.record({ kind: 'relist-forced', connection: this.name, rid });
      s.readable.push(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410, message: 'too old resource version' } })}\n`);
      s.readable.push(null);
      this.streams.delete(s);
    }
  }

  /** True while some watch stream of this connection has bytes its client has not read yet. */
  unread(): boolean {
    for (const s of this.streams) if (s.readable.readableLength > 0) return true;
    return false;
  }

  send(opts: SendOptions): Promise<WireResponse> {
    if (this.dead) return Promise.reject(reset());
    try {
      opts.signal.throwIfAborted();
      opts.beforeSend?.();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    const [path = '', qs] = opts.path.split('?', 2);
    const query = Object.fromEntries(new URLSearchParams(qs ?? ''));
    const method = opts.method as Verb;
    if (method === 'GET' && query['watch'] === 'true') return this.watch(path, query, opts);
    const route = this.server.route(path);
    let write: WriteRequest | undefined;
    let action: WriteAction = 'apply';
    if (method !== 'GET' && route) {
      const body = opts.body === undefined ? undefined : JSON.parse(opts.body) as unknown;
      const meta = (body as { metadata?: { name?: string; generateName?: string } } | undefined)?.metadata;
      write = {
        connection: this.name, method, resource: route.res, rid: route.rid, namespace: route.namespace,
        name: route.name ?? meta?.name ?? `${meta?.generateName ?? ''}*`, subresource: route.sub, body,
      };
      action = this.server.interceptWrite?.(write) ?? 'apply';
    }
    if (action === 'crash-before') {
      this.server.record({ kind: 'request', connection: this.name, method, path, status: 'reset', ...(write ? { write } : {}), action, changed: false });
      this.kill();
      return Promise.reject(reset());
    }
    if (action === 'conflict' && route) {
      const err = new ApiError(409, 'Conflict', `${method} ${path}: HTTP 409 Conflict: injected`, {
        kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Conflict', code: 409,
        message: `Operation cannot be fulfilled on ${route.res.resource} "${write?.name ?? ''}": the object has been modified; please apply your changes to the latest version and try again`,
      });
      return this.answer(method, path, err, write, action, false);
    }
    const before = this.server.rv;
    let result: { ok: unknown } | { err: unknown };
    try {
      result = {
        ok: this.read(method, path, route, query) ?? this.server.serveAs(this.name, method, opts.path, {
          ...(opts.body !== undefined ? { body: opts.body } : {}), ...(opts.headers['content-type'] ? { contentType: opts.headers['content-type'] } : {}),
        }),
      };
    } catch (err) {
      result = { err };
    }
    const changed = this.server.rv !== before;
    if (action === 'crash-after') {
      this.server.record({ kind: 'request', connection: this.name, method, path, status: 'reset', ...(write ? { write } : {}), action, changed });
      this.kill();
      return Promise.reject(reset());
    }
    if (action === 'error-after') {
      const err = new ApiError(500, 'InternalError', `${method} ${path}: HTTP 500 InternalError: injected after the write was applied`, {
        kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'InternalError', code: 500, message: 'Internal error occurred: injected after the write was applied',
      });
      return this.answer(method, path, err, write, action, changed);
    }
    if (action === 'timeout-after') {
      this.server.record({ kind: 'request', connection: this.name, method, path, status: 'timeout', ...(write ? { write } : {}), action, changed });
      return new Promise((_resolve, reject) => setImmediate(() => reject(new DOMException('request timed out (injected after the write was applied)', 'TimeoutError'))));
    }
    return this.answer(method, path, 'err' in result ? result.err : result.ok, write, action, changed, method === 'POST' ? 201 : 200);
  }

  /** A read served from the watch cache while lagging (resourceVersion=0 / NotOlderThan), or a standby's first list (lag); undefined: the store answers. */
  private read(method: Verb, path: string, route: Route | undefined, query: Record<string, string>): unknown {
    if (method !== 'GET' || !route) return undefined;
    const cached = query['resourceVersion'] === '0' || (query['resourceVersionMatch'] === 'NotOlderThan' && query['resourceVersion'] !== undefined);
    const lag = this.lags.get(route.rid);
    if (!lag) return undefined;
    // A standby's list (see lag): the first consistent LIST of the resource, unpaged (it came before any continue).
    const standbyList = lag.listed && route.name === undefined && query['resourceVersion'] === undefined && query['continue'] === undefined;
    if (standbyList) lag.listed = false;
    else if (!cached) return undefined;
    const state = this.server.stateAt(route.rid, lag.atRv);
    if (route.name !== undefined) {
      const o = state.get(keyOf(route.namespace, route.name));
      if (!o) throw new ApiError(404, 'NotFound', `GET ${path}: HTTP 404 NotFound`, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: `${route.res.resource} "${route.name}" not found` });
      return structuredClone(o);
    }
    const labels = query['labelSelector'] ? parseSelector(query['labelSelector']) : undefined;
    const items = [...state.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, o]) => o)
      .filter((o) => route.namespace === undefined || o.metadata?.namespace === route.namespace)
      .filter((o) => !labels || labels.matches(o.metadata?.labels));
    return { apiVersion: apiVersionOf(route.res), kind: `${route.res.kind}List`, metadata: { resourceVersion: String(lag.atRv) }, items: structuredClone(items) };
  }

  private answer(method: Verb, path: string, result: unknown, write: WriteRequest | undefined, action: WriteAction, changed: boolean, okStatus = 200): Promise<WireResponse> {
    const isErr = result instanceof ApiError;
    if (!isErr && result instanceof Error) {
      // Not an API answer (FakeUnsupportedError: something the store does not model, or a bug): fail the request
      // loudly, and keep it — `explore` stops the execution with it rather than compare what it cannot model.
      this.server.unsupported ??= result;
      this.server.record({ kind: 'request', connection: this.name, method, path, status: 500, ...(write ? { write } : {}), action, changed });
      return Promise.reject(result);
    }
    const status = isErr ? result.status : okStatus;
    const bytes = Buffer.from(JSON.stringify(isErr ? result.body ?? {} : result));
    this.server.record({ kind: 'request', connection: this.name, method, path, status, ...(write ? { write } : {}), action, changed });
    const headers: IncomingHttpHeaders = { 'content-type': 'application/json' };
    return new Promise((resolve, reject) => setImmediate(() => {
      if (this.dead) reject(reset());
      else resolve({ status, headers, body: Readable.from([]), bytes });
    }));
  }

  private watch(path: string, query: Record<string, string>, opts: SendOptions): Promise<WireResponse> {
    const route = this.server.route(path);
    if (!route || route.name !== undefined) return Promise.reject(notFoundStatus(path));
    if (query['sendInitialEvents'] === 'true') {
      const bytes = Buffer.from(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 400, message: 'sendInitialEvents is not supported by the in-memory API server' }));
      this.server.record({ kind: 'request', connection: this.name, method: 'GET', path, status: 400 });
      return Promise.resolve({ status: 400, headers: { 'content-type': 'application/json' }, body: Readable.from([]), bytes });
    }
    const rvParam = query['resourceVersion'] ?? '';
    const from = rvParam === '' || rvParam === '0' ? this.server.rv : Number(rvParam);
    const readable = new Readable({ read() {} });
    // The client sees a kill's error through its own reading; a stream not (yet) read must not crash the process.
    readable.on('error', () => {});
    const s: WatchStream = {
      rid: route.rid, namespace: route.namespace,
      labels: query['labelSelector'] ? parseSelector(query['labelSelector']) : undefined,
      fields: (query['fieldSelector'] ?? '').split(',').filter(Boolean).map((f) => {
        const [k = '', v = ''] = f.split(/!?==?/);
        return [k, !f.includes('!='), v] as [string, boolean, string];
      }),
      present: new Set(), lastRv: from, readable, held: [],
    };
    for (const [key, o] of this.server.stateAt(route.rid, from)) if (this.matches(s, o)) s.present.add(key);
    this.streams.add(s);
    const onAbort = (): void => {
      this.streams.delete(s);
      readable.destroy();
    };
    opts.signal.addEventListener('abort', onAbort, { once: true });
    readable.once('close', () => {
      opts.signal.removeEventListener('abort', onAbort);
      this.streams.delete(s);
    });
    // A watch from an older resourceVersion replays the changes after it (never older than the history: no 410 here).
    if (rvParam === '0') for (const key of s.present) {
      const o = this.server.stateAt(route.rid, from).get(key);
      if (o) readable.push(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
    }
    for (const c of this.server.history) if (c.rv > from) this.dispatchTo(s, c);
    this.server.record({ kind: 'request', connection: this.name, method: 'GET', path: opts.path, status: 200 });
    return new Promise((resolve, reject) => setImmediate(() => {
      if (this.dead) reject(reset());
      else resolve({ status: 200, headers: { 'content-type': 'application/json' }, body: readable });
    }));
  }

  /** A store change: to every matching stream (held while its resource lags). For MemoryConnection (not for tests). */
  dispatch(c: StoreChange): void {
    for (const s of this.streams) this.dispatchTo(s, c);
  }

  private dispatchTo(s: WatchStream, c: StoreChange): void {
    if (c.rid !== s.rid || c.rv <= s.lastRv) return;
    if (s.namespace !== undefined && c.object.metadata?.namespace !== s.namespace) return;
    s.lastRv = c.rv;
    if (this.lags.has(s.rid)) s.held.push(c);
    else this.emit(s, c);
  }

  private emit(s: WatchStream, c: StoreChange): void {
    const had = s.present.has(c.key);
    let type: string | undefined;
    if (c.type === 'DELETED') type = had ? 'DELETED' : undefined;
    else if (this.matches(s, c.object)) type = had ? 'MODIFIED' : 'ADDED';
    else type = had ? 'DELETED' : undefined;
    if (!type) return;
    if (type === 'DELETED') s.present.delete(c.key);
    else s.present.add(c.key);
    s.readable.push(`${JSON.stringify({ type, object: c.object })}\n`);
    this.server.record({ kind: 'deliver', connection: this.name, rid: s.rid, type, key: c.key, rv: c.rv });
  }

  private matches(s: WatchStream, o: KubeObject): boolean {
    if (s.labels && !s.labels.matches(o.metadata?.labels)) return false;
    for (const [field, eq, value] of s.fields) {
      const v = field === 'metadata.name' ? o.metadata?.name : field === 'metadata.namespace' ? o.metadata?.namespace : undefined;
      if ((v === value) !== eq) return false;
    }
    return true;
  }
}

/** The error a client sees for a request on a killed connection. */
function reset(): Error {
  return Object.assign(new Error('read ECONNRESET (the in-memory connection was killed: a simulated crash)'), { code: 'ECONNRESET' });
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}
