/**
 * The compatibility suite (issue 43, docs/compatibility.md): every API feature the library and the manager rely on,
 * against ONE private kube-apiserver of the version under test — $KUBERNETES_VERSION (`make compat
 * KUBERNETES_VERSION=1.34`), else the default of the version matrix. Run on each version of the matrix by hand; the
 * full suite (`make test`, CI), this file included, runs on the default.
 *
 * Each feature is exercised through the library's own code (informers, typed client, webhook server, Event
 * recorder, leader elector, the secure metrics filter) and its answer compared with the server's state:
 *   streaming lists (sendInitialEvents + the initial-events-end bookmark), watch bookmarks, PartialObjectMetadata
 *   (metadata-only informers), server-side apply (conflicts, force, the status subresource, dry run), CRD validation
 *   (OpenAPI, CEL, defaults, strict field validation) and conversion webhooks, admission webhook requests (mutating
 *   JSON patch, validation of CREATE/UPDATE/DELETE with the old object, dryRun), core/v1 Events as the recorder
 *   writes them (POST, then the correlated PATCH), Lease leader election (acquire, watch, release, hand-over), and
 *   TokenReview + SubjectAccessReview behind the secure metrics endpoint.
 *
 * A feature a server may lack is probed from the server's own answer (never from its version number) and the test
 * then asserts the library's fallback for that answer: a refused streaming list → paged LIST for good (also forced
 * with `--feature-gates=WatchList=false`, so the fallback is exercised on every version); a PartialObjectMetadata
 * request answered with full objects → stripped to metadata; a watch that ends without a bookmark → resumed from the
 * last event. Which path each server took is printed (t.diagnostic) and asserted.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { request as httpsRequest } from 'node:https';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { metaNamespaceKey } from '../pkg/apimachinery/keys.ts';
import { coreResources, type ResourceType } from '../pkg/apimachinery/resource.ts';
import { ApiError } from '../pkg/client/errors.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { ResourceClient } from '../pkg/client/typed.ts';
import { EventBroadcaster, RestEventSink } from '../pkg/events/recorder.ts';
import {
  INITIAL_EVENTS_END_ANNOTATION, RestListWatcher, SharedIndexInformer, type ListPage, type ListRequest, type ListWatcher,
  type WatchEvent, type WatchRequest,
} from '../pkg/informerfactory/index.ts';
import { metadataListAccept } from '../pkg/informerfactory/listwatch.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { LeaderElector, RestLeaseClient } from '../pkg/manager/leaderelection.ts';
import { KubeAccessReviewer, newMetricsServer } from '../pkg/manager/metricsserver.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import { denied, type AdmissionRequest } from '../pkg/webhook/admission.ts';
import { repoRoot } from './helpers/crds.ts';
import { waitFor } from './helpers/cluster.ts';

const requested = process.env['KUBERNETES_VERSION'] || undefined;
const testdata = join(repoRoot, 'test', 'testdata', 'compat');
const group = 'compat.tscm.example.com';
const widgets = (version: string): ResourceType => ({ group, version, resource: 'widgets', kind: 'Widget', namespaced: true });
interface WidgetV2 extends KubeObject { spec: { replicas: number; tier?: string; color?: string }; status?: { ready?: boolean } }
interface WidgetV1 extends KubeObject { spec: { count?: number; tier?: string; color?: string }; status?: { ready?: boolean } }

/** Every admission request the test's webhooks received, in order (what the API server sent). */
const admissions: { path: 'mutate' | 'validate'; request: AdmissionRequest }[] = [];
let conversions = 0;

let env: TestEnv;
let client: RestClient;
let serverVersion: string;
const stopManager = new AbortController();
let managerRun: Promise<void> | undefined;

function client4(userAgent: string): RestClient {
  return new RestClient({ kubeConfig: env.kubeConfig, registry: new Registry(), userAgent });
}

async function createNamespace(name: string): Promise<string> {
  await client.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
  return name;
}

