import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { Controller } from './controller.ts';
import { addPriority, PriorityLow, PriorityNormal, updatePriority } from './priority.ts';

/** Runs a 1-worker controller over keys queued before start; resolves the reconcile order. */
async function order(priorityQueue: boolean | undefined, adds: [string, number][]): Promise<string[]> {
  const seen: string[] = [];
  const ac = new AbortController();
  const ctl = new Controller({
    name: `pq-${String(priorityQueue)}`, registry: new Registry(),
    ...(priorityQueue === undefined ? {} : { priorityQueue }),
    reconciler: ({ namespace, name }) => {
      seen.push(`${namespace}/${name}`);
      if (seen.length === adds.length) ac.abort();
      return Promise.resolve();
    },
  });
  for (const [key, p] of adds) ctl.enqueue(key, p);
  await ctl.start(ac.signal);
  return seen;
}

describe('controller priority queue', () => {
  const adds: [string, number][] = [['ns/backlog-1', PriorityLow], ['ns/backlog-2', PriorityLow], ['ns/new', PriorityNormal]];

  it('is on by default: a real change goes before the initial-list backlog', async () => {
    assert.deepEqual(await order(undefined, adds), ['ns/new', 'ns/backlog-1', 'ns/backlog-2']);
  });

  it('priorityQueue: false is plain FIFO', async () => {
    assert.deepEqual(await order(false, adds), ['ns/backlog-1', 'ns/backlog-2', 'ns/new']);
  });

  it('event priorities: initial list and resyncs are low, real changes normal', () => {
    assert.equal(addPriority(true), PriorityLow);
    assert.equal(addPriority(false), PriorityNormal);
    assert.equal(updatePriority({ metadata: { resourceVersion: '5' } }, { metadata: { resourceVersion: '5' } }), PriorityLow);
    assert.equal(updatePriority({ metadata: { resourceVersion: '5' } }, { metadata: { resourceVersion: '6' } }), PriorityNormal);
  });
});
