/**
 * The readiness deadlock of a process that serves the conversion webhook its own caches need (docs/helm.md, found on
 * the real node: the webhooks turned on while a Network was stored as v1 left the new manager Pod never Ready). The
 * API server calls a Service's webhook only through Ready endpoints; a manager whose `/readyz` waited for a cache that
 * cannot list until the API server reaches THIS process's /convert would wait forever when no other replica serves it.
 *
 * Real kube-apiserver (startTestEnv): the test CRD (test/testdata/widgets-crd.yaml) first without conversion and stored
 * as v1, one Widget written; then stored as v2 with its conversion webhook at a `url` where nothing answers (the
 * Service without a Ready endpoint). A manager that registers the Widget conversion and watches Widgets in v2: its
 * Widget cache cannot sync (the API server's "conversion webhook … failed"), and its `informers` readiness check
 * passes all the same; a manager that serves no such conversion stays not ready, naming the cache. Then the CRD points
 * at the first manager (as a Service does once its Pod is Ready): its cache syncs through its own /convert.
 *
 * The exception is only for "nobody answers" (pkg/runtime/conversionreach.ts): a manager whose conversion answers
 * `Failure` (a bug in its converter — here one whose message even says "connection refused") and a manager the API
 * server reaches but whose certificate the CRD's caBundle does not trust (x509) both stay not ready, with the
 * API server's message in the reason: becoming Ready would not help them, their caches would never sync.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import type { ResourceType } from '../pkg/apimachinery/resource.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { selfSignedCertificate } from '../pkg/manager/selfsigned.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import { applyCRDs, readCRDs, type CustomResourceDefinition } from '../pkg/testing/crds.ts';
import { waitFor } from './helpers/cluster.ts';
import { freePort } from '../pkg/testing/process.ts';
import { repoRoot } from './helpers/crds.ts';

const group = 'webhooktest.example.com';
const widgetsV2: ResourceType = { group, version: 'v2', resource: 'widgets', kind: 'Widget', namespaced: true };
interface Widget extends KubeObject { spec: Record<string, unknown> }
type CrdSpec = {
  conversion?: { strategy: string; webhook?: { conversionReviewVersions: string[]; clientConfig: { url: string; caBundle?: string } } };
  versions: { name: string; storage: boolean }[];
};

let env: TestEnv;
const stops: (() => Promise<void>)[] = [];

/** A converter with a bug: every v1 → v2 conversion fails, with a message about its own backend being unreachable. */
const buggyToHub = (): never => {
  throw new Error('widget backend: connect ECONNREFUSED 10.0.0.9:443 (connection refused)');
};

function manager(serveConversion: boolean, tls: { cert: string; key: string }, opts: { toHub?: (o: KubeObject) => KubeObject; port?: number } = {}): { mgr: ControllerManager; started: Promise<number> } {
  const { toHub, port = 0 } = opts;
  const mgr = new ControllerManager({
    kubeConfig: env.kubeConfig, registry: new Registry(), logger: silentLogger,
    ...(serveConversion ? { webhook: { bindAddress: `127.0.0.1:${port}`, tls: { start: () => Promise.resolve({ cert: Buffer.from(tls.cert), key: Buffer.from(tls.key) }) } } } : {}),
  });
  if (serveConversion) {
    mgr.webhook<Widget>(widgetsV2).withConversion({
      hub: 'v2',
      spokes: {
        v1: {
          toHub: toHub ?? ((o) => { const { count, ...rest } = (o as Widget).spec; return { ...o, spec: { ...rest, replicas: count } }; }),
          fromHub: (h) => { const { replicas, ...rest } = (h as Widget).spec; return { ...h, spec: { ...rest, count: replicas } }; },
        },
      },
    }).complete();
  }
  mgr.factory.informerFor(widgetsV2);
  const ac = new AbortController();
  const started = mgr.start(ac.signal);
  stops.push(async () => { ac.abort(); await started; });
  return { mgr, started };
}

