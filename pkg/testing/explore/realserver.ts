/**
 * RealApiServer: `explore` on a real kube-apiserver (e.g. startTestEnv's) — the same executions as on the in-memory
 * server, with crash and write-fault plans: every manager incarnation gets its own connection (a new Transport of the
 * kubeconfig) wrapped in an intercepting transport that can kill it between two writes or fault one write, and every
 * execution runs in namespaces of its own (the workload's namespaces, renamed), so executions never see each other.
 *
 * What it cannot do, and says so (explore derives no such plans here): stale views and unobserved states (they need
 * control of the API server's watch cache), and seeded identities (the server makes uids and generated names).
 *
 * Contracts
 *  - Isolation: an execution's namespaces are `<prefix>-<workload namespace>`; every path and body of the workload and
 *    its peers is rewritten into them, the managers watch only them, and end states are read back from them with the
 *    names rewritten back (so two executions compare). Cluster-scoped objects other than Namespaces are refused.
 *  - A kill closes the incarnation's connection: requests in flight fail, watches end, nothing more is sent on it.
 *  - At rest on a real server also means quiet: no request or watch event for `quietMs` (the API server and any
 *    controllers running beside it act asynchronously).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { Registry } from 'prom-client';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { apiVersionOf, coreResources, resourceId, type ResourceType } from '../../apimachinery/resource.ts';
import { collectionPath } from '../../apimachinery/paths.ts';
import type { SendOptions, WireResponse } from '../../client/connection.ts';
import type { KubeConfig } from '../../client/kubeconfig.ts';
import { ApiError } from '../../client/errors.ts';
import { RestClient } from '../../client/rest.ts';
import type { RequestOptions, Verb } from '../../client/request.ts';
import { Transport, type RequestTransport } from '../../client/transport.ts';
import { ResourceClient, type ApiClient } from '../../client/typed.ts';
import type { ServerRecord, WriteAction, WriteRequest } from './memoryserver.ts';

/** What RealApiServer needs of the cluster: a kubeconfig with the CRDs of the workload installed (a TestEnv has both). */
export interface RealCluster {
  kubeConfig: KubeConfig;
}

let executions = 0;

/** One execution's view of a real API server (see the file comment). */
export class RealApiServer {
  interceptWrite: ((w: WriteRequest) => WriteAction) | undefined;
  observe: ((r: ServerRecord) => void) | undefined;
  activity = 0;
  unsupported: Error | undefined;
  /** Requests are answered asynchronously by a real server: rest also needs this long without activity. */
  readonly quietMs: number;
  readonly kubeConfig: KubeConfig;
  private readonly admin: RestClient;
  private readonly prefix: string;
  private readonly types: ResourceType[];
  private readonly seen = new Map<string, ResourceType>();
  private readonly namespaces = new Set<string>();
  private readonly connections = new Set<InterceptingTransport>();

  constructor(cluster: RealCluster, types: readonly ResourceType[], opts: { quietMs?: number } = {}) {
    this.kubeConfig = cluster.kubeConfig;
    this.quietMs = opts.quietMs ?? 300;
    this.admin = new RestClient({ kubeConfig: cluster.kubeConfig, registry: new Registry(), userAgent: 'ts-controller-manager-explore' });
    this.prefix = `x${process.pid.toString(36)}${(++executions).toString(36)}`;
    this.types = [...types];
  }

  /** The execution's name of a workload namespace. */
  ns(name: string): string {
    return `${this.prefix}-${name}`.slice(0, 63);
  }

  /** Creates the execution's namespace of each of the workload's (before its first step and the first manager). */
  async prepare(namespaces: readonly string[]): Promise<void> {
    for (const n of namespaces) {
      this.namespaces.add(n);
      await this.admin.json('POST', '/api/v1/namespaces', { body: { metadata: { name: this.ns(n) } } });
    }
    this.see(coreResources.namespaces);
  }

  typeOf(obj: Pick<KubeObject, 'apiVersion' | 'kind'>): ResourceType {
    const t = this.types.find((r) => apiVersionOf(r) === obj.apiVersion && r.kind === obj.kind);
    if (!t) throw new Error(`explore: ${obj.apiVersion ?? '?'} ${obj.kind ?? '?'} is not a known type (add it to resources)`);
    return t;
  }

  get rv(): number {
    return 0;
  }

  /** The types compared: those the workload wrote and the managers watched. */
  resourceTypes(): ResourceType[] {
    return [...this.seen.values()];
  }

