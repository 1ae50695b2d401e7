/**
 * How a controller plugs into the manager: each controller package exports a `ControllerSetup`. At startup
 * cmd/manager calls `setup(ctx)` for every enabled controller, BEFORE the informer factory starts, so the informers
 * a controller asks for (and its event handlers and indexers) exist when the factory's first LIST runs.
 *
 * A setup:
 *  - gets informers from `ctx.factory` (shared: asking for Deployments twice yields one informer),
 *  - registers event handlers that only map events to keys and enqueue them (no I/O),
 *  - returns the Runnable to run on the leader (usually a `Controller`), or `undefined` with a logged reason when the
 *    controller cannot run in this configuration (e.g. Network without Neutron credentials).
 * The `hasSynced` functions it returns in `syncedChecks` gate the controller start (with the factory's own sync).
 */
import type { Registry } from 'prom-client';
import type { RestClient } from '../client/rest.ts';
import type { Recorder } from '../events/recorder.ts';
import type { SharedInformerFactory } from '../informerfactory/factory.ts';
import type { Logger } from '../log/logger.ts';
import type { Runnable } from '../manager/runnable.ts';

export interface ControllerContext {
  factory: SharedInformerFactory;
  rest: RestClient;
  /** Event recorder for this controller (component name = controller name). */
  recorder: Recorder;
  logger: Logger;
  registry: Registry;
  /** Workers (--<name>-concurrency). */
  concurrency: number;
  /** The Controller's `priorityQueue` and `maxQueueWaitMs` (--priority-queue, --max-queue-wait); unset = defaults. */
  queue?: { priorityQueue?: boolean; maxQueueWaitMs?: number };
  gracefulShutdownTimeoutMs: number;
  /** Namespaces in scope ([] = all). */
  namespaces: readonly string[];
  /** Neutron settings for the Network controller (--neutron-cloud-config, --neutron-cloud). */
  neutron: { cloudConfig: string | undefined; cloud: string | undefined };
}

export interface ControllerSetupResult {
  runnable: Runnable;
  /** Handler registrations' hasSynced: the controller starts only when all are true. */
  syncedChecks: (() => boolean)[];
}

export interface ControllerSetup {
  name: string;
  setup(ctx: ControllerContext): Promise<ControllerSetupResult | undefined>;
}
