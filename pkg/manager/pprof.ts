/**
 * The profiling endpoint (--pprof-bind-address; controller-runtime's `manager.Options.PprofBindAddress`), on V8's
 * own profilers through an in-process `node:inspector` session. Everything it serves opens in Chrome DevTools
 * (Performance / Memory panels) or any `.cpuprofile` / `.heapprofile` / `.heapsnapshot` tooling:
 *
 *   GET /debug/pprof/                      index (text)
 *   GET /debug/pprof/profile?seconds=N     CPU profile of the next N seconds (V8 `Profiler.Profile` JSON, `.cpuprofile`)
 *   GET /debug/pprof/heap?seconds=N        sampling heap profile of the next N seconds (`.heapprofile`: `{head, samples}`)
 *                                          of what is still live at its end; `&allocated=1` keeps the samples of objects
 *                                          collected meanwhile too (every allocation: where the churn comes from)
 *   GET /debug/pprof/heapstats             v8.getHeapStatistics + getHeapSpaceStatistics + getHeapCodeStatistics +
 *                                          process.memoryUsage + resourceUsage (JSON)
 *   GET /debug/pprof/heapsnapshot          full heap snapshot, streamed (`.heapsnapshot`); PAUSES the process while
 *                                          V8 walks the heap, and needs memory of the order of the heap itself
 *   GET <path of `debugRoutes`>            JSON the composition root adds, e.g. /debug/informers (what each informer
 *                                          cache holds: pkg/informerfactory/debug.ts); instant, read-only
 *
 * Invariants:
 *  - Off unless a bind address other than "0"/"" is given (newPprofServer returns undefined).
 *  - A loopback address (127.0.0.0/8, ::1, localhost) serves plain HTTP with no authentication, as
 *    controller-runtime does. Any other address (":6060" = all interfaces included) serves HTTPS and requires what
 *    the secure metrics endpoint requires (metricsserver.ts AuthFilter): a bearer token that a TokenReview
 *    authenticates (401) and a SubjectAccessReview allows to `get` the non-resource URL path asked for (403) —
 *    RBAC `nonResourceURLs: ["/debug/pprof/*"]`. The auth filter is required there: construction throws without it.
 *  - `seconds` is an integer in 1..maxSeconds (default 300), default 30; anything else is 400.
 *  - At most one profile of each kind (CPU, heap sampling, snapshot) at a time; a concurrent one gets 409. The V8
 *    profiler is never left running: it is stopped when the window ends, when the client goes away (the request's
 *    abort signal) and when the server's signal aborts (manager shutdown: 503 if nothing was sent yet).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Session } from 'node:inspector/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { pipeline } from 'node:stream/promises';
import v8 from 'node:v8';
import type { AddressInfo } from 'node:net';
import { type Logger, silentLogger } from '../log/logger.ts';
import { CertDirWatcher, GeneratedCertificate } from './certwatcher.ts';
import { HttpServerRunnable, parseBindAddress, type BindAddress } from './httpserver.ts';
import { AuthFilter, type AccessReviewer } from './metricsserver.ts';
import type { Runnable } from './runnable.ts';

export const pprofPathPrefix = '/debug/pprof/';
export const defaultProfileSeconds = 30;
export const defaultMaxProfileSeconds = 300;
/** Bytes between heap samples (V8's default, as `node --heap-prof`). */
const heapSamplingIntervalBytes = 32 * 1024;

/** True for "0" and "" (controller-runtime: both disable the endpoint). */
export function pprofDisabled(bindAddress: string | undefined): boolean {
  return bindAddress === undefined || bindAddress === '' || bindAddress === '0';
}

/** Whether a parsed bind address is loopback only (no host = all interfaces = not loopback). */
export function isLoopback(addr: BindAddress): boolean {
  const h = addr.host?.toLowerCase();
  if (h === undefined) return false;
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./.test(h);
}

