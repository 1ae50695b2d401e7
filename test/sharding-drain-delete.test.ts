/**
 * A primary deleted while the sharder drains it (pkg/sharding/sharder.ts): the drain's record goes with it. Before,
 * the sharder's handlers had no delete: the record stayed for the life of the process (one entry per object deleted
 * mid-drain — every rolling restart starts drains), and an object later created under the same name was counted as
 * a finished drain (sharding_reassignments_total{reason="drained"}, with a drain duration spanning both objects).
 *
 * The real Sharder on the real API server; two shard Leases held by nobody running (the drain is never acknowledged).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { LeaderElector, RestLeaseClient } from '../pkg/manager/leaderelection.ts';
import { drainLabel, shardLabel } from '../pkg/sharding/assignment.ts';
import { HashRing } from '../pkg/sharding/ring.ts';
import { leaseOfLabel } from '../pkg/sharding/shard.ts';
import { Sharder } from '../pkg/sharding/sharder.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { registryMetric } from './helpers/manager.ts';

const group = 'drain-delete';
const now = (): string => new Date().toISOString().replace(/Z$/, '000Z');

const reassignments = (registry: Registry, reason: string): Promise<number> =>
  registryMetric(registry, 'sharding_reassignments_total', { controller: 'foo', reason });

test('a Foo deleted while the sharder drains it, then created again under its name: assigned as new, not as a finished drain', async (t) => {
  await installCRDs();
  const cp = cluster();
  const ns = await testNamespace(t, 'drain-delete');
  const foos = `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`;
  for (const shard of ['a', 'b']) {
    expectStatus(await cp.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, {
      apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: `shard-${shard}`, labels: { [leaseOfLabel]: group } },
      spec: { holderIdentity: shard, leaseDurationSeconds: 3600, renewTime: now(), acquireTime: now() },
    }), 201, `shard Lease ${shard}`);
  }
  // A name the ring gives to b: labelled a, it is drained from a (a live shard, so a drain, not a reassignment).
  const ring = new HashRing(['a', 'b']);
  const name = Array.from({ length: 100 }, (_, i) => `f-${i}`).find((n) => ring.lookup(`${ns}/${n}`) === 'b') ?? assert.fail('no name on b');

  const registry = new Registry();
  const rest = new RestClient({ kubeConfig: adminKubeConfig(), registry, userAgent: 'drain-delete-sharder' });
  const elector = new LeaderElector({
    lock: new RestLeaseClient(rest, ns, group), name: group, identity: 'drain-delete-sharder', leaseDurationMs: 15_000, renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000, logger: silentLogger, registry,
  });
  const writer = new RestClient({ kubeConfig: adminKubeConfig(), registry, userAgent: 'drain-delete-writer', writeGate: elector.leadership });
  const sharder = new Sharder({ elector, group, leaseNamespace: ns, reader: rest, writer, namespaces: [ns], logger: silentLogger, registry });
  sharder.register({ name: 'foo', primary: fooResource, owned: [] });
  const stop = new AbortController();
  const running = sharder.start(stop.signal);
  t.after(async () => {
    stop.abort();
    await running.catch(() => undefined);
    await Promise.all([rest.close(), writer.close()]);
  });

  const foo = (labels?: Record<string, string>): unknown => ({
    apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name, ...(labels ? { labels } : {}) }, spec: { deploymentName: name, replicas: 1 },
  });
  const labelsNow = async (): Promise<Record<string, string>> =>
    expectStatus<KubeObject>(await cp.get(`${foos}/${name}`), 200, 'get Foo').metadata?.labels ?? {};
  expectStatus(await cp.request('POST', foos, foo({ [shardLabel('foo')]: 'a' })), 201, 'Foo on shard a');
  await waitFor('the sharder drains it from a', async () => (await labelsNow())[drainLabel('foo')] !== undefined, { timeoutMs: 60_000, intervalMs: 100 });

  expectStatus(await cp.request('DELETE', `${foos}/${name}`), 200, 'delete mid-drain');
  expectStatus(await cp.request('POST', foos, foo()), 201, 'a new Foo under the same name');
  await waitFor('the new Foo assigned to b', async () => (await labelsNow())[shardLabel('foo')] === 'b', { timeoutMs: 60_000, intervalMs: 100 });
  await waitFor('its assignment counted', async () => (await reassignments(registry, 'new')) + (await reassignments(registry, 'drained')) >= 1);
  assert.equal(await reassignments(registry, 'drained'), 0, 'no drain finished: the drained Foo was deleted');
  assert.equal(await reassignments(registry, 'new'), 1);
});
