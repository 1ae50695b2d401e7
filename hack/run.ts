/**
 * `make run`: the manager against a cluster, with everything set up.
 *
 *  - A cluster is "configured" when $KUBECONFIG is set or ~/.kube/config exists. If it answers, the manager runs
 *    against it (CRDs installed; nothing else touched). If it does not answer, run stops with a clear message rather
 *    than silently switching clusters.
 *  - Otherwise the local control plane (full mode, `.cluster/`) is started — built from Go modules on first use —
 *    or reused if `make cluster-up` already started it; CRDs and config/samples are applied in `default`.
 *  - Neutron: $NEUTRON_CLOUD_CONFIG if set; else if Debian's neutron-server is installed, `hack/neutron/up.sh` starts
 *    a local one; else the Network controller is off and this says why.
 *  - The manager runs with WATCH_NAMESPACE=default (unless set), logs through pino-pretty, and Ctrl-C stops the
 *    manager gracefully and then everything this script started (not what it reused).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { observabilityHints } from './observability.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..');
const node = process.execPath;
const say = (msg: string): void => void process.stderr.write(`[make run] ${msg}\n`);

async function reachable(kubeconfig: string): Promise<string | undefined> {
  try {
    const { KubeConfig, VersionApi } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const v = await Promise.race([
      kc.makeApiClient(VersionApi).getCode(),
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error('timeout after 5s')), 5000).unref()),
    ]);
    return `${kc.getCurrentCluster()?.server ?? '?'} (${v.gitVersion})`;
  } catch (err) {
    say(`cluster in ${kubeconfig} does not answer: ${(err as Error).message}`);
    return undefined;
  }
}

async function kubectl(kubectlBin: string, kubeconfig: string, ...args: string[]): Promise<void> {
  const { stdout } = await run(kubectlBin, ['--kubeconfig', kubeconfig, ...args], { cwd: repo });
  for (const line of stdout.trim().split('\n')) if (line) say(`  ${line}`);
}

async function main(): Promise<number> {
  const t0 = Date.now();
  const cleanups: (() => Promise<void>)[] = [];
  try {
    return await runWith(cleanups, t0);
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => say(`cleanup failed: ${String(err)}`));
  }
}

async function runWith(cleanups: (() => Promise<void>)[], t0: number): Promise<number> {
  const envConfig = process.env['KUBECONFIG']?.split(':').find((p) => p);
  const homeConfig = join(homedir(), '.kube', 'config');
  const configured = envConfig ?? (existsSync(homeConfig) ? homeConfig : undefined);

  let kubeconfig: string;
  let kubectlBin: string;
  let applySamples = false;
  if (configured) {
    const where = await reachable(configured);
    if (!where) {
      say(`not starting a local control plane while a cluster is configured; unset KUBECONFIG (or move ${homeConfig}) to use one`);
      return 1;
    }
    say(`using the configured cluster ${where}`);
    kubeconfig = configured;
    kubectlBin = (await run('bash', ['-c', 'command -v kubectl'])).stdout.trim();
  } else {
    const dir = join(repo, '.cluster');
    let cp: ControlPlane | undefined;
    if (existsSync(join(dir, 'state.json'))) {
      const existing = ControlPlane.attach(dir);
      if (existing.running().length === Object.keys(existing.state.components).length) {
        say(`reusing the local control plane in ${dir} (started by make cluster-up)`);
        cp = existing;
      } else {
        await existing.stop();
      }
    }
    if (!cp) {
      say('no cluster configured: starting the local control plane (full mode; the first run builds it from Go modules)');
      const started = await ControlPlane.start({ mode: 'full', dir });
      cleanups.push(async () => {
        say('stopping the local control plane');
        await started.stop();
      });
      cp = started;
    }
    kubeconfig = cp.kubeconfig;
    kubectlBin = join(cp.k8sBinDir, 'kubectl');
    applySamples = true;
    say(`to use it from another shell: export KUBECONFIG=${kubeconfig}`);
  }

  // config/crd/bases: the single-version v1 Network, no conversion webhook — this process runs without webhooks
  // (docs/network-v2.md). On a cluster where config/default installed the v2-stored CRD the API server refuses this
  // apply (v2 is in status.storedVersions), so nothing is downgraded.
  say('installing CRDs (config/crd/bases)');
  await kubectl(kubectlBin, kubeconfig, 'apply', '--server-side', '-f', 'config/crd/bases');
  await kubectl(kubectlBin, kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s',
    'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io');
  if (applySamples) {
    say('applying config/samples in namespace default');
    await kubectl(kubectlBin, kubeconfig, 'apply', '-n', 'default', '-k', 'config/samples');
  }

  // Metrics are off by default (kubebuilder v4): locally they are plain HTTP on loopback, so `curl` works without a
  // token. ARGS come later and win (e.g. ARGS='--metrics-secure' or ARGS='--metrics-bind-address=0').
  const localMetrics = ['--metrics-bind-address=127.0.0.1:8080', '--metrics-secure=false'];
  const args = [join(repo, 'cmd/manager/main.ts'), `--kubeconfig=${kubeconfig}`, ...localMetrics, ...process.argv.slice(2)];
  let neutron = process.env['NEUTRON_CLOUD_CONFIG'];
  if (neutron) {
    say(`Network controller: using NEUTRON_CLOUD_CONFIG=${neutron}`);
  } else if (existsSync('/usr/bin/neutron-server') && existsSync(join(repo, 'hack/neutron/up.sh'))) {
    say('Network controller: starting the local neutron-server (hack/neutron/up.sh)');
    const { stdout } = await run('bash', [join(repo, 'hack/neutron/up.sh')], { cwd: repo });
    neutron = /export NEUTRON_CLOUD_CONFIG=(\S+)/.exec(stdout)?.[1];
    cleanups.push(async () => {
      say('stopping the local neutron-server');
      await run('bash', [join(repo, 'hack/neutron/down.sh')], { cwd: repo });
    });
  } else {
    say('Network controller: OFF — no NEUTRON_CLOUD_CONFIG and no local neutron-server (make neutron-up installs one)');
  }
  if (neutron) args.push(`--neutron-cloud-config=${neutron}`, '--neutron-cloud=local');
  else args.push('--controllers=*,-network');

  if (process.argv.slice(2).some((a) => a.startsWith('--metrics-'))) say('metrics: as ARGS set them');
  else for (const line of observabilityHints('http://127.0.0.1:8080/metrics', process.env['WATCH_NAMESPACE'] ?? 'default')) say(line);
  say(`ready in ${((Date.now() - t0) / 1000).toFixed(1)}s; starting the manager (WATCH_NAMESPACE=${process.env['WATCH_NAMESPACE'] ?? 'default'}); Ctrl-C stops everything`);
  const manager = spawn(node, args, {
    env: { ...process.env, WATCH_NAMESPACE: process.env['WATCH_NAMESPACE'] ?? 'default' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pretty = spawn(node, [join(repo, 'node_modules/pino-pretty/bin.js'), '--colorize', '--translateTime', 'SYS:HH:MM:ss.l'], {
    stdio: ['pipe', 'inherit', 'inherit'],
  });
  manager.stdout.pipe(pretty.stdin);
  // Ctrl-C reaches the whole process group; the manager shuts down gracefully on its own. A second Ctrl-C is
  // forwarded by the terminal too and makes the manager exit at once.
  const ignore = (): void => {};
  process.on('SIGINT', ignore);
  process.on('SIGTERM', () => manager.kill('SIGTERM'));
  const code = await new Promise<number>((res) => manager.on('exit', (c) => res(c ?? 1)));
  process.off('SIGINT', ignore);
  await new Promise((res) => pretty.on('exit', res));
  say(`manager exited with code ${code}`);
  return code;
}

main().then((code) => process.exit(code), (err: unknown) => {
  say(`failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
