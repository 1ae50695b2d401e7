/**
 * Driver tests: the Reflector (reflector.ts) with a scripted in-memory ListWatcher and a FakeClock. Every request
 * answers on a later turn of the event loop, like real I/O, so a request loop without a wait shows up as requests
 * piling up while the fake clock stands still.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { ServerReachability } from '../client/reachability.ts';
import { ApiError } from '../client/rest.ts';
import { captureLogs, type LogLine as BaseLogLine } from '../log/capture.ts';
import type { Logger } from '../log/logger.ts';
import { FakeClock } from '../util/clock.ts';
import type { ListPage, ListRequest, ListWatcher, WatchRequest } from './listwatch.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { Reflector, type ReflectorSink } from './reflector.ts';
import type { ReflectorConfig } from './reflectorstate.ts';
import type { WatchEvent } from './watchdecoder.ts';

const noJitter: Partial<ReflectorConfig> = { backoffJitter: 0 };

/** Lets every pending request answer (each answer takes one macrotask turn), without moving the fake clock. */
async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

type ListAnswer = (req: ListRequest) => ListPage | Error;
/** Events to stream (the stream then stays open until aborted), an error to reject with, or 'hang' (no events). */
type WatchAnswer = (req: WatchRequest) => Array<WatchEvent<KubeObject>> | Error | 'hang';

class ScriptedListWatcher implements ListWatcher {
  readonly lists: ListRequest[] = [];
  readonly watches: WatchRequest[] = [];
  private readonly onList: ListAnswer;
  private readonly onWatch: WatchAnswer;
  constructor(onList: ListAnswer, onWatch: WatchAnswer) {
    this.onList = onList;
    this.onWatch = onWatch;
  }

  async list(req: ListRequest): Promise<ListPage> {
    this.lists.push(req);
    await nextTurn();
    const a = this.onList(req);
    if (a instanceof Error) throw a;
    return a;
  }

  async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent<KubeObject>>> {
    this.watches.push(req);
    await nextTurn();
    const a = this.onWatch(req);
    if (a instanceof Error) throw a;
    // The events, one per turn; then the stream stays open without data until the request is aborted.
    const events = a === 'hang' ? [] : [...a];
    const aborted = new Promise<IteratorResult<WatchEvent<KubeObject>>>((_resolve, reject) => {
      if (req.signal.aborted) reject(req.signal.reason as Error);
      req.signal.addEventListener('abort', () => reject(req.signal.reason as Error), { once: true });
    });
    aborted.catch(() => undefined);
    const next = async (): Promise<IteratorResult<WatchEvent<KubeObject>>> => {
      const ev = events.shift();
      if (ev === undefined) return aborted;
      await nextTurn();
      return { value: ev, done: false };
    };
    return { [Symbol.asyncIterator]: () => ({ next }) };
  }
}

class RecordingSink implements ReflectorSink {
  readonly replaces: Array<{ names: string[]; rv: string }> = [];
  readonly deltas: string[] = [];
  failReplace: ((items: KubeObject[]) => Error | undefined) | undefined;
  failAdd: ((obj: KubeObject) => Error | undefined) | undefined;

  replace(items: KubeObject[], resourceVersion: string): void {
    const err = this.failReplace?.(items);
    if (err) throw err;
    this.replaces.push({ names: items.map((o) => o.metadata?.name ?? '?'), rv: resourceVersion });
  }
  add(obj: KubeObject): void {
    const err = this.failAdd?.(obj);
    if (err) throw err;
    this.deltas.push(`add:${obj.metadata?.name}`);
  }
  update(obj: KubeObject): void {
    this.deltas.push(`update:${obj.metadata?.name}`);
  }
  delete(obj: KubeObject): void {
    this.deltas.push(`delete:${obj.metadata?.name}`);
  }
}

function page(items: KubeObject[], rv: string, continueToken?: string): ListPage {
  return { items, resourceVersion: rv, continueToken };
}

function cm(name: string, rv: string): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default', resourceVersion: rv } };
}

interface LogLine extends BaseLogLine {
  skipped?: number;
  err?: { message?: string };
}


const gone = (): ApiError => new ApiError(410, 'Expired', 'too old resource version: 5 (9)', undefined);

const running: Array<{ ac: AbortController; done: Promise<void> }> = [];
afterEach(async () => {
  for (const r of running.splice(0)) {
    r.ac.abort();
    await r.done;
  }
});

function start(lw: ListWatcher, sink: ReflectorSink, clock: FakeClock, opts: { config?: Partial<ReflectorConfig>; logger?: Logger } = {}): Reflector {
  const r = new Reflector({ listWatcher: lw, sink, clock, random: () => 0, config: { ...noJitter, ...opts.config }, logger: opts.logger, watchIdleTimeoutMs: 3_600_000 });
  const ac = new AbortController();
  running.push({ ac, done: r.run(ac.signal) });
  return r;
}

