/**
 * Protocol tests: the reflector (through a SharedIndexInformer) against the fault-injecting FakeApiServer over real
 * HTTP. Backoff and timeouts are shortened; conditions are polled, never slept for.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeApiServer, type FakeApiServerOptions, type RecordedRequest } from '../../test/fakeapiserver/server.ts';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { isDeletedFinalStateUnknown } from './object.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import type { ReflectorConfig } from './reflectorstate.ts';
import { coreResources } from '../apimachinery/resource.ts';
import { SharedIndexInformer } from './sharedinformer.ts';
import { WatchCounter } from './watchcounter.ts';

const resource = coreResources.configMaps;
const fast: Partial<ReflectorConfig> = { backoffInitialMs: 20, backoffMaxMs: 200, backoffJitter: 0 };

interface Harness {
  server: FakeApiServer;
  informer: SharedIndexInformer;
  events: string[];
  counter: WatchCounter;
  lists: () => RecordedRequest[];
  watches: () => RecordedRequest[];
  stop: () => Promise<void>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

function cm(name: string, data: Record<string, string> = {}): { metadata: { name: string; namespace: string }; data: Record<string, string> } {
  return { metadata: { name, namespace: 'default' }, data };
}

async function setup(opts: {
  server?: Partial<FakeApiServerOptions>;
  seed?: number;
  config?: Partial<ReflectorConfig>;
  idleMs?: number;
  useWatchList?: boolean;
  start?: boolean;
} = {}): Promise<Harness> {
  const server = new FakeApiServer({ resource, ...opts.server });
  await server.listen();
  for (let i = 0; i < (opts.seed ?? 0); i++) server.create(cm(`seed-${i}`));
  const counter = new WatchCounter();
  const informer = new SharedIndexInformer({
    resource,
    client: restClientFor(server.url),
    namespaces: ['default'],
    reflector: { config: { ...fast, ...opts.config }, watchIdleTimeoutMs: opts.idleMs ?? 10_000 },
    useWatchList: opts.useWatchList,
    watchCounter: counter,
  });
  const events: string[] = [];
  informer.addEventHandler({
    onAdd: (o) => void events.push(`add:${o.metadata?.name}`),
    onUpdate: (_old, o) => void events.push(`update:${o.metadata?.name}:${o.metadata?.resourceVersion}`),
    onDelete: (o) => void events.push(isDeletedFinalStateUnknown(o) ? `tombstone:${o.key}` : `delete:${o.metadata?.name}`),
  });
  const ac = new AbortController();
  let done: Promise<void> | undefined;
  const h: Harness = {
    server,
    informer,
    events,
    counter,
    lists: () => server.requests.filter((r) => r.kind === 'list'),
    watches: () => server.requests.filter((r) => r.kind === 'watch'),
    stop: async () => {
      ac.abort();
      await done;
      await server.close();
    },
  };
  cleanups.push(h.stop);
  if (opts.start ?? true) {
    done = informer.start(ac.signal);
    await eventually('informer synced', () => informer.hasSynced());
  }
  return h;
}

/** A LIST request as first page, continue page or full (unpaginated) list, with its status. */
const listKind = (r: RecordedRequest): string =>
  `${r.query.continue ? 'page' : r.query.limit === undefined ? 'full' : 'first'}:${r.status}`;

const names = (informer: SharedIndexInformer): string[] =>
  informer.lister().list().map((o: KubeObject) => o.metadata?.name ?? '').sort();