before(async () => {
  env = await startTestEnv({
    ...(requested ? { kubernetesVersion: requested } : {}),
    crdPaths: [join(testdata, 'crd.yaml')],
    webhooks: { paths: [join(testdata, 'webhooks.yaml')] },
  });
  client = env.client;
  serverVersion = (await client.json<{ gitVersion: string }>('GET', '/version')).gitVersion;
  const serving = env.webhook;
  assert.ok(serving);
  const mgr = new ControllerManager({
    kubeConfig: env.kubeConfig, registry: new Registry(), logger: silentLogger,
    webhook: { bindAddress: serving.bindAddress, certDir: serving.certDir },
  });
  mgr.webhook<WidgetV2>({ group, version: 'v2', kind: 'Widget' })
    .withDefaulter((w, ctx) => {
      admissions.push({ path: 'mutate', request: ctx.request });
      w.spec.color ??= 'blue';
    })
    .withValidator({
      validateCreate: (w, ctx) => {
        admissions.push({ path: 'validate', request: ctx.request });
        return w.spec.replicas === 7 ? denied('seven replicas are not allowed') : undefined;
      },
      validateUpdate: (old, w, ctx) => {
        admissions.push({ path: 'validate', request: ctx.request });
        return w.spec.replicas < old.spec.replicas && old.metadata?.labels?.['shrink'] === 'never' ? denied(`cannot shrink from ${old.spec.replicas}`) : undefined;
      },
      validateDelete: (old, ctx) => {
        admissions.push({ path: 'validate', request: ctx.request });
        return old.metadata?.labels?.['protected'] === 'true' ? denied(`${old.metadata.name} is protected`) : undefined;
      },
    })
    .withConversion({
      hub: 'v2',
      spokes: {
        v1: {
          toHub: (o) => {
            conversions++;
            const { count, ...rest } = (o as WidgetV1).spec;
            return { ...o, spec: { ...rest, replicas: count ?? 0 } };
          },
          fromHub: (h) => {
            conversions++;
            const { replicas, ...rest } = (h as WidgetV2).spec;
            return { ...h, spec: { ...rest, count: replicas } };
          },
        },
      },
    })
    .complete();
  managerRun = mgr.start(stopManager.signal).then(() => undefined);
  await env.waitForWebhooks();
}, { timeout: 180_000 });

after(async () => {
  stopManager.abort();
  await managerRun;
  await env?.stop();
});