const path = join(repoRoot, 'test', 'testdata', 'widgets-crd.yaml');
function crd(edit: (spec: CrdSpec) => void): CustomResourceDefinition {
  const [c] = readCRDs([path]);
  assert.ok(c);
  edit(c.spec as unknown as CrdSpec);
  return c;
}
const storedAs = (version: string) => (spec: CrdSpec): void => {
  for (const v of spec.versions) v.storage = v.name === version;
};
/** The CRD stored as v2, converted by the webhook at `url` (trusting `caBundle`). */
const convertAt = (url: string, caBundle: string): CustomResourceDefinition => crd((s) => {
  storedAs('v2')(s);
  s.conversion = { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { url, caBundle } } };
});
/** Replaced, not applyCRDs: that waits for lists of every served version, which fail by design here. */
async function replace(c: CustomResourceDefinition): Promise<void> {
  const url = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${c.metadata?.name ?? ''}`;
  const current = await env.client.json<CustomResourceDefinition>('GET', url);
  await env.client.json('PUT', url, { body: { ...c, metadata: { ...c.metadata, resourceVersion: current.metadata?.resourceVersion } } });
}
/**
 * Resolves once the API server itself lists Widgets in v2 through the conversion webhook at `port` and gets nobody
 * there (connection refused): it has loaded the CRD as last replaced (a cache started before could still list
 * through the previous conversion settings and sync).
 */
async function apiServerReaches(port: number): Promise<void> {
  let last = '';
  await waitFor(`the API server calling the conversion webhook at port ${port}`, () =>
    env.client.json('GET', `/apis/${group}/v2/widgets`).then(() => false, (err: unknown) => {
      last = (err as Error).message;
      return last.includes(`127.0.0.1:${port}: connect: connection refused`);
    }), { timeoutMs: 60_000 }).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; last: ${last}`);
  });
}

