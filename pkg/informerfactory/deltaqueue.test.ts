import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DeltaQueue, type Delta } from './deltaqueue.ts';
import { Indexer } from './indexer.ts';
import { deletedFinalStateUnknown, isDeletedFinalStateUnknown } from './object.ts';
import type { KubeObject } from '../apimachinery/meta.ts';

function o(ns: string, name: string, rv = '1'): KubeObject {
  return { metadata: { namespace: ns, name, resourceVersion: rv } };
}

interface Popped {
  deltas: readonly Delta<KubeObject>[];
  initial: boolean;
}

async function popOne(q: DeltaQueue<KubeObject>, store?: Indexer<KubeObject>): Promise<Popped> {
  let got: Popped | undefined;
  const ok = await q.pop((deltas, initial) => {
    got = { deltas, initial };
    // Apply to the store like the informer does.
    for (const d of deltas) {
      if (d.type === 'Deleted') store?.delete(d.object);
      else store?.update(d.object);
    }
  });
  assert.ok(ok && got);
  return got;
}

const summary = (ds: readonly Delta<KubeObject>[]): string[] =>
  ds.map((d) => `${d.type}:${isDeletedFinalStateUnknown(d.object) ? `tombstone(${d.object.obj?.metadata?.resourceVersion ?? '-'})` : d.object.metadata?.resourceVersion}`);

function setup(scopes?: string[]): { q: DeltaQueue<KubeObject>; store: Indexer<KubeObject> } {
  const store = new Indexer<KubeObject>();
  return { q: new DeltaQueue<KubeObject>({ knownObjects: store, scopes }), store };
}

