/**
 * `ts-controller-manager envtest [list | use [VERSION] | build [VERSION]]`: controller-runtime's setup-envtest for
 * this library's test environment — which control plane binaries (etcd, kube-apiserver, kubectl) startTestEnv and
 * `dev` would use, and how to get one.
 *
 *  - `list` (the default): every set on this machine in pkg/testing/binaries.ts's lookup order — KUBEBUILDER_ASSETS,
 *    setup-envtest's store, this library's tool cache — the one used marked, then how to get another.
 *  - `use [VERSION] [-p path|env]`: the directory of that version (default: the one used) for KUBEBUILDER_ASSETS, as
 *    `setup-envtest use -p path` prints it; exit 1 when there is none.
 *  - `build [VERSION]`: builds etcd, kube-apiserver and kubectl of Kubernetes VERSION (default the one this library is
 *    tested with) from their Go modules through the Go module proxy — no release download — into setup-envtest's
 *    store, `<store>/k8s/<VERSION>-<os>-<arch>/`, where startTestEnv, dev and Go's envtest (setup-envtest) all find
 *    them. etcd is the version that Kubernetes release links (its go.mod's go.etcd.io/etcd/server/v3). Needs Go no
 *    older than the release's go.mod `go` line (GOTOOLCHAIN=local: a too-old Go fails at once, saying so). The build
 *    goes to a temporary directory renamed into place when complete, so an interrupted build leaves nothing half-made.
 *
 * Exit codes: 0 done, 1 failure (nothing to use, no Go, a build that failed: one line), 2 bad invocation.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { envtestPlatform, envtestStoreDir, findBinaries, listBinaries } from '../../pkg/testing/binaries.ts';

const execFileP = promisify(execFile);

/**
 * The Kubernetes release this library is tested with (hack/tools/k8s/go.mod pins it; cmd/manager/envtest.test.ts
 * keeps the two equal): `envtest build`'s default.
 */
export const testedKubernetesVersion = '1.37.2';

export const envtestUsage = `Usage: ts-controller-manager envtest [list | use [VERSION] [-p path|env] | build [VERSION]]

The control plane binaries (etcd, kube-apiserver, kubectl) of ts-controller-manager/testing's startTestEnv and of
"ts-controller-manager dev", as controller-runtime's setup-envtest manages envtest's.

  list            Every set on this machine, in the order they are looked for: $KUBEBUILDER_ASSETS, setup-envtest's
                  store (${join(envtestStoreDir(), 'k8s')}), this library's tool cache. The default.
  use [VERSION]   The directory of VERSION (default: the one used), for KUBEBUILDER_ASSETS. -p path (default) prints
                  the directory, -p env an export line.
  build [VERSION] Builds VERSION (default ${testedKubernetesVersion}) from its Go modules (needs Go; no release download)
                  into setup-envtest's store, where startTestEnv, dev and setup-envtest find it. Takes minutes.
  -h, --help      This text.
`;

class EnvtestUsageError extends Error {}

interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  env: NodeJS.ProcessEnv;
}

const processIo: Io = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s), env: process.env };

/** How to get a version, for `list` and the errors: what works on this machine first. */
function howToGet(goVersion: string | undefined): string[] {
  return [
    goVersion
      ? `  ts-controller-manager envtest build [VERSION]   build one from Go modules with ${goVersion} (default ${testedKubernetesVersion}; minutes)`
      : `  ts-controller-manager envtest build [VERSION]   build one from Go modules (install Go >= 1.26 first: https://go.dev/doc/install)`,
    '  setup-envtest use VERSION                       controller-runtime\'s tool (downloads release binaries into its store)',
    '  export KUBEBUILDER_ASSETS=DIR                    a directory holding etcd, kube-apiserver and kubectl',
  ];
}

