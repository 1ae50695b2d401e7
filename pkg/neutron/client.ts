/**
 * NeutronClient: the Neutron v2.0 networks/subnets/tags API over HTTP (undici fetch), authenticated by an
 * Authenticator (Keystone v3 token, or none).
 *
 * Invariants:
 *  - Every request has a timeout (default 10 s per attempt, `timeoutMs` per client or per call) and honours the
 *    caller's AbortSignal; a caller's abort rejects with the signal's reason, never with a NeutronError.
 *  - Failures are typed (see errors.ts): 400 NeutronBadRequestError, 401 (and any Keystone failure other than 5xx/429,
 *    404 included) NeutronAuthError, 403 NeutronForbiddenError (policy; server message kept), 404 from the resource path
 *    NeutronNotFoundError, 409 NeutronConflictError, 5xx/429/timeouts/connection errors NeutronUnavailableError
 *    (`isRetryable`; `retryAfterMs` from Retry-After on 429/503). The client itself never retries, except ONE re-authentication + resend after a 401 with a
 *    Keystone token (the token may have been revoked or expired early). Retrying is the caller's (workqueue's) job.
 *  - A retryable failure of a create may still have created the resource: look it up (e.g. by tag) before creating
 *    again. Neutron allows duplicate names, so names are not identities; tags are the lookup key of choice.
 *  - Lists follow Neutron's `next` links (as gophercloud and openstacksdk do) until a page has none, so they return
 *    every match even when the server caps pages below the requested `limit` (`pagination_max_limit`). The link's
 *    `marker`/`limit` are re-sent to our own endpoint (the link's host is the server's view of itself).
 *  - Resources are normalised: `tags` (and a network's `subnets`) are always arrays, also from clouds whose Neutron
 *    omits them (no tag extension).
 *  - Wire types are Neutron's own (snake_case) so that they match the API reference one to one.
 *  - Headers (tokens) are never logged; debug logs carry method, path, status and duration only.
 *  - Every HTTP request (each attempt) is counted in `openstack_requests_total{api="neutron"}` and its duration
 *    histogram (metrics.ts), in the `registry` option's registry (default: the global one).
 *
 * Concurrency: stateless between requests apart from the Authenticator's token cache and the cached extension probe;
 * safe to share across workers.
 */
import type { Registry } from 'prom-client';
import type { Logger } from '../log/logger.ts';
import { silentLogger } from '../log/logger.ts';
import type { Clock } from '../util/clock.ts';
import { describeCloud, loadCloudConfig, type CloudConfig, type LoadCloudOptions } from './clouds.ts';
import { decodeError, NeutronBadRequestError, NeutronNotFoundError, NeutronUnavailableError, parseRetryAfter } from './errors.ts';
import { DEFAULT_TIMEOUT_MS, proxyEnv, send, Transport } from './http.ts';
import { authenticatorFor, type Authenticator } from './keystone.ts';
import { openStackMetrics, type OpenStackMetrics } from './metrics.ts';

export interface Network {
  id: string;
  name: string;
  description: string;
  project_id: string;
  tenant_id?: string;
  admin_state_up: boolean;
  status: string;
  shared: boolean;
  mtu?: number;
  /** Subnet ids. */
  subnets: string[];
  tags: string[];
  revision_number: number;
  created_at?: string;
  updated_at?: string;
  port_security_enabled?: boolean;
  'router:external'?: boolean;
  [attr: string]: unknown;
}

export interface AllocationPool {
  start: string;
  end: string;
}

export interface Subnet {
  id: string;
  name: string;
  description: string;
  network_id: string;
  project_id: string;
  cidr: string;
  gateway_ip: string | null;
  ip_version: 4 | 6;
  allocation_pools: AllocationPool[];
  enable_dhcp: boolean;
  dns_nameservers: string[];
  host_routes: { destination: string; nexthop: string }[];
  tags: string[];
  revision_number: number;
  created_at?: string;
  updated_at?: string;
  [attr: string]: unknown;
}

export interface NetworkCreate {
  name?: string;
  description?: string;
  admin_state_up?: boolean;
  /** Owner (admin only; noauth: the default is `fake_project_id`). */
  project_id?: string;
  shared?: boolean;
  mtu?: number;
  port_security_enabled?: boolean;
  /** Set right after creation (Neutron before 2023.1 has no tags in POST); see createNetwork. */
  tags?: string[];
}

export interface NetworkUpdate {
  name?: string;
  description?: string;
  admin_state_up?: boolean;
  mtu?: number;
  shared?: boolean;
  port_security_enabled?: boolean;
}

