/**
 * `ts-controller-manager dev [--crd PATH ...] [--webhooks PATH ...] [--kubernetes-version V]`: the local control plane of
 * `ts-controller-manager/testing` (startTestEnv: etcd + kube-apiserver on loopback, RBAC, an admin client
 * certificate) with the project's CRDs installed and its webhook configurations pointed at this machine, for running
 * and poking at a controller by hand: `kubectl` and `npm start` (node main.ts) with the printed KUBECONFIG.
 *
 * Webhooks, as `make run` serves this repository's: the configurations of `--webhooks` (default config/webhook when it
 * holds one) are installed with every `clientConfig.service` replaced by `https://127.0.0.1:<--webhook-port><path>`
 * and the caBundle of a CA made for this session, whose serving certificate for 127.0.0.1 is written as tls.crt /
 * tls.key (and ca.crt) into `--webhook-cert-dir`. The defaults, port 9443 and /tmp/k8s-webhook-server/serving-certs,
 * are a scaffolded main.ts's (and kubebuilder's), so `npm start` serves the webhooks with no flag. CRDs converted by a
 * webhook Service are pointed at the same address. `--no-webhooks` or ENABLE_WEBHOOKS=false installs none.
 *
 * Output contract (test/dev.test.ts): progress lines on stderr; once everything is ready, exactly one line on stdout,
 * `export KUBECONFIG=<path>` (an admin kubeconfig inside the environment's temporary directory), so
 * `eval "$(ts-controller-manager dev)"` style use works. It then runs until SIGINT or SIGTERM, stops kube-apiserver
 * and etcd, removes the directory and the certificate files it wrote (those still as it wrote them) and exits 0; a
 * second signal during that stop is ignored (the stop is bounded: SIGKILL after 5 s per component). If a component
 * dies on its own it exits 1 naming it (after stopping the rest). If this process is killed outright the
 * environment's reaper removes the environment within about a second (the certificate files stay).
 *
 * Exit codes: 0 stopped by a signal, 1 the control plane failed to start or died, 2 bad invocation.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const defaultCRDPath = 'config/crd/bases';
export const defaultWebhookPath = 'config/webhook';
/** main.ts's (and controller-runtime's) defaults: where `npm start` serves webhooks with no flag. */
export const defaultWebhookPort = 9443;
export const defaultWebhookCertDir = '/tmp/k8s-webhook-server/serving-certs';

export const devUsage = `Usage: ts-controller-manager dev [--crd PATH ...] [--webhooks PATH ...] [flags]

Starts a local control plane (etcd + kube-apiserver, as ts-controller-manager/testing's startTestEnv) with the
given CRDs installed and the webhook configurations pointed at this machine, prints "export KUBECONFIG=..." on stdout
and runs until Ctrl-C (SIGINT) or SIGTERM, then stops everything. In another shell, with that KUBECONFIG, npm start
(node main.ts) serves the webhooks with its defaults: the port and certificate below. The binaries come from
$KUBEBUILDER_ASSETS, setup-envtest's store or the ts-controller-manager cache (ts-controller-manager envtest list).

Flags:
  --crd=PATH              A CRD manifest or a directory of them; repeatable (default "${defaultCRDPath}" if it exists).
  --webhooks=PATH         Mutating/ValidatingWebhookConfigurations (a manifest or a directory); repeatable (default
                          "${defaultWebhookPath}" if it holds one). Their Service becomes https://127.0.0.1:PORT.
  --no-webhooks           Install no webhook configuration (so does ENABLE_WEBHOOKS=false, as for main.ts).
  --webhook-port=PORT     Where the API server calls the webhooks. Default ${defaultWebhookPort}.
  --webhook-cert-dir=DIR  Where the serving certificate is written (tls.crt, tls.key, ca.crt). Default ${defaultWebhookCertDir}.
  --kubernetes-version=V  The Kubernetes release to run: 1.34, v1.34 or v1.34.4 (default $KUBERNETES_VERSION, else the
                          release this library is tested with if installed, else the newest found). One not installed
                          is an error, never another version.
  -h, --help              This text.
`;