describe(`compatibility (${requested ? `KUBERNETES_VERSION=${requested}` : 'the default version'})`, () => {
  test('the API server runs the version asked for', (t) => {
    t.diagnostic(`kube-apiserver ${serverVersion} from ${env.binaries.kubeApiserver} (etcd ${env.binaries.etcd})`);
    assert.match(serverVersion, /^v1\.\d+\.\d+/);
    if (requested) {
      const want = requested.replace(/^v/, '');
      assert.ok(serverVersion === `v${want}` || serverVersion.startsWith(`v${want}.`), `asked for ${requested}, the server says ${serverVersion}`);
    }
  });

  test('streaming list: the informer fills its cache from one sendInitialEvents watch ended by the initial-events-end bookmark — or, where the server refuses that, from paged LIST for good', async (t) => {
    const ns = await createNamespace('compat-wl');
    await createConfigMaps(ns, 30);
    // The server's own answer: does it serve a streaming list?
    const probe = await rawWatch(`/api/v1/namespaces/${ns}/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5`);
    const served = probe.status === 200 && probe.events.some((e) => e.type === 'BOOKMARK' && e.object.metadata?.annotations?.[INITIAL_EVENTS_END_ANNOTATION] === 'true');
    t.diagnostic(`streaming list: HTTP ${probe.status}${served ? ', initial-events-end bookmark sent' : `: ${probe.body.slice(0, 200)}`}`);
    const h = startInformer(t, client4('compat/watchlist'), coreResources.configMaps, ns, { useWatchList: true });
    await waitFor('the informer synced', () => h.informer.hasSynced(), { timeoutMs: 60_000 });
    assert.deepEqual(sortedNames(h.informer), await serverNames(ns));
    const lists = h.recorder.requests.filter((r) => r.op === 'list');
    const streaming = h.recorder.requests.filter((r) => r.op === 'watch' && r.sendInitialEvents);
    if (served) {
      assert.equal(lists.length, 0, 'no LIST when the server serves streaming lists');
      assert.equal(streaming.length, 1);
    } else {
      assert.ok(lists.length >= 1, 'the refused streaming list fell back to paged LIST');
      assert.equal(streaming.length, 1, 'and never asked for a streaming list again');
    }
    await changeAndObserve(ns, h);
  });

  test('streaming list refused (--feature-gates=WatchList=false on this version): 4xx, and the informer falls back to paged LIST for good', async (t) => {
    const off = await startTestEnv({ ...(requested ? { kubernetesVersion: requested } : {}), apiServerFlags: ['--feature-gates=WatchList=false'] });
    t.after(() => off.stop());
    const c = new RestClient({ kubeConfig: off.kubeConfig, registry: new Registry(), userAgent: 'compat/watchlist-off' });
    t.after(() => c.close());
    await c.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'wl-off' } } });
    for (let i = 0; i < 5; i++) await c.json('POST', '/api/v1/namespaces/wl-off/configmaps', { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` } } });
    const refusal = await c.request('GET', '/api/v1/namespaces/wl-off/configmaps', {
      query: { watch: 'true', sendInitialEvents: 'true', resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: 'true' }, timeoutMs: 10_000,
    });
    const text = await refusal.text();
    t.diagnostic(`streaming list with the gate off: HTTP ${refusal.status}: ${text.slice(0, 200)}`);
    assert.ok(refusal.status >= 400 && refusal.status < 500, `a refusal, not HTTP ${refusal.status}`);
    const h = startInformer(t, c, coreResources.configMaps, 'wl-off', { useWatchList: true });
    await waitFor('the informer synced', () => h.informer.hasSynced(), { timeoutMs: 60_000 });
    assert.deepEqual(sortedNames(h.informer), ['cm-0', 'cm-1', 'cm-2', 'cm-3', 'cm-4']);
    assert.deepEqual(h.recorder.requests.slice(0, 2).map((r) => r.op === 'watch' ? `watch sendInitialEvents=${r.sendInitialEvents}` : 'list'), ['watch sendInitialEvents=true', 'list']);
    await c.json('POST', '/api/v1/namespaces/wl-off/configmaps', { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm-late' } } });
    await waitFor('a later change arrives by the plain watch', () => h.informer.lister().list().some((o) => o.metadata?.name === 'cm-late'));
    assert.equal(h.recorder.requests.filter((r) => r.op === 'watch' && r.sendInitialEvents).length, 1, 'one streaming attempt only');
  });

  test('watch bookmarks: while other namespaces change, a watch with allowWatchBookmarks gets BOOKMARKs, and the informer resumes its next watch from the bookmark\'s resourceVersion', async (t) => {
    const ns = await createNamespace('compat-bm');
    const other = await createNamespace('compat-bm-other');
    await createConfigMaps(ns, 3);
    const listRV = (await client.json<{ metadata: { resourceVersion: string } }>('GET', `/api/v1/namespaces/${ns}/configmaps`)).metadata.resourceVersion;
    // Writes of the same resource elsewhere move the watch cache on; a bookmark tells this namespace's watchers (a
    // server sends none when nothing moved past what the watcher saw).
    const writing = new AbortController();
    const writer = (async () => {
      while (!writing.signal.aborted) {
        await client.json('POST', `/api/v1/namespaces/${other}/configmaps`, { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'moving-' } } });
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    t.after(async () => { writing.abort(); await writer; });
    const probe = await rawWatch(`/api/v1/namespaces/${ns}/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion=${listRV}&timeoutSeconds=4`);
    const bookmarks = probe.events.filter((e) => e.type === 'BOOKMARK').map((e) => e.object.metadata?.resourceVersion ?? '');
    t.diagnostic(`raw watch from ${listRV} (4 s): HTTP ${probe.status}, ${probe.events.length} events, bookmarks at ${bookmarks.join(',') || 'none'}`);
    assert.equal(probe.status, 200);
    assert.equal(probe.events.filter((e) => e.type !== 'BOOKMARK').length, 0, 'no object of the namespace changed');
    // The informer with 3-5 s watches: each watch after the first starts from the last resourceVersion it saw.
    const h = startInformer(t, client4('compat/bookmarks'), coreResources.configMaps, ns, { useWatchList: false, watchSeconds: [3, 5] });
    await waitFor('three watches', () => h.recorder.requests.filter((r) => r.op === 'watch').length >= 3, { timeoutMs: 60_000 });
    writing.abort();
    await writer;
    const watches = h.recorder.requests.filter((r): r is Extract<Recorded, { op: 'watch' }> => r.op === 'watch');
    const seen = h.recorder.events.filter((e) => e.type === 'BOOKMARK').map((e) => e.resourceVersion);
    t.diagnostic(`informer watches from ${watches.map((w) => w.resourceVersion).join(' → ')}; bookmarks seen at ${seen.join(',') || 'none'}`);
    if (bookmarks.length > 0) {
      assert.ok(bookmarks.every((rv) => BigInt(rv) > BigInt(listRV)), 'a bookmark carries a newer resourceVersion');
      assert.ok(seen.length > 0, 'the informer got bookmarks too');
      assert.ok(watches.slice(1).some((w) => seen.includes(w.resourceVersion) && w.resourceVersion !== watches[0]?.resourceVersion),
        'a later watch resumed from a bookmark\'s resourceVersion');
    } else {
      // A server without bookmarks: the informer resumes from the last resourceVersion of the namespace (the list's).
      assert.ok(watches.slice(1).every((w) => w.resourceVersion === watches[0]?.resourceVersion));
    }
    assert.equal(h.recorder.requests.filter((r) => r.op === 'list').length, 1, 'resuming never relists');
  });

  test('PartialObjectMetadata: a metadata-only informer caches { apiVersion, kind, metadata } only; the server answers PartialObjectMetadataList (else the library strips full objects)', async (t) => {
    const ns = await createNamespace('compat-meta');
    await createConfigMaps(ns, 5);
    const raw = await client.json<{ kind: string; apiVersion: string; items: KubeObject[] }>('GET', `/api/v1/namespaces/${ns}/configmaps`, { accept: metadataListAccept });
    t.diagnostic(`metadata list answered as ${raw.apiVersion} ${raw.kind}`);
    const h = startInformer(t, client4('compat/metadata'), coreResources.configMaps, ns, { useWatchList: false, metadataOnly: true });
    await waitFor('the informer synced', () => h.informer.hasSynced(), { timeoutMs: 60_000 });
    for (const o of h.informer.lister().list()) assert.deepEqual(Object.keys(o).sort(), ['apiVersion', 'kind', 'metadata'], `${o.metadata?.name} holds metadata only`);
    if (raw.kind === 'PartialObjectMetadataList') {
      assert.equal(raw.apiVersion, 'meta.k8s.io/v1');
      assert.ok(raw.items.every((i) => !('data' in i)));
    }
    await client.json('PATCH', `/api/v1/namespaces/${ns}/configmaps/cm-0`, { body: { metadata: { labels: { seen: 'yes' } }, data: { big: 'x'.repeat(1000) } }, contentType: 'application/merge-patch+json' });
    await waitFor('a metadata change arrives by the metadata watch', () => h.informer.lister().list().some((o) => o.metadata?.labels?.['seen'] === 'yes'));
    for (const o of h.informer.lister().list()) assert.ok(!('data' in o), 'no data after the watch either');
  });

  test('server-side apply: field ownership, a 409 naming the other manager, force, the status subresource, dry run', async () => {
    const ns = await createNamespace('compat-ssa');
    const cms = new ResourceClient<KubeObject & { data?: Record<string, string> }>(client, coreResources.configMaps, ns);
    const first = await cms.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' }, data: { a: '1', b: '2' } }, { fieldManager: 'alice' });
    assert.deepEqual(first.data, { a: '1', b: '2' });
    await assert.rejects(cms.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' }, data: { a: 'bob' } }, { fieldManager: 'bob' }),
      (err: unknown) => err instanceof ApiError && err.status === 409 && err.reason === 'Conflict' && /alice/.test(err.message));
    const dry = await cms.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' }, data: { a: 'bob' } }, { fieldManager: 'bob', force: true, dryRun: true });
    assert.equal(dry.data?.['a'], 'bob', 'the dry run answers the result');
    assert.equal((await cms.get('owned')).data?.['a'], '1', 'and stores nothing');
    const forced = await cms.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' }, data: { a: 'bob' } }, { fieldManager: 'bob', force: true });
    assert.deepEqual(forced.data, { a: 'bob', b: '2' });
    const managers = ((forced.metadata?.managedFields ?? []) as { manager?: string }[]).map((m) => m.manager).sort();
    assert.deepEqual(managers, ['alice', 'bob']);
    // alice re-applies without b: she still owned b alone, so it goes; a stays bob's.
    const shrunk = await cms.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' }, data: {} }, { fieldManager: 'alice' });
    assert.deepEqual(shrunk.data, { a: 'bob' });

    const w = new ResourceClient<WidgetV2>(client, widgets('v2'), ns);
    await w.apply({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'applied' }, spec: { replicas: 1 } }, { fieldManager: 'controller' });
    const status = await w.status().apply({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'applied' }, status: { ready: true } }, { fieldManager: 'controller' });
    assert.deepEqual(status.status, { ready: true });
    assert.equal(status.spec.replicas, 1, 'a status apply leaves the spec');
  });

  test('CRD validation: OpenAPI (maximum, enum, required) and a CEL rule answer 422 with the server\'s causes; schema defaults; pruning; strict field validation 400', async () => {
    const ns = await createNamespace('compat-crd');
    const w = new ResourceClient<WidgetV2>(client, widgets('v2'), ns);
    const invalid = async (obj: WidgetV2, pattern: RegExp, opts: { fieldValidation?: 'Strict' } = {}): Promise<void> => {
      await assert.rejects(w.create(obj, opts), (err: unknown) => {
        assert.ok(err instanceof ApiError, String(err));
        assert.equal(err.status, 422, err.message);
        assert.match(err.message, pattern);
        return true;
      });
    };
    const widget = (name: string, spec: Record<string, unknown>): WidgetV2 => ({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name }, spec: spec as WidgetV2['spec'] });
    await invalid(widget('too-many', { replicas: 11 }), /spec\.replicas: Invalid value: 11: spec\.replicas in body should be less than or equal to 10/);
    await invalid(widget('gold', { replicas: 1, tier: 'gold' }), /spec\.tier: Unsupported value: "gold": supported values: "standard", "premium"/);
    await invalid(widget('no-replicas', {}), /spec\.replicas: Required value/);
    await invalid(widget('cel', { replicas: 6 }), /more than 5 replicas need the premium tier/);
    // Strict field validation refuses an unknown field with 400 BadRequest (a decoding error, not a 422).
    await assert.rejects(w.create(widget('unknown', { replicas: 1, size: 'L' }), { fieldValidation: 'Strict' }),
      (err: unknown) => err instanceof ApiError && err.status === 400 && /strict decoding error: unknown field "spec\.size"/.test(err.message));
    const created = await w.create(widget('defaulted', { replicas: 6, tier: 'premium' }));
    assert.equal(created.spec.tier, 'premium');
    const plain = await w.create(widget('plain', { replicas: 2, size: 'L' }));
    assert.equal(plain.spec.tier, 'standard', 'the schema default');
    assert.ok(!('size' in plain.spec), 'unknown fields are pruned');
  });

  test('conversion webhook: v1 reads and writes of v2-stored objects go through the library\'s /convert (single objects, lists, watches)', async () => {
    const ns = await createNamespace('compat-conv');
    const v2 = new ResourceClient<WidgetV2>(client, widgets('v2'), ns);
    const v1 = new ResourceClient<WidgetV1>(client, widgets('v1'), ns);
    const before = conversions;
    await v2.create({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'w1' }, spec: { replicas: 3 } });
    const asV1 = await v1.get('w1');
    assert.deepEqual([asV1.apiVersion, asV1.spec.count, asV1.spec.tier], [`${group}/v1`, 3, 'standard']);
    const viaV1 = await v1.create({ apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'w2' }, spec: { count: 4 } });
    assert.equal(viaV1.spec.count, 4);
    assert.equal((await v2.get('w2')).spec.replicas, 4, 'stored as v2');
    const listed = await v1.list();
    assert.deepEqual(listed.items.map((i) => [i.metadata?.name, i.spec.count]).sort(), [['w1', 3], ['w2', 4]]);
    assert.ok(conversions > before, 'the library converted');
    const h = startInformer(undefined, client4('compat/conversion'), widgets('v1'), ns, { useWatchList: false });
    await waitFor('a v1 informer synced', () => h.informer.hasSynced(), { timeoutMs: 60_000 });
    await v2.patch('w1', { merge: { spec: { replicas: 5 } } });
    await waitFor('the v2 change reaches the v1 watch converted', () => h.informer.lister().list().some((o) => o.metadata?.name === 'w1' && (o as WidgetV1).spec.count === 5));
    h.stop();
  });

  test('admission webhooks: the mutating webhook\'s JSON patch is applied; validation sees CREATE, UPDATE with the old object, DELETE, and dry runs', async () => {
    const ns = await createNamespace('compat-adm');
    const w = new ResourceClient<WidgetV2>(client, widgets('v2'), ns);
    admissions.length = 0;
    const created = await w.create({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'a', labels: { shrink: 'never', protected: 'true' } }, spec: { replicas: 3 } });
    assert.equal(created.spec.color, 'blue', 'the mutating webhook defaulted it');
    await assert.rejects(w.create({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'seven' }, spec: { replicas: 7, tier: 'premium' } }),
      (err: unknown) => err instanceof ApiError && err.status === 403 && /admission webhook "vwidget-v2\.compat\.tscm\.example\.com" denied the request: seven replicas are not allowed/.test(err.message));
    await assert.rejects(w.patch('a', { merge: { spec: { replicas: 1 } } }),
      (err: unknown) => err instanceof ApiError && err.status === 403 && /cannot shrink from 3/.test(err.message));
    await w.create({ apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'dry' }, spec: { replicas: 1 } }, { dryRun: true });
    await assert.rejects(w.get('dry'), (err: unknown) => err instanceof ApiError && err.status === 404);
    await assert.rejects(w.delete('a'), (err: unknown) => err instanceof ApiError && err.status === 403 && /a is protected/.test(err.message));
    const seen = admissions.map((a) => `${a.path} ${a.request.operation} ${a.request.name || '?'}${a.request.dryRun ? ' dryRun' : ''}${a.request.oldObject ? ' +old' : ''}`);
    assert.deepEqual(seen, [
      'mutate CREATE a', 'validate CREATE a',
      'mutate CREATE seven', 'validate CREATE seven',
      'mutate UPDATE a +old', 'validate UPDATE a +old',
      'mutate CREATE dry dryRun', 'validate CREATE dry dryRun',
      'validate DELETE a +old',
    ]);
    const update = admissions.find((a) => a.path === 'validate' && a.request.operation === 'UPDATE');
    assert.equal((update?.request.oldObject as WidgetV2 | undefined)?.spec.replicas, 3, 'the old object as stored');
    assert.ok(update?.request.userInfo?.groups?.includes('system:masters'), 'the requester as the API server authenticated it');
  });

  test('core/v1 Events as the recorder writes them: POST with source and reporting fields, then the correlated PATCH (count 2); events.k8s.io/v1 serves the same Event', async () => {
    const ns = await createNamespace('compat-ev');
    const cm = await client.json<KubeObject>('POST', `/api/v1/namespaces/${ns}/configmaps`, { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'subject' } } });
    const broadcaster = new EventBroadcaster({ sink: new RestEventSink(client), logger: silentLogger });
    const rec = broadcaster.recorderFor('compat-controller');
    rec.event({ ...cm, apiVersion: 'v1', kind: 'ConfigMap' }, 'Warning', 'Compat', 'first of two');
    await broadcaster.flush();
    rec.event({ ...cm, apiVersion: 'v1', kind: 'ConfigMap' }, 'Warning', 'Compat', 'first of two');
    await broadcaster.flush();
    interface CoreEvent extends KubeObject { count?: number; reason?: string; type?: string; message?: string; source?: { component?: string };
      involvedObject?: { kind?: string; name?: string; uid?: string }; reportingComponent?: string; firstTimestamp?: string; lastTimestamp?: string }
    const events = (await client.json<{ items: CoreEvent[] }>('GET', `/api/v1/namespaces/${ns}/events`)).items;
    assert.equal(events.length, 1, 'the second occurrence was merged into the first Event');
    const [ev] = events;
    assert.deepEqual([ev?.type, ev?.reason, ev?.message, ev?.count, ev?.source?.component, ev?.reportingComponent],
      ['Warning', 'Compat', 'first of two', 2, 'compat-controller', 'compat-controller']);
    assert.deepEqual([ev?.involvedObject?.kind, ev?.involvedObject?.name, ev?.involvedObject?.uid], ['ConfigMap', 'subject', cm.metadata?.uid]);
    // The same Event through events.k8s.io/v1 (what `kubectl events` and Events v1 readers see).
    interface EventV1 extends KubeObject { note?: string; reason?: string; type?: string; reportingController?: string; deprecatedCount?: number;
      regarding?: { kind?: string; name?: string; uid?: string } }
    const v1 = (await client.json<{ items: EventV1[] }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`)).items;
    assert.deepEqual(v1.map((e) => [e.metadata?.name, e.type, e.reason, e.note, e.deprecatedCount, e.reportingController, e.regarding?.uid]),
      [[ev?.metadata?.name, 'Warning', 'Compat', 'first of two', 2, 'compat-controller', cm.metadata?.uid]]);
    await broadcaster.shutdown();
  });

  test('Lease leader election: one leader, the standby watches, release on stop hands the Lease over, transitions counted', async (t) => {
    const ns = await createNamespace('compat-le');
    const elector = (identity: string): LeaderElector => new LeaderElector({
      lock: new RestLeaseClient(client4(`compat/le-${identity}`), ns, 'compat-lease'), name: 'compat-lease', identity,
      leaseDurationMs: 6_000, renewDeadlineMs: 4_000, retryPeriodMs: 1_000, logger: silentLogger, registry: new Registry(),
    });
    const a = elector('a');
    const b = elector('b');
    const aStop = new AbortController();
    const bStop = new AbortController();
    t.after(() => { aStop.abort(); bStop.abort(); });
    let aLeading = false;
    let bLeading = false;
    const aRun = a.run(aStop.signal, { onStartedLeading: () => { aLeading = true; } });
    await waitFor('a leads', () => aLeading, { timeoutMs: 30_000 });
    const bRun = b.run(bStop.signal, { onStartedLeading: () => { bLeading = true; } });
    interface Lease extends KubeObject { spec: { holderIdentity?: string; leaseTransitions?: number; leaseDurationSeconds?: number } }
    const lease = (): Promise<Lease> => client.json<Lease>('GET', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/compat-lease`);
    assert.equal((await lease()).spec.holderIdentity, 'a');
    assert.equal(bLeading, false);
    aStop.abort();
    await aRun;
    await waitFor('b takes over after the release', () => bLeading, { timeoutMs: 30_000 });
    const held = await lease();
    assert.equal(held.spec.holderIdentity, 'b');
    assert.ok((held.spec.leaseTransitions ?? 0) >= 1, 'the hand-over counted as a transition');
    bStop.abort();
    await bRun;
    assert.equal((await lease()).spec.holderIdentity ?? '', '', 'released on stop');
  });

  test('TokenReview + SubjectAccessReview: the secure metrics endpoint admits an allowed ServiceAccount, 403s another, 401s a bad token', async (t) => {
    const ns = await createNamespace('compat-authn');
    for (const sa of ['scraper', 'nobody']) {
      await client.json('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, { body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa } } });
    }
    await client.json('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      body: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'compat-metrics-reader' }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] },
    });
    await client.json('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      body: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'compat-metrics-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'compat-metrics-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: ns }] },
    });
    const token = async (sa: string): Promise<string> => (await client.json<{ status: { token: string } }>('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
    })).status.token;
    const server = newMetricsServer({ bindAddress: '127.0.0.1:0', secure: true, reviewer: new KubeAccessReviewer(client), registry: new Registry(), processMetrics: false });
    assert.ok(server);
    const ac = new AbortController();
    const running = server.start(ac.signal);
    t.after(async () => { ac.abort(); await running; });
    const { port } = await server.listening;
    const scrape = (bearer: string | undefined): Promise<number> => new Promise((res, rej) => {
      const req = httpsRequest({ host: '127.0.0.1', port, path: '/metrics', rejectUnauthorized: false, headers: bearer ? { authorization: `Bearer ${bearer}` } : {} }, (r) => {
        r.resume();
        r.on('end', () => res(r.statusCode ?? 0));
      });
      req.on('error', rej);
      req.end();
    });
    const allowed = await token('scraper');
    // RBAC bindings reach the authorizer's cache asynchronously: wait for the first 200 (the answer is not cached while refused? it is, for 10 s — so poll past that).
    await waitFor('the bound ServiceAccount scrapes (200)', async () => (await scrape(allowed)) === 200, { timeoutMs: 30_000, intervalMs: 500 });
    assert.equal(await scrape(await token('nobody')), 403, 'authenticated but not authorized');
    assert.equal(await scrape('not-a-token'), 401, 'not authenticated');
    assert.equal(await scrape(undefined), 401, 'no token');
  });
});

// ---- helpers ----------------------------------------------------------------------------------------------------

type Recorded = { op: 'list'; limit: number } | { op: 'watch'; resourceVersion: string; sendInitialEvents: boolean };

/** Wraps a RestListWatcher and records what the reflector asked for and which events it got; changes nothing. */
class RecordingListWatcher implements ListWatcher {
  readonly requests: Recorded[] = [];
  readonly events: { type: string; resourceVersion: string }[] = [];
  private readonly inner: ListWatcher;

  constructor(inner: ListWatcher) {
    this.inner = inner;
  }

  list(req: ListRequest): Promise<ListPage> {
    this.requests.push({ op: 'list', limit: req.limit });
    return this.inner.list(req);
  }

  async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent<KubeObject>>> {
    this.requests.push({ op: 'watch', resourceVersion: req.resourceVersion, sendInitialEvents: req.sendInitialEvents });
    const stream = await this.inner.watch(req);
    const events = this.events;
    return (async function* () {
      for await (const ev of stream) {
        events.push({ type: ev.type, resourceVersion: ev.type === 'ERROR' ? '' : ev.object.metadata?.resourceVersion ?? '' });
        yield ev;
      }
    })();
  }
}

interface Harness { informer: SharedIndexInformer; recorder: RecordingListWatcher; handled: Set<string>; stop: () => void }

/** An informer of `resource` in `ns` whose list/watch is recorded; stopped when the test ends (or by `stop`). */
function startInformer(t: TestContext | undefined, c: RestClient, resource: ResourceType, ns: string,
  opts: { useWatchList: boolean; metadataOnly?: boolean; watchSeconds?: [number, number] }): Harness {
  const built: RecordingListWatcher[] = [];
  const informer = new SharedIndexInformer({
    resource, namespaces: [ns], useWatchList: opts.useWatchList, registry: new Registry(), logger: silentLogger,
    ...(opts.watchSeconds ? { reflector: { config: { minWatchTimeoutSeconds: opts.watchSeconds[0], maxWatchTimeoutSeconds: opts.watchSeconds[1] } } } : {}),
    listWatcherFor: (namespace) => {
      const r = new RecordingListWatcher(new RestListWatcher({ client: c, resource, namespace, metadataOnly: opts.metadataOnly ?? false }));
      built.push(r);
      return r;
    },
  });
  const [recorder] = built;
  if (!recorder || built.length !== 1) throw new Error(`expected one list watcher, got ${built.length}`);
  const handled = new Set<string>();
  informer.addEventHandler({ onAdd: (o) => void handled.add(`add ${metaNamespaceKey(o)}`), onUpdate: (_o, n) => void handled.add(`update ${metaNamespaceKey(n)}`),
    onDelete: (o) => void handled.add(`delete ${metaNamespaceKey(o)}`) });
  const ac = new AbortController();
  const running = informer.start(ac.signal);
  const stop = (): void => ac.abort();
  t?.after(async () => { stop(); await running; });
  return { informer, recorder, handled, stop };
}

async function createConfigMaps(ns: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 10) {
    await Promise.all(Array.from({ length: Math.min(10, count - i) }, (_, j) => client.json('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i + j}` }, data: { n: String(i + j) } },
    })));
  }
}

