/**
 * Command-line flags and environment of the manager (controller-runtime / kubebuilder flag names).
 *
 * `parseOptions` is pure apart from one optional read of the in-cluster namespace file (path injectable): it never
 * logs, never exits, and reports the first problem as a `UsageError` whose message is one line naming the flag and
 * what was expected. main.ts prints `error: <message>` plus a hint to `--help` and exits 2.
 *
 * Syntax (pflag-like): `--flag=value` or `--flag value`; booleans are `--flag`, `--flag=true`, `--flag=false`
 * (a boolean never consumes the next argument). Positional arguments are rejected. A repeated flag: the last wins.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { LevelWithSilent } from 'pino';
import { knownControllers, type ControllerName } from '../../pkg/controllers/names.ts';
import { parseBindAddress } from '../../pkg/manager/httpserver.ts';
import {
  defaultMaxConnections, defaultMaxInFlightBytes, defaultMaxRequestBytes, defaultMaxRequestsInFlight,
  defaultRequestTimeoutMs, type WebhookServerOptions,
} from '../../pkg/webhook/server.ts';
import { convertPath } from '../../pkg/webhook/paths.ts';

export { parseBindAddress, type BindAddress } from '../../pkg/manager/httpserver.ts';

/** A malformed invocation: the message is one line meant for the user. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export { knownControllers, type ControllerName };

export const logLevelChoices = ['trace', 'debug', 'info', 'warn', 'error'] as const satisfies readonly LevelWithSilent[];
export type LogLevel = (typeof logLevelChoices)[number];

/** Upper bound for `--<controller>-concurrency`, to catch typos such as `--foo-concurrency=1000000`. */
export const maxConcurrency = 1000;
/** Upper bound for the webhook server's counts (`--webhook-max-requests-inflight`, `--webhook-max-connections`). */
export const maxCount = 100_000;

