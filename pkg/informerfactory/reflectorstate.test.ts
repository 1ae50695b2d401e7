import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../apimachinery/meta.ts';
import {
  defaultReflectorConfig,
  INITIAL_EVENTS_END_ANNOTATION,
  initialReflectorState,
  nextBackoff,
  reflectorStep,
  type Phase,
  type ReflectorAction,
  type ReflectorConfig,
  type ReflectorEvent,
  type ReflectorState,
  type RequestFailure,
  type StepResult,
} from './reflectorstate.ts';
import type { WatchEventType } from './watchdecoder.ts';

const cfg: ReflectorConfig = { ...defaultReflectorConfig };
const wlCfg: ReflectorConfig = { ...defaultReflectorConfig, useWatchList: true };
const T0 = 1_000_000;

function obj(name: string, rv: string, ns = 'default'): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns, resourceVersion: rv } };
}
function bookmark(rv: string, end = false): KubeObject {
  return { kind: 'ConfigMap', metadata: { resourceVersion: rv, ...(end ? { annotations: { [INITIAL_EVENTS_END_ANNOTATION]: 'true' } } : {}) } };
}
function ev(type: WatchEventType, object: KubeObject | object): ReflectorEvent {
  return { type: 'watchEvent', event: { type, object: object } };
}
const fail = (status: number, message = 'boom', reason = 'X'): RequestFailure => ({ status, reason, message });

function step(s: ReflectorState, e: ReflectorEvent, now = T0, random = 0, c = cfg): StepResult {
  return reflectorStep(s, e, { now, random }, c);
}
function types(actions: ReflectorAction[]): string[] {
  return actions.filter((a) => a.type !== 'log').map((a) => a.type);
}
function phaseName(r: StepResult): Phase['name'] {
  return r.state.phase.name;
}
function find<K extends ReflectorAction['type']>(actions: ReflectorAction[], type: K): Extract<ReflectorAction, { type: K }> {
  const a = actions.find((x) => x.type === type);
  assert.ok(a, `expected a ${type} action in ${JSON.stringify(actions.map((x) => x.type))}`);
  return a as Extract<ReflectorAction, { type: K }>;
}

/** A state in the Watching phase at resourceVersion `rv`, started at `at`. */
function watching(rv = '10', at = T0, c = cfg): ReflectorState {
  let s = step(initialReflectorState(c), { type: 'start' }, at, 0, c).state;
  if (s.phase.name === 'WatchListing') {
    return step(s, ev('BOOKMARK', bookmark(rv, true)), at, 0, c).state;
  }
  s = step(s, { type: 'listPage', items: [], continueToken: undefined, resourceVersion: rv }, at, 0, c).state;
  assert.equal(s.phase.name, 'Watching');
  return s;
}
function watchListing(): ReflectorState {
  const s = step(initialReflectorState(wlCfg), { type: 'start' }, T0, 0, wlCfg).state;
  assert.equal(s.phase.name, 'WatchListing');
  return s;
}

describe('reflectorStep: Empty', () => {
  it('start → Listing with a first page request of 500', () => {
    const r = step(initialReflectorState(cfg), { type: 'start' });
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(r.actions, [{ type: 'list', continueToken: undefined, limit: 500 }]);
  });

  it('start with watch-list enabled → WatchListing with a sendInitialEvents watch from ""', () => {
    const r = step(initialReflectorState(wlCfg), { type: 'start' }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'WatchListing');
    const w = find(r.actions, 'watch');
    assert.equal(w.sendInitialEvents, true);
    assert.equal(w.resourceVersion, '');
    assert.equal(w.timeoutSeconds, 300);
  });

  it('ignores events other than start', () => {
    const s = initialReflectorState(cfg);
    const r = step(s, { type: 'listPage', items: [obj('a', '1')], continueToken: undefined, resourceVersion: '1' });
    assert.equal(phaseName(r), 'Empty');
    assert.deepEqual(r.actions, []);
  });

  it('stop → Stopped, cancelling request and timer', () => {
    const r = step(initialReflectorState(cfg), { type: 'stop' });
    assert.equal(phaseName(r), 'Stopped');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'cancelTimer']);
  });
});

