/**
 * SelfManagedCertificates: webhook serving certificates without cert-manager. A CA and a serving certificate signed
 * by it live in one Secret; the CA bundle is injected into the named Validating/MutatingWebhookConfigurations (every
 * webhook's clientConfig.caBundle) and the named CRDs' spec.conversion.webhook.clientConfig.caBundle; both are rotated
 * before expiry as rotation.ts decides, with a CA overlap so that no admission or conversion call fails during a
 * rotation. It is the webhook server's TlsSource (pkg/manager/httpserver.ts): `start` resolves with the serving pair
 * and `onUpdate` gets every later one.
 *
 * The Secret (type kubernetes.io/tls, so tools that read cert-manager's Secrets read it too):
 *   tls.crt, tls.key   the serving certificate (leaf only) and its key
 *   ca.crt             the CA bundle, oldest first (one CA; two during a CA rotation) — exactly what is injected
 *   ca.key             the keys of those CAs (PEM blocks; each is matched to its CA by key, not by position)
 *   annotations        webhook-certs.ts-controller-manager.io/serving-issued-at: when tls.crt was written (ISO); when
 *                      it is missing, unparsable or earlier than tls.crt's notBefore it is written first
 *                      (rotation.ts `record-issued`), never guessed from the certificate
 *                      webhook-certs.ts-controller-manager.io/bundle-injected: "<bundle id> <ISO time>", the bundle
 *                      last seen in every target and since when (rotation.ts waits propagationMs after it)
 * Each target (webhook configuration, CRD) carries webhook-certs.ts-controller-manager.io/ca-added-at: when an injector
 * last added a CA to its caBundle(s), written in the same PUT as the bundle (so no crash can separate them); a target
 * that carries the bundle without it gets it (the time it is written). rotation.ts counts the propagation wait from
 * the latest of these and the Secret's record: a target whose bundle was reset and re-injected restarts the wait.
 *
 * CONCURRENCY CONTRACT (every replica runs one; any may act, exactly one wins each step, the others load the result):
 *  - Each round: GET the Secret; inject its bundle into the targets; decide (rotation.ts); carry out the one action
 *    as ONE write of the Secret fenced by what was read: POST for `create` (a second creator gets 409 AlreadyExists
 *    and loses), PUT carrying the resourceVersion read for everything else (a replica that read an older version
 *    gets 409 Conflict and loses). A loser discards what it generated, re-reads at once and adopts the winner's
 *    Secret. So every step of rotation.ts is taken on the latest Secret, by one replica.
 *  - Injection writes the targets with PUT fenced by their own resourceVersion (409: re-read next round), and writes
 *    rotation.ts's `mergeBundle` of the Secret's bundle and the target's: a replica with a stale Secret never removes a
 *    CA newer than the ones it knows, so it cannot undo another replica's `add-ca`. All replicas inject; the writes
 *    are idempotent (nothing is written when the target already carries the bundle).
 *  - The Secret is POLLED (GET every pollIntervalMs, default 10 s), not watched: the driver needs a timer anyway to
 *    act on time (renewal points, propagation and grace delays) and to re-inject a caBundle that a `kubectl apply`
 *    of the webhook configuration reset; one GET of one object every 10 s per replica costs nothing; a poll cannot
 *    silently stop the way a broken watch can; and RBAC needs no list/watch on Secrets. The poll interval bounds how
 *    long a replica may serve a superseded pair, so `reloadGraceMs` (how long rotation.ts keeps an old CA after the
 *    serving certificate changed) must be at least 2 × pollIntervalMs (checked).
 *  - Failure: an API error ends the round; it is logged and retried after `retryMs` while the current pair keeps
 *    being served. A replica that cannot read the Secret for longer than reloadGraceMs may still serve a pair whose
 *    CA was dropped; its calls then fail until it reads again (the API server is down for it anyway). `start`
 *    rejects only when aborted before a first pair exists.
 * Times written to the Secret are wall-clock (`now`, default Date.now) and compared by other replicas: clock skew
 * between nodes shortens or lengthens the delays by the skew (keep the delays well above it).
 */
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { coreResources, type ResourceType } from '../../apimachinery/resource.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../../client/errors.ts';
import type { JsonClient } from '../../client/request.ts';
import { ResourceClient } from '../../client/typed.ts';
import { type Logger, silentLogger } from '../../log/logger.ts';
import type { TlsPair, TlsSource } from '../../manager/httpserver.ts';
import { certificateAuthority, signedCertificate } from '../../manager/selfsigned.ts';
import { type Clock, realClock, type Timer } from '../../util/clock.ts';
import {
  type Action, byIssue, type CaView, decide, defaultRotationOptions, mergeBundle, type RotationOptions, type SecretView,
  type TargetsView, validateRotationOptions,
} from './rotation.ts';