  /** Every object of `type` in the execution's namespaces, renamed back to the workload's names. */
  async objects<T extends KubeObject>(type: ResourceType): Promise<T[]> {
    const out: T[] = [];
    for (const n of this.namespaces) {
      const list = await this.admin.json<{ items?: T[] }>('GET', collectionPath(type, type.namespaced ? this.ns(n) : undefined));
      for (const o of list.items ?? []) {
        if (!type.namespaced && !(type.kind === 'Namespace' && o.metadata?.name === this.ns(n))) continue;
        const back = JSON.parse(JSON.stringify(o).split(`"${this.ns(n)}"`).join(`"${n}"`)) as T;
        back.apiVersion ??= apiVersionOf(type);
        back.kind ??= type.kind;
        out.push(back);
      }
    }
    return out.sort((a, b) => `${a.metadata?.namespace ?? ''}/${a.metadata?.name ?? ''}`.localeCompare(`${b.metadata?.namespace ?? ''}/${b.metadata?.name ?? ''}`));
  }

  /** A client for the workload or a peer: paths and bodies rewritten into the execution's namespaces; never intercepted. */
  clientAs(_who: string): ApiClient {
    const client: ApiClient = {
      json: async <T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> => {
        this.activity++;
        const t = this.route(path);
        if (t) this.seen.set(resourceId(t.res), t.res);
        let body = opts.body;
        if (t?.res.kind === 'Namespace' && method === 'POST') {
          const name = (body as KubeObject | undefined)?.metadata?.name ?? '';
          this.namespaces.add(name);
          body = { ...(body as KubeObject), metadata: { ...(body as KubeObject).metadata, name: this.ns(name) } };
        } else if (t && !t.res.namespaced && t.res.kind !== 'Namespace' && method !== 'GET') {
          throw new Error(`explore on a real API server: cluster-scoped ${t.res.kind} objects cannot be isolated per execution`);
        }
        const rewritten = this.rewritePath(path);
        if (body !== undefined && body !== null && typeof body === 'object') body = this.rewriteBody(body);
        try {
          return this.unrewrite(await this.admin.json<T>(method, rewritten, { ...opts, ...(body !== undefined ? { body } : {}) }));
        } catch (err) {
          // prepare() made every workload namespace already: the workload's own create of one finds it.
          if (t?.res.kind === 'Namespace' && method === 'POST' && err instanceof ApiError && err.status === 409) {
            return this.unrewrite(await this.admin.json<T>('GET', `/api/v1/namespaces/${this.ns((body as KubeObject).metadata?.name?.slice(this.ns('').length) ?? '')}`));
          }
          throw err;
        }
      },
      resource: <T extends KubeObject>(type: ResourceType): ResourceClient<T> => new ResourceClient<T>(client, type),
    };
    return client;
  }

  /** A new connection for one manager incarnation. */
  connect(name: string): InterceptingTransport {
    const c = new InterceptingTransport(new Transport(this.kubeConfig), name, this);
    this.connections.add(c);
    return c;
  }

  /** Deletes the execution's namespaces (best effort) and closes what is left open. */
  async close(): Promise<void> {
    for (const c of this.connections) c.kill();
    for (const n of this.namespaces) await this.admin.json('DELETE', `/api/v1/namespaces/${this.ns(n)}`).catch(() => undefined);
    await this.admin.close();
  }

  /** @internal Routes an API path to a known type. */
  route(path: string): { res: ResourceType; namespace: string | undefined; name: string | undefined; sub: string | undefined } | undefined {
    const segs = (path.split('?')[0] ?? '').split('/').filter(Boolean).map(decodeURIComponent);
    let gv: string;
    let rest: string[];
    if (segs[0] === 'api') [gv, rest] = [segs[1] ?? '', segs.slice(2)];
    else if (segs[0] === 'apis') [gv, rest] = [`${segs[1] ?? ''}/${segs[2] ?? ''}`, segs.slice(3)];
    else return undefined;
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [resource, name, sub] = rest;
    const res = this.types.find((t) => apiVersionOf(t) === gv && t.resource === resource)
      ?? (gv === 'v1' && resource === 'namespaces' ? coreResources.namespaces : undefined);
    if (!res) return undefined;
    return { res, namespace, name, sub };
  }

  /** @internal */
  see(t: ResourceType): void {
    this.seen.set(resourceId(t), t);
  }

  /** @internal */
  record(r: ServerRecord): void {
    this.activity++;
    this.observe?.(r);
  }

  private rewritePath(path: string): string {
    return path.replace(/\/namespaces\/([^/?]+)/, (_m, n: string) => `/namespaces/${this.ns(decodeURIComponent(n))}`);
  }

  private rewriteBody(body: object): unknown {
    const o = JSON.parse(JSON.stringify(body)) as KubeObject;
    if (o.metadata?.namespace) o.metadata.namespace = this.ns(o.metadata.namespace);
    return o;
  }

