/**
 * ControllerManager: the whole runtime composed from options — what cmd/manager, the test harness and a user's own
 * controller all build on (controller-runtime's `manager.New`):
 *
 *   KubeConfig ─▶ RestClient `reader` (LIST/WATCH, Lease, TokenReview)       ─▶ SharedInformerFactory (one per manager)
 *            └─▶ RestClient `client` (controllers' writes, Events; write gate = leadership)
 *   EventBroadcaster (on `client`) · prom-client Registry · HealthChecks · LeaderElector · probe/metrics servers
 *   Manager (pkg/manager): runnables, leader gate, cache-sync gate, ordered shutdown
 *
 * Use:
 *   const mgr = new ControllerManager({ namespaces: ['default'], leaderElection: { id: 'my-controller', namespace: 'default' } });
 *   mgr.controller('copier').for(configMaps).owns(configMaps).complete(reconcile);   // builder.ts
 *   process.exitCode = await mgr.run();                                             // until SIGTERM/SIGINT
 *
 * Contracts
 *  - Build everything (controllers, informers, indexers, handlers) BEFORE `start`: the factory starts listing when
 *    the Manager starts, and every handler registered before that sees the initial list (at low queue priority).
 *  - What "leader" means: with `leaderElection`, the controllers (leader-gated runnables) run only while this process
 *    holds the Lease; `client` refuses writes from the instant the elector can no longer prove it holds it (its write
 *    gate is the leadership signal), the Event broadcaster stops on the same signal, and `start` resolves 1 at once —
 *    the caller must exit (pkg/manager/manager.ts, step 4). Without it, the controllers start once caches synced.
 *  - `reader` is for the work every replica does (informers' LIST/WATCH, the Lease, access reviews); controllers
 *    must write through `client`.
 *  - `start` resolves with an exit code (0 clean, 1 failure: lost lease, cache-sync timeout, a runnable failed;
 *    `failure()` says why) and never rejects. One `start` per manager.
 */
import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import type { KubeObject } from '../apimachinery/meta.ts';
import type { KubeConfig } from '../client/kubeconfig.ts';
import { RestClient } from '../client/rest.ts';
import type { RequestTransport } from '../client/transport.ts';
import type { Controller } from '../controller/controller.ts';
import { EventBroadcaster, RestEventSink, type Recorder } from '../events/recorder.ts';
import { SharedInformerFactory, type InformerForOptions } from '../informerfactory/factory.ts';
import { describeInformers } from '../informerfactory/debug.ts';
import type { ResourceType } from '../apimachinery/resource.ts';
import type { ReflectorTuning, SharedIndexInformer } from '../informerfactory/sharedinformer.ts';
import { waitForCacheSync } from '../informerfactory/waitforsync.ts';
import { newLogger, type Logger } from '../log/logger.ts';
import { HealthChecks, newHealthProbeServer } from '../manager/healthz.ts';
import { loadKubeConfig } from '../manager/kubeconfig.ts';
import { defaultIdentity, LeaderElector, RestLeaseClient } from '../manager/leaderelection.ts';
import { Manager } from '../manager/manager.ts';
import { KubeAccessReviewer, newMetricsServer } from '../manager/metricsserver.ts';
import { newPprofServer } from '../manager/pprof.ts';
import { runnable, type Runnable } from '../manager/runnable.ts';
import { installSignalHandlers } from '../manager/signals.ts';
import { globalRegistry } from '../metrics/registry.ts';
import { Sharder } from '../sharding/sharder.ts';
import { labelledLeaseClient, shardLeaseName, shardNameOf } from '../sharding/shard.ts';
import { ControllerBuilder, type ControllerHost, type ReconcileObservation } from './builder.ts';
import { recordPermission } from '../rbac/permission.ts';
import { conversionWebhookUnreachable } from './conversionreach.ts';
import type { TlsSource } from '../manager/httpserver.ts';
import type { AdmissionHandler } from '../webhook/admission.ts';
import { WebhookBuilder } from '../webhook/builder.ts';
import type { Conversion } from '../webhook/conversion.ts';
import { WebhookServer, type WebhookRegistrar, type WebhookServerOptions } from '../webhook/server.ts';
import type { Lister } from '../informerfactory/lister.ts';
import type { ApiClient } from '../client/typed.ts';

