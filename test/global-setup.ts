/**
 * Global setup for the integration tests (node --test --test-global-setup): ONE real control plane per test run,
 * shared by every test file (each test isolates itself in its own namespace).
 *
 * - If TSCM_CLUSTER_DIR names a running control plane (e.g. from `make cluster-up`), it is reused and left running.
 * - Otherwise a full-mode control plane is started in a temporary directory and stopped after the run.
 * The directory is passed to the test processes through TSCM_CLUSTER_DIR (set before they are spawned).
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane, type ClusterMode } from './cluster/controlplane.ts';

let owned: ControlPlane | undefined;

export async function globalSetup(): Promise<void> {
  const existing = process.env['TSCM_CLUSTER_DIR'];
  if (existing && existsSync(join(existing, 'state.json'))) {
    const cp = ControlPlane.attach(existing);
    if (cp.running().length > 0) {
      process.stderr.write(`[cluster] reusing the ${cp.mode} control plane at ${existing}\n`);
      return;
    }
  }
  const mode = (process.env['TEST_CLUSTER_MODE'] || 'full') as ClusterMode;
  const dir = mkdtempSync(join(tmpdir(), 'tscm-test-cluster-'));
  owned = await ControlPlane.start({ mode, dir });
  process.env['TSCM_CLUSTER_DIR'] = dir;
}

export async function globalTeardown(): Promise<void> {
  await owned?.stop();
}
