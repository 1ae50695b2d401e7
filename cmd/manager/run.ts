/**
 * The manager's wiring: credentials → REST clients → shared informer factory → controllers → Manager (informers,
 * health and metrics servers, leader election) → run until a signal. Called by cli.ts after the flags parsed and
 * the signal handlers were installed.
 *
 * Two REST clients: `rest` (informers' LIST/WATCH, the Lease, TokenReview/SubjectAccessReview — the work every
 * replica does) and `guarded` (controllers and Events — work only the leader may do). `guarded` has the elector's
 * leadership signal as its write gate, and the event broadcaster stops on it: from the instant this process can no
 * longer prove it holds the Lease, no guarded write starts and those in flight are aborted; the Manager then
 * returns 1 at once and main exits (within renew deadline + 2 s of the last successful renewal's start).
 */
import { readFileSync } from 'node:fs';
import { RestClient } from '../../pkg/client/rest.ts';
import { controllerSetups } from '../../pkg/controllers/index.ts';
import { EventBroadcaster, RestEventSink } from '../../pkg/events/recorder.ts';
import { SharedInformerFactory } from '../../pkg/informerfactory/factory.ts';
import { waitForCacheSync } from '../../pkg/informerfactory/waitforsync.ts';
import { newLogger } from '../../pkg/log/logger.ts';
import { globalRegistry } from '../../pkg/metrics/registry.ts';
import { HealthChecks, newHealthProbeServer } from '../../pkg/manager/healthz.ts';
import type { KubeConfigSource } from '../../pkg/manager/kubeconfig.ts';
import { defaultIdentity, LeaderElector, RestLeaseClient } from '../../pkg/manager/leaderelection.ts';
import { Manager } from '../../pkg/manager/manager.ts';
import type { SignalHandlers } from '../../pkg/manager/signals.ts';
import { KubeAccessReviewer, newMetricsServer } from '../../pkg/manager/metricsserver.ts';
import { runnable } from '../../pkg/manager/runnable.ts';
import type { Options } from './options.ts';

/** The package version: package.json sits two levels up from the sources (cmd/manager) and three from dist/. */
function packageVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      return (JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
}

export async function run(opts: Options, kube: KubeConfigSource, signals: SignalHandlers): Promise<number> {
  const log = newLogger({ level: opts.logLevel });
  signals.setLogger(log);
  const version = packageVersion();
  // The leader-election identity (hostname_uuid, unique per process) is also in every request's User-Agent, so the
  // API server's audit log attributes each write to the Lease holder that made it.
  const identity = defaultIdentity();
  log.info({
    version, node: process.version, credentials: kube.source, server: kube.kubeConfig.getCurrentCluster()?.server,
    watchNamespaces: opts.watchNamespaces.length ? opts.watchNamespaces : 'all', controllers: opts.controllers,
    leaderElect: opts.leaderElect, identity,
  }, 'starting ts-controller-manager');

  const registry = globalRegistry;
  const userAgent = `ts-controller-manager/${version} (${identity})`;
  const rest = new RestClient({ kubeConfig: kube.kubeConfig, registry, userAgent });
  const factory = new SharedInformerFactory({
    client: rest, namespaces: opts.watchNamespaces, defaultResyncPeriodMs: opts.syncPeriodMs, logger: log,
  });
  const checks = new HealthChecks({ logger: log });

  const elector = opts.leaderElect
    ? new LeaderElector({
      lock: new RestLeaseClient(rest, opts.leaderElectionNamespace ?? '', opts.leaderElectionId),
      name: opts.leaderElectionId, identity, leaseDurationMs: opts.leaseDurationMs, renewDeadlineMs: opts.renewDeadlineMs,
      retryPeriodMs: opts.retryPeriodMs, logger: log, registry,
    })
    : undefined;
  if (elector) checks.addHealthzCheck('leaderElection', () => elector.watchdog());
  const guarded = elector
    ? new RestClient({ kubeConfig: kube.kubeConfig, registry, userAgent, writeGate: elector.leadership })
    : rest;
  const events = new EventBroadcaster({
    sink: new RestEventSink(guarded), logger: log, ...(elector ? { stopSignal: elector.leadership } : {}),
  });

  // Controllers first: their informers must exist before the factory starts listing.
  const syncedChecks: (() => boolean)[] = [];
  const manager = new Manager({
    ...(elector ? { leaderElection: elector } : {}),
    gracefulShutdownTimeoutMs: opts.gracefulShutdownTimeoutMs,
    cacheSyncTimeoutMs: opts.cacheSyncTimeoutMs,
    unsyncedCaches: () => Object.entries(factory.syncStatus()).filter(([, ok]) => !ok).map(([id]) => id),
    // Events queued by the controllers are written before the lease is released (bounded by the graceful deadline).
    afterGatedStopped: (signal) => events.shutdown(signal),
    logger: log,
    // Informers first, then every handler registration (synced once its informer's initial list reached it).
    waitForCacheSync: async (signal) =>
      (await factory.waitForCacheSync({ signal })) && waitForCacheSync(syncedChecks, { signal, pollIntervalMs: 20 }),
  });
  for (const name of opts.controllers) {
    const setup = controllerSetups[name];
    let result;
    try {
      result = await setup.setup({
        factory, rest: guarded, recorder: events.recorderFor(`${name}-controller`), logger: log, registry,
        concurrency: opts.concurrency[name], gracefulShutdownTimeoutMs: opts.gracefulShutdownTimeoutMs,
        queue: { priorityQueue: opts.priorityQueue, maxQueueWaitMs: opts.maxQueueWaitMs },
        namespaces: opts.watchNamespaces,
        neutron: { cloudConfig: opts.neutronCloudConfig, cloud: opts.neutronCloud },
      });
    } catch (err) {
      // A setup fails only on configuration it was given (e.g. an unusable clouds.yaml): a bad invocation, exit 2.
      process.stderr.write(`error: ${(err as Error).message}\nRun with --help for the list of flags.\n`);
      return 2;
    }
    if (!result) continue;
    manager.add(result.runnable);
    syncedChecks.push(...result.syncedChecks);
  }
  manager.add(runnable('informers', false, (signal) => factory.run(signal)));
  checks.addReadyzCheck('informers', () => {
    const notSynced = Object.entries(factory.syncStatus()).filter(([, ok]) => !ok).map(([id]) => id);
    if (notSynced.length > 0) throw new Error(`caches not synced: ${notSynced.join(', ')}`);
  });

  const health = newHealthProbeServer(opts.healthProbeBindAddress, checks, { logger: log });
  if (health) manager.add(health);
  const metrics = newMetricsServer({
    bindAddress: opts.metricsBindAddress, registry, secure: opts.metricsSecure, logger: log,
    ...(opts.metricsCertDir ? { certDir: opts.metricsCertDir } : {}),
    ...(opts.metricsSecure ? { reviewer: new KubeAccessReviewer(rest) } : {}),
  });
  if (metrics) manager.add(metrics);

  const code = await manager.start(signals.signal);
  // Whatever is still queued is not written: either it was flushed before the release (afterGatedStopped), or the
  // lease was lost / the deadline passed. Never wait here: on a loss the process must exit now.
  events.abandon(new Error('manager stopped'));
  const failure = manager.failure();
  if (failure) log.error({ err: failure }, `ts-controller-manager failed: ${failure.message}`);
  log.info({ exitCode: code }, 'ts-controller-manager stopped');
  return code;
}
