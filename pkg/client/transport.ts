/**
 * Transport: ONE connection pool to the API server per process, and the credentials of each request.
 *
 * Sharing (issue 23; client-go's transport cache keyed by tlsCacheKey, and its exec authenticator cache): every
 * RestClient built from equal cluster + user settings gets the SAME Transport from `sharedTransports` — one connection
 * (HTTP/2: one TLS connection for every request and watch of the process), one exec plugin run per credential
 * lifetime, one token-file watcher — however many clients (reader, write-gated client, sharder writer) the process
 * makes. What differs per client (write gate, user agent, metrics registry) lives in the RestClient. The Transport is
 * reference-counted: it closes when the last client holding it closes.
 *
 * Why: a new TLS connection per request (what client-node's `applySecurityAuthentication` gives) costs a full
 * handshake per call and leaves native TLS memory behind; at 1 000 objects it was most of the process's RSS. Like
 * client-go, this keeps one `Connection` (connection.ts: HTTP/2 chosen by ALPN, so every request and watch is a
 * stream on one multiplexed connection, HTTP/1.1 keep-alive otherwise) on Node's built-in http2/https. Through a
 * proxy (kubeconfig `proxy-url`, or HTTPS_PROXY/HTTP_PROXY/NO_PROXY) undici's proxy agents are used, imported only
 * then.
 *
 * Invariants:
 *  - The connection is rebuilt only when the TLS material changes: CA / client certificate / key FILES are checked
 *    (mtime + size) at most once per `recheckMs`; data embedded in the kubeconfig never changes. The old connection
 *    is left to finish what runs on it (requests and watches in flight) and closed after `drainMs`.
 *  - Credentials are computed per request and never cached beyond their source's own rules: a token FILE is re-read
 *    when its mtime changes (checked at most once per `recheckMs`: rotated bound ServiceAccount tokens are used
 *    within a second, even after the old one is revoked); an exec plugin's credential is cached until its
 *    expirationTimestamp or until `invalidate()` (called on a 401); legacy auth providers (oidc, gcp, azure) are
 *    delegated to client-node, which is imported only then.
 *  - `close()` closes the connection; requests after it fail.
 * Concurrency: single-threaded; safe to share by every client of the process.
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import type { Dispatcher } from 'undici';
import { Connection, type SendOptions, type TlsOptions, type WireResponse } from './connection.ts';
import type { Cluster, KubeConfig, User } from './kubeconfig.ts';

interface TlsMaterial {
  ca?: Buffer | undefined;
  cert?: Buffer | undefined;
  key?: Buffer | undefined;
}

interface ExecCredential {
  token?: string | undefined;
  cert?: Buffer | undefined;
  key?: Buffer | undefined;
  /** Local time (ms) after which it must be refreshed; Infinity when the plugin gave no expiry. */
  expiresAt: number;
}

export interface TransportOptions {
  /** How often files (CA, certificate, key, token) are checked for changes, at most. Default 1 000 ms. */
  recheckMs?: number;
  /** Test seam for `process.env` (proxy variables, exec plugin environment). */
  env?: NodeJS.ProcessEnv;
}

/** A file's content, re-read when its mtime or size changes (checked at most every `recheckMs`). */
class WatchedFile {
  private content: Buffer | undefined;
  private stamp = '';
  private checkedAt = -Infinity;
  private readonly path: string;
  private readonly recheckMs: number;

  constructor(path: string, recheckMs: number) {
    this.path = path;
    this.recheckMs = recheckMs;
  }

  /** The current content; throws only if the file was never readable. */
  read(): Buffer {
    const now = performance.now();
    if (now - this.checkedAt >= this.recheckMs || this.content === undefined) {
      this.checkedAt = now;
      try {
        const st = statSync(this.path);
        const stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
        if (stamp !== this.stamp || this.content === undefined) {
          this.content = readFileSync(this.path);
          this.stamp = stamp;
        }
      } catch (err) {
        // Keep the last good content (a rotation replaces the file atomically; a transient gap is not fatal).
        if (this.content === undefined) throw new Error(`cannot read ${this.path}: ${(err as Error).message}`, { cause: err });
      }
    }
    return this.content;
  }
}

const b64 = (s: string | undefined): Buffer | undefined => (s ? Buffer.from(s, 'base64') : undefined);

