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
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const upScript = join(repo, 'hack', 'neutron', 'up.sh');
const downScript = join(repo, 'hack', 'neutron', 'down.sh');

export type NeutronAuthMode = 'noauth' | 'keystonecontext';

export interface NeutronInstance {
  /** Private state dir (config, db, logs, pids). */
  readonly dir: string;
  /** clouds.yaml with a cloud named `local` (auth_type none). */
  readonly cloudsYaml: string;
  /** Neutron's base URL, e.g. http://127.0.0.1:PORT (no /v2.0). */
  readonly endpoint: string;
  readonly auth: NeutronAuthMode;
  /** Runs down.sh (idempotent). */
  stop(): Promise<void>;
}

export interface StartNeutronOptions {
  /** State dir; default a new temporary directory. */
  dir?: string;
  /** noauth (default) or keystonecontext (identity from X-User-Id/X-Project-Id/X-Roles). */
  auth?: NeutronAuthMode;
  /** allow_overlapping_ips (NEUTRON_OVERLAPPING_IPS); default true. false is Neutron's own default. */
  overlappingIps?: boolean;
  /** pagination_max_limit (NEUTRON_PAGE_LIMIT); default none. */
  pageLimit?: number;
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
    endpoint: `http://127.0.0.1:${port}`,
    auth,
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
  /** GET /v2.0/networks?query. */
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
        signal: AbortSignal.timeout(10_000),
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
      return many(await api.request('GET', `/v2.0/networks?${new URLSearchParams(query).toString()}`), 'networks');
    },
    async subnet(id) {
      return one(await api.request('GET', `/v2.0/subnets/${encodeURIComponent(id)}`), 'subnet');
    },
    async subnets(query = {}) {
      return many(await api.request('GET', `/v2.0/subnets?${new URLSearchParams(query).toString()}`), 'subnets');
    },
  };
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