export class DevUsageError extends Error {}

/** What `dev` was asked for. */
export interface DevArgs {
  help: boolean;
  crdPaths: string[];
  /** Webhook configuration paths; empty: no webhooks. */
  webhookPaths: string[];
  webhookPort: number;
  webhookCertDir: string;
  /** The Kubernetes release asked for ("1.34", "v1.34.4"); undefined: $KUBERNETES_VERSION, else startTestEnv's default. */
  kubernetesVersion?: string;
}

/**
 * Parses the arguments after `dev`; `cwd` resolves the default CRD and webhook directories, `env` is read for
 * ENABLE_WEBHOOKS. Throws DevUsageError (one line).
 */
export function parseDevArgs(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv = process.env): DevArgs {
  const crdPaths: string[] = [];
  const webhookPaths: string[] = [];
  let webhooks = env['ENABLE_WEBHOOKS'] !== 'false';
  let webhookPort = defaultWebhookPort;
  let webhookCertDir = defaultWebhookCertDir;
  let kubernetesVersion: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-h' || a === '--help') return { help: true, crdPaths: [], webhookPaths: [], webhookPort, webhookCertDir };
    if (a === '--no-webhooks') {
      webhooks = false;
      continue;
    }
    const m = /^--(crd|webhooks|webhook-port|webhook-cert-dir|kubernetes-version)(?:=(.*))?$/.exec(a);
    if (!m?.[1]) throw new DevUsageError(a.startsWith('-') ? `unknown flag ${JSON.stringify(a)}` : `unexpected argument ${JSON.stringify(a)}`);
    const value = m[2] ?? argv[++i];
    if (value === undefined || value.trim() === '') throw new DevUsageError(`flag --${m[1]} needs a non-empty value`);
    if (m[1] === 'crd') crdPaths.push(value);
    else if (m[1] === 'webhooks') webhookPaths.push(value);
    else if (m[1] === 'webhook-cert-dir') webhookCertDir = resolve(cwd, value);
    else if (m[1] === 'kubernetes-version') {
      if (!/^v?1\.\d+(\.\d+)?$/.test(value)) throw new DevUsageError(`flag --kubernetes-version takes a Kubernetes release (1.34, v1.34 or v1.34.4), not ${JSON.stringify(value)}`);
      kubernetesVersion = value;
    }
    else {
      webhookPort = Number(value);
      if (!/^\d+$/.test(value) || webhookPort < 1 || webhookPort > 65535) throw new DevUsageError(`flag --webhook-port takes a port (1-65535), not ${JSON.stringify(value)}`);
    }
  }
  if (crdPaths.length === 0 && existsSync(resolve(cwd, defaultCRDPath))) crdPaths.push(defaultCRDPath);
  if (!webhooks) webhookPaths.length = 0;
  else if (webhookPaths.length === 0 && holdsWebhookConfiguration(resolve(cwd, defaultWebhookPath))) webhookPaths.push(defaultWebhookPath);
  return { help: false, crdPaths, webhookPaths, webhookPort, webhookCertDir, ...(kubernetesVersion !== undefined ? { kubernetesVersion } : {}) };
}

/**
 * Whether the directory has a manifest declaring a Mutating/ValidatingWebhookConfiguration (create webhook writes
 * one with a project's first admission webhook; a conversion-only project has none). Malformed manifests are left for
 * startTestEnv to report.
 */
function holdsWebhookConfiguration(dir: string): boolean {
  const manifests = join(dir, 'manifests.yaml');
  return existsSync(manifests) && /^kind: (Mutating|Validating)WebhookConfiguration$/m.test(readFileSync(manifests, 'utf8'));
}

