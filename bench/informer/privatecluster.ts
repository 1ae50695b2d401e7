/** Starting and stopping a benchmark's private control plane (bench/run.ts, bench/watchlist.ts). */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../../test/cluster/controlplane.ts';
import { progress } from './cluster.ts';

/**
 * Starts a private minimal control plane (etcd + kube-apiserver) in a fresh temporary directory `<prefix>…`,
 * announcing `what` and the directory. `stop` is idempotent; the caller calls it in a `finally`. SIGINT and SIGTERM
 * stop the control plane too, then exit 130, so an interrupted bench leaves no etcd or kube-apiserver behind.
 */
export async function startPrivateControlPlane(prefix: string, what: string): Promise<{ cp: ControlPlane; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  progress(`${what}; starting a private minimal control plane in ${dir}`);
  const cp = await ControlPlane.start({ mode: 'minimal', dir, log: (m) => progress(`cluster: ${m}`) });
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    progress('stopping the control plane');
    await cp.stop();
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => void stop().finally(() => process.exit(130)));
  }
  return { cp, stop };
}
