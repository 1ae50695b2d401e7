/**
 * The binary's wiring: flags → a ControllerManager (pkg/runtime: clients, informer factory, events, leader election,
 * probe and metrics servers) → the enabled controllers declared on it → run until a signal. Called by cli.ts after
 * the flags parsed and the signal handlers were installed.
 *
 * Leadership (pkg/runtime/manager.ts): controllers and Events write through a client gated on the Lease; from the
 * instant this process can no longer prove it holds the Lease no such write starts and those in flight are aborted;
 * the manager then returns 1 at once and main exits (within renew deadline + 2 s of the last renewal's start).
 */
import { controllerSetups } from '../../pkg/controllers/index.ts';
import { newLogger } from '../../pkg/log/logger.ts';
import type { KubeConfigSource } from '../../pkg/manager/kubeconfig.ts';
import { defaultIdentity } from '../../pkg/manager/leaderelection.ts';
import type { SignalHandlers } from '../../pkg/manager/signals.ts';
import { ControllerManager, packageVersion } from '../../pkg/runtime/manager.ts';
import type { Options } from './options.ts';

export async function run(opts: Options, kube: KubeConfigSource, signals: SignalHandlers): Promise<number> {
  const log = newLogger({ level: opts.logLevel });
  signals.setLogger(log);
  // The leader-election identity (hostname_uuid, unique per process) is also in every request's User-Agent, so the
  // API server's audit log attributes each write to the Lease holder that made it.
  const identity = defaultIdentity();
  log.info({
    version: packageVersion(), node: process.version, credentials: kube.source, server: kube.kubeConfig.getCurrentCluster()?.server,
    watchNamespaces: opts.watchNamespaces.length ? opts.watchNamespaces : 'all', controllers: opts.controllers,
    leaderElect: opts.leaderElect, sharding: opts.sharding, identity,
  }, 'starting ts-controller-manager');

  const mgr = new ControllerManager({
    kubeConfig: kube.kubeConfig, namespaces: opts.watchNamespaces, syncPeriodMs: opts.syncPeriodMs, identity, logger: log,
    ...(opts.leaderElect ? {
      leaderElection: {
        id: opts.leaderElectionId, namespace: opts.leaderElectionNamespace ?? '', leaseDurationMs: opts.leaseDurationMs,
        renewDeadlineMs: opts.renewDeadlineMs, retryPeriodMs: opts.retryPeriodMs,
      },
      sharding: opts.sharding,
    } : {}),
    healthProbeBindAddress: opts.healthProbeBindAddress,
    pprofBindAddress: opts.pprofBindAddress,
    // The webhook server starts only once a webhook is registered (none yet in this binary).
    webhook: {
      bindAddress: opts.webhookBindAddress,
      ...(opts.webhookCertPath ? { certDir: opts.webhookCertPath } : {}),
    },
    metrics: {
      bindAddress: opts.metricsBindAddress, secure: opts.metricsSecure,
      ...(opts.metricsCertDir ? { certDir: opts.metricsCertDir } : {}),
    },
    gracefulShutdownTimeoutMs: opts.gracefulShutdownTimeoutMs,
    cacheSyncTimeoutMs: opts.cacheSyncTimeoutMs,
    priorityQueue: opts.priorityQueue,
    maxQueueWaitMs: opts.maxQueueWaitMs,
    watchList: opts.watchList,
    reconcileTimeoutMs: opts.reconcileTimeoutMs,
  });
  // Controllers first: their informers must exist before the factory starts listing.
  for (const name of opts.controllers) {
    try {
      controllerSetups[name].setup(mgr, {
        concurrency: opts.concurrency[name], neutron: { cloudConfig: opts.neutronCloudConfig, cloud: opts.neutronCloud },
      });
    } catch (err) {
      // A setup fails only on configuration it was given (e.g. an unusable clouds.yaml): a bad invocation, exit 2.
      process.stderr.write(`error: ${(err as Error).message}\nRun with --help for the list of flags.\n`);
      return 2;
    }
  }

  const code = await mgr.start(signals.signal);
  const failure = mgr.failure();
  if (failure) log.error({ err: failure }, `ts-controller-manager failed: ${failure.message}`);
  log.info({ exitCode: code }, 'ts-controller-manager stopped');
  return code;
}