export const servingIssuedAtAnnotation = 'webhook-certs.ts-controller-manager.io/serving-issued-at';
export const bundleInjectedAnnotation = 'webhook-certs.ts-controller-manager.io/bundle-injected';
/** On each injection target: when an injector last added a CA to its caBundle(s) (ISO time). */
export const caAddedAtAnnotation = 'webhook-certs.ts-controller-manager.io/ca-added-at';

export const webhookConfigurationResources = {
  validating: { group: 'admissionregistration.k8s.io', version: 'v1', resource: 'validatingwebhookconfigurations', kind: 'ValidatingWebhookConfiguration', namespaced: false },
  mutating: { group: 'admissionregistration.k8s.io', version: 'v1', resource: 'mutatingwebhookconfigurations', kind: 'MutatingWebhookConfiguration', namespaced: false },
  crds: { group: 'apiextensions.k8s.io', version: 'v1', resource: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false },
} as const satisfies Record<string, ResourceType>;

export interface SelfManagedCertificatesOptions {
  /** The API client (the manager's RestClient). Writes go through it, so a write gate applies. */
  client: JsonClient;
  /** The Secret holding CA and serving pair, e.g. `webhook-server-cert`. */
  secretName: string;
  /** Its namespace (the manager's, POD_NAMESPACE). */
  namespace: string;
  /** The webhook Service: the certificate names `<svc>.<ns>.svc` and `<svc>.<ns>.svc.cluster.local`. */
  serviceName: string;
  /** The Service's namespace (default `namespace`). */
  serviceNamespace?: string;
  /** More DNS names for the serving certificate. */
  extraDnsNames?: string[];
  /** IP addresses for the serving certificate (e.g. 127.0.0.1 for a webhook clientConfig.url on loopback in tests). */
  ips?: string[];
  /** ValidatingWebhookConfigurations whose every webhook gets the CA bundle. */
  validatingWebhookConfigurations?: string[];
  /** MutatingWebhookConfigurations whose every webhook gets the CA bundle. */
  mutatingWebhookConfigurations?: string[];
  /** CRDs whose spec.conversion.webhook.clientConfig gets the CA bundle. */
  crds?: string[];
  /** CA lifetime (default 1 year); a successor is added when a third remains. */
  caValidityMs?: number;
  /** Serving certificate lifetime (default 90 days); renewed when a third remains. */
  servingValidityMs?: number;
  /** How long after a caBundle change API servers may still use the previous one (default 2 min). */
  propagationMs?: number;
  /** How long a replica may serve a superseded pair (default 2 min; at least 2 × pollIntervalMs). */
  reloadGraceMs?: number;
  /** GET the Secret (and check the targets) this often (default 10 s). */
  pollIntervalMs?: number;
  /** Delay before retrying a failed round (default 2 s, at most pollIntervalMs). */
  retryMs?: number;
  /** CN prefix of the CAs (default `ts-controller-manager-webhook-ca`; `@<ms>` is appended to each). */
  caCommonName?: string;
  /** Timers (fake in tests). */
  clock?: Clock;
  /** Wall-clock milliseconds for certificate validity and the Secret's records (default Date.now). */
  now?: () => number;
  logger?: Logger;
}

