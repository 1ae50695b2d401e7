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
import { setupNetworkWebhooks } from '../../pkg/controllers/network/webhook.ts';
import { isNotFound } from '../../pkg/client/errors.ts';
import { RestClient } from '../../pkg/client/rest.ts';
import { newLogger } from '../../pkg/log/logger.ts';
import type { KubeConfigSource } from '../../pkg/manager/kubeconfig.ts';
import { defaultIdentity } from '../../pkg/manager/leaderelection.ts';
import type { SignalHandlers } from '../../pkg/manager/signals.ts';
import { ControllerManager, packageVersion } from '../../pkg/runtime/manager.ts';
import type { Logger } from '../../pkg/log/logger.ts';
import { SelfManagedCertificates } from '../../pkg/webhook/certs/selfmanaged.ts';
import { webhookServerLimits, type Options } from './options.ts';

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

  // Self-managed webhook certificates: every replica runs one (pkg/webhook/certs/selfmanaged.ts), through an ungated
  // client of its own (the manager's clients are created by the manager, which needs this TlsSource first).
  const sm = opts.webhookSelfManaged;
  const certs = sm ? new SelfManagedCertificates({
    client: new RestClient({ kubeConfig: kube.kubeConfig, userAgent: `ts-controller-manager/${packageVersion()} (${identity})`, log }),
    secretName: sm.secretName, namespace: sm.namespace, serviceName: sm.serviceName, ips: sm.ips,
    validatingWebhookConfigurations: sm.validatingWebhookConfigurations, mutatingWebhookConfigurations: sm.mutatingWebhookConfigurations,
    crds: sm.crds, servingValidityMs: sm.servingValidityMs, caValidityMs: sm.caValidityMs, propagationMs: sm.propagationMs,
    reloadGraceMs: sm.reloadGraceMs, pollIntervalMs: sm.pollIntervalMs, logger: log,
  }) : undefined;

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
    // The webhook server starts only once a webhook is registered: only with a certificate source (below).
    webhook: {
      bindAddress: opts.webhookBindAddress,
      ...(opts.webhookCertPath ? { certDir: opts.webhookCertPath } : {}),
      ...(certs ? { tls: certs } : {}),
      shutdownDelayMs: opts.webhookShutdownDelayMs,
      http2: opts.webhookHttp2,
      ...webhookServerLimits(opts),
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
  // The Network webhooks (validation of v1 and v2, conversion v1 ↔ v2) only with a certificate source: without one,
  // no port is opened and nothing changes for deployments that install the single-version CRD.
  if (opts.webhookCertMode !== 'none') {
    setupNetworkWebhooks(mgr);
    log.info({ certificates: opts.webhookCertMode, bindAddress: opts.webhookBindAddress, paths: mgr.webhookServer?.paths() }, 'serving the Network webhooks');
  }
  // The Network controller follows the API the cluster serves: v2 when the Network CRD serves v2 (config/crd/v2,
  // with the conversion webhook), else v1 (config/crd/bases). Asked once, here; a CRD changed later needs a restart.
  const networkVersion = opts.controllers.includes('network') ? await servedNetworkVersion(mgr.reader, log, signals.signal) : 'v1';
  // Controllers first: their informers must exist before the factory starts listing.
  for (const name of opts.controllers) {
    try {
      controllerSetups[name].setup(mgr, {
        concurrency: opts.concurrency[name], neutron: { cloudConfig: opts.neutronCloudConfig, cloud: opts.neutronCloud, networkVersion },
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

/**
 * "v2" when the API server serves samplecrd.k8s.io/v2 (discovery of the group), else "v1" — also when the group is
 * not there yet (404) or discovery fails (logged): v1 is what every Network CRD this project shipped serves. A wrong
 * "v1" is safe: the v1 controller leaves dual-stack Networks (the conversion's v2-subnets annotation) untouched
 * (controller.ts; controller.test.ts "a dual-stack Network seen through v1").
 */
export async function servedNetworkVersion(client: RestClient, log: Logger, signal: AbortSignal): Promise<'v1' | 'v2'> {
  try {
    const group = await client.json<{ versions?: { version?: string }[] }>('GET', '/apis/samplecrd.k8s.io', { signal });
    const v2 = (group.versions ?? []).some((v) => v.version === 'v2');
    log.info({ networkVersion: v2 ? 'v2' : 'v1' }, `the Network controller reconciles samplecrd.k8s.io/${v2 ? 'v2' : 'v1'} (what the cluster serves)`);
    return v2 ? 'v2' : 'v1';
  } catch (err) {
    if (!isNotFound(err)) log.warn({ err }, 'discovery of samplecrd.k8s.io failed; the Network controller reconciles v1');
    return 'v1';
  }
}
