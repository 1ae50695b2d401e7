/**
 * ts-controller-manager/testing on the real binaries: startTestEnv starts a private etcd + kube-apiserver, installs
 * CRDs, hands out a kubeconfig and a client that work (from this process, and from kubectl in another), and leaves
 * no process or directory behind — after stop(), after a failed start, and after its owner was SIGKILLed (the reaper).
 * Start times are printed as diagnostics, never asserted.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { RestClient } from '../pkg/client/rest.ts';
import { findBinaries, startTestEnv } from '../pkg/testing/index.ts';
import { isAlive } from '../pkg/testing/process.ts';
import { waitFor } from './helpers/cluster.ts';
import { repoRoot } from './helpers/crds.ts';

const run = promisify(execFile);
const node = join(repoRoot, 'node_modules', '.bin', 'node');

/** Pids of live processes whose command line names a path under `dir`/ (what an environment's components do). */
function processesUnder(dir: string): number[] {
  return readdirSync('/proc').map(Number).filter((pid) => {
    if (!Number.isInteger(pid) || pid === process.pid) return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${dir}/`) && isAlive(pid);
    } catch {
      return false;
    }
  });
}

describe('startTestEnv', () => {
  test('binaries from KUBEBUILDER_ASSETS; CRDs from a directory Established and listable at once; client and kubeconfig work; stop() leaves nothing', async (t) => {
    // envtest's layout: one directory with etcd, kube-apiserver, kubectl (here: links to this machine's builds).
    const cached = findBinaries(undefined, { ...process.env, KUBEBUILDER_ASSETS: '' });
    const assets = mkdtempSync(join(tmpdir(), 'tscm-assets-'));
    t.after(() => rmSync(assets, { recursive: true, force: true }));
    symlinkSync(cached.etcd, join(assets, 'etcd'));
    symlinkSync(cached.kubeApiserver, join(assets, 'kube-apiserver'));
    if (cached.kubectl) symlinkSync(cached.kubectl, join(assets, 'kubectl'));
    const saved = process.env['KUBEBUILDER_ASSETS'];
    process.env['KUBEBUILDER_ASSETS'] = assets;
    const env = await startTestEnv({ crdPaths: [join(repoRoot, 'config', 'crd', 'bases')] }).finally(() => {
      if (saved === undefined) delete process.env['KUBEBUILDER_ASSETS'];
      else process.env['KUBEBUILDER_ASSETS'] = saved;
    });
    t.after(() => env.stop());
    t.diagnostic(`startTestEnv took ${(env.startMs / 1000).toFixed(1)} s (etcd + kube-apiserver + 2 CRDs Established; goal ≤ 5 s with cached binaries)`);
    assert.equal(env.binaries.source, 'KUBEBUILDER_ASSETS');
    assert.equal(env.binaries.kubeApiserver, join(assets, 'kube-apiserver'));
    assert.deepEqual(env.crds, ['foos.samplecontroller.k8s.io', 'networks.samplecrd.k8s.io']);

    // Issue 33.3: right after Established, the first LIST of a custom resource is often answered
    // `429 TooManyRequests: storage is (re)initializing` with `Retry-After: 1` (its watch cache is still starting);
    // the client would retry it as client-go does, but startTestEnv resolves only once every served version answered
    // a LIST with 200: a fresh client's first LISTs need no retry.
    const registry = new Registry();
    const fresh = new RestClient({ kubeConfig: env.kubeConfig, registry });
    t.after(() => fresh.close());
    const listStarted = performance.now();
    await Promise.all([
      fresh.json('GET', '/apis/samplecontroller.k8s.io/v1alpha1/foos'),
      fresh.json('GET', '/apis/samplecrd.k8s.io/v1/networks'),
    ]);
    const retried = (await registry.getSingleMetric('rest_client_request_retries_total')?.get())?.values.reduce((n, v) => n + v.value, 0) ?? 0;
    t.diagnostic(`first LISTs of the two CRDs: ${(performance.now() - listStarted).toFixed(0)} ms, ${retried} retried after a 429`);
    assert.equal(retried, 0, 'the first LIST of each CRD is answered at once (startTestEnv waited until it was)');

    // The CRDs are served: a Foo can be created at once (no wait), through the handed-out client.
    const foo = await env.client.json<{ metadata: { uid: string } }>('POST', '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos', {
      body: { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f1' }, spec: { deploymentName: 'd1', replicas: 1 } },
    });
    assert.ok(foo.metadata.uid);
    // The kubeconfig file works for another process (kubectl of the same release), as KUBECONFIG for a controller.
    assert.ok(cached.kubectl, 'kubectl is built with the control plane');
    const { stdout } = await run(cached.kubectl, ['--kubeconfig', env.kubeconfigPath, 'get', 'foos', '-n', 'default', '-o', 'name']);
    assert.equal(stdout.trim(), 'foo.samplecontroller.k8s.io/f1');
    assert.equal(env.kubeConfig.getCurrentCluster()?.server, env.server);

    const pids = env.running();
    assert.equal(pids.length, 2, 'etcd and kube-apiserver run');
    assert.deepEqual(processesUnder(env.dir).filter((p) => !pids.includes(p)).length, 0, 'nothing else runs from the environment');
    await env.stop();
    assert.deepEqual(pids.filter(isAlive), [], 'etcd and kube-apiserver are gone after stop()');
    assert.equal(existsSync(env.dir), false, 'the directory is removed');
    await env.stop(); // idempotent
  });

  test('a mistyped CRD path fails at once, naming the path, before anything is started', async (t) => {
    const tmp = mkdtempSync(join(tmpdir(), 'tscm-badcrd-'));
    t.after(() => rmSync(tmp, { recursive: true, force: true }));
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = tmp;
    const started = performance.now();
    const err = await startTestEnv({ crdPaths: ['config/crd/base'] }).then(() => undefined, (e: unknown) => e as Error).finally(() => {
      if (saved === undefined) delete process.env['TMPDIR'];
      else process.env['TMPDIR'] = saved;
    });
    const ms = performance.now() - started;
    assert.ok(err, 'startTestEnv rejects');
    assert.match(err.message, /^CRD path config\/crd\/base \(relative to the working directory: .*\/config\/crd\/base\) does not exist$/);
    assert.ok(ms < 1000, `failed at once (${ms.toFixed(0)} ms), not after starting etcd and kube-apiserver`);
    assert.deepEqual(readdirSync(tmp), [], 'no environment directory was made (nothing was started)');
  });

  test('a component that fails to start: the error carries its log, and nothing is left running or on disk', async (t) => {
    // A private TMPDIR (os.tmpdir() reads it at each call) so that only this environment's directory can appear there.
    const tmp = mkdtempSync(join(tmpdir(), 'tscm-failstart-'));
    t.after(() => rmSync(tmp, { recursive: true, force: true }));
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = tmp;
    const err = await startTestEnv({ apiServerFlags: ['--no-such-flag=1'] }).then(() => undefined, (e: unknown) => e as Error)
      .finally(() => {
        if (saved === undefined) delete process.env['TMPDIR'];
        else process.env['TMPDIR'] = saved;
      });
    assert.ok(err, 'startTestEnv rejects');
    assert.match(err.message, /kube-apiserver exited during startup; last lines of its log:\n[^]*unknown flag: --no-such-flag/);
    // etcd is stopped before startTestEnv rejects; the reaper (SIGTERMed by then) exits a moment later.
    await waitFor('etcd and the reaper gone', () => processesUnder(tmp).length === 0, { timeoutMs: 10_000 });
    assert.deepEqual(readdirSync(tmp), [], 'the environment directory was removed');
  });

  test('an aborted start rejects with the signal\'s reason and stops what it had started', async (t) => {
    const tmp = mkdtempSync(join(tmpdir(), 'tscm-abortstart-'));
    t.after(() => rmSync(tmp, { recursive: true, force: true }));
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = tmp;
    const ac = new AbortController();
    // Abort once etcd is up, while kube-apiserver is still to come.
    const err = await startTestEnv({ signal: ac.signal, log: (m) => { if (m.startsWith('etcd is up')) ac.abort(new Error('suite cancelled')); } })
      .then(() => undefined, (e: unknown) => e as Error)
      .finally(() => {
        if (saved === undefined) delete process.env['TMPDIR'];
        else process.env['TMPDIR'] = saved;
      });
    assert.equal(err?.message, 'suite cancelled');
    await waitFor('etcd and the reaper gone', () => processesUnder(tmp).length === 0, { timeoutMs: 10_000 });
    assert.deepEqual(readdirSync(tmp), [], 'the environment directory was removed');
  });

  for (const how of ['SIGKILLed', 'exits without calling stop()'] as const) {
    test(`the owner ${how}: the reaper kills etcd and kube-apiserver and removes the directory`, async (t) => {
      // The child reports its environment, then either idles until SIGKILLed or just ends (nothing keeps it alive).
      const script = `
        import { startTestEnv } from ${JSON.stringify(join(repoRoot, 'pkg', 'testing', 'index.ts'))};
        const env = await startTestEnv();
        process.stdout.write(JSON.stringify({ dir: env.dir, pids: env.running() }) + '\\n');
        ${how === 'SIGKILLed' ? 'setInterval(() => {}, 60_000);' : 'await new Promise((r) => process.stdin.once("end", r).resume());'}`;
      const child = spawn(node, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
      t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
      const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      const { dir, pids } = await waitFor('the child to report its environment', () => out.includes('\n') && JSON.parse(out) as { dir: string; pids: number[] }, { timeoutMs: 120_000 });
      assert.equal(pids.length, 2);
      assert.deepEqual(pids.filter(isAlive), pids, 'etcd and kube-apiserver run');
      if (how === 'SIGKILLed') child.kill('SIGKILL');
      else child.stdin.end();
      assert.equal(await exited, how === 'SIGKILLed' ? null : 0);
      const t0 = Date.now();
      await waitFor('no process of the environment left', () => pids.every((p) => !isAlive(p)) && processesUnder(dir).length === 0, { timeoutMs: 30_000 });
      await waitFor('the environment directory removed', () => !existsSync(dir), { timeoutMs: 30_000 });
      t.diagnostic(`reaped ${((Date.now() - t0) / 1000).toFixed(1)} s after the owner ended`);
    });
  }
});