/** Counters of this replica's work, for tests and logs. */
export interface SelfManagedStats {
  rounds: number;
  /** Secret writes this replica won, by action kind. */
  won: Partial<Record<Action['kind'], number>>;
  /** Secret writes this replica lost (409 AlreadyExists/Conflict) and re-read. */
  lost: number;
  /** Target objects this replica updated with a new caBundle. */
  injections: number;
  /** Rounds that failed (API errors). */
  errors: number;
}

interface Ca { cert: string; key: string; x509: X509Certificate; view: CaView }
interface Parsed { view: SecretView; cas: Ca[]; serving?: TlsPair; secret?: Secret }
interface Secret extends KubeObject { type?: string; data?: Record<string, string> }
interface ClientConfig { caBundle?: string; url?: string; service?: unknown }
/** What injecting into one target object does: whether it changes a caBundle, whether that adds a CA, and whether an object holds the bundle. */
interface Change<T> { changed: boolean; adds: boolean; holds: (obj: T) => boolean }
interface WebhookConfiguration extends KubeObject { webhooks?: { name: string; clientConfig?: ClientConfig }[] }
interface Crd extends KubeObject { spec?: { conversion?: { strategy?: string; webhook?: { clientConfig?: ClientConfig } } } }

const pemBlocks = (text: string, label: RegExp): string[] =>
  [...text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----\n?/g)].filter((m) => label.test(m[1] ?? '')).map((m) => m[0].endsWith('\n') ? m[0] : `${m[0]}\n`);

/** A CA's short stable id: the first 16 hex digits of its SHA-256 fingerprint. */
export function caId(x: X509Certificate): string {
  return x.fingerprint256.replaceAll(':', '').slice(0, 16).toLowerCase();
}

function b64(text: string): string {
  return Buffer.from(text).toString('base64');
}

/** The CA certificates of a PEM bundle that parse (others are ignored: they sign nothing we serve). */
function parseBundle(pemText: string): { cert: string; x509: X509Certificate; id: string; notBefore: number; notAfter: number }[] {
  const out = [];
  for (const cert of pemBlocks(pemText, /^CERTIFICATE$/)) {
    try {
      const x509 = new X509Certificate(cert);
      out.push({ cert, x509, id: caId(x509), notBefore: Date.parse(x509.validFrom), notAfter: Date.parse(x509.validTo) });
    } catch {
      // not a certificate
    }
  }
  return out;
}

function sans(x: X509Certificate): string[] {
  return (x.subjectAltName ?? '').split(',').map((s) => s.trim()).filter(Boolean).sort();
}

export class SelfManagedCertificates implements TlsSource {
  readonly stats: SelfManagedStats = { rounds: 0, won: {}, lost: 0, injections: 0, errors: 0 };
  private readonly o: Required<Omit<SelfManagedCertificatesOptions, 'serviceNamespace' | 'logger'>> & { logger: Logger };
  private readonly rotation: RotationOptions;
  private readonly dnsNames: string[];
  private readonly wantedSans: string[];
  private readonly secrets: ResourceClient<Secret>;
  private readonly vwcs: ResourceClient<WebhookConfiguration>;
  private readonly mwcs: ResourceClient<WebhookConfiguration>;
  private readonly crdClient: ResourceClient<Crd>;
  private readonly log: Logger;
  private delivered: TlsPair | undefined;
  private bundlePem = '';
  private readonly warned = new Set<string>();

