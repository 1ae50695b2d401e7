/**
 * Where the test environment's etcd and kube-apiserver come from, in this order (the first that names a directory
 * decides; nothing falls through past a directory that lacks a binary):
 *  1. `binaryAssetsDirectory` (an option), else `$KUBEBUILDER_ASSETS` — controller-runtime envtest's layout: one
 *     directory holding `etcd`, `kube-apiserver` and `kubectl` (what `setup-envtest use -p path` prints).
 *  2. setup-envtest's store, where Go users' `setup-envtest use` installs them: `<store>/k8s/<version>-<os>-<arch>/`
 *     with `<store>` = `$XDG_DATA_HOME/kubebuilder-envtest` (default `~/.local/share/kubebuilder-envtest`; on macOS
 *     `~/Library/Application Support/io.kubebuilder.envtest`), this machine's os and arch in Go's names
 *     (linux-amd64); the default version (below) holding both etcd and kube-apiserver wins, else the highest one.
 *     `ts-controller-manager envtest build` writes there too.
 *  3. ts-controller-manager's own build cache (`hack/build-tools.sh`, `make tools` in a clone of the repository):
 *     `$TSCM_CACHE_DIR` (default `${XDG_CACHE_HOME:-~/.cache}/ts-controller-manager`)`/bin/etcd-<version>-<hash>/etcd`
 *     and `.../bin/k8s-<version>-<hash>/{kube-apiserver,kubectl}`; the default version wins, else the highest one; then
 *     the newest build.
 *  4. Otherwise an error that names every place looked in and says how to get them.
 * Only the file system is read; nothing is downloaded or built here.
 *
 * A Kubernetes version asked for (`kubernetesVersion`: "1.34", "v1.34" or "v1.34.4"; a minor matches its every patch)
 * narrows each place to that version: the store's and the cache's directory names carry it; an explicit or
 * KUBEBUILDER_ASSETS directory is checked with `kube-apiserver --version` (the one process this file runs), and one of
 * another version is an error rather than a silent fall-through. In the cache, a `k8s-<version>-<hash>/` directory
 * holds an `etcd` link to the etcd that release runs with (hack/build-tools.sh makes it: 1.37 links etcd 3.7, 1.34–1.36
 * etcd 3.6); without one (an older cache) the newest etcd build is used.
 *
 * Without a version asked for, each place prefers the default, {@link defaultKubernetesMinor} — the release this
 * library is tested with — over newer ones: a machine holding the whole version matrix (hack/build-tools.sh builds
 * v1.34–v1.37 side by side) must not move every test to the newest release unasked.
 */
import { execFileSync } from 'node:child_process';
import { accessSync, constants, readdirSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The Kubernetes minor startTestEnv runs when none is asked for and it is installed (hack/tools/k8s/go.mod pins its
 * release; binaries.test.ts keeps the two equal). The version matrix: docs/compatibility.md.
 */
export const defaultKubernetesMinor = '1.37';

/** Paths of the control plane binaries startTestEnv runs. */
export interface ControlPlaneBinaries {
  /** Path of the etcd executable. */
  etcd: string;
  /** Path of the kube-apiserver executable. */
  kubeApiserver: string;
  /** kubectl of the same source, when there is one. */
  kubectl: string | undefined;
  /** Where they were found, for messages: "KUBEBUILDER_ASSETS", "binaryAssetsDirectory" or the cache directory. */
  source: string;
}

const howToGet =
  '`npx ts-controller-manager envtest` lists the versions installed and builds one from Go modules (needs Go >= 1.26); ' +
  'or set KUBEBUILDER_ASSETS to a directory holding etcd, kube-apiserver and kubectl (controller-runtime\'s ' +
  '`setup-envtest use -p path` prints one), or build them once with `make tools` in a clone of ts-controller-manager ' +
  '(cached in ~/.cache/ts-controller-manager, or $TSCM_CACHE_DIR)';

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The build cache directory of hack/build-tools.sh for this environment. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env['TSCM_CACHE_DIR'] || join(env['XDG_CACHE_HOME'] || join(homedir(), '.cache'), 'ts-controller-manager');
}

/** This machine's `<os>-<arch>` in Go's names, as setup-envtest names its store's directories (linux-amd64). */
export function envtestPlatform(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch === 'ia32' ? '386' : process.arch;
  return `${process.platform === 'win32' ? 'windows' : process.platform}-${arch}`;
}

/** setup-envtest's store directory (it keeps the binaries under `k8s/<version>-<os>-<arch>/`). */
export function envtestStoreDir(env: NodeJS.ProcessEnv = process.env): string {
  const home = env['HOME'] || homedir();
  if (process.platform === 'darwin') return join(home, 'Library', 'Application Support', 'io.kubebuilder.envtest');
  return join(env['XDG_DATA_HOME'] || join(home, '.local', 'share'), 'kubebuilder-envtest');
}