/**
 * What a reconciler needs of its manager: the shared caches (`informer(type).lister()`), the client for writes and
 * Event recorders. ControllerManager implements it; so does `ts-controller-manager/testing`'s FakeClient
 * (`fake.host()`: an in-memory API server whose listers are always current and whose recorders store each Event in it
 * at once), so a reconciler built from a ReconcilerHost can be unit-tested without a control plane (docs/testing.md).
 */
export interface ReconcilerHost {
  /**
   * The shared cache of `resource` (one per type and manager): read objects through its lister, never the API.
   * `metadataOnly`: the metadata-only cache of the type (`{ apiVersion, kind, metadata }`), e.g. of a source
   * declared with `owns(type, { metadataOnly: true })`.
   */
  informer<T extends KubeObject>(resource: ResourceType, opts?: { metadataOnly?: boolean }): { lister(): Lister<T> };
  /** The client for writes (and the rare live read). */
  readonly client: ApiClient;
  /** An Event recorder whose Events name `component` as their source (e.g. "guestbook-controller"). */
  recorderFor(component: string): Recorder;
}

/**
 * Leader election of a ControllerManager: the Lease `namespace/id` and client-go's timings (leaseDurationMs must
 * exceed renewDeadlineMs, which must exceed 1.2 × retryPeriodMs; LeaderElector throws otherwise).
 */
export interface LeaderElectionOptions {
  /** Lease name. */
  id: string;
  /** Lease namespace. */
  namespace: string;
  /** How long a Lease holds without renewal before another replica may take it. Defaults as client-go and controller-runtime: 15 s / 10 s / 2 s. */
  leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it gives up leading (10 s). */
  renewDeadlineMs?: number;
  /** The interval between acquire and renew attempts (2 s). */
  retryPeriodMs?: number;
}

/** Options of `new ControllerManager(opts)`; every field is optional and defaults as controller-runtime's manager. */
export interface ControllerManagerOptions {
  /** API credentials. Default: $KUBECONFIG (path list), in-cluster ServiceAccount, ~/.kube/config (in that order). */
  kubeConfig?: KubeConfig;
  /**
   * What every API client of this manager sends on, instead of the shared connection of `kubeConfig` (client-go's
   * rest.Config.Transport): e.g. ts-controller-manager/testing's in-memory API server under `explore`. With it,
   * `kubeConfig` is not needed and not loaded. Default: the shared Transport of the kubeconfig.
   */
  transport?: RequestTransport;
  /**
   * Tuning of every informer's reflector (backoff, watch idle timeout): tests that must not wait 0.8 s for a relist
   * (e.g. `explore`). Default: client-go's values (pkg/informerfactory/reflectorstate.ts).
   */
  reflector?: ReflectorTuning;
  /** Namespaces the informers watch; [] or undefined = all namespaces. */
  namespaces?: readonly string[];
  /** Resync period of every event handler (ms); 0 = never. Default 10 h (controller-runtime's SyncPeriod). */
  syncPeriodMs?: number;
  /** Leader election; undefined = off (controllers start once the caches synced). */
  leaderElection?: LeaderElectionOptions;
  /**
   * Sharding (pkg/sharding): every replica is a shard holding its own shard Lease (leaderElection's timings, in its
   * namespace), the controllers run on every shard over the objects assigned to it, and the replica holding the
   * leader Lease is the sharder that assigns them. Needs `leaderElection`. Default false.
   */
  sharding?: boolean;
  /** Identity in the Lease and the User-Agent. Default `hostname_uuid` (unique per process). */
  identity?: string;
  /** User-Agent of every API request. Default `ts-controller-manager/<version> (<identity>)`. */
  userAgent?: string;
  /** "host:port" or ":port" for /healthz and /readyz; "0" or undefined = no probe server. */
  healthProbeBindAddress?: string;
  /**
   * Metrics server; undefined or bindAddress "0" = none (metrics still go to `registry`). `secure` defaults to true as
   * in kubebuilder v4: HTTPS (certificate from `certDir`, else generated) with TokenReview/SubjectAccessReview checks.
   */
  metrics?: { bindAddress: string; secure?: boolean; certDir?: string };
  /**
   * Profiling endpoint (pkg/manager/pprof.ts; controller-runtime's PprofBindAddress): "host:port" or ":port" serves
   * CPU/heap profiles, heap statistics and heap snapshots under /debug/pprof/. "0", "" or undefined = off (default).
   * A loopback address is plain HTTP without authentication; any other address is HTTPS (certificate from
   * `metrics.certDir`, else generated) and needs a bearer token allowed by TokenReview + SubjectAccessReview for the
   * path (as the secure metrics endpoint).
   */
  pprofBindAddress?: string;
  /**
   * The webhook server (pkg/webhook; docs/webhooks.md), started on every replica — only once a webhook is registered
   * (`mgr.webhook(type)…complete()`). bindAddress default ":9443"; "0" = off (registering a webhook then throws).
   * Certificate: `tls` (any TlsSource), else tls.crt/tls.key in `certDir` (default
   * /tmp/k8s-webhook-server/serving-certs), re-read on change. The other fields are WebhookServerOptions' limits.
   */
  webhook?: WebhookOptions;
  /** One deadline for the whole graceful shutdown (ms). Default 30 s. */
  gracefulShutdownTimeoutMs?: number;
  /** How long the caches may take to sync (ms) before that is fatal; 0 = no limit. Default 2 min. */
  cacheSyncTimeoutMs?: number;
  /** Default of every controller's priority queue (the builder can override per controller). Default true. */
  priorityQueue?: boolean;
  /** Default aging bound of every controller's priority queue (ms; the builder can override). Default 30 s. */
  maxQueueWaitMs?: number;
  /**
   * Informers fill their caches with streaming lists (`sendInitialEvents=true`, ended by the
   * `k8s.io/initial-events-end` bookmark) instead of paged LISTs, falling back to paged LIST for good when the API
   * server refuses them (SharedInformerFactory's `useWatchList`). Default false (bench/watchlist.ts).
   */
  watchList?: boolean;
  /**
   * Default reconcile timeout of every controller (ms; the builder can override): each reconcile's signal aborts with
   * a TimeoutError after this long. 0 or undefined = none (the default, as controller-runtime's ReconciliationTimeout).
   */
  reconcileTimeoutMs?: number;
  /**
   * Called after every reconcile of every controller with its key and outcome (tracing, tests: `explore` records
   * them in its trace). Must not throw or block. Default: none.
   */
  observeReconciles?: (e: ReconcileObservation) => void;
  /** Default: info-level JSON logs on stdout. */
  logger?: Logger;
  /** Default: the process-wide registry (what the metrics server serves). */
  registry?: Registry;
}