describe('reflectorStep: Listing', () => {
  const listing = (): ReflectorState => step(initialReflectorState(cfg), { type: 'start' }).state;

  it('a page with a continue token requests the next page and accumulates items', () => {
    const r = step(listing(), { type: 'listPage', items: [obj('a', '1'), obj('b', '2')], continueToken: 'c1', resourceVersion: '5' });
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(r.actions, [{ type: 'list', continueToken: 'c1', limit: 500 }]);
    const p = r.state.phase as Extract<Phase, { name: 'Listing' }>;
    assert.equal(p.continueToken, 'c1');
    assert.deepEqual(p.items.map((o) => o.metadata?.name), ['a', 'b']);
  });

  it('the last page delivers ONE replace of all pages, then watches from the list resourceVersion', () => {
    let s = step(listing(), { type: 'listPage', items: [obj('a', '1')], continueToken: 'c1', resourceVersion: '5' }).state;
    const r = step(s, { type: 'listPage', items: [obj('b', '2')], continueToken: undefined, resourceVersion: '7' }, T0, 0.5);
    s = r.state;
    assert.equal(phaseName(r), 'Watching');
    assert.equal(s.resourceVersion, '7');
    assert.deepEqual(types(r.actions), ['replace', 'watch']);
    const rep = find(r.actions, 'replace');
    assert.deepEqual(rep.items.map((o) => o.metadata?.name), ['a', 'b']);
    assert.equal(rep.resourceVersion, '7');
    const w = find(r.actions, 'watch');
    assert.equal(w.resourceVersion, '7');
    assert.equal(w.sendInitialEvents, false);
    assert.ok(w.timeoutSeconds >= 300 && w.timeoutSeconds <= 600);
  });

  it('410 on a continue page (expired token) falls back at once to ONE full unpaginated LIST (client-go pager)', () => {
    const s = step(listing(), { type: 'listPage', items: [obj('a', '1')], continueToken: 'c1', resourceVersion: '5' }).state;
    const r = step(s, { type: 'listError', failure: fail(410, 'The provided continue parameter is too old', 'Expired') });
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(types(r.actions), ['list']);
    assert.deepEqual(find(r.actions, 'list'), { type: 'list', continueToken: undefined, limit: 0 });
    const p = r.state.phase as Extract<Phase, { name: 'Listing' }>;
    assert.deepEqual(p.items, [], 'the pages of the expired attempt are dropped');
    assert.equal(p.continueToken, undefined);
    // The full list's answer is the whole list: replace with exactly its items, then watch.
    const done = step(r.state, { type: 'listPage', items: [obj('b', '7'), obj('c', '8')], continueToken: undefined, resourceVersion: '9' });
    assert.equal(phaseName(done), 'Watching');
    assert.deepEqual(types(done.actions), ['replace', 'watch']);
    assert.deepEqual(find(done.actions, 'replace').items.map((o) => o.metadata?.name), ['b', 'c']);
    assert.equal(find(done.actions, 'watch').resourceVersion, '9');
  });

  it('an error on the full-list fallback backs off; the retry is a paged list again', () => {
    let s = step(listing(), { type: 'listPage', items: [obj('a', '1')], continueToken: 'c1', resourceVersion: '5' }).state;
    s = step(s, { type: 'listError', failure: fail(410, 'continue parameter is too old', 'Expired') }).state;
    for (const failure of [fail(410, 'too old', 'Expired'), fail(504, 'timeout', 'Timeout')]) {
      const r = step(s, { type: 'listError', failure });
      assert.equal(phaseName(r), 'Backoff', `after ${failure.status}`);
      assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
      assert.deepEqual(step(r.state, { type: 'retryTimer' }).actions, [{ type: 'list', continueToken: undefined, limit: 500 }]);
    }
  });

  it('a server that expires every continue token: each relist costs at most one paged attempt plus one full LIST', () => {
    let s = listing();
    const lists: Array<string | number | undefined> = [];
    s = step(s, { type: 'listPage', items: [obj('a', '1')], continueToken: 'c1', resourceVersion: '5' }).state;
    lists.push('page');
    const r = step(s, { type: 'listError', failure: fail(410, 'continue parameter is too old', 'Expired') });
    lists.push(find(r.actions, 'list').limit);
    const done = step(r.state, { type: 'listPage', items: [obj('a', '1'), obj('b', '2')], continueToken: undefined, resourceVersion: '6' });
    assert.equal(phaseName(done), 'Watching');
    assert.deepEqual(lists, ['page', 0]);
  });

  it('an error on the first page backs off, then relists', () => {
    const r = step(listing(), { type: 'listError', failure: fail(500) });
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['scheduleRetry']);
    assert.equal(find(r.actions, 'scheduleRetry').delayMs, 800);
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
  });

  it('429 on a later page backs off and keeps the token and items to retry that page', () => {
    const s = step(listing(), { type: 'listPage', items: [obj('a', '1')], continueToken: 'c1', resourceVersion: '5' }).state;
    const r = step(s, { type: 'listError', failure: fail(429, 'slow down', 'TooManyRequests') });
    assert.equal(phaseName(r), 'Backoff');
    const resume = (r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume;
    assert.equal(resume.op, 'listPage');
    assert.ok(resume.op === 'listPage');
    assert.equal(resume.continueToken, 'c1');
    assert.deepEqual(resume.items.map((o) => o.metadata?.name), ['a']);
  });

  it('a 410 on the first page (no continue token) is an ordinary error', () => {
    const r = step(listing(), { type: 'listError', failure: fail(410) });
    assert.equal(phaseName(r), 'Backoff');
  });

  it('ignores watch events (late results of another request)', () => {
    const r = step(listing(), ev('ADDED', obj('a', '3')));
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(r.actions, []);
  });

  it('stop cancels the page request', () => {
    const r = step(listing(), { type: 'stop' });
    assert.equal(phaseName(r), 'Stopped');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'cancelTimer']);
  });
});

describe('reflectorStep: Backoff', () => {
  function backoffWith(resumeFrom: 'relist' | 'listPage' | 'watch'): ReflectorState {
    if (resumeFrom === 'watch') return step(watching('10'), { type: 'watchError', failure: fail(0, 'ECONNRESET') }).state;
    let s = step(initialReflectorState(cfg), { type: 'start' }).state;
    if (resumeFrom === 'listPage') {
      s = step(s, { type: 'listPage', items: [obj('a', '1')], continueToken: 'c1', resourceVersion: '5' }).state;
    }
    s = step(s, { type: 'listError', failure: fail(503) }).state;
    assert.equal(s.phase.name, 'Backoff');
    return s;
  }

  it('retryTimer resuming a relist → Listing from the first page', () => {
    const r = step(backoffWith('relist'), { type: 'retryTimer' });
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(r.actions, [{ type: 'list', continueToken: undefined, limit: 500 }]);
  });

  it('retryTimer resuming a page → Listing of that page with the items so far', () => {
    const r = step(backoffWith('listPage'), { type: 'retryTimer' });
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(r.actions, [{ type: 'list', continueToken: 'c1', limit: 500 }]);
    assert.equal((r.state.phase as Extract<Phase, { name: 'Listing' }>).items.length, 1);
  });

  it('retryTimer resuming a watch → Watching from the last resourceVersion', () => {
    const r = step(backoffWith('watch'), { type: 'retryTimer' }, T0 + 5000);
    assert.equal(phaseName(r), 'Watching');
    const w = find(r.actions, 'watch');
    assert.equal(w.resourceVersion, '10');
    assert.equal((r.state.phase as Extract<Phase, { name: 'Watching' }>).startedAt, T0 + 5000);
  });

  it('ignores other events while backing off', () => {
    const s = backoffWith('relist');
    for (const e of [
      { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '1' },
      { type: 'watchEnded' },
      { type: 'watchIdle' },
      { type: 'start' },
    ] as ReflectorEvent[]) {
      const r = step(s, e);
      assert.equal(phaseName(r), 'Backoff');
      assert.deepEqual(r.actions, []);
    }
  });

  it('stop cancels the retry timer', () => {
    const r = step(backoffWith('relist'), { type: 'stop' });
    assert.equal(phaseName(r), 'Stopped');
    assert.ok(r.actions.some((a) => a.type === 'cancelTimer'));
  });
});

