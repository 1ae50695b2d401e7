/**
 * Test helpers for a REAL neutron-server, started and stopped with the same scripts developers use
 * (hack/neutron/up.sh, hack/neutron/down.sh), each instance in its own private state dir.
 *
 * - `startNeutron()` runs up.sh (installing the Debian package the first time on a machine: minutes) and returns
 *   where the server is; `stop()` runs down.sh, which leaves no neutron process behind and removes the dir.
 * - `neutronApi(endpoint)` is a deliberately separate, minimal raw-HTTP view of Neutron (no pkg/neutron code), so
 *   tests check the server's real state independently of the client or controller under test.
 */
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const upScript = join(repo, 'hack', 'neutron', 'up.sh');
const downScript = join(repo, 'hack', 'neutron', 'down.sh');

export type NeutronAuthMode = 'noauth' | 'keystonecontext' | 'keystone';

export interface NeutronInstance {
  /** Private state dir (config, db, logs, pids). */
  readonly dir: string;
  /** clouds.yaml with a cloud named `local` (auth_type none). */
  readonly cloudsYaml: string;
  /** Neutron's base URL, e.g. http://127.0.0.1:PORT (no /v2.0). */
  readonly endpoint: string;
  readonly auth: NeutronAuthMode;
  /** With keystone: Keystone's v3 URL. */
  readonly keystoneUrl: string | undefined;
  /** Runs down.sh (idempotent). */
  stop(): Promise<void>;
}

export interface StartNeutronOptions {
  /** State dir; default a new temporary directory. */
  dir?: string;
  /**
   * noauth (default), keystonecontext (identity from X-User-Id/X-Project-Id/X-Roles), or keystone (a real Keystone:
   * clouds `local` = user/project k8s, `other`, `admin`; passwords `<user>-pw`; see hack/neutron/keystone.sh).
   */
  auth?: NeutronAuthMode;
  /** With keystone: token lifetime in seconds (KEYSTONE_TOKEN_EXPIRATION). */
  tokenExpirationSeconds?: number;
  /** With keystone: keystonemiddleware's token_cache_time (NEUTRON_TOKEN_CACHE_TIME); default none (-1). */
  tokenCacheSeconds?: number;
  /** allow_overlapping_ips (NEUTRON_OVERLAPPING_IPS); default true. false is Neutron's own default. */
  overlappingIps?: boolean;
  /** pagination_max_limit (NEUTRON_PAGE_LIMIT); default none. */
  pageLimit?: number;
  /**
   * neutron-server's database (NEUTRON_DB): sqlite (up.sh's default: fast, one writer at a time) or mariadb (a private
   * MariaDB with the real migrations, as clouds run Neutron; with keystone, Keystone's MariaDB).
   */
  db?: 'sqlite' | 'mariadb';
  /** neutron-server's api_workers (NEUTRON_API_WORKERS); default up.sh's (0: the API in the parent process). */
  apiWorkers?: number;
  /**
   * The address neutron-server (and Keystone) bind and advertise (NEUTRON_HOST; default 127.0.0.1), e.g. the real
   * node's HOST_IP so Pods reach them.
   */
  host?: string;
  /** Overall limit for up.sh (default 15 min: the first run installs ~200 Debian packages). */
  timeoutMs?: number;
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a script with a deadline; stderr is mirrored to ours (progress) and kept for error messages. */
function run(script: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('bash', [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      process.stderr.write(c);
    });
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      reject(new Error(`${script} did not finish within ${timeoutMs} ms\n${stderr.slice(-4000)}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/** Starts a neutron-server in a private state dir with hack/neutron/up.sh. */
export async function startNeutron(opts: StartNeutronOptions = {}): Promise<NeutronInstance> {
  if (opts.dir) mkdirSync(opts.dir, { recursive: true });
  // Canonical path: the scripts resolve symlinks, and process lookups match on the path in the command line.
  const dir = realpathSync(opts.dir ?? mkdtempSync(join(tmpdir(), 'tscm-neutron-')));
  const auth = opts.auth ?? 'noauth';
  const env = {
    ...process.env, NEUTRON_DIR: dir, NEUTRON_AUTH: auth, NEUTRON_OVERLAPPING_IPS: String(opts.overlappingIps ?? true),
    ...(opts.pageLimit !== undefined && { NEUTRON_PAGE_LIMIT: String(opts.pageLimit) }),
    ...(opts.db !== undefined && { NEUTRON_DB: opts.db }),
    ...(opts.host !== undefined && { NEUTRON_HOST: opts.host }),
    ...(opts.apiWorkers !== undefined && { NEUTRON_API_WORKERS: String(opts.apiWorkers) }),
    ...(opts.tokenExpirationSeconds !== undefined && { KEYSTONE_TOKEN_EXPIRATION: String(opts.tokenExpirationSeconds) }),
    ...(opts.tokenCacheSeconds !== undefined && { NEUTRON_TOKEN_CACHE_TIME: String(opts.tokenCacheSeconds) }),
  };
  const res = await run(upScript, [], env, opts.timeoutMs ?? 15 * 60_000);
  const m = /^export NEUTRON_CLOUD_CONFIG=(.+)$/m.exec(res.stdout);
  if (res.code !== 0 || !m?.[1]) {
    await stopNeutron(dir).catch(() => {});
    throw new Error(`hack/neutron/up.sh failed (exit ${res.code}); stdout: ${res.stdout.trim()}\n${res.stderr.slice(-4000)}`);
  }
  const port = readFileSync(join(dir, 'port'), 'utf8').trim();
  let stopped: Promise<void> | undefined;
  return {
    dir,
    cloudsYaml: m[1].trim(),
    endpoint: `http://${opts.host ?? '127.0.0.1'}:${port}`,
    auth,
    keystoneUrl: auth === 'keystone' ? readFileSync(join(dir, 'keystone', 'url'), 'utf8').trim() : undefined,
    stop: () => (stopped ??= stopNeutron(dir)),
  };
}

/** Stops the neutron-server of a state dir with hack/neutron/down.sh and removes the dir. */
export async function stopNeutron(dir: string): Promise<void> {
  const res = await run(downScript, [], { ...process.env, NEUTRON_DIR: dir }, 60_000);
  if (res.code !== 0) throw new Error(`hack/neutron/down.sh failed (exit ${res.code})\n${res.stderr.slice(-4000)}`);
}

/**
 * Live (non-zombie) processes whose command line names `<dir>/neutron.conf`: the server and its forked workers.
 * Read from /proc, independently of the pid files the scripts keep.
 */
export function neutronProcesses(dir: string): number[] {
  const marker = `${dir}/neutron.conf`;
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (!cmdline.includes(marker)) continue;
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[0];
      if (state !== 'Z') out.push(Number(entry));
    } catch {
      // The process exited while we looked.
    }
  }
  return out;
}

