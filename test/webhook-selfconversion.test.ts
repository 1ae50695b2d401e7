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

function manager(serveConversion: boolean, tls: { cert: string; key: string }): { mgr: ControllerManager; started: Promise<number> } {
  const mgr = new ControllerManager({
    kubeConfig: env.kubeConfig, registry: new Registry(), logger: silentLogger,
    ...(serveConversion ? { webhook: { bindAddress: '127.0.0.1:0', tls: { start: () => Promise.resolve({ cert: Buffer.from(tls.cert), key: Buffer.from(tls.key) }) } } } : {}),
  });
  if (serveConversion) {
    mgr.webhook<Widget>(widgetsV2).withConversion({
      hub: 'v2',
      spokes: {
        v1: {
          toHub: (o) => { const { count, ...rest } = (o as Widget).spec; return { ...o, spec: { ...rest, replicas: count } }; },
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

before(async () => {
  env = await startTestEnv();
});
after(async () => {
  for (const stop of stops.reverse()) await stop();
  await env?.stop();
});

describe('a cache that needs this process\'s own conversion webhook', () => {
  test('does not hold /readyz (the informers check passes while it cannot list); a process that serves no such conversion is not ready; once the API server reaches it, the cache syncs', async () => {
    const tls = await selfSignedCertificate({ commonName: 'selfconversion', ips: ['127.0.0.1'] });
    const caBundle = Buffer.from(tls.cert).toString('base64');
    const path = join(repoRoot, 'test', 'testdata', 'widgets-crd.yaml');
    const crd = (edit: (spec: CrdSpec) => void): CustomResourceDefinition => {
      const [c] = readCRDs([path]);
      assert.ok(c);
      edit(c.spec as unknown as CrdSpec);
      return c;
    };
    const storedAs = (version: string) => (spec: CrdSpec): void => {
      for (const v of spec.versions) v.storage = v.name === version;
    };
    // Before the webhooks: no conversion, stored as v1, one Widget written.
    await applyCRDs(env.client, [crd((s) => { storedAs('v1')(s); s.conversion = { strategy: 'None' }; })], [path]);
    await waitFor('Widget v1 accepted', async () => {
      await env.client.json('POST', `/apis/${group}/v1/namespaces/default/widgets`, {
        body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'stored-as-v1' }, spec: { count: 2 } },
      });
      return true;
    }, { timeoutMs: 30_000 });
    // The webhooks on: stored as v2, converted by a webhook nothing answers yet (a Service with no Ready endpoint).
    const nobody = await freePort();
    const convertAt = (url: string): CustomResourceDefinition => crd((s) => {
      storedAs('v2')(s);
      s.conversion = { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { url, caBundle } } };
    });
    // (Replaced, not applyCRDs: that waits for lists of every served version, which now fail by design.)
    const replace = async (c: CustomResourceDefinition): Promise<void> => {
      const url = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${c.metadata?.name ?? ''}`;
      const current = await env.client.json<CustomResourceDefinition>('GET', url);
      await env.client.json('PUT', url, { body: { ...c, metadata: { ...c.metadata, resourceVersion: current.metadata?.resourceVersion } } });
    };
    await replace(convertAt(`https://127.0.0.1:${nobody}/convert`));

    const serving = manager(true, tls);
    const other = manager(false, tls);
    for (const [name, { mgr }] of [['serving', serving], ['other', other]] as const) {
      await waitFor(`${name}: the Widget cache failing on the conversion webhook`,
        () => mgr.factory.unsyncedCaches().some((l) => /widgets\.webhooktest\.example\.com\/v2 .*conversion webhook for .* failed/.test(l)), { timeoutMs: 60_000 });
    }
    const [servingReady] = await serving.mgr.health.run('readyz', { only: 'informers' });
    assert.deepEqual(servingReady, { name: 'informers', ok: true }, 'the process serving that conversion is ready (it must be, to receive the calls)');
    const [otherReady] = await other.mgr.health.run('readyz', { only: 'informers' });
    assert.equal(otherReady?.ok, false, 'a process that does not serve it waits for the cache');
    assert.match(otherReady?.reason ?? '', /caches not synced: widgets\.webhooktest\.example\.com\/v2 \(Widget\).*conversion webhook for .* failed/);

    // Ready, it becomes the webhook's endpoint: the list is retried and converts the v1-stored Widget through it.
    const { port } = await serving.mgr.webhookServer!.listening;
    await replace(convertAt(`https://127.0.0.1:${port}/convert`));
    await waitFor('the serving process\'s Widget cache synced', () => serving.mgr.factory.unsyncedCaches().length === 0, { timeoutMs: 90_000 });
    const cached = serving.mgr.factory.informerFor<Widget>(widgetsV2).lister().list();
    assert.deepEqual(cached.map((w) => [w.metadata?.name, w.apiVersion, w.spec]), [['stored-as-v1', `${group}/v2`, { replicas: 2 }]]);
  });
});
