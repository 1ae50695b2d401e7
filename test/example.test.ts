/**
 * The library as a user gets it: `npm pack` of the built package, installed into a fresh project next to the example
 * controller (examples/configmap-copier/main.ts, imported by package name), type-checked there against the packed
 * .d.ts files, and run as its own process against the real control plane.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
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
    const pkg = join(tmp, 'package');
    mkdirSync(pkg);
    // Build from the sources into the package dir (the repo's own dist/ is left alone), then pack it as npm would.
    await run(tsc, ['-p', join(repoRoot, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist')], { cwd: repoRoot });
    for (const f of ['package.json', 'README.md']) copyFileSync(join(repoRoot, f), join(pkg, f));
    const packed = JSON.parse((await run('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: pkg })).stdout) as [{ filename: string; files: { path: string }[] }];
    const files = packed[0].files.map((f) => f.path);
    assert.ok(files.includes('dist/pkg/index.js') && files.includes('dist/pkg/index.d.ts'), 'the package holds the built entry point and its types');
    assert.ok(!files.some((f) => f.endsWith('.test.js') || f.startsWith('pkg/') || f.startsWith('test/')), `no sources or tests packed: ${files.filter((f) => !f.startsWith('dist/')).join(', ')}`);

    app = join(tmp, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({
      name: 'copier-app', private: true, type: 'module', dependencies: { 'ts-controller-manager': `file:${join(tmp, packed[0].filename)}` },
    }));
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--omit=dev'], { cwd: app, maxBuffer: 16 << 20 });
    copyFileSync(join(repoRoot, 'examples', 'configmap-copier', 'main.ts'), join(app, 'main.ts'));
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2024', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, allowImportingTsExtensions: true,
        types: ['node'], typeRoots: [join(repoRoot, 'node_modules', '@types')], skipLibCheck: false,
      },
      files: ['main.ts'],
    }));
  });

  test('a fresh project type-checks the example against the packed .d.ts files', async () => {
    const res = await run(tsc, ['-p', app]).then(() => ({ code: 0, out: '' }), (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }));
    assert.equal(res.code, 0, `tsc in the user's project:\n${res.out}`);
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
});
