import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { defaultKubernetesMinor, findBinaries, listBinaries } from './binaries.ts';

const root = mkdtempSync(join(tmpdir(), 'tscm-binaries-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** Creates executable stand-ins (never run) at `dir/<name>`. */
function fake(dir: string, ...names: string[]): string {
  mkdirSync(dir, { recursive: true });
  for (const n of names) {
    writeFileSync(join(dir, n), '#!/bin/sh\n');
    chmodSync(join(dir, n), 0o755);
  }
  return dir;
}

describe('findBinaries', () => {
  test('KUBEBUILDER_ASSETS wins over the cache and gives etcd, kube-apiserver and kubectl from that directory', () => {
    const assets = fake(join(root, 'assets'), 'etcd', 'kube-apiserver', 'kubectl');
    const cache = join(root, 'cache1');
    fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    fake(join(cache, 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver');
    const b = findBinaries(undefined, { KUBEBUILDER_ASSETS: assets, TSCM_CACHE_DIR: cache });
    assert.deepEqual(b, { etcd: join(assets, 'etcd'), kubeApiserver: join(assets, 'kube-apiserver'), kubectl: join(assets, 'kubectl'), source: 'KUBEBUILDER_ASSETS' });
  });

  test('a KUBEBUILDER_ASSETS directory without kube-apiserver is an error, not a silent fall-back to the cache', () => {
    const assets = fake(join(root, 'half'), 'etcd');
    const cache = join(root, 'cache2');
    fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    fake(join(cache, 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver');
    assert.throws(() => findBinaries(undefined, { KUBEBUILDER_ASSETS: assets, TSCM_CACHE_DIR: cache }),
      /KUBEBUILDER_ASSETS=.*half has no executable kube-apiserver: `npx ts-controller-manager envtest` .*set KUBEBUILDER_ASSETS .*make tools/);
  });

  test('the cache: highest version first, then the newest build of it; a build without the binary is skipped', () => {
    const cache = join(root, 'cache3');
    fake(join(cache, 'bin', 'etcd-v3.6.9-111111111111'), 'etcd');
    const newest = fake(join(cache, 'bin', 'etcd-v3.6.16-222222222222'), 'etcd');
    const older = fake(join(cache, 'bin', 'etcd-v3.6.16-333333333333'), 'etcd');
    utimesSync(join(older, 'etcd'), new Date(1_000_000), new Date(1_000_000));
    fake(join(cache, 'bin', 'k8s-v1.37.0-444444444444'), 'kubectl'); // no kube-apiserver: not a candidate
    const k8s = fake(join(cache, 'bin', 'k8s-v1.36.3-555555555555'), 'kube-apiserver', 'kubectl');
    fake(join(cache, 'bin', 'kwok-v0.8.0-666666666666'), 'kwok');
    const b = findBinaries(undefined, { TSCM_CACHE_DIR: cache, XDG_DATA_HOME: join(root, 'no-store') });
    assert.deepEqual(b, { etcd: join(newest, 'etcd'), kubeApiserver: join(k8s, 'kube-apiserver'), kubectl: join(k8s, 'kubectl'), source: cache });
  });

  test('nothing anywhere: the error says KUBEBUILDER_ASSETS is unset, where it looked, and how to get the binaries', () => {
    const cache = join(root, 'empty');
    fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    assert.throws(() => findBinaries(undefined, { TSCM_CACHE_DIR: cache, XDG_DATA_HOME: join(root, 'no-store') }), (err: Error) => {
      assert.match(err.message, /^no kube-apiserver binary: KUBEBUILDER_ASSETS is not set, .* holds no version of setup-envtest's, and .*empty\/bin holds no build of it/);
      assert.match(err.message, /setup-envtest use -p path/);
      assert.match(err.message, /`make tools` in a clone of ts-controller-manager/);
      return true;
    });
  });

  test("setup-envtest's store (XDG_DATA_HOME/kubebuilder-envtest/k8s/<version>-<os>-<arch>) comes after KUBEBUILDER_ASSETS and before the cache; its highest complete version wins", () => {
    const data = join(root, 'data');
    const store = join(data, 'kubebuilder-envtest', 'k8s');
    const platform = `${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
    fake(join(store, `1.30.0-${platform}`), 'etcd', 'kube-apiserver', 'kubectl');
    const newest = fake(join(store, `1.33.2-${platform}`), 'etcd', 'kube-apiserver', 'kubectl');
    fake(join(store, `1.40.0-${platform}`), 'etcd'); // incomplete: not a candidate
    fake(join(store, '1.41.0-plan9-mips'), 'etcd', 'kube-apiserver'); // another platform
    const cache = join(root, 'cache-store');
    fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    fake(join(cache, 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver');
    const fromStore = findBinaries(undefined, { XDG_DATA_HOME: data, TSCM_CACHE_DIR: cache });
    assert.deepEqual(fromStore, {
      etcd: join(newest, 'etcd'), kubeApiserver: join(newest, 'kube-apiserver'), kubectl: join(newest, 'kubectl'), source: `setup-envtest (${newest})`,
    });
    const assets = fake(join(root, 'assets-store'), 'etcd', 'kube-apiserver');
    assert.equal(findBinaries(undefined, { XDG_DATA_HOME: data, TSCM_CACHE_DIR: cache, KUBEBUILDER_ASSETS: assets }).source, 'KUBEBUILDER_ASSETS');
    // Without XDG_DATA_HOME: ~/.local/share, as setup-envtest on Linux.
    const home = join(root, 'home');
    fake(join(home, '.local', 'share', 'kubebuilder-envtest', 'k8s', `1.31.0-${platform}`), 'etcd', 'kube-apiserver');
    assert.match(findBinaries(undefined, { HOME: home, TSCM_CACHE_DIR: cache }).source, /^setup-envtest \(.*home\/\.local\/share\/kubebuilder-envtest\/k8s\/1\.31\.0-/);
    // Nothing in the store: the cache.
    assert.equal(findBinaries(undefined, { XDG_DATA_HOME: join(root, 'no-data'), HOME: join(root, 'no-home'), TSCM_CACHE_DIR: cache }).source, cache);
  });

  test('listBinaries reports every set in lookup order, the one used first', () => {
    const data = join(root, 'data-list');
    const platform = `${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
    const store = fake(join(data, 'kubebuilder-envtest', 'k8s', `1.33.2-${platform}`), 'etcd', 'kube-apiserver', 'kubectl');
    const cache = join(root, 'cache-list');
    const e = fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    const k = fake(join(cache, 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver', 'kubectl');
    const assets = fake(join(root, 'assets-list'), 'etcd');
    assert.deepEqual(listBinaries({ XDG_DATA_HOME: data, TSCM_CACHE_DIR: cache, KUBEBUILDER_ASSETS: assets }), [
      { source: 'KUBEBUILDER_ASSETS', version: undefined, dir: assets, complete: false },
      { source: 'setup-envtest', version: '1.33.2', dir: store, complete: true },
      { source: 'ts-controller-manager cache', version: '1.36.3', dir: k, etcdDir: e, complete: true },
    ]);
  });

  test('nothing anywhere: the error names every place looked in and the envtest command', () => {
    assert.throws(() => findBinaries(undefined, { XDG_DATA_HOME: join(root, 'none-data'), TSCM_CACHE_DIR: join(root, 'none-cache') }), (err: Error) => {
      assert.match(err.message, /KUBEBUILDER_ASSETS is not set, .*none-data\/kubebuilder-envtest\/k8s holds no version .* and .*none-cache\/bin holds no build/);
      assert.match(err.message, /ts-controller-manager envtest/);
      return true;
    });
  });

  test('the default cache follows XDG_CACHE_HOME, as hack/build-tools.sh does', () => {
    const xdg = join(root, 'xdg');
    const e = fake(join(xdg, 'ts-controller-manager', 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    const k = fake(join(xdg, 'ts-controller-manager', 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver');
    const b = findBinaries(undefined, { XDG_CACHE_HOME: xdg, XDG_DATA_HOME: join(root, 'no-store') });
    assert.equal(b.etcd, join(e, 'etcd'));
    assert.equal(b.kubeApiserver, join(k, 'kube-apiserver'));
    assert.equal(b.kubectl, undefined);
  });
});

describe('findBinaries with a Kubernetes version (the version matrix)', () => {
  /** A cache holding two releases, each k8s build with the `etcd` link hack/build-tools.sh makes to its release's etcd. */
  function matrixCache(name: string): { cache: string; etcd36: string; etcd37: string; k34: string; k37: string } {
    const cache = join(root, name);
    const etcd36 = fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    const etcd37 = fake(join(cache, 'bin', 'etcd-v3.7.3-bbbbbbbbbbbb'), 'etcd');
    const k34 = fake(join(cache, 'bin', 'k8s-v1.34.4-cccccccccccc'), 'kube-apiserver');
    symlinkSync(join(etcd36, 'etcd'), join(k34, 'etcd'));
    const k37 = fake(join(cache, 'bin', 'k8s-v1.37.2-dddddddddddd'), 'kube-apiserver', 'kubectl');
    symlinkSync(join(etcd37, 'etcd'), join(k37, 'etcd'));
    return { cache, etcd36, etcd37, k34, k37 };
  }
  const noStore = { XDG_DATA_HOME: join(root, 'no-store-m'), HOME: join(root, 'no-home-m') };

  test('"1.34", "v1.34" and "v1.34.4" select that release from the cache, with the etcd it links — not the newest etcd', () => {
    const m = matrixCache('matrix1');
    for (const v of ['1.34', 'v1.34', 'v1.34.4', '1.34.4']) {
      const b = findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache }, v);
      assert.equal(b.kubeApiserver, join(m.k34, 'kube-apiserver'), v);
      assert.equal(b.etcd, join(m.k34, 'etcd'), v);
      assert.equal(realpathSync(b.etcd), realpathSync(join(m.etcd36, 'etcd')), `${v} runs etcd 3.6`);
    }
    // No version, and no default-minor build: the newest release, and its own etcd (3.7).
    const newest = findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache });
    assert.equal(newest.kubeApiserver, join(m.k37, 'kube-apiserver'));
    assert.equal(realpathSync(newest.etcd), realpathSync(join(m.etcd37, 'etcd')));
  });

  test(`no version asked for: the default minor (${defaultKubernetesMinor}) wins over a newer release in the cache and in the store, and listBinaries lists it first`, () => {
    const m = matrixCache('matrix-default');
    const kDefault = fake(join(m.cache, 'bin', `k8s-v${defaultKubernetesMinor}.9-eeeeeeeeeeee`), 'kube-apiserver');
    symlinkSync(join(m.etcd36, 'etcd'), join(kDefault, 'etcd'));
    // A release newer than every real one, as a machine would hold after building one ahead of the default.
    const kNewer = fake(join(m.cache, 'bin', 'k8s-v1.99.0-ffffffffffff'), 'kube-apiserver');
    symlinkSync(join(m.etcd37, 'etcd'), join(kNewer, 'etcd'));
    assert.equal(findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache }).kubeApiserver, join(kDefault, 'kube-apiserver'));
    const listed = listBinaries({ ...noStore, TSCM_CACHE_DIR: m.cache }).map((s) => s.version);
    assert.equal(listed[0], `${defaultKubernetesMinor}.9`, listed.join(' '));
    assert.deepEqual([...listed].sort(), [`${defaultKubernetesMinor}.9`, '1.34.4', '1.37.2', '1.99.0'].sort());
    const data = join(root, 'data-default');
    const platform = `${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
    fake(join(data, 'kubebuilder-envtest', 'k8s', `1.99.0-${platform}`), 'etcd', 'kube-apiserver');
    const dflt = fake(join(data, 'kubebuilder-envtest', 'k8s', `${defaultKubernetesMinor}.0-${platform}`), 'etcd', 'kube-apiserver');
    assert.equal(findBinaries(undefined, { XDG_DATA_HOME: data, TSCM_CACHE_DIR: m.cache }).kubeApiserver, join(dflt, 'kube-apiserver'));
  });

  test('the default minor is the one hack/tools/k8s/go.mod pins (what hack/build-tools.sh builds without KUBERNETES_VERSION)', () => {
    const pinned = /^\s+k8s\.io\/kubernetes v(\d+\.\d+)\./m.exec(readFileSync(new URL('../../hack/tools/k8s/go.mod', import.meta.url), 'utf8'))?.[1];
    assert.equal(defaultKubernetesMinor, pinned);
  });

  test('a version the cache lacks, another patch of a cached minor, or a malformed version is an error naming it', () => {
    const m = matrixCache('matrix2');
    assert.throws(() => findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache }, '1.35'), /^Error: no kube-apiserver 1\.35 binary:/);
    assert.throws(() => findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache }, 'v1.34.3'), /no kube-apiserver 1\.34\.3 binary/);
    // "1.3" must not match 1.34 (a prefix of the minor is not the minor).
    assert.throws(() => findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache }, '1.3'), /no kube-apiserver 1\.3 binary/);
    assert.throws(() => findBinaries(undefined, { ...noStore, TSCM_CACHE_DIR: m.cache }, 'latest'), /kubernetesVersion "latest": expected a Kubernetes release/);
  });

  test("setup-envtest's store is narrowed to the version too", () => {
    const data = join(root, 'data-matrix');
    const platform = `${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
    const v34 = fake(join(data, 'kubebuilder-envtest', 'k8s', `1.34.1-${platform}`), 'etcd', 'kube-apiserver');
    fake(join(data, 'kubebuilder-envtest', 'k8s', `1.36.0-${platform}`), 'etcd', 'kube-apiserver');
    const m = matrixCache('matrix3');
    assert.equal(findBinaries(undefined, { XDG_DATA_HOME: data, TSCM_CACHE_DIR: m.cache }, '1.34').kubeApiserver, join(v34, 'kube-apiserver'));
    // 1.37 is not in the store: the cache has it.
    assert.equal(findBinaries(undefined, { XDG_DATA_HOME: data, TSCM_CACHE_DIR: m.cache }, 'v1.37').kubeApiserver, join(m.k37, 'kube-apiserver'));
  });

  test('KUBEBUILDER_ASSETS of another version than the one asked for is an error (checked with kube-apiserver --version), never silently used', () => {
    const dir = join(root, 'assets-version');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'kube-apiserver'), '#!/bin/sh\necho "Kubernetes v1.36.3"\n');
    writeFileSync(join(dir, 'etcd'), '#!/bin/sh\n');
    chmodSync(join(dir, 'kube-apiserver'), 0o755);
    chmodSync(join(dir, 'etcd'), 0o755);
    assert.equal(findBinaries(undefined, { KUBEBUILDER_ASSETS: dir }, 'v1.36').kubeApiserver, join(dir, 'kube-apiserver'));
    assert.throws(() => findBinaries(undefined, { KUBEBUILDER_ASSETS: dir }, '1.34'),
      /KUBEBUILDER_ASSETS=.*assets-version holds kube-apiserver v1\.36\.3, not the 1\.34 asked for/);
    assert.throws(() => findBinaries(dir, {}, '1.34'), /binaryAssetsDirectory=.*holds kube-apiserver v1\.36\.3/);
  });

  test('listBinaries lists every cached release, each with the etcd it runs with', () => {
    const m = matrixCache('matrix4');
    const cached = listBinaries({ ...noStore, TSCM_CACHE_DIR: m.cache }).filter((s) => s.source === 'ts-controller-manager cache');
    assert.deepEqual(cached.map((s) => [s.version, s.dir, s.etcdDir]), [
      ['1.37.2', m.k37, realpathSync(m.etcd37)],
      ['1.34.4', m.k34, realpathSync(m.etcd36)],
    ]);
  });
});