/** ControllerManagerOptions.webhook (see there and WebhookServerOptions). */
export interface WebhookOptions extends Omit<WebhookServerOptions, 'registry' | 'logger' | 'clock' | 'bindAddress'> {
  /** "host:port" or ":port"; "0" = no webhook server. Default ":9443". */
  bindAddress?: string;
  tls?: TlsSource;
}

/** The package version: package.json sits two levels above the sources (pkg/runtime) and three above dist/. */
export function packageVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'ts-controller-manager' && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
}

/**
 * The whole runtime composed from options (controller-runtime's `manager.New`): the API clients, one shared informer
 * factory, events, metrics, health checks, leader election (or sharding) and the webhook server. Declare controllers
 * with `controller(name)` and webhooks with `webhook(type)`, then `run()` until SIGTERM/SIGINT; it resolves with the
 * process exit code. Controllers act only while this replica leads: `client` refuses writes once leadership is lost.
 */
export class ControllerManager implements ControllerHost, ReconcilerHost {
  /** Guarded client: controllers' reads and writes. Writes refused once leadership is lost. */
  readonly client: RestClient;
  /** Ungated client: informers, the Lease, access reviews (what every replica does). */
  readonly reader: RestClient;
  /** The one shared informer factory: every controller's caches for a type are the same informer. */
  readonly factory: SharedInformerFactory;
  /** Events: `events.recorderFor(component)` records Kubernetes Events through the guarded client. */
  readonly events: EventBroadcaster;
  /** The metrics registry served on /metrics (options.registry, default the process-wide one). */
  readonly registry: Registry;
  /** The manager's logger (options.logger, default JSON at info level). */
  readonly logger: Logger;
  /** The /healthz and /readyz checks; add your own with `health.addReadyzCheck`/`addHealthzCheck`. */
  readonly health: HealthChecks;
  /** This replica's identity in the Lease and the User-Agent: options.identity, default `<hostname>_<random UUID>`. */
  readonly identity: string;
  /** The Lease the controllers are gated on: the leader Lease, or with sharding this replica's shard Lease. */
  readonly elector: LeaderElector | undefined;
  /** With sharding: this replica's shard name (the shard label value of its objects); else undefined. */
  readonly shardName: string | undefined;
  /** With sharding: the sharder (active while this replica holds the leader Lease); else undefined. */
  readonly sharder: Sharder | undefined;
  readonly opts: Readonly<ControllerManagerOptions>;

