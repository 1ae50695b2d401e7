/**
 * Unit tests of explore's parts: plan derivation and end-state comparison (pure), and what the in-memory API server
 * promises (memoryserver.ts's contract) — a watch's order and selector transitions, lags and expiry, stale reads only
 * from the watch cache, kills, and write faults.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { ConfigMap } from '../../api/core/v1/zz_generated.types.ts';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { newControllerRef } from '../../apimachinery/ownerref.ts';
import { coreResources } from '../../apimachinery/resource.ts';
import { RestClient } from '../../client/rest.ts';
import { decodeWatchStream } from '../../informerfactory/watchdecoder.ts';
import type { ControllerManager } from '../../runtime/manager.ts';
import { fooControllerSetup } from '../../controllers/foo/controller.ts';
import { explore } from './explore.ts';
import { MemoryApiServer } from './memoryserver.ts';
import { create, remove, settle } from './workload.ts';
import { derivePlans, lagEndsAtRest, maxLagRests, planId, type TraceEntry } from './plans.ts';
import { compare, normalize } from './state.ts';

const write = (signature: string, occurrence: number, method: string, status: number | 'reset' = 200): TraceEntry => ({
  kind: 'write', incarnation: 1, signature, occurrence, status, changed: true, method, resource: signature.split(' ')[1] ?? '', subresource: undefined, action: 'apply',
});

describe('derivePlans', () => {
  const trace: TraceEntry[] = [
    { kind: 'deliver', incarnation: 1, resource: 'foos.x/v1', type: 'ADDED', key: 'a/f', rv: 1 },
    { kind: 'change', rv: 1, type: 'ADDED', resource: 'foos.x/v1', key: 'a/f', change: 1, by: 'workload', envChange: 1 },
    write('POST deployments.apps/v1 a/d', 1, 'POST', 201),
    write('PATCH foos.x/v1/status a/f', 1, 'PATCH'),
    write('PATCH foos.x/v1/status a/f', 2, 'PATCH', 409),
    write('PATCH foos.x/v1/status a/f', 3, 'PATCH'),
    { kind: 'change', rv: 5, type: 'MODIFIED', resource: 'foos.x/v1', key: 'a/f', change: 2, by: 'manager-1' },
    { kind: 'change', rv: 6, type: 'MODIFIED', resource: 'foos.x/v1', key: 'a/f', change: 3, by: 'workload', envChange: 2 },
    { kind: 'change', rv: 7, type: 'DELETED', resource: 'foos.x/v1', key: 'a/f', change: 4, by: 'workload', envChange: 3 },
    write('PATCH deployments.apps/v1 a/d', 1, 'PATCH'),
  ];

  test('crash before and after every write, capped at maxOccurrences per signature', () => {
    const ids = derivePlans(trace, { kinds: ['crash'], maxOccurrences: 2 }).map(planId);
    assert.deepEqual(ids, [
      'crash-before:POST deployments.apps/v1 a/d#1', 'crash-after:POST deployments.apps/v1 a/d#1',
      'crash-before:PATCH foos.x/v1/status a/f#1', 'crash-after:PATCH foos.x/v1/status a/f#1',
      'crash-before:PATCH foos.x/v1/status a/f#2', 'crash-after:PATCH foos.x/v1/status a/f#2',
      'crash-before:PATCH deployments.apps/v1 a/d#1', 'crash-after:PATCH deployments.apps/v1 a/d#1',
    ]);
  });

  test('write faults: 409 only for updates and patches; 500 and timeouts after the write only where it was applied', () => {
    const ids = derivePlans(trace, { kinds: ['fault'], maxOccurrences: 2 }).map(planId);
    assert.ok(!ids.includes('fault-conflict:POST deployments.apps/v1 a/d#1'));
    assert.ok(ids.includes('fault-error-after:POST deployments.apps/v1 a/d#1'));
    assert.ok(ids.includes('fault-conflict:PATCH foos.x/v1/status a/f#2'));
    assert.ok(!ids.includes('fault-error-after:PATCH foos.x/v1/status a/f#2'), 'the 409 was not applied');
  });

  test('stale plans per watched resource, with and without a restart, and time travel to before a deletion', () => {
    const ids = derivePlans(trace, { kinds: ['stale'], maxOccurrences: 1 }).map(planId);
    assert.ok(ids.includes('stale:foos.x/v1:POST deployments.apps/v1 a/d#1'));
    assert.ok(ids.includes('stale-restart:foos.x/v1:POST deployments.apps/v1 a/d#1'));
    assert.ok(ids.includes('stale-restart:foos.x/v1@a/f#4:PATCH deployments.apps/v1 a/d#1'), 'the last write came after a/f was deleted');
    assert.ok(!ids.some((id) => id.includes('@') && id.includes('POST')), 'no deletion before the first write');
  });

  test('right after an object is gone, a restart as a standby that listed it in each earlier state (issue 40)', () => {
    const ids = derivePlans(trace, { kinds: ['stale'], maxOccurrences: 1 }).map(planId);
    // a/f: created (1), changed by the manager (2) and the workload (3), gone (4); the restart point is the manager's
    // first write after the DELETED, whatever its occurrence; the state just before the DELETED is time travel's.
    assert.deepEqual(ids.filter((id) => id.startsWith('stale-standby:')), [
      'stale-standby:foos.x/v1@a/f#2:PATCH deployments.apps/v1 a/d#1',
      'stale-standby:foos.x/v1@a/f#3:PATCH deployments.apps/v1 a/d#1',
    ]);
    // Bounded per gone object: the first maxChangesPerObject - 1 states and the last one before the deletion, once.
    const long: TraceEntry[] = [
      { kind: 'deliver', incarnation: 1, resource: 'foos.x/v1', type: 'ADDED', key: 'a/g', rv: 1 },
      ...[1, 2, 3, 4, 5, 6, 7].map((change): TraceEntry => ({
        kind: 'change', rv: change, type: change === 1 ? 'ADDED' : change === 7 ? 'DELETED' : 'MODIFIED', resource: 'foos.x/v1', key: 'a/g', change, by: 'manager-1',
      })),
      write('PATCH foos.x/v1 a/g', 9, 'PATCH'),
      write('PATCH foos.x/v1 a/h', 1, 'PATCH'),
    ];
    const standby = derivePlans(long, { kinds: ['stale'], maxOccurrences: 1, maxChangesPerObject: 3 }).map(planId).filter((id) => id.startsWith('stale-standby:'));
    assert.deepEqual(standby, ['stale-standby:foos.x/v1@a/g#2:PATCH foos.x/v1 a/g#9', 'stale-standby:foos.x/v1@a/g#3:PATCH foos.x/v1 a/g#9', 'stale-standby:foos.x/v1@a/g#6:PATCH foos.x/v1 a/g#9']);
  });

  test('unobserved plans between consecutive changes made by the environment, never by the manager', () => {
    assert.deepEqual(derivePlans(trace, { kinds: ['unobserved'] }).map(planId), ['unobserved:foos.x/v1 a/f#1-2', 'unobserved:foos.x/v1 a/f#2-3']);
  });
});

describe('normalize and compare', () => {
  const owner: KubeObject = { apiVersion: 'x/v1', kind: 'Foo', metadata: { namespace: 'a', name: 'f', uid: 'u-1', resourceVersion: '9', generation: 3 } };
  const child = (name: string, data: string): KubeObject & { data: unknown } => ({
    apiVersion: 'v1', kind: 'ConfigMap', data: { v: data, owner: 'u-1' },
    metadata: { namespace: 'a', name, generateName: 'f-', uid: `u-${name}`, creationTimestamp: 'now', ownerReferences: [{ apiVersion: 'x/v1', kind: 'Foo', name: 'f', uid: 'u-1' }] },
  });

  test('identities, counters and timestamps do not count; uids become the objects they name; generated names a multiset', () => {
    const a = normalize([{ ...owner, status: { observedGeneration: 3, conditions: [{ type: 'Ready', lastTransitionTime: 't1' }] } } as KubeObject, child('f-abcde', '1')], undefined);
    const other = child('f-zzzzz', '1');
    const b = normalize([{ ...owner, metadata: { ...owner.metadata, uid: 'u-2', resourceVersion: '99', generation: 5 }, status: { observedGeneration: 5, conditions: [{ type: 'Ready', lastTransitionTime: 't2' }] } } as KubeObject,
      { ...other, data: { v: '1', owner: 'u-2' }, metadata: { ...other.metadata, ownerReferences: [{ apiVersion: 'x/v1', kind: 'Foo', name: 'f', uid: 'u-2' }] } } as KubeObject], undefined);
    assert.deepEqual(compare(a, b), []);
  });

  test('an extra generated object, a different field and a behind observedGeneration are differences', () => {
    const ref = normalize([owner, child('f-abcde', '1')], undefined);
    assert.deepEqual(compare(ref, normalize([owner, child('f-abcde', '1'), child('f-xyzxy', '1')], undefined)).map((d) => `${d.what} ${d.how}`), ['v1 ConfigMap a/f-* extra']);
    const diff = compare(ref, normalize([owner, child('f-abcde', '2')], undefined));
    assert.equal(diff[0]?.detail, 'data.v: reference "1", here "2"');
    const behind = normalize([{ ...owner, status: { observedGeneration: 2 } } as KubeObject], undefined);
    const current = normalize([{ ...owner, status: { observedGeneration: 3 } } as KubeObject], undefined);
    assert.equal(compare(current, behind)[0]?.detail, 'status.observedGeneration: reference "current", here "behind"');
  });

  test('a dangling ownerReference and the external state are compared', () => {
    const bare = { ...child('f-abcde', '1'), data: { v: '1' } };
    const ref = normalize([owner, bare], [{ name: 'vol', owner: 'u-1' }]);
    const orphan = normalize([bare], [{ name: 'vol', owner: 'u-1' }]);
    const d = compare(ref, orphan).map((x) => `${x.what} ${x.how} ${x.detail ?? ''}`);
    assert.ok(d.includes('x/v1 Foo a/f missing '));
    assert.ok(d.some((x) => x.includes('uid:dangling')));
    assert.ok(d.some((x) => x.startsWith('external state different')));
  });
});

describe('MemoryApiServer', () => {
  const cm = (name: string, labels: Record<string, string> = {}, v = '1'): KubeObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'a', name, labels }, data: { v } } as KubeObject);
  const setup = (): { server: MemoryApiServer; client: RestClient } => {
    const server = new MemoryApiServer({ objects: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } }] });
    const client = new RestClient({ transport: server.connect('manager-1'), registry: new Registry() });
    return { server, client };
  };
  const watch = async (client: RestClient, query: Record<string, string>) => {
    const res = await client.request('GET', '/api/v1/namespaces/a/configmaps', { query: { watch: 'true', ...query }, timeoutMs: 0 });
    assert.equal(res.status, 200);
    return decodeWatchStream<KubeObject & { status?: { code?: number } }>(res.body)[Symbol.asyncIterator]();
  };

  test('a watch from a resourceVersion replays what came after it, in order, then follows live; selectors see objects enter and leave', async () => {
    const { server, client } = setup();
    const store = server.clientAs('workload');
    await store.json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('x', { app: 'web' }) });
    const rv = server.store.resourceVersion;
    await store.json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('y', { app: 'web' }) });
    const events = await watch(client, { resourceVersion: rv, labelSelector: 'app=web' });
    const e1 = await events.next();
    assert.equal(e1.value?.type, 'ADDED');
    assert.equal(e1.value?.object.metadata?.name, 'y', 'x was there before the resourceVersion: not replayed');
    await store.json('PATCH', '/api/v1/namespaces/a/configmaps/x', { body: { metadata: { labels: { app: 'db' } } }, contentType: 'application/merge-patch+json' });
    const e2 = await events.next();
    assert.deepEqual([e2.value?.type, e2.value?.object.metadata?.name], ['DELETED', 'x'], 'x stopped matching');
    await events.return?.();
  });

  test('a lagging view holds watch events and serves resourceVersion=0 reads from the past, never a consistent read; release delivers in order', async () => {
    const { server, client } = setup();
    const store = server.clientAs('workload');
    await store.json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('x') });
    const conn = server.connect('manager-2');
    const lagging = new RestClient({ transport: conn, registry: new Registry() });
    const events = await watch(lagging, { resourceVersion: server.store.resourceVersion });
    conn.lag('configmaps/v1');
    await store.json('PATCH', '/api/v1/namespaces/a/configmaps/x', { body: { data: { v: '2' } }, contentType: 'application/merge-patch+json' });
    await store.json('PATCH', '/api/v1/namespaces/a/configmaps/x', { body: { data: { v: '3' } }, contentType: 'application/merge-patch+json' });
    const cached = await lagging.json<{ data: { v: string } }>('GET', '/api/v1/namespaces/a/configmaps/x', { query: { resourceVersion: '0' } });
    const consistent = await lagging.json<{ data: { v: string } }>('GET', '/api/v1/namespaces/a/configmaps/x');
    assert.deepEqual([cached.data.v, consistent.data.v], ['1', '3']);
    assert.ok(conn.lagging().includes('configmaps/v1'));
    conn.release();
    const seen = [(await events.next()).value, (await events.next()).value].map((e) => (e?.object as { data?: { v?: string } }).data?.v);
    assert.deepEqual(seen, ['2', '3'], 'held changes, delivered one by one, in order');
    await events.return?.();
    void client;
  });

  test('a standby lag answers the first consistent LIST as of its point in the past (its watch from there replays, held); later consistent reads are current', async () => {
    const { server } = setup();
    const store = server.clientAs('workload');
    await store.json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('x') });
    const past = server.rv;
    await store.json('PATCH', '/api/v1/namespaces/a/configmaps/x', { body: { data: { v: '2' } }, contentType: 'application/merge-patch+json' });
    await store.json('DELETE', '/api/v1/namespaces/a/configmaps/x');
    const conn = server.connect('manager-2');
    conn.lag('configmaps/v1', past, true);
    const c = new RestClient({ transport: conn, registry: new Registry() });
    const list = await c.json<{ metadata: { resourceVersion: string }; items: { data: { v: string } }[] }>('GET', '/api/v1/namespaces/a/configmaps', { query: { limit: '500' } });
    assert.deepEqual([list.metadata.resourceVersion, list.items.map((o) => o.data.v)], [String(past), ['1']], 'the standby listed x before it changed and went');
    const again = await c.json<{ items: unknown[] }>('GET', '/api/v1/namespaces/a/configmaps');
    assert.deepEqual(again.items, [], 'a second consistent LIST is current');
    await assert.rejects(c.json('GET', '/api/v1/namespaces/a/configmaps/x'), /404/, 'a consistent GET is current');
    const events = await watch(c, { resourceVersion: list.metadata.resourceVersion });
    conn.release();
    const seen = [(await events.next()).value, (await events.next()).value].map((e) => e?.type);
    assert.deepEqual(seen, ['MODIFIED', 'DELETED'], 'the watch from the list replays what came after, held until release');
    await events.return?.();
  });

  test('expire ends a held watch with 410 Gone: the changes in between are never delivered', async () => {
    const { server } = setup();
    const conn = server.connect('manager-2');
    const c = new RestClient({ transport: conn, registry: new Registry() });
    const events = await watch(c, { resourceVersion: server.store.resourceVersion });
    conn.lag('configmaps/v1');
    await server.clientAs('workload').json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('x') });
    conn.expire('configmaps/v1');
    const e = await events.next();
    assert.equal(e.value?.type, 'ERROR');
    assert.equal(e.value?.object.status?.code ?? (e.value?.object as { code?: number }).code, 410);
    assert.equal((await events.next()).done, true);
  });

  test('interceptWrite: crash-after applies the write and then kills the connection; conflict answers 409 and applies nothing', async () => {
    const { server, client } = setup();
    let action: 'crash-after' | 'conflict' = 'conflict';
    server.interceptWrite = () => action;
    await assert.rejects(client.json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('x') }), /409|Conflict/);
    assert.equal(server.store.objects(coreResources.configMaps).length, 0);
    action = 'crash-after';
    await assert.rejects(client.json('POST', '/api/v1/namespaces/a/configmaps', { body: cm('y') }), /ECONNRESET/);
    assert.deepEqual(server.store.objects(coreResources.configMaps).map((o) => o.metadata?.name), ['y'], 'applied before the crash');
    server.interceptWrite = undefined;
    await assert.rejects(client.json('GET', '/api/v1/namespaces/a/configmaps'), /ECONNRESET/, 'nothing more on a killed connection');
  });
});

describe('explore', () => {
  test('the reference trace records the steps, every write with its answer, every reconcile with its outcome, and what each informer saw', async () => {
    const foo = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { namespace: 'demo', name: 'foo' }, spec: { deploymentName: 'web', replicas: 1 } };
    const report = await explore({
      crdPaths: [new URL('../../../config/crd/bases', import.meta.url).pathname], setup: (mgr) => { fooControllerSetup.setup(mgr, {}); },
      workload: [create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }), create(foo), settle()], plans: { kinds: [] },
    });
    const kinds = new Set(report.reference.map((e) => e.kind));
    for (const k of ['step', 'start', 'write', 'change', 'deliver', 'reconcile', 'rest']) assert.ok(kinds.has(k as TraceEntry['kind']), `a ${k} entry`);
    assert.ok(report.reference.some((e) => e.kind === 'reconcile' && e.controller === 'foo' && e.key === 'demo/foo' && e.outcome === 'done'));
    assert.ok(report.reference.some((e) => e.kind === 'write' && e.signature === 'POST deployments.apps/v1 demo/web' && e.status === 201));
    assert.equal(report.executed, 0);
  });

  test('a lag ends at its 2nd rest even while a peer keeps undoing what the manager re-creates from its stale view (a late watch delivers in bounded time)', async () => {
    // A ConfigMap with a finalizer owns a Secret of its name (created when absent from the cache). A standby restarted
    // right after the ConfigMap went, whose cache still holds it (finalizer, no deletion), re-creates the Secret; the
    // garbage collector deletes it at the next rest, its delete event brings the owner back, and so on: without the
    // bound, the lag (ended only at a rest where no peer acted) never ends — a liveness finding of explore's making.
    const fin = 'x.example.com/secret';
    const setup = (mgr: ControllerManager): void => {
      const cms = mgr.informer<ConfigMap>(coreResources.configMaps).lister();
      const secrets = mgr.informer<KubeObject>(coreResources.secrets).lister();
      const cmApi = mgr.client.resource<ConfigMap>(coreResources.configMaps);
      const secretApi = mgr.client.resource<KubeObject>(coreResources.secrets);
      mgr.controller('owned-secret').for<ConfigMap>(coreResources.configMaps).owns(coreResources.secrets).complete(async ({ namespace, name }, signal) => {
        const cm = cms.get(namespace, name);
        if (!cm) return;
        const finalizers = cm.metadata?.finalizers ?? [];
        const setFinalizers = (list: string[]): Promise<unknown> =>
          cmApi.namespace(namespace).patch(name, { merge: { metadata: { finalizers: list, resourceVersion: cm.metadata?.resourceVersion } } }, { signal });
        if (cm.metadata?.deletionTimestamp) return void await setFinalizers(finalizers.filter((f) => f !== fin));
        if (!finalizers.includes(fin)) return void await setFinalizers([...finalizers, fin]);
        if (!secrets.get(namespace, name)) {
          await secretApi.namespace(namespace).create({ metadata: { name, ownerReferences: [newControllerRef({ ...cm, apiVersion: 'v1', kind: 'ConfigMap' })] } }, { signal });
        }
      });
    };
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'a', name: 'src' } };
    const plan = 'stale-standby:configmaps/v1@a/src#3:PATCH configmaps/v1 a/src#2';
    const lines: string[] = [];
    const before = process.env['EXPLORE_PLAN'];
    process.env['EXPLORE_PLAN'] = plan;
    try {
      const report = await explore({
        name: 'owned-secret', setup, log: (l) => lines.push(l),
        workload: [create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } }), create(cm), settle(), remove(cm), settle()],
      });
      assert.equal(report.executed - report.notTriggered, 1, `${plan} ran and happened`);
      assert.deepEqual(report.findings.map((f) => f.summary), [], 'no finding');
      const trace = lines.join('\n');
      assert.match(trace, /POST secrets\/v1 a\/src #\d+ → 201[^]*peers still acting: it catches up/, 'the standby re-created the Secret, and the lag ended at a rest where a peer acted');
    } finally {
      if (before === undefined) delete process.env['EXPLORE_PLAN'];
      else process.env['EXPLORE_PLAN'] = before;
    }
    // The rule itself (pure): a rest where no peer acted ends a lag; one where peers acted, from the 2nd on.
    assert.deepEqual([1, 2, 3].map((rest) => [lagEndsAtRest(rest, false), lagEndsAtRest(rest, true)]), [[true, false], [true, true], [true, true]]);
    assert.equal(maxLagRests, 2);
  });
});
