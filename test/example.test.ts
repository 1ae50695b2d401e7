/**
 * The library as a user gets it: `npm pack` in a fresh copy of this repository's files (what `git clone` gives: the
 * tracked files plus new ones not ignored — no dist/, no node_modules, which is linked from this checkout as `npm ci`
 * would install it), so the package's `prepack` must build what it ships; the tarball installed into a fresh project
 * next to the example controller (examples/configmap-copier/main.ts and its own test main.test.ts, importing
 * `ts-controller-manager` and `ts-controller-manager/testing` by package name), type-checked there against the packed
 * .d.ts files, run as its own process against the real control plane, and its test run there with `node --test`
 * (a private control plane from `ts-controller-manager/testing`, the controller as the ServiceAccount of its rbac/,
 * which the packed `gen rbac --check` finds up to date with its declarations, as for memcached). The second example, examples/memcached (its own CRD
 * and types generated from it), goes into the same project: type-checked with the first, its generated types checked
 * up to date by the packed `ts-controller-manager gen types --check`, and its own test run there. The third,
 * examples/webhook (admission webhooks of its own CRD), likewise: type-checked, types checked, and its own test —
 * the webhooks installed by the packed startTestEnv's `webhooks` option and called by the real API server — run there.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test, type TestContext } from 'node:test';
import { cluster, expectStatus, suffix, testNamespace, waitFor } from './helpers/cluster.ts';
import { repoRoot } from './helpers/crds.ts';

const run = promisify(execFile);
const mergePatch = { headers: { 'content-type': 'application/merge-patch+json' } };
const node = join(repoRoot, 'node_modules', '.bin', 'node');
const tsc = join(repoRoot, 'node_modules', '.bin', 'tsc');

interface ConfigMap { metadata: { name: string; namespace: string; uid: string; finalizers?: string[]; annotations?: Record<string, string> }; data?: Record<string, string> }

describe('the packed library and the example controller', () => {
  let app = '';
  const tmp = mkdtempSync(join(tmpdir(), 'tscm-pack-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));

  before(async () => {
    // A fresh clone's files (working-tree versions), nothing built.
    const clone = join(tmp, 'clone');
    const listed = (await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repoRoot, maxBuffer: 16 << 20 })).stdout;
    for (const file of listed.split('\0').filter((f) => f !== '' && existsSync(join(repoRoot, f)))) {
      mkdirSync(dirname(join(clone, file)), { recursive: true });
      copyFileSync(join(repoRoot, file), join(clone, file));
    }
    // Nothing built: dist/ holds at most the committed Helm chart (dist/chart), never compiled output.
    assert.deepEqual(existsSync(join(clone, 'dist')) ? readdirSync(join(clone, 'dist')).filter((f) => f !== 'chart') : [], [], 'the fresh copy has no compiled dist/');
    symlinkSync(join(repoRoot, 'node_modules'), join(clone, 'node_modules'));
    // npm pack runs `prepack` (the build) first; its banner goes to stderr, the JSON to stdout.
    const packed = JSON.parse((await run('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: clone, maxBuffer: 16 << 20 })).stdout) as [{ filename: string; files: { path: string }[] }];
    const files = packed[0].files.map((f) => f.path);
    for (const f of ['dist/pkg/index.js', 'dist/pkg/index.d.ts', 'dist/pkg/testing/index.js', 'dist/pkg/testing/index.d.ts', 'dist/pkg/testing/reaper.js', 'dist/cmd/manager/main.js',
      'dist/pkg/api/core/v1/zz_generated.types.d.ts', 'dist/pkg/api/apps/v1/zz_generated.types.d.ts', 'dist/pkg/api/meta/v1/zz_generated.types.js']) {
      assert.ok(files.includes(f), `the package holds ${f}`);
    }
    assert.ok(!files.some((f) => f.endsWith('.test.js') || f.startsWith('pkg/') || f.startsWith('test/')), `no sources or tests packed: ${files.filter((f) => !f.startsWith('dist/')).join(', ')}`);

    app = join(tmp, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({
      name: 'copier-app', private: true, type: 'module', dependencies: { 'ts-controller-manager': `file:${join(tmp, packed[0].filename)}` },
    }));
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--omit=dev'], { cwd: app, maxBuffer: 16 << 20 });
    for (const f of ['main.ts', 'main.test.ts']) copyFileSync(join(repoRoot, 'examples', 'configmap-copier', f), join(app, f));
    cpSync(join(repoRoot, 'examples', 'configmap-copier', 'rbac'), join(app, 'rbac'), { recursive: true });
    cpSync(join(repoRoot, 'examples', 'memcached'), join(app, 'memcached'), { recursive: true });
    cpSync(join(repoRoot, 'examples', 'webhook'), join(app, 'webhook'), { recursive: true });
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2024', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, allowImportingTsExtensions: true,
        types: ['node'], typeRoots: [join(repoRoot, 'node_modules', '@types')], skipLibCheck: false,
      },
      files: ['main.ts', 'main.test.ts', 'memcached/main.ts', 'memcached/main.test.ts', 'memcached/reconcile.test.ts', 'webhook/main.ts', 'webhook/main.test.ts'],
    }));
  });

  test('a fresh project type-checks the examples and their tests against the packed .d.ts files (both entry points); each main.ts is under 120 lines', async () => {
    const res = await run(tsc, ['-p', app]).then(() => ({ code: 0, out: '' }), (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }));
    assert.equal(res.code, 0, `tsc in the user's project:\n${res.out}`);
    // docs/library.md: each example is readable on one screen.
    for (const f of ['main.ts', 'memcached/main.ts', 'webhook/main.ts']) assert.ok(readFileSync(join(app, f), 'utf8').split('\n').length < 120, `${f} is under 120 lines`);
    // Built-in kinds come from ts-controller-manager/api/<group>/<version>, never declared by hand.
    for (const f of ['main.ts', 'main.test.ts', 'memcached/main.ts', 'memcached/main.test.ts', 'webhook/main.ts', 'webhook/main.test.ts']) {
      const text = readFileSync(join(app, f), 'utf8');
      assert.doesNotMatch(text, /\b(interface|type)\s+(ConfigMap|Namespace|Deployment|Pod|Secret|Lease|Event|Service|ReplicaSet)\b/, `${f} declares a built-in type by hand`);
    }
    assert.match(readFileSync(join(app, 'memcached/main.ts'), 'utf8'), /from 'ts-controller-manager\/api\/apps\/v1'/);
    // The packed type modules cost nothing at run time: importing one gives an empty module.
    const loaded = await run(node, ['--input-type=module', '-e',
      "const ms = await Promise.all(['core/v1', 'apps/v1', 'meta/v1'].map((p) => import(`ts-controller-manager/api/${p}`))); console.log(JSON.stringify(ms.map((m) => Object.keys(m))))"], { cwd: app });
    assert.equal(loaded.stdout.trim(), '[[],[],[]]');
  });

  test('the example copies a labelled ConfigMap into labelled namespaces, keeps copies in sync, and cleans up', async (t) => {
    const cp = cluster();
    const src = await testNamespace(t, 'copier-src');
    const a = await testNamespace(t, 'copier-a');
    const b = await testNamespace(t, 'copier-b');
    const label = (ns: string, on: boolean): Promise<unknown> => cp.request('PATCH', `/api/v1/namespaces/${ns}`,
      { metadata: { labels: { 'copier.example.com/receive': on ? 'true' : null } } }, mergePatch);
    await label(a, true);
    const name = `settings-${suffix()}`;
    // A ConfigMap of that name that is not ours, in a receiving namespace: left alone.
    await label(b, false);
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${b}/configmaps`, { metadata: { name }, data: { mine: 'yes' } }), 201, 'foreign ConfigMap');

    const proc: ChildProcess = spawn(node, ['main.ts'], {
      cwd: app, env: { ...process.env, KUBECONFIG: cp.kubeconfig, PROBE_ADDRESS: '0' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let logs = '';
    proc.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    t.after(() => { if (proc.exitCode === null) proc.kill('SIGKILL'); });

    const get = async (ns: string): Promise<ConfigMap | undefined> => {
      const res = await cp.request('GET', `/api/v1/namespaces/${ns}/configmaps/${name}`);
      return res.status === 200 ? (JSON.parse(res.body) as ConfigMap) : undefined;
    };
    const source = expectStatus<ConfigMap>(await cp.request('POST', `/api/v1/namespaces/${src}/configmaps`, {
      metadata: { name, labels: { 'copier.example.com/source': 'true' } }, data: { greeting: 'hello' },
    }), 201, 'source ConfigMap');

    const copyA = await waitFor(`copy in ${a}`, async () => (await get(a))?.data?.['greeting'] === 'hello' && get(a), { timeoutMs: 60_000 });
    assert.equal(copyA?.metadata.annotations?.['copier.example.com/source'], `${src}/${name}`);
    await waitFor('finalizer on the source', async () => (await get(src))?.metadata.finalizers?.includes('copier.example.com/copies'));

    await label(b, true);
    await waitFor(`the foreign ConfigMap in ${b} logged and left alone`, () => logs.includes('is not our copy'));
    assert.deepEqual((await get(b))?.data, { mine: 'yes' });

    // The source changes → copies follow; a copy deleted by hand comes back; an unlabelled namespace loses its copy.
    await cp.request('PATCH', `/api/v1/namespaces/${src}/configmaps/${name}`, { data: { greeting: 'bonjour' } }, mergePatch);
    await waitFor('copy updated', async () => (await get(a))?.data?.['greeting'] === 'bonjour');
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${a}/configmaps/${name}`), 200, 'delete the copy by hand');
    await waitFor('copy recreated', async () => (await get(a))?.data?.['greeting'] === 'bonjour');
    await label(a, false);
    await waitFor(`copy gone from ${a}`, async () => (await get(a)) === undefined);

    await label(a, true);
    await waitFor('copy back', async () => (await get(a))?.data?.['greeting'] === 'bonjour');
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${src}/configmaps/${name}`), 200, 'delete the source');
    await waitFor('source and copies gone (finalizer removed after the copies)', async () =>
      (await get(src)) === undefined && (await get(a)) === undefined);
    assert.deepEqual((await get(b))?.data, { mine: 'yes' }, 'the foreign ConfigMap survives');
    assert.ok(source.metadata.uid);

    proc.kill('SIGTERM');
    assert.equal(await exited, 0, `graceful exit on SIGTERM; logs:\n${logs.slice(-3000)}`);
  });

  /** `node --test main.test.ts` in `dir` of the user's project, as its author runs it; the runner's output. */
  async function ownTest(t: TestContext, dir: string, files = ['main.test.ts']): Promise<string> {
    // KUBEBUILDER_ASSETS unset: the packed package finds this machine's cached binaries itself.
    const childEnv = { ...process.env };
    delete childEnv['KUBEBUILDER_ASSETS'];
    delete childEnv['NODE_OPTIONS'];
    // Set by the runner for this file's process; inherited, it makes the nested `node --test` skip its files.
    delete childEnv['NODE_TEST_CONTEXT'];
    const res = await run(node, ['--test', '--test-reporter=spec', '--test-concurrency=1', ...files], { cwd: dir, env: childEnv, maxBuffer: 16 << 20 })
      .then((r) => ({ code: 0, out: r.stdout + r.stderr }), (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }));
    for (const line of res.out.split('\n').filter((l) => l.includes('control plane ready in') || l.includes('reconcile scenario') || l.includes('✔') || l.includes('✖'))) t.diagnostic(line.trim());
    assert.equal(res.code, 0, `node --test ${files.join(' ')} in ${dir}:\n${res.out.slice(-4000)}`);
    return res.out;
  }

  test('the example\'s own test passes in the fresh project, on a control plane from ts-controller-manager/testing', async (t) => {
    // Its two tests: a copy of a source already gone is deleted; copies made, kept in sync and cleaned up.
    const out = await ownTest(t, app);
    assert.match(out, /ℹ pass 2\n/);
    assert.match(out, /✔ a copy whose source is gone is deleted when the copier next looks at that name/);
  });

  for (const example of ['memcached', 'webhook']) {
    test(`${example}: the checked-in types are what the packed \`ts-controller-manager gen types\` makes of its CRD`, async () => {
      // As an npm script runs the bin: node_modules/.bin first on PATH, and the Node 24 this repository pins.
      const path = `${join(app, 'node_modules', '.bin')}:${dirname(node)}:${process.env['PATH'] ?? ''}`;
      const res = await run('ts-controller-manager', ['gen', 'types', '--out', 'api', '--check', 'crd.yaml'], { cwd: join(app, example), env: { ...process.env, PATH: path } })
        .then((r) => ({ code: 0, out: r.stdout + r.stderr }), (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }));
      assert.equal(res.code, 0, `gen types --check:\n${res.out}`);
    });
  }

  for (const [example, setup] of [['configmap-copier', 'setupCopier'], ['memcached', 'setupMemcached']] as const) {
    test(`${example}: its rbac/ is what the packed \`ts-controller-manager gen rbac\` derives from its declarations (its own test runs it as that ServiceAccount)`, async () => {
      const path = `${join(app, 'node_modules', '.bin')}:${dirname(node)}:${process.env['PATH'] ?? ''}`;
      const dir = example === 'configmap-copier' ? app : join(app, example);
      const res = await run('ts-controller-manager', ['gen', 'rbac', '--check', '--out', 'rbac', '--setup', setup, 'main.ts'], { cwd: dir, env: { ...process.env, PATH: path } })
        .then((r) => ({ code: 0, out: r.stdout + r.stderr }), (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }));
      assert.equal(res.code, 0, `gen rbac --check:\n${res.out}`);
    });
  }

  test('memcached: its own tests pass in the fresh project (Deployment applied and owned, Ready, drift undone, finalizer, nothing left; the reconciler on the FakeClient)', async (t) => {
    assert.match(await ownTest(t, join(app, 'memcached'), ['main.test.ts', 'reconcile.test.ts']), /ℹ pass 4\n/);
  });

  test('webhook: its own test passes in the fresh project (the packed startTestEnv installs config/webhook; defaulted, refused, warned)', async (t) => {
    const out = await ownTest(t, join(app, 'webhook'));
    assert.match(out, /ℹ pass 1\n/);
    const answering = /webhooks answering (\d+) ms/.exec(out);
    assert.ok(answering, 'the test waited for the webhooks');
    t.diagnostic(`webhooks answering ${answering[1]} ms after the server process was started`);
  });
});
