import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../util/clock.ts';
import { HealthChecks, newHealthProbeServer } from './healthz.ts';

async function serve(checks: HealthChecks): Promise<{ base: string; stop: () => Promise<void> }> {
  const server = newHealthProbeServer('127.0.0.1:0', checks);
  assert.ok(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  const addr = await server.listening;
  return {
    base: `http://127.0.0.1:${addr.port}`,
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}

async function get(url: string): Promise<{ status: number; body: string; type: string | null }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
}

test('no checks: every endpoint answers ok', async () => {
  const s = await serve(new HealthChecks());
  try {
    for (const p of ['/healthz', '/livez', '/readyz']) {
      const r = await get(s.base + p);
      assert.equal(r.status, 200, p);
      assert.equal(r.body, 'ok');
      assert.equal(r.type, 'text/plain; charset=utf-8');
    }
    assert.equal((await get(`${s.base}/readyz?verbose`)).body, 'readyz check passed\n');
  } finally {
    await s.stop();
  }
});

test('readyz lists failures; verbose shows reasons; single checks; exclude', async () => {
  const checks = new HealthChecks();
  let synced = false;
  checks.addReadyzCheck('ping', () => {});
  checks.addReadyzCheck('informer-sync', () => {
    if (!synced) throw new Error('2 informers not synced');
  });
  checks.addHealthzCheck('leader-election', () => Promise.resolve());
  const s = await serve(checks);
  try {
    let r = await get(`${s.base}/readyz`);
    assert.equal(r.status, 503);
    assert.equal(r.body, '[-]informer-sync failed: reason withheld\n[+]ping ok\nreadyz check failed\n');
    r = await get(`${s.base}/readyz?verbose`);
    assert.equal(r.status, 503);
    assert.equal(r.body, '[-]informer-sync failed: 2 informers not synced\n[+]ping ok\nreadyz check failed\n');
    r = await get(`${s.base}/readyz/informer-sync`);
    assert.deepEqual([r.status, r.body], [503, 'internal server error: 2 informers not synced\n']);
    r = await get(`${s.base}/readyz/ping`);
    assert.deepEqual([r.status, r.body], [200, 'ok']);
    r = await get(`${s.base}/readyz/nope`);
    assert.equal(r.status, 404);
    r = await get(`${s.base}/readyz?exclude=informer-sync&verbose`);
    assert.equal(r.status, 200);
    assert.equal(r.body, '[+]informer-sync excluded: ok\n[+]ping ok\nreadyz check passed\n');
    // Liveness is independent of readiness.
    assert.deepEqual(await get(`${s.base}/healthz`), { status: 200, body: 'ok', type: 'text/plain; charset=utf-8' });
    assert.equal((await get(`${s.base}/livez?verbose`)).body, '[+]leader-election ok\nhealthz check passed\n');
    synced = true;
    r = await get(`${s.base}/readyz?verbose`);
    assert.deepEqual([r.status, r.body], [200, '[+]informer-sync ok\n[+]ping ok\nreadyz check passed\n']);
    assert.equal((await get(`${s.base}/readyz`)).body, 'ok');
  } finally {
    await s.stop();
  }
});

test('a rejected async check fails with its reason', async () => {
  const checks = new HealthChecks();
  checks.addHealthzCheck('broken', () => Promise.reject(new Error('wedged')));
  const results = await checks.run('healthz');
  assert.deepEqual(results, [{ name: 'broken', ok: false, reason: 'wedged' }]);
});

test('a check that hangs fails after the timeout and sees its signal abort', async () => {
  const clock = new FakeClock();
  const checks = new HealthChecks({ clock, timeoutMs: 1_000 });
  let seen: AbortSignal | undefined;
  checks.addReadyzCheck('slow', (signal) => {
    seen = signal;
    return new Promise(() => {});
  });
  checks.addReadyzCheck('fast', () => {});
  const pending = checks.run('readyz');
  await new Promise((resolve) => setImmediate(resolve));
  clock.step(999);
  let settled = false;
  void pending.then(() => (settled = true));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false);
  clock.step(1);
  const results = await pending;
  assert.deepEqual(results, [
    { name: 'fast', ok: true },
    { name: 'slow', ok: false, reason: 'check slow timed out after 1000ms' },
  ]);
  assert.equal(seen?.aborted, true);
});

test('names are validated and unique per endpoint', () => {
  const checks = new HealthChecks();
  checks.addReadyzCheck('a', () => {});
  checks.addHealthzCheck('a', () => {});
  assert.throws(() => checks.addReadyzCheck('a', () => {}), /already registered/);
  assert.throws(() => checks.addReadyzCheck('bad name', () => {}), /invalid readyz check name/);
  assert.throws(() => checks.addHealthzCheck('', () => {}), /invalid healthz check name/);
});

test('"0" disables the probe server; a busy port makes start reject', async () => {
  assert.equal(newHealthProbeServer('0', new HealthChecks()), undefined);
  const s = await serve(new HealthChecks());
  try {
    const port = new URL(s.base).port;
    const clash = newHealthProbeServer(`127.0.0.1:${port}`, new HealthChecks());
    await assert.rejects(clash!.start(new AbortController().signal), /EADDRINUSE/);
  } finally {
    await s.stop();
  }
});