export interface PprofServerOptions {
  /** "host:port", ":port"; "0" or "" = disabled. */
  bindAddress: string;
  /** Access reviews for a non-loopback address (ignored on loopback). One of `reviewer`/`authFilter` is required there. */
  reviewer?: AccessReviewer;
  authFilter?: AuthFilter;
  /** Directory with tls.crt/tls.key for a non-loopback address (re-read on change); else a generated self-signed pair. */
  certDir?: string;
  /** Upper bound of `seconds` (default 300). */
  maxSeconds?: number;
  /**
   * More read-only JSON endpoints on the same server, under the same access rules, by path (outside /debug/pprof/,
   * e.g. `/debug/informers`): each gets the query and returns what to send.
   */
  debugRoutes?: Record<string, DebugRoute>;
  logger?: Logger;
  shutdownTimeoutMs?: number;
}

/** A read-only JSON endpoint beside the profiles (PprofServerOptions.debugRoutes). */
export interface DebugRoute {
  /** One line for the index page. */
  description: string;
  /** What to send (as JSON) for this query; runs on the event loop, so keep it quick. */
  handler: (query: URLSearchParams) => unknown;
}

type Kind = 'cpu' | 'heap' | 'snapshot';
const kindText: Record<Kind, string> = { cpu: 'a CPU profile', heap: 'a heap profile', snapshot: 'a heap snapshot' };

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** The profiling server as a Runnable (see the module comment). */
export class PprofServer implements Runnable {
  readonly name = 'pprof-server';
  readonly needLeaderElection = false;
  /** True when requests must authenticate (non-loopback address): HTTPS + TokenReview/SubjectAccessReview. */
  readonly secure: boolean;
  private readonly http: HttpServerRunnable;
  private readonly filter: AuthFilter | undefined;
  private readonly log: Logger;
  private readonly maxSeconds: number;
  private readonly debugRoutes: Record<string, DebugRoute>;
  private readonly busy = new Set<Kind>();
  /** Aborts with the server's start signal (manager shutdown). */
  private readonly stopping = new AbortController();

  constructor(opts: PprofServerOptions) {
    const addr = parseBindAddress(opts.bindAddress);
    if (!addr) throw new Error('pprof server: bind address "0" means disabled; do not create the server');
    this.secure = !isLoopback(addr);
    this.log = (opts.logger ?? silentLogger).child({ component: 'pprof-server' });
    this.maxSeconds = opts.maxSeconds ?? defaultMaxProfileSeconds;
    this.debugRoutes = { ...opts.debugRoutes };
    for (const path of Object.keys(this.debugRoutes)) {
      if (!path.startsWith('/debug/') || path.startsWith(pprofPathPrefix)) throw new Error(`pprof server: debug route ${path} must be under /debug/ and outside ${pprofPathPrefix}`);
    }
    if (this.secure) {
      this.filter = opts.authFilter ?? (opts.reviewer ? new AuthFilter({ reviewer: opts.reviewer, logger: opts.logger }) : undefined);
      if (!this.filter) throw new Error(`pprof server: a non-loopback address (${opts.bindAddress}) needs an AccessReviewer (TokenReview/SubjectAccessReview)`);
    }
    const common = { logger: opts.logger };
    const tls = !this.secure
      ? undefined
      : opts.certDir
        ? new CertDirWatcher({ dir: opts.certDir, ...common })
        : new GeneratedCertificate({ commonName: 'ts-controller-manager-pprof', dnsNames: ['localhost'], ips: ['127.0.0.1'], ...common });
    this.http = new HttpServerRunnable({
      name: 'pprof-server',
      bindAddress: opts.bindAddress,
      handler: (req, res) => {
        this.serve(req, res).catch((err: unknown) => {
          this.log.error({ err }, 'pprof handler failed');
          if (!res.headersSent) res.writeHead(500).end();
          else res.destroy();
        });
      },
      ...(tls ? { tls } : {}),
      logger: opts.logger,
      shutdownTimeoutMs: opts.shutdownTimeoutMs,
    });
  }

  /** Resolves with the bound address once listening. */
  get listening(): Promise<AddressInfo> {
    return this.http.listening;
  }

