/**
 * Transport: ONE connection pool to the API server per process, and the credentials of each request.
 *
 * Why: a new TLS connection per request (what client-node's `applySecurityAuthentication` gives) costs a full
 * handshake per call and leaves native TLS memory behind; at 1 000 objects it was most of the process's RSS. Like
 * client-go, this keeps one undici dispatcher with HTTP/2 offered by ALPN (the API server chooses it, so every
 * request and watch is a stream on one multiplexed connection; undici opens another connection when the server's
 * stream limit is reached) and HTTP/1.1 keep-alive otherwise.
 *
 * Invariants:
 *  - The dispatcher is rebuilt only when the TLS material changes: CA / client certificate / key FILES are checked
 *    (mtime + size) at most once per `recheckMs`; data embedded in the kubeconfig never changes. The old dispatcher
 *    is closed gracefully (requests and watches in flight on it finish; new ones use the new one).
 *  - Credentials are computed per request and never cached beyond their source's own rules: a token FILE is re-read
 *    when its mtime changes (checked at most once per `recheckMs`: rotated bound ServiceAccount tokens are used
 *    within a second, even after the old one is revoked); an exec plugin's credential is cached until its
 *    expirationTimestamp or until `invalidate()` (called on a 401); legacy auth providers (oidc, gcp, azure) are
 *    delegated to client-node, which is imported only then.
 *  - `close()` closes the dispatcher; requests after it fail.
 * Concurrency: single-threaded; safe to share by every client of the process.
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { Agent, type Dispatcher, EnvHttpProxyAgent, ProxyAgent } from 'undici';
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

export class Transport {
  readonly cluster: Cluster;
  readonly user: User | null;
  private readonly kubeConfig: KubeConfig;
  private readonly recheckMs: number;
  private readonly env: NodeJS.ProcessEnv;
  private readonly files = new Map<string, WatchedFile>();
  private current: { dispatcher: Dispatcher; material: TlsMaterial } | undefined;
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

  /** The dispatcher to send the next request with (see the invariants). */
  dispatcher(): Dispatcher {
    if (this.closed) throw new Error('transport closed');
    const now = performance.now();
    if (this.current && now - this.tlsCheckedAt < this.recheckMs) return this.current.dispatcher;
    this.tlsCheckedAt = now;
    const material = this.tlsMaterial();
    if (this.current && sameMaterial(this.current.material, material)) return this.current.dispatcher;
    const old = this.current?.dispatcher;
    this.current = { dispatcher: this.build(material), material };
    if (old) void old.close().catch(() => undefined);
    return this.current.dispatcher;
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

  async close(): Promise<void> {
    this.closed = true;
    const d = this.current?.dispatcher;
    this.current = undefined;
    await d?.close().catch(() => undefined);
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

  private build(m: TlsMaterial): Dispatcher {
    const c = this.cluster;
    const tls = {
      ...(m.ca ? { ca: m.ca } : {}),
      ...(m.cert ? { cert: m.cert } : {}),
      ...(m.key ? { key: m.key } : {}),
      ...(c.tlsServerName ? { servername: c.tlsServerName } : {}),
      ...(c.skipTLSVerify ? { rejectUnauthorized: false } : {}),
    };
    // keepAliveInitialDelay 30 s as client-go's dialer; HTTP/2 pings keep an idle multiplexed connection checked.
    const connect = { ...tls, keepAlive: true, keepAliveInitialDelay: 30_000 };
    const common = { allowH2: true, connect, keepAliveTimeout: 30_000, h2Options: { pingInterval: 30_000 } };
    if (c.proxyUrl) {
      if (!/^https?:/.test(c.proxyUrl)) throw new Error(`kubeconfig proxy-url ${c.proxyUrl}: only http(s) proxies are supported`);
      return new ProxyAgent({ ...common, uri: c.proxyUrl, requestTls: tls });
    }
    const env = this.env;
    if (env['HTTPS_PROXY'] || env['https_proxy'] || env['HTTP_PROXY'] || env['http_proxy']) {
      return new EnvHttpProxyAgent({ ...common, requestTls: tls });
    }
    return new Agent(common);
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