  constructor(opts: SelfManagedCertificatesOptions) {
    const pollIntervalMs = opts.pollIntervalMs ?? 10_000;
    this.rotation = {
      caValidityMs: opts.caValidityMs ?? defaultRotationOptions.caValidityMs,
      servingValidityMs: opts.servingValidityMs ?? defaultRotationOptions.servingValidityMs,
      propagationMs: opts.propagationMs ?? defaultRotationOptions.propagationMs,
      reloadGraceMs: opts.reloadGraceMs ?? defaultRotationOptions.reloadGraceMs,
    };
    validateRotationOptions(this.rotation);
    if (this.rotation.reloadGraceMs < 2 * pollIntervalMs) {
      throw new Error(`reloadGraceMs (${this.rotation.reloadGraceMs}) must be at least 2 × pollIntervalMs (${pollIntervalMs}): ` +
        'a replica reloads the serving pair only when it polls');
    }
    this.o = {
      ...opts,
      serviceName: opts.serviceName,
      extraDnsNames: opts.extraDnsNames ?? [],
      ips: opts.ips ?? [],
      validatingWebhookConfigurations: opts.validatingWebhookConfigurations ?? [],
      mutatingWebhookConfigurations: opts.mutatingWebhookConfigurations ?? [],
      crds: opts.crds ?? [],
      ...this.rotation,
      pollIntervalMs,
      retryMs: Math.min(opts.retryMs ?? 2_000, pollIntervalMs),
      caCommonName: opts.caCommonName ?? 'ts-controller-manager-webhook-ca',
      clock: opts.clock ?? realClock,
      now: opts.now ?? Date.now,
      logger: opts.logger ?? silentLogger,
    };
    for (const ip of this.o.ips) if (!isIP(ip)) throw new Error(`ips: not an IP address: ${ip}`);
    const svcNs = opts.serviceNamespace ?? opts.namespace;
    this.dnsNames = [`${opts.serviceName}.${svcNs}.svc`, `${opts.serviceName}.${svcNs}.svc.cluster.local`, ...this.o.extraDnsNames];
    this.wantedSans = [...this.dnsNames.map((d) => `DNS:${d}`), ...this.o.ips.map((ip) => `IP Address:${ip}`)].sort();
    this.secrets = new ResourceClient<Secret>(opts.client, coreResources.secrets, opts.namespace);
    this.vwcs = new ResourceClient<WebhookConfiguration>(opts.client, webhookConfigurationResources.validating);
    this.mwcs = new ResourceClient<WebhookConfiguration>(opts.client, webhookConfigurationResources.mutating);
    this.crdClient = new ResourceClient<Crd>(opts.client, webhookConfigurationResources.crds);
    this.log = this.o.logger.child({ component: 'webhook-certs', secret: `${opts.namespace}/${opts.secretName}` });
  }

  /** The CA bundle (PEM) of the Secret as last read; empty before the first successful round. */
  get caBundle(): string {
    return this.bundlePem;
  }

  /**
   * Runs rounds until the Secret holds a usable pair (retrying failures every retryMs) and resolves with it; then
   * keeps rotating, injecting and reloading until `signal` aborts, calling `onUpdate` with every new serving pair.
   * A usable pair in the Secret is served at once even when injecting or writing fails (e.g. missing RBAC: logged,
   * retried). Rejects only if `signal` aborts before the first pair.
   */
  async start(signal: AbortSignal, onUpdate: (pair: TlsPair) => void): Promise<TlsPair> {
    let recheckAt = 0;
    let first: TlsPair | undefined;
    while (!first) {
      signal.throwIfAborted();
      try {
        recheckAt = await this.round(signal);
      } catch (err) {
        this.stats.errors++;
        recheckAt = this.o.now();
        this.log.error({ err: (err as Error).message }, 'webhook certificates: round failed; retrying');
      }
      // A usable pair read from the Secret is served even if the rest of the round (injection, a write) failed.
      first = this.delivered;
      if (first) break;
      await this.o.clock.sleep(this.o.retryMs, signal);
    }
    this.log.info({ notAfter: new X509Certificate(first.cert).validTo }, 'webhook serving certificate loaded');
    let timer: Timer | undefined;
    let sent = first;
    // After every round, failed ones included: a round may read a new pair and then fail (e.g. injecting).
    const deliver = (): void => {
      if (this.delivered && this.delivered !== sent && !signal.aborted) {
        sent = this.delivered;
        onUpdate(sent);
      }
    };
    const schedule = (ms: number): void => {
      if (signal.aborted) return;
      timer = this.o.clock.setTimer(ms, () => {
        this.round(signal).then(
          (next) => {
            deliver();
            schedule(this.delay(next));
          },
          (err: unknown) => {
            deliver();
            if (signal.aborted) return;
            this.stats.errors++;
            this.log.error({ err: (err as Error).message, retryInMs: this.o.retryMs }, 'webhook certificates: round failed; keeping the current certificate');
            schedule(this.o.retryMs);
          },
        );
      });
    };
    schedule(this.delay(recheckAt));
    signal.addEventListener('abort', () => timer?.cancel(), { once: true });
    return first;
  }

