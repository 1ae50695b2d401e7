/**
 * `make run`: the manager against a cluster, with everything set up.
 *
 *  - A cluster is "configured" when $KUBECONFIG is set or ~/.kube/config exists. If it answers, the manager runs
 *    against it (CRDs installed; nothing else touched). If it does not answer, run stops with a clear message rather
 *    than silently switching clusters.
 *  - Otherwise the local control plane (full mode, `.cluster/`) is started — built from Go modules on first use —
 *    or reused if `make cluster-up` already started it; the CRDs (Network v1 + v2) and the Network webhooks are
 *    installed pointing at this machine, the manager serves them on 127.0.0.1:9443, and config/samples is applied in
 *    `default` once it does. On exit the webhook configuration is deleted (the CRD keeps its conversion).
 *  - Neutron: $NEUTRON_CLOUD_CONFIG if set (`none`: the Network controller off); else if Debian's neutron-server is
 *    installed, `hack/neutron/up.sh` starts a local one; else the Network controller is off and this says why.
 *  - The manager runs with WATCH_NAMESPACE=default (unless set), logs through pino-pretty, and Ctrl-C stops the
 *    manager gracefully and then everything this script started (not what it reused).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { readCRDs, type CustomResourceDefinition } from '../pkg/testing/crds.ts';
import {
  caBundleOf, createWebhookServing, localConversion, localWebhookConfiguration, readWebhookConfigurations,
} from '../pkg/testing/webhooks.ts';
import { observabilityHints } from './observability.ts';

const run = promisify(execFile);
/** Where this process serves the Network webhooks for the local control plane (kubebuilder's port, on loopback). */
const localWebhookPort = 9443;
const localWebhookConfigurationName = 'ts-controller-manager-validating-webhook-configuration';

/** Resolves true once a TCP connection to host:port succeeds (polled every 200 ms), false after `timeoutMs`. */
async function portOpen(host: string, port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect({ host, port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}
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

  // The local control plane runs on this machine, so its API server can call this process: the Network webhooks are
  // served here (validation, and the v1 ↔ v2 conversion of config/crd's two-version CRD) on 127.0.0.1:9443 with a
  // certificate made for 127.0.0.1, and config/webhook is installed with `url` instead of the in-cluster Service (what
  // startTestEnv does). A configured cluster cannot reach this process: there config/crd/bases is installed (the
  // single-version v1 Network, no conversion webhook) and no webhook is served; on a cluster where config/default
  // installed the v2-stored CRD the API server refuses that apply (v2 is in status.storedVersions): nothing is downgraded.
  const webhookArgs: string[] = [];
  if (applySamples) {
    const serving = await createWebhookServing(join(repo, '.cluster', 'webhook-certs'), '127.0.0.1', localWebhookPort);
    const local = (crd: CustomResourceDefinition): CustomResourceDefinition => localConversion(crd, serving.bindAddress, caBundleOf(serving));
    const configs = readWebhookConfigurations([join(repo, 'config/webhook/manifests.yaml')]).map((c) => ({
      ...localWebhookConfiguration(c, serving.bindAddress, caBundleOf(serving)), metadata: { ...c.metadata, name: localWebhookConfigurationName },
    }));
    const manifests = join(repo, '.cluster', 'run-manifests.json');
    writeFileSync(manifests, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [
      ...readCRDs([join(repo, 'config/crd/bases/samplecontroller.k8s.io_foos.yaml'), join(repo, 'config/crd/v2')]).map(local), ...configs,
    ] }));
    say(`installing CRDs (Foo; Network v1 + v2 converted by this process) and the Network webhooks, served on ${serving.bindAddress}`);
    await kubectl(kubectlBin, kubeconfig, 'apply', '--server-side', '--force-conflicts', '-f', manifests);
    cleanups.push(async () => {
      // Writes must not fail once nothing serves the webhook (a reused control plane outlives this process); the CRD
      // keeps its conversion: v1 reads of Networks wait for the next make run (v2 reads work).
      say('removing the local webhook configuration');
      await kubectl(kubectlBin, kubeconfig, 'delete', '--ignore-not-found', 'validatingwebhookconfiguration', localWebhookConfigurationName);
    });
    webhookArgs.push(`--webhook-cert-path=${serving.certDir}`, `--webhook-bind-address=${serving.bindAddress}`);
  } else {
    say('installing CRDs (config/crd/bases; no webhooks: the cluster cannot call this process)');
    await kubectl(kubectlBin, kubeconfig, 'apply', '--server-side', '-f', 'config/crd/bases');
  }
  await kubectl(kubectlBin, kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s',
    'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io');

  // Metrics are off by default (kubebuilder v4): locally they are plain HTTP on loopback, so `curl` works without a
  // token. ARGS come later and win (e.g. ARGS='--metrics-secure' or ARGS='--metrics-bind-address=0').
  const localMetrics = ['--metrics-bind-address=127.0.0.1:8080', '--metrics-secure=false'];
  const args = [join(repo, 'cmd/manager/main.ts'), `--kubeconfig=${kubeconfig}`, ...localMetrics, ...webhookArgs, ...process.argv.slice(2)];
  let neutron = process.env['NEUTRON_CLOUD_CONFIG'];
  if (neutron === 'none') {
    say('Network controller: OFF (NEUTRON_CLOUD_CONFIG=none); the Network webhooks are served all the same');
    neutron = undefined;
  } else if (neutron) {
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
  const exited = new Promise<number>((res) => manager.on('exit', (c) => res(c ?? 1)));
  if (applySamples) {
    // The samples' Network goes through the webhooks: applied once this process serves them.
    const serving = await Promise.race([portOpen('127.0.0.1', localWebhookPort, 60_000), exited.then(() => false)]);
    if (serving) {
      say('applying config/samples in namespace default');
      await kubectl(kubectlBin, kubeconfig, 'apply', '-n', 'default', '-k', 'config/samples')
        .catch((err: unknown) => say(`applying config/samples failed: ${err instanceof Error ? err.message : String(err)}`));
    }
  }
  const code = await exited;
  process.off('SIGINT', ignore);
  await new Promise((res) => pretty.on('exit', res));
  say(`manager exited with code ${code}`);
  return code;
}

main().then((code) => process.exit(code), (err: unknown) => {
  say(`failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
