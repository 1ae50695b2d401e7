import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer, type FakeObject } from '../../test/fakeapiserver/server.ts';
import { FakeClock } from '../util/clock.ts';
import { isDeletedFinalStateUnknown } from './object.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { CONTROLLER_OWNER_UID_INDEX, controllerOwnerUIDIndex } from './ownerindex.ts';
import { coreResources } from '../apimachinery/resource.ts';
import { SharedIndexInformer, type SharedIndexInformerOptions } from './sharedinformer.ts';
import { WatchCounter } from './watchcounter.ts';

const resource = coreResources.configMaps;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

function cm(name: string, ns = 'default', extra: Partial<FakeObject['metadata']> = {}): FakeObject {
  return { metadata: { name, namespace: ns, ...extra }, data: { v: '1' } };
}

async function serve(): Promise<FakeApiServer> {
  const server = new FakeApiServer({ resource });
  await server.listen();
  cleanups.push(() => server.close());
  return server;
}

function informerOn(server: FakeApiServer, opts: Partial<SharedIndexInformerOptions<KubeObject>> = {}): {
  informer: SharedIndexInformer;
  start: () => void;
} {
  const informer = new SharedIndexInformer({
    resource,
    client: restClientFor(server.url),
    reflector: { config: { backoffInitialMs: 20, backoffMaxMs: 100 } },
    watchCounter: new WatchCounter(),
    ...opts,
  });
  const ac = new AbortController();
  let done: Promise<void> | undefined;
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  return { informer, start: () => void (done = informer.start(ac.signal)) };
}

function recorder(log: string[], tag = ''): Parameters<SharedIndexInformer['addEventHandler']>[0] {
  return {
    onAdd: (o, initial) => void log.push(`${tag}add:${o.metadata?.name}:${initial}`),
    onUpdate: (a, b) => void log.push(`${tag}update:${b.metadata?.name}:${a === b ? 'same' : `${a.metadata?.resourceVersion}->${b.metadata?.resourceVersion}`}`),
    onDelete: (o) => void log.push(`${tag}delete:${isDeletedFinalStateUnknown(o) ? `tombstone:${o.key}` : o.metadata?.name}`),
  };
}