  private readonly manager: Manager;
  private readonly syncedChecks: (() => boolean)[] = [];
  private readonly controllerNames = new Set<string>();
  private readonly declared: Controller<unknown>[] = [];
  /** Created on the first webhook registration; undefined before and when `webhook.bindAddress` is "0". */
  private webhooks: WebhookServer | undefined;
  /** What builders register on: the webhook server, created, added and given its /readyz check on first use. */
  private readonly webhookRegistrar: WebhookRegistrar = {
    register: (path: string, handler: AdmissionHandler): void => this.ensureWebhookServer().register(path, handler),
    registerConversion: (group: string, kind: string, conversion: Conversion): void =>
      this.ensureWebhookServer().registerConversion(group, kind, conversion),
  };

  /**
   * Builds everything from `opts` and starts nothing (`run()` or `start(signal)` does). Credentials: `opts.kubeConfig`,
   * else $KUBECONFIG, in-cluster, ~/.kube/config — throws `no Kubernetes credentials: …` when none exists.
   */
  constructor(opts: ControllerManagerOptions = {}) {
    this.opts = opts;
    const log = (this.logger = opts.logger ?? newLogger({ level: 'info' }));
    const registry = (this.registry = opts.registry ?? globalRegistry);
    const transport = opts.transport;
    const kubeConfig = transport ? opts.kubeConfig : (opts.kubeConfig ?? loadKubeConfig(undefined, process.env).kubeConfig);
    const conn = { ...(kubeConfig ? { kubeConfig } : {}), ...(transport ? { transport } : {}) };
    this.identity = opts.identity ?? defaultIdentity();
    // The identity is in every request's User-Agent too, so the audit log attributes each write to its Lease holder.
    const userAgent = opts.userAgent ?? `ts-controller-manager/${packageVersion()} (${this.identity})`;
    const gracefulShutdownTimeoutMs = opts.gracefulShutdownTimeoutMs ?? 30_000;

    this.reader = new RestClient({ ...conn, registry, userAgent, log });
    this.factory = new SharedInformerFactory({
      client: this.reader, namespaces: opts.namespaces ?? [], defaultResyncPeriodMs: opts.syncPeriodMs ?? 10 * 3600_000, logger: log, registry,
      useWatchList: opts.watchList ?? false, ...(opts.reflector ? { reflector: opts.reflector } : {}),
    });
    this.health = new HealthChecks({ logger: log });

    const le = opts.leaderElection;
    const timing = {
      leaseDurationMs: le?.leaseDurationMs ?? 15_000, renewDeadlineMs: le?.renewDeadlineMs ?? 10_000, retryPeriodMs: le?.retryPeriodMs ?? 2_000,
    };
    const leaderElector = le
      ? new LeaderElector({ lock: new RestLeaseClient(this.reader, le.namespace, le.id), name: le.id, identity: this.identity, ...timing, logger: log, registry })
      : undefined;
    if (opts.sharding && !(le && leaderElector)) throw new Error('sharding needs leaderElection (the sharder is elected with the leader Lease)');
    let elector = leaderElector;
    if (opts.sharding && le && leaderElector) {
      // Controllers are gated on this replica's own shard Lease; the leader Lease elects the sharder (pkg/sharding).
      const shard = (this.shardName = shardNameOf(this.identity));
      const leaseName = shardLeaseName(le.id, shard);
      elector = new LeaderElector({
        lock: labelledLeaseClient(new RestLeaseClient(this.reader, le.namespace, leaseName), le.id), name: leaseName, identity: shard,
        ...timing, logger: log, registry,
      });
      this.sharder = new Sharder({
        elector: leaderElector, group: le.id, leaseNamespace: le.namespace, reader: this.reader,
        writer: new RestClient({ ...conn, registry, userAgent, log, writeGate: leaderElector.leadership }),
        namespaces: opts.namespaces ?? [], logger: log, registry,
      });
    }
    this.elector = elector;
    if (elector) this.health.addHealthzCheck('leaderElection', () => elector.watchdog());
    this.client = elector ? new RestClient({ ...conn, registry, userAgent, log, writeGate: elector.leadership }) : this.reader;
    this.events = new EventBroadcaster({
      sink: new RestEventSink(this.client), logger: log, ...(elector ? { stopSignal: elector.leadership } : {}),
    });

    // One line per unsynced cache with the reason (the reflector's last error): "… 403 Forbidden …", "… CRD installed?".
    const unsynced = (): string[] => this.factory.unsyncedCaches();
    this.manager = new Manager({
      ...(elector ? { leaderElection: elector } : {}),
      gracefulShutdownTimeoutMs,
      ...(opts.cacheSyncTimeoutMs !== undefined ? { cacheSyncTimeoutMs: opts.cacheSyncTimeoutMs } : {}),
      unsyncedCaches: unsynced,
      // Events queued by the controllers are written before the lease is released, best effort: abandoned at the
      // flush deadline (pkg/manager/manager.ts step 3b) without waiting for writes in flight, so they never hold it.
      afterGatedStopped: (signal) => this.events.shutdown(signal),
      logger: log,
      // Informers first, then every handler registration (synced once its informer's initial list reached it).
      // Polled every 10 ms (client-go polls every 100 ms): the checks are a few function calls, and a restart's
      // controllers start up to ~100 ms sooner.
      waitForCacheSync: async (signal) =>
        (await this.factory.waitForCacheSync({ signal, pollIntervalMs: 10 })) && waitForCacheSync(this.syncedChecks, { signal, pollIntervalMs: 10 }),
    });
    this.manager.add(runnable('informers', false, (signal) => this.factory.run(signal)));
    // A cache whose list fails because NOBODY ANSWERS at a conversion webhook THIS process serves (connection refused,
    // no endpoints, a dial timeout: conversionreach.ts) does not hold readiness: the process is an endpoint of its
    // webhook Service only once Ready, so waiting would deadlock (no other replica serving the conversion: a first
    // start, scaling from 0, turning the webhooks on while objects are stored in another version — docs/helm.md).
    // Ready, it gets the calls, and the list's retry succeeds; the controllers still start only once every cache
    // synced (waitForCacheSync above). A conversion that answered (Failure), or whose certificate the API server
    // refused (x509), holds it: Ready would not help, that cache would never sync (test/webhook-selfconversion.test.ts).
    // Every namespace's failure must be one (syncError joins them as `ns=<ns>: …; ns=<ns>: …`).
    const selfConversionFailure = (i: SharedIndexInformer<KubeObject>): boolean => {
      if (this.webhooks?.servesConversion(i.resource.group, i.resource.kind) !== true) return false;
      const why = i.syncError();
      return why !== undefined && why.split(/; (?=ns=)/).every(conversionWebhookUnreachable);
    };
    this.health.addReadyzCheck('informers', () => {
      const notSynced = this.factory.unsyncedCaches(selfConversionFailure);
      if (notSynced.length > 0) throw new Error(`caches not synced: ${notSynced.join('; ')}`);
    });

    const probes = newHealthProbeServer(opts.healthProbeBindAddress ?? '0', this.health, { logger: log });
    if (probes) this.manager.add(probes);
    const m = opts.metrics;
    const secure = m?.secure ?? true;
    const metrics = m && newMetricsServer({
      bindAddress: m.bindAddress, registry, secure, logger: log,
      ...(m.certDir ? { certDir: m.certDir } : {}),
      ...(secure ? { reviewer: new KubeAccessReviewer(this.reader) } : {}),
    });
    if (metrics) this.manager.add(metrics);
    const pprof = newPprofServer({
      bindAddress: opts.pprofBindAddress ?? '0', logger: log, reviewer: new KubeAccessReviewer(this.reader),
      ...(m?.certDir ? { certDir: m.certDir } : {}),
      debugRoutes: {
        '/debug/informers': {
          description: 'what each informer cache holds: objects, resourceVersion, digest, lists and watches (JSON; ?keys=1: every key with its resourceVersion)',
          handler: (q) => describeInformers(this.factory.informers(), { keys: q.get('keys') === '1' || q.get('keys') === 'true' }),
        },
      },
    });
    if (pprof) this.manager.add(pprof);
    if (this.sharder) this.manager.add(this.sharder);
    const shardElector = this.shardName !== undefined ? elector : undefined;
    if (shardElector) {
      // /readyz per shard: a replica is ready once it holds its shard Lease (and its caches synced, above).
      this.health.addReadyzCheck('shard', () => {
        if (!shardElector.isLeader()) throw new Error(`shard ${this.shardName} does not hold its shard Lease`);
      });
    }
  }