export interface RawResponse<T = unknown> {
  status: number;
  body: T;
}

type Json = Record<string, unknown>;

export interface NeutronApi {
  readonly endpoint: string;
  /** One raw request; the body is parsed JSON when there is one, else the text. */
  request<T = Json>(method: string, path: string, body?: unknown): Promise<RawResponse<T>>;
  /** GET /v2.0/networks/ID, or undefined on 404. */
  network(id: string): Promise<Json | undefined>;
  /** GET /v2.0/networks?query, all pages. */
  networks(query?: Record<string, string>): Promise<Json[]>;
  subnet(id: string): Promise<Json | undefined>;
  subnets(query?: Record<string, string>): Promise<Json[]>;
}

/** A raw-HTTP view of Neutron for assertions (independent of pkg/neutron). Extra headers go on every request. */
export function neutronApi(endpoint: string, headers: Record<string, string> = {}): NeutronApi {
  const base = endpoint.replace(/\/+$/, '');
  const api: NeutronApi = {
    endpoint: base,
    async request<T = Json>(method: string, path: string, body?: unknown): Promise<RawResponse<T>> {
      const res = await fetch(base + path, {
        method,
        headers: { accept: 'application/json', ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000), // behind Keystone on a loaded machine a request can take seconds
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: res.status, body: parsed as T };
    },
    async network(id) {
      return one(await api.request(`GET`, `/v2.0/networks/${encodeURIComponent(id)}`), 'network');
    },
    async networks(query = {}) {
      return all('networks', query);
    },
    async subnet(id) {
      return one(await api.request('GET', `/v2.0/subnets/${encodeURIComponent(id)}`), 'subnet');
    },
    async subnets(query = {}) {
      return all('subnets', query);
    },
  };
  /** Every page (a server with pagination_max_limit answers in pages with `next` links). */
  async function all(key: string, query: Record<string, string>): Promise<Json[]> {
    const out: Json[] = [];
    let qs = new URLSearchParams(query).toString();
    for (let page = 0; page < 10_000; page++) {
      const res = await api.request('GET', `/v2.0/${key}?${qs}`);
      out.push(...many(res, key));
      const next = ((res.body)[`${key}_links`] as { rel: string; href: string }[] | undefined)?.find((l) => l.rel === 'next');
      if (!next) return out;
      qs = new URL(next.href).searchParams.toString();
    }
    throw new Error(`GET ${key}: more than 10 000 pages`);
  }
  return api;
}

function one(res: RawResponse, key: string): Json | undefined {
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw new Error(`GET ${key}: HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
  return (res.body as Json)[key] as Json;
}

function many(res: RawResponse, key: string): Json[] {
  if (res.status !== 200) throw new Error(`GET ${key}: HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
  return (res.body as Json)[key] as Json[];
}

// ---- a proxy in front of the real neutron-server: counts, delays and holds requests ---------------------------------

export interface SeenRequest { method: string; path: string; body: string; at: number }

/**
 * An HTTP proxy in front of a real neutron-server for fault injection on the wire:
 *  - counts what the client under test sent (`seen`, `count`);
 *  - `delay(req)` → ms: the request reaches Neutron only after that long (a server that commits LATE, e.g. after the
 *    client's 10 s timeout: Neutron really commits, the client never sees the answer);
 *  - `hold(req)` → true: the request reaches Neutron at once, Neutron's answer is kept from the client (`held` counts
 *    them) — the client is stuck right after Neutron acted.
 * When neutron-server is down the proxy drops the client connection, so the client sees "unreachable".
 */
export class NeutronProxy {
  readonly seen: SeenRequest[] = [];
  target: URL;
  delay: ((r: SeenRequest) => number) | undefined;
  hold: ((r: SeenRequest) => boolean) | undefined;
  /**
   * Forward only once this promise settles (undefined: at once): lets a test act at an exact point, e.g. change a
   * resource between the controller's read and its write, or stop the controller while its request waits here.
   */
  gate: ((r: SeenRequest) => Promise<unknown> | undefined) | undefined;
  /** A status to answer INSTEAD of forwarding (e.g. 401: the token expired at exactly this request). */
  refuse: ((r: SeenRequest) => number | undefined) | undefined;
  /** Requests whose (already forwarded) answer is being held back. */
  held = 0;
  /** Requests forwarded after a delay, and their Neutron status. */
  readonly delayed: { req: SeenRequest; status: number }[] = [];
  private readonly server: Server;

  private constructor(server: Server, target: string) {
    this.server = server;
    this.target = new URL(target);
  }

  static async start(target: string): Promise<NeutronProxy> {
    const server = createServer();
    const proxy = new NeutronProxy(server, target);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const seen: SeenRequest = { method: req.method ?? '', path: (req.url ?? '').split('?')[0] ?? '', body: body.toString(), at: Date.now() };
        proxy.seen.push(seen);
        const refused = proxy.refuse?.(seen);
        if (refused !== undefined) {
          res.writeHead(refused, { 'content-type': 'text/plain' });
          res.end(`refused by the test proxy (${refused})`);
          return;
        }
        const delayMs = proxy.delay?.(seen) ?? 0;
        const hold = proxy.hold?.(seen) ?? false;
        const forward = (): void => {
          const up = httpRequest({
            host: proxy.target.hostname, port: proxy.target.port, method: req.method, path: req.url,
            headers: { ...req.headers, host: proxy.target.host },
          }, (ur) => {
            if (delayMs > 0) proxy.delayed.push({ req: seen, status: ur.statusCode ?? 0 });
            if (hold) {
              ur.resume();
              ur.on('end', () => proxy.held++);
              return; // never answered: the client times out or is killed
            }
            if (res.destroyed) {
              ur.resume();
              return;
            }
            res.writeHead(ur.statusCode ?? 502, ur.headers);
            ur.pipe(res);
          });
          up.on('error', () => res.destroy()); // neutron-server down: the client sees a dropped connection
          up.end(body);
        };
        const gate = proxy.gate?.(seen);
        if (gate) void gate.then(forward, forward);
        else if (delayMs > 0) setTimeout(forward, delayMs);
        else forward();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return proxy;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  count(method: string, path: string | RegExp, bodyIncludes = '', since = 0): number {
    return this.seen.filter((r) => r.method === method && (typeof path === 'string' ? r.path === path : path.test(r.path))
      && r.body.includes(bodyIncludes) && r.at >= since).length;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/** A Keystone token for `<user>` in project `<user>` (password `<user>-pw`, as hack/neutron/keystone.sh creates them). */
export async function keystoneToken(keystoneUrl: string, user: string): Promise<{ token: string; body: Record<string, unknown> }> {
  const res = await fetch(`${keystoneUrl}/auth/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(30_000),
    body: JSON.stringify({ auth: {
      identity: { methods: ['password'], password: { user: { name: user, domain: { id: 'default' }, password: `${user}-pw` } } },
      scope: { project: { name: user, domain: { id: 'default' } } },
    } }),
  });
  const token = res.headers.get('x-subject-token');
  if (res.status !== 201 || !token) throw new Error(`keystone token for ${user}: HTTP ${res.status}`);
  return { token, body: (await res.json()) as Record<string, unknown> };
}