/** The manager's Widget cache fails on the conversion webhook with a message matching `why`. */
async function failingOnConversion(name: string, mgr: ControllerManager, why: RegExp): Promise<string> {
  let seen: string[] = [];
  let line = '';
  await waitFor(`${name}: the Widget cache failing on the conversion webhook (${String(why)})`, () => {
    seen = mgr.factory.unsyncedCaches();
    line = seen.find((l) => /widgets\.webhooktest\.example\.com\/v2 .*conversion webhook for .* failed/.test(l) && why.test(l)) ?? '';
    return line !== '';
  }, { timeoutMs: 60_000 }).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; unsynced: ${seen.join(' | ') || 'none'}`);
  });
  return line;
}

before(async () => {
  env = await startTestEnv();
  // Before the webhooks: no conversion, stored as v1, one Widget written.
  await applyCRDs(env.client, [crd((s) => { storedAs('v1')(s); s.conversion = { strategy: 'None' }; })], [path]);
  await waitFor('Widget v1 accepted', async () => {
    await env.client.json('POST', `/apis/${group}/v1/namespaces/default/widgets`, {
      body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'stored-as-v1' }, spec: { count: 2 } },
    });
    return true;
  }, { timeoutMs: 30_000 });
});
after(async () => {
  for (const stop of stops.reverse()) await stop();
  await env?.stop();
});

describe('a cache that needs this process\'s own conversion webhook', () => {
  test('does not hold /readyz (the informers check passes while it cannot list); a process that serves no such conversion is not ready; once the API server reaches it, the cache syncs', async (t) => {
    const tls = await selfSignedCertificate({ commonName: 'selfconversion', ips: ['127.0.0.1'] });
    const caBundle = Buffer.from(tls.cert).toString('base64');
    // The webhooks on: stored as v2, converted by a webhook nothing answers yet (a Service with no Ready endpoint).
    const nobody = await freePort();
    await replace(convertAt(`https://127.0.0.1:${nobody}/convert`, caBundle));
    await apiServerReaches(nobody);

    const serving = manager(true, tls);
    const other = manager(false, tls);
    for (const [name, { mgr }] of [['serving', serving], ['other', other]] as const) {
      const line = await failingOnConversion(name, mgr, /connection refused/);
      t.diagnostic(`${name}: ${line}`);
    }
    const [servingReady] = await serving.mgr.health.run('readyz', { only: 'informers' });
    assert.deepEqual(servingReady, { name: 'informers', ok: true }, 'the process serving that conversion is ready (it must be, to receive the calls)');
    const [otherReady] = await other.mgr.health.run('readyz', { only: 'informers' });
    assert.equal(otherReady?.ok, false, 'a process that does not serve it waits for the cache');
    assert.match(otherReady?.reason ?? '', /caches not synced: widgets\.webhooktest\.example\.com\/v2 \(Widget\).*conversion webhook for .* failed/);

    // Ready, it becomes the webhook's endpoint: the list is retried and converts the v1-stored Widget through it.
    const { port } = await serving.mgr.webhookServer!.listening;
    await replace(convertAt(`https://127.0.0.1:${port}/convert`, caBundle));
    await waitFor('the serving process\'s Widget cache synced', () => serving.mgr.factory.unsyncedCaches().length === 0, { timeoutMs: 90_000 });
    const cached = serving.mgr.factory.informerFor<Widget>(widgetsV2).lister().list();
    assert.deepEqual(cached.map((w) => [w.metadata?.name, w.apiVersion, w.spec]), [['stored-as-v1', `${group}/v2`, { replicas: 2 }]]);
  });

  test('a conversion that answers Failure (a bug in the converter, whose message says "connection refused") holds /readyz: the process does not turn Ready', async (t) => {
    const tls = await selfSignedCertificate({ commonName: 'selfconversion-failure', ips: ['127.0.0.1'] });
    const port = await freePort();
    await replace(convertAt(`https://127.0.0.1:${port}/convert`, Buffer.from(tls.cert).toString('base64')));
    await apiServerReaches(port);
    const buggy = manager(true, tls, { toHub: buggyToHub, port });
    const line = await failingOnConversion('buggy', buggy.mgr, /widget backend: connect ECONNREFUSED/);
    t.diagnostic(line);
    const checks = await buggy.mgr.health.run('readyz');
    const informers = checks.find((c) => c.name === 'informers');
    assert.equal(informers?.ok, false, 'the informers check fails: the cache will not sync whatever happens to readiness');
    assert.match(informers?.reason ?? '', /caches not synced: widgets\.webhooktest\.example\.com\/v2 \(Widget\).*conversion webhook for .* failed: widget backend: connect ECONNREFUSED/);
    assert.ok(checks.some((c) => c.name === 'webhook-server' && c.ok), 'the webhook server itself is serving (it is its answer that fails)');
  });

  test('a conversion the API server cannot verify (x509: the caBundle is not the CA of the serving certificate) holds /readyz', async (t) => {
    const tls = await selfSignedCertificate({ commonName: 'selfconversion-x509', ips: ['127.0.0.1'] });
    const stranger = await selfSignedCertificate({ commonName: 'another-ca', ips: ['127.0.0.1'] });
    const port = await freePort();
    await replace(convertAt(`https://127.0.0.1:${port}/convert`, Buffer.from(stranger.cert).toString('base64')));
    await apiServerReaches(port);
    const untrusted = manager(true, tls, { port });
    const line = await failingOnConversion('untrusted', untrusted.mgr, /x509: certificate signed by unknown authority/);
    t.diagnostic(line);
    const [informers] = await untrusted.mgr.health.run('readyz', { only: 'informers' });
    assert.equal(informers?.ok, false, 'not ready: the API server reaches it, and refuses its certificate');
    assert.match(informers?.reason ?? '', /caches not synced: widgets\.webhooktest\.example\.com\/v2 \(Widget\).*x509: certificate signed by unknown authority/);
  });
});
