/** Installs this project's CRDs (config/crd) on the shared control plane with the release's own kubectl. */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cluster } from './cluster.ts';

const run = promisify(execFile);
export const repoRoot = join(import.meta.dirname, '..', '..');

/** Runs kubectl (built from the control plane's release) with the admin kubeconfig, in the repository root. */
export async function kubectl(...args: string[]): Promise<string> {
  const cp = cluster();
  const { stdout } = await run(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, ...args], { cwd: repoRoot });
  return stdout;
}

/** Installs config/crd and waits until both CRDs are Established (idempotent). */
export async function installCRDs(): Promise<void> {
  await kubectl('apply', '--server-side', '--force-conflicts', '-k', 'config/crd');
  await kubectl('wait', '--for=condition=Established', '--timeout=60s',
    'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io');
}
