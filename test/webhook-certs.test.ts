/**
 * Self-managed webhook certificates (pkg/webhook/certs) on a real kube-apiserver (startTestEnv): two drivers — two
 * "replicas", each serving a webhook over HTTPS (HttpServerRunnable with its driver as TlsSource) — share one
 * Secret. Exactly one creates it; both serve the same pair; the CA bundle is injected into a
 * ValidatingWebhookConfiguration (one webhook per replica, failurePolicy Fail) and a CRD's conversion webhook. With
 * lifetimes of seconds, serving renewals and a full CA rotation (add → switch → drop) happen while loops make
 * admission calls through the API server (dry-run creates of a ConfigMap both webhooks match): none may fail, and
 * each replica must have presented certificates of both CAs to the API server. Then the Secret is edited into
 * garbage, then into a Secret whose only CA expired (as after an outage longer than the CA's life): each time
 * exactly one replica regenerates it, saying why, and calls succeed again. The replicas authenticate as a
 * ServiceAccount bound to nothing but config/webhook-selfmanaged's Role and ClusterRole (applied from its
 * kustomization's files): those verbs suffice, and the Secret cannot even be listed.
 *
 * Then three edge cases of rotation.ts, each a driver of its own (admin client, its own Secret and
 * ValidatingWebhookConfiguration, no server: nothing calls these webhooks) whose rounds run at instants the test sets
 * (the driver's `now`): a target reset by someone else to the old CA during the propagation wait and re-injected
 * waits a whole propagation delay again before the switch; an issued-at record edited away after a switch is written
 * before the old CA may go, which then waits a whole reload grace; and a start over (Secret deleted) with shorter
 * lifetimes leaves only the new CA in the target, although the old one-year CA expires later.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { connect, type TLSSocket } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { load } from 'js-yaml';
import { Registry } from 'prom-client';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { ApiError } from '../pkg/client/errors.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { newLogger } from '../pkg/log/logger.ts';
import { HttpServerRunnable } from '../pkg/manager/httpserver.ts';
import { certificateAuthority, signedCertificate } from '../pkg/manager/selfsigned.ts';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import {
  caAddedAtAnnotation, caId, SelfManagedCertificates, servingIssuedAtAnnotation, type SelfManagedCertificatesOptions,
} from '../pkg/webhook/certs/selfmanaged.ts';
import { waitFor } from './helpers/cluster.ts';
import { repoRoot } from './helpers/crds.ts';

const ns = 'webhook-certs';
const secretName = 'ts-controller-manager-webhook-server-cert';
// The names config/webhook-selfmanaged's RBAC grants (by resourceNames): the replicas run with exactly that RBAC.
const vwcName = 'ts-controller-manager-validating-webhook-configuration';
const crdName = 'networks.samplecrd.k8s.io';
const s = 1_000;

/** The CA ids of a PEM bundle. */
function bundleIds(pem: string): string[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []).map((c) => caId(new X509Certificate(c)));
}

interface Replica {
  certs: SelfManagedCertificates;
  server: HttpServerRunnable;
  port: number;
  /** Leaf fingerprint → issuer CN of every certificate this replica presented to an admission call. */
  presented: Map<string, string>;
  requests: number;
  logs: string[];
}

/** AdmissionReview v1: allowed, echoing the request uid; records the certificate this connection was served with. */
function admissionHandler(r: { presented: Map<string, string>; requests: number }) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.requests++;
      const local = (req.socket as TLSSocket).getCertificate();
      if (local && 'raw' in local) {
        const x = new X509Certificate(local.raw);
        r.presented.set(x.fingerprint256, x.issuer);
      }
      let uid = '';
      try {
        uid = (JSON.parse(Buffer.concat(chunks).toString()) as { request?: { uid?: string } }).request?.uid ?? '';
      } catch {
        // a conversion or garbage request: answer without uid
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, allowed: true } }));
    });
  };
}