describe('nextBackoff', () => {
  const b0 = { delayMs: 800, lastErrorAt: undefined };

  it('doubles from 0.8 s up to 30 s', () => {
    let b: { delayMs: number; lastErrorAt: number | undefined } = b0;
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const r = nextBackoff(b, { now: T0 + i * 1000, random: 0 }, cfg);
      waits.push(r.waitMs);
      b = r.backoff;
    }
    assert.deepEqual(waits, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
  });

  it('adds jitter of up to the base delay, capped at the maximum', () => {
    assert.equal(nextBackoff(b0, { now: T0, random: 0.5 }, cfg).waitMs, 1200);
    assert.equal(nextBackoff({ delayMs: 25_600, lastErrorAt: T0 }, { now: T0 + 1, random: 0.9 }, cfg).waitMs, 30_000);
  });

  it('resets to 0.8 s after 2 minutes without errors', () => {
    const b = { delayMs: 12_800, lastErrorAt: T0 };
    assert.equal(nextBackoff(b, { now: T0 + 119_000, random: 0 }, cfg).waitMs, 12_800);
    assert.equal(nextBackoff(b, { now: T0 + 121_000, random: 0 }, cfg).waitMs, 800);
  });

  it('successive errors in the state machine grow the delay', () => {
    let s = watching('10');
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = step(s, { type: 'watchError', failure: fail(0, 'ECONNREFUSED') }, T0 + i * 10);
      delays.push(find(r.actions, 'scheduleRetry').delayMs);
      s = step(r.state, { type: 'retryTimer' }, T0 + i * 10 + 1).state;
    }
    assert.deepEqual(delays, [800, 1600, 3200]);
  });
});