describe('DeltaQueue', () => {
  it('keeps all deltas of a key together, keys in first-dirty order', async () => {
    const { q } = setup();
    q.add(o('a', 'x', '1'));
    q.add(o('a', 'y', '2'));
    q.update(o('a', 'x', '3'));
    assert.deepEqual(q.queuedKeys(), ['a/x', 'a/y']);
    assert.deepEqual(summary((await popOne(q)).deltas), ['Added:1', 'Updated:3']);
    assert.deepEqual(summary((await popOne(q)).deltas), ['Added:2']);
    assert.equal(q.length, 0);
  });

  it('collapses consecutive deletes, preferring the observed one over a tombstone', () => {
    const { q, store } = setup();
    store.add(o('a', 'x', '1'));
    q.delete(o('a', 'x', '2'));
    q.delete(deletedFinalStateUnknown('a/x', o('a', 'x', '1')));
    assert.deepEqual(summary(q.deltasOf('a/x')), ['Deleted:2']);
    const { q: q2, store: s2 } = setup();
    s2.add(o('a', 'x', '1'));
    q2.delete(deletedFinalStateUnknown('a/x', o('a', 'x', '1')));
    q2.delete(o('a', 'x', '3'));
    assert.deepEqual(summary(q2.deltasOf('a/x')), ['Deleted:3']);
    q2.delete(o('a', 'x', '4'));
    assert.deepEqual(summary(q2.deltasOf('a/x')), ['Deleted:3'], 'of two observed deletes the older is kept');
  });

  it('does not collapse a delete followed by a re-add', () => {
    const { q, store } = setup();
    store.add(o('a', 'x', '1'));
    q.delete(o('a', 'x', '2'));
    q.add(o('a', 'x', '3'));
    q.delete(o('a', 'x', '4'));
    assert.deepEqual(summary(q.deltasOf('a/x')), ['Deleted:2', 'Added:3', 'Deleted:4']);
  });

  it('ignores the delete of a key neither queued nor known', () => {
    const { q } = setup();
    q.delete(o('a', 'ghost'));
    assert.equal(q.length, 0);
  });

  it('replace queues Replaced for listed objects and tombstones for vanished ones', async () => {
    const { q, store } = setup();
    store.add(o('a', 'kept', '1'));
    store.add(o('a', 'gone', '2'));
    q.update(o('a', 'queued-gone', '5')); // pending, not in store, missing from the list
    q.replace([o('a', 'kept', '3'), o('a', 'new', '4')], '10');
    assert.deepEqual(q.queuedKeys(), ['a/queued-gone', 'a/kept', 'a/new', 'a/gone']);
    assert.deepEqual(summary(q.deltasOf('a/kept')), ['Replaced:3']);
    assert.deepEqual(summary(q.deltasOf('a/gone')), ['Deleted:tombstone(2)']);
    assert.deepEqual(summary(q.deltasOf('a/queued-gone')), ['Updated:5', 'Deleted:tombstone(5)']);
    const t = q.deltasOf('a/gone')[0]?.object;
    assert.ok(t && isDeletedFinalStateUnknown(t));
    assert.equal(t.key, 'a/gone');
    assert.equal(t.kind, 'DeletedFinalStateUnknown');
    await popOne(q, store);
  });

  it('a scoped replace only detects deletions in its namespace', () => {
    const { q, store } = setup(['a', 'b']);
    store.add(o('a', 'x'));
    store.add(o('b', 'y'));
    q.replace([], '10', 'a');
    assert.deepEqual(q.queuedKeys(), ['a/x']);
  });

  it('replace is all or nothing: an object without a key throws before anything is queued', () => {
    const { q, store } = setup();
    store.add(o('a', 'known'));
    const nameless: KubeObject = { metadata: { namespace: 'a', resourceVersion: '3' } };
    assert.throws(() => q.replace([o('a', 'x'), nameless, o('a', 'y')], '10'), /no metadata\.name/);
    assert.deepEqual(q.queuedKeys(), [], 'no Replaced for x, no tombstone for known');
    assert.equal(q.hasSynced(), false, 'a failed replace does not count as the initial list');
    q.replace([o('a', 'x')], '11');
    assert.deepEqual(q.queuedKeys(), ['a/x', 'a/known']);
  });

  it('hasSynced after the first replace is fully popped; isInInitialList until then', async () => {
    const { q, store } = setup();
    assert.equal(q.hasSynced(), false);
    q.replace([o('a', 'x'), o('a', 'y')], '10');
    assert.equal(q.hasSynced(), false);
    q.add(o('a', 'z', '11')); // arrives after the list, before popping
    const p1 = await popOne(q, store);
    assert.equal(p1.initial, true);
    assert.equal(q.hasSynced(), false);
    const p2 = await popOne(q, store);
    assert.equal(p2.initial, true);
    assert.equal(q.hasSynced(), true);
    const p3 = await popOne(q, store);
    assert.equal(p3.initial, false);
    q.replace([], '20');
    assert.equal(q.hasSynced(), true, 'later relists do not unsync');
  });

  it('an empty first list syncs at once', () => {
    const { q } = setup();
    q.replace([], '1');
    assert.equal(q.hasSynced(), true);
  });

  it('with several scopes, syncs only after each delivered its first list', async () => {
    const { q, store } = setup(['a', 'b']);
    q.replace([o('a', 'x')], '10', 'a');
    await popOne(q, store);
    assert.equal(q.hasSynced(), false);
    q.replace([o('b', 'y')], '11', 'b');
    assert.equal(q.hasSynced(), false);
    await popOne(q, store);
    assert.equal(q.hasSynced(), true);
  });

  it('resync queues Sync for known objects without pending deltas', () => {
    const { q, store } = setup();
    store.add(o('a', 'x', '1'));
    store.add(o('a', 'y', '2'));
    q.update(o('a', 'y', '3'));
    q.resync();
    assert.deepEqual(summary(q.deltasOf('a/x')), ['Sync:1']);
    assert.deepEqual(summary(q.deltasOf('a/y')), ['Updated:3']);
  });

  it('pop waits for an item; close and abort release it with false', async () => {
    const { q } = setup();
    const seen: string[] = [];
    const p = q.pop((ds) => seen.push(...summary(ds)));
    await Promise.resolve();
    assert.deepEqual(seen, []);
    q.add(o('a', 'x', '7'));
    assert.equal(await p, true);
    assert.deepEqual(seen, ['Added:7']);

    const ac = new AbortController();
    const p2 = q.pop(() => assert.fail('nothing to pop'), ac.signal);
    ac.abort();
    assert.equal(await p2, false);

    const p3 = q.pop(() => assert.fail('nothing to pop'));
    q.close();
    assert.equal(await p3, false);
  });

  it('keeps FIFO order across many keys (internal compaction)', async () => {
    const { q } = setup();
    for (let i = 0; i < 3000; i++) q.add(o('a', `k${i}`));
    for (let i = 0; i < 3000; i++) {
      const { deltas } = await popOne(q);
      assert.equal(deltas[0]?.object && (deltas[0].object as KubeObject).metadata?.name, `k${i}`);
      if (i === 1500) q.add(o('a', 'late'));
    }
    assert.deepEqual(q.queuedKeys(), ['a/late']);
  });
});
