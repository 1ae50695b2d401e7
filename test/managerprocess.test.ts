/**
 * The test helpers' waits end when what they wait for can no longer happen: a manager that exited is never going to be
 * ready. (A soak replica that exited EADDRINUSE at start held bench/soak's start for its whole 180 s timeout, because
 * waitFor took the helper's "manager exited" for "not yet".)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StopTrying, waitFor } from './helpers/cluster.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';

test('waitFor: a throw is "not yet", a StopTrying ends the wait at once with that error', async () => {
  let calls = 0;
  assert.equal(await waitFor('the third call', () => {
    if (++calls < 3) throw new Error('not yet');
    return calls;
  }, { intervalMs: 1 }), 3);
  calls = 0;
  const stop = new StopTrying('cannot happen any more');
  await assert.rejects(waitFor('something', () => {
    calls++;
    throw stop;
  }, { timeoutMs: 600_000, intervalMs: 1 }), (err) => err === stop);
  assert.equal(calls, 1, 'called once');
});

test('ManagerProcess: waitReady and waitForLog of a manager that exited reject with its exit and stderr, not a timeout', async () => {
  const mgr = await ManagerProcess.start({ args: ['--no-such-flag'], metrics: false });
  await assert.rejects(mgr.waitReady({ timeoutMs: 600_000 }), (err: Error) => {
    assert.match(err.message, /^manager exited \(\{"code":2,"signal":null\}\): .*--no-such-flag/s);
    return true;
  });
  await assert.rejects(mgr.waitForLog('a line that never comes', () => false, { timeoutMs: 600_000 }), /^StopTrying: manager exited \(\{"code":2/);
});