const byteUnits: Record<string, number> = { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** Parses a byte size flag: an integer with an optional Ki, Mi or Gi suffix ("7Mi", "4096"). Throws a UsageError. */
export function parseBytes(name: string, v: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(v);
  if (!m) throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: want a number of bytes, optionally with Ki, Mi or Gi (e.g. 7Mi)`);
  const n = Number(m[1]) * (byteUnits[m[2] ?? ''] ?? 1);
  if (n < 1) throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: want at least 1 byte`);
  if (!Number.isSafeInteger(n)) throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: too large`);
  return n;
}

/** Formats bytes with the largest Ki/Mi/Gi unit that divides them ("7Mi", "4096"). */
export function formatBytes(n: number): string {
  for (const unit of ['Gi', 'Mi', 'Ki']) {
    const size = byteUnits[unit] ?? 1;
    if (n % size === 0) return `${n / size}${unit}`;
  }
  return String(n);
}

export const defaultLeaderElectionId = 'ts-controller-manager.samplecontroller.k8s.io';
export const defaultInClusterNamespaceFile = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export interface Options {
  /** `-h`/`--help` was given: print `helpText()` and exit 0; nothing else was validated. */
  help: boolean;
  /**
   * `--kubeconfig` (one file), else undefined: then pkg/manager/kubeconfig.ts reads `$KUBECONFIG` (a path list merged
   * as kubectl does), else in-cluster, else ~/.kube/config. $KUBECONFIG is NOT copied here: a list is not one path.
   */
  kubeconfig: string | undefined;
  /** "host:port", ":port" or "0" (disabled). */
  metricsBindAddress: string;
  metricsSecure: boolean;
  /** Directory with tls.crt/tls.key for the secure metrics server; undefined = generate a self-signed pair. */
  metricsCertDir: string | undefined;
  /** "host:port", ":port" or "0" (disabled; "" is normalised to "0"). */
  pprofBindAddress: string;
  /** "host:port", ":port" or "0" (disabled). */
  healthProbeBindAddress: string;
  /**
   * `--webhook-bind-address`: where the webhook server listens once a webhook is registered ("host:port", ":port");
   * "0" = no webhook server. Default ":9443" (kubebuilder).
   */
  webhookBindAddress: string;
  /** `--webhook-cert-path`: directory with the webhook server's tls.crt/tls.key (mode "dir"); else undefined. */
  webhookCertPath: string | undefined;
  /**
   * Where the webhook server's certificate comes from, and so whether the binary serves its webhooks at all:
   * "none" (default: no webhook registered, no port opened), "dir" (`--webhook-cert-path`: files, e.g. cert-manager's
   * Secret mounted) or "self-managed" (`--webhook-cert-mode=self-managed`: pkg/webhook/certs, `webhookSelfManaged`).
   */
  webhookCertMode: WebhookCertMode;
  /** The self-managed mode's settings; set iff webhookCertMode is "self-managed". */
  webhookSelfManaged: WebhookSelfManagedOptions | undefined;
  /**
   * `--webhook-shutdown-delay`: on shutdown, how long the webhook server keeps answering (each answer closing its
   * connection, /readyz failing) before it closes its port — for API servers still routed to this replica. Less than
   * the graceful shutdown timeout (twice it: the drain's cap). Default 5 s, or a quarter of the graceful shutdown timeout when that is less.
   */
  webhookShutdownDelayMs: number;
  /**
   * `--webhook-http2`: the webhook server offers HTTP/2 as well as HTTP/1.1 (ALPN). Default false: kube-apiserver
   * speaks HTTP/1.1 to every webhook reached through a Service or a non-loopback url whatever the server offers
   * (k8s.io/apiserver pkg/util/webhook, issue 75791), so only a webhook called by url on loopback gains
   * (docs/webhooks.md#http2).
   */
  webhookHttp2: boolean;
  /** `--webhook-max-request-body-bytes`: body limit of the admission webhooks (every path but /convert). */
  webhookMaxRequestBodyBytes: number;
  /** `--webhook-conversion-max-request-body-bytes`: body limit of /convert (one object per review from kube-apiserver 1.36). */
  webhookConversionMaxRequestBodyBytes: number;
  /** `--webhook-max-inflight-body-bytes`: request body bytes the webhook server holds at once; at least both limits above. */
  webhookMaxInflightBodyBytes: number;
  /** `--webhook-max-requests-inflight`: webhook requests read or handled at once (one more: 429 + Retry-After). */
  webhookMaxRequestsInflight: number;
  /** `--webhook-max-connections`: TCP connections open at once on the webhook port (one more: closed at accept). */
  webhookMaxConnections: number;
  /** `--webhook-request-timeout`: a webhook request's body must be complete within this of its headers (else 408). */
  webhookRequestTimeoutMs: number;
  leaderElect: boolean;
  leaderElectionId: string;
  /**
   * Namespace of the Lease: `--leader-election-namespace`, else `$POD_NAMESPACE`, else the in-cluster namespace
   * file. Always set when `leaderElect` is true; otherwise set only from the flag or env.
   */
  leaderElectionNamespace: string | undefined;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  gracefulShutdownTimeoutMs: number;
  /** `--cache-sync-timeout`: how long a new leader waits for its caches before exiting (controller-runtime's CacheSyncTimeout). */
  cacheSyncTimeoutMs: number;
  /** `--sync-period`: resync period of the controllers' event handlers. */
  syncPeriodMs: number;
  /** Enabled controllers, in `knownControllers` order; never empty. */
  controllers: ControllerName[];
  /** Workers per controller (1..maxConcurrency). */
  concurrency: Record<ControllerName, number>;
  /** `--sharding`: every replica is a shard; the leader assigns objects (needs leaderElect). */
  sharding: boolean;
  /** `--priority-queue`: every controller's work queue orders keys by priority (false = plain FIFO). */
  priorityQueue: boolean;
  /** `--max-queue-wait`: aging bound of the priority queue (a key waiting this long goes first). */
  maxQueueWaitMs: number;
  /** `--watch-list`: informers fill their caches with streaming lists (falling back to paged LIST when refused). */
  watchList: boolean;
  /** `--reconcile-timeout`: every controller's reconcile timeout; 0 = none (the default). */
  reconcileTimeoutMs: number;
  logLevel: LogLevel;
  /** `--neutron-cloud-config`, else `$NEUTRON_CLOUD_CONFIG`. */
  neutronCloudConfig: string | undefined;
  /** `--neutron-cloud`, else `$OS_CLOUD`. */
  neutronCloud: string | undefined;
  /** `$WATCH_NAMESPACE` split on commas: [] = all namespaces. Trimmed, deduplicated, DNS-1123 labels. */
  watchNamespaces: string[];
  /** `$POD_NAMESPACE` (Downward API), if set. */
  podNamespace: string | undefined;
}

export const webhookCertModes = ['none', 'dir', 'self-managed'] as const;
export type WebhookCertMode = (typeof webhookCertModes)[number];

/** `--webhook-cert-mode=self-managed`: names of what SelfManagedCertificates keeps and injects into. */
export interface WebhookSelfManagedOptions {
  /** `--webhook-cert-secret`: the Secret holding CA and serving pair, in `namespace`. */
  secretName: string;
  /** `$POD_NAMESPACE`, else the in-cluster namespace file. */
  namespace: string;
  /** `--webhook-service-name`: the Service the certificate names (`<svc>.<ns>.svc`, `…svc.cluster.local`). */
  serviceName: string;
  /** `--webhook-cert-ips`: IP SANs of the serving certificate (e.g. 127.0.0.1 for a clientConfig.url on loopback). */
  ips: string[];
  /** `--webhook-validating-configurations`: ValidatingWebhookConfigurations that get the CA bundle. */
  validatingWebhookConfigurations: string[];
  /** `--webhook-mutating-configurations`: MutatingWebhookConfigurations that get the CA bundle. */
  mutatingWebhookConfigurations: string[];
  /** `--webhook-conversion-crds`: CRDs whose conversion webhook gets the CA bundle. */
  crds: string[];
  /**
   * `--webhook-cert-validity`: the serving certificate's lifetime (renewed when a third remains). This and the four
   * below are the rotation timing (pkg/webhook/certs/rotation.ts; defaults = defaultRotationOptions, poll 10 s),
   * checked here as SelfManagedCertificates checks them: caValidityMs >= 3 × servingValidityMs, propagationMs +
   * reloadGraceMs < servingValidityMs / 3, reloadGraceMs >= 2 × pollIntervalMs.
   */
  servingValidityMs: number;
  /** `--webhook-cert-ca-validity`: the CA's lifetime (a successor is added when a third remains). */
  caValidityMs: number;
  /** `--webhook-cert-propagation-delay`: how long API servers may still use a previous caBundle. */
  propagationMs: number;
  /** `--webhook-cert-reload-grace`: how long a replica may still serve a superseded serving pair. */
  reloadGraceMs: number;
  /** `--webhook-cert-poll-interval`: how often each replica reads the Secret and checks the injection targets. */
  pollIntervalMs: number;
}

/** The self-managed mode's rotation timing flags, in WebhookSelfManagedOptions' order (serving, CA, propagation, grace, poll). */
const webhookCertTimingFlags = ['webhook-cert-validity', 'webhook-cert-ca-validity', 'webhook-cert-propagation-delay', 'webhook-cert-reload-grace', 'webhook-cert-poll-interval'];

/** The names config/default renders (namePrefix ts-controller-manager-). */
export const defaultWebhookCertSecret = 'ts-controller-manager-webhook-server-cert';
export const defaultWebhookServiceName = 'ts-controller-manager-webhook-service';
export const defaultValidatingWebhookConfigurations = 'ts-controller-manager-validating-webhook-configuration';
export const defaultConversionCrds = 'networks.samplecrd.k8s.io';

export interface ParseDeps {
  /** Path of the ServiceAccount namespace file read as the last fallback for the leader-election namespace. */
  inClusterNamespaceFile?: string;
}

type FlagKind = 'string' | 'bool' | 'duration' | 'address' | 'int' | 'bytes' | 'level' | 'controllers';

interface FlagSpec {
  name: string;
  kind: FlagKind;
  /** Default as shown in --help (and parsed like user input). */
  def?: string;
  help: string;
}

const flagSpecs: readonly FlagSpec[] = [
  { name: 'kubeconfig', kind: 'string', help: 'Path to a kubeconfig. Default: $KUBECONFIG, else in-cluster config, else ~/.kube/config.' },
  { name: 'metrics-bind-address', kind: 'address', def: '0', help: 'Address the /metrics endpoint binds to ("host:port", ":port", e.g. ":8443"); "0" (the default) disables it.' },
  { name: 'metrics-secure', kind: 'bool', def: 'true', help: 'Serve /metrics over HTTPS and require a bearer token allowed (TokenReview + SubjectAccessReview) to GET /metrics; false serves plain HTTP to anyone.' },
  { name: 'metrics-cert-dir', kind: 'string', help: 'Directory holding tls.crt and tls.key for --metrics-secure, re-read when they change. Default: a generated self-signed certificate, renewed before it expires.' },
  { name: 'pprof-bind-address', kind: 'address', def: '0', help: 'Address the profiling endpoints (/debug/pprof/: CPU and heap profiles, heap statistics, heap snapshots; /debug/informers: what each informer cache holds) bind to; "0" (the default) or "" disables them. A loopback address ("127.0.0.1:6060") needs no authentication; any other is HTTPS and needs a bearer token allowed to get the path (TokenReview + SubjectAccessReview).' },
  { name: 'health-probe-bind-address', kind: 'address', def: ':8081', help: 'Address the /healthz and /readyz endpoints bind to; "0" disables them.' },
  { name: 'webhook-bind-address', kind: 'address', def: ':9443', help: 'Address the admission and conversion webhook server (HTTPS) binds to once a webhook is registered; "0" disables webhooks.' },
  { name: 'webhook-cert-path', kind: 'string', help: 'Directory holding tls.crt and tls.key of the webhook server (e.g. cert-manager\'s Secret mounted at /tmp/k8s-webhook-server/serving-certs), re-read when they change. Turns the Network webhooks on (--webhook-cert-mode=dir).' },
  { name: 'webhook-cert-mode', kind: 'string', help: 'Certificate source of the webhook server: "none" (the default without --webhook-cert-path: no webhooks served, no port opened), "dir" (--webhook-cert-path) or "self-managed" (the manager keeps a CA and serving certificate in --webhook-cert-secret and injects the CA into the webhook configurations and CRDs named below).' },
  { name: 'webhook-cert-secret', kind: 'string', def: defaultWebhookCertSecret, help: 'Self-managed mode: the Secret (in $POD_NAMESPACE) holding the CA and the serving certificate.' },
  { name: 'webhook-service-name', kind: 'string', def: defaultWebhookServiceName, help: 'Self-managed mode: the webhook Service (in $POD_NAMESPACE) whose DNS names the serving certificate carries.' },
  { name: 'webhook-cert-ips', kind: 'string', def: '', help: 'Self-managed mode: comma-separated IP addresses the serving certificate also carries (e.g. 127.0.0.1 for a webhook called by url on loopback).' },
  { name: 'webhook-validating-configurations', kind: 'string', def: defaultValidatingWebhookConfigurations, help: 'Self-managed mode: comma-separated ValidatingWebhookConfigurations whose webhooks get the CA bundle ("" = none).' },
  { name: 'webhook-mutating-configurations', kind: 'string', def: '', help: 'Self-managed mode: comma-separated MutatingWebhookConfigurations whose webhooks get the CA bundle ("" = none).' },
  { name: 'webhook-conversion-crds', kind: 'string', def: defaultConversionCrds, help: 'Self-managed mode: comma-separated CRDs whose conversion webhook gets the CA bundle ("" = none).' },
  { name: 'webhook-cert-validity', kind: 'duration', def: '2160h', help: 'Self-managed mode: lifetime of the serving certificate (90 days); a new one is issued when a third of it remains. A certificate already in the Secret keeps the lifetime it was issued with.' },
  { name: 'webhook-cert-ca-validity', kind: 'duration', def: '8760h', help: 'Self-managed mode: lifetime of the CA (365 days); a successor is added to the bundle when a third remains. At least 3 × --webhook-cert-validity.' },
  { name: 'webhook-cert-propagation-delay', kind: 'duration', def: '2m', help: 'Self-managed mode: how long after a caBundle change API servers may still call with the previous bundle; the serving certificate switches to a new CA only this long after every target carries it.' },
  { name: 'webhook-cert-reload-grace', kind: 'duration', def: '2m', help: 'Self-managed mode: how long a replica may still serve a superseded serving certificate; an old CA leaves the bundle only this long after the switch. At least 2 × --webhook-cert-poll-interval; with the propagation delay, less than a third of --webhook-cert-validity.' },
  { name: 'webhook-shutdown-delay', kind: 'duration', help: 'On shutdown, how long the webhook server keeps answering (each answer closing its connection, /readyz failing) before it closes its port, so API servers whose route to this replica lags its deletion are answered, not refused; 0 = close at once. Twice it must be less than --graceful-shutdown-timeout (unset: 5s or a quarter of it, whichever is less).' },
  { name: 'webhook-http2', kind: 'bool', def: 'false', help: 'Also offer HTTP/2 (ALPN h2) on the webhook port: calls multiplexed on one connection, GOAWAY on shutdown and certificate change. kube-apiserver uses it only for webhooks it calls by url on loopback (127.0.0.1, localhost, e.g. make run); through a Service it speaks HTTP/1.1 whatever is offered.' },
  { name: 'webhook-cert-poll-interval', kind: 'duration', def: '10s', help: 'Self-managed mode: how often each replica reads the Secret (and reloads a new serving certificate) and re-checks the injected caBundles.' },
  { name: 'webhook-max-request-body-bytes', kind: 'bytes', def: formatBytes(defaultMaxRequestBytes), help: 'Largest request body of an admission webhook (every path but /convert), in bytes (Ki, Mi, Gi suffixes); larger is answered 413 before it is read. The default is the largest AdmissionReview kube-apiserver sends for a storable object with its default limits (two objects of 3 MiB + 1 MiB).' },
  { name: 'webhook-conversion-max-request-body-bytes', kind: 'bytes', def: formatBytes(defaultMaxRequestBytes), help: 'Largest request body of the conversion webhook (/convert). kube-apiserver 1.36 sends one object per ConversionReview, LISTs included; raise it for an API server that sends a list\'s items in one review.' },
  { name: 'webhook-max-inflight-body-bytes', kind: 'bytes', def: formatBytes(defaultMaxInFlightBytes), help: 'Request body bytes the webhook server holds at once, counted as they arrive; a body that would pass it is answered 429 with Retry-After. At least both body limits above.' },
  { name: 'webhook-max-requests-inflight', kind: 'int', def: String(defaultMaxRequestsInFlight), help: `Webhook requests being read or handled at once (1..${maxCount}); one more is answered 429 with Retry-After: 1 (kube-apiserver retries it).` },
  { name: 'webhook-max-connections', kind: 'int', def: String(defaultMaxConnections), help: `TCP connections open at once on the webhook port (1..${maxCount}); one more is closed as it is accepted.` },
  { name: 'webhook-request-timeout', kind: 'duration', def: formatDuration(defaultRequestTimeoutMs), help: 'A webhook request\'s body must be complete within this of its headers, else it is answered 408 and its connection closed.' },
  { name: 'leader-elect', kind: 'bool', def: 'false', help: 'Enable leader election: only the holder of the Lease runs controllers.' },
  { name: 'leader-election-id', kind: 'string', def: defaultLeaderElectionId, help: 'Name of the Lease used for leader election.' },
  { name: 'leader-election-namespace', kind: 'string', help: 'Namespace of the Lease. Default: $POD_NAMESPACE, else the in-cluster ServiceAccount namespace.' },
  { name: 'leader-elect-lease-duration', kind: 'duration', def: '15s', help: 'How long non-leaders wait after last observing a renewal before taking over. Must be greater than renew deadline + retry period.' },
  { name: 'leader-elect-renew-deadline', kind: 'duration', def: '10s', help: 'How long after the start of its last successful renewal the leader stops acting (no further writes) and exits. Must be greater than 1.2 × retry period.' },
  { name: 'leader-elect-retry-period', kind: 'duration', def: '2s', help: 'Interval between attempts to acquire or renew the Lease.' },
  { name: 'graceful-shutdown-timeout', kind: 'duration', def: '30s', help: 'How long to wait on SIGTERM/SIGINT for in-flight reconciles and runnables to stop (their abort signals fire when shutdown starts).' },
  { name: 'cache-sync-timeout', kind: 'duration', def: '2m', help: 'How long a new leader waits for its informer caches to sync; past it the manager exits 1 naming the caches.' },
  { name: 'sync-period', kind: 'duration', def: '10h', help: 'Resync period: how often every cached object is re-delivered to the controllers (level-triggered safety net). 0 disables resync; otherwise at least 1s.' },
  { name: 'controllers', kind: 'controllers', def: '*', help: `Controllers to run: "*" = all, "name" enables one, "-name" disables one (e.g. "*,-network"). Known: ${knownControllers.join(', ')}.` },
  ...knownControllers.map((c): FlagSpec => ({ name: `${c}-concurrency`, kind: 'int', def: '1', help: `Number of concurrent reconciles (workers) of the ${c} controller (1..${maxConcurrency}).` })),
  { name: 'sharding', kind: 'bool', def: 'false', help: 'Shard the controllers across all replicas (active-active; needs --leader-elect): each replica holds its own shard Lease and reconciles the objects the elected sharder assigned to it by label.' },
  { name: 'priority-queue', kind: 'bool', def: 'true', help: 'Priority work queues: objects of the initial list and of resyncs are queued at low priority, real changes go first. false = plain FIFO queues.' },
  { name: 'max-queue-wait', kind: 'duration', def: '30s', help: 'Aging bound of the priority queue: a key that has waited this long goes before younger keys whatever their priority (no starvation).' },
  { name: 'watch-list', kind: 'bool', def: 'false', help: 'Fill informer caches with streaming lists (a WATCH with sendInitialEvents=true, ended by the k8s.io/initial-events-end bookmark) instead of paged LISTs; falls back to paged LIST for good when the API server refuses them.' },
  { name: 'reconcile-timeout', kind: 'duration', def: '0', help: 'Abort a reconcile\'s signal after this long (it fails with a TimeoutError and is retried with backoff; counted in controller_runtime_reconcile_timeouts_total). 0 = no timeout.' },
  { name: 'log-level', kind: 'level', def: 'info', help: `Log level: ${logLevelChoices.join('|')}.` },
  { name: 'neutron-cloud-config', kind: 'string', help: 'Path to a clouds.yaml for the network controller. Default: $NEUTRON_CLOUD_CONFIG.' },
  { name: 'neutron-cloud', kind: 'string', help: 'Cloud name inside clouds.yaml. Default: $OS_CLOUD.' },
];

const specByName = new Map(flagSpecs.map((s) => [s.name, s]));

/** The --help text: usage, every flag with its default, and the environment variables read. */
export function helpText(): string {
  const lines = ['Usage: ts-controller-manager [flags]', '       ts-controller-manager gen types --help   (TypeScript types from CRDs)',
    '       ts-controller-manager dev --help         (a local control plane with your CRDs)',
    '       ts-controller-manager envtest --help     (its binaries: which are installed, how to get one)',
    '       ts-controller-manager init --help        (a new controller project; then create api --help)', '', 'Flags:'];
  const label = (s: FlagSpec): string => (s.kind === 'bool' ? `--${s.name}` : `--${s.name}=${placeholder(s.kind)}`);
  const width = Math.max(...flagSpecs.map((s) => label(s).length), '-h, --help'.length) + 2;
  for (const s of flagSpecs) {
    const def = s.def !== undefined ? ` (default ${JSON.stringify(s.def)})` : '';
    lines.push(`  ${label(s).padEnd(width)}${s.help}${def}`);
  }
  lines.push(`  ${'-h, --help'.padEnd(width)}Print this help and exit.`);
  lines.push(
    '',
    'Environment:',
    '  WATCH_NAMESPACE   Namespaces to watch: empty = all, one name, or a comma-separated list.',
    '  KUBECONFIG        Kubeconfig path(s) when --kubeconfig is not given.',
    '  POD_NAMESPACE     Namespace of this pod; default namespace of the leader-election Lease and of the self-managed webhook Secret.',
    '  NEUTRON_CLOUD_CONFIG, OS_CLOUD   Defaults of --neutron-cloud-config and --neutron-cloud.',
    '',
    `Durations are Go-style: "500ms", "15s", "1m30s", "1h"; at most ${maxDurationText} (Go's time.Duration range).`,
    '',
    'Leader election timing: lease duration > renew deadline + retry period, and renew deadline > 1.2 × retry period.',
    'A standby takes over one lease duration after it last saw the Lease change; the leader stops acting at its last',
    'renewal\'s start + renew deadline, and the retry period of margin covers a renewal that answered late.',
  );
  return lines.join('\n') + '\n';
}