  /** Next poll: at the decision's recheck time, but never later than pollIntervalMs nor sooner than retryMs. */
  private delay(recheckAt: number): number {
    return Math.min(this.o.pollIntervalMs, Math.max(this.o.retryMs, recheckAt - this.o.now()));
  }

  /**
   * One round: read, inject, decide, write — repeated while there is something to do (each write is followed by a
   * fresh read). Returns the wall-clock time of the next look. Exposed for tests; `start` calls it.
   */
  async round(signal?: AbortSignal): Promise<number> {
    this.stats.rounds++;
    for (let step = 0; step < 10; step++) {
      const parsed = await this.read(signal);
      this.adopt(parsed);
      const targets: TargetsView = parsed.view.kind === 'valid' ? await this.inject(parsed.cas, signal) : { held: false, addedAt: -Infinity };
      const now = this.o.now();
      const action = decide(parsed.view, now, targets, this.rotation);
      if (action.kind === 'none') return action.recheckAt;
      await this.act(action, parsed, signal);
    }
    return this.o.now(); // still busy (e.g. repeated conflicts): look again soon
  }

  /** Takes the Secret's serving pair as the one to serve (when valid) and its bundle as the one to report. */
  private adopt(parsed: Parsed): void {
    if (parsed.view.kind !== 'valid' || !parsed.serving) return;
    this.bundlePem = parsed.cas.map((c) => c.cert).join('');
    const cur = this.delivered;
    if (cur && cur.cert.equals(parsed.serving.cert) && cur.key.equals(parsed.serving.key)) return;
    this.delivered = parsed.serving;
  }

  private async read(signal?: AbortSignal): Promise<Parsed> {
    let secret: Secret;
    try {
      secret = await this.secrets.get(this.o.secretName, { signal });
    } catch (err) {
      if (isNotFound(err)) return { view: { kind: 'absent' }, cas: [] };
      throw err;
    }
    try {
      return { ...this.parse(secret), secret };
    } catch (err) {
      return { view: { kind: 'invalid', reason: (err as Error).message }, cas: [], secret };
    }
  }