  async start(signal: AbortSignal): Promise<void> {
    const stop = (): void => this.stopping.abort(new Error('pprof server shutting down'));
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
    try {
      await this.http.start(signal);
    } finally {
      signal.removeEventListener('abort', stop);
      stop();
    }
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    let path = url.pathname;
    if (path === '/debug/pprof') path = pprofPathPrefix;
    const extra = Object.hasOwn(this.debugRoutes, path) ? this.debugRoutes[path] : undefined;
    const route = extra ? 'extra' : routes[path];
    if (!route) return text(res, 404, 'not found\n');
    if (req.method !== 'GET') {
      res.setHeader('allow', 'GET');
      return text(res, 405, 'method not allowed: use GET\n');
    }
    if (this.filter && !(await this.filter.admit(req, res, path))) return;

    // Aborts when the client goes away before the response finished, or on shutdown.
    const client = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) client.abort(new Error('client went away'));
    });
    const signal = AbortSignal.any([client.signal, this.stopping.signal]);
    try {
      switch (route) {
        case 'index':
          return text(res, 200, indexText(this.secure, this.maxSeconds, this.debugRoutes));
        case 'heapstats':
          return json(res, heapStats());
        case 'extra':
          return json(res, extra?.handler(url.searchParams));
        case 'profile':
        case 'heap': {
          const seconds = this.seconds(url);
          const kind: Kind = route === 'profile' ? 'cpu' : 'heap';
          const allocated = flag(url, 'allocated');
          const profile = await this.exclusive(kind, () => (kind === 'cpu' ? cpuProfile(seconds, signal) : heapProfile(seconds, allocated, signal)));
          this.log.info({ kind, seconds }, 'profile taken');
          return json(res, profile, `${kind === 'cpu' ? 'profile' : 'heap'}-${stamp()}.${kind === 'cpu' ? 'cpuprofile' : 'heapprofile'}`);
        }
        case 'heapsnapshot':
          return await this.exclusive('snapshot', async () => {
            this.log.info('taking a heap snapshot (the process pauses while V8 walks the heap)');
            const snapshot = v8.getHeapSnapshot();
            res.writeHead(200, {
              'content-type': 'application/json', 'cache-control': 'no-store',
              'content-disposition': `attachment; filename="heap-${stamp()}.heapsnapshot"`,
            });
            await pipeline(snapshot, res, { signal });
          });
      }
    } catch (err) {
      if (err instanceof HttpError) return text(res, err.status, err.message + '\n');
      if (signal.aborted) {
        // Client gone: nothing to answer. Shutdown: say so if nothing was sent yet.
        if (!res.headersSent && !client.signal.aborted) text(res, 503, 'server shutting down\n');
        else if (!res.writableFinished) res.destroy();
        return;
      }
      throw err;
    }
  }

  private seconds(url: URL): number {
    const raw = url.searchParams.get('seconds');
    if (raw === null) return Math.min(defaultProfileSeconds, this.maxSeconds);
    const n = /^\d{1,6}$/.test(raw) ? Number(raw) : Number.NaN;
    if (!(n >= 1 && n <= this.maxSeconds)) {
      throw new HttpError(400, `invalid seconds ${JSON.stringify(raw)}: want an integer 1..${this.maxSeconds}`);
    }
    return n;
  }

  private async exclusive<T>(kind: Kind, fn: () => Promise<T>): Promise<T> {
    if (this.busy.has(kind)) throw new HttpError(409, `${kindText[kind]} is already being taken; try again when it is done`);
    this.busy.add(kind);
    try {
      return await fn();
    } finally {
      this.busy.delete(kind);
    }
  }
}

/** Builds the profiling server, or undefined when disabled ("0" or ""). */
export function newPprofServer(opts: PprofServerOptions): PprofServer | undefined {
  if (pprofDisabled(opts.bindAddress)) return undefined;
  return new PprofServer(opts);
}

