import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { adopt, existedBefore, observeRollout, step, type RolloutObservation, type RolloutRecord } from './rollout.ts';
import { revisionAnnotation, type Deployment } from './types.ts';

interface Shape {
  uid?: string;
  revision?: string;
  generation?: number;
  observedGeneration?: number;
  replicas?: number;
  statusReplicas?: number;
  updated?: number;
  available?: number;
  paused?: boolean;
  progressReason?: string;
  created?: string;
}

/** A Deployment in a given shape; defaults describe a complete rollout of revision 1 with 2 replicas. */
function dep(s: Shape = {}): Deployment {
  const replicas = s.replicas ?? 2;
  return {
    metadata: {
      name: 'web', namespace: 'ns', uid: s.uid ?? 'u1', generation: s.generation ?? 1,
      creationTimestamp: s.created ?? '2024-01-01T00:00:00Z',
      annotations: s.revision === '' ? {} : { [revisionAnnotation]: s.revision ?? '1' },
    },
    spec: { replicas, selector: {}, template: {}, ...(s.paused ? { paused: true } : {}) },
    status: {
      observedGeneration: s.observedGeneration ?? s.generation ?? 1,
      replicas: s.statusReplicas ?? s.updated ?? replicas,
      updatedReplicas: s.updated ?? replicas,
      availableReplicas: s.available ?? s.updated ?? replicas,
      conditions: [{ type: 'Progressing', status: s.progressReason === 'ProgressDeadlineExceeded' ? 'False' : 'True', reason: s.progressReason ?? 'NewReplicaSetAvailable' }],
    },
  };
}

const progressing = (rev: string, extra: Shape = {}): Deployment => dep({ revision: rev, updated: 1, available: 0, ...extra });
const stalled = (rev: string): Deployment => dep({ revision: rev, updated: 1, available: 0, progressReason: 'ProgressDeadlineExceeded' });
const complete = (rev: string, extra: Shape = {}): Deployment => dep({ revision: rev, ...extra });

/** Feeds observations in order (all to a controller that saw the Deployment being created) and collects reasons. */
function run(seq: Deployment[], start?: RolloutRecord): { reasons: string[]; record: RolloutRecord | undefined; durations: number[] } {
  let record = start;
  const reasons: string[] = [];
  const durations: number[] = [];
  seq.forEach((d, i) => {
    const s = step(record, observeRollout(d), 1_000 * (i + 1), false);
    record = s.record;
    for (const a of s.announcements) {
      reasons.push(a.reason);
      if (a.durationSeconds !== undefined) durations.push(a.durationSeconds);
    }
  });
  return { reasons, record, durations };
}

describe('observeRollout', () => {
  const cases: [string, Deployment, RolloutObservation['state']][] = [
    ['complete', dep(), 'complete'],
    ['spec not yet observed', dep({ generation: 2, observedGeneration: 1 }), 'progressing'],
    ['no status at all', { metadata: { generation: 1 }, spec: { replicas: 1, selector: {}, template: {} } }, 'progressing'],
    ['not all replicas updated', dep({ updated: 1 }), 'progressing'],
    ['old replicas pending termination', dep({ statusReplicas: 3 }), 'progressing'],
    ['updated replicas not available', dep({ available: 1 }), 'progressing'],
    ['ProgressDeadlineExceeded', stalled('2'), 'stalled'],
    ['paused mid-rollout', dep({ paused: true, updated: 1 }), 'paused'],
    ['paused and complete', dep({ paused: true }), 'paused'],
    ['scaled to zero', dep({ replicas: 0 }), 'complete'],
  ];
  for (const [name, d, state] of cases) {
    test(name, () => assert.equal(observeRollout(d).state, state));
  }

  test('progress ignores the pause; revision and uid come from the object', () => {
    const o = observeRollout(dep({ paused: true, updated: 1, revision: '7', uid: 'x' }));
    assert.deepEqual([o.progress, o.paused, o.revision, o.uid], ['progressing', true, '7', 'x']);
    assert.match(o.message, /^paused \(1 out of 2 new replicas have been updated\)$/);
  });

  test('stalled carries the condition message', () => {
    const d = stalled('2');
    const cond = d.status?.conditions?.[0];
    if (cond) cond.message = 'ReplicaSet "web-1" has timed out progressing.';
    assert.equal(observeRollout(d).message, 'ReplicaSet "web-1" has timed out progressing.');
  });
});