describe('reflector protocol', () => {
  it('lists in pages with continue, delivers one replace, then watches from the list resourceVersion', async () => {
    const h = await setup({ seed: 7, config: { pageSize: 3 } });
    assert.equal(h.informer.lister().list().length, 7);
    const lists = h.lists();
    assert.deepEqual(lists.map((r) => [r.query.limit, r.query.continue === undefined]), [['3', true], ['3', false], ['3', false]]);
    await eventually('watch open', () => h.server.openWatches === 1);
    const w = h.watches()[0] as RecordedRequest;
    assert.equal(w.query.resourceVersion, '107');
    assert.equal(w.query.allowWatchBookmarks, 'true');
    const t = Number(w.query.timeoutSeconds);
    assert.ok(t >= 300 && t <= 600, `timeoutSeconds ${t}`);
    assert.equal(h.events.filter((e) => e.startsWith('add:')).length, 7);
    assert.equal(h.informer.lastSyncResourceVersion(), '107');
    await eventually('client counts the watch', () => h.counter.count(resource, 'default') === 1);
  });

  for (const mode of ['partial', 'reset'] as const) {
    it(`a stream cut in the middle of an event (${mode}) → re-watch from the last RV without losing events`, async () => {
      const h = await setup({ seed: 1 });
      await eventually('watch open', () => h.server.openWatches === 1);
      h.server.dropWatches('end');
      h.server.inject({ on: 'watch', action: { kind: 'cut', afterEvents: 2, mode } });
      await eventually('cut watch open', () => h.server.openWatches === 1 && h.server.pendingFaults() === 0);
      for (const n of ['d', 'e', 'f']) h.server.create(cm(n));
      await eventually('all three objects cached', () => names(h.informer).join() === 'd,e,f,seed-0');
      assert.deepEqual(h.events.filter((e) => /^add:[def]$/.test(e)), ['add:d', 'add:e', 'add:f'], 'each add exactly once');
      const ws = h.watches();
      const resumed = ws[ws.length - 1] as RecordedRequest;
      if (mode === 'partial') {
        assert.equal(resumed.query.resourceVersion, '103', 'resumes after the last complete event (e = 103)');
      } else {
        // A reset may also discard complete events still unread in the socket: resume from wherever we got to.
        assert.ok(['101', '102', '103'].includes(resumed.query.resourceVersion ?? ''), `resumed at ${resumed.query.resourceVersion}`);
      }
      assert.equal(h.lists().length, 1, 'no relist');
    });
  }

  it('410 (ERROR event) on watch → relist; an object deleted meanwhile becomes a tombstone', async () => {
    const h = await setup({ seed: 3 });
    await eventually('watch open', () => h.server.openWatches === 1);
    h.server.remove('default', 'seed-1', { deliver: false }); // the DELETED event is lost
    h.server.compact();
    h.server.dropWatches('reset');
    await eventually('relisted', () => h.lists().length === 2);
    await eventually('tombstone delivered', () => h.events.includes('tombstone:default/seed-1'));
    assert.deepEqual(names(h.informer), ['seed-0', 'seed-2']);
    assert.ok(!h.events.some((e) => e.startsWith('update:')), 'unchanged objects are not re-delivered after a relist');
    assert.equal(h.informer.lastSyncResourceVersion(), '104');
    await eventually('watching again', () => h.server.openWatches === 1);
    h.server.create(cm('after'));
    await eventually('new events flow', () => h.events.includes('add:after'));
  });

  it('410 as an HTTP status on watch → relist', async () => {
    const h = await setup({ seed: 2, server: { goneAs: 'status' } });
    await eventually('watch open', () => h.server.openWatches === 1);
    h.server.update({ ...cm('seed-0', { v: '2' }) }, { deliver: false });
    h.server.compact();
    h.server.dropWatches('end');
    await eventually('relisted', () => h.lists().length === 2);
    assert.ok(h.server.requests.some((r) => r.kind === 'watch' && r.status === 410));
    await eventually('update seen via relist', () => h.events.includes('update:seed-0:103'));
  });

  it('an event of an unknown type is skipped; the same watch goes on (it used to fail and re-open the watch)', async () => {
    const h = await setup({ seed: 1 });
    await eventually('watch open', () => h.server.openWatches === 1);
    h.server.inject({ on: 'watch', action: { kind: 'rawLine', line: '{"type":"FUTURE","object":{"kind":"Status"}}' } });
    h.server.dropWatches('end');
    await eventually('new watch open', () => h.server.openWatches === 1 && h.server.pendingFaults() === 0);
    h.server.create(cm('after-unknown'));
    await eventually('later events arrive', () => h.events.includes('add:after-unknown'));
    assert.equal(h.watches().length, 2, 'no re-watch after the unknown event');
    assert.equal(h.lists().length, 1);
  });

  it('bookmark-only streams keep the resourceVersion moving; the next watch resumes from it', async () => {
    const h = await setup({ seed: 1 });
    await eventually('watch open', () => h.server.openWatches === 1);
    const before = h.events.length;
    h.server.advance(10);
    h.server.bookmark();
    await eventually('RV moved by bookmark', () => h.informer.lastSyncResourceVersion() === '111');
    h.server.advance(5);
    h.server.bookmark();
    await eventually('RV moved again', () => h.informer.lastSyncResourceVersion() === '116');
    assert.equal(h.events.length, before, 'bookmarks reach no handler');
    h.server.dropWatches('end');
    await eventually('re-watched', () => h.watches().length === 2);
    assert.equal(h.watches()[1]?.query.resourceVersion, '116');
  });

  it('429 and 500 on LIST pages → back off and retry the same page', async () => {
    const h = await setup({ seed: 7, config: { pageSize: 3 }, start: false });
    h.server.inject({ on: 'list', when: (r) => r.query.continue !== undefined, action: { kind: 'status', status: 429, reason: 'TooManyRequests' } });
    h.server.inject({ on: 'list', when: (r) => r.query.continue !== undefined, action: { kind: 'status', status: 500 } });
    h.server.inject({ on: 'list', action: { kind: 'status', status: 503, reason: 'ServiceUnavailable' } });
    const ac = new AbortController();
    const done = h.informer.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });
    await eventually('synced despite errors', () => h.informer.hasSynced());
    assert.equal(h.informer.lister().list().length, 7);
    const seq = h.lists().map((r) => `${r.query.continue ? 'page' : 'first'}:${r.status}`);
    assert.deepEqual(seq, ['first:503', 'first:200', 'page:429', 'page:500', 'page:200', 'page:200']);
    const lists = h.lists();
    assert.equal(lists[2]?.query.continue, lists[3]?.query.continue, 'the failed page is retried with the same token');
    assert.equal(lists[3]?.query.continue, lists[4]?.query.continue, 'and again after the 500');
    assert.notEqual(lists[4]?.query.continue, lists[5]?.query.continue, 'then the list moves on');
    assert.equal(h.events.filter((e) => e.startsWith('add:')).length, 7);
  });

  it('a stream that goes silent is detected and re-watched; nothing is lost', async () => {
    const h = await setup({ seed: 1, idleMs: 300 });
    await eventually('watch open', () => h.server.openWatches === 1);
    h.server.inject({ on: 'watch', action: { kind: 'silent' } });
    h.server.dropWatches('end');
    await eventually('silent watch open', () => h.server.pendingFaults() === 0 && h.server.openWatches === 1);
    h.server.create(cm('during-silence')); // withheld from the silent stream
    await eventually('re-watched after the idle timeout', () => h.watches().length >= 3, 5000);
    await eventually('event recovered', () => h.events.includes('add:during-silence'));
    await eventually('silent stream closed', () => h.server.openWatches === 1);
  });

  it('an expired continue token → one full unpaginated LIST (client-go pager FullListIfExpired)', async () => {
    const h = await setup({ seed: 5, config: { pageSize: 2 }, start: false });
    h.server.inject({
      on: 'list',
      when: (r) => r.query.continue !== undefined,
      action: { kind: 'status', status: 410, reason: 'Expired', message: 'The provided continue parameter is too old' },
    });
    const ac = new AbortController();
    const done = h.informer.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });
    await eventually('synced', () => h.informer.hasSynced());
    assert.deepEqual(h.lists().map(listKind), ['first:200', 'page:410', 'full:200']);
    assert.equal(h.informer.lister().list().length, 5);
    assert.equal(h.events.filter((e) => e.startsWith('add:')).length, 5, 'the aborted first attempt delivered nothing');
  });

  it('a continue token expired by compaction between two pages (410 Expired) → full relist', async () => {
    const h = await setup({ seed: 4, config: { pageSize: 2 }, start: false });
    let compacted = false;
    h.server.onAnswered = (r) => {
      if (r.kind === 'list' && r.query.continue === undefined && r.status === 200 && !compacted) {
        compacted = true;
        h.server.create(cm('created-between-pages'));
        h.server.compact();
      }
    };
    const ac = new AbortController();
    const done = h.informer.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });
    await eventually('synced', () => h.informer.hasSynced());
    assert.deepEqual(h.lists().map(listKind), ['first:200', 'page:410', 'full:200']);
    assert.deepEqual(names(h.informer), ['created-between-pages', 'seed-0', 'seed-1', 'seed-2', 'seed-3']);
  });

  it('a paged list that always outlasts compaction still syncs (it used to restart the paged LIST forever)', async () => {
    const h = await setup({ seed: 4, config: { pageSize: 2 }, start: false });
    // Every first page is followed by a write and a compaction, so every continue token has expired when used.
    h.server.onAnswered = (r) => {
      if (r.kind === 'list' && r.query.continue === undefined && r.query.limit !== undefined && r.status === 200) {
        h.server.create(cm(`between-${h.lists().length}`));
        h.server.compact();
      }
    };
    const ac = new AbortController();
    const done = h.informer.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });
    await eventually('synced', () => h.informer.hasSynced() || h.lists().length > 20);
    assert.deepEqual(h.lists().map(listKind), ['first:200', 'page:410', 'full:200']);
    assert.deepEqual(names(h.informer), ['between-1', 'seed-0', 'seed-1', 'seed-2', 'seed-3']);
  });

  it('streaming list: served by one watch with sendInitialEvents, no LIST', async () => {
    const h = await setup({ seed: 3, useWatchList: true });
    assert.equal(h.lists().length, 0);
    const w = h.watches()[0] as RecordedRequest;
    assert.equal(w.query.sendInitialEvents, 'true');
    assert.equal(w.query.resourceVersionMatch, 'NotOlderThan');
    assert.equal(w.query.allowWatchBookmarks, 'true');
    assert.deepEqual(names(h.informer), ['seed-0', 'seed-1', 'seed-2']);
    h.server.create(cm('live'));
    await eventually('live event on the same stream', () => h.events.includes('add:live'));
    assert.equal(h.watches().length, 1);
  });

  it('streaming list refused (422) → paged LIST, and never tried again', async () => {
    const h = await setup({ seed: 2, useWatchList: true, server: { watchList: 'refuse' } });
    assert.deepEqual(h.server.requests.slice(0, 2).map((r) => `${r.kind}:${r.status}`), ['watch:422', 'list:200']);
    assert.equal(h.informer.lister().list().length, 2);
    await eventually('watch open', () => h.server.openWatches === 1);
    h.server.create(cm('lost'), { deliver: false });
    h.server.compact();
    h.server.dropWatches('end');
    await eventually('relisted', () => h.lists().length === 2);
    assert.equal(h.server.requests.filter((r) => r.query.sendInitialEvents === 'true').length, 1);
  });

  it('streaming list ignored by the server (plain bookmark, no end marker) → paged LIST', async () => {
    const h = await setup({ seed: 2, useWatchList: true, server: { watchList: 'ignore' } });
    assert.equal(h.lists().length, 1);
    assert.deepEqual(names(h.informer), ['seed-0', 'seed-1']);
    assert.equal(h.events.filter((e) => e.startsWith('add:')).length, 2, 'the ignored stream delivered nothing to handlers');
  });

  it('counts open watches and closes them on stop', async () => {
    const h = await setup({ seed: 1 });
    await eventually('watch open', () => h.counter.count(resource, 'default') === 1);
    assert.equal(h.counter.total(), 1);
    await h.stop();
    cleanups.length = 0;
    assert.equal(h.counter.total(), 0);
    assert.ok(h.informer.isStopped());
  });
});