export interface SubnetCreate {
  network_id: string;
  cidr: string;
  /** undefined: Neutron picks the first address; null: no gateway. Neutron does NOT check it is inside the cidr. */
  gateway_ip?: string | null;
  /** Default: 6 if the cidr contains ':', else 4. */
  ip_version?: 4 | 6;
  name?: string;
  description?: string;
  enable_dhcp?: boolean;
  allocation_pools?: AllocationPool[];
  dns_nameservers?: string[];
  project_id?: string;
  tags?: string[];
}

export interface SubnetUpdate {
  name?: string;
  description?: string;
  gateway_ip?: string | null;
  enable_dhcp?: boolean;
  allocation_pools?: AllocationPool[];
  dns_nameservers?: string[];
}

export interface NetworkFilter {
  id?: string;
  name?: string;
  /** Networks carrying ALL of these tags. */
  tags?: string[];
  /** Networks carrying ANY of these tags. */
  tagsAny?: string[];
  projectId?: string;
}

export interface SubnetFilter {
  networkId?: string;
  name?: string;
  cidr?: string;
  tags?: string[];
  tagsAny?: string[];
  projectId?: string;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Per-attempt timeout; default: the client's. */
  timeoutMs?: number;
}

export interface ListOptions extends CallOptions {
  /** Page size (`limit`); default 500. */
  pageSize?: number;
}

export interface UpdateOptions extends CallOptions {
  /** Only update if the resource's revision_number is still this (If-Match); a stale one fails with HTTP 412. */
  ifRevision?: number;
}

export type TaggableResource = 'networks' | 'subnets';

export interface NeutronClientOptions {
  auth: Authenticator;
  /** Default per-request timeout (10 s). */
  timeoutMs?: number;
  logger?: Logger;
  /** TLS and proxy settings of the cloud (see http.ts `Transport`). */
  transport?: Transport;
  userAgent?: string;
  /**
   * Extra headers on every Neutron request, e.g. `X-User-Id`/`X-Project-Id`/`X-Roles` for a neutron-server whose
   * noauth pipeline uses keystonecontext (hack/neutron/up.sh with NEUTRON_AUTH=keystonecontext).
   */
  headers?: Record<string, string>;
  /** Where request metrics go (default: the global registry). */
  registry?: Registry;
}

export interface FromCloudOptions {
  timeoutMs?: number;
  logger?: Logger;
  clock?: Clock;
  userAgent?: string;
  headers?: Record<string, string>;
  /** The proxy environment (HTTP(S)_PROXY, NO_PROXY); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Where Neutron and Keystone metrics go (default: the global registry). */
  registry?: Registry;
}

type Query = Record<string, string | number | undefined>;

interface RequestSpec extends CallOptions {
  query?: Query;
  body?: unknown;
  /** Accepted statuses. */
  ok: number[];
  headers?: Record<string, string>;
}

/** Tags go into paths and comma-joined filters: reject what Neutron would reject or what would change the meaning. */
function checkTags(tags: readonly string[]): void {
  for (const t of tags) {
    if (t === '' || t.includes(',') || t.includes('/') || t.length > 255) {
      throw new NeutronBadRequestError({ status: 400, type: 'InvalidTag', message: `invalid tag ${JSON.stringify(t)}: must be 1-255 characters without ',' or '/'` });
    }
  }
}

function tagQuery(tags: string[] | undefined, tagsAny: string[] | undefined): Query {
  const q: Query = {};
  if (tags?.length) {
    checkTags(tags);
    q['tags'] = tags.join(',');
  }
  if (tagsAny?.length) {
    checkTags(tagsAny);
    q['tags-any'] = tagsAny.join(',');
  }
  return q;
}

function seg(id: string): string {
  if (id === '') throw new NeutronNotFoundError({ status: 404, type: 'EmptyId', message: 'empty resource id' });
  return encodeURIComponent(id);
}

export class NeutronClient {
  private readonly auth: Authenticator;
  private readonly timeoutMs: number;
  private readonly logger: Logger;
  private readonly transport: Transport | undefined;
  private readonly userAgent: string;
  private readonly extraHeaders: Record<string, string>;
  private extensions: Promise<Set<string>> | undefined;
  private readonly metrics: OpenStackMetrics;

  constructor(opts: NeutronClientOptions) {
    this.auth = opts.auth;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.logger = opts.logger ?? silentLogger;
    this.transport = opts.transport;
    this.userAgent = opts.userAgent ?? 'ts-controller-manager';
    this.extraHeaders = { ...opts.headers };
    this.metrics = openStackMetrics(opts.registry);
    this.metrics.init('neutron');
  }

