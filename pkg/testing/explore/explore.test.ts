/**
 * Unit tests of explore's parts: plan derivation and end-state comparison (pure), and what the in-memory API server
 * promises (memoryserver.ts's contract) — a watch's order and selector transitions, lags and expiry, stale reads only
 * from the watch cache, kills, and write faults.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { coreResources } from '../../apimachinery/resource.ts';
import { RestClient } from '../../client/rest.ts';
import { decodeWatchStream } from '../../informerfactory/watchdecoder.ts';
import { fooControllerSetup } from '../../controllers/foo/controller.ts';
import { explore } from './explore.ts';
import { MemoryApiServer } from './memoryserver.ts';
import { create, settle } from './workload.ts';
import { derivePlans, planId, type TraceEntry } from './plans.ts';
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
});
