/**
 * ============================================================================================================
 *  FAKE API SERVER — the ONE acceptable fake in this repository.
 *  Purpose: deterministic fault injection for PROTOCOL tests of the reflector/informer only (stream cuts, 410s,
 *  429/500 on list pages, silent streams, expired continue tokens, streaming-list refusal). It is not a Kubernetes
 *  API server: one resource collection, GET list/watch only, no auth, no validation, no admission, no other verbs.
 *  Behaviour that matters to a controller is tested against the real control plane (test/cluster).
 * ============================================================================================================
 *
 * An in-process node:http server on 127.0.0.1 serving list (paged: limit/continue) and watch (resourceVersion,
 * timeoutSeconds, allowWatchBookmarks, sendInitialEvents) of one ResourceType, namespaced or all namespaces.
 *
 * Model: a global resourceVersion counter; every mutation (create/update/remove) bumps it and appends an event to
 * a history; open watches receive new events at once (unless the mutation says `deliver: false`, which simulates
 * an event lost while a client was disconnected). `compact()` forgets history up to the current version: watches
 * or continue tokens from before answer 410. Faults are queued with `inject()` and consumed, in order, by the
 * first matching request. Every request is recorded in `requests` for assertions.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectionPath } from '../../pkg/apimachinery/paths.ts';
import { apiVersionOf, type ResourceType } from '../../pkg/apimachinery/resource.ts';

export interface FakeObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; uid?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

export interface RecordedRequest {
  kind: 'list' | 'watch' | 'other';
  path: string;
  namespace: string;
  query: Record<string, string>;
  /** HTTP status sent (200 for watches that streamed). */
  status: number;
}

export type FaultAction =
  /** Answer with this HTTP status and a Status body. */
  | { kind: 'status'; status: number; reason?: string; message?: string }
  /** Watch: deliver `afterEvents` object events, then write half of the next one and end the response ('partial') or reset the socket ('reset'). */
  | { kind: 'cut'; afterEvents: number; mode?: 'partial' | 'reset' }
  /** Watch: answer 200, then never send a byte (live events are withheld from this stream). */
  | { kind: 'silent' }
  /** Watch: answer 200, send one ERROR event with this Status, end. */
  | { kind: 'errorEvent'; code: number; reason?: string; message?: string }
  /** Watch: answer 200, write this line (e.g. an event of a type the client does not know), then stream as usual. */
  | { kind: 'rawLine'; line: string };

export interface Fault {
  on: 'list' | 'watch';
  /** Only requests matching this predicate consume the fault. */
  when?: (req: RecordedRequest) => boolean;
  action: FaultAction;
}

export interface FakeApiServerOptions {
  resource: ResourceType;
  /** How a watch with sendInitialEvents=true is answered. Default 'supported'. */
  watchList?: 'supported' | 'refuse' | 'ignore';
  /** How a watch from a compacted resourceVersion is answered: an ERROR event (like the watch cache) or HTTP 410. */
  goneAs?: 'event' | 'status';
  /** First resourceVersion. Default 100. */
  startResourceVersion?: number;
}

interface HistoryEvent {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  obj: FakeObject;
}

interface Watcher {
  res: ServerResponse;
  namespace: string;
  bookmarks: boolean;
  silent: boolean;
  cut: { remaining: number; mode: 'partial' | 'reset' } | undefined;
  timer: NodeJS.Timeout | undefined;
  closed: boolean;
}

const keyOf = (o: FakeObject): string => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);