function placeholder(kind: FlagKind): string {
  switch (kind) {
    case 'duration':
      return 'DURATION';
    case 'address':
      return 'ADDR';
    case 'int':
      return 'N';
    case 'bytes':
      return 'BYTES';
    case 'level':
      return 'LEVEL';
    case 'controllers':
      return 'LIST';
    default:
      return 'STRING';
  }
}

/** The largest duration Go's time.Duration holds (2^63-1 ns), in ms: longer "Go-style" durations are rejected. */
export const maxDurationMs = 9_223_372_036_854.775; // 9 223 372 036 854.775807 ms, rounded to a double
const maxDurationText = '2562047h47m16.854775807s';
/** `--sync-period` below this (other than 0) is rejected: client-go clamps resync periods to at least 1 s. */
export const minSyncPeriodMs = 1000;
/** The Lease stores `leaseDurationSeconds` as an int32. */
export const maxLeaseDurationMs = 2_147_483_647 * 1000;

const durationUnits: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a Go `time.ParseDuration` string ("1h2m3.5s", "500ms", "0") into milliseconds. Negative durations are
 * rejected (no flag here accepts one), and so are durations beyond time.Duration's range (about 292 years), as Go
 * does. Any accepted value is usable as a timer: the Clock chains platform timers (pkg/util/clock.ts). Throws a
 * plain Error describing the problem.
 */
