/**
 * One HTTP exchange with Neutron or Keystone, with a hard deadline and typed transport failures.
 *
 * Invariants:
 *  - Every call has a timeout covering connect, headers and the whole body (`timeoutMs`, default 10 s).
 *  - A caller's abort rejects with the caller's `signal.reason` unchanged (cancellation is not a server failure);
 *    our own timeout and connection failures reject with NeutronUnavailableError (`Timeout` / `ConnectionError`).
 *  - Bodies are read completely before returning, so connections go back to the pool.
 *  - Nothing here logs headers or bodies (they carry tokens and credentials).
 *  - With `metrics`, every request that ends in a response or in a failure of ours (timeout, connection) is counted
 *    once, under `api` (metrics.ts); a request the caller cancelled is not counted.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as Undici from 'undici';
import type { Dispatcher } from 'undici';
import { CloudConfigError, type CloudConfig } from './clouds.ts';
import { NeutronUnavailableError } from './errors.ts';
import type { OpenStackAPI, OpenStackMetrics } from './metrics.ts';

export const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * undici, loaded on first use: the manager's start path (and a manager without Neutron configuration) never pays its
 * import (~25 MiB RSS and a noticeable part of start-up).
 */
let undici: typeof Undici | undefined;
function lib(): typeof Undici {
  return (undici ??= createRequire(import.meta.url)('undici') as typeof Undici);
}

export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** TLS and proxy settings (default: undici's defaults, no proxy). */
  transport?: Transport;
  /** Where the request is counted (openstack_requests_total etc.); not counted without it. */
  metrics?: { api: OpenStackAPI; sink: OpenStackMetrics };
}

export interface HttpResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** The innermost cause's message of a fetch failure, e.g. `connect ECONNREFUSED 127.0.0.1:9696`. */
function causeMessage(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}

/** Sends the request and reads the whole body. See the module comment for the failure contract. */
export async function send(req: HttpRequest): Promise<HttpResponse> {
  const { fetch } = lib(); // loaded before the deadline starts: the first call must not spend its timeout on it
  const dispatcher = req.transport?.dispatcher();
  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // One controller per request (as pkg/client/rest.ts): the caller's signal and our timer both abort it; both are
  // released when the body has been read or the request failed.
  const ac = new AbortController();
  const outer = req.signal;
  const onAbort = (): void => ac.abort(outer?.reason);
  if (outer?.aborted) ac.abort(outer.reason);
  else outer?.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort(new DOMException(`no complete response within ${timeoutMs} ms`, 'TimeoutError'));
  }, timeoutMs);
  timer.unref();
  const path = new URL(req.url).pathname;
  const started = performance.now();
  const record = (status: number | undefined): void => {
    req.metrics?.sink.request(req.metrics.api, req.method, status, (performance.now() - started) / 1000);
  };
  try {
    const res = await fetch(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: ac.signal,
      ...(dispatcher && { dispatcher }),
    });
    const text = await res.text();
    record(res.status);
    // undici's Headers and the global Headers are the same shape; callers only read them.
    return { status: res.status, headers: res.headers as unknown as Headers, text };
  } catch (err) {
    if (outer?.aborted && !timedOut) throw outer.reason;
    record(undefined);
    if (timedOut) {
      throw new NeutronUnavailableError({
        status: 0, type: 'Timeout', message: `no complete response within ${timeoutMs} ms`, method: req.method, path, cause: err,
      });
    }
    throw new NeutronUnavailableError({
      status: 0, type: 'ConnectionError', message: causeMessage(err), method: req.method, path, cause: err,
    });
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onAbort);
  }
}

