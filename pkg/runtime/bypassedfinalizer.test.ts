import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../apimachinery/meta.ts';
import { deletedFinalStateUnknown } from '../informerfactory/object.ts';
import { BypassedFinalizers } from './bypassedfinalizer.ts';

const obj = (uid: string, finalizers?: string[], deletionTimestamp?: string): KubeObject =>
  ({ metadata: { namespace: 'ns', name: 'a', uid, ...(finalizers && { finalizers }), ...(deletionTimestamp && { deletionTimestamp }) } });

test('BypassedFinalizers: a final state (or tombstone) still carrying the finalizer is recorded by key; done() forgets only that UID', () => {
  const b = new BypassedFinalizers<KubeObject>('example.com/cleanup');
  assert.equal(b.observe(obj('u1')), undefined, 'no finalizers: a plain deletion');
  assert.equal(b.observe(obj('u1', ['other'])), undefined, 'only someone else\'s finalizer');
  assert.equal(b.size, 0);
  assert.equal(b.observe(deletedFinalStateUnknown('ns/a', obj('u1', ['example.com/cleanup']))), 'ns/a', 'a relist tombstone: its last known state');
  assert.equal(b.get('ns/a')?.metadata?.uid, 'u1');
  b.record(obj('u2', ['example.com/cleanup'], '2026-01-01T00:00:00Z')); // re-created and deleted again: the later record wins
  b.done(obj('u1'));
  assert.equal(b.get('ns/a')?.metadata?.uid, 'u2', 'the cleanup of u1 does not forget u2');
  b.done(obj('u2'));
  assert.equal(b.get('ns/a'), undefined);
  assert.equal(b.size, 0);
});

test('BypassedFinalizers: a final state with a deletionTimestamp is a deletion through the finalizers, not a bypass — not recorded', () => {
  const b = new BypassedFinalizers<KubeObject>('example.com/cleanup');
  // The API server's DELETED event after the update that removed the last finalizer carries the last STORED state:
  // finalizer still on, deletionTimestamp set (test/bypassedfinalizer.test.ts, real API server).
  assert.equal(b.observe(obj('u1', ['example.com/cleanup'], '2026-01-01T00:00:00Z')), undefined);
  assert.equal(b.observe(deletedFinalStateUnknown('ns/a', obj('u1', ['example.com/cleanup'], '2026-01-01T00:00:00Z'))), undefined, 'nor its tombstone');
  assert.equal(b.size, 0);
  assert.deepEqual(b.keys(), []);
  assert.equal(b.observe(obj('u2', ['example.com/cleanup'])), 'ns/a', 'no deletionTimestamp: the DELETE never began a deletion');
  assert.deepEqual(b.keys(), ['ns/a']);
});