export function parseDuration(text: string): number {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let pos = 0;
  let total = 0;
  if (text.length === 0) throw new Error('empty duration');
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m) throw new Error(`invalid duration ${JSON.stringify(text)} (want e.g. "15s", "1m30s", "500ms")`);
    total += Number(m[1]) * (durationUnits[m[2] ?? ''] ?? Number.NaN);
    pos = re.lastIndex;
  }
  if (!(total <= maxDurationMs)) {
    throw new Error(`duration ${JSON.stringify(text)} out of range (at most ${maxDurationText})`);
  }
  return total;
}

/** Formats milliseconds Go-style for messages ("15s", "1m30s", "500ms"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${s ? `${s}s` : ''}` || '0s';
}

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** True for a valid DNS-1123 label (namespace names): lower-case alphanumerics and '-', at most 63 characters. */
export function isDns1123Label(s: string): boolean {
  return s.length <= 63 && dns1123Label.test(s);
}

/** True for a valid DNS-1123 subdomain (most object names): dot-separated labels, at most 253 characters. */
export function isDns1123Subdomain(s: string): boolean {
  return s.length <= 253 && s.split('.').every((l) => dns1123Label.test(l) && l.length <= 63);
}

/**
 * Resolves `--controllers` like kube-controller-manager: a controller is enabled when named, disabled when named
 * with '-', otherwise enabled iff '*' is present. Unknown names, contradictions and an empty result are errors.
 */
