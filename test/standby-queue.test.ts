/**
 * A standby replica queues nothing; at leadership it reconciles what its caches hold (pkg/runtime/builder.ts,
 * "Standby"). Found by the endurance bench (issue 43): the builder's handlers enqueued on every replica, so a
 * standby's work queue — which nobody takes from — grew by every key it ever saw, deleted objects' keys included, and
 * its new leadership began with a reconcile of each of them.
 *
 * Real API server, a real Lease: another holder keeps it while objects are created and deleted; then it is released.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { registryMetric, standbyManager } from './helpers/manager.ts';

const { configMaps, services } = coreResources;

const queueDepth = (registry: Registry, name: string): Promise<number> => registryMetric(registry, 'workqueue_depth', { name });

test('a standby queues no key while objects come and go; at leadership each cached object is reconciled once, deleted ones never', async (t) => {
  const cp = cluster();
  const ns = await testNamespace(t, 'standby');
  const lease = 'standby-test';
  const { mgr, registry, release } = await standbyManager(ns, lease);
  const seen: string[] = [];
  const builder = mgr.controller('standby-test').for<KubeObject>(configMaps)
    // A watched type whose mapping names a key with no primary: the start must map the cached Services too.
    .watches<KubeObject>(services, (svc) => (svc.metadata?.labels?.['target'] ? [{ namespace: ns, name: svc.metadata.labels['target'] }] : []));
  const controller = builder.complete(({ namespace, name }) => {
    seen.push(`${namespace}/${name}`);
    return Promise.resolve();
  });
  const ac = new AbortController();
  const exited = mgr.start(ac.signal);
  t.after(async () => { ac.abort(); assert.equal(await exited, 0); });

  const create = async (path: string, body: object): Promise<void> => {
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/${path}`, body), 201, `create ${path}`);
  };
  const keep = Array.from({ length: 10 }, (_, i) => `keep-${i}`);
  const gone = Array.from({ length: 10 }, (_, i) => `gone-${i}`);
  for (const name of [...keep, ...gone]) await create('configmaps', { metadata: { name } });
  await create('services', { metadata: { name: 'svc', labels: { target: 'ghost' } }, spec: { ports: [{ port: 80 }] } });
  for (const name of gone) expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/${name}`), 200, `delete ${name}`);
  // The namespace may hold other ConfigMaps (kube-root-ca.crt, where a kube-controller-manager runs): all cached count.
  const cached = (): string[] => builder.informer().getIndexer().list().map((o) => o.metadata?.name ?? '').sort();
  const ours = (): string[] => cached().filter((n) => n.startsWith('keep-') || n.startsWith('gone-'));
  await waitFor('the standby\'s cache saw every create and delete',
    () => JSON.stringify(ours()) === JSON.stringify(keep) && builder.informerOf(services).getIndexer().list().length === 1);
  const expectedCached = cached();

  assert.equal(mgr.controllersStarted(), false, 'the other replica leads');
  assert.equal(await queueDepth(registry, 'standby-test'), 0, 'a standby queues nothing');
  assert.equal(seen.length, 0, 'nothing reconciled on a standby');

  // The other replica goes: its Lease is released (deleted); this one acquires at its next retry.
  await release();
  await waitFor('leading', () => mgr.controllersStarted(), { timeoutMs: 30_000 });
  const expected = [...expectedCached.map((n) => `${ns}/${n}`), `${ns}/ghost`].sort();
  // Everything the start enqueued is enqueued at once: an empty queue and no reconcile running = all handled.
  await waitFor('every cached object reconciled', async () =>
    expected.every((k) => seen.includes(k)) && controller.inFlight() === 0 && (await queueDepth(registry, 'standby-test')) === 0);
  assert.deepEqual([...seen].sort(), expected, 'each cached primary and the watched Service\'s target once; no deleted ConfigMap');
});