/** The proxy environment (HTTPS_PROXY/https_proxy, HTTP_PROXY/http_proxy, NO_PROXY/no_proxy), as pkg/client/transport.ts reads it. */
export interface ProxyEnv {
  /** For http:// URLs. */
  readonly httpProxy: string;
  /** For https:// URLs (HTTP_PROXY when unset, as undici's EnvHttpProxyAgent and the Kubernetes client do). */
  readonly httpsProxy: string;
  /** Hosts reached directly: comma-separated names (a suffix matches subdomains), `host:port`, IPs, or `*`. */
  readonly noProxy: string;
}

export function proxyEnv(env: NodeJS.ProcessEnv = process.env): ProxyEnv {
  const httpProxy = env['HTTP_PROXY'] || env['http_proxy'] || '';
  return {
    httpProxy,
    httpsProxy: env['HTTPS_PROXY'] || env['https_proxy'] || httpProxy,
    noProxy: env['NO_PROXY'] ?? env['no_proxy'] ?? '',
  };
}

/**
 * How one cloud's requests reach Keystone and Neutron: the clouds.yaml TLS settings (`verify`, `cacert`, `cert`, `key`)
 * and the proxy environment, for every URL alike (the Keystone endpoint, the catalog's Neutron endpoint, an override).
 *
 * Invariants:
 *  - The TLS files are read once, here (at startup): an unreadable one is a CloudConfigError naming the setting and the
 *    file, so the manager exits 2 with one line instead of failing every request later.
 *  - Through a proxy, http:// URLs are sent to it as absolute-URI requests and https:// URLs through a CONNECT tunnel,
 *    with the cloud's TLS settings applied end to end (the proxy never sees plaintext or our client key); a URL whose
 *    host matches NO_PROXY goes directly.
 *  - The undici dispatcher is created on the first request (undici is loaded lazily: see `lib()`); undefined when
 *    nothing differs from undici's defaults.
 */
export class Transport {
  private readonly tls: TlsSettings | undefined;
  private readonly proxy: ProxyEnv;
  private built: Dispatcher | undefined;
  private isBuilt = false;

  constructor(cloud: Pick<CloudConfig, 'verify' | 'cacert' | 'cert' | 'key'>, env: NodeJS.ProcessEnv = process.env) {
    const tls: TlsSettings = {
      ...(!cloud.verify && { rejectUnauthorized: false }),
      ...(cloud.cacert !== undefined && { ca: readSetting('cacert', cloud.cacert) }),
      ...(cloud.cert !== undefined && { cert: readSetting('cert', cloud.cert) }),
      ...(cloud.cert !== undefined && { key: readSetting(cloud.key !== undefined ? 'key' : 'cert', cloud.key ?? cloud.cert) }),
    };
    this.tls = Object.keys(tls).length > 0 ? tls : undefined;
    this.proxy = proxyEnv(env);
  }

  /** The dispatcher for every request of this cloud (undefined: undici's global one). */
  dispatcher(): Dispatcher | undefined {
    if (this.isBuilt) return this.built;
    this.isBuilt = true;
    const { Agent, EnvHttpProxyAgent } = lib();
    const tls = this.tls ?? {};
    if (this.proxy.httpProxy !== '' || this.proxy.httpsProxy !== '') {
      // EnvHttpProxyAgent chooses per request: direct (NO_PROXY) with `connect`, or a ProxyAgent with `requestTls` for
      // the tunnelled TLS to Keystone/Neutron. Explicit values: the environment given here, not the process's.
      this.built = new EnvHttpProxyAgent({
        httpProxy: this.proxy.httpProxy, httpsProxy: this.proxy.httpsProxy, noProxy: this.proxy.noProxy,
        connect: tls, requestTls: tls,
      });
    } else if (this.tls) {
      this.built = new Agent({ connect: tls });
    }
    return this.built;
  }

  /** Closes the dispatcher's connections (requests in flight fail). */
  async close(): Promise<void> {
    await this.built?.close();
  }
}

interface TlsSettings {
  rejectUnauthorized?: boolean;
  ca?: string;
  cert?: string;
  key?: string;
}

function readSetting(setting: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new CloudConfigError(`cannot read ${setting} file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}