describe('Reflector driver', () => {
  it('a server that always answers the watch with 410 gets relists 0.8 s → 30 s apart', async () => {
    const clock = new FakeClock();
    const lw = new ScriptedListWatcher(() => page([], '5'), () => gone());
    const r = start(lw, new RecordingSink(), clock);
    await settle();
    assert.equal(lw.lists.length, 1, 'no relist while the clock stands still');
    assert.equal(r.currentState().phase.name, 'Backoff');
    clock.step(799);
    await settle();
    assert.equal(lw.lists.length, 1);
    clock.step(1);
    await settle();
    assert.equal(lw.lists.length, 2);
    // Ten minutes: waits 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, then 30 s each → 24 relists in all, not thousands.
    for (let t = 0; t < 600_000; t += 500) {
      clock.step(500);
      await settle(4);
    }
    const lists = lw.lists.length as number;
    assert.ok(lists >= 20 && lists <= 26, `${lists} lists in 10 minutes`);
  });
});

describe('Reflector driver: a sink that throws never wedges the reflector', () => {
  it('replace throwing (e.g. a transform that drops metadata.name) is logged and the list retried with backoff', async () => {
    const clock = new FakeClock();
    const lw = new ScriptedListWatcher(() => page([cm('a', '3'), cm('b', '4')], '5'), () => 'hang');
    const sink = new RecordingSink();
    let failures = 2;
    sink.failReplace = () => (failures-- > 0 ? new Error('object has no metadata.name') : undefined);
    const { logger, lines } = captureLogs<LogLine>();
    const r = start(lw, sink, clock, { logger });
    await settle();
    assert.equal(r.currentState().phase.name, 'Backoff', 'not silently "Watching" with nothing in flight');
    assert.equal(lw.watches.length, 0, 'no watch without a cache');
    assert.ok(lines.some((l) => l.level === 'error' && l.err?.message === 'object has no metadata.name'), 'the exception is logged');
    assert.ok(lines.some((l) => l.level === 'warn' && /relisting in 800 ms/.test(l.msg)), JSON.stringify(lines));
    clock.step(800);
    await settle();
    assert.equal(lw.lists.length, 2);
    assert.equal(r.currentState().phase.name, 'Backoff');
    clock.step(1600);
    await settle();
    assert.equal(lw.lists.length, 3);
    assert.deepEqual(sink.replaces, [{ names: ['a', 'b'], rv: '5' }]);
    assert.equal(r.currentState().phase.name, 'Watching');
    assert.equal(lw.watches.length, 1);
    assert.equal(lw.watches[0]?.resourceVersion, '5');
  });

  it('replace throwing at the end of a streaming list cancels that stream and retries after the backoff', async () => {
    const clock = new FakeClock();
    const end: KubeObject = { kind: 'ConfigMap', metadata: { resourceVersion: '9', annotations: { 'k8s.io/initial-events-end': 'true' } } };
    const lw = new ScriptedListWatcher(
      () => page([], '1'),
      (req) => (req.sendInitialEvents ? [{ type: 'ADDED', object: cm('a', '8') }, { type: 'BOOKMARK', object: end }] : 'hang'),
    );
    const sink = new RecordingSink();
    let failures = 1;
    sink.failReplace = () => (failures-- > 0 ? new Error('boom') : undefined);
    const r = start(lw, sink, clock, { config: { useWatchList: true } });
    await settle();
    assert.equal(r.currentState().phase.name, 'Backoff');
    assert.ok(lw.watches[0]?.signal.aborted, 'the streaming list request was cancelled');
    clock.step(800);
    await settle();
    assert.equal(lw.watches.length, 2);
    assert.equal(lw.watches[1]?.sendInitialEvents, true);
    assert.deepEqual(sink.replaces, [{ names: ['a'], rv: '9' }]);
    assert.equal(r.currentState().phase.name, 'Watching');
  });

  it('add throwing for one event is logged and skipped; later events still arrive on the same watch (client-go)', async () => {
    const clock = new FakeClock();
    const lw = new ScriptedListWatcher(
      () => page([], '5'),
      (req) =>
        req.resourceVersion === '5'
          ? [{ type: 'ADDED', object: cm('bad', '6') }, { type: 'ADDED', object: cm('good', '7') }]
          : 'hang',
    );
    const sink = new RecordingSink();
    sink.failAdd = (o) => (o.metadata?.name === 'bad' ? new Error('cannot key object') : undefined);
    const { logger, lines } = captureLogs<LogLine>();
    const r = start(lw, sink, clock, { logger, config: { minWatchDurationMs: 0 } });
    await settle();
    assert.deepEqual(sink.deltas, ['add:good']);
    assert.ok(lines.some((l) => l.level === 'error' && l.err?.message === 'cannot key object'));
    assert.equal(r.lastSyncResourceVersion(), '7');
    assert.equal(lw.watches.length, 1, 'the watch was not torn down by the failed add');
  });
});

