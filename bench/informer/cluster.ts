/**
 * The benchmark's PRIVATE control plane (minimal mode: etcd + kube-apiserver) in a temporary directory, and the few
 * things the benchmarks need from it: the Foo CRD, namespaces, admin clients, child processes.
 */
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { Registry } from 'prom-client';
import { RestClient } from '../../pkg/client/rest.ts';
import type { ResourceType } from '../../pkg/apimachinery/resource.ts';
import type { ControlPlane } from '../../test/cluster/controlplane.ts';
import type { LoadConfig, LoadResult } from './load.ts';

export const repoRoot = join(import.meta.dirname, '..', '..');

export const fooResource: ResourceType = {
  group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true,
};

const execFileP = promisify(execFile);

/** Progress to stderr, prefixed with seconds since the bench started. */
const t0 = Date.now();
export function progress(message: string): void {
  process.stderr.write(`[bench +${((Date.now() - t0) / 1000).toFixed(1)}s] ${message}\n`);
}

/** kubectl of the control plane's own release, with its admin kubeconfig, in the repository root. */
export async function kubectl(cp: ControlPlane, ...args: string[]): Promise<string> {
  const { stdout } = await execFileP(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, ...args], { cwd: repoRoot });
  return stdout;
}

/** Installs config/crd and waits until the Foo CRD is Established. */
export async function installFooCRD(cp: ControlPlane): Promise<void> {
  await kubectl(cp, 'apply', '--server-side', '--force-conflicts', '-k', 'config/crd');
  await kubectl(cp, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io');
}

export async function createNamespace(cp: ControlPlane, name: string): Promise<void> {
  const res = await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  if (res.status !== 201) throw new Error(`creating namespace ${name}: HTTP ${res.status} ${res.body}`);
}

/** A fresh admin KubeConfig (and so a fresh connection pool) for this control plane. */
export function adminKubeConfig(cp: ControlPlane): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  return kc;
}

/** A fresh RestClient (own connection pool, own metrics registry). */
export function restClient(cp: ControlPlane): RestClient {
  return new RestClient({ kubeConfig: adminKubeConfig(cp), registry: new Registry(), userAgent: 'tscm-bench' });
}

/**
 * Runs `node [nodeFlags] <script> <json arg>` with stderr passed through and returns the JSON of its last stdout
 * line. Rejects if the child exits non-zero.
 */
export async function runChild<T>(script: string, arg: unknown, nodeFlags: string[] = []): Promise<T> {
  const child = spawn(process.execPath, [...nodeFlags, join(repoRoot, script), JSON.stringify(arg)], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  const last = out.trim().split('\n').at(-1) ?? '';
  if (code !== 0) throw new Error(`${script} exited with ${code}; stdout: ${out.slice(-500)}`);
  return JSON.parse(last) as T;
}

/** Runs the load generator (bench/informer/load.ts) in a child process against `cp`. */
export function runLoad(cp: ControlPlane, cfg: Omit<LoadConfig, 'server' | 'caCert' | 'adminCert' | 'adminKey'>): Promise<LoadResult> {
  const { pki } = cp.state;
  return runChild<LoadResult>('bench/informer/load.ts', {
    server: cp.server, caCert: pki.caCert, adminCert: pki.adminCert, adminKey: pki.adminKey, ...cfg,
  } satisfies LoadConfig);
}

/** Polls `check` every `intervalMs` (timers, no busy loop) until true; throws after `timeoutMs`. */
export async function until(what: string, check: () => boolean, timeoutMs = 120_000, intervalMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Runs the garbage collector if the process was started with --expose-gc. */
export function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}
