import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from './cli.ts';

function kubeconfigFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'tscm-cli-')), 'kubeconfig');
  writeFileSync(file, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'x',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
  }));
  return file;
}

/** Runs `fn` with process.stderr.write captured (restored afterwards, also when `fn` throws): its result and what it wrote. */
async function capturingStderr<T>(fn: () => Promise<T>): Promise<{ result: T; err: string[] }> {
  const err: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk: string | Uint8Array): boolean => {
    err.push(String(chunk));
    return true;
  };
  try {
    return { result: await fn(), err };
  } finally {
    process.stderr.write = write;
  }
}

test('signal handlers are installed before credentials load and before the wiring (controller setup) runs', async () => {
  // Issue 11 item 6: as PID 1, a SIGTERM during setup used to be ignored (handlers came after controller setup).
  const proc = Object.assign(new EventEmitter(), { exit: (code: number): void => assert.fail(`exit ${code}`) });
  let sawHandlers = -1;
  let aborted: boolean | undefined;
  const code = await main([`--kubeconfig=${kubeconfigFile()}`], {}, {
    proc,
    run: (_opts, _kube, signals) => {
      sawHandlers = proc.listenerCount('SIGTERM');
      proc.emit('SIGTERM', 'SIGTERM'); // arrives "during setup"
      aborted = signals.signal.aborted;
      return Promise.resolve(0);
    },
  });
  assert.equal(code, 0);
  assert.equal(sawHandlers, 1, 'a SIGTERM handler existed when the wiring started');
  assert.equal(aborted, true, 'the signal reached the shutdown signal the Manager starts with');
  assert.equal(proc.listenerCount('SIGTERM'), 0, 'disposed');
});

test('the in-cluster ServiceAccount root is a constructor seam, not an environment variable', async () => {
  const proc = Object.assign(new EventEmitter(), { exit: (): void => {} });
  const { result: code, err } = await capturingStderr(() => main([], { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: '1', TSCM_IN_CLUSTER_PATH_PREFIX: '/tmp/x', HOME: '/nonexistent' }, {
    proc, inClusterRoot: '/nonexistent-root', run: () => Promise.resolve(0),
  }));
  assert.equal(code, 2);
  assert.match(err.join(''), /\/nonexistent-root\/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token does not exist/);
  assert.doesNotMatch(err.join(''), /\/tmp\/x/, 'the old environment variable is ignored');
});

test('--watch-list: a malformed value exits 2 with one error line before anything runs; a valid one reaches the wiring', async () => {
  const proc = Object.assign(new EventEmitter(), { exit: (): void => {} });
  let ran = 0;
  const { result: code, err } = await capturingStderr(() => main([`--kubeconfig=${kubeconfigFile()}`, '--watch-list=yes'], {}, { proc, run: () => Promise.resolve(++ran) }));
  assert.equal(code, 2);
  assert.equal(ran, 0, 'the wiring never ran');
  const lines = err.join('').trimEnd().split('\n');
  assert.deepEqual(lines, ['error: invalid value "yes" for --watch-list: want true or false', 'Run with --help for the list of flags.']);

  let seen: boolean | undefined;
  assert.equal(await main([`--kubeconfig=${kubeconfigFile()}`, '--watch-list'], {}, {
    proc, run: (opts) => ((seen = opts.watchList), Promise.resolve(0)),
  }), 0);
  assert.equal(seen, true);
});

