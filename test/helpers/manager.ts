/**
 * In-process manager for controller integration tests: the binary's own composition (pkg/runtime ControllerManager,
 * informers scoped to the test's namespace, no leader election, no servers) and the controllers' own declarations
 * (pkg/controllers), with a private prom-client Registry so each test reads its own metrics. No wiring of its own.
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
import { controllerSetups, type ControllerName } from '../../pkg/controllers/index.ts';
import type { ControllerSettings } from '../../pkg/controllers/setup.ts';
import type { RestClient } from '../../pkg/client/rest.ts';
import type { SharedInformerFactory } from '../../pkg/informerfactory/factory.ts';
import { newLogger, silentLogger, type Logger } from '../../pkg/log/logger.ts';
import { ControllerManager } from '../../pkg/runtime/manager.ts';
import { microTime } from '../../pkg/manager/leaderelection.ts';
import { adminKubeConfig, cluster, expectStatus, waitFor } from './cluster.ts';

/** A standby manager (test/standby-queue.test.ts, test/bypassedfinalizer.test.ts) and how to make it lead. */
export interface Standby {
  mgr: ControllerManager;
  registry: Registry;
  /** The other replica goes: its Lease is deleted; `mgr` acquires at its next retry (1 s). */
  release: () => Promise<void>;
}

/**
 * A manager scoped to `ns` with leader election on `lease`, which another identity holds (created here for an hour):
 * until `release()` this manager is a standby. Not started: declare controllers, then `mgr.start`.
 */
export async function standbyManager(ns: string, lease: string): Promise<Standby> {
  const cp = cluster();
  const leases = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
  const now = microTime(new Date());
  expectStatus(await cp.request('POST', leases, {
    apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: lease },
    spec: { holderIdentity: 'the-other-replica', leaseDurationSeconds: 3600, acquireTime: now, renewTime: now },
  }), 201, 'create the other replica\'s Lease');
  const registry = new Registry();
  const mgr = new ControllerManager({
    kubeConfig: adminKubeConfig(), namespaces: [ns], syncPeriodMs: 0, registry, logger: silentLogger,
    leaderElection: { id: lease, namespace: ns, leaseDurationMs: 6000, renewDeadlineMs: 4000, retryPeriodMs: 1000 },
  });
  const release = async (): Promise<void> => {
    expectStatus(await cp.request('DELETE', `${leases}/${lease}`), 200, 'release the Lease');
  };
  return { mgr, registry, release };
}

/** The sum of `name`'s series in `registry` whose labels include `labels` (0 when none). */
export async function registryMetric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = registry.getSingleMetric(name);
  if (!m) return 0;
  const { values } = await m.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want))
    .reduce((sum, v) => sum + v.value, 0);
}

export interface StartControllersOptions {
  namespace: string;
  controllers: ControllerName[];
  /** Handler resync period (ms); default 0 = never. */
  resyncPeriodMs?: number;
  /** Workers per controller; default 1. */
  concurrency?: number;
  /** Neutron settings for the Network controller (default: none — it then does not start). */
  neutron?: ControllerSettings['neutron'];
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
  /**
   * Waits until no reconcile is in flight, then until every Event recorded so far has been written (or dropped).
   * A reconcile records its Event AFTER its status write, so a test that has just seen the status would otherwise
   * flush before that Event was even recorded.
   */
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
  const mgr = new ControllerManager({
    kubeConfig: adminKubeConfig(), namespaces: [opts.namespace], syncPeriodMs: opts.resyncPeriodMs ?? 0, registry, logger,
    userAgent: 'ts-controller-manager-test', gracefulShutdownTimeoutMs: 10_000,
  });
  for (const name of opts.controllers) {
    const controller = controllerSetups[name].setup(mgr, { concurrency: opts.concurrency ?? 1, ...(opts.neutron ? { neutron: opts.neutron } : {}) });
    if (!controller) throw new Error(`controller ${name} did not set up`);
  }

  const ac = new AbortController();
  const exited = mgr.start(ac.signal);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      ac.abort();
      // A graceful stop flushes the queued Events before start resolves (the manager's afterGatedStopped).
      const code = await exited;
      if (code !== 0) throw new Error(`manager exited with code ${code}${mgr.failure() ? `: ${mgr.failure()?.message}` : ''}`);
    })();
    return stopping;
  };
  t.after(stop);

  const metric = (name: string, labels: Record<string, string> = {}): Promise<number> => registryMetric(registry, name, labels);
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
    namespace: opts.namespace, factory: mgr.factory, registry, rest: mgr.client, metric, requestsByMethod, stop,
    writes: async () => {
      const by = await requestsByMethod();
      return (by['POST'] ?? 0) + (by['PUT'] ?? 0) + (by['PATCH'] ?? 0) + (by['DELETE'] ?? 0);
    },
    flushEvents: async () => {
      await waitFor('no reconcile in flight', async () => (await metric('controller_runtime_active_workers')) === 0, { timeoutMs: 60_000, intervalMs: 5 });
      await mgr.events.flush();
    },
  };
}