  private unrewrite<T>(v: T): T {
    let s = JSON.stringify(v);
    for (const n of this.namespaces) s = s.split(`"${this.ns(n)}"`).join(`"${n}"`);
    return JSON.parse(s) as T;
  }
}

/**
 * A manager incarnation's connection to the real API server: its own Transport, writes offered to the plan first,
 * watches tracked so a kill ends them.
 */
export class InterceptingTransport implements RequestTransport {
  readonly name: string;
  readonly cluster: RequestTransport['cluster'];
  onKill: (() => void) | undefined;
  private readonly inner: Transport;
  private readonly server: RealApiServer;
  private readonly bodies = new Set<Readable>();
  private dead = false;

  constructor(inner: Transport, name: string, server: RealApiServer) {
    this.inner = inner;
    this.name = name;
    this.server = server;
    this.cluster = inner.cluster;
  }

  get killed(): boolean {
    return this.dead;
  }

  headers(url: string): Promise<Record<string, string>> {
    return this.inner.headers(url);
  }

  invalidate(): void {
    this.inner.invalidate();
  }

  kill(): void {
    if (this.dead) return;
    this.dead = true;
    for (const b of this.bodies) b.destroy(reset());
    this.bodies.clear();
    this.inner.close();
    this.onKill?.();
  }

  // The in-memory server's perturbations of watches do not exist here (explore derives no such plans).
  lag(): void {}
  release(): void {}
  expire(): void {}
  lagging(): string[] {
    return [];
  }
  unread(): boolean {
    return false;
  }

  async send(opts: SendOptions): Promise<WireResponse> {
    if (this.dead) throw reset();
    const method = opts.method as Verb;
    const path = opts.path;
    const route = this.server.route(path);
    if (route) this.server.see(route.res);
    const isWatch = method === 'GET' && /[?&]watch=true/.test(path);
    if (method === 'GET') {
      const res = await this.inner.send(opts);
      if (this.dead) {
        res.body.destroy();
        throw reset();
      }
      this.server.record({ kind: 'request', connection: this.name, method, path, status: res.status });
      if (isWatch) {
        this.bodies.add(res.body);
        res.body.on('data', () => this.server.activity++);
        res.body.once('close', () => this.bodies.delete(res.body));
      }
      return res;
    }
    let write: WriteRequest | undefined;
    let action: WriteAction = 'apply';
    if (route) {
      const body = opts.body === undefined ? undefined : JSON.parse(opts.body) as unknown;
      const meta = (body as { metadata?: { name?: string; generateName?: string } } | undefined)?.metadata;
      // Signatures use the workload's namespace names, so plans match across executions.
      const ns = route.namespace?.startsWith(`${this.server.ns('')}`) ? route.namespace.slice(this.server.ns('').length) : route.namespace;
      write = {
        connection: this.name, method, resource: route.res, rid: resourceId(route.res), namespace: ns,
        name: route.name ?? meta?.name ?? `${meta?.generateName ?? ''}*`, subresource: route.sub, body,
      };
      action = this.server.interceptWrite?.(write) ?? 'apply';
    }
    const record = (status: number | 'reset' | 'timeout'): void =>
      this.server.record({ kind: 'request', connection: this.name, method, path, status, ...(write ? { write } : {}), action, changed: typeof status === 'number' && status < 300 });
    if (action === 'crash-before') {
      record('reset');
      this.kill();
      throw reset();
    }
    if (action === 'conflict') {
      record(409);
      return synthetic(409, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Conflict', code: 409, message: 'Operation cannot be fulfilled: the object has been modified (injected)' });
    }
    const res = await this.inner.send({ ...opts, buffered: true });
    if (action === 'crash-after') {
      record('reset');
      this.kill();
      throw reset();
    }
    if (action === 'error-after') {
      record(500);
      return synthetic(500, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'InternalError', code: 500, message: 'Internal error occurred: injected after the write was applied' });
    }
    if (action === 'timeout-after') {
      record('timeout');
      throw new DOMException('request timed out (injected after the write was applied)', 'TimeoutError');
    }
    record(res.status);
    if (this.dead) throw reset();
    return res;
  }
}

function synthetic(status: number, body: unknown): WireResponse {
  const headers: IncomingHttpHeaders = { 'content-type': 'application/json' };
  return { status, headers, body: Readable.from([]), bytes: Buffer.from(JSON.stringify(body)) };
}

function reset(): Error {
  return Object.assign(new Error('read ECONNRESET (the connection was killed: a simulated crash)'), { code: 'ECONNRESET' });
}