  /** The Secret's contents as rotation.ts sees them; throws (the reason) for anything unusable. */
  private parse(secret: Secret): Omit<Parsed, 'secret'> {
    const field = (k: string): string => {
      const v = secret.data?.[k];
      if (!v) throw new Error(`the Secret has no ${k}`);
      return Buffer.from(v, 'base64').toString('utf8');
    };
    const caCerts = pemBlocks(field('ca.crt'), /^CERTIFICATE$/);
    const caKeys: KeyObject[] = pemBlocks(field('ca.key'), /PRIVATE KEY$/).map((k) => {
      try {
        return createPrivateKey(k);
      } catch {
        throw new Error('ca.key holds a block that is not a private key');
      }
    });
    if (caCerts.length === 0) throw new Error('ca.crt holds no certificate');
    const cas: Ca[] = caCerts.map((cert) => {
      let x509: X509Certificate;
      try {
        x509 = new X509Certificate(cert);
      } catch {
        throw new Error('ca.crt holds a block that is not a certificate');
      }
      if (!x509.ca) throw new Error(`ca.crt: ${x509.subject} is not a CA certificate`);
      const key = caKeys.find((k) => x509.checkPrivateKey(k));
      if (!key) throw new Error(`ca.key has no key for the CA ${x509.subject}`);
      return {
        cert, x509, key: key.export({ type: 'pkcs8', format: 'pem' }).toString(),
        view: { id: caId(x509), notBefore: Date.parse(x509.validFrom), notAfter: Date.parse(x509.validTo) },
      };
    });
    const certPem = field('tls.crt');
    const keyPem = field('tls.key');
    let leaf: X509Certificate;
    try {
      leaf = new X509Certificate(certPem);
    } catch {
      throw new Error('tls.crt is not a certificate');
    }
    let leafKey: KeyObject;
    try {
      leafKey = createPrivateKey(keyPem);
    } catch {
      throw new Error('tls.key is not a private key');
    }
    if (!leaf.checkPrivateKey(leafKey)) throw new Error('tls.key is not the key of tls.crt');
    const signer = cas.find((c) => leaf.checkIssued(c.x509) && leaf.verify(c.x509.publicKey));
    if (!signer) throw new Error('tls.crt is not signed by a CA of ca.crt');
    const ann = secret.metadata?.annotations ?? {};
    // A record earlier than the certificate's notBefore belongs to another certificate (one put in by hand).
    const issued = Date.parse(ann[servingIssuedAtAnnotation] ?? '');
    const issuedAt = Number.isFinite(issued) && issued >= Date.parse(leaf.validFrom) ? issued : undefined;
    const [injBundle, injAt] = (ann[bundleInjectedAnnotation] ?? '').split(' ');
    const injectedAt = Date.parse(injAt ?? '');
    const leafSans = sans(leaf);
    return {
      view: {
        kind: 'valid',
        cas: cas.map((c) => c.view),
        serving: {
          signer: signer.view.id,
          notAfter: Date.parse(leaf.validTo),
          issuedAt,
          namesMatch: leafSans.length === this.wantedSans.length && leafSans.every((s, i) => s === this.wantedSans[i]),
        },
        injected: injBundle && Number.isFinite(injectedAt) ? { bundle: injBundle, at: injectedAt } : undefined,
      },
      cas,
      serving: { cert: Buffer.from(certPem), key: Buffer.from(keyPem) },
    };
  }

