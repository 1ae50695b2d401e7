/**
 * Kubernetes-style health endpoints: /healthz (alias /livez) and /readyz with named checks.
 *
 *   GET /readyz             200 "ok" when every check passes; otherwise 503 with one line per check
 *                           ("[+]name ok" / "[-]name failed: reason withheld") and "readyz check failed".
 *   GET /readyz?verbose     the per-check list also on success, reasons shown, last line "readyz check passed|failed".
 *   GET /readyz?exclude=x   skips check x (repeatable), as the API server does.
 *   GET /readyz/<name>      runs one check: 200 "ok" or 503 "internal server error: <reason>"; 404 if unknown.
 *
 * Checks run concurrently on every request; each gets an AbortSignal and a timeout (`timeoutMs`, default 10 s)
 * after which it counts as failed. A check fails by throwing (or rejecting). Check functions must be cheap and free
 * of side effects: probes call them every few seconds. Failure reasons are logged at debug level.
 *
 * Concurrency: checks may be added at any time (also after the server started); names are unique per endpoint.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Logger, silentLogger } from '../log/logger.ts';
import { type Clock, realClock } from '../util/clock.ts';
import { HttpServerRunnable } from './httpserver.ts';

/** A health check: return (or resolve) when healthy, throw (or reject) with a reason when not. */
export type Checker = (signal: AbortSignal) => void | Promise<void>;

export type Endpoint = 'healthz' | 'readyz';

export interface CheckResult {
  name: string;
  ok: boolean;
  excluded?: boolean;
  /** Failure reason. */
  reason?: string;
}

const checkName = /^[a-zA-Z0-9][-a-zA-Z0-9_.]*$/;

/**
 * Named liveness and readiness checks served as /healthz (/livez) and /readyz, the API server's way; each check gets
 * an AbortSignal and a timeout and fails by throwing.
 */
export class HealthChecks {
  private readonly checks: Record<Endpoint, Map<string, Checker>> = { healthz: new Map(), readyz: new Map() };
  private readonly timeoutMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;

  /** No checks yet; each check gets `opts.timeoutMs` (default 10 s) before it counts as failed. */
  constructor(opts: { timeoutMs?: number; clock?: Clock; logger?: Logger } = {}) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger).child({ component: 'healthz' });
  }

  /** Liveness: failing makes the kubelet restart the container. Keep these for "the process is wedged". */
  addHealthzCheck(name: string, fn: Checker): void {
    this.add('healthz', name, fn);
  }

  /** Readiness: failing takes the pod out of Service endpoints (e.g. caches not synced yet). */
  addReadyzCheck(name: string, fn: Checker): void {
    this.add('readyz', name, fn);
  }

  private add(endpoint: Endpoint, name: string, fn: Checker): void {
    if (!checkName.test(name)) throw new Error(`invalid ${endpoint} check name ${JSON.stringify(name)}`);
    if (this.checks[endpoint].has(name)) throw new Error(`${endpoint} check ${JSON.stringify(name)} already registered`);
    this.checks[endpoint].set(name, fn);
  }

  /** The names of the checks of `endpoint` ('healthz' or 'readyz'), sorted. */
  names(endpoint: Endpoint): string[] {
    return [...this.checks[endpoint].keys()].sort();
  }

  /** Whether `endpoint` has a check called `name`. */
  has(endpoint: Endpoint, name: string): boolean {
    return this.checks[endpoint].has(name);
  }

  /** Runs the checks of an endpoint (all, or only `only`), concurrently, sorted by name. */
  async run(endpoint: Endpoint, opts: { exclude?: readonly string[]; only?: string } = {}): Promise<CheckResult[]> {
    const exclude = new Set(opts.exclude ?? []);
    const names = opts.only !== undefined ? [opts.only] : this.names(endpoint);
    return Promise.all(
      names.map(async (name): Promise<CheckResult> => {
        const fn = this.checks[endpoint].get(name);
        if (!fn) return { name, ok: false, reason: 'no such check' };
        if (exclude.has(name)) return { name, ok: true, excluded: true };
        try {
          await this.runOne(name, fn);
          return { name, ok: true };
        } catch (err) {
          const reason = err instanceof Error ? err.message : String(err);
          this.log.debug({ check: name, endpoint, reason }, 'health check failed');
          return { name, ok: false, reason };
        }
      }),
    );
  }

  private runOne(name: string, fn: Checker): Promise<void> {
    const ac = new AbortController();
    return new Promise<void>((resolve, reject) => {
      const timer = this.clock.setTimer(this.timeoutMs, () => {
        const err = new Error(`check ${name} timed out after ${this.timeoutMs}ms`);
        ac.abort(err);
        reject(err);
      });
      Promise.resolve()
        .then(() => fn(ac.signal))
        .then(resolve, reject)
        .finally(() => timer.cancel());
    });
  }

  /**
   * Request handler serving /healthz, /livez, /readyz and their /<name> sub-paths (GET and HEAD); 404 otherwise.
   * Query: `verbose` lists every check; `exclude=<name>` (repeatable) skips checks.
   */
  handler(): (req: IncomingMessage, res: ServerResponse) => void {
    const routes: Record<string, Endpoint> = { healthz: 'healthz', livez: 'healthz', readyz: 'readyz' };
    const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const [, first, name, ...rest] = url.pathname.split('/');
      const endpoint = first !== undefined ? routes[first] : undefined;
      if (!endpoint || rest.length > 0 || (req.method !== 'GET' && req.method !== 'HEAD') || name === '') {
        send(res, 404, 'not found\n');
        return;
      }
      if (name !== undefined) {
        const check = decodeURIComponent(name);
        if (!this.has(endpoint, check)) {
          send(res, 404, `${endpoint} check ${JSON.stringify(check)} not found\n`);
          return;
        }
        const [result] = await this.run(endpoint, { only: check });
        if (result?.ok) send(res, 200, 'ok');
        else send(res, 503, `internal server error: ${result?.reason ?? 'unknown'}\n`);
        return;
      }
      const verbose = url.searchParams.has('verbose');
      const exclude = url.searchParams.getAll('exclude');
      const results = await this.run(endpoint, { exclude });
      const failed = results.some((r) => !r.ok);
      if (!failed && !verbose) {
        send(res, 200, 'ok');
        return;
      }
      const lines = results.map((r) => {
        if (r.excluded) return `[+]${r.name} excluded: ok`;
        if (r.ok) return `[+]${r.name} ok`;
        return `[-]${r.name} failed: ${verbose ? r.reason : 'reason withheld'}`;
      });
      lines.push(`${endpoint} check ${failed ? 'failed' : 'passed'}`);
      send(res, failed ? 503 : 200, lines.join('\n') + '\n');
    };
    return (req, res) => {
      serve(req, res).catch((err: unknown) => {
        this.log.error({ err }, 'health check handler failed');
        if (!res.headersSent) send(res, 500, 'internal server error\n');
      });
    };
  }
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
  res.end(body);
}

/** The --health-probe-bind-address server. Returns undefined when the address is "0" (disabled). */
export function newHealthProbeServer(
  bindAddress: string,
  checks: HealthChecks,
  opts: { logger?: Logger; shutdownTimeoutMs?: number } = {},
): HttpServerRunnable | undefined {
  if (bindAddress === '0') return undefined;
  return new HttpServerRunnable({ name: 'health-probe-server', bindAddress, handler: checks.handler(), ...opts });
}