const routes: Record<string, 'index' | 'profile' | 'heap' | 'heapstats' | 'heapsnapshot'> = {
  [pprofPathPrefix]: 'index',
  [`${pprofPathPrefix}profile`]: 'profile',
  [`${pprofPathPrefix}heap`]: 'heap',
  [`${pprofPathPrefix}heapstats`]: 'heapstats',
  [`${pprofPathPrefix}heapsnapshot`]: 'heapsnapshot',
};

/** A V8 CPU profile (`Profiler.Profile`: nodes, samples, timeDeltas, startTime, endTime) of the next `seconds`. */
async function cpuProfile(seconds: number, signal: AbortSignal): Promise<unknown> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 1000 }); // µs, as `node --cpu-prof`
    await session.post('Profiler.start');
    // Stopped on every path (window over, client gone, shutdown): the profiler never outlives the request.
    const waited = await sleep(seconds * 1000, undefined, { signal }).then(() => undefined, (err: unknown) => ({ err }));
    const { profile } = await session.post('Profiler.stop');
    if (waited) throw waited.err;
    return profile;
  } finally {
    session.disconnect();
  }
}

/**
 * A V8 sampling heap profile (`{head, samples}`) of the allocations of the next `seconds`: those still live at its
 * end, or with `allocated` every sampled allocation (objects collected by minor and major GCs included).
 */
async function heapProfile(seconds: number, allocated: boolean, signal: AbortSignal): Promise<unknown> {
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: heapSamplingIntervalBytes,
      ...(allocated ? { includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } : {}),
    });
    // Stopped on every path (window over, client gone, shutdown): the profiler never outlives the request.
    const waited = await sleep(seconds * 1000, undefined, { signal }).then(() => undefined, (err: unknown) => ({ err }));
    const { profile } = await session.post('HeapProfiler.stopSampling');
    if (waited) throw waited.err;
    return profile;
  } finally {
    session.disconnect();
  }
}

/** What V8 and the process say about memory now (bytes), no pause. */
export function heapStats(): Record<string, unknown> {
  return {
    heap: v8.getHeapStatistics(),
    spaces: v8.getHeapSpaceStatistics(),
    code: v8.getHeapCodeStatistics(),
    memory: process.memoryUsage(),
    resourceUsage: process.resourceUsage(),
    uptimeSeconds: process.uptime(),
    node: process.version,
  };
}

function indexText(secure: boolean, maxSeconds: number, extra: Record<string, DebugRoute>): string {
  return [
    'ts-controller-manager profiling endpoints (open the files in Chrome DevTools: Performance / Memory)',
    '',
    `${pprofPathPrefix}profile?seconds=N   CPU profile of the next N seconds (default ${defaultProfileSeconds}, 1..${maxSeconds}): .cpuprofile`,
    `${pprofPathPrefix}heap?seconds=N      sampling heap profile of the next N seconds (live at its end; &allocated=1: every allocation): .heapprofile`,
    `${pprofPathPrefix}heapstats           V8 heap and process memory statistics (JSON)`,
    `${pprofPathPrefix}heapsnapshot        full heap snapshot (.heapsnapshot); pauses the process while taken`,
    ...Object.entries(extra).map(([path, r]) => `${path.padEnd(32)} ${r.description}`),
    '',
    secure ? 'Requests need a bearer token allowed to get these paths (TokenReview + SubjectAccessReview).' : 'Loopback only: no authentication.',
    '',
  ].join('\n');
}

/** A boolean query parameter: present as "", "1" or "true". */
function flag(url: URL, name: string): boolean {
  const v = url.searchParams.get(name);
  if (v === null || v === '0' || v === 'false') return false;
  if (v === '' || v === '1' || v === 'true') return true;
  throw new HttpError(400, `invalid ${name} ${JSON.stringify(v)}: want 1 or 0`);
}

function stamp(): string {
  return new Date().toISOString().replace(/[:.]/g, '-');
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
  res.end(body);
}

function json(res: ServerResponse, body: unknown, filename?: string): void {
  res.writeHead(200, {
    'content-type': 'application/json', 'cache-control': 'no-store',
    ...(filename ? { 'content-disposition': `attachment; filename="${filename}"` } : {}),
  });
  res.end(JSON.stringify(body));
}