describe('step: announcements', () => {
  test('a new Deployment: nothing before the revision exists, then Started, then Complete once', () => {
    const fresh: Deployment = { metadata: { name: 'web', namespace: 'ns', uid: 'u1', generation: 1 }, spec: { replicas: 2, selector: {}, template: {} } };
    const r = run([fresh, progressing('1'), progressing('1', { updated: 2, available: 1 }), complete('1'), complete('1')]);
    assert.deepEqual(r.reasons, ['RolloutStarted', 'RolloutComplete']);
    assert.deepEqual(r.durations, [2]);
    assert.equal(r.record?.completedRevision, '1');
    assert.equal(r.record?.rollout, undefined);
  });

  test('an image change: spec not yet observed is not a rollout until the new revision appears', () => {
    const base = adopt(observeRollout(complete('1')));
    const r = run([dep({ revision: '1', generation: 2, observedGeneration: 1 }), progressing('2', { generation: 2 }), complete('2', { generation: 2 })], base);
    assert.deepEqual(r.reasons, ['RolloutStarted', 'RolloutComplete']);
  });

  test('resync (same state again) announces nothing', () => {
    const base = adopt(observeRollout(complete('3')));
    assert.deepEqual(run([complete('3'), complete('3'), complete('3')], base).reasons, []);
    const inFlight = run([progressing('4')], base).record;
    assert.deepEqual(run([progressing('4'), progressing('4')], inFlight).reasons, []);
  });

  test('a stall is announced once; progress and a second stall announce it again', () => {
    const base = adopt(observeRollout(complete('1')));
    assert.deepEqual(run([progressing('2'), stalled('2'), stalled('2'), stalled('2')], base).reasons, ['RolloutStarted', 'RolloutStalled']);
    assert.deepEqual(run([progressing('2'), stalled('2'), progressing('2'), stalled('2')], base).reasons,
      ['RolloutStarted', 'RolloutStalled', 'RolloutStalled']);
  });

  test('a stalled rollout that finally completes is announced complete', () => {
    const base = adopt(observeRollout(complete('1')));
    assert.deepEqual(run([progressing('2'), stalled('2'), complete('2')], base).reasons, ['RolloutStarted', 'RolloutStalled', 'RolloutComplete']);
  });

  test('a fix after a stall (new revision) starts a new rollout', () => {
    const base = adopt(observeRollout(complete('1')));
    assert.deepEqual(run([progressing('2'), stalled('2'), progressing('3'), complete('3')], base).reasons,
      ['RolloutStarted', 'RolloutStalled', 'RolloutStarted', 'RolloutComplete']);
  });

  test('a scale is not a rollout, but a stalled scale is announced', () => {
    const base = adopt(observeRollout(complete('1')));
    assert.deepEqual(run([dep({ revision: '1', generation: 2, observedGeneration: 1 }), progressing('1', { replicas: 5, updated: 2 }), complete('1', { replicas: 5 })], base).reasons, []);
    assert.deepEqual(run([progressing('1', { replicas: 5, updated: 2 }), stalled('1'), complete('1')], base).reasons, ['RolloutStalled', 'RolloutComplete']);
  });

  test('a rollout seen only when complete announces both ends, without a duration', () => {
    const base = adopt(observeRollout(complete('1')));
    const r = run([complete('2')], base);
    assert.deepEqual(r.reasons, ['RolloutStarted', 'RolloutComplete']);
    assert.deepEqual(r.durations, []);
  });

  test('nothing is announced while paused; resuming continues the same rollout', () => {
    const base = adopt(observeRollout(complete('1')));
    const r = run([progressing('2'), progressing('2', { paused: true }), complete('2', { paused: true }), complete('2')], base);
    assert.deepEqual(r.reasons, ['RolloutStarted', 'RolloutComplete']);
    assert.deepEqual(run([dep({ revision: '1', paused: true, generation: 2, observedGeneration: 2 }), complete('1', { paused: true })], base).reasons, []);
  });

  test('a superseded rollout: the new revision starts a new rollout', () => {
    const base = adopt(observeRollout(complete('1')));
    assert.deepEqual(run([progressing('2'), progressing('3'), complete('3')], base).reasons, ['RolloutStarted', 'RolloutStarted', 'RolloutComplete']);
  });

  test('a Deployment recreated under the same name (new uid) is treated as new', () => {
    const base = adopt(observeRollout(complete('1')));
    assert.deepEqual(run([progressing('1', { uid: 'u2' }), complete('1', { uid: 'u2' })], base).reasons, ['RolloutStarted', 'RolloutComplete']);
  });
});

describe('step: restart (first sight of a Deployment that existed before the start)', () => {
  const first = (d: Deployment): ReturnType<typeof step> => step(undefined, observeRollout(d), 5_000, true);

  test('a finished rollout is adopted silently and stays silent', () => {
    const s = first(complete('4'));
    assert.equal(s.adopted, true);
    assert.deepEqual(s.announcements, []);
    assert.deepEqual(run([complete('4'), complete('4')], s.record).reasons, []);
  });

  test('a rollout in flight: no second Started, but its completion is announced (no duration)', () => {
    const s = first(progressing('4'));
    assert.deepEqual(s.announcements, []);
    const r = run([progressing('4'), complete('4')], s.record);
    assert.deepEqual(r.reasons, ['RolloutComplete']);
    assert.deepEqual(r.durations, []);
  });

  test('a stalled rollout is not announced again', () => {
    const s = first(stalled('4'));
    assert.deepEqual(s.announcements, []);
    assert.deepEqual(run([stalled('4'), stalled('4')], s.record).reasons, []);
  });

  test('a paused rollout in flight is adopted with its rollout', () => {
    const s = first(progressing('4', { paused: true }));
    assert.equal(s.record.state, 'paused');
    assert.deepEqual(run([complete('4')], s.record).reasons, ['RolloutComplete']);
  });

  test('a Deployment created after the start is not adopted', () => {
    const s = step(undefined, observeRollout(progressing('1')), 5_000, false);
    assert.equal(s.adopted, false);
    assert.deepEqual(s.announcements.map((a) => a.reason), ['RolloutStarted']);
  });
});

describe('existedBefore', () => {
  const at = (created: string | undefined): Deployment => ({ metadata: { ...(created ? { creationTimestamp: created } : {}) } });
  const start = Date.parse('2024-05-01T10:00:00.600Z');
  test('earlier second → existed', () => assert.equal(existedBefore(at('2024-05-01T09:59:59Z'), start), true));
  test('same second → new', () => assert.equal(existedBefore(at('2024-05-01T10:00:00Z'), start), false));
  test('later → new', () => assert.equal(existedBefore(at('2024-05-01T10:00:01Z'), start), false));
  test('no timestamp → existed', () => assert.equal(existedBefore(at(undefined), start), true));
});