export function resolveControllers(spec: string): ControllerName[] {
  const items = spec.split(',').map((s) => s.trim());
  const on = new Set<string>();
  const off = new Set<string>();
  let star = false;
  for (const item of items) {
    if (item === '') throw new Error(`empty entry in ${JSON.stringify(spec)}`);
    if (item === '*') {
      star = true;
      continue;
    }
    const disable = item.startsWith('-');
    const name = disable ? item.slice(1) : item;
    if (!(knownControllers as readonly string[]).includes(name)) {
      throw new Error(`unknown controller ${JSON.stringify(name)} (known: ${knownControllers.join(', ')}, or "*")`);
    }
    (disable ? off : on).add(name);
  }
  const both = [...on].find((n) => off.has(n));
  if (both) throw new Error(`controller ${JSON.stringify(both)} is both enabled and disabled`);
  const enabled = knownControllers.filter((c) => on.has(c) || (star && !off.has(c)));
  if (enabled.length === 0) {
    throw new Error(`${JSON.stringify(spec)} enables no controller (to disable one, write e.g. "*,-network")`);
  }
  return enabled;
}

function parseBool(name: string, v: string): boolean {
  if (v === 'true' || v === '1' || v === 'True' || v === 'TRUE') return true;
  if (v === 'false' || v === '0' || v === 'False' || v === 'FALSE') return false;
  throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: want true or false`);
}

function parseIntFlag(name: string, v: string, max = maxConcurrency): number {
  if (!/^\d+$/.test(v)) throw new UsageError(`invalid value ${JSON.stringify(v)} for --${name}: want a positive integer`);
  const n = Number(v);
  if (n < 1 || n > max) {
    throw new UsageError(`invalid value ${v} for --${name}: want 1..${max}`);
  }
  return n;
}

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

function suggest(name: string): string {
  let best: string | undefined;
  let bestDist = 3;
  for (const s of flagSpecs) {
    const d = levenshtein(name, s.name);
    if (d < bestDist) {
      best = s.name;
      bestDist = d;
    }
  }
  return best ? ` (did you mean --${best}?)` : '';
}

function nonEmpty(v: string | undefined): string | undefined {
  const t = v?.trim();
  return t ? t : undefined;
}

/**
 * Parses argv (without node and script paths) and the environment. Throws UsageError on the first problem.
 * Reads `deps.inClusterNamespaceFile` only when leader election is on and neither the flag nor POD_NAMESPACE is set.
 */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv, deps: ParseDeps = {}): Options {
  if (argv.some((a) => a === '-h' || a === '--help')) return { ...parseOptions([], {}), help: true };
  const raw = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--') || arg === '--') {
      if (/^-[a-z][a-z-]+/.test(arg)) {
        const name = arg.slice(1).split('=')[0] ?? '';
        throw new UsageError(`unknown flag ${arg.split('=')[0]}${specByName.has(name) ? ` (did you mean --${name}?)` : suggest(name)}`);
      }
      throw new UsageError(`unexpected argument ${JSON.stringify(arg)}: this command takes flags only`);
    }
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const spec = specByName.get(name);
    if (!spec) throw new UsageError(`unknown flag --${name}${suggest(name)}`);
    let value: string;
    if (eq >= 0) {
      value = arg.slice(eq + 1);
    } else if (spec.kind === 'bool') {
      value = 'true';
    } else {
      const next = argv[i + 1];
      if (next === undefined || (next.startsWith('--') && next.length > 2)) {
        throw new UsageError(`flag --${name} needs a value (--${name}=${placeholder(spec.kind)})`);
      }
      value = next;
      i++;
    }
    raw.set(name, value);
  }

  const get = (name: string): string | undefined => raw.get(name) ?? specByName.get(name)?.def;
  const wrap = <T>(name: string, fn: (v: string) => T): T => {
    const v = get(name) ?? '';
    try {
      return fn(v);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`invalid value for --${name}: ${(err as Error).message}`);
    }
  };
  const str = (name: string): string | undefined => {
    const v = raw.get(name);
    if (v !== undefined && v.trim() === '') throw new UsageError(`flag --${name} needs a non-empty value`);
    return v ?? specByName.get(name)?.def;
  };
  const duration = (name: string): number => {
    const ms = wrap(name, parseDuration);
    if (ms <= 0) throw new UsageError(`invalid value for --${name}: must be greater than 0`);
    if (name === 'leader-elect-lease-duration' && ms > maxLeaseDurationMs) {
      throw new UsageError(
        `invalid value ${get(name)} for --${name}: must be at most ${formatDuration(maxLeaseDurationMs)} (the Lease stores it as int32 seconds)`,
      );
    }
    return ms;
  };

  const metricsBindAddress = get('metrics-bind-address') ?? '0';
  wrap('metrics-bind-address', parseBindAddress);
  // controller-runtime: "" disables the profiling endpoint as "0" does.
  const pprofBindAddress = (get('pprof-bind-address') ?? '0') || '0';
  if (pprofBindAddress !== '0') wrap('pprof-bind-address', parseBindAddress);
  const healthProbeBindAddress = get('health-probe-bind-address') ?? ':8081';
  wrap('health-probe-bind-address', parseBindAddress);
  const metricsSecure = parseBool('metrics-secure', get('metrics-secure') ?? 'true');
  const metricsCertDir = str('metrics-cert-dir');
  if (metricsCertDir !== undefined && !metricsSecure) {
    throw new UsageError('--metrics-cert-dir only applies with --metrics-secure');
  }
  const webhookBindAddress = get('webhook-bind-address') ?? ':9443';
  wrap('webhook-bind-address', parseBindAddress);
  const webhookCertPath = str('webhook-cert-path');
  if (webhookCertPath !== undefined && webhookBindAddress === '0') {
    throw new UsageError('--webhook-cert-path only applies when the webhook server is on (--webhook-bind-address is "0")');
  }
  const modeFlag = raw.get('webhook-cert-mode');
  if (modeFlag !== undefined && !(webhookCertModes as readonly string[]).includes(modeFlag)) {
    throw new UsageError(`invalid value ${JSON.stringify(modeFlag)} for --webhook-cert-mode: want one of ${webhookCertModes.join('|')}`);
  }
  const webhookCertMode: WebhookCertMode = (modeFlag as WebhookCertMode | undefined) ?? (webhookCertPath !== undefined ? 'dir' : 'none');
  if (webhookCertMode === 'dir' && webhookCertPath === undefined) {
    throw new UsageError('--webhook-cert-mode=dir needs --webhook-cert-path');
  }
  if (webhookCertMode !== 'dir' && webhookCertPath !== undefined) {
    throw new UsageError(`--webhook-cert-path only applies with --webhook-cert-mode=dir (got --webhook-cert-mode=${webhookCertMode})`);
  }
  if (webhookCertMode !== 'none' && webhookBindAddress === '0') {
    throw new UsageError(`--webhook-cert-mode=${webhookCertMode} needs the webhook server (--webhook-bind-address is "0")`);
  }
  const selfManagedFlags = ['webhook-cert-secret', 'webhook-service-name', 'webhook-cert-ips', 'webhook-validating-configurations',
    'webhook-mutating-configurations', 'webhook-conversion-crds', ...webhookCertTimingFlags];
  const strayFlag = selfManagedFlags.find((f) => raw.has(f));
  if (webhookCertMode !== 'self-managed' && strayFlag) {
    throw new UsageError(`--${strayFlag} only applies with --webhook-cert-mode=self-managed`);
  }
  const leaderElect = parseBool('leader-elect', get('leader-elect') ?? 'false');

  const leaseDurationMs = duration('leader-elect-lease-duration');
  const renewDeadlineMs = duration('leader-elect-renew-deadline');
  const retryPeriodMs = duration('leader-elect-retry-period');
  if (leaseDurationMs <= renewDeadlineMs + retryPeriodMs) {
    throw new UsageError(
      `--leader-elect-lease-duration (${formatDuration(leaseDurationMs)}) must be greater than --leader-elect-renew-deadline + --leader-elect-retry-period (${formatDuration(renewDeadlineMs)} + ${formatDuration(retryPeriodMs)}), so a leader stops before a standby can take over`,
    );
  }
  if (renewDeadlineMs <= 1.2 * retryPeriodMs) {
    throw new UsageError(
      `--leader-elect-renew-deadline (${formatDuration(renewDeadlineMs)}) must be greater than 1.2 × --leader-elect-retry-period (${formatDuration(retryPeriodMs)})`,
    );
  }
  const gracefulShutdownTimeoutMs = wrap('graceful-shutdown-timeout', parseDuration);
  // The drain lasts up to twice the delay (pkg/manager/httpserver.ts) and is part of the graceful shutdown, after the
  // controllers and the Lease: default 5 s, but at most a quarter of it; given explicitly, twice it must fit in it.
  const webhookShutdownDelayMs = get('webhook-shutdown-delay') === undefined
    ? Math.min(5_000, Math.floor(gracefulShutdownTimeoutMs / 4))
    : wrap('webhook-shutdown-delay', parseDuration);
  if (webhookShutdownDelayMs > 0 && 2 * webhookShutdownDelayMs >= gracefulShutdownTimeoutMs) {
    throw new UsageError(
      `2 × --webhook-shutdown-delay (${formatDuration(webhookShutdownDelayMs)}) must be less than --graceful-shutdown-timeout (${formatDuration(gracefulShutdownTimeoutMs)}): the drain, up to twice the delay, is part of the graceful shutdown`,
    );
  }
  const webhookHttp2 = parseBool('webhook-http2', get('webhook-http2') ?? 'false');
  const bytes = (name: string): number => parseBytes(name, get(name) ?? '');
  const webhookMaxRequestBodyBytes = bytes('webhook-max-request-body-bytes');
  const webhookConversionMaxRequestBodyBytes = bytes('webhook-conversion-max-request-body-bytes');
  const webhookMaxInflightBodyBytes = bytes('webhook-max-inflight-body-bytes');
  for (const limit of ['webhook-max-request-body-bytes', 'webhook-conversion-max-request-body-bytes']) {
    if (bytes(limit) > webhookMaxInflightBodyBytes) {
      throw new UsageError(`--webhook-max-inflight-body-bytes (${get('webhook-max-inflight-body-bytes') ?? ''}) must be at least --${limit} (${get(limit) ?? ''}): a body at its limit must fit`);
    }
  }
  const webhookMaxRequestsInflight = parseIntFlag('webhook-max-requests-inflight', get('webhook-max-requests-inflight') ?? '', maxCount);
  const webhookMaxConnections = parseIntFlag('webhook-max-connections', get('webhook-max-connections') ?? '', maxCount);
  const webhookRequestTimeoutMs = duration('webhook-request-timeout');
  const cacheSyncTimeoutMs = duration('cache-sync-timeout');
  const syncPeriodMs = wrap('sync-period', parseDuration);
  if (syncPeriodMs !== 0 && syncPeriodMs < minSyncPeriodMs) {
    throw new UsageError(`invalid value ${get('sync-period')} for --sync-period: must be 0 (no resync) or at least 1s`);
  }

  const controllers = wrap('controllers', resolveControllers);
  const concurrency = Object.fromEntries(
    knownControllers.map((c) => [c, parseIntFlag(`${c}-concurrency`, get(`${c}-concurrency`) ?? '1')]),
  ) as Record<ControllerName, number>;
  const priorityQueue = parseBool('priority-queue', get('priority-queue') ?? 'true');
  const sharding = parseBool('sharding', get('sharding') ?? 'false');
  if (sharding && !leaderElect) throw new UsageError('--sharding needs --leader-elect (the sharder is the holder of the leader Lease)');
  const maxQueueWaitMs = duration('max-queue-wait');
  const watchList = parseBool('watch-list', get('watch-list') ?? 'false');
  const reconcileTimeoutMs = wrap('reconcile-timeout', parseDuration);

  const level = get('log-level') ?? 'info';
  if (!(logLevelChoices as readonly string[]).includes(level)) {
    throw new UsageError(`invalid value ${JSON.stringify(level)} for --log-level: want one of ${logLevelChoices.join('|')}`);
  }

  const watchNamespaces: string[] = [];
  for (const ns of (env.WATCH_NAMESPACE ?? '').split(',').map((s) => s.trim())) {
    if (ns === '') continue;
    if (!isDns1123Label(ns)) {
      throw new UsageError(`WATCH_NAMESPACE: ${JSON.stringify(ns)} is not a valid namespace name (lower-case DNS-1123 label)`);
    }
    if (!watchNamespaces.includes(ns)) watchNamespaces.push(ns);
  }

  const podNamespace = nonEmpty(env.POD_NAMESPACE);
  let leaderElectionNamespace = str('leader-election-namespace') ?? podNamespace;
  if (leaderElect && leaderElectionNamespace === undefined) {
    const file = deps.inClusterNamespaceFile ?? defaultInClusterNamespaceFile;
    try {
      leaderElectionNamespace = nonEmpty(readFileSync(file, 'utf8'));
    } catch {
      // Not running in a pod (or no ServiceAccount mounted): fall through to the error below.
    }
    if (leaderElectionNamespace === undefined) {
      throw new UsageError(
        `--leader-elect needs a namespace for the Lease: set --leader-election-namespace or POD_NAMESPACE (not running in-cluster: ${file} not readable)`,
      );
    }
  }
  if (leaderElectionNamespace !== undefined && !isDns1123Label(leaderElectionNamespace)) {
    throw new UsageError(`invalid leader election namespace ${JSON.stringify(leaderElectionNamespace)}: not a DNS-1123 label`);
  }

  let webhookSelfManaged: WebhookSelfManagedOptions | undefined;
  if (webhookCertMode === 'self-managed') {
    let namespace = podNamespace;
    if (namespace === undefined) {
      const file = deps.inClusterNamespaceFile ?? defaultInClusterNamespaceFile;
      try {
        namespace = nonEmpty(readFileSync(file, 'utf8'));
      } catch {
        // not in a pod: the error below
      }
      if (namespace === undefined) {
        throw new UsageError(`--webhook-cert-mode=self-managed needs the namespace of its Secret: set POD_NAMESPACE (not running in-cluster: ${file} not readable)`);
      }
    }
    if (!isDns1123Label(namespace)) throw new UsageError(`invalid POD_NAMESPACE ${JSON.stringify(namespace)}: not a DNS-1123 label`);
    const list = (flag: string, what: (v: string) => boolean, want: string): string[] => {
      const items = (raw.get(flag) ?? specByName.get(flag)?.def ?? '').split(',').map((x) => x.trim()).filter((x) => x !== '');
      const bad = items.find((x) => !what(x));
      if (bad !== undefined) throw new UsageError(`invalid value ${JSON.stringify(bad)} in --${flag}: want ${want}`);
      return [...new Set(items)];
    };
    const one = (flag: string, what: (v: string) => boolean, want: string): string => {
      const items = list(flag, what, want);
      if (items.length !== 1) throw new UsageError(`--${flag} needs exactly one ${want}`);
      return items[0] ?? '';
    };
    const timing = (flag: string): string => `--${flag} (${get(flag) ?? ''})`;
    const [servingValidityMs, caValidityMs, propagationMs, reloadGraceMs, pollIntervalMs] = webhookCertTimingFlags.map(duration) as [number, number, number, number, number];
    if (caValidityMs < 3 * servingValidityMs) {
      throw new UsageError(`${timing('webhook-cert-ca-validity')} must be at least 3 × ${timing('webhook-cert-validity')}: a CA is replaced when a third of it remains, which must still cover a whole serving certificate`);
    }
    if (propagationMs + reloadGraceMs >= servingValidityMs / 3) {
      throw new UsageError(`${timing('webhook-cert-propagation-delay')} + ${timing('webhook-cert-reload-grace')} must be less than a third of ${timing('webhook-cert-validity')}: a CA switch must fit well inside the renewal window`);
    }
    if (reloadGraceMs < 2 * pollIntervalMs) {
      throw new UsageError(`${timing('webhook-cert-reload-grace')} must be at least 2 × ${timing('webhook-cert-poll-interval')}: a replica loads a new serving certificate only when it polls`);
    }
    webhookSelfManaged = {
      secretName: one('webhook-cert-secret', isDns1123Subdomain, 'a Secret name (DNS-1123 subdomain)'),
      namespace,
      serviceName: one('webhook-service-name', isDns1123Label, 'a Service name (DNS-1123 label)'),
      ips: list('webhook-cert-ips', (x) => isIP(x) !== 0, 'an IP address'),
      validatingWebhookConfigurations: list('webhook-validating-configurations', isDns1123Subdomain, 'object names (DNS-1123 subdomains)'),
      mutatingWebhookConfigurations: list('webhook-mutating-configurations', isDns1123Subdomain, 'object names (DNS-1123 subdomains)'),
      crds: list('webhook-conversion-crds', (x) => isDns1123Subdomain(x) && x.includes('.'), 'CRD names (DNS-1123 subdomains, e.g. networks.samplecrd.k8s.io)'),
      servingValidityMs, caValidityMs, propagationMs, reloadGraceMs, pollIntervalMs,
    };
  }

  const leaderElectionId = str('leader-election-id') ?? defaultLeaderElectionId;
  if (!isDns1123Subdomain(leaderElectionId)) {
    throw new UsageError(`invalid value ${JSON.stringify(leaderElectionId)} for --leader-election-id: not a DNS-1123 subdomain`);
  }

  return {
    help: false,
    kubeconfig: str('kubeconfig'),
    metricsBindAddress,
    metricsSecure,
    metricsCertDir,
    pprofBindAddress,
    healthProbeBindAddress,
    webhookBindAddress,
    webhookCertPath,
    webhookCertMode,
    webhookSelfManaged,
    webhookShutdownDelayMs,
    webhookHttp2,
    webhookMaxRequestBodyBytes,
    webhookConversionMaxRequestBodyBytes,
    webhookMaxInflightBodyBytes,
    webhookMaxRequestsInflight,
    webhookMaxConnections,
    webhookRequestTimeoutMs,
    leaderElect,
    leaderElectionId,
    leaderElectionNamespace,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    gracefulShutdownTimeoutMs,
    cacheSyncTimeoutMs,
    syncPeriodMs,
    controllers,
    concurrency,
    priorityQueue,
    sharding,
    maxQueueWaitMs,
    watchList,
    reconcileTimeoutMs,
    logLevel: level as LogLevel,
    neutronCloudConfig: str('neutron-cloud-config') ?? nonEmpty(env.NEUTRON_CLOUD_CONFIG),
    neutronCloud: str('neutron-cloud') ?? nonEmpty(env.OS_CLOUD),
    watchNamespaces,
    podNamespace,
  };
}

/** The webhook server's limits from the flags (WebhookServerOptions; docs/webhooks.md#limits). */
export function webhookServerLimits(o: Options): Pick<WebhookServerOptions,
  'maxRequestBytes' | 'maxRequestBytesByPath' | 'maxInFlightBytes' | 'maxRequestsInFlight' | 'maxConnections' | 'requestTimeoutMs'> {
  return {
    maxRequestBytes: o.webhookMaxRequestBodyBytes,
    maxRequestBytesByPath: { [convertPath]: o.webhookConversionMaxRequestBodyBytes },
    maxInFlightBytes: o.webhookMaxInflightBodyBytes,
    maxRequestsInFlight: o.webhookMaxRequestsInflight,
    maxConnections: o.webhookMaxConnections,
    requestTimeoutMs: o.webhookRequestTimeoutMs,
  };
}
