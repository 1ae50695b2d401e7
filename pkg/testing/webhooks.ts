/**
 * Webhooks in a test environment, as envtest's WebhookInstallOptions: the API server must reach the webhook server
 * the test runs in its own process, so the webhook manifests made for a cluster (kubebuilder's config/webhook:
 * `clientConfig.service` → a Service in front of the manager's Pods) are rewritten to
 * `clientConfig.url: https://<host>:<port><service.path>` with the caBundle of a CA generated here, which also signs
 * a serving certificate for that host (written as `tls.crt`/`tls.key` in a certificate directory, what
 * `ControllerManager({ webhook: { certDir } })` reads). A CRD whose `spec.conversion` is a webhook by service
 * (kubebuilder's `webhook_in_<kind>.yaml` patch) is rewritten the same way.
 *
 * Invariants: only `service` client configs are rewritten (an explicit `url` is the author's choice and kept, caBundle
 * included); the objects given are never mutated (rewrites work on deep copies); a path that holds no webhook
 * configuration is an error, as for CRDs.
 *
 * Waiting: the API server loads webhook configurations asynchronously (one informer per kind), so a test that
 * writes right after installing them may not be intercepted. waitForWebhooks creates one probe configuration of each
 * kind *after* the user's, matching only dry-run ConfigMaps labelled for it, pointing at an unregistered path of the
 * webhook server. An informer delivers events in order, so once the API server calls a probe it has loaded every
 * configuration of that kind installed before it; and once that call gets an HTTP answer (the server's 404) instead
 * of a connection or TLS error, the API server reaches the test's webhook server over TLS with this caBundle.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { KubeObject } from '../apimachinery/meta.ts';
import { ApiError } from '../client/errors.ts';
import type { RestClient } from '../client/rest.ts';
import { certificateAuthority, signedCertificate } from '../manager/selfsigned.ts';
import { readManifests, type CustomResourceDefinition } from './crds.ts';
import { delay } from './process.ts';

/** startTestEnv's `webhooks` option (envtest's WebhookInstallOptions). */
export interface WebhookInstallOptions {
  /** Files or directories (not recursive) of manifests; their Mutating/ValidatingWebhookConfigurations are installed. */
  paths?: string[];
  /** MutatingWebhookConfiguration objects to install (admissionregistration.k8s.io/v1). */
  mutatingWebhooks?: KubeObject[];
  /** ValidatingWebhookConfiguration objects to install (admissionregistration.k8s.io/v1). */
  validatingWebhooks?: KubeObject[];
  /** The address the API server calls and the serving certificate is for; default 127.0.0.1. */
  localServingHost?: string;
  /** The port the test's webhook server will listen on; default a free one picked at start. */
  localServingPort?: number;
}

/** Where the test's webhook server must serve: `new ControllerManager({ webhook: { bindAddress, certDir } })`. */
export interface WebhookServing {
  /** The loopback address the webhook server listens on (the API server calls it there). */
  host: string;
  /** `localServingPort`, or a port that was free when the environment started. */
  port: number;
  /** `<host>:<port>`, for `webhook.bindAddress` (or `--webhook-bind-address`). */
  bindAddress: string;
  /** Holds `tls.crt`, `tls.key` (the serving certificate for `host`, and localhost/127.0.0.1) and `ca.crt`. */
  certDir: string;
  /** The CA (PEM) that signed it: the caBundle of every rewritten client config. */
  caCert: string;
}

/** The `clientConfig` of a webhook (admissionregistration.k8s.io/v1 WebhookClientConfig, apiextensions' likewise). */
export interface WebhookClientConfig {
  /** `https://host:port/path`: written in place of `service`, to the test's webhook server; an explicit one is kept. */
  url?: string;
  /** The in-cluster Service a manifest names; replaced by `url` (its path kept). */
  service?: { namespace?: string; name?: string; path?: string; port?: number };
  /** Base64 of the CA PEM the API server trusts for this webhook; the environment's CA where `service` was rewritten. */
  caBundle?: string;
}

/**
 * A MutatingWebhookConfiguration or ValidatingWebhookConfiguration as read from a manifest: only the fields the test
 * environment rewrites (each webhook's `clientConfig`) are typed; every other field is passed to the API server as is.
 */
export interface WebhookConfiguration extends KubeObject {
  /** The webhooks: each one's clientConfig is rewritten, everything else kept. */
  webhooks?: Array<{ name: string; clientConfig?: WebhookClientConfig; [field: string]: unknown }>;
}

