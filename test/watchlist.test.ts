/**
 * Streaming lists (WatchList, issue 23 point 9) against a REAL kube-apiserver: each test starts a private minimal
 * control plane whose kube-apiserver writes an audit log of every LIST and WATCH (one line per request stage, with
 * its requestURI, User-Agent and response code), so what the informer asked the server for is read from the server.
 *
 *  1. Watch-list on, server serves streaming lists (Kubernetes 1.34–1.37 enable the WatchList gate by
 *     default): the informer's cache is filled by ONE watch request with sendInitialEvents=true and
 *     resourceVersionMatch=NotOlderThan and no LIST at all; it is not synced while the initial ADDED events arrive,
 *     and is synced by the bookmark annotated `k8s.io/initial-events-end` (its resourceVersion becomes the
 *     informer's); later changes arrive on the same stream; the cache equals the server's objects.
 *  2. The same through the manager binary's `--watch-list` flag (ControllerManager `watchList`): no LIST from it.
 *  3. The server refuses streaming lists (`--feature-gates=WatchList=false`: 422 "sendInitialEvents is forbidden
 *     for watch unless the WatchList feature gate is enabled"): the informer falls back to paged LIST (limit +
 *     continue), syncs, watches from the list's resourceVersion, and never asks for a streaming list again.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { RestClient } from '../pkg/client/rest.ts';
import {
  INITIAL_EVENTS_END_ANNOTATION, RestListWatcher, SharedIndexInformer, type ListPage, type ListRequest, type ListWatcher, type WatchEvent, type WatchRequest,
} from '../pkg/informerfactory/index.ts';
import { metaNamespaceKey } from '../pkg/apimachinery/keys.ts';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import type { ControlPlane } from './cluster/controlplane.ts';
import { auditedControlPlane, writeManagerLog, type AuditedControlPlane } from './helpers/auditedcluster.ts';
import { micros, readAuditLog, type AuditEvent } from './helpers/audit.ts';
import { expectStatus, waitFor } from './helpers/cluster.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
- level: None
`;

/** An audit line with the fields these tests read (Metadata level carries them). */
type Audit = AuditEvent & { auditID: string; requestURI: string };

/** A private minimal control plane with the audit log above (and extra kube-apiserver flags). */
function privateCluster(t: TestContext, extraApiserverArgs: string[] = []): Promise<AuditedControlPlane> {
  return auditedControlPlane(t, { prefix: 'tscm-watchlist-', policy: auditPolicy, extraApiserverArgs });
}

/** The audit lines of requests made with this User-Agent, one per request (the last stage seen of each). */
function requestsOf(auditLog: string, userAgent: string): Audit[] {
  const byId = new Map<string, Audit>();
  for (const e of readAuditLog(auditLog) as Audit[]) {
    if (e.userAgent === userAgent) byId.set(e.auditID, e);
  }
  return [...byId.values()].sort((a, b) => micros(a.requestReceivedTimestamp) - micros(b.requestReceivedTimestamp));
}

const query = (e: Audit): URLSearchParams => new URL(e.requestURI, 'https://x').searchParams;

async function createNamespace(cp: ControlPlane, name: string): Promise<void> {
  expectStatus(await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }), 201, 'namespace');
}

/** Creates `count` ConfigMaps `cm-0…` in `ns`, 16 at a time. */
async function createConfigMaps(cp: ControlPlane, ns: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 16) {
    await Promise.all(Array.from({ length: Math.min(16, count - i) }, async (_, j) => {
      const name = `cm-${i + j}`;
      expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { n: String(i + j) },
      }), 201, `create ${name}`);
    }));
  }
}