async function serverNames(ns: string): Promise<string[]> {
  return (await client.json<{ items: KubeObject[] }>('GET', `/api/v1/namespaces/${ns}/configmaps`)).items.map((o) => o.metadata?.name ?? '').sort();
}

function sortedNames(informer: SharedIndexInformer): string[] {
  return informer.lister().list().map((o) => o.metadata?.name ?? '').sort();
}

/** Updates cm-0, deletes cm-1, creates cm-new; waits until the informer's handler saw all three and the cache equals the server. */
async function changeAndObserve(ns: string, h: Harness): Promise<void> {
  await client.json('PATCH', `/api/v1/namespaces/${ns}/configmaps/cm-0`, { body: { data: { changed: 'yes' } }, contentType: 'application/merge-patch+json' });
  await client.json('DELETE', `/api/v1/namespaces/${ns}/configmaps/cm-1`);
  await client.json('POST', `/api/v1/namespaces/${ns}/configmaps`, { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm-new' } } });
  await waitFor('the update, delete and create reach the handler', () =>
    h.handled.has(`update ${ns}/cm-0`) && h.handled.has(`delete ${ns}/cm-1`) && h.handled.has(`add ${ns}/cm-new`));
  const want = await serverNames(ns);
  await waitFor('the cache equals the server', () => JSON.stringify(sortedNames(h.informer)) === JSON.stringify(want));
}

/** A watch request read to its end (the server's timeoutSeconds): status, decoded events, or the body of a refusal. */
async function rawWatch(path: string): Promise<{ status: number; body: string; events: WatchEvent<KubeObject>[] }> {
  const res = await client.request('GET', path, { timeoutMs: 60_000 });
  const body = await res.text();
  const events = res.status === 200 ? body.split('\n').filter(Boolean).map((l) => JSON.parse(l) as WatchEvent<KubeObject>) : [];
  return { status: res.status, body, events };
}