  /**
   * Writes mergeBundle(Secret's bundle, target's) into every target that lacks part of it (a write that adds a CA
   * records the time in the target, caAddedAtAnnotation), then answers whether every target now carries every CA of
   * the Secret's bundle, and the latest time a CA was added to one. A target that does not exist, or a CRD without a
   * conversion webhook, has no caller to protect: it does not hold up a rotation (logged once).
   */
  private async inject(cas: Ca[], signal?: AbortSignal): Promise<TargetsView> {
    const wanted = cas.map((c) => ({ cert: c.cert, id: c.view.id, notBefore: c.view.notBefore, notAfter: c.view.notAfter })).sort(byIssue);
    const wantedIds = wanted.map((c) => c.id);
    /** The new caBundle (base64) for a clientConfig, or undefined when it already holds every wanted CA and nothing to drop; and whether it adds a CA. */
    const next = (cc: ClientConfig | undefined): { bundle: string | undefined; adds: boolean } => {
      const current = parseBundle(Buffer.from(cc?.caBundle ?? '', 'base64').toString('utf8'));
      const merged = mergeBundle(wanted, current);
      if (merged.length === current.length && merged.every((c, i) => c.id === current[i]?.id)) return { bundle: undefined, adds: false };
      const had = new Set(current.map((c) => c.id));
      return { bundle: b64(merged.map((c) => c.cert).join('')), adds: merged.some((c) => !had.has(c.id)) };
    };
    const contains = (cc: ClientConfig | undefined): boolean => {
      const ids = new Set(parseBundle(Buffer.from(cc?.caBundle ?? '', 'base64').toString('utf8')).map((c) => c.id));
      return wantedIds.every((id) => ids.has(id));
    };
    const view: TargetsView = { held: true, addedAt: -Infinity };
    const add = (t: TargetsView | undefined): void => {
      if (!t) return;
      view.held &&= t.held;
      view.addedAt = Math.max(view.addedAt, t.addedAt);
    };
    const webhookTargets: [ResourceClient<WebhookConfiguration>, string[]][] = [
      [this.vwcs, this.o.validatingWebhookConfigurations], [this.mwcs, this.o.mutatingWebhookConfigurations],
    ];
    for (const [client, names] of webhookTargets) {
      for (const name of names) {
        add(await this.injectOne(client, name, signal, (obj) => {
          let changed = false;
          let adds = false;
          for (const w of obj.webhooks ?? []) {
            const n = next(w.clientConfig);
            if (n.bundle !== undefined) {
              w.clientConfig = { ...w.clientConfig, caBundle: n.bundle };
              changed = true;
              adds ||= n.adds;
            }
          }
          return { changed, adds, holds: (o) => (o.webhooks ?? []).every((w) => contains(w.clientConfig)) };
        }));
      }
    }
    for (const name of this.o.crds) {
      add(await this.injectOne(this.crdClient, name, signal, (obj) => {
        const wh = obj.spec?.conversion?.webhook;
        if (obj.spec?.conversion?.strategy !== 'Webhook' || !wh) {
          this.warnOnce(`crd/${name}`, `CRD ${name} has no conversion webhook: nothing to inject`);
          return undefined;
        }
        const n = next(wh.clientConfig);
        if (n.bundle !== undefined) wh.clientConfig = { ...wh.clientConfig, caBundle: n.bundle };
        return { changed: n.bundle !== undefined, adds: n.adds, holds: (o) => contains(o.spec?.conversion?.webhook?.clientConfig) };
      }));
    }
    return view;
  }

  /**
   * GET, change (in place), PUT fenced by the resourceVersion read; answers whether the target holds the bundle and
   * since when a CA was last added to it (undefined: no such target, or nothing to inject into). A PUT that adds a CA
   * records the time in the same write; a target that holds the bundle without that record gets it (now).
   */
  private async injectOne<T extends KubeObject>(client: ResourceClient<T>, name: string, signal: AbortSignal | undefined,
    change: (obj: T) => Change<T> | undefined): Promise<TargetsView | undefined> {
    let obj: T;
    try {
      obj = await client.get(name, { signal });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      this.warnOnce(`${client.type.resource}/${name}`, `${client.type.kind} ${name} does not exist (yet): nothing to inject`);
      return undefined;
    }
    this.warned.delete(`${client.type.resource}/${name}`);
    const c = change(obj);
    if (!c) return undefined;
    const now = this.o.now();
    const parsed = Date.parse(obj.metadata?.annotations?.[caAddedAtAnnotation] ?? '');
    const recorded = Number.isFinite(parsed) ? parsed : undefined;
    const stamp = c.adds || (!c.changed && c.holds(obj) && recorded === undefined);
    if (!c.changed && !stamp) return { held: c.holds(obj), addedAt: recorded ?? now };
    if (stamp) obj.metadata = { ...obj.metadata, annotations: { ...obj.metadata?.annotations, [caAddedAtAnnotation]: new Date(now).toISOString() } };
    try {
      const written = await client.update(obj, { signal });
      this.stats.injections++;
      this.log.info({ kind: client.type.kind, name, ...(c.changed ? {} : { only: caAddedAtAnnotation }) }, 'CA bundle injected');
      return { held: c.holds(written), addedAt: stamp ? now : recorded ?? now };
    } catch (err) {
      if (isConflict(err)) return { held: false, addedAt: now }; // changed meanwhile: the next round reads it again
      throw err;
    }
  }

