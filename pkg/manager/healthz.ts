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
import express, { type Request, type Response } from 'express';
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

export class HealthChecks {
  private readonly checks: Record<Endpoint, Map<string, Checker>> = { healthz: new Map(), readyz: new Map() };
  private readonly timeoutMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;

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

  names(endpoint: Endpoint): string[] {
    return [...this.checks[endpoint].keys()].sort();
  }

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

  /** Express router serving /healthz, /livez, /readyz and their /<name> sub-paths. */
  router(): express.Router {
    const router = express.Router();
    const all = (endpoint: Endpoint) => async (req: Request, res: Response): Promise<void> => {
      const verbose = req.query.verbose !== undefined;
      const exclude = ([] as unknown[]).concat(req.query.exclude ?? []).filter((x): x is string => typeof x === 'string');
      const results = await this.run(endpoint, { exclude });
      const failed = results.some((r) => !r.ok);
      res.status(failed ? 503 : 200);
      if (!failed && !verbose) {
        send(res, 'ok');
        return;
      }
      const lines = results.map((r) => {
        if (r.excluded) return `[+]${r.name} excluded: ok`;
        if (r.ok) return `[+]${r.name} ok`;
        return `[-]${r.name} failed: ${verbose ? r.reason : 'reason withheld'}`;
      });
      lines.push(`${endpoint} check ${failed ? 'failed' : 'passed'}`);
      send(res, lines.join('\n') + '\n');
    };
    const one = (endpoint: Endpoint) => async (req: Request, res: Response): Promise<void> => {
      const name = String(req.params.name);
      if (!this.has(endpoint, name)) {
        res.status(404);
        send(res, `${endpoint} check ${JSON.stringify(name)} not found\n`);
        return;
      }
      const [result] = await this.run(endpoint, { only: name });
      if (result?.ok) {
        send(res.status(200), 'ok');
      } else {
        send(res.status(503), `internal server error: ${result?.reason ?? 'unknown'}\n`);
      }
    };
    for (const [path, endpoint] of [['healthz', 'healthz'], ['livez', 'healthz'], ['readyz', 'readyz']] as const) {
      router.get(`/${path}`, all(endpoint));
      router.get(`/${path}/:name`, one(endpoint));
    }
    return router;
  }
}

function send(res: Response, body: string): void {
  res.set({ 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
  res.send(body);
}

/** The --health-probe-bind-address server. Returns undefined when the address is "0" (disabled). */
export function newHealthProbeServer(
  bindAddress: string,
  checks: HealthChecks,
  opts: { logger?: Logger; shutdownTimeoutMs?: number } = {},
): HttpServerRunnable | undefined {
  if (bindAddress === '0') return undefined;
  const app = express();
  app.disable('x-powered-by');
  app.use(checks.router());
  return new HttpServerRunnable({ name: 'health-probe-server', bindAddress, handler: app, ...opts });
}
