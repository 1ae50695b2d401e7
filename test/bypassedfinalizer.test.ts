/**
 * What a deletion through a finalizer looks like to an informer, on the real API server — the premise of
 * BypassedFinalizers (pkg/runtime/bypassedfinalizer.ts): the watch's DELETED event after the update that removed the
 * last finalizer carries the last STORED state, our finalizer still on it and a deletionTimestamp; a DELETE that
 * raced a finalizer add (kubernetes#77988) leaves one without deletionTimestamp (test/network-finalizer-race.test.ts).
 * Taken for a bypass, each normal deletion cost the Network leader a GET and a Neutron listing (689 in an hour of the
 * endurance bench, all finding nothing) and a standby a record held for good.
 *
 * Then the builder's part (pkg/runtime/builder.ts, ForOptions.bypassedFinalizers): a delete whose final state has the
 * finalizer and no deletionTimestamp — here an object leaving a label-selected informer, the shape a shard move
 * has — is recorded on a standby without queueing anything, and reconciled (the record found) when it leads; on the
 * leader it is recorded before its key is reconciled, even with a delete predicate that drops every other delete.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { RestClient } from '../pkg/client/rest.ts';
import type { ControllerManager } from '../pkg/runtime/manager.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/index.ts';
import { objectOfDelete } from '../pkg/informerfactory/object.ts';
import { BypassedFinalizers } from '../pkg/runtime/bypassedfinalizer.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { registryMetric, standbyManager } from './helpers/manager.ts';

const finalizer = 'example.com/cleanup';

test('a deletion through our finalizer: the DELETED event carries the finalizer and a deletionTimestamp; BypassedFinalizers does not record it', async (t) => {
  const cp = cluster();
  const ns = await testNamespace(t, 'bypass-normal');
  const rest = new RestClient({ kubeConfig: adminKubeConfig() });
  t.after(() => rest.close());
  const factory = new SharedInformerFactory({ client: rest, namespaces: [ns] });
  const deleted: KubeObject[] = [];
  const bypassed = new BypassedFinalizers<KubeObject>(finalizer);
  const recorded: string[] = [];
  factory.informerFor(coreResources.configMaps).addEventHandler({
    onDelete: (obj) => {
      const last = objectOfDelete(obj);
      if (last) deleted.push(last);
      const key = bypassed.observe(obj);
      if (key) recorded.push(key);
    },
  });
  const ac = new AbortController();
  const running = factory.run(ac.signal);
  t.after(async () => { ac.abort(); await running; });
  assert.ok(await factory.waitForCacheSync({ signal: ac.signal }));

  const path = `/api/v1/namespaces/${ns}/configmaps`;
  expectStatus(await cp.request('POST', path, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', finalizers: [finalizer] } }), 201, 'create');
  expectStatus(await cp.request('DELETE', `${path}/cm`), 200, 'delete: held by the finalizer');
  // The controller's finalize(): clean up, then remove the finalizer — the update that deletes the object.
  expectStatus(await cp.request('PATCH', `${path}/cm`, { metadata: { finalizers: null } }, { headers: { 'content-type': 'application/merge-patch+json' } }), 200, 'remove the finalizer');
  const last = await waitFor('the informer\'s delete', () => deleted.find((o) => o.metadata?.name === 'cm'));
  assert.deepEqual(last.metadata?.finalizers, [finalizer], 'the DELETED event carries the last stored state: the finalizer is still on it');
  assert.ok(last.metadata?.deletionTimestamp, 'with its deletionTimestamp');
  assert.deepEqual(recorded, [], 'not a bypass');
  assert.equal(bypassed.size, 0);
});

test('through the builder: a bypass recorded on a standby queues nothing and is reconciled at leadership; on a leader it is recorded before its reconcile, past a delete predicate', async (t) => {
  const cp = cluster();
  const ns = await testNamespace(t, 'bypass-builder');
  const lease = 'bypass-builder';
  const { mgr, registry, release } = await standbyManager(ns, lease);
  const bypassed = new BypassedFinalizers<KubeObject>(finalizer);
  /** Each reconcile: its key, and whether a bypass record of it was waiting (then cleaned up: done). */
  const seen: { key: string; recorded: boolean }[] = [];
  const controller = mgr.controller('bypass-builder').for<KubeObject>(coreResources.configMaps, {
    informer: { labelSelector: 'bypass-test=in' }, bypassedFinalizers: bypassed, predicates: [{ delete: () => false }],
  }).complete(({ namespace, name }) => {
    const key = `${namespace}/${name}`;
    const gone = bypassed.get(key);
    seen.push({ key, recorded: gone !== undefined });
    if (gone) bypassed.done(gone);
    return Promise.resolve();
  });
  const ac = new AbortController();
  const exited = mgr.start(ac.signal);
  t.after(async () => { ac.abort(); assert.equal(await exited, 0); });

  const path = `/api/v1/namespaces/${ns}/configmaps`;
  const create = async (name: string, finalizers: string[]): Promise<void> => {
    expectStatus(await cp.request('POST', path, { metadata: { name, labels: { 'bypass-test': 'in' }, finalizers } }), 201, `create ${name}`);
  };
  const patch = async (name: string, metadata: object, what: string): Promise<void> => {
    expectStatus(await cp.request('PATCH', `${path}/${name}`, { metadata }, { headers: { 'content-type': 'application/merge-patch+json' } }), 200, what);
  };
  t.after(async () => { // let the namespace go: no finalizer left behind
    for (const name of ['moved', 'moved-later']) await cp.request('PATCH', `${path}/${name}`, { metadata: { finalizers: null } }, { headers: { 'content-type': 'application/merge-patch+json' } });
  });
  await create('moved', [finalizer]);
  await create('plain', []);
  await waitFor('the standby\'s cache holds both', () => bypassedCacheHas(mgr, 2));
  // Leaves the informer's selector with the finalizer on and no deletionTimestamp: a delete of a bypass's shape.
  await patch('moved', { labels: { 'bypass-test': 'out' } }, 'relabel moved out of the selector');
  expectStatus(await cp.request('DELETE', `${path}/plain`), 200, 'delete plain (no finalizer: no record)');
  await waitFor('the standby recorded the bypass', () => bypassed.size === 1 && bypassedCacheHas(mgr, 0));
  assert.deepEqual(bypassed.keys(), [`${ns}/moved`]);
  assert.equal(mgr.controllersStarted(), false, 'the other replica leads');
  assert.equal(await registryMetric(registry, 'workqueue_depth', { name: 'bypass-builder' }), 0, 'a standby queues nothing');
  assert.equal(seen.length, 0, 'nothing reconciled on a standby');

  await release();
  await waitFor('the start reconciled the recorded key', () => seen.length === 1 && controller.inFlight() === 0, { timeoutMs: 30_000 });
  assert.deepEqual(seen, [{ key: `${ns}/moved`, recorded: true }], 'the record reconciled once; nothing for plain (gone, dropped by the predicate)');
  assert.equal(bypassed.size, 0);

  await create('moved-later', [finalizer]);
  await waitFor('its add reconciled', () => seen.some((s) => s.key === `${ns}/moved-later`));
  await patch('moved-later', { labels: { 'bypass-test': 'out' } }, 'relabel moved-later out of the selector');
  await waitFor('its delete reconciled', () => seen.filter((s) => s.key === `${ns}/moved-later`).length === 2 && controller.inFlight() === 0);
  assert.deepEqual(seen.slice(1), [{ key: `${ns}/moved-later`, recorded: false }, { key: `${ns}/moved-later`, recorded: true }],
    'the add, then the delete with its record already there (the delete predicate drops deletes, not records)');
});

/** Whether the bypass-builder controller's primary cache holds `n` objects. */
function bypassedCacheHas(mgr: ControllerManager, n: number): boolean {
  return mgr.informer<KubeObject>(coreResources.configMaps, { labelSelector: 'bypass-test=in' }).getIndexer().list().length === n;
}
