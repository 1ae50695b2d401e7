/**
 * `ts-controller-manager envtest`: list (the lookup order of pkg/testing/binaries.ts, the set used marked, how to
 * get another — building from Go modules when Go is there), use (a directory for KUBEBUILDER_ASSETS), build's
 * refusals and the go.mod it writes. The build itself takes minutes; it is run by hand (docs/testing.md says how).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { envtestPlatform } from '../../pkg/testing/binaries.ts';
import { envtestMain, etcdBuildGoMod, kubernetesBuildGoMod, parseKubernetesGoMod, testedKubernetesVersion } from './envtest.ts';

const repo = resolve(import.meta.dirname, '../..');
const root = mkdtempSync(join(tmpdir(), 'tscm-envtest-'));
after(() => rmSync(root, { recursive: true, force: true }));

function fake(dir: string, ...names: string[]): string {
  mkdirSync(dir, { recursive: true });
  for (const n of names) {
    writeFileSync(join(dir, n), '#!/bin/sh\n');
    chmodSync(join(dir, n), 0o755);
  }
  return dir;
}

async function envtest(env: NodeJS.ProcessEnv, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await envtestMain(argv, { stdout: (s) => (out += s), stderr: (s) => (err += s), env });
  return { code, out, err };
}

/** A PATH with a `go` that answers `go env GOVERSION` (and nothing else). */
function pathWithGo(): string {
  const bin = fake(join(root, 'gobin'));
  writeFileSync(join(bin, 'go'), '#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo go1.26.8\n');
  chmodSync(join(bin, 'go'), 0o755);
  return bin;
}

