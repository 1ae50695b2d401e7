/**
 * `ts-controller-manager dev` as a user runs it: the command prints `export KUBECONFIG=…` once the control plane is
 * up with the project's CRDs; kubectl with that kubeconfig lists the CRDs and their (empty) collections; Ctrl-C
 * (SIGINT) — and SIGTERM — stop it with exit 0 and leave no process and no directory behind. A bad flag exits 2.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { findBinaries } from '../pkg/testing/index.ts';
import { waitFor } from './helpers/cluster.ts';
import { repoRoot } from './helpers/crds.ts';

const run = promisify(execFile);
const node = join(repoRoot, 'node_modules', '.bin', 'node');
const main = join(repoRoot, 'cmd', 'manager', 'main.ts');

/** Pids of live processes whose command line names `dir` (the components and the environment's reaper). */
function processesNaming(dir: string): number[] {
  return readdirSync('/proc').map(Number).filter((pid) => {
    if (!Number.isInteger(pid) || pid === process.pid) return false;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') return false;
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
    } catch {
      return false;
    }
  });
}

/**
 * Runs `dev` as a user would, checks the printed kubeconfig with kubectl while it runs, then sends `signal`. Resolves
 * with what it printed, the environment directory and how it exited.
 */
async function devSession(signal: NodeJS.Signals): Promise<{ stderr: string; dir: string; code: number | null; exitSignal: string | null }> {
  const child = spawn(node, [main, 'dev', '--crd', 'config/crd/bases'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<[number | null, string | null]>((res) => child.once('exit', (code, sig) => res([code, sig])));
  try {
    const kubeconfig = await new Promise<string>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`no export line within 90 s; stderr:\n${stderr}`)), 90_000);
      createInterface({ input: child.stdout }).on('line', (l) => {
        const m = /^export KUBECONFIG=(.+)$/.exec(l);
        if (m?.[1]) {
          clearTimeout(timer);
          res(m[1]);
        }
      });
      void exited.then(([code]) => rej(new Error(`dev exited ${code} before printing the export line; stderr:\n${stderr}`)));
    });
    const dir = dirname(kubeconfig);

    // What a user does in another shell: kubectl with the printed kubeconfig.
    const kubectl = findBinaries().kubectl;
    assert.ok(kubectl, 'kubectl is in the control plane cache');
    const env = { ...process.env, KUBECONFIG: kubeconfig };
    const crds = await run(kubectl, ['get', 'crd', '-o', 'name'], { env });
    assert.deepEqual(crds.stdout.trim().split('\n').sort(), [
      'customresourcedefinition.apiextensions.k8s.io/foos.samplecontroller.k8s.io',
      'customresourcedefinition.apiextensions.k8s.io/networks.samplecrd.k8s.io',
    ]);
    const foos = await run(kubectl, ['get', 'foos.samplecontroller.k8s.io', '-A', '-o', 'json'], { env });
    assert.deepEqual((JSON.parse(foos.stdout) as { items: unknown[] }).items, []);
    const running = processesNaming(dir);
    assert.ok(running.length >= 3, `etcd, kube-apiserver and the reaper run (found ${running.length})`);

    child.kill(signal);
    const [code, exitSignal] = await exited;
    return { stderr, dir, code, exitSignal };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

describe('ts-controller-manager dev', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`prints export KUBECONFIG=…, serves the project's CRDs, and ${signal} stops everything with exit 0`, async (t) => {
      const s = await devSession(signal);
      t.diagnostic(s.stderr.split('\n').find((l) => l.startsWith('test environment ready')) ?? '');
      assert.equal(s.exitSignal, null, `exited by itself, not killed by ${signal}`);
      assert.equal(s.code, 0, s.stderr);
      assert.match(s.stderr, new RegExp(`^${signal}: stopping the control plane$`, 'm'));
      assert.match(s.stderr, /^control plane stopped$/m);
      // stop() waited for the components; the reaper got SIGTERM and exits within its 200 ms tick.
      await waitFor('no process naming the environment directory', () => processesNaming(s.dir).length === 0, { timeoutMs: 5_000 });
      assert.equal(existsSync(s.dir), false, 'the environment directory is removed');
    });
  }

  test('a bad flag exits 2 with the usage; --help exits 0', () => {
    const bad = spawnSync(node, [main, 'dev', '--crds=x'], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^error: unknown flag "--crds=x"\nUsage: ts-controller-manager dev /);
    const help = spawnSync(node, [main, 'dev', '--help'], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /^Usage: ts-controller-manager dev \[--crd PATH \.\.\.\]/);
  });

  test('a CRD path that does not exist exits 1 naming it, before anything starts', () => {
    const r = spawnSync(node, [main, 'dev', '--crd', 'no/such/dir'], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no\/such\/dir/);
    assert.doesNotMatch(r.stdout, /export KUBECONFIG/);
  });
});