/** One set of control plane binaries on this machine (listBinaries). */
export interface InstalledBinaries {
  /** "KUBEBUILDER_ASSETS", "setup-envtest" (its store) or "ts-controller-manager cache". */
  source: 'KUBEBUILDER_ASSETS' | 'setup-envtest' | 'ts-controller-manager cache';
  /** The Kubernetes version, when the layout names it (KUBEBUILDER_ASSETS does not). */
  version: string | undefined;
  /** The directory of kube-apiserver (and kubectl; for the store and KUBEBUILDER_ASSETS, of etcd too). */
  dir: string;
  /** The cache's etcd directory (the cache keeps etcd apart). */
  etcdDir?: string;
  /** Both etcd and kube-apiserver are there. */
  complete: boolean;
}

/** The store's versions for this platform, the default first, then highest first: `{ version, dir, complete }`. */
function storeVersions(env: NodeJS.ProcessEnv): { version: string; dir: string; complete: boolean }[] {
  const k8s = join(envtestStoreDir(env), 'k8s');
  let entries: string[];
  try {
    entries = readdirSync(k8s);
  } catch {
    return [];
  }
  const suffix = `-${envtestPlatform()}`;
  return entries
    .filter((e) => e.endsWith(suffix))
    .map((e) => {
      const dir = join(k8s, e);
      return { version: e.slice(0, -suffix.length), dir, complete: executable(join(dir, 'etcd')) && executable(join(dir, 'kube-apiserver')) };
    })
    .sort((x, y) => preferDefault(x.version, y.version));
}

/** Sorts the default minor first, then the highest version first. */
function preferDefault(a: string, b: string): number {
  const rank = (v: string): number => (versionMatches(v, defaultKubernetesMinor) ? 1 : 0);
  return rank(b) - rank(a) || compareVersions(b, a);
}

