import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { findBinaries } from './binaries.ts';

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
      /KUBEBUILDER_ASSETS=.*half has no executable kube-apiserver: set KUBEBUILDER_ASSETS .*make tools/);
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
    const b = findBinaries(undefined, { TSCM_CACHE_DIR: cache });
    assert.deepEqual(b, { etcd: join(newest, 'etcd'), kubeApiserver: join(k8s, 'kube-apiserver'), kubectl: join(k8s, 'kubectl'), source: cache });
  });

  test('nothing anywhere: the error says KUBEBUILDER_ASSETS is unset, where it looked, and how to get the binaries', () => {
    const cache = join(root, 'empty');
    fake(join(cache, 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    assert.throws(() => findBinaries(undefined, { TSCM_CACHE_DIR: cache }), (err: Error) => {
      assert.match(err.message, /^no kube-apiserver binary: KUBEBUILDER_ASSETS is not set and .*empty\/bin holds no build of it/);
      assert.match(err.message, /setup-envtest use -p path/);
      assert.match(err.message, /`make tools` in a clone of ts-controller-manager/);
      return true;
    });
  });

  test('the default cache follows XDG_CACHE_HOME, as hack/build-tools.sh does', () => {
    const xdg = join(root, 'xdg');
    const e = fake(join(xdg, 'ts-controller-manager', 'bin', 'etcd-v3.6.16-aaaaaaaaaaaa'), 'etcd');
    const k = fake(join(xdg, 'ts-controller-manager', 'bin', 'k8s-v1.36.3-bbbbbbbbbbbb'), 'kube-apiserver');
    const b = findBinaries(undefined, { XDG_CACHE_HOME: xdg });
    assert.equal(b.etcd, join(e, 'etcd'));
    assert.equal(b.kubeApiserver, join(k, 'kube-apiserver'));
    assert.equal(b.kubectl, undefined);
  });
});