describe('SharedIndexInformer', () => {
  it('delivers initial adds (isInInitialList) then live add/update/delete', async () => {
    const server = await serve();
    server.create(cm('a'));
    const { informer, start } = informerOn(server);
    const log: string[] = [];
    const reg = informer.addEventHandler(recorder(log));
    assert.equal(reg.hasSynced(), false);
    start();
    await eventually('synced', () => informer.hasSynced() && reg.hasSynced());
    assert.deepEqual(log, ['add:a:true']);
    await eventually('watching', () => server.openWatches === 1);
    server.create(cm('b'));
    server.update(cm('a', 'default', { labels: { x: 'y' } }));
    server.remove('default', 'b');
    await eventually('live events', () => log.length === 4);
    assert.deepEqual(log, ['add:a:true', 'add:b:false', 'update:a:101->103', 'delete:b']);
    assert.equal(informer.lister().get('default', 'a')?.metadata?.labels?.x, 'y');
    assert.equal(informer.lister().get('default', 'b'), undefined);
    assert.equal(informer.lastSyncResourceVersion(), '104');
  });

  it('caches deep-frozen objects: a mutation through the lister or a handler throws and the cache is unchanged', async () => {
    const server = await serve();
    server.create(cm('a', 'default', { labels: { x: 'y' } }));
    const { informer, start } = informerOn(server);
    const seen: KubeObject[] = [];
    informer.addEventHandler({ onAdd: (o) => void seen.push(o) });
    start();
    await eventually('synced', () => informer.hasSynced() && seen.length === 1);
    const cached = informer.lister().get('default', 'a') as FakeObject;
    assert.equal(seen[0], cached, 'the handler got the cached object itself');
    assert.throws(() => { (cached.data as Record<string, string>).v = '2'; }, TypeError);
    assert.throws(() => { (cached.metadata.labels as Record<string, string>).x = 'z'; }, TypeError);
    assert.throws(() => { delete (cached.metadata as { name?: string }).name; }, TypeError);
    const copy = structuredClone(cached);
    copy.data = { v: '2' };
    assert.equal((informer.lister().get('default', 'a') as { data?: Record<string, string> }).data?.v, '1');
    assert.equal(informer.lister().get('default', 'a')?.metadata?.labels?.x, 'y');
  });

  it('replays the cache to a handler added after start, with its own hasSynced', async () => {
    const server = await serve();
    for (const n of ['a', 'b', 'c']) server.create(cm(n));
    const { informer, start } = informerOn(server);
    start();
    await eventually('synced', () => informer.hasSynced());
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const log: string[] = [];
    const reg = informer.addEventHandler({
      onAdd: async (o, initial) => {
        log.push(`add:${o.metadata?.name}:${initial}`);
        await gate;
      },
    });
    await eventually('first replayed add running', () => log.length === 1);
    assert.equal(reg.hasSynced(), false, 'not synced while replayed adds are pending');
    assert.equal(informer.hasSynced(), true);
    release();
    await eventually('late handler synced', () => reg.hasSynced());
    assert.deepEqual(log.sort(), ['add:a:true', 'add:b:true', 'add:c:true']);
  });

  it('a throwing handler is isolated; a slow handler does not block the others', async () => {
    const server = await serve();
    const { informer, start } = informerOn(server);
    const good: string[] = [];
    let thrown = 0;
    informer.addEventHandler({
      onAdd: () => {
        thrown++;
        throw new Error('handler bug');
      },
    });
    let releaseSlow: () => void = () => undefined;
    const slowGate = new Promise<void>((r) => (releaseSlow = r));
    const slow: string[] = [];
    informer.addEventHandler({
      onAdd: async (o) => {
        slow.push(o.metadata?.name ?? '');
        await slowGate;
      },
    });
    informer.addEventHandler(recorder(good));
    start();
    await eventually('synced', () => informer.hasSynced());
    await eventually('watching', () => server.openWatches === 1);
    for (const n of ['a', 'b', 'c']) server.create(cm(n));
    await eventually('good handler got everything', () => good.length === 3);
    assert.deepEqual(slow, ['a'], 'the slow handler is still on its first event');
    assert.equal(thrown, 3, 'the throwing handler was called for every event');
    releaseSlow();
    await eventually('slow handler catches up', () => slow.length === 3);
    assert.equal(informer.lister().list().length, 3);
  });

  it('strips managedFields by default and applies a custom transform', async () => {
    const server = await serve();
    server.create(cm('a', 'default', { managedFields: [{ manager: 'kubectl' }] }));
    const { informer, start } = informerOn(server);
    start();
    await eventually('synced', () => informer.hasSynced());
    assert.equal(informer.lister().get('default', 'a')?.metadata?.managedFields, undefined);
    assert.equal(informer.lister().get('default', 'a')?.metadata?.uid, 'uid-1');

    const server2 = await serve();
    server2.create(cm('b'));
    const custom = informerOn(server2, {
      transform: (o) => ({ metadata: { name: o.metadata?.name, namespace: o.metadata?.namespace, labels: { transformed: 'yes' } } }),
    });
    custom.start();
    await eventually('synced', () => custom.informer.hasSynced());
    assert.deepEqual(custom.informer.lister().list('default', 'transformed=yes').length, 1);
  });

  it('a transform that returns an object without metadata.name does not wedge the informer: the list is retried', async () => {
    const server = await serve();
    server.create(cm('a'));
    server.create(cm('b'));
    let broken = 3; // the first three objects transformed lose their name (e.g. a buggy transform, fixed by a reload)
    const { informer, start } = informerOn(server, {
      transform: (o) => (broken-- > 0 ? { ...o, metadata: { ...o.metadata, name: undefined } } : o),
    });
    start();
    await eventually('synced after the failed replace was retried', () => informer.hasSynced());
    assert.deepEqual(informer.lister().list().map((o) => o.metadata?.name).sort(), ['a', 'b']);
    assert.ok(server.requests.filter((r) => r.kind === 'list').length >= 2, 'the list was fetched again');
  });

  it('resyncs each handler at its own period with onUpdate(obj, obj)', async () => {
    const server = await serve();
    server.create(cm('a'));
    const clock = new FakeClock();
    const { informer, start } = informerOn(server, { clock });
    const fastLog: string[] = [];
    const slowLog: string[] = [];
    const noneLog: string[] = [];
    informer.addEventHandler(recorder(fastLog), { resyncPeriodMs: 1000 });
    informer.addEventHandler(recorder(slowLog), { resyncPeriodMs: 3000 });
    informer.addEventHandler(recorder(noneLog));
    start();
    await eventually('synced', () => informer.hasSynced() && fastLog.length === 1);
    clock.step(1000);
    await eventually('fast handler resynced', () => fastLog.includes('update:a:same'));
    clock.step(1000);
    await eventually('fast handler resynced twice', () => fastLog.filter((e) => e === 'update:a:same').length === 2);
    assert.deepEqual(slowLog, ['add:a:true']);
    clock.step(1000);
    await eventually('slow handler resynced', () => slowLog.includes('update:a:same'));
    assert.deepEqual(noneLog, ['add:a:true'], 'a handler without a period never resyncs');
  });

  it('addIndexers after start indexes the cached objects', async () => {
    const server = await serve();
    const owner = { apiVersion: 'x/v1', kind: 'Foo', name: 'f', uid: 'foo-uid', controller: true };
    server.create(cm('owned-1', 'default', { ownerReferences: [owner] }));
    server.create(cm('owned-2', 'default', { ownerReferences: [owner] }));
    server.create(cm('other'));
    const { informer, start } = informerOn(server);
    start();
    await eventually('synced', () => informer.hasSynced());
    informer.addIndexers(controllerOwnerUIDIndex);
    const owned = informer.getIndexer().byIndex(CONTROLLER_OWNER_UID_INDEX, 'foo-uid');
    assert.deepEqual(owned.map((o) => o.metadata?.name).sort(), ['owned-1', 'owned-2']);
    await eventually('watching', () => server.openWatches === 1);
    server.create(cm('owned-3', 'default', { ownerReferences: [owner] }));
    await eventually('new object indexed', () => informer.getIndexer().byIndex(CONTROLLER_OWNER_UID_INDEX, 'foo-uid').length === 3);
  });

  it('a removed handler receives nothing more', async () => {
    const server = await serve();
    const { informer, start } = informerOn(server);
    const removed: string[] = [];
    const kept: string[] = [];
    const reg = informer.addEventHandler(recorder(removed));
    informer.addEventHandler(recorder(kept));
    start();
    await eventually('watching', () => informer.hasSynced() && server.openWatches === 1);
    reg.remove();
    assert.equal(reg.hasSynced(), false);
    server.create(cm('a'));
    await eventually('kept handler got it', () => kept.length === 1);
    assert.deepEqual(removed, []);
  });

  it('several namespaces: one list+watch each, one cache; a relist only touches its namespace', async () => {
    const server = await serve();
    server.create(cm('a1', 'a'));
    server.create(cm('b1', 'b'));
    server.create(cm('c1', 'c'));
    const counter = new WatchCounter();
    const { informer, start } = informerOn(server, { namespaces: ['a', 'b'], watchCounter: counter });
    const log: string[] = [];
    informer.addEventHandler(recorder(log));
    start();
    await eventually('synced', () => informer.hasSynced());
    assert.deepEqual(informer.lister().list().map((o) => o.metadata?.name).sort(), ['a1', 'b1']);
    await eventually('two watches', () => counter.count(resource, 'a') === 1 && counter.count(resource, 'b') === 1);
    assert.equal(counter.count(resource), 2);
    assert.deepEqual(
      server.requests.filter((r) => r.kind === 'list').map((r) => r.namespace).sort(),
      ['a', 'b'],
    );
    server.remove('a', 'a1', { deliver: false });
    server.compact();
    server.dropWatches('end');
    await eventually('a1 tombstoned', () => log.includes('delete:tombstone:a/a1'));
    assert.ok(!log.some((e) => e.includes('tombstone:b/')), 'namespace b objects are not tombstoned by a relist of a');
    assert.deepEqual(informer.lister().list().map((o) => o.metadata?.name), ['b1']);
    server.create(cm('b2', 'b'));
    server.create(cm('c2', 'c'));
    await eventually('b2 arrives', () => informer.lister().get('b', 'b2') !== undefined);
    assert.equal(informer.lister().get('c', 'c2'), undefined);
  });

  it('refuses to start twice and to add handlers after stop', async () => {
    const server = await serve();
    const informer = new SharedIndexInformer({ resource, client: restClientFor(server.url), watchCounter: new WatchCounter() });
    const ac = new AbortController();
    const done = informer.start(ac.signal);
    await assert.rejects(informer.start(ac.signal), /already started/);
    ac.abort();
    await done;
    assert.throws(() => informer.addEventHandler({}), /stopped/);
  });
});
