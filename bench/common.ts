/** Helpers shared by the scale benchmarks (bench/foo-scale.ts, bench/network-scale.ts). */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../test/cluster/controlplane.ts';

export const log = (msg: string): void => void process.stderr.write(`[bench] ${msg}\n`);

/**
 * The control plane to measure on: the first running one of `--cluster-dir`, $TSCM_CLUSTER_DIR, $CLUSTER_DIR, else a
 * fresh full-mode one in a temporary directory (`owned`: the caller stops it).
 */
export async function benchControlPlane(clusterDir: string | undefined): Promise<{ cp: ControlPlane; owned: boolean }> {
  for (const dir of [clusterDir, process.env['TSCM_CLUSTER_DIR'], process.env['CLUSTER_DIR']]) {
    if (dir && existsSync(join(dir, 'state.json'))) {
      const cp = ControlPlane.attach(dir, () => {});
      if (cp.running().length > 0) return { cp, owned: false };
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'tscm-bench-cluster-'));
  log(`starting a full control plane in ${dir}`);
  return { cp: await ControlPlane.start({ mode: 'full', dir }), owned: true };
}

/** Runs `n` calls with `concurrency` in flight; resolves the elapsed ms. */
export async function runAll(n: number, concurrency: number, call: (i: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, async () => {
    while (next < n) await call(next++);
  }));
  return performance.now() - started;
}