/**
 * What a RestClient sends its requests on (client-go's `http.RoundTripper` of a rest.Config): `Transport` below
 * (the real connection pool), or any other implementation handed to `RestClientOptions.transport` /
 * `ControllerManagerOptions.transport` — e.g. ts-controller-manager/testing's in-memory API server, which the
 * perturbation tester (`explore`) puts under a whole ControllerManager.
 *
 * Contract: `send` resolves with the response (any status) or rejects for a request that got no answer (connection
 * lost, timeout); `signal` aborting tears the request down; `beforeSend` is called synchronously right before the
 * request is handed over, and throwing from it refuses the request (nothing is sent). `headers(url)` gives the
 * credentials of a request; `invalidate()` is called after a 401.
 */
export interface RequestTransport {
  /** The cluster the requests go to: `server` is its base URL (scheme, host, optional path prefix). */
  readonly cluster: Pick<Cluster, 'server'>;
  /** Authorization (and impersonation) headers of a request to `url`. */
  headers(url: string): Promise<Record<string, string>>;
  /** Sends one request (see the contract). */
  send(opts: SendOptions): Promise<WireResponse>;
  /** The server answered 401: drop cached refreshable credentials. */
  invalidate(): void;
}

export class Transport implements RequestTransport {
  readonly cluster: Cluster;
  readonly user: User | null;
  private readonly kubeConfig: KubeConfig;
  private readonly recheckMs: number;
  private readonly env: NodeJS.ProcessEnv;
  private readonly files = new Map<string, WatchedFile>();
  private current: { sender: Sender; material: TlsMaterial } | undefined;
  private tlsCheckedAt = -Infinity;
  private exec: ExecCredential | undefined;
  private execRunning: Promise<ExecCredential> | undefined;
  private legacyAuth: Promise<(url: string) => Promise<Record<string, string>>> | undefined;
  private closed = false;

  constructor(kubeConfig: KubeConfig, opts: TransportOptions = {}) {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.kubeConfig = kubeConfig;
    this.cluster = cluster;
    this.user = kubeConfig.getCurrentUser();
    this.recheckMs = opts.recheckMs ?? 1000;
    this.env = opts.env ?? process.env;
  }

  /** Sends one request on the current connection (see the invariants). */
  send(opts: SendOptions): Promise<WireResponse> {
    return this.sender().send(opts);
  }

  /** The current sender (rebuilt when TLS material changed). Exposed for tests. */
  sender(): Sender {
    if (this.closed) throw new Error('transport closed');
    const now = performance.now();
    if (this.current && now - this.tlsCheckedAt < this.recheckMs) return this.current.sender;
    this.tlsCheckedAt = now;
    const material = this.tlsMaterial();
    if (this.current && sameMaterial(this.current.material, material)) return this.current.sender;
    const old = this.current?.sender;
    this.current = { sender: this.build(material), material };
    // Watches on the old connection end within their timeoutSeconds (≤ 10 min); then it goes.
    if (old) setTimeout(() => old.close(), 11 * 60_000).unref();
    return this.current.sender;
  }

  /** Authorization and impersonation headers for a request to `url`. */
  async headers(url: string): Promise<Record<string, string>> {
    const u = this.user;
    const h: Record<string, string> = {};
    if (!u) return h;
    if (u.impersonateUser) h['impersonate-user'] = u.impersonateUser;
    if (u.impersonateGroups?.length) h['impersonate-group'] = u.impersonateGroups.join(',');
    if (u.tokenFile) {
      h['authorization'] = `Bearer ${this.file(u.tokenFile).read().toString('utf8').trim()}`;
    } else if (u.token) {
      h['authorization'] = `Bearer ${u.token}`;
    } else if (u.exec) {
      const cred = await this.execCredential();
      if (cred.token) h['authorization'] = `Bearer ${cred.token}`;
    } else if (u.authProvider) {
      this.legacyAuth ??= this.loadLegacyAuth();
      Object.assign(h, await (await this.legacyAuth)(url));
    } else if (u.username !== undefined && u.password !== undefined) {
      h['authorization'] = `Basic ${Buffer.from(`${u.username}:${u.password}`).toString('base64')}`;
    }
    return h;
  }

  /** The server answered 401: drop cached refreshable credentials (exec) so the next request gets fresh ones. */
  invalidate(): void {
    this.exec = undefined;
    this.tlsCheckedAt = -Infinity;
  }

  close(): void {
    this.closed = true;
    this.current?.sender.close();
    this.current = undefined;
  }

  private file(path: string): WatchedFile {
    let f = this.files.get(path);
    if (!f) this.files.set(path, (f = new WatchedFile(path, this.recheckMs)));
    return f;
  }