  /** The shared informer of `resource` (one per type for the whole manager). */
  informer<T extends KubeObject>(resource: ResourceType, opts?: InformerForOptions<T>): SharedIndexInformer<T> {
    return this.factory.informerFor<T>(resource, opts);
  }

  /**
   * An Event recorder whose Events name `component` as their source (e.g. "foo-controller"). Records that this
   * manager writes Events (create; patch for a repeat) for `gen rbac` (pkg/rbac/permission.ts).
   */
  recorderFor(component: string): Recorder {
    recordPermission(this, { who: component, why: 'Events (a repeat is patched)', scope: 'manager', group: '', resource: 'events', resourceNames: [], verbs: ['create', 'patch'] });
    return this.events.recorderFor(component);
  }

  /**
   * The controllers completed on this manager (builder.ts), in declaration order: their queues and in-flight counts
   * tell whether the manager is at rest (`explore` waits for that). Read-only use.
   */
  controllers(): readonly Controller<unknown>[] {
    return this.declared;
  }

  /** Called by the builder for each controller it completes (see `controllers()`). */
  registerController(c: Controller<unknown>): void {
    this.declared.push(c);
  }

  /** Starts declaring a controller (builder.ts). `name` labels its metrics and logs and must be unique. */
  controller(name: string): ControllerBuilder {
    if (this.controllerNames.has(name)) throw new Error(`controller ${JSON.stringify(name)} already declared`);
    this.controllerNames.add(name);
    return new ControllerBuilder(this, name);
  }

