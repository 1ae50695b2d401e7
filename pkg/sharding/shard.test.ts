import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import type { Lease, LeaseClient } from '../manager/leaderelection.ts';
import { inheritedShardLabels, labelledLeaseClient, leaseOfLabel, reportShardObjects, shardLeaseName, shardNameOf } from './shard.ts';

const labelValue = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;

test('shardNameOf: a valid label value is kept; anything else becomes a valid, distinct one', () => {
  const short = 'manager-7d9f_3f2a0c1e-1b2c-4d5e-8f90-0123456789ab';
  assert.equal(shardNameOf(short), short);
  const long = `${'ts-controller-manager-controller-manager-7d9f8c6b5-'.repeat(2)}x_3f2a0c1e-1b2c-4d5e-8f90-0123456789ab`;
  const other = long.replace('3f2a', '3f2b');
  for (const id of [long, other, '_leading', 'a/b:c', '---', '']) {
    const name = shardNameOf(id);
    assert.match(name, labelValue, `${JSON.stringify(id)} → ${name}`);
  }
  assert.notEqual(shardNameOf(long), shardNameOf(other), 'identities differing only past the prefix stay distinct');
  assert.equal(shardNameOf(long), shardNameOf(long), 'deterministic');
});

test('shardLeaseName: a DNS subdomain per shard, grouped under the leader Lease name', () => {
  const a = shardLeaseName('my-leader', 'shard-a');
  assert.match(a, /^my-leader-shard-[0-9a-f]{8}$/);
  assert.notEqual(a, shardLeaseName('my-leader', 'shard-b'));
});

test('labelledLeaseClient labels the created Lease with its group and passes everything else through', async () => {
  const seen: Lease[] = [];
  const inner: LeaseClient = {
    description: 'ns/x',
    get: () => Promise.resolve(undefined),
    create: (l) => { seen.push(l); return Promise.resolve(l); },
    update: (l) => Promise.resolve(l),
  };
  const c = labelledLeaseClient(inner, 'group');
  await c.create({ metadata: { name: 'x', labels: { keep: 'me' } }, spec: { holderIdentity: 's' } });
  assert.deepEqual(seen[0]?.metadata['labels'], { keep: 'me', [leaseOfLabel]: 'group' });
  assert.equal(c.description, 'ns/x');
});

test('inheritedShardLabels copies shard labels only (never drain labels, never others)', () => {
  assert.deepEqual(inheritedShardLabels({
    metadata: { labels: { app: 'x', 'shard.ts-controller-manager.io/foo': 's1', 'drain.ts-controller-manager.io/foo': 'true' } },
  }), { 'shard.ts-controller-manager.io/foo': 's1' });
  assert.deepEqual(inheritedShardLabels({}), {});
});

test('sharding_shard_objects reports each controller\'s cache size at scrape time', async () => {
  const registry = new Registry();
  let n = 3;
  reportShardObjects(registry, 'foo', () => n);
  reportShardObjects(registry, 'network', () => 7);
  n = 5;
  const text = await registry.metrics();
  assert.match(text, /sharding_shard_objects\{controller="foo"\} 5/);
  assert.match(text, /sharding_shard_objects\{controller="network"\} 7/);
});