/** name → resourceVersion of every ConfigMap in `ns`, from one unpaginated LIST by the admin client. */
async function serverState(cp: ControlPlane, ns: string): Promise<Map<string, string>> {
  const list = expectStatus<{ items: KubeObject[] }>(await cp.get(`/api/v1/namespaces/${ns}/configmaps`), 200, 'list');
  return new Map(list.items.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
}

function cacheState(informer: SharedIndexInformer): Map<string, string> {
  return new Map(informer.lister().list().map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
}

const sorted = (m: Map<string, string>): [string, string][] => [...m].sort(([a], [b]) => a.localeCompare(b));

interface SeenEvent {
  type: string;
  resourceVersion: string;
  initialEventsEnd: boolean;
  /** Whether the informer reported synced when this event came off the stream (before the reflector got it). */
  syncedBefore: boolean;
}

/**
 * Wraps the informer's real RestListWatcher and records what the reflector asked for and every event it got, with
 * the informer's synced state at that instant. It changes nothing it passes on.
 */
class RecordingListWatcher implements ListWatcher {
  readonly requests: ({ op: 'list'; limit: number; continued: boolean } | { op: 'watch'; resourceVersion: string; sendInitialEvents: boolean })[] = [];
  readonly events: SeenEvent[] = [];
  private readonly inner: ListWatcher;
  private readonly synced: () => boolean;

  constructor(inner: ListWatcher, synced: () => boolean) {
    this.inner = inner;
    this.synced = synced;
  }

  list(req: ListRequest): Promise<ListPage> {
    this.requests.push({ op: 'list', limit: req.limit, continued: req.continueToken !== undefined });
    return this.inner.list(req);
  }

  async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent<KubeObject>>> {
    this.requests.push({ op: 'watch', resourceVersion: req.resourceVersion, sendInitialEvents: req.sendInitialEvents });
    const stream = await this.inner.watch(req);
    const events = this.events;
    const synced = this.synced;
    return (async function* () {
      for await (const ev of stream) {
        const meta = ev.type === 'ERROR' ? undefined : ev.object.metadata;
        events.push({
          type: ev.type, resourceVersion: meta?.resourceVersion ?? '',
          initialEventsEnd: meta?.annotations?.[INITIAL_EVENTS_END_ANNOTATION] === 'true', syncedBefore: synced(),
        });
        yield ev;
      }
    })();
  }
}

interface Harness {
  informer: SharedIndexInformer;
  recorder: RecordingListWatcher;
  handled: { adds: Set<string>; updates: Set<string>; deletes: Set<string> };
}

/** A ConfigMap informer on `ns` whose list/watch is recorded; runs until the test ends. */
function startInformer(t: TestContext, cp: ControlPlane, ns: string, userAgent: string, useWatchList: boolean, pageSize?: number): Harness {
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  const client = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent });
  const built: RecordingListWatcher[] = [];
  const informer: SharedIndexInformer = new SharedIndexInformer({
    resource: coreResources.configMaps, namespaces: [ns], useWatchList, registry: new Registry(), logger: silentLogger,
    ...(pageSize ? { reflector: { config: { pageSize } } } : {}),
    listWatcherFor: (namespace) => {
      const r = new RecordingListWatcher(new RestListWatcher({ client, resource: coreResources.configMaps, namespace }), () => informer.hasSynced());
      built.push(r);
      return r;
    },
  });
  const [recorder] = built;
  if (!recorder || built.length !== 1) throw new Error(`expected one list watcher, got ${built.length}`);
  const handled = { adds: new Set<string>(), updates: new Set<string>(), deletes: new Set<string>() };
  informer.addEventHandler({
    onAdd: (o) => void handled.adds.add(metaNamespaceKey(o)),
    onUpdate: (_old, o) => void handled.updates.add(metaNamespaceKey(o)),
    onDelete: (o) => void handled.deletes.add(metaNamespaceKey(o)),
  });
  const ac = new AbortController();
  const running = informer.start(ac.signal);
  t.after(async () => {
    ac.abort();
    await running;
  });
  return { informer, recorder, handled };
}

