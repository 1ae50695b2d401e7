/**
 * In-process manager for controller integration tests: the same wiring as cmd/manager/main.ts (one RestClient, one
 * SharedInformerFactory scoped to the test's namespace, one EventBroadcaster, the controllers' setups, a Manager
 * without leader election) with a private prom-client Registry, so each test reads its own metrics.
 *
 *   const m = await startControllers(t, { namespace: ns, controllers: ['foo', 'deployment'], resyncPeriodMs: 2_000 });
 *   await m.writes();                       // POST+PUT+PATCH+DELETE requests so far (rest_client_requests_total)
 *   await m.metric('controller_runtime_reconcile_total', { controller: 'foo' });   // sum over matching series
 *   await m.stop();                         // also registered with t.after; idempotent
 *
 * Logs are silent unless TSCM_TEST_LOG_LEVEL is set (e.g. debug), then they go to stderr.
 */
import type { TestContext } from 'node:test';
import type { LevelWithSilent } from 'pino';
import { Registry } from 'prom-client';
import type { ControllerName } from '../../cmd/manager/options.ts';
import { RestClient } from '../../pkg/client/rest.ts';
import { controllerSetups } from '../../pkg/controllers/index.ts';
import { EventBroadcaster, RestEventSink } from '../../pkg/events/recorder.ts';
import { SharedInformerFactory } from '../../pkg/informerfactory/factory.ts';
import { waitForCacheSync } from '../../pkg/informerfactory/waitforsync.ts';
import { newLogger, silentLogger, type Logger } from '../../pkg/log/logger.ts';
import { Manager } from '../../pkg/manager/manager.ts';
import { runnable } from '../../pkg/manager/runnable.ts';
import { adminKubeConfig, waitFor } from './cluster.ts';

export interface StartControllersOptions {
  namespace: string;
  controllers: ControllerName[];
  /** Handler resync period (ms); default 0 = never. */
  resyncPeriodMs?: number;
  /** Workers per controller; default 1. */
  concurrency?: number;
  /** Neutron settings for the Network controller (default: none — it then does not start). */
  neutron?: { cloudConfig: string | undefined; cloud: string | undefined };
}

export interface RunningControllers {
  readonly namespace: string;
  readonly factory: SharedInformerFactory;
  readonly registry: Registry;
  readonly rest: RestClient;
  /** Sum of the values of metric `name` over the series whose labels include `labels` (0 when none). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** Requests per HTTP method so far (rest_client_requests_total, any code). */
  requestsByMethod(): Promise<Record<string, number>>;
  /** Write requests (POST, PUT, PATCH, DELETE) so far. */
  writes(): Promise<number>;
  /** Waits until every Event recorded so far has been written (or dropped). */
  flushEvents(): Promise<void>;
  /** Stops controllers and informers (graceful), then flushes Events. Idempotent. */
  stop(): Promise<void>;
}

function testLogger(): Logger {
  const level = process.env['TSCM_TEST_LOG_LEVEL'];
  return level ? newLogger({ level: level as LevelWithSilent, destination: process.stderr }) : silentLogger;
}

/** Starts the given controllers in-process and resolves once their caches synced and they are running. */
export async function startControllers(t: TestContext, opts: StartControllersOptions): Promise<RunningControllers> {
  const logger = testLogger().child({ test: t.name });
  const registry = new Registry();
  const rest = new RestClient({ kubeConfig: adminKubeConfig(), registry, userAgent: 'ts-controller-manager-test' });
  const factory = new SharedInformerFactory({
    client: rest, namespaces: [opts.namespace], defaultResyncPeriodMs: opts.resyncPeriodMs ?? 0, logger,
  });
  const events = new EventBroadcaster({ sink: new RestEventSink(rest), logger });
  const syncedChecks: (() => boolean)[] = [];
  const manager = new Manager({
    gracefulShutdownTimeoutMs: 10_000,
    logger,
    waitForCacheSync: async (signal) =>
      (await factory.waitForCacheSync({ signal })) && waitForCacheSync(syncedChecks, { signal, pollIntervalMs: 20 }),
  });
  for (const name of opts.controllers) {
    const result = await controllerSetups[name].setup({
      factory, rest, recorder: events.recorderFor(`${name}-controller`), logger, registry,
      concurrency: opts.concurrency ?? 1, gracefulShutdownTimeoutMs: 10_000, namespaces: [opts.namespace],
      neutron: opts.neutron ?? { cloudConfig: undefined, cloud: undefined },
    });
    if (!result) throw new Error(`controller ${name} did not set up`);
    manager.add(result.runnable);
    syncedChecks.push(...result.syncedChecks);
  }
  manager.add(runnable('informers', false, (signal) => factory.run(signal)));

  const ac = new AbortController();
  const exited = manager.start(ac.signal);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      ac.abort();
      const code = await exited;
      await events.shutdown();
      if (code !== 0) throw new Error(`manager exited with code ${code}`);
    })();
    return stopping;
  };
  t.after(stop);

  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> => {
    const m = registry.getSingleMetric(name);
    if (!m) return 0;
    const { values } = await m.get();
    return values
      .filter((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want))
      .reduce((sum, v) => sum + v.value, 0);
  };
  const requestsByMethod = async (): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    const m = registry.getSingleMetric('rest_client_requests_total');
    for (const v of m ? (await m.get()).values : []) {
      const method = String(v.labels['method']);
      out[method] = (out[method] ?? 0) + v.value;
    }
    return out;
  };

  // Controllers set controller_runtime_max_concurrent_reconciles when their workers start.
  await waitFor('controllers running', async () => {
    const started = await Promise.all(opts.controllers.map((c) => metric('controller_runtime_max_concurrent_reconciles', { controller: c })));
    return started.every((n) => n > 0);
  }, { timeoutMs: 60_000 });

  return {
    namespace: opts.namespace, factory, registry, rest, metric, requestsByMethod, stop,
    writes: async () => {
      const by = await requestsByMethod();
      return (by['POST'] ?? 0) + (by['PUT'] ?? 0) + (by['PATCH'] ?? 0) + (by['DELETE'] ?? 0);
    },
    flushEvents: () => events.flush(),
  };
}