test('--pprof-bind-address: a malformed value exits 2 with one error line before anything runs; a valid one reaches the wiring', async () => {
  const proc = Object.assign(new EventEmitter(), { exit: (): void => {} });
  let ran = 0;
  const { result: code, err } = await capturingStderr(() => main([`--kubeconfig=${kubeconfigFile()}`, '--pprof-bind-address=6060'], {}, { proc, run: () => Promise.resolve(++ran) }));
  assert.equal(code, 2);
  assert.equal(ran, 0, 'the wiring never ran');
  const lines = err.join('').trimEnd().split('\n');
  assert.deepEqual(lines, [
    'error: invalid value for --pprof-bind-address: invalid address "6060" (want "host:port", ":port" or "0" to disable)',
    'Run with --help for the list of flags.',
  ]);

  let seen: string | undefined;
  assert.equal(await main([`--kubeconfig=${kubeconfigFile()}`, '--pprof-bind-address=127.0.0.1:6060'], {}, {
    proc, run: (opts) => ((seen = opts.pprofBindAddress), Promise.resolve(0)),
  }), 0);
  assert.equal(seen, '127.0.0.1:6060');
});

test('--webhook-bind-address / --webhook-cert-path: a malformed value exits 2 with one error line before anything runs; valid ones reach the wiring', async () => {
  const proc = Object.assign(new EventEmitter(), { exit: (): void => {} });
  let ran = 0;
  const { result: code, err } = await capturingStderr(() => main([`--kubeconfig=${kubeconfigFile()}`, '--webhook-bind-address=9443'], {}, { proc, run: () => Promise.resolve(++ran) }));
  assert.equal(code, 2);
  assert.equal(ran, 0, 'the wiring never ran');
  assert.deepEqual(err.join('').trimEnd().split('\n'), [
    'error: invalid value for --webhook-bind-address: invalid address "9443" (want "host:port", ":port" or "0" to disable)',
    'Run with --help for the list of flags.',
  ]);

  let seen: [string, string | undefined] | undefined;
  assert.equal(await main([`--kubeconfig=${kubeconfigFile()}`, '--webhook-bind-address=:9444', '--webhook-cert-path=/certs'], {}, {
    proc, run: (opts) => ((seen = [opts.webhookBindAddress, opts.webhookCertPath]), Promise.resolve(0)),
  }), 0);
  assert.deepEqual(seen, [':9444', '/certs']);
});

test('webhook server limits: a malformed value exits 2 with one error line before anything runs', async () => {
  const proc = Object.assign(new EventEmitter(), { exit: (): void => {} });
  let ran = 0;
  const { result: code, err } = await capturingStderr(() => main([`--kubeconfig=${kubeconfigFile()}`, '--webhook-max-request-body-bytes=7MB'], {}, { proc, run: () => Promise.resolve(++ran) }));
  assert.equal(code, 2);
  assert.equal(ran, 0, 'the wiring never ran');
  assert.deepEqual(err.join('').trimEnd().split('\n'), [
    'error: invalid value "7MB" for --webhook-max-request-body-bytes: want a number of bytes, optionally with Ki, Mi or Gi (e.g. 7Mi)',
    'Run with --help for the list of flags.',
  ]);
});

test('--pprof-bind-address reaches the real manager process: heapstats answers, SIGTERM still exits 0', async () => {
  const { spawn } = await import('node:child_process');
  const { freePort } = await import('../../pkg/testing/process.ts');
  const port = await freePort();
  // The API server is unreachable: the Foo cache never syncs, but the profiling endpoint runs on every replica.
  const child = spawn(process.execPath, [join(import.meta.dirname, 'main.ts'), `--kubeconfig=${kubeconfigFile()}`, '--controllers=foo',
    '--health-probe-bind-address=0', `--pprof-bind-address=127.0.0.1:${port}`, '--log-level=error'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const deadline = Date.now() + 20_000;
    let stats: { memory?: { rss?: number } } | undefined;
    while (!stats) {
      assert.ok(Date.now() < deadline, 'pprof endpoint answered within 20 s');
      assert.equal(child.exitCode, null, 'manager still running');
      stats = await fetch(`http://127.0.0.1:${port}/debug/pprof/heapstats`).then((r) => (r.ok ? r.json() as Promise<{ memory?: { rss?: number } }> : undefined), () => undefined);
      if (!stats) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok((stats.memory?.rss ?? 0) > 10 * 1024 * 1024);
  } finally {
    child.kill('SIGTERM');
  }
  assert.equal(await exited, 0);
});