/** `go version`'s "go1.26.8", or undefined when there is no go on PATH. */
async function goVersion(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  try {
    const { stdout } = await execFileP('go', ['env', 'GOVERSION'], { env: { ...env, GOTOOLCHAIN: 'local' } });
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

async function list(io: Io): Promise<number> {
  const sets = listBinaries(io.env);
  let used: string | undefined;
  try {
    const b = findBinaries(undefined, io.env);
    used = b.kubeApiserver;
  } catch {
    used = undefined;
  }
  io.stdout('Control plane binaries of startTestEnv and dev, in the order they are looked for:\n');
  if (!io.env['KUBEBUILDER_ASSETS']) io.stdout('  KUBEBUILDER_ASSETS            (not set)\n');
  const storeDir = join(envtestStoreDir(io.env), 'k8s');
  if (!sets.some((s) => s.source === 'setup-envtest')) io.stdout(`  setup-envtest                 (no ${envtestPlatform()} version in ${storeDir})\n`);
  for (const s of sets) {
    const mark = used !== undefined && used === join(s.dir, 'kube-apiserver') ? '   <- used' : '';
    const detail = !s.complete ? ' (incomplete: etcd or kube-apiserver missing)' : s.etcdDir ? ` (etcd: ${s.etcdDir})` : '';
    io.stdout(`  ${s.source.padEnd(29)} ${(s.version ?? '?').padEnd(8)} ${s.dir}${detail}${mark}\n`);
  }
  if (!sets.some((s) => s.source === 'ts-controller-manager cache')) io.stdout('  ts-controller-manager cache   (none: make tools in a clone of the repository builds one)\n');
  io.stdout(used ? '\nAnother version:\n' : '\nNone is usable. Get one:\n');
  for (const line of howToGet(await goVersion(io.env))) io.stdout(`${line}\n`);
  return 0;
}

function use(args: string[], io: Io): number {
  let version: string | undefined;
  let print = 'path';
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    if (a === '-p' || a === '--print') print = args[++i] ?? '';
    else if (a.startsWith('--print=')) print = a.slice('--print='.length);
    else if (!a.startsWith('-') && version === undefined) version = a.replace(/^v/, '');
    else throw new EnvtestUsageError(`unexpected argument ${JSON.stringify(a)}`);
  }
  if (print !== 'path' && print !== 'env') throw new EnvtestUsageError(`-p takes path or env, not ${JSON.stringify(print)}`);
  const sets = listBinaries(io.env).filter((s) => s.complete && s.source !== 'ts-controller-manager cache');
  const chosen = version === undefined ? sets[0] : sets.find((s) => s.version === version);
  if (!chosen) {
    const what = version === undefined ? 'no version in one directory' : `no version ${version}`;
    throw new Error(`${what} (KUBEBUILDER_ASSETS, setup-envtest's store; the tool cache keeps etcd apart and needs no KUBEBUILDER_ASSETS): ` +
      `ts-controller-manager envtest build${version ? ` ${version}` : ''} makes one`);
  }
  io.stdout(print === 'env' ? `export KUBEBUILDER_ASSETS=${chosen.dir}\n` : `${chosen.dir}\n`);
  return 0;
}

/** The parts of a Kubernetes release's go.mod a consumer module needs. */
export interface KubernetesModule {
  /** Its `go` line: the oldest Go that builds it. */
  go: string;
  /** Its staging modules (k8s.io/api, …), each replaced by its published v0.<minor>.<patch>. */
  staging: string[];
  /** The etcd server version it links. */
  etcd: string;
}

/** Reads a k8s.io/kubernetes go.mod (as `go mod download -json` points at it). Throws when a part is missing. */
export function parseKubernetesGoMod(text: string): KubernetesModule {
  const go = /^go (\S+)$/m.exec(text)?.[1];
  const etcd = /^\s*go\.etcd\.io\/etcd\/server\/v3 (v\S+)/m.exec(text)?.[1];
  const staging = [...text.matchAll(/^\s*(k8s\.io\/\S+) => \.\/staging\/src\//gm)].map((m) => m[1] ?? '');
  if (!go || !etcd || staging.length === 0) throw new Error('not a k8s.io/kubernetes go.mod (no go line, etcd server requirement or staging replaces)');
  return { go, staging, etcd };
}

/** The go.mod of the module that builds kube-apiserver and kubectl of `version` (hack/tools/gen-k8s-gomod.sh's). */
export function kubernetesBuildGoMod(version: string, m: KubernetesModule): string {
  const minor = version.split('.').slice(1).join('.');
  return [
    '// Builds kube-apiserver and kubectl for the test environment (ts-controller-manager envtest build).',
    'module envtest-build/kubernetes', '', `go ${m.go}`, '',
    'tool (', '\tk8s.io/kubernetes/cmd/kube-apiserver', '\tk8s.io/kubernetes/cmd/kubectl', ')', '',
    `require k8s.io/kubernetes v${version}`, '',
    'replace (', ...m.staging.map((s) => `\t${s} => ${s} v0.${minor}`), ')', '',
  ].join('\n');
}

/** The go.mod of the module that builds etcd `version` (hack/tools/etcd/go.mod's shape). */
export function etcdBuildGoMod(version: string, go: string): string {
  return ['// Builds etcd for the test environment (ts-controller-manager envtest build).', 'module envtest-build/etcd', '', `go ${go}`, '',
    'tool go.etcd.io/etcd/server/v3', '', `require go.etcd.io/etcd/server/v3 ${version}`, ''].join('\n');
}

/** Runs a command with its output on stderr; rejects with the command and its exit code. */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, io: Io): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => io.stderr(d.toString()));
    child.stderr.on('data', (d: Buffer) => io.stderr(d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${code}`))));
  });
}

async function build(args: string[], io: Io): Promise<number> {
  if (args.length > 1 || args.some((a) => a.startsWith('-'))) throw new EnvtestUsageError(`unexpected argument ${JSON.stringify(args.find((a) => a.startsWith('-')) ?? args[1])}`);
  const version = (args[0] ?? testedKubernetesVersion).replace(/^v/, '');
  if (!/^1\.\d+\.\d+$/.test(version)) throw new EnvtestUsageError(`VERSION must be a Kubernetes release like ${testedKubernetesVersion}, not ${JSON.stringify(args[0])}`);
  const go = await goVersion(io.env);
  if (!go) throw new Error(`building from Go modules needs Go (no go on PATH): install Go >= 1.26 (https://go.dev/doc/install), or: ${howToGet(undefined)[1]?.trim()}`);
  const target = join(envtestStoreDir(io.env), 'k8s', `${version}-${envtestPlatform()}`);
  if (['etcd', 'kube-apiserver', 'kubectl'].every((b) => existsSync(join(target, b)))) {
    io.stderr(`Kubernetes ${version} is already in ${target}\n`);
    io.stdout(`${target}\n`);
    return 0;
  }
  const t0 = Date.now();
  const say = (m: string): void => io.stderr(`[envtest build ${((Date.now() - t0) / 1000).toFixed(0)}s] ${m}\n`);
  const env = { ...io.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0', GOFLAGS: '-mod=mod' };
  const work = mkdtempSync(join(tmpdir(), 'tscm-envtest-build-'));
  const out = `${target}.partial-${process.pid}`;
  try {
    say(`Kubernetes ${version} with ${go}: reading its go.mod through the Go module proxy`);
    const { stdout } = await execFileP('go', ['mod', 'download', '-json', `k8s.io/kubernetes@v${version}`], { cwd: work, env, maxBuffer: 16 << 20 });
    const goModPath = (JSON.parse(stdout) as { GoMod?: string; Error?: string }).GoMod;
    if (!goModPath) throw new Error(`k8s.io/kubernetes@v${version}: the Go module proxy gave no go.mod (${stdout.trim().slice(0, 300)})`);
    const k8s = parseKubernetesGoMod(readFileSync(goModPath, 'utf8'));
    const minor = version.split('.')[1];
    mkdirSync(join(work, 'kubernetes'));
    writeFileSync(join(work, 'kubernetes', 'go.mod'), kubernetesBuildGoMod(version, k8s));
    mkdirSync(join(work, 'etcd'));
    writeFileSync(join(work, 'etcd', 'go.mod'), etcdBuildGoMod(k8s.etcd, k8s.go));
    mkdirSync(out, { recursive: true });
    say(`etcd ${k8s.etcd} (the version Kubernetes ${version} links): resolving modules`);
    await run('go', ['mod', 'tidy'], join(work, 'etcd'), env, io);
    say(`etcd ${k8s.etcd}: building`);
    await run('go', ['build', '-trimpath', '-o', join(out, 'etcd'), 'go.etcd.io/etcd/server/v3'], join(work, 'etcd'), env, io);
    say(`Kubernetes ${version}: resolving modules (${k8s.staging.length} staging modules replaced by v0.${version.split('.').slice(1).join('.')})`);
    await run('go', ['mod', 'tidy'], join(work, 'kubernetes'), env, io);
    const ldflags = `-X k8s.io/component-base/version.gitVersion=v${version} -X k8s.io/component-base/version.gitMajor=1 ` +
      `-X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean`;
    say(`Kubernetes ${version}: building kube-apiserver and kubectl (the long part on a cold Go build cache)`);
    await run('go', ['build', '-trimpath', '-ldflags', ldflags, '-o', `${out}/`, 'k8s.io/kubernetes/cmd/kube-apiserver', 'k8s.io/kubernetes/cmd/kubectl'],
      join(work, 'kubernetes'), env, io);
    rmSync(target, { recursive: true, force: true });
    renameSync(out, target);
    say(`done: ${target}`);
    io.stdout(`${target}\n`);
    return 0;
  } finally {
    rmSync(out, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/** `ts-controller-manager envtest …` (argv after `envtest`); resolves the exit code. */
export async function envtestMain(argv: readonly string[], io: Io = processIo): Promise<number> {
  const [command = 'list', ...rest] = argv;
  try {
    if (command === '-h' || command === '--help' || rest.includes('-h') || rest.includes('--help')) {
      io.stdout(envtestUsage);
      return 0;
    }
    if (command === 'list') {
      if (rest.length > 0) throw new EnvtestUsageError(`unexpected argument ${JSON.stringify(rest[0])}`);
      return await list(io);
    }
    if (command === 'use') return use(rest, io);
    if (command === 'build') return await build(rest, io);
    throw new EnvtestUsageError(`unknown command ${JSON.stringify(command)} (known: list, use, build)`);
  } catch (err) {
    io.stderr(`error: ${(err as Error).message}\n`);
    return err instanceof EnvtestUsageError ? 2 : 1;
  }
}
