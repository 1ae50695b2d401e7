/** What a failed reconcile logs (controller.ts logReconcileError): terminal errors at warn without a stack, bugs with one. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { captureLogs } from '../log/capture.ts';
import { FakeClock } from '../util/clock.ts';
import { Controller, type Reconciler } from './controller.ts';
import { TerminalError } from './errors.ts';

async function failedReconcileLogs(reconciler: Reconciler): Promise<{ level: string; msg: string; [k: string]: unknown }[]> {
  const { logger, lines } = captureLogs('debug');
  const ctl = new Controller({ name: 'foo', clock: new FakeClock(), registry: new Registry(), logger, reconciler });
  const run = new AbortController();
  const started = ctl.start(run.signal);
  ctl.enqueue('default/empty-dep');
  const deadline = Date.now() + 5000;
  while (!lines.some((l) => /Reconciler error|panic/.test(l.msg)) && Date.now() < deadline) await new Promise((r) => setImmediate(r));
  await ctl.stop(0);
  run.abort();
  await started;
  return lines.filter((l) => l.level === 'warn' || l.level === 'error');
}

test('a TerminalError (user input) logs once at warn with its message and no stack', async () => {
  const lines = await failedReconcileLogs(() => Promise.reject(new TerminalError('default/empty-dep: deployment name must be specified')));
  assert.equal(lines.length, 1, JSON.stringify(lines));
  const [l] = lines;
  assert.equal(l?.level, 'warn');
  assert.equal(l?.error, 'default/empty-dep: deployment name must be specified');
  assert.equal(l?.terminal, true);
  assert.equal(l?.name, 'empty-dep');
  assert.doesNotMatch(JSON.stringify(l), /\bat .*\.ts:\d+|stack/, 'no stack trace');
});

test('a TerminalError wrapping another error is still terminal: warn, no stack', async () => {
  const lines = await failedReconcileLogs(() => Promise.reject(new Error('outer', { cause: new TerminalError('inner') })));
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.equal(lines[0]?.level, 'warn');
  assert.doesNotMatch(JSON.stringify(lines[0]), /stack/);
});

test('a panic (programming fault) logs at error with the stack', async () => {
  const lines = await failedReconcileLogs(() => {
    const o = JSON.parse('{}') as { x: { y: number } }; // o.x is undefined: reading y throws a TypeError (a bug)
    return o.x.y > 0 ? Promise.resolve() : Promise.resolve();
  });
  const l = lines.find((x) => x.msg === 'Observed a panic in reconciler');
  assert.ok(l, JSON.stringify(lines));
  assert.equal(l.level, 'error');
  assert.match(String((l['err'] as { stack?: string }).stack), /TypeError[\s\S]*at /);
});

test('an ordinary (retryable) error logs at error with the stack', async () => {
  const lines = await failedReconcileLogs(() => Promise.reject(new Error('neutron unavailable')));
  const l = lines.find((x) => x.msg === 'Reconciler error');
  assert.ok(l, JSON.stringify(lines));
  assert.equal(l.level, 'error');
  assert.match(String((l['err'] as { stack?: string }).stack), /Error: neutron unavailable\n\s+at /);
});