export class FakeApiServer {
  readonly resource: ResourceType;
  readonly requests: RecordedRequest[] = [];
  private readonly server: Server;
  private readonly objects = new Map<string, FakeObject>();
  private history: HistoryEvent[] = [];
  private compactedAt = 0;
  private rv: number;
  private faults: Fault[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly opts: FakeApiServerOptions;
  private uidSeq = 0;
  private port = 0;
  /** Called after each list response (and error status) was sent: lets a test act between two pages. */
  onAnswered: ((req: RecordedRequest) => void) | undefined;

  constructor(opts: FakeApiServerOptions) {
    this.opts = opts;
    this.resource = opts.resource;
    this.rv = opts.startResourceVersion ?? 100;
    this.server = createServer((req, res) => this.handle(req, res));
    this.server.keepAliveTimeout = 1000;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.url;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    for (const w of this.watchers) this.endWatch(w, 'reset');
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Current resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Open watch streams (silent ones included). */
  get openWatches(): number {
    return this.watchers.size;
  }

  get(namespace: string | undefined, name: string): FakeObject | undefined {
    return this.objects.get(namespace ? `${namespace}/${name}` : name);
  }

  /** Queues a fault for the next matching request. */
  inject(fault: Fault): void {
    this.faults.push(fault);
  }

  pendingFaults(): number {
    return this.faults.length;
  }

  create(obj: FakeObject, opts: { deliver?: boolean } = {}): FakeObject {
    const o = structuredClone(obj);
    o.apiVersion = apiVersionOf(this.resource);
    o.kind = this.resource.kind;
    o.metadata.uid ??= `uid-${++this.uidSeq}`;
    return this.record('ADDED', o, opts.deliver ?? true);
  }

  update(obj: FakeObject, opts: { deliver?: boolean } = {}): FakeObject {
    if (!this.objects.has(keyOf(obj))) throw new Error(`fake apiserver: ${keyOf(obj)} does not exist`);
    const o = structuredClone(obj);
    o.apiVersion = apiVersionOf(this.resource);
    o.kind = this.resource.kind;
    return this.record('MODIFIED', o, opts.deliver ?? true);
  }

  remove(namespace: string | undefined, name: string, opts: { deliver?: boolean } = {}): FakeObject {
    const cur = this.get(namespace, name);
    if (!cur) throw new Error(`fake apiserver: ${namespace ?? ''}/${name} does not exist`);
    return this.record('DELETED', structuredClone(cur), opts.deliver ?? true);
  }

  /** Moves the resourceVersion on without events of this resource (other resources changed). */
  advance(n = 1): string {
    this.rv += n;
    return this.resourceVersion;
  }

  /** Sends a BOOKMARK at the current resourceVersion to every watch that allows bookmarks. */
  bookmark(): void {
    for (const w of this.watchers) {
      if (w.bookmarks && !w.silent) this.write(w, this.bookmarkLine(false));
    }
  }

  /** Forgets the history: watches from, and continue tokens issued at, older versions get 410 from now on. */
  compact(): void {
    this.compactedAt = this.rv;
    this.history = [];
  }

  /** Ends every open watch: cleanly ('end', like a server timeout) or by resetting the connection. */
  dropWatches(mode: 'end' | 'reset' = 'end'): void {
    for (const w of this.watchers) this.endWatch(w, mode);
  }

  private record(type: HistoryEvent['type'], obj: FakeObject, deliver: boolean): FakeObject {
    this.rv++;
    obj.metadata.resourceVersion = String(this.rv);
    if (type === 'DELETED') this.objects.delete(keyOf(obj));
    else this.objects.set(keyOf(obj), obj);
    const ev: HistoryEvent = { rv: this.rv, type, obj };
    this.history.push(ev);
    if (deliver) {
      for (const w of this.watchers) {
        if (!w.silent && (w.namespace === '' || w.namespace === obj.metadata.namespace)) this.sendEvent(w, ev);
      }
    }
    return structuredClone(obj);
  }

  private takeFault(on: Fault['on'], req: RecordedRequest): FaultAction | undefined {
    const i = this.faults.findIndex((f) => f.on === on && (f.when?.(req) ?? true));
    if (i < 0) return undefined;
    const [f] = this.faults.splice(i, 1);
    return f?.action;
  }

  private parse(req: IncomingMessage): RecordedRequest {
    const url = new URL(req.url ?? '/', 'http://x');
    const query = Object.fromEntries(url.searchParams);
    const all = collectionPath(this.resource);
    const prefix = all.slice(0, all.length - this.resource.resource.length - 1);
    let namespace = '';
    let matched = url.pathname === all;
    if (!matched && this.resource.namespaced && url.pathname.startsWith(`${prefix}/namespaces/`)) {
      const parts = url.pathname.slice(prefix.length + 1).split('/');
      if (parts.length === 3 && parts[2] === this.resource.resource) {
        namespace = decodeURIComponent(parts[1] as string);
        matched = true;
      }
    }
    const isWatch = query.watch === 'true' || query.watch === '1';
    return { kind: !matched || req.method !== 'GET' ? 'other' : isWatch ? 'watch' : 'list', path: url.pathname, namespace, query, status: 0 };
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const r = this.parse(req);
    this.requests.push(r);
    if (r.kind === 'other') return this.status(res, r, 404, 'NotFound', `the fake serves only GET ${collectionPath(this.resource)}`);
    if (r.kind === 'list') return this.list(res, r);
    return this.watch(res, r);
  }

  private status(res: ServerResponse, r: RecordedRequest, code: number, reason: string, message: string): void {
    r.status = code;
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message }));
    this.onAnswered?.(r);
  }

  private inScope(o: FakeObject, ns: string): boolean {
    return ns === '' || o.metadata.namespace === ns;
  }

  private list(res: ServerResponse, r: RecordedRequest): void {
    const fault = this.takeFault('list', r);
    if (fault?.kind === 'status') {
      return this.status(res, r, fault.status, fault.reason ?? 'InternalError', fault.message ?? `injected ${fault.status}`);
    }
    let start = 0;
    let listRv = this.rv;
    if (r.query.continue) {
      let token: { rv: number; start: number };
      try {
        token = JSON.parse(Buffer.from(r.query.continue, 'base64url').toString()) as { rv: number; start: number };
      } catch {
        return this.status(res, r, 400, 'BadRequest', 'invalid continue token');
      }
      if (token.rv < this.compactedAt) {
        return this.status(res, r, 410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
      }
      start = token.start;
      listRv = token.rv;
    }
    const all = [...this.objects.values()].filter((o) => this.inScope(o, r.namespace)).sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
    const limit = r.query.limit ? Number(r.query.limit) : 0;
    const end = limit > 0 ? Math.min(all.length, start + limit) : all.length;
    const page = all.slice(start, end).map((o) => {
      const { apiVersion: _a, kind: _k, ...rest } = o;
      return rest;
    });
    const metadata: Record<string, string> = { resourceVersion: String(listRv) };
    if (end < all.length) metadata.continue = Buffer.from(JSON.stringify({ rv: listRv, start: end })).toString('base64url');
    r.status = 200;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: `${this.resource.kind}List`, apiVersion: apiVersionOf(this.resource), metadata, items: page }));
    this.onAnswered?.(r);
  }

  private watch(res: ServerResponse, r: RecordedRequest): void {
    const initial = r.query.sendInitialEvents === 'true';
    if (initial && (this.opts.watchList ?? 'supported') === 'refuse') {
      return this.status(res, r, 422, 'Invalid', 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled');
    }
    const fault = this.takeFault('watch', r);
    if (fault?.kind === 'status') {
      return this.status(res, r, fault.status, fault.reason ?? 'InternalError', fault.message ?? `injected ${fault.status}`);
    }
    const fromRv = r.query.resourceVersion ? Number(r.query.resourceVersion) : undefined;
    const gone = fromRv !== undefined && fromRv > 0 && fromRv < this.compactedAt;
    if (gone && this.opts.goneAs === 'status') {
      return this.status(res, r, 410, 'Expired', `too old resource version: ${fromRv} (${this.compactedAt})`);
    }
    r.status = 200;
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const w: Watcher = {
      res,
      namespace: r.namespace,
      bookmarks: r.query.allowWatchBookmarks === 'true',
      silent: fault?.kind === 'silent',
      cut: fault?.kind === 'cut' ? { remaining: fault.afterEvents, mode: fault.mode ?? 'partial' } : undefined,
      timer: undefined,
      closed: false,
    };
    this.watchers.add(w);
    res.on('close', () => this.forget(w));
    if (w.silent) return;
    if (fault?.kind === 'rawLine') this.write(w, fault.line.endsWith('\n') ? fault.line : `${fault.line}\n`);
    if (fault?.kind === 'errorEvent') {
      this.write(w, JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: fault.code, reason: fault.reason ?? 'InternalError', message: fault.message ?? 'injected error event' } }) + '\n');
      return this.endWatch(w, 'end');
    }
    if (gone) {
      this.write(w, JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 410, reason: 'Expired', message: `too old resource version: ${fromRv} (${this.compactedAt})` } }) + '\n');
      return this.endWatch(w, 'end');
    }
    const timeout = Number(r.query.timeoutSeconds ?? 0);
    if (timeout > 0) {
      w.timer = setTimeout(() => this.endWatch(w, 'end'), timeout * 1000);
      w.timer.unref();
    }
    if (initial) {
      // Streaming list: the current state as ADDED events, then (if supported) the end-of-initial-events bookmark.
      const mode = this.opts.watchList ?? 'supported';
      for (const o of [...this.objects.values()].filter((x) => this.inScope(x, r.namespace))) {
        this.sendEvent(w, { rv: Number(o.metadata.resourceVersion), type: 'ADDED', obj: o });
      }
      if (mode === 'supported') this.write(w, this.bookmarkLine(true));
      else if (w.bookmarks) this.write(w, this.bookmarkLine(false));
      return;
    }
    if (fromRv !== undefined && fromRv > 0) {
      for (const ev of this.history) {
        if (ev.rv > fromRv && this.inScope(ev.obj, r.namespace)) this.sendEvent(w, ev);
      }
    }
  }

  private bookmarkLine(initialEventsEnd: boolean): string {
    const metadata: Record<string, unknown> = { resourceVersion: this.resourceVersion };
    if (initialEventsEnd) metadata.annotations = { 'k8s.io/initial-events-end': 'true' };
    return JSON.stringify({ type: 'BOOKMARK', object: { kind: this.resource.kind, apiVersion: apiVersionOf(this.resource), metadata } }) + '\n';
  }

  private sendEvent(w: Watcher, ev: HistoryEvent): void {
    if (w.closed) return;
    const line = JSON.stringify({ type: ev.type, object: ev.obj }) + '\n';
    if (w.cut) {
      if (w.cut.remaining === 0) {
        this.write(w, line.slice(0, Math.floor(line.length / 2)));
        return this.endWatch(w, w.cut.mode === 'reset' ? 'reset' : 'end');
      }
      w.cut.remaining--;
    }
    this.write(w, line);
  }

  private write(w: Watcher, text: string): void {
    if (!w.closed) w.res.write(text);
  }

  private endWatch(w: Watcher, mode: 'end' | 'reset'): void {
    if (w.closed) return;
    w.closed = true;
    if (mode === 'reset') w.res.socket?.destroy();
    else w.res.end();
    this.forget(w);
  }

  private forget(w: Watcher): void {
    w.closed = true;
    if (w.timer) clearTimeout(w.timer);
    this.watchers.delete(w);
  }
}