/** `ts-controller-manager dev …`: resolves the exit code once the control plane is stopped. */
export async function devMain(argv: readonly string[], proc: NodeJS.Process = process): Promise<number> {
  let args;
  try {
    args = parseDevArgs(argv, proc.cwd(), proc.env);
  } catch (err) {
    if (!(err instanceof DevUsageError)) throw err;
    proc.stderr.write(`error: ${err.message}\n${devUsage}`);
    return 2;
  }
  if (args.help) {
    proc.stdout.write(devUsage);
    return 0;
  }
  // Signal handlers first: a Ctrl-C during the start aborts it (what was started is stopped) instead of killing us
  // with the components still running until the reaper notices.
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (!stop.signal.aborted) proc.stderr.write(`${sig}: stopping the control plane\n`);
    stop.abort();
  };
  proc.on('SIGINT', onSignal);
  proc.on('SIGTERM', onSignal);
  try {
    const { startTestEnv } = await import('../../pkg/testing/index.ts');
    let env;
    try {
      env = await startTestEnv({
        crdPaths: args.crdPaths, signal: stop.signal, log: (m) => proc.stderr.write(`${m}\n`),
        ...(args.kubernetesVersion !== undefined ? { kubernetesVersion: args.kubernetesVersion } : {}),
        ...(args.webhookPaths.length > 0 ? { webhooks: { paths: args.webhookPaths, localServingHost: '127.0.0.1', localServingPort: args.webhookPort } } : {}),
      });
    } catch (err) {
      if (stop.signal.aborted) return 0;
      proc.stderr.write(`error: ${(err as Error).message}\n`);
      return 1;
    }
    const written: { path: string; content: Buffer }[] = [];
    try {
      const { gitVersion } = await env.client.json<{ gitVersion: string }>('GET', '/version');
      proc.stderr.write(`Kubernetes ${gitVersion} (${env.binaries.kubeApiserver})\n`);
      if (env.crds.length > 0) proc.stderr.write(`CRDs installed: ${env.crds.join(', ')}\n`);
      if (env.webhook) {
        // The certificate where the manager reads it: main.ts's --webhook-cert-path default, unless told otherwise.
        mkdirSync(args.webhookCertDir, { recursive: true });
        for (const f of ['tls.crt', 'tls.key', 'ca.crt']) {
          const to = join(args.webhookCertDir, f);
          copyFileSync(join(env.webhook.certDir, f), to);
          written.push({ path: to, content: readFileSync(to) });
        }
        proc.stderr.write(`Webhooks (${args.webhookPaths.join(', ')}): the API server calls https://${env.webhook.bindAddress} with the certificate ` +
          `in ${args.webhookCertDir}: serve them there (npm start does by default; --no-webhooks for none)\n`);
        proc.stderr.write(`Webhook configurations installed: ${env.webhookConfigurations.join(', ')}\n`);
      }
      proc.stderr.write('Ctrl-C stops it. Use it from another shell with:\n');
      proc.stdout.write(`export KUBECONFIG=${env.kubeconfigPath}\n`);
      // Until a signal, or until a component dies on its own (checked once a second).
      const started = env.running().length;
      const died = await new Promise<boolean>((res) => {
        const timer = setInterval(() => {
          if (env.running().length < started) {
            clearInterval(timer);
            res(true);
          }
        }, 1_000);
        stop.signal.addEventListener('abort', () => {
          clearInterval(timer);
          res(false);
        }, { once: true });
      });
      if (died) proc.stderr.write(`error: a control plane component exited; its log is under ${env.dir} (removed now)\n`);
      return died ? 1 : 0;
    } finally {
      await env.stop();
      // Only files still as written: another session may have written its own since.
      for (const w of written) {
        if (existsSync(w.path) && readFileSync(w.path).equals(w.content)) rmSync(w.path, { force: true });
      }
      proc.stderr.write('control plane stopped\n');
    }
  } finally {
    proc.off('SIGINT', onSignal);
    proc.off('SIGTERM', onSignal);
  }
}
