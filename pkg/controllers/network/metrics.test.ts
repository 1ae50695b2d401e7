/** The `networks{ready,reason}` gauge (metrics.ts), computed on scrape from a lister (a list of objects here). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import type { Network } from '../../apis/samplecrd/v1/types.ts';
import { readyLabels, registerNetworksGauge } from './metrics.ts';

function net(name: string, generation: number, ready?: { status: 'True' | 'False' | 'Unknown'; reason: string; observedGeneration: number }): Network {
  return {
    apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name, namespace: 'default', generation }, spec: { cidr: '10.0.0.0/24' },
    ...(ready && { status: { conditions: [{ type: 'Ready', ...ready, message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] } }),
  };
}

async function series(registry: Registry): Promise<Record<string, number>> {
  const text = await registry.getSingleMetricAsString('networks');
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^networks\{ready="([^"]*)",reason="([^"]*)"\} (\S+)$/.exec(line);
    if (m) out[`${m[1]}/${m[2]}`] = Number(m[3]);
  }
  return out;
}

test('readyLabels: the Ready condition, or Unknown/Pending without one or for an older generation', () => {
  assert.deepEqual(readyLabels(net('a', 1)), { ready: 'Unknown', reason: 'Pending' });
  assert.deepEqual(readyLabels(net('a', 2, { status: 'True', reason: 'Synced', observedGeneration: 1 })), { ready: 'Unknown', reason: 'Pending' });
  assert.deepEqual(readyLabels(net('a', 2, { status: 'False', reason: 'NeutronUnavailable', observedGeneration: 2 })), { ready: 'False', reason: 'NeutronUnavailable' });
});

test('networks{ready,reason} counts the cache at scrape time, only while the controller runs, and drops vanished combinations', async () => {
  const registry = new Registry();
  let items: Network[] = [
    net('a', 1, { status: 'True', reason: 'Synced', observedGeneration: 1 }),
    net('b', 1, { status: 'True', reason: 'Synced', observedGeneration: 1 }),
    net('c', 3, { status: 'False', reason: 'NeutronUnavailable', observedGeneration: 3 }),
    net('d', 1),
  ];
  let active = false;
  registerNetworksGauge(registry, { lister: { list: () => items }, active: () => active });
  assert.deepEqual(await series(registry), {}, 'a standby (controller not running) reports nothing');
  active = true;
  assert.deepEqual(await series(registry), { 'True/Synced': 2, 'False/NeutronUnavailable': 1, 'Unknown/Pending': 1 });
  items = items.slice(0, 2);
  assert.deepEqual(await series(registry), { 'True/Synced': 2 }, 'no stale NeutronUnavailable series');
  // A second manager on the same registry (e.g. a shard) adds its own Networks.
  registerNetworksGauge(registry, { lister: { list: () => [net('e', 1, { status: 'False', reason: 'InvalidSpec', observedGeneration: 1 })] }, active: () => true });
  assert.deepEqual(await series(registry), { 'True/Synced': 2, 'False/InvalidSpec': 1 });
});
