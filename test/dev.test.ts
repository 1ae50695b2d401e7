/**
 * `ts-controller-manager dev` as a user runs it: the command prints `export KUBECONFIG=…` once the control plane is
 * up with the project's CRDs; kubectl with that kubeconfig lists the CRDs and their (empty) collections; Ctrl-C
 * (SIGINT) — and SIGTERM — stop it with exit 0 and leave no process and no directory behind. A bad flag exits 2.
 * In a scaffolded project with webhooks, `dev` installs config/webhook pointed at the local process and writes the
 * serving certificate where main.ts reads it, so `npm start` (main.ts) against it serves them: an invalid object is
 * refused by the webhook, a valid one becomes Ready.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { scaffoldMain } from '../pkg/scaffold/cli.ts';
import { findBinaries } from '../pkg/testing/index.ts';
import { freePort } from '../pkg/testing/process.ts';
import { defaultWebhookCertDir } from '../pkg/webhook/server.ts';
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
  const child = spawn(node, [main, 'dev', '--crd', 'config/crd/bases', '--no-webhooks'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
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

  test('in a project with webhooks: config/webhook points at the local process and npm start serves it — an invalid object is refused, a valid one becomes Ready', async (t) => {
    // A project as a newcomer has it after init, create api, create webhook (the library linked to this checkout).
    const tmp = mkdtempSync(join(tmpdir(), 'tscm-dev-webhooks-'));
    t.after(() => rmSync(tmp, { recursive: true, force: true }));
    const project = join(tmp, 'guestbook-operator');
    const quiet = { cwd: tmp, stdout: () => {}, stderr: (s: string) => process.stderr.write(s) };
    const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
    assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--library', version, '--dir', project], quiet), 0);
    const gvk = ['--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'];
    assert.equal(scaffoldMain(['create', 'api', ...gvk], { ...quiet, cwd: project }), 0);
    assert.equal(scaffoldMain(['create', 'webhook', ...gvk, '--defaulting', '--programmatic-validation'], { ...quiet, cwd: project }), 0);
    mkdirSync(join(project, 'node_modules'));
    symlinkSync(repoRoot, join(project, 'node_modules', 'ts-controller-manager'));

    // dev with its defaults but the port and certificate directory (this machine runs other tests at the same time).
    const port = await freePort();
    const certDir = join(tmp, 'serving-certs');
    const dev = spawn(node, [main, 'dev', `--webhook-port=${port}`, `--webhook-cert-dir=${certDir}`], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    dev.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const devExited = new Promise<number | null>((res) => dev.once('exit', (code) => res(code)));
    t.after(() => dev.kill('SIGKILL'));
    const kubeconfig = await exportLine(dev, devExited, () => stderr);
    assert.match(stderr, new RegExp(`^Webhooks \\(config/webhook\\): the API server calls https://127\\.0\\.0\\.1:${port} with the certificate in ${certDir.replaceAll('/', '\\/')}`, 'm'));
    for (const f of ['tls.crt', 'tls.key']) assert.ok(existsSync(join(certDir, f)), f);

    // npm start: main.ts on the printed kubeconfig, with the port and certificate directory dev used.
    const manager = spawn(node, ['--conditions=ts-controller-manager-source', 'main.ts', '--health-probe-bind-address=0',
      `--webhook-bind-address=127.0.0.1:${port}`, `--webhook-cert-path=${certDir}`], { cwd: project, env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    manager.stdout.setEncoding('utf8').on('data', (c: string) => (logs += c));
    manager.stderr.setEncoding('utf8').on('data', (c: string) => (logs += c));
    const managerExited = new Promise<number | null>((res) => manager.once('exit', (code) => res(code)));
    t.after(() => manager.kill('SIGKILL'));

    const kubectl = findBinaries().kubectl;
    assert.ok(kubectl, 'kubectl is in the control plane cache');
    const env = { ...process.env, KUBECONFIG: kubeconfig };
    const apply = (name: string, foo: string, ...extra: string[]) => new Promise<{ code: number; out: string }>((res) => {
      const child = spawn(kubectl, ['apply', '-n', 'default', ...extra, '-f', '-'], { env });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.on('exit', (code) => res({ code: code ?? -1, out }));
      child.stdin.end(JSON.stringify({ apiVersion: 'webapp.example.com/v1', kind: 'Guestbook', metadata: { name }, spec: { foo } }));
    });
    // Refused by the validating webhook of config/webhook once main.ts serves it (dry-run probes until then).
    await waitFor('the webhook served by main.ts', async () => {
      const probe = await apply('probe', 'Not_Valid', '--dry-run=server');
      return probe.code !== 0 && /denied the request: spec\.foo "Not_Valid"/.test(probe.out);
    }, { timeoutMs: 60_000 }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; main.ts output:\n${logs.slice(-3000)}`);
    });
    const bad = await apply('bad', 'Not_Valid');
    assert.notEqual(bad.code, 0);
    assert.match(bad.out, /admission webhook "vguestbook-v1\.webapp\.example\.com" denied the request: spec\.foo "Not_Valid" must consist of lower-case letters/);
    // A valid one is admitted and reconciled by the controller.
    assert.equal((await apply('good', 'good')).code, 0);
    await waitFor('guestbook good Ready', async () => {
      const { stdout } = await run(kubectl, ['get', 'guestbooks.webapp.example.com', 'good', '-n', 'default', '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'], { env });
      return stdout === 'True';
    }, { timeoutMs: 60_000 });

    manager.kill('SIGINT');
    assert.equal(await managerExited, 0, logs.slice(-3000));
    dev.kill('SIGINT');
    assert.equal(await devExited, 0, stderr);
    assert.deepEqual(readdirSync(certDir), [], 'dev removed the certificate it wrote');
  });

  test("dev's webhook defaults are main.ts's: port 9443 and the certificate directory kubebuilder's main.go reads", () => {
    const help = spawnSync(node, [main, 'dev', '--help'], { cwd: repoRoot, encoding: 'utf8' });
    assert.match(help.stdout, /--webhook-port=PORT +.*Default 9443\./);
    assert.match(help.stdout, new RegExp(`--webhook-cert-dir=DIR +.*Default ${defaultWebhookCertDir.replaceAll('/', '\\/')}\\.`));
  });

  test('--kubernetes-version runs that release and says so; one not installed exits 1 naming it, a malformed one exits 2', async () => {
    // The release this run tests (make test KUBERNETES_VERSION=…), else the default hack/tools/k8s/go.mod pins.
    const pinned = /^\s+k8s\.io\/kubernetes v(\d+\.\d+)\./m.exec(readFileSync(join(repoRoot, 'hack/tools/k8s/go.mod'), 'utf8'))?.[1];
    const minor = (process.env['KUBERNETES_VERSION'] || pinned)?.replace(/^v/, '').split('.').slice(0, 2).join('.');
    assert.ok(minor, 'hack/tools/k8s/go.mod pins a release');
    const dev = spawn(node, [main, 'dev', '--no-webhooks', `--kubernetes-version=v${minor}`], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    dev.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const devExited = new Promise<number | null>((res) => dev.once('exit', (code) => res(code)));
    try {
      await exportLine(dev, devExited, () => stderr);
      assert.match(stderr, new RegExp(`^Kubernetes v${minor.replace('.', '\\.')}\\.\\d+ \\(\\S+/kube-apiserver\\)$`, 'm'));
      dev.kill('SIGINT');
      assert.equal(await devExited, 0, stderr);
    } finally {
      if (dev.exitCode === null && dev.signalCode === null) dev.kill('SIGKILL');
    }
    const missing = spawnSync(node, [main, 'dev', '--no-webhooks', '--kubernetes-version=1.99'], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(missing.status, 1, missing.stderr);
    assert.match(missing.stderr, /^error: no kube-apiserver 1\.99 binary/m);
    assert.doesNotMatch(missing.stdout, /export KUBECONFIG/);
    const bad = spawnSync(node, [main, 'dev', '--kubernetes-version=latest'], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^error: flag --kubernetes-version takes a Kubernetes release \(1\.34, v1\.34 or v1\.34\.4\), not "latest"$/m);
  });

  test('a CRD path that does not exist exits 1 naming it, before anything starts', () => {
    const r = spawnSync(node, [main, 'dev', '--crd', 'no/such/dir'], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no\/such\/dir/);
    assert.doesNotMatch(r.stdout, /export KUBECONFIG/);
  });
});

/** Resolves with the kubeconfig path of dev's `export KUBECONFIG=` line; rejects if dev exits first or after 90 s. */
function exportLine(child: ReturnType<typeof spawn>, exited: Promise<number | null>, stderr: () => string): Promise<string> {
  return new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no export line within 90 s; stderr:\n${stderr()}`)), 90_000);
    if (!child.stdout) throw new Error('dev was spawned without a stdout pipe');
    createInterface({ input: child.stdout }).on('line', (l) => {
      const m = /^export KUBECONFIG=(.+)$/.exec(l);
      if (m?.[1]) {
        clearTimeout(timer);
        res(m[1]);
      }
    });
    void exited.then((code) => rej(new Error(`dev exited ${code} before printing the export line; stderr:\n${stderr()}`)));
  });
}