const admissionApiVersion = 'admissionregistration.k8s.io/v1';
const webhookKinds = { MutatingWebhookConfiguration: 'mutatingwebhookconfigurations', ValidatingWebhookConfiguration: 'validatingwebhookconfigurations' } as const;
type WebhookKind = keyof typeof webhookKinds;

const isWebhookConfiguration = (o: KubeObject | null | undefined): o is WebhookConfiguration =>
  o?.apiVersion === admissionApiVersion && (o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration');

/** The Mutating/ValidatingWebhookConfigurations in `paths` (files, or directories of manifests); throws when a path does not exist or holds none. */
export function readWebhookConfigurations(paths: string[]): WebhookConfiguration[] {
  return readManifests(paths, 'webhook path', `${admissionApiVersion} MutatingWebhookConfiguration or ValidatingWebhookConfiguration`, isWebhookConfiguration);
}

/** `service` → `url: https://<hostPort><service.path>` with `caBundle` (base64 of the CA PEM); any other config is returned as is. */
export function localClientConfig(cc: WebhookClientConfig | undefined, hostPort: string, caBundle: string): WebhookClientConfig | undefined {
  if (!cc?.service) return cc;
  const { service, ...rest } = cc;
  const path = service.path ?? '';
  return { ...rest, url: `https://${hostPort}${path === '' || path.startsWith('/') ? path : `/${path}`}`, caBundle };
}

/** A deep copy of a webhook configuration with every webhook's `service` client config made local (localClientConfig). */
export function localWebhookConfiguration(config: WebhookConfiguration, hostPort: string, caBundle: string): WebhookConfiguration {
  const copy = structuredClone(config);
  for (const w of copy.webhooks ?? []) {
    const cc = localClientConfig(w.clientConfig, hostPort, caBundle);
    if (cc) w.clientConfig = cc;
  }
  return copy;
}

interface ConversionSpec { strategy?: string; webhook?: { clientConfig?: WebhookClientConfig; [field: string]: unknown } }

/** A deep copy of a CRD whose conversion webhook's `service` client config is made local; other CRDs are returned as is. */
export function localConversion(crd: CustomResourceDefinition, hostPort: string, caBundle: string): CustomResourceDefinition {
  const conversion = (crd.spec as { conversion?: ConversionSpec } | undefined)?.conversion;
  if (conversion?.strategy !== 'Webhook' || !conversion.webhook?.clientConfig?.service) return crd;
  const copy = structuredClone(crd);
  const webhook = (copy.spec as { conversion: Required<ConversionSpec> }).conversion.webhook;
  webhook.clientConfig = localClientConfig(webhook.clientConfig, hostPort, caBundle);
  return copy;
}

/** Makes the CA and the serving certificate for `host` (and localhost, 127.0.0.1) and writes them into `certDir`. */
export async function createWebhookServing(certDir: string, host: string, port: number): Promise<WebhookServing> {
  const ca = await certificateAuthority({ commonName: `ts-controller-manager-testenv-webhook-ca@${Date.now()}` });
  const ips = [...new Set(['127.0.0.1', ...(isIP(host) ? [host] : [])])];
  const dnsNames = [...new Set(['localhost', ...(isIP(host) ? [] : [host])])];
  const serving = await signedCertificate({ ca, commonName: host, ips, dnsNames });
  mkdirSync(certDir, { recursive: true });
  writeFileSync(join(certDir, 'tls.crt'), serving.cert);
  writeFileSync(join(certDir, 'tls.key'), serving.key, { mode: 0o600 });
  writeFileSync(join(certDir, 'ca.crt'), ca.cert);
  return { host, port, bindAddress: `${host.includes(':') ? `[${host}]` : host}:${port}`, certDir, caCert: ca.cert };
}

const hostPortOf = (s: WebhookServing): string => s.bindAddress;
export const caBundleOf = (s: WebhookServing): string => Buffer.from(s.caCert).toString('base64');

/** Creates (or replaces) the configurations, made local; returns their `<kind>/<name>`. */
export async function installWebhookConfigurations(client: RestClient, serving: WebhookServing, configs: WebhookConfiguration[],
  signal?: AbortSignal): Promise<string[]> {
  const installed: string[] = [];
  for (const config of configs) {
    const name = config.metadata?.name;
    if (!name) throw new Error(`a ${config.kind ?? 'webhook configuration'} without metadata.name`);
    const local = localWebhookConfiguration(config, hostPortOf(serving), caBundleOf(serving));
    await client.json('PATCH', `/apis/admissionregistration.k8s.io/v1/${webhookKinds[config.kind as WebhookKind]}/${name}`, {
      query: { fieldManager: 'ts-controller-manager-testing', force: true },
      body: local, contentType: 'application/apply-patch+yaml', signal,
    });
    installed.push(`${config.kind ?? ''}/${name}`);
  }
  return installed;
}

const probeName = 'ts-controller-manager-testenv-webhook-probe';
const probeLabel = 'testenv.ts-controller-manager.io/webhook-probe';
const probePath = '/ts-controller-manager-testenv-webhook-probe';

function probeConfiguration(kind: WebhookKind, serving: WebhookServing): WebhookConfiguration {
  const which = kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating';
  return {
    apiVersion: admissionApiVersion, kind, metadata: { name: probeName },
    webhooks: [{
      name: `${which}.webhook-probe.testenv.ts-controller-manager.io`,
      clientConfig: { url: `https://${hostPortOf(serving)}${probePath}`, caBundle: caBundleOf(serving) },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
      objectSelector: { matchLabels: { [probeLabel]: which } },
      failurePolicy: 'Fail', sideEffects: 'None', admissionReviewVersions: ['v1'], timeoutSeconds: 5,
    }],
  };
}

/**
 * How the API server fared calling a probe webhook, from the error of the dry-run create: 'answered' (an HTTP answer
 * from the webhook server, e.g. its 404 for the probe path), 'unreachable' (connection refused, TLS, timeout: the
 * configuration is loaded but the server is not serving, or not with this certificate), or 'not-called' (the
 * configuration is not loaded yet: the create passed admission).
 */
export function probeOutcome(err: unknown, webhookName: string): { outcome: 'answered' | 'unreachable' | 'not-called'; detail: string } {
  if (err === undefined) return { outcome: 'not-called', detail: 'the dry-run create was admitted without calling the probe webhook' };
  if (!(err instanceof ApiError)) throw err instanceof Error ? err : new Error('the dry-run create failed', { cause: err });
  const message = err.message;
  if (!message.includes(`"${webhookName}"`)) throw err; // refused for another reason: not ours to interpret
  // What Go's net/http and crypto/tls say when no HTTP answer came back (webhook/errors in k8s.io/apiserver quote them).
  const transport = /dial tcp|connection refused|connection reset|EOF|tls:|x509:|certificate|context deadline exceeded|Client\.Timeout|no such host|i\/o timeout/;
  return { outcome: transport.test(message) ? 'unreachable' : 'answered', detail: message };
}

/**
 * Resolves once the API server has loaded every webhook configuration installed so far and reaches the webhook
 * server at `serving` over TLS (see the file comment for how that is known). Polls every 100 ms; rejects after
 * `timeoutMs` (default 30 s) with what the API server last said, or when `signal` aborts. Removes its probe
 * configurations before it returns or rejects. One wait per environment at a time (the probes have fixed names).
 */
export async function waitForWebhooks(client: RestClient, serving: WebhookServing, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const signal = opts.signal;
  const kinds = Object.keys(webhookKinds) as WebhookKind[];
  const probes = kinds.map((k) => probeConfiguration(k, serving));
  try {
    // Created after the user's configurations: see the file comment.
    for (const p of probes) await client.json('POST', `/apis/admissionregistration.k8s.io/v1/${webhookKinds[p.kind as WebhookKind]}`, { body: p, signal });
    const deadline = Date.now() + timeoutMs;
    for (const p of probes) {
      const webhookName = p.webhooks![0]!.name;
      const which = p.kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating';
      for (;;) {
        signal?.throwIfAborted();
        const err = await client.json('POST', '/api/v1/namespaces/default/configmaps', {
          query: { dryRun: 'All' }, signal,
          body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'webhook-probe-', labels: { [probeLabel]: which } } },
        }).then(() => undefined, (e: unknown) => e);
        const { outcome, detail } = probeOutcome(err, webhookName);
        if (outcome === 'answered') break;
        if (Date.now() > deadline) {
          throw new Error(`webhooks not reachable from the API server within ${timeoutMs} ms: ${outcome === 'unreachable'
            ? `is the webhook server listening on ${serving.bindAddress} with the certificate in ${serving.certDir}? The API server said: ${detail}`
            : `the ${p.kind} probe was never called (${detail})`}`);
        }
        await delay(100);
      }
    }
  } finally {
    for (const p of probes) {
      await client.json('DELETE', `/apis/admissionregistration.k8s.io/v1/${webhookKinds[p.kind as WebhookKind]}/${probeName}`)
        .catch((e: unknown) => { if (!(e instanceof ApiError && e.status === 404)) throw e; });
    }
  }
}
