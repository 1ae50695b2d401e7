/**
 * The informer machinery against the REAL API server (issue 3): shared watches, reconnection after a network cut,
 * recovery from a kube-apiserver restart, relist after a 410 forced by etcd compaction, namespace scope.
 *
 * Tests that stop kube-apiserver or need `--watch-cache=false` (so a watch from a compacted resourceVersion gets 410
 * from etcd instead of being served from the watch cache) use a private minimal control plane.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { Registry } from 'prom-client';
import { RestClient } from '../pkg/client/rest.ts';
import type { RawResponse, RequestOptions, Verb } from '../pkg/client/request.ts';
import { metadataWatchAccept } from '../pkg/informerfactory/listwatch.ts';
import { isDeletedFinalStateUnknown, SharedInformerFactory } from '../pkg/informerfactory/index.ts';
import { metaNamespaceKey } from '../pkg/apimachinery/keys.ts';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { coreResources, type ResourceType } from '../pkg/apimachinery/resource.ts';
import { ControlPlane } from './cluster/controlplane.ts';
import { adminKubeConfig, cluster, expectStatus, suffix, testNamespace, waitFor } from './helpers/cluster.ts';
import { metricValue } from './helpers/managerprocess.ts';
import { proxiedServer, TcpProxy } from './helpers/tcpproxy.ts';
import { installCRDs } from './helpers/crds.ts';

const fooResource: ResourceType = {
  group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true,
};

/** Records every handler call, by key. */
class Recorder {
  adds = new Map<string, number>();
  updates = new Map<string, number>();
  deletes = new Map<string, { tombstone: boolean }[]>();
  handler = {
    onAdd: (o: KubeObject): void => void this.adds.set(metaNamespaceKey(o), (this.adds.get(metaNamespaceKey(o)) ?? 0) + 1),
    onUpdate: (_old: KubeObject, o: KubeObject): void => void this.updates.set(metaNamespaceKey(o), (this.updates.get(metaNamespaceKey(o)) ?? 0) + 1),
    onDelete: (o: unknown): void => {
      const tombstone = isDeletedFinalStateUnknown(o as KubeObject);
      const key = tombstone ? (o as { key: string }).key : metaNamespaceKey(o as KubeObject);
      this.deletes.set(key, [...(this.deletes.get(key) ?? []), { tombstone }]);
    },
  };
}

function restFor(kc: KubeConfig, registry = new Registry()): RestClient {
  return new RestClient({ kubeConfig: kc, registry });
}

/** A KubeConfig like `base` whose server goes through `proxy`. */
function viaProxy(base: KubeConfig, proxy: TcpProxy): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(base.exportConfig());
  const cur = kc.getCurrentCluster();
  if (!cur) throw new Error('no cluster');
  kc.clusters = kc.clusters.map((c) => (c.name === cur.name ? { ...c, server: proxiedServer(c.server, proxy) } : c));
  return kc;
}

/** Runs the factory until the test ends and waits for its caches to sync. */
async function runUntilTestEnds(t: TestContext, factory: SharedInformerFactory): Promise<void> {
  const ac = new AbortController();
  const running = factory.run(ac.signal);
  t.after(async () => {
    ac.abort();
    await running;
  });
  assert.equal(await factory.waitForCacheSync({ timeoutMs: 30_000 }), true, 'caches synced');
}

async function createConfigMap(cp: ControlPlane, ns: string, name: string, data: Record<string, string> = {}): Promise<void> {
  expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data }), 201, `create ${name}`);
}

async function serverKeys(cp: ControlPlane, ns: string): Promise<Map<string, string>> {
  const list = expectStatus<{ items: { metadata: { name: string; resourceVersion: string } }[] }>(
    await cp.get(`/api/v1/namespaces/${ns}/configmaps`), 200, 'list');
  return new Map(list.items.map((i) => [`${ns}/${i.metadata.name}`, i.metadata.resourceVersion]));
}

function cacheKeys(factory: SharedInformerFactory, ns: string): Map<string, string> {
  const inf = factory.informerFor(coreResources.configMaps);
  return new Map(inf.lister().list(ns).map((o) => [metaNamespaceKey(o), o.metadata?.resourceVersion ?? '']));
}

