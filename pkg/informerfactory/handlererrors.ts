/**
 * Event handlers that throw: what happens to the error.
 *
 * A handler that throws (or rejects) loses that one notification for itself only — every other handler of the
 * informer has its own listener and gets the event regardless (listener.ts). The failure is
 *  - counted in `informer_handler_errors_total{resource, handler}` (resource: `deployments.apps/v1`; handler: the
 *    registration's name, `handler-<n>` for the n-th unnamed registration of that informer), every time;
 *  - logged at error level at most once per `HANDLER_ERROR_LOG_INTERVAL_MS` per registration: the first failure at
 *    once, later ones only when the interval since the last line has passed, with the number not logged in between
 *    (`suppressed`). A handler failing on every one of 10 000 events writes one line, not 10 000; the counter has
 *    the full count.
 *
 * Concurrency: single event loop; one reporter per handler registration.
 */
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../log/logger.ts';
import { getOrCreate } from '../metrics/registry.ts';
import type { Clock } from '../util/clock.ts';

/** At most one log line per registration per this interval about its handler's failures. */
export const HANDLER_ERROR_LOG_INTERVAL_MS = 30_000;

export function handlerErrorsCounter(registry: Registry): Counter<'resource' | 'handler'> {
  return getOrCreate(registry, 'informer_handler_errors_total', () => new Counter({
    name: 'informer_handler_errors_total',
    help: 'Number of informer event handler calls that threw or rejected, by resource and handler registration.',
    labelNames: ['resource', 'handler'] as const,
    registers: [registry],
  }));
}

export interface HandlerErrorReporterOptions {
  counter: Counter<'resource' | 'handler'>;
  /** resourceId of the informer, e.g. `foos.samplecontroller.k8s.io/v1alpha1`. */
  resource: string;
  handler: string;
  clock: Clock;
  logger: Logger;
  logIntervalMs?: number;
}

export class HandlerErrorReporter {
  private readonly child: { inc(): void };
  private readonly opts: HandlerErrorReporterOptions;
  private readonly intervalMs: number;
  private loggedAt = -Infinity;
  private suppressed = 0;

  constructor(opts: HandlerErrorReporterOptions) {
    this.opts = opts;
    this.intervalMs = opts.logIntervalMs ?? HANDLER_ERROR_LOG_INTERVAL_MS;
    this.child = opts.counter.labels({ resource: opts.resource, handler: opts.handler });
  }

  /** Counts one failure and logs it unless a line was written within the interval. */
  report(err: unknown, notification: string): void {
    this.child.inc();
    const now = this.opts.clock.now();
    if (now - this.loggedAt < this.intervalMs) {
      this.suppressed++;
      return;
    }
    this.opts.logger.error(
      { err, handler: this.opts.handler, notification, suppressed: this.suppressed },
      `event handler failed; the notification is dropped for this handler (at most one such line per ${this.intervalMs / 1000}s; informer_handler_errors_total counts all)`,
    );
    this.loggedAt = now;
    this.suppressed = 0;
  }
}