  /**
   * A client for a validated cloud (Keystone or none), honouring its TLS settings and the proxy environment for
   * Keystone and Neutron alike. Reads the TLS files now: an unreadable one throws CloudConfigError.
   */
  static fromCloud(cloud: CloudConfig, opts: FromCloudOptions = {}): NeutronClient {
    const env = opts.env ?? process.env;
    const transport = new Transport(cloud, env);
    const logger = opts.logger ?? silentLogger;
    const auth = authenticatorFor(cloud, { ...opts, logger, transport });
    const proxy = proxyEnv(env);
    logger.debug({ cloud: describeCloud(cloud), proxied: proxy.httpProxy !== '' || proxy.httpsProxy !== '', noProxy: proxy.noProxy }, 'neutron client configured');
    return new NeutronClient({ ...opts, auth, logger, transport });
  }

  /** Loads clouds.yaml (see clouds.ts for the lookup order) and builds a client. Throws CloudConfigError. */
  static fromCloudsYaml(load: LoadCloudOptions = {}, opts: FromCloudOptions = {}): NeutronClient {
    return NeutronClient.fromCloud(loadCloudConfig(load), opts);
  }

  /** Neutron's base URL (authenticating if needed). */
  async endpoint(signal?: AbortSignal): Promise<string> {
    return (await this.auth.authenticate(signal)).endpoint;
  }

  /**
   * The project the credentials act in (the Keystone token's project), for project-scoped lookups; undefined
   * without Keystone (noauth), where the server decides.
   */
  async projectId(signal?: AbortSignal): Promise<string | undefined> {
    return (await this.auth.authenticate(signal)).projectId;
  }

  // ---- networks ----------------------------------------------------------------------------------------------------

  /**
   * Creates a network. With `tags`, they are set in the same POST when the server has the `tag-creation` extension,
   * else right after creation; if tagging fails the new network is deleted (best effort) and the error is thrown,
   * so an untagged network is not left behind in the normal failure cases (the clean-up DELETE takes `opts.signal`:
   * once it aborted, nothing is sent and the network is logged and left).
   */
  async createNetwork(spec: NetworkCreate, opts: CallOptions = {}): Promise<Network> {
    return normNetwork(await this.createTagged<Network>('networks', 'network', spec, opts));
  }

  async getNetwork(id: string, opts: CallOptions = {}): Promise<Network> {
    return normNetwork((await this.json<{ network: Network }>('GET', `/v2.0/networks/${seg(id)}`, { ...opts, ok: [200] })).network);
  }

  /** Every network matching the filter (all pages). */
  async listNetworks(filter: NetworkFilter = {}, opts: ListOptions = {}): Promise<Network[]> {
    const query: Query = {
      id: filter.id, name: filter.name, project_id: filter.projectId, ...tagQuery(filter.tags, filter.tagsAny),
    };
    return (await this.listAll<Network>('networks', query, opts)).map(normNetwork);
  }

  async updateNetwork(id: string, patch: NetworkUpdate, opts: UpdateOptions = {}): Promise<Network> {
    return normNetwork((await this.json<{ network: Network }>('PUT', `/v2.0/networks/${seg(id)}`, {
      ...opts, body: { network: patch }, ok: [200], headers: ifMatch(opts.ifRevision),
    })).network);
  }

  /** Deletes a network; its subnets go with it (409 NetworkInUse if it still has ports). */
  async deleteNetwork(id: string, opts: CallOptions = {}): Promise<void> {
    await this.json('DELETE', `/v2.0/networks/${seg(id)}`, { ...opts, ok: [204] });
  }

  // ---- subnets -----------------------------------------------------------------------------------------------------

  /** Creates a subnet (ip_version derived from the cidr when absent). Tags as for createNetwork. */
  async createSubnet(spec: SubnetCreate, opts: CallOptions = {}): Promise<Subnet> {
    const body: SubnetCreate = { ...spec, ip_version: spec.ip_version ?? (spec.cidr.includes(':') ? 6 : 4) };
    return normSubnet(await this.createTagged<Subnet>('subnets', 'subnet', body, opts));
  }

  async getSubnet(id: string, opts: CallOptions = {}): Promise<Subnet> {
    return normSubnet((await this.json<{ subnet: Subnet }>('GET', `/v2.0/subnets/${seg(id)}`, { ...opts, ok: [200] })).subnet);
  }

