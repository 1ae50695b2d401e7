/** Installs this project's CRDs (config/crd) on the shared control plane with the release's own kubectl. */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ControlPlane } from '../cluster/controlplane.ts';
import { cluster } from './cluster.ts';

const run = promisify(execFile);
export const repoRoot = join(import.meta.dirname, '..', '..');

/** Runs kubectl (built from the control plane's release) with the admin kubeconfig, in the repository root. */
export async function kubectl(...args: string[]): Promise<string> {
  return kubectlOn(cluster(), ...args);
}

/** kubectl as the admin of the control plane `cp` (e.g. a test's private one), run from the repository root. */
export async function kubectlOn(cp: ControlPlane, ...args: string[]): Promise<string> {
  const { stdout } = await run(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, ...args], { cwd: repoRoot });
  return stdout;
}

/**
 * Installs config/crd/bases (Foo; the single-version v1 Network, which needs no conversion webhook) and waits until both
 * CRDs are Established (idempotent). config/crd itself installs the two-version Network converted by the manager's
 * webhook Service, which the shared cluster does not run (test/webhook-network.test.ts covers that one).
 */
export async function installCRDs(): Promise<void> {
  await kubectl('apply', '--server-side', '--force-conflicts', '-f', 'config/crd/bases');
  await kubectl('wait', '--for=condition=Established', '--timeout=60s',
    'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io');
}

/**
 * A private minimal control plane (etcd + kube-apiserver) with this project's CRDs Established and `namespace`
 * created, stopped when the test ends: for tests that must not load the shared control plane (many objects, memory
 * limits, restarts).
 */
export async function privateControlPlane(t: { after(fn: () => Promise<void>): void }, namespace: string): Promise<ControlPlane> {
  const cp = await ControlPlane.start({ mode: 'minimal', dir: mkdtempSync(join(tmpdir(), 'tscm-private-')), log: () => {} });
  t.after(() => cp.stop());
  await prepareControlPlane(cp, namespace);
  return cp;
}

/** Installs this project's CRDs on `cp` (waiting until Established) and creates `namespace`. */
export async function prepareControlPlane(cp: ControlPlane, namespace: string): Promise<void> {
  const kubectlBin = join(cp.k8sBinDir, 'kubectl');
  await run(kubectlBin, ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '-f', 'config/crd/bases'], { cwd: repoRoot });
  await run(kubectlBin, ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s',
    'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io']);
  const res = await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  if (res.status !== 201) throw new Error(`creating namespace ${namespace}: HTTP ${res.status} ${res.body}`);
}