  /**
   * Starts declaring the webhooks of `resource` (pkg/webhook/builder.ts): `.withDefaulter`, `.withValidator`,
   * `.withConversion`, then `.complete()`, which registers them on the webhook server and starts it (on every replica;
   * with a /readyz check "webhook-server"). Throws when the webhook server is off (`webhook.bindAddress` "0").
   */
  webhook<T extends KubeObject>(resource: Pick<ResourceType, 'group' | 'version' | 'kind'>): WebhookBuilder<T> {
    if (!this.webhooksEnabled()) throw new Error('the webhook server is off (webhook bindAddress "0"): cannot declare webhooks');
    return new WebhookBuilder<T>(this.webhookRegistrar, resource);
  }

  /** False when `webhook.bindAddress` is "0" (then `webhook()` throws). */
  webhooksEnabled(): boolean {
    return (this.opts.webhook?.bindAddress ?? ':9443') !== '0';
  }

  /** The webhook server once a webhook was registered (its `listening` gives the bound port); else undefined. */
  get webhookServer(): WebhookServer | undefined {
    return this.webhooks;
  }

  private ensureWebhookServer(): WebhookServer {
    if (this.webhooks) return this.webhooks;
    if (!this.webhooksEnabled()) throw new Error('the webhook server is off (webhook bindAddress "0")');
    const server = new WebhookServer({ ...this.opts.webhook, registry: this.registry, logger: this.logger });
    this.manager.add(server);
    this.health.addReadyzCheck('webhook-server', () => server.ready());
    this.webhooks = server;
    return server;
  }

  /**
   * Adds a runnable (leader-gated when `r.needLeaderElection`). `hasSynced` functions (handler registrations) gate
   * the start of the leader-gated runnables together with the informers' own sync.
   */
  add(r: Runnable, hasSynced: readonly (() => boolean)[] = []): void {
    this.manager.add(r);
    this.syncedChecks.push(...hasSynced);
  }

  /** Runs until `signal` aborts or a failure; resolves with the exit code (see the file comment). Never rejects. */
  async start(signal: AbortSignal): Promise<number> {
    const code = await this.manager.start(signal);
    // Whatever is still queued is not written: either it was flushed before the release (afterGatedStopped), or the
    // lease was lost / the deadline passed. Never wait here: on a loss the process must exit now.
    this.events.abandon(new Error('manager stopped'));
    const failure = this.manager.failure();
    if (failure) this.logger.error({ err: failure }, `manager failed: ${failure.message}`);
    return code;
  }

  /** `start` until SIGTERM/SIGINT (a second signal exits at once). Resolves with the exit code. */
  async run(): Promise<number> {
    const signals = installSignalHandlers(process, this.logger);
    try {
      return await this.start(signals.signal);
    } finally {
      signals.dispose();
    }
  }

  /** Why the last `start` failed (lost lease, cache-sync timeout, failed runnable), if it did. */
  failure(): Error | undefined {
    return this.manager.failure();
  }

  /** True once the controllers run (leading and caches synced). */
  controllersStarted(): boolean {
    return this.manager.controllersStarted();
  }
}
