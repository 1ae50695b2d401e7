import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../apimachinery/meta.ts';
import { deletedFinalStateUnknown, deletionHandlingKey, isDeletedFinalStateUnknown, objectOfDelete, stripManagedFields } from './object.ts';

describe('tombstones', () => {
  const obj: KubeObject = { metadata: { namespace: 'ns', name: 'n', managedFields: [{ manager: 'x' }] } };

  it('recognises tombstones', () => {
    const t = deletedFinalStateUnknown('ns/n', obj);
    assert.ok(isDeletedFinalStateUnknown(t));
    assert.ok(!isDeletedFinalStateUnknown(obj));
    assert.equal(deletionHandlingKey(t), 'ns/n');
    assert.equal(objectOfDelete(t), obj);
    assert.equal(objectOfDelete(obj), obj);
  });

  it('stripManagedFields drops managedFields only', () => {
    const o: KubeObject = structuredClone(obj);
    stripManagedFields(o);
    assert.deepEqual(o, { metadata: { namespace: 'ns', name: 'n' } });
  });
});
