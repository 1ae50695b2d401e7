/**
 * Driver tests: the Reflector (reflector.ts) with a scripted in-memory ListWatcher and a FakeClock. Every request
 * answers on a later turn of the event loop, like real I/O, so a request loop without a wait shows up as requests
 * piling up while the fake clock stands still.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { ApiError } from '../client/rest.ts';
import type { Logger } from '../log/logger.ts';
import { FakeClock } from '../util/clock.ts';
import type { ListPage, ListRequest, ListWatcher, WatchRequest } from './listwatch.ts';
import type { KubeObject } from './object.ts';
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
    if (a === 'hang') {
      // A stream that stays open without data until the request is aborted.
      const aborted = new Promise<IteratorResult<WatchEvent<KubeObject>>>((_resolve, reject) => {
        if (req.signal.aborted) reject(req.signal.reason as Error);
        req.signal.addEventListener('abort', () => reject(req.signal.reason as Error), { once: true });
      });
      aborted.catch(() => undefined);
      return { [Symbol.asyncIterator]: () => ({ next: () => aborted }) };
    }
    return (async function* () {
      for (const ev of a) {
        await nextTurn();
        yield ev;
      }
    })();
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
