import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Indexer, NAMESPACE_INDEX } from './indexer.ts';
import { Lister } from './lister.ts';
import { deletedFinalStateUnknown } from './object.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { CONTROLLER_OWNER_UID_INDEX, controllerOf, controllerOwnerUIDIndex } from './ownerindex.ts';

function o(ns: string, name: string, labels: Record<string, string> = {}, extra: Partial<KubeObject['metadata']> = {}): KubeObject {
  return { metadata: { namespace: ns || undefined, name, labels, resourceVersion: '1', ...extra } };
}
const owned = (ns: string, name: string, uid: string, controller = true): KubeObject =>
  o(ns, name, {}, { ownerReferences: [{ apiVersion: 'x/v1', kind: 'Foo', name: 'f', uid, controller }] });
const names = (xs: KubeObject[]): string[] => xs.map((x) => x.metadata?.name ?? '').sort();

describe('Indexer', () => {
  it('stores by namespace/name and cluster-scoped by name', () => {
    const ix = new Indexer<KubeObject>();
    ix.add(o('a', 'x'));
    ix.add(o('', 'node1'));
    assert.deepEqual(ix.listKeys().sort(), ['a/x', 'node1']);
    assert.equal(ix.getByKey('a/x')?.metadata?.name, 'x');
    assert.equal(ix.get(o('', 'node1'))?.metadata?.name, 'node1');
  });

  it('always has the namespace index, maintained on add/update/delete', () => {
    const ix = new Indexer<KubeObject>();
    assert.ok(ix.hasIndex(NAMESPACE_INDEX));
    ix.add(o('a', 'x'));
    ix.add(o('a', 'y'));
    ix.add(o('b', 'z'));
    assert.deepEqual(names(ix.byIndex(NAMESPACE_INDEX, 'a')), ['x', 'y']);
    ix.delete(o('a', 'x'));
    assert.deepEqual(names(ix.byIndex(NAMESPACE_INDEX, 'a')), ['y']);
    ix.delete(deletedFinalStateUnknown('a/y', undefined));
    assert.deepEqual(ix.byIndex(NAMESPACE_INDEX, 'a'), []);
    assert.deepEqual(ix.listIndexFuncValues(NAMESPACE_INDEX), ['b']);
  });

  it('re-indexes on update (old values removed)', () => {
    const ix = new Indexer<KubeObject>({ indexers: { byApp: (x) => (x.metadata?.labels?.app ? [x.metadata.labels.app] : []) } });
    ix.add(o('a', 'x', { app: 'web' }));
    ix.update(o('a', 'x', { app: 'db' }));
    assert.deepEqual(ix.byIndex('byApp', 'web'), []);
    assert.deepEqual(names(ix.byIndex('byApp', 'db')), ['x']);
    assert.deepEqual(ix.listIndexFuncValues('byApp'), ['db']);
  });

  it('indexes existing items when an indexer is added later', () => {
    const ix = new Indexer<KubeObject>();
    ix.add(owned('a', 'd1', 'uid-1'));
    ix.add(owned('a', 'd2', 'uid-1'));
    ix.add(owned('a', 'd3', 'uid-2', false));
    ix.addIndexers(controllerOwnerUIDIndex);
    assert.deepEqual(names(ix.byIndex(CONTROLLER_OWNER_UID_INDEX, 'uid-1')), ['d1', 'd2']);
    assert.deepEqual(ix.byIndex(CONTROLLER_OWNER_UID_INDEX, 'uid-2'), [], 'non-controller owner refs are not indexed');
    ix.add(owned('b', 'd4', 'uid-1'));
    assert.equal(ix.byIndex(CONTROLLER_OWNER_UID_INDEX, 'uid-1').length, 3);
  });

  it('refuses a duplicate index name and unknown indexes', () => {
    const ix = new Indexer<KubeObject>();
    assert.throws(() => ix.addIndexers({ [NAMESPACE_INDEX]: () => [] }), /conflict/);
    assert.throws(() => ix.byIndex('nope', 'x'), /does not exist/);
  });

  it('replace rebuilds content and indexes', () => {
    const ix = new Indexer<KubeObject>();
    ix.add(o('a', 'x'));
    ix.replace([o('b', 'y')]);
    assert.deepEqual(ix.listKeys(), ['b/y']);
    assert.deepEqual(ix.byIndex(NAMESPACE_INDEX, 'a'), []);
  });

  it('reports a throwing index function instead of failing the write', () => {
    const errors: string[] = [];
    const ix = new Indexer<KubeObject>({
      indexers: { bad: () => { throw new Error('boom'); } },
      onIndexError: (name, key) => errors.push(`${name}:${key}`),
    });
    ix.add(o('a', 'x'));
    assert.equal(ix.size, 1);
    assert.deepEqual(errors, ['bad:a/x']);
  });

  it('controllerOf finds the controller reference', () => {
    assert.equal(controllerOf(owned('a', 'x', 'u'))?.uid, 'u');
    assert.equal(controllerOf(owned('a', 'x', 'u', false)), undefined);
  });
});

describe('Lister', () => {
  const ix = new Indexer<KubeObject>();
  ix.add(o('a', 'web-1', { app: 'web', tier: 'front' }));
  ix.add(o('a', 'db-1', { app: 'db' }));
  ix.add(o('b', 'web-2', { app: 'web', tier: 'back' }));
  ix.add(o('', 'cluster-thing', { app: 'web' }));
  const lister = new Lister(ix);

  it('gets by namespace and name', () => {
    assert.equal(lister.get('a', 'web-1')?.metadata?.name, 'web-1');
    assert.equal(lister.get('b', 'web-1'), undefined);
    assert.equal(lister.get(undefined, 'cluster-thing')?.metadata?.name, 'cluster-thing');
    assert.equal(lister.get('', 'cluster-thing')?.metadata?.name, 'cluster-thing');
  });

  it('lists a namespace or everything, filtered by a label selector', () => {
    assert.deepEqual(names(lister.list('a')), ['db-1', 'web-1']);
    assert.equal(lister.list().length, 4);
    assert.deepEqual(names(lister.list(undefined, 'app=web')), ['cluster-thing', 'web-1', 'web-2']);
    assert.deepEqual(names(lister.list('', 'app=web,tier!=front')), ['cluster-thing', 'web-2']);
    assert.deepEqual(names(lister.list('a', 'tier')), ['web-1']);
    assert.deepEqual(names(lister.list('a', '!tier')), ['db-1']);
    assert.deepEqual(names(lister.list(undefined, 'tier in (front,back)')), ['web-1', 'web-2']);
  });

  it('has a namespace-bound view', () => {
    const nl = lister.namespace('b');
    assert.equal(nl.get('web-2')?.metadata?.name, 'web-2');
    assert.deepEqual(names(nl.list('app=web')), ['web-2']);
  });
});
