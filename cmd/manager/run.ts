/**
 * The manager's wiring: credentials → REST client → shared informer factory → controllers → Manager (informers,
 * health and metrics servers, leader election) → run until a signal. Called by main.ts after the flags parsed.
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
import { LeaderElector, RestLeaseClient } from '../../pkg/manager/leaderelection.ts';
import { installSignalHandlers, Manager } from '../../pkg/manager/manager.ts';
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

export async function run(opts: Options, kube: KubeConfigSource): Promise<number> {
  const log = newLogger({ level: opts.logLevel });
  const version = packageVersion();
  log.info({
    version, node: process.version, credentials: kube.source, server: kube.kubeConfig.getCurrentCluster()?.server,
    watchNamespaces: opts.watchNamespaces.length ? opts.watchNamespaces : 'all', controllers: opts.controllers,
    leaderElect: opts.leaderElect,
  }, 'starting ts-controller-manager');

  const registry = globalRegistry;
  const rest = new RestClient({ kubeConfig: kube.kubeConfig, registry, userAgent: `ts-controller-manager/${version}` });
  const factory = new SharedInformerFactory({
    client: rest, namespaces: opts.watchNamespaces, defaultResyncPeriodMs: opts.syncPeriodMs, logger: log,
  });
  const events = new EventBroadcaster({ sink: new RestEventSink(rest), logger: log });
  const checks = new HealthChecks({ logger: log });

  const elector = opts.leaderElect
    ? new LeaderElector({
      lock: new RestLeaseClient(rest, opts.leaderElectionNamespace ?? '', opts.leaderElectionId),
      name: opts.leaderElectionId, leaseDurationMs: opts.leaseDurationMs, renewDeadlineMs: opts.renewDeadlineMs,
      retryPeriodMs: opts.retryPeriodMs, logger: log, registry,
    })
    : undefined;
  if (elector) checks.addHealthzCheck('leaderElection', () => elector.watchdog());

  // Controllers first: their informers must exist before the factory starts listing.
  const syncedChecks: (() => boolean)[] = [];
  const manager = new Manager({
    ...(elector ? { leaderElection: elector } : {}),
    gracefulShutdownTimeoutMs: opts.gracefulShutdownTimeoutMs,
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
        factory, rest, recorder: events.recorderFor(`${name}-controller`), logger: log, registry,
        concurrency: opts.concurrency[name], gracefulShutdownTimeoutMs: opts.gracefulShutdownTimeoutMs,
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

  const { signal, dispose } = installSignalHandlers(process, log);
  const code = await manager.start(signal);
  await events.shutdown();
  dispose();
  log.info({ exitCode: code }, 'ts-controller-manager stopped');
  return code;
}