  private tlsMaterial(): TlsMaterial {
    const c = this.cluster;
    const u = this.user;
    const exec = this.exec;
    return {
      ca: c.caFile ? this.file(c.caFile).read() : b64(c.caData),
      cert: u?.certFile ? this.file(u.certFile).read() : (b64(u?.certData) ?? exec?.cert),
      key: u?.keyFile ? this.file(u.keyFile).read() : (b64(u?.keyData) ?? exec?.key),
    };
  }

  private build(m: TlsMaterial): Sender {
    const c = this.cluster;
    const tls: TlsOptions = {
      ca: m.ca, cert: m.cert, key: m.key,
      ...(c.tlsServerName ? { servername: c.tlsServerName } : {}),
      ...(c.skipTLSVerify ? { rejectUnauthorized: false } : {}),
    };
    const env = this.env;
    const envProxy = env['HTTPS_PROXY'] || env['https_proxy'] || env['HTTP_PROXY'] || env['http_proxy'];
    if (c.proxyUrl || (envProxy && !noProxy(new URL(c.server).hostname, env['NO_PROXY'] ?? env['no_proxy'] ?? ''))) {
      if (c.proxyUrl && !/^https?:/.test(c.proxyUrl)) throw new Error(`kubeconfig proxy-url ${c.proxyUrl}: only http(s) proxies are supported`);
      return new ProxySender(c.server, c.proxyUrl, tls);
    }
    return new Connection(c.server, { tls });
  }

  private execCredential(): Promise<ExecCredential> {
    const cached = this.exec;
    if (cached && Date.now() < cached.expiresAt) return Promise.resolve(cached);
    this.execRunning ??= this.runExec().then(
      (cred) => {
        this.execRunning = undefined;
        this.exec = cred;
        if (cred.cert || cred.key) this.tlsCheckedAt = -Infinity; // new client certificate: rebuild the pool
        return cred;
      },
      (err: unknown) => {
        this.execRunning = undefined;
        throw err;
      },
    );
    return this.execRunning;
  }

  private runExec(): Promise<ExecCredential> {
    const exec = this.user?.exec;
    if (!exec) return Promise.reject(new Error('no exec plugin'));
    const apiVersion = exec.apiVersion ?? 'client.authentication.k8s.io/v1';
    const env: NodeJS.ProcessEnv = { ...this.env };
    for (const e of exec.env ?? []) env[e.name] = e.value;
    env['KUBERNETES_EXEC_INFO'] = JSON.stringify({
      apiVersion, kind: 'ExecCredential',
      spec: { interactive: false, ...(exec.provideClusterInfo ? { cluster: { server: this.cluster.server, 'certificate-authority-data': this.cluster.caData } } : {}) },
    });
    return new Promise((resolve, reject) => {
      execFile(exec.command, exec.args ?? [], { env, timeout: 60_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`exec credential plugin ${exec.command} failed: ${err.message}${stderr ? `: ${stderr.slice(0, 500)}` : ''}`));
          return;
        }
        try {
          const status = ((JSON.parse(stdout) as { status?: Record<string, unknown> }).status ?? {});
          const exp = typeof status['expirationTimestamp'] === 'string' ? Date.parse(status['expirationTimestamp']) : NaN;
          resolve({
            token: typeof status['token'] === 'string' ? status['token'] : undefined,
            cert: typeof status['clientCertificateData'] === 'string' ? Buffer.from(status['clientCertificateData']) : undefined,
            key: typeof status['clientKeyData'] === 'string' ? Buffer.from(status['clientKeyData']) : undefined,
            expiresAt: Number.isFinite(exp) ? exp - 10_000 : Infinity,
          });
        } catch (e) {
          reject(new Error(`exec credential plugin ${exec.command}: output is not an ExecCredential: ${(e as Error).message}`));
        }
      });
    });
  }

  /** oidc/gcp/azure auth providers: client-node's authenticators compute the header (imported only for them). */
  private async loadLegacyAuth(): Promise<(url: string) => Promise<Record<string, string>>> {
    const cn = await import('@kubernetes/client-node');
    const kc = new cn.KubeConfig();
    kc.loadFromString(this.kubeConfig.exportConfig());
    return async (url) => {
      const ctx = new cn.RequestContext(url, cn.HttpMethod.GET);
      await kc.applySecurityAuthentication(ctx);
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(ctx.getHeaders())) if (k.toLowerCase() === 'authorization') out['authorization'] = v;
      return out;
    };
  }
}

function sameMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  const eq = (x: Buffer | undefined, y: Buffer | undefined): boolean => (x === y) || (!!x && !!y && x.equals(y));
  return eq(a.ca, b.ca) && eq(a.cert, b.cert) && eq(a.key, b.key);
}

/**
 * The cache key of a kubeconfig's connection and credentials: the current cluster and user, every field (names
 * excluded; files by path — their content is watched by the Transport). Equal keys → one shared Transport.
 */
export function transportKey(kubeConfig: KubeConfig): string {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const user = kubeConfig.getCurrentUser();
  const strip = (o: object | null): unknown => {
    if (!o) return null;
    const { name: _name, ...rest } = o as { name?: string };
    return rest;
  };
  return canonicalJSON([strip(cluster), strip(user)]);
}

/** JSON with object keys sorted (so equal settings parsed in any order give one key); undefined fields dropped. */
function canonicalJSON(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJSON).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJSON(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** A hold on a shared Transport; `release()` (idempotent) drops it, and the last release closes the Transport. */
export interface TransportLease {
  readonly transport: Transport;
  release(): void;
}

/**
 * Reference-counted Transports by `transportKey` (client-go's tlsTransportCache). Contract: `acquire` returns the live
 * Transport of equal settings or builds one; each `acquire` must be matched by one `release`; the Transport is closed
 * and forgotten when its count reaches 0 (a later `acquire` builds a fresh one). Single-threaded, process-wide.
 */
export class TransportCache {
  private readonly entries = new Map<string, { transport: Transport; refs: number }>();

  acquire(kubeConfig: KubeConfig, opts: TransportOptions = {}): TransportLease {
    const key = transportKey(kubeConfig);
    let entry = this.entries.get(key);
    if (!entry) this.entries.set(key, (entry = { transport: new Transport(kubeConfig, opts), refs: 0 }));
    entry.refs++;
    const held = entry;
    let released = false;
    return {
      transport: held.transport,
      release: () => {
        if (released) return;
        released = true;
        if (--held.refs > 0) return;
        held.transport.close();
        if (this.entries.get(key) === held) this.entries.delete(key);
      },
    };
  }

  /** Live shared Transports (tests). */
  get size(): number {
    return this.entries.size;
  }
}

/** The process-wide cache every RestClient uses unless it is handed its own Transport. */
export const sharedTransports = new TransportCache();

/** What sends requests: a Connection, or a ProxySender. */
export interface Sender {
  send(opts: SendOptions): Promise<WireResponse>;
  close(): void;
}

/** NO_PROXY matching as Go's httpproxy: `*`, exact host, or a domain suffix (".example.com" or "example.com"). */
export function noProxy(host: string, list: string): boolean {
  return list.split(',').map((e) => e.trim().toLowerCase()).filter(Boolean).some((e) => {
    if (e === '*') return true;
    const name = e.replace(/:\d+$/, '').replace(/^\./, '');
    const h = host.toLowerCase();
    return h === name || h.endsWith(`.${name}`);
  });
}

/** Requests through an HTTP(S) proxy (CONNECT tunnel) with undici's proxy agents, imported on first use. */
class ProxySender implements Sender {
  private readonly origin: string;
  private readonly proxyUrl: string | undefined;
  private readonly tls: TlsOptions;
  private dispatcher: Promise<Dispatcher> | undefined;

  constructor(origin: string, proxyUrl: string | undefined, tls: TlsOptions) {
    this.origin = new URL(origin).origin;
    this.proxyUrl = proxyUrl;
    this.tls = tls;
  }

  async send(opts: SendOptions): Promise<WireResponse> {
    const undici = await import('undici');
    const requestTls = Object.fromEntries(Object.entries(this.tls).filter(([, v]) => v !== undefined));
    this.dispatcher ??= Promise.resolve(this.proxyUrl
      ? new undici.ProxyAgent({ uri: this.proxyUrl, requestTls })
      : new undici.EnvHttpProxyAgent({ requestTls }));
    // undici connects inside request(): the gate is asked here, after the credentials, before the tunnel exists.
    opts.signal.throwIfAborted();
    opts.beforeSend?.();
    const res = await undici.request(this.origin + opts.path, {
      method: opts.method, headers: opts.headers, body: opts.body, signal: opts.signal,
      dispatcher: await this.dispatcher,
    });
    return { status: res.statusCode, headers: res.headers, body: res.body };
  }

  close(): void {
    void this.dispatcher?.then((d) => d.close()).catch(() => undefined);
  }
}