  async listSubnets(filter: SubnetFilter = {}, opts: ListOptions = {}): Promise<Subnet[]> {
    const query: Query = {
      network_id: filter.networkId, name: filter.name, cidr: filter.cidr, project_id: filter.projectId,
      ...tagQuery(filter.tags, filter.tagsAny),
    };
    return (await this.listAll<Subnet>('subnets', query, opts)).map(normSubnet);
  }

  /** Updates a subnet. `cidr` is read-only in Neutron (400); a gateway inside the allocation pool is a 409. */
  async updateSubnet(id: string, patch: SubnetUpdate, opts: UpdateOptions = {}): Promise<Subnet> {
    return normSubnet((await this.json<{ subnet: Subnet }>('PUT', `/v2.0/subnets/${seg(id)}`, {
      ...opts, body: { subnet: patch }, ok: [200], headers: ifMatch(opts.ifRevision),
    })).subnet);
  }

  async deleteSubnet(id: string, opts: CallOptions = {}): Promise<void> {
    await this.json('DELETE', `/v2.0/subnets/${seg(id)}`, { ...opts, ok: [204] });
  }

  // ---- tags --------------------------------------------------------------------------------------------------------

  /** Adds one tag (idempotent: adding an existing tag succeeds). */
  async addTag(resource: TaggableResource, id: string, tag: string, opts: CallOptions = {}): Promise<void> {
    checkTags([tag]);
    await this.json('PUT', `/v2.0/${resource}/${seg(id)}/tags/${encodeURIComponent(tag)}`, { ...opts, ok: [201, 204] });
  }

  /** Removes one tag (404 if the resource or the tag does not exist). */
  async removeTag(resource: TaggableResource, id: string, tag: string, opts: CallOptions = {}): Promise<void> {
    checkTags([tag]);
    await this.json('DELETE', `/v2.0/${resource}/${seg(id)}/tags/${encodeURIComponent(tag)}`, { ...opts, ok: [204] });
  }

  /** Replaces all tags; returns the tags now set. */
  async setTags(resource: TaggableResource, id: string, tags: string[], opts: CallOptions = {}): Promise<string[]> {
    checkTags(tags);
    return (await this.json<{ tags: string[] }>('PUT', `/v2.0/${resource}/${seg(id)}/tags`, { ...opts, body: { tags }, ok: [200] })).tags;
  }

  async getTags(resource: TaggableResource, id: string, opts: CallOptions = {}): Promise<string[]> {
    return (await this.json<{ tags: string[] }>('GET', `/v2.0/${resource}/${seg(id)}/tags`, { ...opts, ok: [200] })).tags;
  }

  /** Convenience for addTag('networks', …). */
  async addNetworkTag(id: string, tag: string, opts: CallOptions = {}): Promise<void> {
    await this.addTag('networks', id, tag, opts);
  }

  // ---- extensions --------------------------------------------------------------------------------------------------

  /** Aliases of the server's API extensions (cached after the first successful call). */
  async extensionAliases(opts: CallOptions = {}): Promise<Set<string>> {
    this.extensions ??= this.json<{ extensions: { alias: string }[] }>('GET', '/v2.0/extensions', { ...opts, ok: [200] })
      .then((r) => new Set(r.extensions.map((e) => e.alias)));
    try {
      return await this.extensions;
    } catch (err) {
      this.extensions = undefined;
      throw err;
    }
  }

  // ---- internals ---------------------------------------------------------------------------------------------------

  private async createTagged<T extends { id: string }>(
    resource: TaggableResource, key: 'network' | 'subnet', spec: { tags?: string[] }, opts: CallOptions,
  ): Promise<T> {
    const { tags, ...rest } = spec;
    const wantTags = tags !== undefined && tags.length > 0;
    if (wantTags) checkTags(tags);
    const inPost = wantTags && (await this.extensionAliases(opts)).has('tag-creation');
    const body = { [key]: inPost ? { ...rest, tags } : rest };
    const created = (await this.json<Record<string, T>>('POST', `/v2.0/${resource}`, { ...opts, body, ok: [201] }))[key];
    if (!created) throw new NeutronUnavailableError({ status: 201, type: 'BadResponse', message: `POST /v2.0/${resource}: no "${key}" in the response` });
    if (!wantTags || inPost) return created;
    try {
      await this.setTags(resource, created.id, tags, opts);
      return (await this.json<Record<string, T>>('GET', `/v2.0/${resource}/${seg(created.id)}`, { ...opts, ok: [200] }))[key] ?? created;
    } catch (err) {
      // The clean-up is a Neutron write like any other: it takes the caller's signal (and timeout), so a reconcile
      // told to stop (shutdown, lost leadership) sends nothing more; the untagged resource is then logged and left.
      await this.json('DELETE', `/v2.0/${resource}/${seg(created.id)}`, { ...opts, ok: [204, 404] }).catch((delErr: unknown) => {
        this.logger.warn({ resource, id: created.id, err: delErr }, 'neutron: could not delete a resource whose tagging failed');
      });
      throw err;
    }
  }

