/**
 * `make cluster-up` / `make cluster-down` / `make cluster-status`: the local control plane from the command line.
 *
 *   node test/cluster/cli.ts up [--mode full|minimal|node] [--dir DIR] → prints `export KUBECONFIG=<path>` on stdout
 *   node test/cluster/cli.ts down [--dir DIR]                      → stops every process it started, removes DIR
 *   node test/cluster/cli.ts status [--dir DIR]
 *   node test/cluster/cli.ts load IMAGE [--dir DIR]                → node mode: IMAGE from podman into the node's containerd
 *
 * DIR defaults to $CLUSTER_DIR or `.cluster/` in the repository. Mode defaults to $CLUSTER_MODE or `full`.
 * Components keep running after `up` exits (each in its own process group); `down` kills those groups.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ControlPlane, ensureBinaries, isAlive, type ClusterMode } from './controlplane.ts';
import { loadImage } from './node.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

function usage(message: string): never {
  process.stderr.write(`cluster: ${message}\nusage: cluster.ts up|down|status|load IMAGE [--mode full|minimal|node] [--dir DIR]\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: { mode: { type: 'string' }, dir: { type: 'string' } },
    });
  } catch (err) {
    usage((err as Error).message);
  }
  const [command, ...rest] = parsed.positionals;
  const image = command === 'load' ? rest.shift() : undefined;
  if (command === 'load' && !image) usage('load needs an image reference (make node-load IMG=...)');
  if (rest.length > 0) usage(`unexpected arguments: ${rest.join(' ')}`);
  const dir = resolve(parsed.values.dir ?? process.env['CLUSTER_DIR'] ?? join(repoRoot, '.cluster'));
  const mode = (parsed.values.mode ?? (process.env['CLUSTER_MODE'] || 'full')) as ClusterMode;
  if (mode !== 'full' && mode !== 'minimal' && mode !== 'node') usage(`--mode must be full, minimal or node, not "${String(mode)}"`);

  switch (command) {
    case 'up': {
      const cp = await ControlPlane.start({ mode, dir, outlivesProcess: true });
      process.stdout.write(`export KUBECONFIG=${cp.kubeconfig}\n`);
      return;
    }
    case 'down': {
      if (!existsSync(join(dir, 'state.json'))) {
        process.stderr.write(`cluster: nothing to stop (no ${join(dir, 'state.json')})\n`);
        return;
      }
      const cp = ControlPlane.attach(dir);
      await cp.stop();
      process.stderr.write(`cluster: stopped and removed ${dir}\n`);
      return;
    }
    case 'status': {
      if (!existsSync(join(dir, 'state.json'))) {
        process.stdout.write(`no control plane at ${dir}\n`);
        process.exitCode = 1;
        return;
      }
      const cp = ControlPlane.attach(dir);
      process.stdout.write(`${cp.mode} control plane at ${cp.server}\nexport KUBECONFIG=${cp.kubeconfig}\n`);
      for (const c of Object.values(cp.state.components)) {
        const up = c.pid !== null && isAlive(c.pid);
        process.stdout.write(`  ${c.name.padEnd(24)} ${up ? `running (pid ${c.pid})` : 'stopped'}  log: ${c.log}\n`);
      }
      return;
    }
    case 'load': {
      if (!existsSync(join(dir, 'state.json'))) throw new Error(`no control plane at ${dir}: CLUSTER_MODE=node make cluster-up first`);
      const cp = ControlPlane.attach(dir);
      if (cp.mode !== 'node') throw new Error(`the control plane at ${dir} is in ${cp.mode} mode: only node mode runs images (CLUSTER_MODE=node make cluster-up)`);
      const bins = await ensureBinaries(() => {}, { node: true });
      if (!bins.node) throw new Error('no node binaries: hack/build-tools.sh --node');
      const name = loadImage(dir, bins.node, image ?? '');
      process.stderr.write(`cluster: loaded ${image ?? ''} into the node's containerd as ${name}\n`);
      return;
    }
    default:
      usage(command ? `unknown command "${command}"` : 'missing command');
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`cluster: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
