import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { FakeRecorder } from '../../events/fake.ts';
import { Indexer } from '../../informerfactory/indexer.ts';
import { Lister } from '../../informerfactory/lister.ts';
import { newLogger, silentLogger } from '../../log/logger.ts';
import { Writable } from 'node:stream';
import { rolloutObserver } from './controller.ts';
import { revisionAnnotation, type Deployment } from './types.ts';

const ctx = { log: silentLogger, reconcileID: 'r', key: 'ns/web' };
const req = { namespace: 'ns', name: 'web' };
const signal = new AbortController().signal;

function web(revision: string, ready: boolean, created = '2024-01-01T00:00:00Z', replicas = 1): Deployment {
  return {
    metadata: { name: 'web', namespace: 'ns', uid: 'u1', generation: 1, creationTimestamp: created, annotations: { [revisionAnnotation]: revision } },
    spec: { replicas, selector: {}, template: {} },
    status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: ready ? 1 : 0 },
  };
}

/** A logger at `debug` whose JSON lines land in `lines` (level label and message). */
function capturingLogger(): { log: ReturnType<typeof newLogger>; lines: { level: string; msg: string }[] } {
  const lines: { level: string; msg: string }[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb): void {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { level: string; msg: string });
      cb();
    },
  });
  return { log: newLogger({ level: 'debug', destination }), lines };
}

async function stateGauge(registry: Registry): Promise<Record<string, number>> {
  const m = await registry.getSingleMetric('deployment_rollout_state')?.get();
  return Object.fromEntries((m?.values ?? []).map((v) => [`${v.labels['namespace']}/${v.labels['deployment']}/${v.labels['state']}`, v.value]));
}

function harness(nowMs: number): { cache: Indexer<Deployment>; recorder: FakeRecorder; registry: Registry; observer: ReturnType<typeof rolloutObserver>; clock: { now: number } } {
  const cache = new Indexer<Deployment>();
  const recorder = new FakeRecorder();
  const registry = new Registry();
  const clock = { now: nowMs };
  const observer = rolloutObserver({ deployments: new Lister(cache), recorder, registry, now: () => clock.now });
  observer.markStarted();
  return { cache, recorder, registry, observer, clock };
}

describe('rolloutObserver', () => {
  test('announces on the Deployment, exports the state gauge and the duration, forgets deleted Deployments', async () => {
    const h = harness(Date.parse('2024-01-01T00:00:00Z'));
    h.cache.add(web('1', false));
    await h.observer.reconcile(req, signal, ctx);
    h.clock.now += 4_000;
    h.cache.update(web('1', true));
    await h.observer.reconcile(req, signal, ctx);
    await h.observer.reconcile(req, signal, ctx); // resync: nothing new
    assert.deepEqual(h.recorder.events, ['Normal RolloutStarted Rollout of revision 1 started', 'Normal RolloutComplete Rollout of revision 1 complete']);
    assert.deepEqual(h.recorder.recorded[0]?.ref, { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'ns', name: 'web', uid: 'u1', resourceVersion: undefined });
    assert.deepEqual(await stateGauge(h.registry), { 'ns/web/progressing': 0, 'ns/web/complete': 1, 'ns/web/stalled': 0, 'ns/web/paused': 0 });
    assert.match(await h.registry.getSingleMetricAsString('deployment_rollout_duration_seconds'), /^deployment_rollout_duration_seconds_sum 4$/m);

    h.cache.delete(web('1', true));
    await h.observer.reconcile(req, signal, ctx);
    assert.deepEqual(await stateGauge(h.registry), {});
    assert.equal(h.observer.records.size, 0);
  });

  test('a restarted observer announces nothing for a finished rollout, and only the completion of one in flight', async () => {
    const h = harness(Date.parse('2024-01-01T00:10:00Z')); // started long after the Deployment was created
    h.cache.add(web('3', true));
    await h.observer.reconcile(req, signal, ctx);
    await h.observer.reconcile(req, signal, ctx);
    assert.deepEqual(h.recorder.events, []);
    assert.equal((await stateGauge(h.registry))['ns/web/complete'], 1);

    const h2 = harness(Date.parse('2024-01-01T00:10:00Z'));
    h2.cache.add(web('4', false));
    await h2.observer.reconcile(req, signal, ctx);
    h2.cache.update(web('4', true));
    await h2.observer.reconcile(req, signal, ctx);
    assert.deepEqual(h2.recorder.events, ['Normal RolloutComplete Rollout of revision 4 complete']);
  });

  test('a scale-only change (same revision) logs its state changes at debug; a rollout\'s at info', async () => {
    const h = harness(Date.parse('2024-01-01T00:00:00Z'));
    const { log, lines } = capturingLogger();
    const c = { ...ctx, log };
    h.cache.add(web('1', false));
    await h.observer.reconcile(req, signal, c);
    h.cache.update(web('1', true));
    await h.observer.reconcile(req, signal, c);
    const infoBefore = lines.filter((l) => l.level === 'info' && l.msg === 'Rollout state changed').length;
    assert.equal(infoBefore, 2, 'the first rollout: none → progressing → complete at info');

    // Scaled to 3 (the revision stays 1): progressing while the new replicas come up, then complete again.
    const scaled = web('1', true, '2024-01-01T00:00:00Z', 3);
    h.cache.update(scaled);
    await h.observer.reconcile(req, signal, c);
    assert.equal(h.observer.records.get('ns/web')?.state, 'progressing');
    h.cache.update({ ...scaled, status: { observedGeneration: 1, replicas: 3, updatedReplicas: 3, availableReplicas: 3 } });
    await h.observer.reconcile(req, signal, c);
    assert.equal(h.observer.records.get('ns/web')?.state, 'complete');
    const changes = lines.filter((l) => l.msg === 'Rollout state changed').slice(2);
    assert.deepEqual(changes.map((l) => l.level), ['debug', 'debug'], 'the scale-only transitions are debug lines');
    assert.equal(h.recorder.events.length, 2, 'and announce nothing');

    // A new revision is a rollout again: info.
    h.cache.update({ ...web('2', false), spec: { replicas: 3, selector: {}, template: {} }, status: { observedGeneration: 1, replicas: 3, updatedReplicas: 1, availableReplicas: 1 } });
    await h.observer.reconcile(req, signal, c);
    assert.deepEqual(lines.filter((l) => l.msg === 'Rollout state changed').slice(4).map((l) => l.level), ['info']);
  });
});