describe('reflectorStep: Watching', () => {
  it('ADDED/MODIFIED/DELETED become deltas and move the resourceVersion', () => {
    let s = watching('10');
    const cases: Array<[WatchEventType, string]> = [
      ['ADDED', 'Added'],
      ['MODIFIED', 'Updated'],
      ['DELETED', 'Deleted'],
    ];
    let rv = 11;
    for (const [type, delta] of cases) {
      const o = obj('a', String(rv));
      const r = step(s, ev(type, o));
      assert.equal(phaseName(r), 'Watching');
      assert.deepEqual(r.actions, [{ type: 'delta', delta, object: o }]);
      assert.equal(r.state.resourceVersion, String(rv));
      s = r.state;
      rv++;
    }
    assert.equal((s.phase as Extract<Phase, { name: 'Watching' }>).events, 3);
  });

  it('BOOKMARK moves the resourceVersion without any delta', () => {
    const r = step(watching('10'), ev('BOOKMARK', bookmark('42')));
    assert.equal(phaseName(r), 'Watching');
    assert.deepEqual(r.actions, []);
    assert.equal(r.state.resourceVersion, '42');
  });

  it('an event without a resourceVersion keeps the previous one', () => {
    const r = step(watching('10'), ev('ADDED', { metadata: { name: 'x', namespace: 'default' } }));
    assert.equal(r.state.resourceVersion, '10');
  });

  it('ERROR event 410 → cancel the stream, back off, then relist', () => {
    const r = step(watching('10'), ev('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 10 (20)' }));
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'scheduleRetry']);
    assert.equal(find(r.actions, 'scheduleRetry').delayMs, 800);
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
    const again = step(r.state, { type: 'retryTimer' }, T0 + 800);
    assert.equal(phaseName(again), 'Listing');
    assert.deepEqual(again.actions, [{ type: 'list', continueToken: undefined, limit: 500 }]);
  });

  it('ERROR event saying "too old resource version" without a code → back off, then relist', () => {
    const r = step(watching('10'), ev('ERROR', { kind: 'Status', message: 'too old resource version: 1 (2)' }));
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
  });

  it('other ERROR events → cancel, back off, resume watching from the same resourceVersion', () => {
    const r = step(watching('10'), ev('ERROR', { kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd down' }));
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'scheduleRetry']);
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'watch' });
    assert.equal(r.state.resourceVersion, '10');
  });

  it('a watch ending normally after ≥1 s is resumed at once from the last resourceVersion', () => {
    const s = step(watching('10', T0), ev('BOOKMARK', bookmark('15')), T0 + 100).state;
    const r = step(s, { type: 'watchEnded' }, T0 + 300_000, 0.999);
    assert.equal(phaseName(r), 'Watching');
    assert.deepEqual(types(r.actions), ['watch']);
    const w = find(r.actions, 'watch');
    assert.equal(w.resourceVersion, '15');
    assert.equal(w.timeoutSeconds, 600);
  });

  it('a watch ending within 1 s with no event is an error (backoff)', () => {
    const r = step(watching('10', T0), { type: 'watchEnded' }, T0 + 200);
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'watch' });
  });

  it('a short watch that delivered an event is not an error', () => {
    const s = step(watching('10', T0), ev('ADDED', obj('a', '11')), T0 + 10).state;
    const r = step(s, { type: 'watchEnded' }, T0 + 200);
    assert.equal(phaseName(r), 'Watching');
    assert.equal(find(r.actions, 'watch').resourceVersion, '11');
  });

  it('a long watch with no event that ends is not an error', () => {
    const r = step(watching('10', T0), { type: 'watchEnded' }, T0 + 1000);
    assert.equal(phaseName(r), 'Watching');
  });

  it('watch request failing with 410 → back off, then relist', () => {
    const r = step(watching('10'), { type: 'watchError', failure: fail(410, 'Gone', 'Gone') });
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['scheduleRetry']);
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
    assert.equal(phaseName(step(r.state, { type: 'retryTimer' })), 'Listing');
  });

  it('a 410 is logged at info (routine after compaction), not as a warning', () => {
    const r = step(watching('10'), { type: 'watchError', failure: fail(410, 'Gone', 'Gone') });
    const logs = r.actions.filter((a) => a.type === 'log');
    assert.equal(logs.length, 1);
    assert.equal(logs[0]?.type === 'log' && logs[0].level, 'info');
    assert.match(logs[0]?.type === 'log' ? logs[0].message : '', /relisting in 800 ms/);
  });

  it('watch failing otherwise (network, 429, 5xx, truncated event) → backoff, then watch from the last RV', () => {
    for (const f of [fail(0, 'stream cut in the middle of an event'), fail(429), fail(503)]) {
      const r = step(watching('10'), { type: 'watchError', failure: f });
      assert.equal(phaseName(r), 'Backoff');
      const again = step(r.state, { type: 'retryTimer' });
      assert.equal(find(again.actions, 'watch').resourceVersion, '10');
    }
  });

  it('a silent stream (idle timeout) → cancel it, back off, re-watch', () => {
    const r = step(watching('10'), { type: 'watchIdle' });
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'scheduleRetry']);
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'watch' });
  });

  it('relist after 410 uses the streaming list when enabled', () => {
    const b = step(watching('10', T0, wlCfg), { type: 'watchError', failure: fail(410) }, T0, 0, wlCfg);
    assert.equal(phaseName(b), 'Backoff');
    const r = step(b.state, { type: 'retryTimer' }, T0 + 800, 0, wlCfg);
    assert.equal(phaseName(r), 'WatchListing');
    assert.equal(find(r.actions, 'watch').sendInitialEvents, true);
  });

  it('ignores list results (late answers)', () => {
    const r = step(watching('10'), { type: 'listPage', items: [obj('z', '1')], continueToken: undefined, resourceVersion: '1' });
    assert.equal(phaseName(r), 'Watching');
    assert.deepEqual(r.actions, []);
  });

  it('stop cancels the stream', () => {
    const r = step(watching('10'), { type: 'stop' });
    assert.equal(phaseName(r), 'Stopped');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'cancelTimer']);
  });
});