describe('envtest', () => {
  test('the default build version is the Kubernetes release the repository pins (hack/tools/k8s/go.mod)', () => {
    const pinned = /^\s+k8s\.io\/kubernetes v(\S+)/m.exec(readFileSync(join(repo, 'hack/tools/k8s/go.mod'), 'utf8'))?.[1];
    assert.equal(testedKubernetesVersion, pinned);
  });

  test('list: every set in lookup order, the one used marked, and how to get another (build first when Go is there)', async () => {
    const data = join(root, 'data');
    const store = fake(join(data, 'kubebuilder-envtest', 'k8s', `1.33.2-${envtestPlatform()}`), 'etcd', 'kube-apiserver', 'kubectl');
    const cache = join(root, 'cache');
    fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    const k8s = fake(join(cache, 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver', 'kubectl');
    const r = await envtest({ XDG_DATA_HOME: data, TSCM_CACHE_DIR: cache, PATH: pathWithGo() }, 'list');
    assert.equal(r.code, 0, r.err);
    const lines = r.out.split('\n');
    assert.equal(lines[0], 'Control plane binaries of startTestEnv and dev, in the order they are looked for:');
    assert.match(lines[1] ?? '', /^ {2}KUBEBUILDER_ASSETS +\(not set\)$/);
    assert.match(lines[2] ?? '', new RegExp(`^ {2}setup-envtest +1\\.33\\.2 +${store} +<- used$`));
    assert.match(lines[3] ?? '', new RegExp(`^ {2}ts-controller-manager cache +1\\.36\\.3 +${k8s} \\(etcd: .*etcd-v3\\.6\\.16-a+\\)$`));
    assert.match(r.out, /^Another version:\n {2}ts-controller-manager envtest build \[VERSION\] +build one from Go modules with go1\.26\.8/m);
    assert.match(r.out, /^ {2}setup-envtest use VERSION/m);
  });

  test('list with nothing and no Go: says none is usable and to install Go to build one', async () => {
    const r = await envtest({ XDG_DATA_HOME: join(root, 'empty-data'), TSCM_CACHE_DIR: join(root, 'empty-cache'), PATH: join(root, 'no-bin') });
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^ {2}setup-envtest +\(no .* version in .*empty-data\/kubebuilder-envtest\/k8s\)$/m);
    assert.match(r.out, /^None is usable\. Get one:\n {2}ts-controller-manager envtest build \[VERSION\] +build one from Go modules \(install Go >= 1\.26 first/m);
  });

  test('use: the directory of a version for KUBEBUILDER_ASSETS (-p path, -p env); an unknown version exits 1 with one line', async () => {
    const data = join(root, 'data-use');
    const dir = fake(join(data, 'kubebuilder-envtest', 'k8s', `1.34.0-${envtestPlatform()}`), 'etcd', 'kube-apiserver', 'kubectl');
    const env = { XDG_DATA_HOME: data, TSCM_CACHE_DIR: join(root, 'empty-cache') };
    assert.deepEqual(await envtest(env, 'use'), { code: 0, out: `${dir}\n`, err: '' });
    assert.deepEqual(await envtest(env, 'use', 'v1.34.0', '-p', 'env'), { code: 0, out: `export KUBEBUILDER_ASSETS=${dir}\n`, err: '' });
    const missing = await envtest(env, 'use', '1.99.0');
    assert.equal(missing.code, 1);
    assert.match(missing.err, /^error: no version 1\.99\.0 .*ts-controller-manager envtest build 1\.99\.0 makes one\n$/);
    assert.equal((await envtest(env, 'use', '-p', 'json')).code, 2);
  });

  test('build: without Go, one line saying to install it; a bad version or command exits 2', async () => {
    const noGo = await envtest({ XDG_DATA_HOME: join(root, 'd'), PATH: join(root, 'no-bin') }, 'build');
    assert.equal(noGo.code, 1);
    assert.match(noGo.err, /^error: building from Go modules needs Go \(no go on PATH\): install Go >= 1\.26 .*setup-envtest use VERSION/);
    assert.equal(noGo.err.split('\n').length, 2, noGo.err);
    assert.equal((await envtest({ PATH: pathWithGo() }, 'build', 'latest')).code, 2);
    const bad = await envtest({}, 'fetch');
    assert.deepEqual([bad.code, bad.err], [2, 'error: unknown command "fetch" (known: list, use, build)\n']);
  });

  test("build's modules: the release's staging modules replaced by their published versions, etcd at the version the release links", () => {
    const k8sGoMod = ['module k8s.io/kubernetes', '', 'go 1.26.0', '', 'require (', '\tgo.etcd.io/etcd/client/v3 v3.6.8', ')', '', 'require (',
      '\tgo.etcd.io/etcd/server/v3 v3.6.8 // indirect', ')', '', 'replace (', '\tk8s.io/api => ./staging/src/k8s.io/api',
      '\tk8s.io/client-go => ./staging/src/k8s.io/client-go', ')', ''].join('\n');
    const m = parseKubernetesGoMod(k8sGoMod);
    assert.deepEqual(m, { go: '1.26.0', staging: ['k8s.io/api', 'k8s.io/client-go'], etcd: 'v3.6.8' });
    const goMod = kubernetesBuildGoMod('1.36.3', m);
    assert.match(goMod, /^go 1\.26\.0$/m);
    assert.match(goMod, /^require k8s\.io\/kubernetes v1\.36\.3$/m);
    assert.match(goMod, /^replace \(\n\tk8s\.io\/api => k8s\.io\/api v0\.36\.3\n\tk8s\.io\/client-go => k8s\.io\/client-go v0\.36\.3\n\)$/m);
    assert.match(goMod, /^tool \(\n\tk8s\.io\/kubernetes\/cmd\/kube-apiserver\n\tk8s\.io\/kubernetes\/cmd\/kubectl\n\)$/m);
    assert.match(etcdBuildGoMod('v3.6.8', '1.26.0'), /^tool go\.etcd\.io\/etcd\/server\/v3\n\nrequire go\.etcd\.io\/etcd\/server\/v3 v3\.6\.8$/m);
    assert.throws(() => parseKubernetesGoMod('module x\n'), /not a k8s\.io\/kubernetes go\.mod/);
  });

  test('the bin dispatches envtest (--help exits 0)', () => {
    const r = spawnSync(process.execPath, [join(repo, 'cmd/manager/main.ts'), 'envtest', '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^Usage: ts-controller-manager envtest \[list \| use \[VERSION\] \[-p path\|env\] \| build \[VERSION\]\]/);
  });
});