describe('Reflector driver: watch events of unknown types', () => {
  it('are logged at most once a minute, with the number skipped', async () => {
    const clock = new FakeClock();
    let watch: WatchRequest | undefined;
    const lw = new ScriptedListWatcher(
      () => page([], '5'),
      (req) => {
        watch = req;
        return 'hang';
      },
    );
    const { logger, lines } = captureLogs<LogLine>();
    const r = start(lw, new RecordingSink(), clock, { logger });
    await settle();
    const report = watch?.onUnknownEventType;
    assert.ok(report, 'the reflector asks to hear about skipped events');
    const warned = (): LogLine[] => lines.filter((l) => l.msg === 'skipping watch events of unknown type');
    for (let i = 0; i < 100; i++) report('FUTURE');
    assert.deepEqual(warned().map((l) => [l.level, l.skipped]), [['warn', 1]]);
    clock.step(59_999);
    report('FUTURE');
    assert.equal(warned().length, 1);
    clock.step(1);
    report('OTHER');
    assert.deepEqual(warned().map((l) => l.skipped), [1, 101]);
    assert.equal(r.currentState().phase.name, 'Watching');
    assert.equal(lw.watches.length, 1);
  });
});

describe('Reflector driver: woken by the server answering again (issue 43)', () => {
  const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  /** Ten-minute backoffs: a retry within seconds can only come from the wake. */
  const longBackoff: Partial<ReflectorConfig> = { backoffInitialMs: 600_000, backoffMaxMs: 600_000, backoffJitter: 0, wakeJitterMs: 1000 };

  function startWith(lw: ListWatcher, clock: FakeClock, reachability: ServerReachability, random = 0.5): { r: Reflector; ac: AbortController; done: Promise<void> } {
    const r = new Reflector({ listWatcher: lw, sink: new RecordingSink(), clock, random: () => random, config: longBackoff, reachability, watchIdleTimeoutMs: 3_600_000 });
    const ac = new AbortController();
    const done = r.run(ac.signal);
    running.push({ ac, done });
    return { r, ac, done };
  }

  it('two reflectors in a 10-minute backoff after refused LISTs both retry within wakeJitterMs of one answer', async () => {
    const clock = new FakeClock();
    const reachability = new ServerReachability();
    let up = false;
    const lws = [0, 1].map(() => new ScriptedListWatcher(() => (up ? page([cm('a', '5')], '5') : refused()), () => 'hang'));
    const rs = lws.map((lw) => startWith(lw, clock, reachability).r);
    await settle();
    for (const r of rs) assert.equal(r.currentState().phase.name, 'Backoff');
    clock.step(60_000);
    await settle();
    assert.deepEqual(lws.map((lw) => lw.lists.length), [1, 1], 'no retry a minute into a 10-minute backoff');

    up = true;
    reachability.answered(); // e.g. the leader election's renew got its answer
    await settle();
    clock.step(1000); // wakeJitterMs: the retries are spread over at most 1 s
    await settle();
    assert.deepEqual(lws.map((lw) => lw.lists.length), [2, 2]);
    for (const r of rs) assert.equal(r.currentState().phase.name, 'Watching');
  });

  it('a backoff after an answer (403) is not shortened; stopping leaves no timer and no subscription behind', async () => {
    const clock = new FakeClock();
    const subscribed = new Set<() => void>();
    const reachability = {
      subscribe(l: () => void): () => void {
        subscribed.add(l);
        return () => subscribed.delete(l);
      },
    } as unknown as ServerReachability; // counts subscriptions (a fake for bookkeeping, not behaviour)
    const forbidden = new ScriptedListWatcher(() => new ApiError(403, 'Forbidden', 'configmaps is forbidden', undefined), () => 'hang');
    const cut = new ScriptedListWatcher(() => refused(), () => 'hang');
    const a = startWith(forbidden, clock, reachability);
    const b = startWith(cut, clock, reachability);
    await settle();
    assert.equal(subscribed.size, 1, 'only the reflector whose connection failed waits for the server');
    for (const l of [...subscribed]) l();
    await settle();
    clock.step(1000);
    await settle();
    assert.equal(forbidden.lists.length, 1, 'the 403 keeps its backoff');
    assert.equal(cut.lists.length, 2, 'the refused one retried');
    assert.equal(subscribed.size, 1, 'refused again: waiting again');
    a.ac.abort();
    b.ac.abort();
    await Promise.all([a.done, b.done]);
    assert.equal(subscribed.size, 0);
    assert.equal(clock.pendingTimers(), 0);
  });
});