  private warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.log.warn(message);
  }

  /** Carries out `a` as one fenced write of the Secret; a lost race (409) is counted and otherwise ignored. */
  private async act(a: Exclude<Action, { kind: 'none' }>, parsed: Parsed, signal?: AbortSignal): Promise<void> {
    const now = this.o.now();
    const newCa = async (): Promise<{ cert: string; key: string }> =>
      certificateAuthority({ commonName: `${this.o.caCommonName}@${now}`, validityMs: this.rotation.caValidityMs, now: new Date(now) });
    const serve = (ca: { cert: string; key: string }): Promise<{ cert: string; key: string }> =>
      signedCertificate({ ca, commonName: this.dnsNames[0] ?? this.o.serviceName, dnsNames: this.dnsNames, ips: this.o.ips,
        validityMs: this.rotation.servingValidityMs, now: new Date(now) });
    const annotations = { ...parsed.secret?.metadata?.annotations };
    let cas: { cert: string; key: string }[] = parsed.cas;
    let serving: { cert: string; key: string } | undefined = parsed.serving && { cert: parsed.serving.cert.toString(), key: parsed.serving.key.toString() };
    switch (a.kind) {
      case 'create':
      case 'regenerate': {
        if (a.kind === 'regenerate') this.log.error({ reason: a.reason }, 'webhook certificate Secret unusable: generating a new CA and serving certificate (calls fail until the new CA is injected)');
        const ca = await newCa();
        cas = [ca];
        serving = await serve(ca);
        delete annotations[bundleInjectedAnnotation];
        annotations[servingIssuedAtAnnotation] = new Date(now).toISOString();
        break;
      }
      case 'add-ca':
        cas = [...cas, await newCa()];
        this.log.info('CA rotation: adding a new CA to the bundle');
        break;
      case 'record-injected':
        annotations[bundleInjectedAnnotation] = `${a.bundle} ${new Date(now).toISOString()}`;
        break;
      case 'record-issued':
        annotations[servingIssuedAtAnnotation] = new Date(now).toISOString();
        this.log.info('the serving certificate\'s issue time is not recorded: recording now (an old CA is kept for a whole reload grace from now)');
        break;
      case 'renew-serving': {
        const ca = parsed.cas.find((c) => c.view.id === a.signer);
        if (!ca) throw new Error(`renew-serving: no CA ${a.signer}`);
        serving = await serve(ca);
        annotations[servingIssuedAtAnnotation] = new Date(now).toISOString();
        this.log.info({ reason: a.reason, signer: a.signer }, 'issuing a new serving certificate');
        break;
      }
      case 'drop-cas':
        cas = parsed.cas.filter((c) => !a.ids.includes(c.view.id));
        this.log.info({ dropped: a.ids }, 'CA rotation: removing the old CA from the bundle');
        break;
    }
    if (!serving) throw new Error(`${a.kind}: no serving certificate`);
    const secret: Secret = {
      apiVersion: 'v1', kind: 'Secret',
      metadata: {
        ...(parsed.secret?.metadata ?? {}), name: this.o.secretName, namespace: this.o.namespace, annotations,
      },
      type: parsed.secret?.type ?? 'kubernetes.io/tls',
      data: {
        ...parsed.secret?.data,
        'tls.crt': b64(serving.cert), 'tls.key': b64(serving.key),
        'ca.crt': b64(cas.map((c) => c.cert).join('')), 'ca.key': b64(cas.map((c) => c.key).join('')),
      },
    };
    delete secret.metadata?.managedFields;
    try {
      if (parsed.view.kind === 'absent') await this.secrets.create(secret, { signal });
      else await this.secrets.update(secret, { signal }); // carries the resourceVersion read: the fence
      this.stats.won[a.kind] = (this.stats.won[a.kind] ?? 0) + 1;
      this.log.info({ action: a.kind, bundle: cas.map((c) => caId(new X509Certificate(c.cert))) }, 'webhook certificate Secret written');
    } catch (err) {
      if (isAlreadyExists(err) || isConflict(err)) {
        this.stats.lost++;
        this.log.debug({ action: a.kind }, 'another replica wrote the Secret first; re-reading');
        return;
      }
      throw err;
    }
  }
}