describe('shared informer on the real API server', () => {
  before(installCRDs);

  test('two controllers share ONE watch per type and namespace (client side and API server side)', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'share');
    const serverWatches = async (): Promise<number> => metricValue((await cp.get('/metrics')).body,
      'apiserver_longrunning_requests', { group: 'samplecontroller.k8s.io', resource: 'foos', scope: 'namespace', verb: 'WATCH' }) ?? 0;
    const before = await serverWatches();
    const factory = new SharedInformerFactory({ client: restFor(adminKubeConfig()), namespaces: [ns] });
    const a = new Recorder();
    const b = new Recorder();
    // Two "controllers" ask for the same type independently.
    const regA = factory.informerFor(fooResource).addEventHandler(a.handler);
    const regB = factory.informerFor(fooResource).addEventHandler(b.handler);
    assert.equal(factory.informers().length, 1, 'one informer for the type');
    await runUntilTestEnds(t, factory);
    await waitFor('both handlers synced', () => regA.hasSynced() && regB.hasSynced());
    expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f1' }, spec: { deploymentName: 'd', replicas: 1 },
    }), 201, 'create Foo');
    await waitFor('both handlers saw the add', () => a.adds.get(`${ns}/f1`) === 1 && b.adds.get(`${ns}/f1`) === 1);
    assert.equal(factory.openWatches(fooResource, ns), 1, 'client side: one open watch');
    assert.equal(await waitFor('API server counts our watch', async () => ((await serverWatches()) - before === 1 ? 1 : undefined)), 1);
  });

  test('namespace scope: with two namespaces selected, objects in a third are never delivered', async (t) => {
    const cp = cluster();
    const [a, b, c] = [await testNamespace(t, 'sa'), await testNamespace(t, 'sb'), await testNamespace(t, 'sc')];
    const factory = new SharedInformerFactory({ client: restFor(adminKubeConfig()), namespaces: [a, b] });
    const rec = new Recorder();
    factory.informerFor(coreResources.configMaps).addEventHandler(rec.handler);
    await runUntilTestEnds(t, factory);
    let i = 0;
    for (const ns of [c, a, c, b]) await createConfigMap(cp, ns, `cm-${i++}`);
    await waitFor('adds in a and b', () => rec.adds.has(`${a}/cm-1`) && rec.adds.has(`${b}/cm-3`));
    // The object in c was created before the one in b: had it been delivered, it would have arrived already.
    assert.equal([...rec.adds.keys()].some((k) => k.startsWith(`${c}/`)), false);
    assert.equal(factory.informerFor(coreResources.configMaps).lister().list(c).length, 0);
    assert.equal(factory.openWatches(coreResources.configMaps, a), 1);
    assert.equal(factory.openWatches(coreResources.configMaps, b), 1);
  });

  test('a kind whose CRD is not installed: not synced, named with the API server\'s 404; synced once the CRD appears (issue 16 item 5)', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'nocrd');
    const group = `w${suffix()}.tscm-test.example.com`;
    const widgets: ResourceType = { group, version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true };
    const factory = new SharedInformerFactory({
      client: restFor(adminKubeConfig()), namespaces: [ns], reflector: { config: { backoffInitialMs: 100, backoffMaxMs: 1000 } },
    });
    const inf = factory.informerFor(widgets);
    const ac = new AbortController();
    const running = factory.run(ac.signal);
    t.after(async () => {
      ac.abort();
      await running;
    });
    const line = await waitFor('the 404 in unsyncedCaches', () => factory.unsyncedCaches().find((l) => l.includes('404')));
    // An unknown group is answered with a plain-text "404 page not found" (a known group's unknown resource with a
    // Status "the server could not find the requested resource").
    assert.equal(line, `widgets.${group}/v1 (Widget) ns=${ns}: GET /apis/${group}/v1/namespaces/${ns}/widgets: HTTP 404: `
      + `404 page not found (the API server does not serve Widget ${group}/v1: is its CustomResourceDefinition installed?)`);
    assert.equal(inf.hasSynced(), false);

    // client-go semantics: the informer keeps retrying (the Manager's --cache-sync-timeout decides when to give up).
    expectStatus(await cp.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: `widgets.${group}` },
      spec: {
        group, scope: 'Namespaced', names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
      },
    }), 201, 'create CRD');
    t.after(async () => {
      await cp.request('DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${group}`);
    });
    assert.equal(await factory.waitForCacheSync({ timeoutMs: 30_000 }), true, 'synced after the CRD was installed');
    assert.deepEqual(factory.unsyncedCaches(), []);
  });

  test('metadataOnly: the API server sends PartialObjectMetadata, the cache holds only metadata under the resource\'s kind, events flow; a full informer of the type is separate', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'meta');
    await createConfigMap(cp, ns, 'cm-1', { big: 'x'.repeat(20_000) });
    // What the informers asked for, and the kind of every LIST answer, seen at the client (so the test cannot pass
    // on our own stripping alone: the server must have answered with metadata).
    const asked: { method: string; accept: string | undefined; kind?: string }[] = [];
    class Recording extends RestClient {
      override async json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
        const body = await super.json<T>(method, path, opts);
        asked.push({ method: 'list', accept: opts.accept, kind: (body as { kind?: string }).kind });
        return body;
      }
      override request(method: Verb, path: string, opts: RequestOptions = {}): Promise<RawResponse> {
        asked.push({ method: 'watch', accept: opts.accept });
        return super.request(method, path, opts);
      }
    }
    const factory = new SharedInformerFactory({ client: new Recording({ kubeConfig: adminKubeConfig(), registry: new Registry() }), namespaces: [ns] });
    const meta = factory.informerFor(coreResources.configMaps, { metadataOnly: true, transform: (o) => o });
    const full = factory.informerFor(coreResources.configMaps);
    assert.notEqual(meta, full, 'a metadata-only informer is its own list+watch');
    assert.equal(factory.informerFor(coreResources.configMaps, { metadataOnly: true }), meta, 'and shared like any other');
    const rec = new Recorder();
    meta.addEventHandler(rec.handler);
    await runUntilTestEnds(t, factory);

    const cached = meta.lister().get(ns, 'cm-1');
    assert.deepEqual(Object.keys(cached ?? {}).sort(), ['apiVersion', 'kind', 'metadata'], 'only metadata cached');
    assert.equal(cached?.apiVersion, 'v1');
    assert.equal(cached?.kind, 'ConfigMap', "the resource's kind, not PartialObjectMetadata");
    assert.equal(cached?.metadata?.name, 'cm-1');
    assert.equal((full.lister().get(ns, 'cm-1') as { data?: Record<string, string> } | undefined)?.data?.['big']?.length, 20_000, 'the full informer has the data');
    assert.deepEqual(asked.filter((a) => a.accept !== undefined).map((a) => a.method === 'list' ? `list ${a.kind}` : 'watch').sort(), ['list PartialObjectMetadataList', 'watch']);
    assert.deepEqual(asked.filter((a) => a.accept === undefined).map((a) => a.method === 'list' ? `list ${a.kind}` : 'watch').sort(), ['list ConfigMapList', 'watch']);

    // Watch events: a label change is an update with the new labels; a delete is seen; still metadata only.
    expectStatus(await cp.request('PATCH', `/api/v1/namespaces/${ns}/configmaps/cm-1`, { metadata: { labels: { tier: 'a' } } }, { headers: { 'content-type': 'application/merge-patch+json' } }), 200, 'label');
    await waitFor('label update seen', () => meta.lister().get(ns, 'cm-1')?.metadata?.labels?.['tier'] === 'a');
    assert.deepEqual(Object.keys(meta.lister().get(ns, 'cm-1') ?? {}).sort(), ['apiVersion', 'kind', 'metadata']);
    assert.equal(meta.lister().get(ns, 'cm-1')?.kind, 'ConfigMap');
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/cm-1`), 200, 'delete');
    await waitFor('delete seen', () => rec.deletes.has(`${ns}/cm-1`));
    assert.equal(rec.updates.get(`${ns}/cm-1`), 1);

    // The watch's Accept header: the server answers a metadata watch with PartialObjectMetadata events.
    await createConfigMap(cp, ns, 'cm-2', { big: 'y'.repeat(1_000) });
    const res = await new RestClient({ kubeConfig: adminKubeConfig(), registry: new Registry() }).request('GET', `/api/v1/namespaces/${ns}/configmaps`, {
      query: { watch: 'true', timeoutSeconds: 30 }, accept: metadataWatchAccept,
    });
    let line = '';
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      line += chunk.toString('utf8');
      if (line.includes('\n')) break;
    }
    await res.dump();
    const first = JSON.parse(line.split('\n')[0] ?? '') as { type: string; object: { kind: string; data?: unknown } };
    assert.deepEqual([first.type, first.object.kind, first.object.data], ['ADDED', 'PartialObjectMetadata', undefined]);
  });

  test('cut off for 15 s while objects change: cache converges and every delete is seen', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'cut');
    const api = new URL(cp.server);
    const proxy = await TcpProxy.start(api.hostname, Number(api.port));
    t.after(() => proxy.close());
    for (let i = 0; i < 6; i++) await createConfigMap(cp, ns, `pre-${i}`, { v: '0' });
    const factory = new SharedInformerFactory({ client: restFor(viaProxy(adminKubeConfig(), proxy)), namespaces: [ns] });
    const rec = new Recorder();
    factory.informerFor(coreResources.configMaps).addEventHandler(rec.handler);
    await runUntilTestEnds(t, factory);
    await createConfigMap(cp, ns, 'seen-then-deleted');
    await waitFor('seen', () => rec.adds.has(`${ns}/seen-then-deleted`));

    proxy.cut();
    const cutAt = Date.now();
    // While cut off: create, update and delete directly.
    await createConfigMap(cp, ns, 'born-while-cut');
    await createConfigMap(cp, ns, 'born-and-died-while-cut');
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/born-and-died-while-cut`), 200, 'delete');
    for (let i = 0; i < 3; i++) {
      expectStatus(await cp.request('PUT', `/api/v1/namespaces/${ns}/configmaps/pre-${i}`, {
        apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `pre-${i}` }, data: { v: '1' },
      }), 200, 'update');
    }
    for (const name of ['pre-3', 'pre-4', 'seen-then-deleted']) {
      expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/${name}`), 200, `delete ${name}`);
    }
    await waitFor('15 s of cut-off', () => Date.now() - cutAt >= 15_000, { timeoutMs: 20_000, intervalMs: 250 });
    proxy.restore();

    const expected = await serverKeys(cp, ns);
    await waitFor('cache equals server state', () => {
      const got = cacheKeys(factory, ns);
      return got.size === expected.size && [...expected].every(([k, rv]) => got.get(k) === rv);
    }, { timeoutMs: 60_000 });
    for (const name of ['pre-3', 'pre-4', 'seen-then-deleted']) {
      assert.equal(rec.deletes.get(`${ns}/${name}`)?.length, 1, `exactly one delete delivered for ${name}`);
    }
    // Resuming the watch replays ADDED+DELETED for the short-lived object; a relist would skip it entirely.
    // Either way handlers see a delete for every add, and nothing of it stays cached.
    const short = `${ns}/born-and-died-while-cut`;
    assert.equal(rec.deletes.get(short)?.length ?? 0, rec.adds.has(short) ? 1 : 0);
    assert.equal(rec.adds.get(`${ns}/born-while-cut`), 1);
    assert.ok((rec.updates.get(`${ns}/pre-0`) ?? 0) >= 1, 'updates delivered');
  });

  describe('private control plane (watch cache off)', () => {
    let cp: ControlPlane;
    before(async () => {
      cp = await ControlPlane.start({
        mode: 'minimal', dir: mkdtempSync(join(tmpdir(), 'tscm-informer-')), log: () => {},
        extraArgs: { 'kube-apiserver': ['--watch-cache=false'] },
      });
    });
    after(async () => {
      await cp?.stop();
    });
    const kc = (): KubeConfig => adminKubeConfig(cp);

    test('kube-apiserver stopped and started: the informer recovers without a restart', async (t) => {
      const ns = 'default';
      await createConfigMap(cp, ns, 'before-restart');
      const factory = new SharedInformerFactory({ client: restFor(kc()), namespaces: [ns], reflector: { config: { backoffMaxMs: 2000 } } });
      const rec = new Recorder();
      factory.informerFor(coreResources.configMaps).addEventHandler(rec.handler);
      await runUntilTestEnds(t, factory);
      await cp.stopComponent('kube-apiserver');
      await cp.startComponent('kube-apiserver');
      await createConfigMap(cp, ns, 'after-restart');
      await waitFor('event after restart delivered', () => rec.adds.has(`${ns}/after-restart`), { timeoutMs: 60_000 });
      const expected = await serverKeys(cp, ns);
      await waitFor('cache equals server', () => {
        const got = cacheKeys(factory, ns);
        return got.size === expected.size && [...expected].every(([k, rv]) => got.get(k) === rv);
      });
    });

    test('a 410 forced by compacting etcd past the watch resourceVersion causes a relist; nothing is lost', async (t) => {
      const ns = 'kube-public';
      for (let i = 0; i < 4; i++) await createConfigMap(cp, ns, `c-${i}`);
      const api = new URL(cp.server);
      const proxy = await TcpProxy.start(api.hostname, Number(api.port));
      t.after(() => proxy.close());
      const registry = new Registry();
      const factory = new SharedInformerFactory({ client: restFor(viaProxy(kc(), proxy), registry), namespaces: [ns], reflector: { config: { backoffMaxMs: 2000 } } });
      const rec = new Recorder();
      factory.informerFor(coreResources.configMaps).addEventHandler(rec.handler);
      await runUntilTestEnds(t, factory);
      proxy.cut();
      expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/c-0`), 200, 'delete');
      await createConfigMap(cp, ns, 'c-new');
      for (let i = 0; i < 20; i++) await createConfigMap(cp, 'default', `churn-${i}`); // move the revision on
      await cp.compactEtcd();
      proxy.restore();
      const expected = await serverKeys(cp, ns);
      await waitFor('cache equals server after relist', () => {
        const got = cacheKeys(factory, ns);
        return got.size === expected.size && [...expected].every(([k, rv]) => got.get(k) === rv);
      }, { timeoutMs: 60_000 });
      assert.equal(rec.deletes.get(`${ns}/c-0`)?.length, 1, 'the delete missed during the gap is delivered');
      // A tombstone can only come from a relist (Replace): a watch would have delivered the object itself.
      assert.equal(rec.deletes.get(`${ns}/c-0`)?.[0]?.tombstone, true, '…as a tombstone (final state unknown)');
      assert.ok(rec.adds.has(`${ns}/c-new`));
    });
  });
});