/** Updates cm-0, deletes cm-1, creates cm-new; waits until the informer's handler saw all three. */
async function changeAndObserve(cp: ControlPlane, ns: string, h: Harness): Promise<void> {
  expectStatus(await cp.request('PATCH', `/api/v1/namespaces/${ns}/configmaps/cm-0`, { data: { changed: 'yes' } },
    { headers: { 'content-type': 'application/merge-patch+json' } }), 200, 'patch cm-0');
  expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/cm-1`), 200, 'delete cm-1');
  expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
    apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm-new' },
  }), 201, 'create cm-new');
  await waitFor('the update, delete and create reach the handler', () =>
    h.handled.updates.has(`${ns}/cm-0`) && h.handled.deletes.has(`${ns}/cm-1`) && h.handled.adds.has(`${ns}/cm-new`));
  const want = await serverState(cp, ns);
  await waitFor('the cache equals the server after the changes', () => JSON.stringify(sorted(cacheState(h.informer))) === JSON.stringify(sorted(want)));
}

describe('streaming lists (WatchList) on a real kube-apiserver', () => {
  test('watch-list on: one sendInitialEvents watch and no LIST fill the cache; the initial-events-end bookmark syncs it; later changes arrive on the same stream', { timeout: 300_000 }, async (t) => {
    const { cp, auditLog } = await privateCluster(t);
    const ns = 'wl';
    const count = 300;
    await createNamespace(cp, ns);
    await createConfigMaps(cp, ns, count);
    const before = await serverState(cp, ns);
    assert.equal(before.size, count);

    const userAgent = 'tscm-watchlist-test/streaming';
    const h = startInformer(t, cp, ns, userAgent, true);
    await waitFor('informer synced', () => h.informer.hasSynced(), { timeoutMs: 120_000 });

    // The cache is exactly the server's state (names and resourceVersions), delivered to the handler as adds.
    assert.deepEqual(sorted(cacheState(h.informer)), sorted(before));
    // The handler's deliveries trail the cache (its own queue): every object reaches it as an add.
    await waitFor('the handler saw every object as an add', () => h.handled.adds.size === count, { timeoutMs: 30_000 });

    // What the reflector saw on its one stream: the initial ADDED events (informer not yet synced at any of them),
    // then the bookmark annotated k8s.io/initial-events-end, whose resourceVersion the informer took over.
    assert.deepEqual(h.recorder.requests, [{ op: 'watch', resourceVersion: '', sendInitialEvents: true }]);
    const end = h.recorder.events.findIndex((e) => e.type === 'BOOKMARK');
    assert.ok(end >= 0, 'a bookmark arrived');
    const initial = h.recorder.events.slice(0, end);
    assert.equal(initial.length, count, 'one initial event per object before the bookmark');
    assert.ok(initial.every((e) => e.type === 'ADDED' && !e.syncedBefore), 'only ADDED events, none after the informer synced');
    const bookmark = h.recorder.events[end];
    assert.equal(bookmark?.initialEventsEnd, true, 'the first bookmark carries k8s.io/initial-events-end: "true"');
    assert.equal(bookmark.syncedBefore, false, 'the informer was not synced before the bookmark arrived');
    const maxObjectRv = Math.max(...[...before.values()].map(Number));
    assert.ok(Number(bookmark.resourceVersion) >= maxObjectRv, `bookmark RV ${bookmark.resourceVersion} ≥ every object's RV (${maxObjectRv})`);
    if (h.recorder.events.length === end + 1) {
      assert.equal(h.informer.lastSyncResourceVersion(), bookmark.resourceVersion, 'the informer resumes from the bookmark\'s RV');
    }

    // Later changes arrive on the same stream: no new request of any kind.
    await changeAndObserve(cp, ns, h);
    assert.equal(h.recorder.requests.length, 1, 'no further list or watch request');

    // The server's side: this client made exactly one request, a watch with the streaming-list parameters, and no LIST.
    const reqs = await waitFor('the watch in the audit log', () => {
      const r = requestsOf(auditLog, userAgent);
      return r.length > 0 ? r : undefined;
    });
    assert.deepEqual(reqs.map((e) => e.verb), ['watch'], `requests: ${reqs.map((e) => `${e.verb} ${e.requestURI}`).join(', ')}`);
    const q = query(reqs[0] as Audit);
    assert.equal(q.get('sendInitialEvents'), 'true');
    assert.equal(q.get('resourceVersionMatch'), 'NotOlderThan');
    assert.equal(q.get('allowWatchBookmarks'), 'true');
    assert.equal(q.get('resourceVersion'), null, 'the first streaming list asks for the most recent state (no resourceVersion)');
  });

  test('--watch-list: the manager fills its caches with streaming lists and sends no LIST', { timeout: 300_000 }, async (t) => {
    const { cp, auditLog, dir } = await privateCluster(t);
    await createNamespace(cp, 'wl');
    expectStatus(await cp.request('POST', '/apis/apps/v1/namespaces/wl/deployments', {
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd' },
      spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'x' }] } } },
    }), 201, 'deployment');
    const mgr = await ManagerProcess.start({
      args: [`--kubeconfig=${cp.kubeconfig}`, '--controllers=deployment', '--watch-list'], env: { WATCH_NAMESPACE: 'wl' }, metrics: false,
    });
    t.after(async () => {
      await mgr.stop('SIGKILL');
      writeManagerLog(join(dir, 'manager.log'), mgr);
    });
    await mgr.waitReady({ timeoutMs: 120_000 });
    const mine = (): Audit[] => (readAuditLog(auditLog) as Audit[]).filter((e) => e.userAgent?.startsWith('ts-controller-manager/'));
    const watches = await waitFor('the manager\'s watches in the audit log', () => {
      const w = mine().filter((e) => e.verb === 'watch');
      return w.length > 0 ? w : undefined;
    });
    assert.ok(watches.every((e) => query(e).get('sendInitialEvents') === 'true'), `every watch is a streaming list: ${watches.map((e) => e.requestURI).join(', ')}`);
    const lists = mine().filter((e) => e.verb === 'list');
    assert.deepEqual(lists.map((e) => e.requestURI), [], 'no LIST from the manager');
    assert.equal(mgr.running, true);
  });

  test('server refuses streaming lists (WatchList gate off): one refused attempt, then paged LIST, sync, watch from the list RV', { timeout: 300_000 }, async (t) => {
    // In Kubernetes 1.34–1.37 the apiserver's WatchList gate is beta and on by default, and can still be turned off.
    const { cp, auditLog } = await privateCluster(t, ['--feature-gates=WatchList=false']);
    const ns = 'wl';
    const count = 120;
    const pageSize = 50;
    await createNamespace(cp, ns);
    await createConfigMaps(cp, ns, count);
    const before = await serverState(cp, ns);

    const userAgent = 'tscm-watchlist-test/fallback';
    const h = startInformer(t, cp, ns, userAgent, true, pageSize);
    await waitFor('informer synced', () => h.informer.hasSynced(), { timeoutMs: 120_000 });
    assert.deepEqual(sorted(cacheState(h.informer)), sorted(before));

    await changeAndObserve(cp, ns, h);
    const pages = Math.ceil(count / pageSize);
    const reqs = requestsOf(auditLog, userAgent);
    const summary = reqs.map((e) => `${e.verb} ${e.responseStatus?.code} ${e.requestURI}`).join('\n');
    // 1. The streaming list, refused by validation with 422.
    const first = reqs[0];
    assert.ok(first, summary);
    assert.equal(first.verb, 'watch', summary);
    assert.equal(query(first).get('sendInitialEvents'), 'true', summary);
    assert.equal(first.responseStatus?.code, 422, summary);
    // 2. A paged LIST: the first page without a continue token, then one page per token.
    const lists = reqs.slice(1, 1 + pages);
    assert.deepEqual(lists.map((e) => [e.verb, e.responseStatus?.code, query(e).get('limit'), query(e).has('continue')]),
      Array.from({ length: pages }, (_, i) => ['list', 200, String(pageSize), i > 0]), summary);
    // 3. A plain watch from the list's resourceVersion, and no second streaming-list attempt.
    const rest = reqs.slice(1 + pages);
    assert.deepEqual(rest.map((e) => e.verb), ['watch'], summary);
    const watchQ = query(rest[0] as Audit);
    assert.equal(watchQ.get('sendInitialEvents'), null, summary);
    assert.ok(Number(watchQ.get('resourceVersion')) >= Math.max(...[...before.values()].map(Number)), summary);
    assert.deepEqual(h.recorder.requests.map((r) => r.op), ['watch', ...Array<string>(pages).fill('list'), 'watch']);
  });
});