  private async listAll<T extends { id: string }>(resource: string, query: Query, opts: ListOptions): Promise<T[]> {
    const pageSize = opts.pageSize ?? 500;
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError(`pageSize must be a positive integer, got ${pageSize}`);
    const out: T[] = [];
    const seenMarkers = new Set<string>();
    let paging: Query = { limit: pageSize };
    for (;;) {
      const page = await this.json<Record<string, unknown>>('GET', `/v2.0/${resource}`, {
        ...opts, query: { ...query, ...paging }, ok: [200],
      });
      const items = page[resource];
      if (!Array.isArray(items)) {
        throw new NeutronUnavailableError({ status: 200, type: 'BadResponse', message: `GET /v2.0/${resource}: no "${resource}" list in the response` });
      }
      out.push(...(items as T[]));
      // Neutron sends a `next` link whenever the page was full by ITS limit (min(limit, pagination_max_limit)), so the
      // link, not the page length, says whether there is more.
      const links = page[`${resource}_links`];
      const next = Array.isArray(links) ? (links as { rel?: unknown; href?: unknown }[]).find((l) => l.rel === 'next') : undefined;
      if (items.length === 0 || typeof next?.href !== 'string') return out;
      let nextQuery: URLSearchParams;
      try {
        nextQuery = new URL(next.href, 'http://neutron.invalid').searchParams;
      } catch {
        return out;
      }
      const marker = nextQuery.get('marker') ?? (items as T[]).at(-1)?.id;
      if (!marker || seenMarkers.has(marker)) return out; // no progress: stop rather than loop
      seenMarkers.add(marker);
      const limit = Number(nextQuery.get('limit'));
      paging = { limit: Number.isInteger(limit) && limit > 0 ? limit : pageSize, marker };
    }
  }

  private async json<T = unknown>(method: string, path: string, spec: RequestSpec): Promise<T> {
    const text = await this.request(method, path, spec);
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new NeutronUnavailableError({ status: 200, type: 'BadResponse', message: 'response body is not JSON', method, path });
    }
  }

  /** One logical call: authenticate, send, on 401 with a token re-authenticate and resend once. Returns the body. */
  private async request(method: string, path: string, spec: RequestSpec): Promise<string> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(spec.query ?? {})) if (v !== undefined && v !== '') qs.set(k, String(v));
    const suffix = qs.size > 0 ? `${path}?${qs.toString()}` : path;
    const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    for (let attempt = 0; ; attempt++) {
      const auth = await this.auth.authenticate(spec.signal);
      const headers: Record<string, string> = {
        accept: 'application/json', 'user-agent': this.userAgent, ...this.extraHeaders, ...spec.headers,
      };
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (auth.token) headers['x-auth-token'] = auth.token.reveal();
      const started = performance.now();
      const res = await send({
        method, url: auth.endpoint + suffix, headers, body, timeoutMs: spec.timeoutMs ?? this.timeoutMs,
        signal: spec.signal, transport: this.transport, metrics: { api: 'neutron', sink: this.metrics },
      });
      this.logger.debug({ method, path, status: res.status, ms: Math.round(performance.now() - started) }, 'neutron request');
      if (spec.ok.includes(res.status)) return res.text;
      if (res.status === 401 && auth.token && attempt === 0) {
        this.auth.invalidate(auth.token);
        continue;
      }
      const retryAfterMs = res.status === 429 || res.status === 503 ? parseRetryAfter(res.headers.get('retry-after')) : undefined;
      throw decodeError(res.status, res.text, {
        method, path, requestId: res.headers.get('x-openstack-request-id') ?? undefined, ...(retryAfterMs !== undefined && { retryAfterMs }),
      });
    }
  }
}

/** Neutron without the tag extension omits `tags`; some clouds omit empty lists: always arrays for callers. */
function normNetwork(n: Network): Network {
  return { ...n, tags: Array.isArray(n.tags) ? n.tags : [], subnets: Array.isArray(n.subnets) ? n.subnets : [] };
}

function normSubnet(s: Subnet): Subnet {
  return { ...s, tags: Array.isArray(s.tags) ? s.tags : [] };
}

function ifMatch(revision: number | undefined): Record<string, string> | undefined {
  return revision === undefined ? undefined : { 'if-match': `revision_number=${revision}` };
}
