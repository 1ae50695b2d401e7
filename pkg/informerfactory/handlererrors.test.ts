import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { eventually, restClientFor } from '../../test/fakeapiserver/harness.ts';
import { FakeApiServer } from '../../test/fakeapiserver/server.ts';
import { captureLogs, type LogLine as BaseLogLine } from '../log/capture.ts';
import { FakeClock } from '../util/clock.ts';
import { HANDLER_ERROR_LOG_INTERVAL_MS, HandlerErrorReporter, handlerErrorsCounter } from './handlererrors.ts';
import { coreResources } from '../apimachinery/resource.ts';
import { SharedIndexInformer } from './sharedinformer.ts';
import { WatchCounter } from './watchcounter.ts';

interface LogLine extends BaseLogLine {
  handler?: string;
  notification?: string;
  suppressed?: number;
  err?: { message?: string };
}


async function counterValue(registry: Registry, labels: Record<string, string>): Promise<number> {
  const m = await registry.getSingleMetric('informer_handler_errors_total')?.get();
  const hit = m?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
  return hit?.value ?? 0;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

describe('HandlerErrorReporter', () => {
  it('counts every failure and logs the first at once, then at most one line per interval with the number suppressed', async () => {
    const registry = new Registry();
    const clock = new FakeClock();
    const { logger, lines } = captureLogs<LogLine>();
    const r = new HandlerErrorReporter({
      counter: handlerErrorsCounter(registry), resource: 'foos.example.com/v1', handler: 'foo', clock, logger,
    });
    for (let i = 0; i < 10_000; i++) r.report(new Error(`boom ${i}`), 'update');
    assert.equal(await counterValue(registry, { resource: 'foos.example.com/v1', handler: 'foo' }), 10_000);
    assert.equal(lines.length, 1, '10 000 failures in one interval: one line');
    assert.equal(lines[0]?.level, 'error');
    assert.equal(lines[0]?.err?.message, 'boom 0');
    assert.equal(lines[0]?.handler, 'foo');
    assert.equal(lines[0]?.notification, 'update');
    assert.equal(lines[0]?.suppressed, 0);

    clock.step(HANDLER_ERROR_LOG_INTERVAL_MS - 1);
    r.report(new Error('still within'), 'add');
    assert.equal(lines.length, 1);
    clock.step(1);
    r.report(new Error('next window'), 'delete');
    assert.equal(lines.length, 2);
    assert.equal(lines[1]?.err?.message, 'next window');
    assert.equal(lines[1]?.suppressed, 10_000, 'the failures not logged since the last line');
    assert.equal(await counterValue(registry, { handler: 'foo' }), 10_002);
  });
});

describe('SharedIndexInformer with a handler that throws', () => {
  it('the other handlers get every event, the thrower keeps getting later ones, failures are counted per handler', async () => {
    const resource = coreResources.configMaps;
    const server = new FakeApiServer({ resource });
    await server.listen();
    cleanups.push(() => server.close());
    for (let i = 0; i < 50; i++) server.create({ metadata: { name: `cm-${i}`, namespace: 'default' } });

    const registry = new Registry();
    const { logger, lines } = captureLogs<LogLine>();
    const informer = new SharedIndexInformer({
      resource, client: restClientFor(server.url), registry, logger, watchCounter: new WatchCounter(),
      reflector: { config: { backoffInitialMs: 20, backoffMaxMs: 100 } },
    });
    const thrown: string[] = [];
    const good: string[] = [];
    const rejecting: string[] = [];
    // Registered first, so a shared delivery loop would stop before the others.
    informer.addEventHandler({
      onAdd: (o) => {
        thrown.push(`add:${o.metadata?.name}`);
        throw new Error(`cannot map ${o.metadata?.name}`);
      },
      onUpdate: (_a, o) => {
        thrown.push(`update:${o.metadata?.name}`);
        throw new TypeError('not even an Error subclass we expect');
      },
    }, { name: 'thrower' });
    informer.addEventHandler({
      onAdd: (o) => void good.push(`add:${o.metadata?.name}`),
      onUpdate: (_a, o) => void good.push(`update:${o.metadata?.name}`),
    });
    informer.addEventHandler({
      onAdd: (o) => {
        rejecting.push(`add:${o.metadata?.name}`);
        return Promise.reject(new Error('async failure'));
      },
    });
    const ac = new AbortController();
    const done = informer.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });

    await eventually('all 50 initial adds delivered to the good handler', () => good.length === 50);
    server.update({ metadata: { name: 'cm-7', namespace: 'default' }, data: { v: '2' } });
    server.create({ metadata: { name: 'late', namespace: 'default' } });
    await eventually('the update and the late add reach the good handler', () => good.length === 52);
    await eventually('and the throwing handlers too', () => thrown.length === 52 && rejecting.length === 51);
    assert.ok(good.includes('update:cm-7') && good.includes('add:late'));
    assert.deepEqual(thrown.slice(-2), ['update:cm-7', 'add:late'], 'a failure does not stop later deliveries');

    const id = 'configmaps/v1';
    assert.equal(await counterValue(registry, { resource: id, handler: 'thrower' }), 52);
    assert.equal(await counterValue(registry, { resource: id, handler: 'handler-2' }), 0);
    assert.equal(await counterValue(registry, { resource: id, handler: 'handler-3' }), 51, 'rejections count, unnamed = handler-<n>');
    const errorLines = lines.filter((l) => l.level === 'error');
    assert.deepEqual(errorLines.map((l) => l.handler).sort(), ['handler-3', 'thrower'], 'one line per failing handler, not one per event');
    assert.match(errorLines.find((l) => l.handler === 'thrower')?.err?.message ?? '', /cannot map cm-/);
  });
});