describe('self-managed webhook certificates on a real API server', () => {
  let env: TestEnv;
  const stop = new AbortController();
  const replicas: Replica[] = [];
  const runs: Promise<void>[] = [];

  let client: RestClient;

  before(async () => {
    env = await startTestEnv();
    await env.client.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
    // The manager's ServiceAccount with config/webhook-selfmanaged's RBAC (namespace set as kustomize would).
    await env.client.json('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, { body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'controller-manager' } } });
    const dir = join(repoRoot, 'config', 'webhook-selfmanaged');
    const { resources } = load(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
    for (const file of resources) {
      const doc = load(readFileSync(join(dir, file), 'utf8')) as { kind: string; metadata: { namespace?: string }; subjects?: { namespace: string }[] };
      for (const subject of doc.subjects ?? []) subject.namespace = ns;
      const namespaced = doc.kind === 'Role' || doc.kind === 'RoleBinding';
      const plural = `${doc.kind.toLowerCase()}s`;
      await env.client.json('POST', `/apis/rbac.authorization.k8s.io/v1/${namespaced ? `namespaces/${ns}/` : ''}${plural}`, { body: doc });
    }
    const token = await env.client.json<{ status: { token: string } }>('POST', `/api/v1/namespaces/${ns}/serviceaccounts/controller-manager/token`,
      { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } } });
    const cluster = env.kubeConfig.getCurrentCluster();
    assert.ok(cluster);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [cluster], users: [{ name: 'sa', token: token.status.token }],
      contexts: [{ name: 'sa', cluster: cluster.name, user: 'sa' }], currentContext: 'sa',
    });
    client = new RestClient({ kubeConfig, registry: new Registry(), userAgent: 'webhook-certs-test' });
    await assert.rejects(client.json('GET', `/api/v1/namespaces/${ns}/secrets`), (err: unknown) => err instanceof ApiError && err.status === 403,
      'the ServiceAccount cannot list Secrets');
  });
  after(async () => {
    stop.abort();
    await Promise.allSettled(runs);
    await client?.close();
    await env?.stop();
  });

  test('two replicas, one Secret; injection; ≥ 1 000 admission calls across serving renewals and a CA rotation with 0 failures; garbage and an expired CA regenerated', async (t) => {
    // Two replicas start at the same instant: both find no Secret and race to create it.
    for (let i = 0; i < 2; i++) {
      const logs: string[] = [];
      const stream = new PassThrough();
      stream.on('data', (line: Buffer) => logs.push(line.toString()));
      const certs = new SelfManagedCertificates({
        client, secretName, namespace: ns, serviceName: 'webhook-service', ips: ['127.0.0.1'],
        validatingWebhookConfigurations: [vwcName], crds: [crdName],
        servingValidityMs: 12 * s, caValidityMs: 36 * s, propagationMs: 2 * s, reloadGraceMs: 1 * s,
        pollIntervalMs: 400, retryMs: 200, logger: newLogger({ level: 'debug', destination: stream }),
      });
      const r: Replica = { certs, server: undefined as unknown as HttpServerRunnable, port: 0, presented: new Map(), requests: 0, logs };
      r.server = new HttpServerRunnable({ name: `webhook-${i}`, bindAddress: '127.0.0.1:0', handler: admissionHandler(r), tls: certs });
      replicas.push(r);
    }
    for (const r of replicas) runs.push(r.server.start(stop.signal));
    for (const r of replicas) r.port = (await r.server.listening).port;
    const [r0, r1] = replicas as [Replica, Replica];

    const won = (kind: string): number => replicas.reduce((n, r) => n + ((r.certs.stats.won as Record<string, number>)[kind] ?? 0), 0);
    assert.equal(won('create'), 1, 'exactly one replica created the Secret');
    const secret = await env.client.json<{ data: Record<string, string> }>('GET', `/api/v1/namespaces/${ns}/secrets/${secretName}`);
    const firstCa = new X509Certificate(Buffer.from(secret.data['ca.crt'] ?? '', 'base64'));
    assert.equal(r0.certs.caBundle, r1.certs.caBundle, 'both replicas read the same bundle');
    t.diagnostic(`create: won ${won('create')}, lost ${r0.certs.stats.lost + r1.certs.stats.lost}`);

    // The targets, created after the Secret without a caBundle (as `kubectl apply` of kustomize output would).
    const webhook = (name: string, port: number): Record<string, unknown> => ({
      name, admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail', timeoutSeconds: 10,
      clientConfig: { url: `https://127.0.0.1:${port}/validate` },
      objectSelector: { matchLabels: { 'webhook-certs-test': 'on' } },
      rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['configmaps'], scope: 'Namespaced' }],
    });
    await env.client.json('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', { body: {
      apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: vwcName },
      webhooks: [webhook('r0.certs.example.com', r0.port), webhook('r1.certs.example.com', r1.port)],
    } });
    await env.client.json('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: {
      apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition',
      metadata: { name: crdName, annotations: { 'api-approved.kubernetes.io': 'unapproved, experimental-only' } },
      spec: {
        group: 'samplecrd.k8s.io', scope: 'Namespaced', names: { plural: 'networks', singular: 'network', kind: 'Network', listKind: 'NetworkList' },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
        conversion: { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: `https://127.0.0.1:${r0.port}/convert` } } },
      },
    } });
    interface Cfg { webhooks: { clientConfig: { caBundle?: string } }[] }
    interface CrdObj { spec: { conversion: { webhook: { clientConfig: { caBundle?: string } } } } }
    const injected = async (): Promise<string[]> => {
      const vwc = await env.client.json<Cfg>('GET', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${vwcName}`);
      const crd = await env.client.json<CrdObj>('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
      return [...vwc.webhooks.map((w) => w.clientConfig.caBundle ?? ''), crd.spec.conversion.webhook.clientConfig.caBundle ?? '']
        .map((b) => Buffer.from(b, 'base64').toString());
    };
    await waitFor('the CA bundle injected into both webhooks and the CRD', async () => (await injected()).every((b) => b === r0.certs.caBundle), { timeoutMs: 15_000 });

    // Both replicas present the same certificate.
    const peer = (port: number): Promise<string> => new Promise((resolve, reject) => {
      const sock = connect({ host: '127.0.0.1', port, ca: r0.certs.caBundle, servername: 'webhook-service.webhook-certs.svc' }, () => {
        resolve(sock.getPeerX509Certificate()?.fingerprint256 ?? '');
        sock.end();
      });
      sock.on('error', reject);
    });
    assert.equal(await peer(r0.port), await peer(r1.port), 'both replicas serve the same pair');

    // Admission calls through the API server: a dry-run create of a ConfigMap both webhooks match.
    const call = (): Promise<unknown> => env.client.json('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      query: { dryRun: 'All' },
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'probe-', labels: { 'webhook-certs-test': 'on' } } },
    });
    // The API server picks up the configuration within its informer's lag: the first call that passes starts the count.
    await waitFor('a first admission call passes both webhooks', async () => call().then(() => true, () => false), { timeoutMs: 15_000 });

    let calls = 0;
    const failures: string[] = [];
    const rotated = (): boolean => {
      const issuers = (r: Replica): Set<string> => new Set(r.presented.values());
      return won('drop-cas') >= 1 && !bundleIds(r0.certs.caBundle).includes(caId(firstCa)) &&
        issuers(r0).size >= 2 && issuers(r1).size >= 2;
    };
    const deadline = Date.now() + 120 * s;
    const loop = async (): Promise<void> => {
      while ((calls < 1_000 || !rotated()) && Date.now() < deadline) {
        try {
          await call();
        } catch (err) {
          failures.push(err instanceof ApiError ? err.message : String(err));
        }
        calls++;
      }
    };
    const t0 = Date.now();
    await Promise.all([loop(), loop(), loop(), loop()]);
    const secs = (Date.now() - t0) / 1000;
    t.diagnostic(`${calls} admission calls in ${secs.toFixed(1)} s, ${failures.length} failed; requests r0=${r0.requests} r1=${r1.requests}; ` +
      `Secret writes won: ${JSON.stringify(Object.fromEntries(['create', 'add-ca', 'record-injected', 'renew-serving', 'drop-cas'].map((k) => [k, won(k)])))}, ` +
      `lost ${r0.certs.stats.lost + r1.certs.stats.lost}; injections ${r0.certs.stats.injections + r1.certs.stats.injections}; ` +
      `certificates presented r0=${r0.presented.size} (issuers ${new Set(r0.presented.values()).size}) r1=${r1.presented.size} (issuers ${new Set(r1.presented.values()).size})`);
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${calls} admission calls failed`);
    assert.ok(calls >= 1_000, `${calls} calls`);
    assert.ok(rotated(), 'a CA rotation completed and both replicas presented certificates of both CAs');
    assert.ok(won('add-ca') >= 1 && won('renew-serving') >= 2, 'the new CA was added and serving certificates re-issued');
    assert.ok(r0.presented.size >= 3 && r1.presented.size >= 3, 'each replica presented at least 3 serving certificates');
    assert.equal(won('regenerate'), 0);
    // The targets carry exactly the Secret's bundle once the rotation settled.
    await waitFor('targets equal the Secret bundle', async () => (await injected()).every((b) => b === r0.certs.caBundle && b === r1.certs.caBundle), { timeoutMs: 10_000 });

    /**
     * An edit by hand (as `kubectl edit`): read, change, PUT with the resourceVersion read. The replicas keep writing
     * the Secret (injection records, renewals), so the PUT may meet a newer version: the server refuses it (409) and
     * the edit is made again on the fresh copy, as kubectl does (CI of 05a82bb failed on the unretried 409).
     */
    const editSecret = async (change: (data: Record<string, string>) => void): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        const cur = await env.client.json<{ metadata: Record<string, unknown>; data: Record<string, string> }>('GET', `/api/v1/namespaces/${ns}/secrets/${secretName}`);
        change(cur.data);
        try {
          await env.client.json('PUT', `/api/v1/namespaces/${ns}/secrets/${secretName}`, { body: cur });
          return;
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 409) || attempt >= 10) throw err;
        }
      }
    };

    // A Secret edited by hand into garbage: exactly one replica regenerates it, logging why; calls pass again.
    await editSecret((data) => { data['tls.key'] = Buffer.from('not a key').toString('base64'); });
    await waitFor('one replica regenerated the Secret', () => Promise.resolve(won('regenerate') === 1), { timeoutMs: 15_000 });
    const why = replicas.flatMap((r) => r.logs).find((l) => l.includes('Secret unusable'));
    assert.match(why ?? '', /tls\.key is not a private key/);
    await waitFor('admission calls pass again after the regeneration', async () => call().then(() => true, () => false), { timeoutMs: 20_000 });
    assert.equal(won('regenerate'), 1, 'exactly one regeneration');

    // As after an outage longer than the CA's life: a well-formed Secret whose every CA has expired.
    const past = new Date(Date.now() - 100 * s);
    const oldCa = await certificateAuthority({ commonName: 'expired-ca', validityMs: 10 * s, now: past });
    const oldLeaf = await signedCertificate({ ca: oldCa, commonName: 'webhook-service.webhook-certs.svc', dnsNames: ['webhook-service.webhook-certs.svc'], ips: ['127.0.0.1'], validityMs: 5 * s, now: past });
    await editSecret((data) => Object.assign(data, {
      'ca.crt': Buffer.from(oldCa.cert).toString('base64'), 'ca.key': Buffer.from(oldCa.key).toString('base64'),
      'tls.crt': Buffer.from(oldLeaf.cert).toString('base64'), 'tls.key': Buffer.from(oldLeaf.key).toString('base64'),
    }));
    await waitFor('one replica regenerated the expired Secret', () => Promise.resolve(won('regenerate') === 2), { timeoutMs: 15_000 });
    assert.ok(replicas.flatMap((r) => r.logs).some((l) => l.includes('Secret unusable') && l.includes('every CA in the Secret has expired')));
    await waitFor('admission calls pass again after the expired CA was replaced', async () => call().then(() => true, () => false), { timeoutMs: 20_000 });
    assert.equal(won('regenerate'), 2, 'exactly one regeneration per fault');
  });

  describe('edge cases, rounds at instants the test sets', () => {
    interface SecretObj { metadata: { annotations?: Record<string, string>; resourceVersion?: string }; data: Record<string, string> }
    interface VwcObj { metadata: { annotations?: Record<string, string> }; webhooks: { clientConfig: { caBundle?: string } }[] }
    const secretPath = (name: string): string => `/api/v1/namespaces/${ns}/secrets/${name}`;
    const vwcPath = (name: string): string => `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${name}`;
    const pemOf = (b64: string | undefined): string => Buffer.from(b64 ?? '', 'base64').toString('utf8');
    /** The Secret: its CA ids (in order), the id of the CA that signed tls.crt, its annotations. */
    const secretState = async (name: string): Promise<{ cas: string[]; signer: string; annotations: Record<string, string>; raw: SecretObj }> => {
      const raw = await env.client.json<SecretObj>('GET', secretPath(name));
      const leaf = new X509Certificate(pemOf(raw.data['tls.crt']));
      const cas = (pemOf(raw.data['ca.crt']).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []).map((c) => new X509Certificate(c));
      const signer = cas.find((ca) => leaf.checkIssued(ca) && leaf.verify(ca.publicKey));
      return { cas: cas.map(caId), signer: signer ? caId(signer) : '?', annotations: raw.metadata.annotations ?? {}, raw };
    };
    const targetState = async (name: string): Promise<{ cas: string[]; addedAt: string | undefined; raw: VwcObj }> => {
      const raw = await env.client.json<VwcObj>('GET', vwcPath(name));
      return { cas: bundleIds(pemOf(raw.webhooks[0]?.clientConfig.caBundle)), addedAt: raw.metadata.annotations?.[caAddedAtAnnotation], raw };
    };
    /** A target nothing calls (its one webhook matches only ConfigMaps labelled with its own name). */
    const createTarget = async (name: string): Promise<void> => {
      await env.client.json('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', { body: {
        apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name },
        webhooks: [{
          name: `${name}.certs.example.com`, admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail',
          clientConfig: { url: 'https://127.0.0.1:1/validate' }, objectSelector: { matchLabels: { 'webhook-certs-never': name } },
          rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['configmaps'], scope: 'Namespaced' }],
        }],
      } });
    };
    /** A driver whose clock is `clock.t`: serving 12 s, CA 36 s, propagation 1 s, reload grace 1 s. */
    const edgeDriver = (secret: string, target: string, clock: { t: number }, extra: Partial<SelfManagedCertificatesOptions> = {}): SelfManagedCertificates =>
      new SelfManagedCertificates({
        client: env.client, secretName: secret, namespace: ns, serviceName: 'edge', validatingWebhookConfigurations: [target],
        servingValidityMs: 12 * s, caValidityMs: 36 * s, propagationMs: 1 * s, reloadGraceMs: 1 * s, pollIntervalMs: 400, now: () => clock.t, ...extra,
      });
    /**
     * A target and a driver for Secret and target `name`, whose rounds run from t0 to t0 + 25 s (serving renewals at 9
     * and 17 s, the CA's renewal point at 24 s): at 25 s the Secret holds {A, B}, serving still signed by A, the bundle
     * recorded injected at 25 s.
     */
    const toPropagating = async (name: string): Promise<{ d: SelfManagedCertificates; clock: { t: number }; secret: string; target: string; t0: number; A: string; B: string }> => {
      const secret = name;
      const target = name;
      await createTarget(target);
      const clock = { t: Date.now() };
      const d = edgeDriver(secret, target, clock);
      const t0 = clock.t;
      for (const at of [0, 9, 17, 25]) {
        clock.t = t0 + at * s;
        await d.round();
      }
      const st = await secretState(secret);
      assert.equal(st.cas.length, 2, `two CAs after the CA's renewal point: ${st.cas.join(',')}`);
      const [A = '', B = ''] = st.cas;
      assert.equal(st.signer, A, 'still served by the old CA (propagating)');
      assert.equal(st.annotations['webhook-certs.ts-controller-manager.io/bundle-injected'], `${A},${B} ${new Date(t0 + 25 * s).toISOString()}`);
      const tg = await targetState(target);
      assert.deepEqual(tg.cas, [A, B]);
      assert.equal(tg.addedAt, new Date(t0 + 25 * s).toISOString(), 'the target records when B was added to it');
      return { d, clock, secret, target, t0, A, B };
    };

    test('a target reset to the old CA during the propagation wait and re-injected: the switch waits a whole propagation delay from the re-injection', async () => {
      const { d, clock, secret, target, t0, A, B } = await toPropagating('edge-reinjected');
      // Someone (a `kubectl apply` of an older copy) puts back the bundle of A alone: calls still pass, B is gone.
      const tg = await targetState(target);
      const aOnly = (tg.raw.webhooks[0]?.clientConfig.caBundle ?? '');
      const aPem = (pemOf(aOnly).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----\n?/g) ?? []).find((c) => caId(new X509Certificate(c)) === A) ?? '';
      for (const w of tg.raw.webhooks) w.clientConfig.caBundle = Buffer.from(aPem).toString('base64');
      await env.client.json('PUT', vwcPath(target), { body: tg.raw });
      assert.deepEqual((await targetState(target)).cas, [A]);
      // 1.5 s after the Secret's record (the delay is 1 s): B is re-added, and the switch must wait for API servers
      // that still hold the reset bundle {A}.
      clock.t = t0 + 26.5 * s;
      await d.round();
      const after = await targetState(target);
      assert.deepEqual(after.cas, [A, B], 'B re-injected');
      assert.equal(after.addedAt, new Date(clock.t).toISOString(), 'the re-injection is recorded in the target, in the same write');
      assert.equal((await secretState(secret)).signer, A, 'no switch within a propagation delay of the re-injection');
      clock.t = t0 + 27.4 * s;
      await d.round();
      assert.equal((await secretState(secret)).signer, A, 'nor 0.9 s after it');
      clock.t = t0 + 27.5 * s;
      await d.round();
      assert.equal((await secretState(secret)).signer, B, 'switched once the delay passed');
    });

    test('an issued-at record edited away after a switch: it is written first, and the old CA stays a whole reload grace from then', async () => {
      const { d, clock, secret, target, t0, A, B } = await toPropagating('edge-issued-at');
      clock.t = t0 + 26 * s;
      await d.round();
      const switched = await secretState(secret);
      assert.equal(switched.signer, B, 'switched to the new CA');
      assert.deepEqual(switched.cas, [A, B], 'A kept for the reload grace');
      // The record edited away (by hand, or by a tool that rewrites the Secret's annotations).
      const raw = switched.raw;
      delete raw.metadata.annotations?.[servingIssuedAtAnnotation];
      await env.client.json('PUT', secretPath(secret), { body: raw });
      // 0.1 s later: the certificate's own notBefore is an hour back; nothing may be guessed from it.
      clock.t = t0 + 26.1 * s;
      await d.round();
      const recorded = await secretState(secret);
      assert.deepEqual(recorded.cas, [A, B], 'A not dropped');
      assert.equal(recorded.annotations[servingIssuedAtAnnotation], new Date(clock.t).toISOString(), 'the issue time recorded as now');
      clock.t = t0 + 27 * s;
      await d.round();
      assert.deepEqual((await secretState(secret)).cas, [A, B], 'A kept 0.9 s after the record');
      clock.t = t0 + 27.1 * s;
      await d.round();
      assert.deepEqual((await secretState(secret)).cas, [B], 'A dropped a whole reload grace after the record');
      assert.deepEqual((await targetState(target)).cas, [B], 'and removed from the target');
    });

    test('a start over (Secret deleted) with shorter lifetimes: the first injection leaves only the new CA in the target, although the old one-year CA expires later', async () => {
      const secret = 'edge-start-over';
      const target = 'edge-start-over';
      await createTarget(target);
      const clock = { t: Date.now() };
      // config/default's lifetimes (CA 1 year, serving 90 days).
      const long = edgeDriver(secret, target, clock, { servingValidityMs: undefined, caValidityMs: undefined, propagationMs: undefined, reloadGraceMs: undefined, pollIntervalMs: undefined });
      await long.round();
      const [yearCa = ''] = (await secretState(secret)).cas;
      assert.deepEqual((await targetState(target)).cas, [yearCa]);
      // Start over: no replica left, the Secret deleted; the next replica runs with CA 36 s, serving 12 s.
      await env.client.json('DELETE', secretPath(secret));
      clock.t += 2 * s;
      const short = edgeDriver(secret, target, clock);
      await short.round();
      const [newCa = ''] = (await secretState(secret)).cas;
      assert.notEqual(newCa, yearCa);
      assert.deepEqual((await targetState(target)).cas, [newCa], 'only the new CA in the target (no emptying by hand)');
    });
  });
});