describe('reflectorStep: the resourceVersion of a streaming list (client-go rewatchResourceVersion)', () => {
  /** Watching at `rv` after a streaming-list sync, then a relist forced by a failed replace. */
  const relistFrom = (s: ReflectorState, now = T0): StepResult => {
    const b = step(s, { type: 'replaceFailed', message: 'sink threw' }, now, 0, wlCfg);
    assert.equal(phaseName(b), 'Backoff');
    return step(b.state, { type: 'retryTimer' }, now + 30_000, 0, wlCfg);
  };
  const watchAction = (r: StepResult): Extract<ReflectorAction, { type: 'watch' }> => {
    assert.equal(phaseName(r), 'WatchListing');
    return find(r.actions, 'watch');
  };

  it('the first streaming list asks for the most recent state (no resourceVersion)', () => {
    assert.equal(watchAction(step(initialReflectorState(wlCfg), { type: 'start' }, T0, 0, wlCfg)).resourceVersion, '');
  });

  it('a relist streams from the last synced resourceVersion (NotOlderThan: no going back in time)', () => {
    const w = watchAction(relistFrom(watching('10', T0, wlCfg)));
    assert.equal(w.resourceVersion, '10');
    assert.equal(w.sendInitialEvents, true);
    // Events seen after the sync move it on.
    const later = step(watching('10', T0, wlCfg), ev('MODIFIED', obj('a', '15')), T0, 0, wlCfg).state;
    assert.equal(watchAction(relistFrom(later)).resourceVersion, '15');
  });

  it('after a 410 the relist asks for the most recent state, and the next sync clears that', () => {
    const b = step(watching('10', T0, wlCfg), { type: 'watchError', failure: fail(410) }, T0, 0, wlCfg);
    const r = step(b.state, { type: 'retryTimer' }, T0 + 800, 0, wlCfg);
    assert.equal(watchAction(r).resourceVersion, '');
    // Still '' when that streaming list fails in another way and is retried.
    const failed = step(r.state, { type: 'watchError', failure: fail(503) }, T0 + 900, 0, wlCfg);
    assert.equal(watchAction(step(failed.state, { type: 'retryTimer' }, T0 + 5_000, 0, wlCfg)).resourceVersion, '');
    const synced = step(r.state, ev('BOOKMARK', bookmark('20', true)), T0 + 1000, 0, wlCfg).state;
    assert.equal(watchAction(relistFrom(synced, T0 + 1000)).resourceVersion, '20');
  });

  for (const [what, failure] of [
    ['410 Expired', fail(410, 'too old resource version: 10 (15)', 'Expired')],
    ['504 Too large resource version', fail(504, 'Too large resource version: 99, current: 20', 'Timeout')],
  ] as const) {
    it(`a streaming list from a resourceVersion answered ${what} is retried from the most recent state`, () => {
      const r = relistFrom(watching('10', T0, wlCfg));
      assert.equal(watchAction(r).resourceVersion, '10');
      const b = step(r.state, { type: 'watchError', failure }, T0 + 31_000, 0, wlCfg);
      assert.equal(phaseName(b), 'Backoff');
      assert.deepEqual((b.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
      assert.equal(watchAction(step(b.state, { type: 'retryTimer' }, T0 + 40_000, 0, wlCfg)).resourceVersion, '');
    });
  }

  it('a plain watch after a paged LIST still resumes from the list\'s resourceVersion (nothing changes without watch-list)', () => {
    const s = watching('10');
    const b = step(s, { type: 'watchIdle' });
    const r = step(b.state, { type: 'retryTimer' }, T0 + 1000);
    assert.equal(find(r.actions, 'watch').resourceVersion, '10');
    assert.equal(find(r.actions, 'watch').sendInitialEvents, false);
  });
});

describe('reflectorStep: WatchListing (streaming list)', () => {
  it('accumulates ADDED/MODIFIED and drops DELETED without emitting anything', () => {
    let s = watchListing();
    for (const e of [ev('ADDED', obj('a', '1')), ev('ADDED', obj('b', '2')), ev('MODIFIED', obj('a', '3')), ev('DELETED', obj('b', '4'))]) {
      const r = step(s, e, T0, 0, wlCfg);
      assert.deepEqual(r.actions, []);
      s = r.state;
    }
    const items = (s.phase as Extract<Phase, { name: 'WatchListing' }>).items;
    assert.deepEqual([...items.keys()], ['default/a']);
    assert.equal(items.get('default/a')?.metadata?.resourceVersion, '3');
  });

  it('the initial-events-end bookmark replaces the cache and keeps watching on the same stream', () => {
    let s = watchListing();
    s = step(s, ev('ADDED', obj('a', '1')), T0, 0, wlCfg).state;
    const r = step(s, ev('BOOKMARK', bookmark('9', true)), T0 + 50, 0, wlCfg);
    assert.equal(phaseName(r), 'Watching');
    assert.deepEqual(types(r.actions), ['replace']);
    const rep = find(r.actions, 'replace');
    assert.equal(rep.resourceVersion, '9');
    assert.deepEqual(rep.items.map((o) => o.metadata?.name), ['a']);
    assert.equal(r.state.resourceVersion, '9');
    assert.equal(r.state.watchList, 'enabled');
    // The next event on the same stream is a delta.
    const next = step(r.state, ev('MODIFIED', obj('a', '10')), T0 + 60, 0, wlCfg);
    assert.deepEqual(types(next.actions), ['delta']);
  });

  it('a bookmark without the annotation means the server ignored it → fall back to paged LIST for good', () => {
    const r = step(watchListing(), ev('BOOKMARK', bookmark('9')), T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Listing');
    assert.equal(r.state.watchList, 'disabled');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'list']);
    // Later relists use LIST.
    let s = step(r.state, { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '9' }, T0, 0, wlCfg).state;
    s = step(s, { type: 'watchError', failure: fail(410) }, T0, 0, wlCfg).state;
    s = step(s, { type: 'retryTimer' }, T0 + 800, 0, wlCfg).state;
    assert.equal(s.phase.name, 'Listing');
  });

  for (const status of [400, 403, 422]) {
    it(`a ${status} refusal falls back to paged LIST`, () => {
      const r = step(watchListing(), { type: 'watchError', failure: fail(status) }, T0, 0, wlCfg);
      assert.equal(phaseName(r), 'Listing');
      assert.equal(r.state.watchList, 'disabled');
      assert.deepEqual(types(r.actions), ['list']);
    });
  }

  it('an ERROR event carrying a refusal falls back too', () => {
    const r = step(watchListing(), ev('ERROR', { code: 422, reason: 'Invalid', message: 'sendInitialEvents unsupported' }), T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Listing');
    assert.equal(r.state.watchList, 'disabled');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'list']);
  });

  it('the stream ending before the end bookmark falls back', () => {
    const r = step(watchListing(), { type: 'watchEnded' }, T0 + 10, 0, wlCfg);
    assert.equal(phaseName(r), 'Listing');
    assert.equal(r.state.watchList, 'disabled');
  });

  it('silence before the end bookmark falls back (and cancels the stream)', () => {
    const r = step(watchListing(), { type: 'watchIdle' }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Listing');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'list']);
  });

  it('410 restarts the streaming list after a backoff', () => {
    const r = step(watchListing(), { type: 'watchError', failure: fail(410) }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['scheduleRetry']);
    const again = step(r.state, { type: 'retryTimer' }, T0 + 800, 0, wlCfg);
    assert.equal(phaseName(again), 'WatchListing');
    assert.equal(find(again.actions, 'watch').sendInitialEvents, true);
    const r2 = step(watchListing(), ev('ERROR', { code: 410, message: 'too old resource version' }), T0, 0, wlCfg);
    assert.equal(phaseName(r2), 'Backoff');
    assert.deepEqual(types(r2.actions), ['cancelRequest', 'scheduleRetry']);
    assert.deepEqual((r2.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
  });

  it('other errors back off and retry the streaming list (still enabled)', () => {
    const r = step(watchListing(), { type: 'watchError', failure: fail(503) }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Backoff');
    assert.equal(r.state.watchList, 'enabled');
    const again = step(r.state, { type: 'retryTimer' }, T0 + 1000, 0, wlCfg);
    assert.equal(phaseName(again), 'WatchListing');
    const r2 = step(watchListing(), ev('ERROR', { code: 500, message: 'internal' }), T0, 0, wlCfg);
    assert.equal(phaseName(r2), 'Backoff');
    assert.deepEqual(types(r2.actions), ['cancelRequest', 'scheduleRetry']);
  });

  it('stop cancels the stream', () => {
    const r = step(watchListing(), { type: 'stop' }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Stopped');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'cancelTimer']);
  });

  it('ignores list results', () => {
    const r = step(watchListing(), { type: 'listError', failure: fail(500) }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'WatchListing');
    assert.deepEqual(r.actions, []);
  });
});

describe('reflectorStep: relists after 410 are backed off (no relist storm)', () => {
  /** One cycle against a server that always answers 410 to the watch: list → watch → 410; returns the wait. */
  function cycle(s: ReflectorState, now: number, how: 'status' | 'event', c = cfg): { state: ReflectorState; waitMs: number } {
    const failure = fail(410, 'too old resource version: 1 (2)', 'Expired');
    const r =
      how === 'status'
        ? step(s, { type: 'watchError', failure }, now, 0, c)
        : step(s, ev('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: failure.message }), now, 0, c);
    assert.equal(phaseName(r), 'Backoff');
    return { state: r.state, waitMs: find(r.actions, 'scheduleRetry').delayMs };
  }

  for (const how of ['status', 'event'] as const) {
    it(`a server that always answers 410 (${how}) gets relists 0.8 s → 30 s apart, not hundreds per second`, () => {
      let s = watching('10');
      let now = T0;
      const waits: number[] = [];
      for (let i = 0; i < 8; i++) {
        const b = cycle(s, now, how);
        waits.push(b.waitMs);
        now += b.waitMs;
        const listed = step(b.state, { type: 'retryTimer' }, now);
        assert.equal(phaseName(listed), 'Listing');
        s = step(listed.state, { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '10' }, now).state;
        assert.equal(s.phase.name, 'Watching');
      }
      assert.deepEqual(waits, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    });
  }

  it('a streaming list that always gets 410 backs off the same way', () => {
    let s = watchListing();
    let now = T0;
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = step(s, { type: 'watchError', failure: fail(410) }, now, 0, wlCfg);
      const w = find(r.actions, 'scheduleRetry').delayMs;
      waits.push(w);
      now += w;
      s = step(r.state, { type: 'retryTimer' }, now, 0, wlCfg).state;
      assert.equal(s.phase.name, 'WatchListing');
    }
    assert.deepEqual(waits, [800, 1600, 3200, 6400]);
  });

  it('the first 410 after the server was unreachable relists after the initial delay: the backoff grown by the outage is not the 410\'s', () => {
    // kube-apiserver down (restart, a cut connection): four resumptions fail without an answer, the waits grow.
    let s = watching('10');
    let now = T0;
    const outage: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = step(s, { type: 'watchError', failure: fail(0, 'connect ECONNREFUSED 127.0.0.1:6443', 'Error') }, now);
      const w = find(r.actions, 'scheduleRetry').delayMs;
      outage.push(w);
      now += w;
      s = step(r.state, { type: 'retryTimer' }, now).state;
      assert.equal(s.phase.name, 'Watching');
    }
    assert.deepEqual(outage, [800, 1600, 3200, 6400]);
    // Back, and its watch cache no longer has resourceVersion 10: 410. The relist follows after 0.8 s, not 12.8 s.
    const gone = step(s, { type: 'watchError', failure: fail(410, 'too old resource version: 10 (500)', 'Expired') }, now);
    assert.equal(find(gone.actions, 'scheduleRetry').delayMs, 800);
    // A server that keeps answering 410 still gets relists further and further apart.
    now += 800;
    s = step(gone.state, { type: 'retryTimer' }, now).state;
    s = step(s, { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '11' }, now).state;
    const again = step(s, { type: 'watchError', failure: fail(410) }, now);
    assert.equal(find(again.actions, 'scheduleRetry').delayMs, 1600);
  });

  it('after 2 minutes of health a 410 relists after the initial delay again (jittered)', () => {
    let s = watching('10');
    let now = T0;
    for (let i = 0; i < 5; i++) {
      const b = cycle(s, now, 'status');
      now += b.waitMs;
      s = step(b.state, { type: 'retryTimer' }, now).state;
      s = step(s, { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '10' }, now).state;
    }
    assert.equal(s.goneBackoff.delayMs, 25_600);
    now += 121_000;
    const r = step(s, { type: 'watchError', failure: fail(410) }, now, 0.5);
    assert.equal(find(r.actions, 'scheduleRetry').delayMs, 1200);
  });
});

describe('reflectorStep: invariant — never two first-page LISTs without a wait in between', () => {
  /** Deterministic PRNG (LCG) so a failure is reproducible. */
  function prng(seed: number): () => number {
    let x = seed;
    return () => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      return x / 2 ** 31;
    };
  }
  function pick<T>(rnd: () => number, xs: readonly T[]): T {
    return xs[Math.floor(rnd() * xs.length)] as T;
  }

  /** A random but plausible server answer for the phase the machine is in. */
  function answer(s: ReflectorState, rnd: () => number): ReflectorEvent {
    switch (s.phase.name) {
      case 'Listing':
        return pick(rnd, [
          { type: 'listPage', items: [obj('a', '1')], continueToken: 'c', resourceVersion: '5' },
          { type: 'listPage', items: [obj('b', '2')], continueToken: undefined, resourceVersion: '6' },
          { type: 'listError', failure: fail(410, 'continue parameter is too old', 'Expired') },
          { type: 'listError', failure: fail(500) },
        ] as ReflectorEvent[]);
      case 'WatchListing':
        return pick(rnd, [
          ev('ADDED', obj('a', '1')),
          ev('BOOKMARK', bookmark('9', true)),
          ev('BOOKMARK', bookmark('9')),
          ev('ERROR', { code: 410, message: 'too old resource version' }),
          { type: 'watchError', failure: fail(410) },
          { type: 'watchError', failure: fail(422) },
          { type: 'watchError', failure: fail(503) },
          { type: 'watchEnded' },
          { type: 'watchIdle' },
        ] as ReflectorEvent[]);
      case 'Watching':
        return pick(rnd, [
          ev('ADDED', obj('a', '11')),
          ev('BOOKMARK', bookmark('12')),
          ev('ERROR', { code: 410, message: 'too old resource version' }),
          ev('ERROR', { code: 500, message: 'internal' }),
          { type: 'watchError', failure: fail(410) },
          { type: 'watchError', failure: fail(0, 'ECONNRESET') },
          { type: 'watchEnded' },
          { type: 'watchIdle' },
          { type: 'replaceFailed', message: 'boom' },
        ] as ReflectorEvent[]);
      default:
        return { type: 'retryTimer' };
    }
  }

  it('holds over 2 000 random runs of server answers (paged and streaming lists)', () => {
    const rnd = prng(42);
    for (let run = 0; run < 2000; run++) {
      const c = run % 2 === 0 ? cfg : wlCfg;
      let now = T0;
      let r = step(initialReflectorState(c), { type: 'start' }, now, 0, c);
      let waited = true;
      const trace: string[] = ['start'];
      for (let i = 0; i < 60; i++) {
        for (const a of r.actions) {
          if (a.type === 'scheduleRetry') waited = true;
          if (a.type === 'list' && a.continueToken === undefined && a.limit > 0) {
            const fellBack = r.actions.some((x) => x.type === 'log' && /streaming list not usable/.test(x.message));
            assert.ok(waited || fellBack, `run ${run}: LIST again without a wait after ${trace.join(' → ')}`);
            waited = false;
          }
        }
        const e = answer(r.state, rnd);
        trace.push(e.type === 'watchEvent' ? e.event.type : e.type === 'watchError' || e.type === 'listError' ? `${e.type}:${e.failure.status}` : e.type);
        now += Math.floor(rnd() * 2000);
        r = step(r.state, e, now, rnd(), c);
      }
    }
  });
});

describe('reflectorStep: the sink failed to take a list (replaceFailed)', () => {
  it('after a paged list → cancel whatever is in flight, back off, relist', () => {
    const r = step(watching('10'), { type: 'replaceFailed', message: 'no metadata.name' }, T0 + 5);
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'scheduleRetry']);
    assert.deepEqual((r.state.phase as Extract<Phase, { name: 'Backoff' }>).resume, { op: 'relist' });
    const log = r.actions.find((a) => a.type === 'log');
    assert.ok(log?.type === 'log' && log.level === 'warn' && /no metadata\.name.*relisting in 800 ms/.test(log.message));
    const again = step(r.state, { type: 'retryTimer' }, T0 + 805);
    assert.deepEqual(again.actions, [{ type: 'list', continueToken: undefined, limit: 500 }]);
  });

  it('after a streaming list → cancel the stream, back off, retry the streaming list', () => {
    const s = step(watchListing(), ev('BOOKMARK', bookmark('9', true)), T0, 0, wlCfg).state;
    const r = step(s, { type: 'replaceFailed', message: 'boom' }, T0, 0, wlCfg);
    assert.equal(phaseName(r), 'Backoff');
    assert.deepEqual(types(r.actions), ['cancelRequest', 'scheduleRetry']);
    assert.equal(phaseName(step(r.state, { type: 'retryTimer' }, T0 + 800, 0, wlCfg)), 'WatchListing');
  });

  it('repeated failures grow the backoff like any error', () => {
    let s = watching('10');
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = step(s, { type: 'replaceFailed', message: 'boom' }, T0 + i);
      waits.push(find(r.actions, 'scheduleRetry').delayMs);
      s = step(step(r.state, { type: 'retryTimer' }, T0 + i).state, { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '10' }, T0 + i).state;
    }
    assert.deepEqual(waits, [800, 1600, 3200]);
  });

  it('is ignored outside Watching (a late report)', () => {
    const listingState = step(initialReflectorState(cfg), { type: 'start' }).state;
    for (const s of [listingState, watchListing(), step(watching('10'), { type: 'watchIdle' }).state]) {
      const r = step(s, { type: 'replaceFailed', message: 'late' });
      assert.equal(phaseName(r), s.phase.name);
      assert.deepEqual(r.actions, []);
    }
  });
});

describe('reflectorStep: Stopped', () => {
  it('ignores every event', () => {
    const s = step(watching('10'), { type: 'stop' }).state;
    for (const e of [
      { type: 'start' },
      { type: 'retryTimer' },
      { type: 'watchEnded' },
      { type: 'stop' },
      { type: 'listPage', items: [], continueToken: undefined, resourceVersion: '1' },
    ] as ReflectorEvent[]) {
      const r = step(s, e);
      assert.equal(phaseName(r), 'Stopped');
      assert.deepEqual(r.actions, []);
    }
  });
});

describe('reflectorStep: serverReachable (issue 43: a connection-level failure waits for the server, not for its backoff)', () => {
  const conn = (message = 'connect ECONNREFUSED 127.0.0.1:6443'): RequestFailure => ({ status: 0, reason: 'Error', message, connection: true });
  const reachable: ReflectorEvent = { type: 'serverReachable' };
  type Backoff = Extract<Phase, { name: 'Backoff' }>;

  it('in Backoff after a refused LIST: the retry is rescheduled within wakeJitterMs, once', () => {
    const c: ReflectorConfig = { ...cfg, backoffInitialMs: 600_000, backoffMaxMs: 600_000, wakeJitterMs: 1000 };
    const listing = step(initialReflectorState(c), { type: 'start' }, T0, 0, c).state;
    const b = step(listing, { type: 'listError', failure: conn() }, T0, 0, c);
    assert.equal(find(b.actions, 'scheduleRetry').delayMs, 600_000);
    const woken = step(b.state, reachable, T0 + 5, 0.5, c);
    assert.equal(phaseName(woken), 'Backoff');
    assert.deepEqual(types(woken.actions), ['scheduleRetry']);
    assert.equal(find(woken.actions, 'scheduleRetry').delayMs, 500);
    assert.deepEqual((woken.state.phase as Backoff).resume, { op: 'relist' });
    // A second answer does not push the retry back (answers may come every few ms).
    const again = step(woken.state, reachable, T0 + 10, 0.9, c);
    assert.deepEqual(again.actions, []);
    assert.equal(again.state, woken.state);
    const retried = step(again.state, { type: 'retryTimer' }, T0 + 505, 0, c);
    assert.deepEqual(types(retried.actions), ['list']);
  });

  it('in Backoff after a watch cut by the connection: resumes the watch from its resourceVersion; wakeJitterMs 0 retries at once', () => {
    const c: ReflectorConfig = { ...cfg, wakeJitterMs: 0 };
    const b = step(watching('42', T0, c), { type: 'watchError', failure: conn('read ECONNRESET') }, T0 + 5000, 0, c);
    assert.equal(phaseName(b), 'Backoff');
    const woken = step(b.state, reachable, T0 + 6000, 0.7, c);
    assert.equal(find(woken.actions, 'scheduleRetry').delayMs, 0);
    const retried = step(woken.state, { type: 'retryTimer' }, T0 + 6000, 0, c);
    assert.equal(find(retried.actions, 'watch').resourceVersion, '42');
  });

  it('the wait keeps its growth: a retry that fails again backs off with the doubled delay (and is woken again)', () => {
    const listing = step(initialReflectorState(cfg), { type: 'start' }, T0).state;
    const b1 = step(listing, { type: 'listError', failure: conn() }, T0);
    const w = step(b1.state, reachable, T0 + 1);
    const l2 = step(w.state, { type: 'retryTimer' }, T0 + 2).state;
    const b2 = step(l2, { type: 'listError', failure: conn() }, T0 + 3);
    assert.equal(find(b2.actions, 'scheduleRetry').delayMs, 1600);
    assert.deepEqual(types(step(b2.state, reachable, T0 + 4).actions), ['scheduleRetry']);
  });

  const answered: Array<[string, (s: ReflectorState) => StepResult]> = [
    ['a 403 LIST', (s) => step(s, { type: 'listError', failure: fail(403, 'forbidden', 'Forbidden') })],
    ['a 404 LIST', (s) => step(s, { type: 'listError', failure: fail(404, 'not found', 'NotFound') })],
    ['a 500 LIST', (s) => step(s, { type: 'listError', failure: fail(500, 'etcd timeout', 'InternalError') })],
    ['a 503 LIST', (s) => step(s, { type: 'listError', failure: fail(503, 'shutting down', 'ServiceUnavailable') })],
  ];
  for (const [what, fails] of answered) {
    it(`in Backoff after ${what} (the server answered): ignored, the backoff stands`, () => {
      const listing = step(initialReflectorState(cfg), { type: 'start' }).state;
      const b = fails(listing);
      assert.equal(phaseName(b), 'Backoff');
      const r = step(b.state, reachable, T0 + 1);
      assert.deepEqual(r.actions, []);
      assert.equal(r.state, b.state);
    });
  }

  const otherBackoffs: Array<[string, () => StepResult]> = [
    ['a 410 on the watch (relist backoff)', () => step(watching(), { type: 'watchError', failure: fail(410, 'too old resource version', 'Expired') })],
    ['an ERROR 500 watch event', () => step(watching(), ev('ERROR', { kind: 'Status', code: 500, reason: 'InternalError', message: 'x' }))],
    ['a very short watch', () => step(watching(), { type: 'watchEnded' }, T0 + 10)],
    ['a silent watch (idle)', () => step(watching(), { type: 'watchIdle' }, T0 + 10)],
    ['a replace the sink refused', () => step(watching(), { type: 'replaceFailed', message: 'no name' })],
    ['a status-0 failure that is not the connection (e.g. a malformed stream)', () => step(watching(), { type: 'watchError', failure: fail(0, 'invalid JSON in watch stream', 'WatchDecodeError') })],
  ];
  for (const [what, enter] of otherBackoffs) {
    it(`in Backoff after ${what}: ignored`, () => {
      const b = enter();
      assert.equal(phaseName(b), 'Backoff');
      const r = step(b.state, reachable, T0 + 20);
      assert.deepEqual(r.actions, []);
      assert.equal(r.state, b.state);
    });
  }

  it('in every other phase: ignored', () => {
    const listing = step(initialReflectorState(cfg), { type: 'start' }).state;
    const states: ReflectorState[] = [
      initialReflectorState(cfg),
      listing,
      watchListing(),
      watching(),
      step(watching(), { type: 'stop' }).state,
    ];
    for (const s of states) {
      const r = step(s, reachable, T0 + 1);
      assert.deepEqual(r.actions, [], s.phase.name);
      assert.equal(r.state, s, s.phase.name);
    }
  });
});