/** Compares "v1.36.3"-style versions numerically (missing parts are 0). */
function compareVersions(a: string, b: string): number {
  const parts = (v: string): number[] => v.replace(/^v/, '').split(/[.-]/).map((p) => Number.parseInt(p, 10) || 0);
  const pa = parts(a);
  const pb = parts(b);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The newest cached build `<bin>/<prefix>-<version>-<hash>/` holding `binary` (of `version` when given), if any. */
function newestCached(binDir: string, prefix: string, binary: string, version?: string): string | undefined {
  let entries: string[];
  try {
    entries = readdirSync(binDir);
  } catch {
    return undefined;
  }
  const builds = entries
    .map((name) => /^(.+)-(v\d[^-]*)-([0-9a-f]+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null && m[1] === prefix)
    .map((m) => ({ dir: join(binDir, m[0]), version: m[2] ?? '' }))
    .filter((b) => (version === undefined || versionMatches(b.version, version)) && executable(join(b.dir, binary)))
    .map((b) => ({ ...b, mtime: statSync(join(b.dir, binary)).mtimeMs }))
    .sort((x, y) => (prefix === 'k8s' ? preferDefault(x.version, y.version) : compareVersions(y.version, x.version)) || y.mtime - x.mtime);
  return builds[0]?.dir;
}

/**
 * Finds etcd and kube-apiserver as described at the top of this file; throws an Error naming what is missing and how
 * to get it.
 */
export function findBinaries(binaryAssetsDirectory?: string, env: NodeJS.ProcessEnv = process.env,
  kubernetesVersion?: string): ControlPlaneBinaries {
  const wanted = kubernetesVersion === undefined ? undefined : checkedVersion(kubernetesVersion);
  const assets = binaryAssetsDirectory ?? (env['KUBEBUILDER_ASSETS'] || undefined);
  if (assets !== undefined) {
    const source = binaryAssetsDirectory !== undefined ? 'binaryAssetsDirectory' : 'KUBEBUILDER_ASSETS';
    const missing = ['etcd', 'kube-apiserver'].filter((b) => !executable(join(assets, b)));
    if (missing.length > 0) {
      throw new Error(`${source}=${assets} has no executable ${missing.join(' or ')}: ${howToGet}`);
    }
    if (wanted !== undefined) requireVersion(join(assets, 'kube-apiserver'), wanted, `${source}=${assets}`);
    const kubectl = join(assets, 'kubectl');
    return { etcd: join(assets, 'etcd'), kubeApiserver: join(assets, 'kube-apiserver'), kubectl: executable(kubectl) ? kubectl : undefined, source };
  }
  const stored = storeVersions(env).find((v) => v.complete && (wanted === undefined || versionMatches(v.version, wanted)));
  if (stored) {
    const kubectl = join(stored.dir, 'kubectl');
    return { etcd: join(stored.dir, 'etcd'), kubeApiserver: join(stored.dir, 'kube-apiserver'), kubectl: executable(kubectl) ? kubectl : undefined, source: `setup-envtest (${stored.dir})` };
  }
  const cache = cacheDir(env);
  const k8sDir = newestCached(join(cache, 'bin'), 'k8s', 'kube-apiserver', wanted);
  const etcd = k8sDir !== undefined ? pairedEtcd(join(cache, 'bin'), k8sDir) : undefined;
  if (!etcd || !k8sDir) {
    const what = `${!k8sDir ? 'kube-apiserver' : 'etcd'}${wanted !== undefined ? ` ${wanted}` : ''}`;
    throw new Error(`no ${what} binary: KUBEBUILDER_ASSETS is not set, ${join(envtestStoreDir(env), 'k8s')} holds no ` +
      `version of setup-envtest's, and ${join(cache, 'bin')} holds no build of it; ${howToGet}`);
  }
  const kubectl = join(k8sDir, 'kubectl');
  return { etcd, kubeApiserver: join(k8sDir, 'kube-apiserver'), kubectl: executable(kubectl) ? kubectl : undefined, source: cache };
}

/**
 * Every set of control plane binaries findBinaries would consider, in its order (the first complete one is what it
 * uses, unless `binaryAssetsDirectory` is given): KUBEBUILDER_ASSETS if set, the store's versions, then the cache's
 * (each the default first, then highest first; of the cache the newest build of each, with the etcd it runs with).
 */
export function listBinaries(env: NodeJS.ProcessEnv = process.env): InstalledBinaries[] {
  const found: InstalledBinaries[] = [];
  const assets = env['KUBEBUILDER_ASSETS'];
  if (assets) found.push({ source: 'KUBEBUILDER_ASSETS', version: undefined, dir: assets, complete: executable(join(assets, 'etcd')) && executable(join(assets, 'kube-apiserver')) });
  for (const v of storeVersions(env)) found.push({ source: 'setup-envtest', ...v });
  const bin = join(cacheDir(env), 'bin');
  for (const version of cachedVersions(bin)) {
    const k8sDir = newestCached(bin, 'k8s', 'kube-apiserver', version);
    if (k8sDir === undefined) continue;
    const etcd = pairedEtcd(bin, k8sDir);
    const etcdDir = etcd !== undefined ? dirname(realpathSync(etcd)) : undefined;
    found.push({ source: 'ts-controller-manager cache', version, dir: k8sDir, ...(etcdDir ? { etcdDir } : {}), complete: etcdDir !== undefined });
  }
  return found;
}

/** "v1.34", "1.34.4" → "1.34" / "1.34.4"; throws on anything else (a typo must not select the newest version). */
function checkedVersion(version: string): string {
  const v = version.trim().replace(/^v/, '');
  if (!/^1\.\d+(\.\d+)?$/.test(v)) throw new Error(`kubernetesVersion ${JSON.stringify(version)}: expected a Kubernetes release such as "1.34", "v1.34" or "v1.34.4"`);
  return v;
}

/** Whether `version` ("v1.34.4", "1.34.4") is the `wanted` release: a minor ("1.34") matches each of its patches. */
function versionMatches(version: string, wanted: string): boolean {
  const v = version.replace(/^v/, '').split(/[-+]/)[0] ?? '';
  const w = wanted.replace(/^v/, '');
  return v === w || (w.split('.').length === 2 && v.startsWith(`${w}.`));
}

/** The Kubernetes versions ("1.36.3") of the cache's k8s builds, the default first, then highest first. */
function cachedVersions(binDir: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(binDir);
  } catch {
    return [];
  }
  const versions = new Set(entries.map((name) => /^k8s-v(\d[^-]*)-[0-9a-f]+$/.exec(name)?.[1]).filter((v): v is string => v !== undefined));
  return [...versions].sort(preferDefault);
}

/** The etcd a cached Kubernetes build runs with: its `etcd` link, else (an older cache) the newest etcd build. */
function pairedEtcd(binDir: string, k8sDir: string): string | undefined {
  if (executable(join(k8sDir, 'etcd'))) return join(k8sDir, 'etcd');
  const etcdDir = newestCached(binDir, 'etcd', 'etcd');
  return etcdDir !== undefined ? join(etcdDir, 'etcd') : undefined;
}

/** Throws unless `kubeApiserver --version` ("Kubernetes v1.34.4") is the `wanted` release. */
function requireVersion(kubeApiserver: string, wanted: string, where: string): void {
  let out: string;
  try {
    out = execFileSync(kubeApiserver, ['--version'], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    throw new Error(`${where}: \`kube-apiserver --version\` failed (${(err as Error).message.split('\n')[0]}), so its version cannot be checked against ${wanted}`, { cause: err });
  }
  const version = /v\d+\.\d+\.\d+\S*/.exec(out)?.[0];
  if (version === undefined || !versionMatches(version, wanted)) {
    throw new Error(`${where} holds kube-apiserver ${version ?? `of unknown version (${out.trim()})`}, not the ${wanted} asked for: ` +
      `point it at a ${wanted} set (\`npx ts-controller-manager envtest use ${wanted}\`) or unset it`);
  }
}
