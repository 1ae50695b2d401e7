/**
 * A real Kubernetes control plane for a test suite — controller-runtime envtest's job, in TypeScript:
 *
 *   const env = await startTestEnv({ crdPaths: ['config/crd/bases'] });
 *   const mgr = new ControllerManager({ kubeConfig: env.kubeConfig });   // or KUBECONFIG=env.kubeconfigPath for a process
 *   … await env.client.json('POST', …) …
 *   await env.stop();
 *
 * What runs: etcd + kube-apiserver on loopback (see controlplane.ts for the flags: RBAC, an admin client certificate,
 * TokenRequest, CRDs, Leases), from binaries found as binaries.ts says (KUBEBUILDER_ASSETS, else the
 * ts-controller-manager build cache). No controllers run: namespaces never finish deleting, Deployments get no Pods,
 * nothing garbage-collects — as in envtest. Every environment is private (own ports, own temp directory).
 *
 * Webhooks (option `webhooks`, webhooks.ts): the test serves them itself; the environment makes the certificate,
 * points the configurations at `env.webhook.bindAddress` and installs them; `env.waitForWebhooks()` once serving.
 *
 * The manager as its ServiceAccount (option `rbacPaths`, rbac.ts): config/rbac is installed as it is, and
 * `new ControllerManager({ ...env.managerConnection })` connects with a token of the ServiceAccount it binds, so RBAC
 * refuses the manager what it would refuse the deployed Pod; each refusal is recorded (`env.refusals`), names the
 * missing rule, and stops `eventually` and `startManager` at once. Without the option `managerConnection` is the admin.
 *
 * Ownership and teardown: the process that called startTestEnv owns the environment. `stop()` kills kube-apiserver,
 * then etcd (each its own process group), closes `client` and removes the directory; it is idempotent. If the owner
 * dies without calling it (crash, SIGKILL, a runner's timeout, or exiting with the environment still up), a detached
 * reaper process (reaper.ts, started before any component) does the same within about a second. A failed start
 * stops what it started and rejects with the failing component's log tail.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { KubeConfig } from '../client/kubeconfig.ts';
import { RestClient } from '../client/rest.ts';
import type { RequestTransport } from '../client/transport.ts';
import type { Refusal } from '../rbac/refusal.ts';
import { auditOf, installRbac, readRbac, RefusalRecorder, serviceAccountOf, type ServiceAccountIdentity } from './rbac.ts';
import { unwatchRefusals, watchRefusals } from './refused.ts';
import { adminKubeconfig, etcdCommand, kubeApiserverCommand, probe, type ComponentCommand } from './controlplane.ts';
import { findBinaries, type ControlPlaneBinaries } from './binaries.ts';
import { applyCRDs, readCRDs } from './crds.ts';
import { createPki, type Pki } from './pki.ts';
import { delay, freePort, isAlive, killGroup, signalGroup, tail } from './process.ts';
import {
  createWebhookServing, installWebhookConfigurations, localConversion, readWebhookConfigurations, waitForWebhooks,
  caBundleOf, type WebhookConfiguration, type WebhookInstallOptions, type WebhookServing,
} from './webhooks.ts';

/** Options of startTestEnv: CRDs to install, where the binaries are, extra flags, timeouts. */
export interface TestEnvOptions {
  /**
   * CRD manifests to install before startTestEnv resolves (files or directories): read and checked before anything
   * starts; waited for until Established and every served version answers a LIST with 200.
   */
  crdPaths?: string[];
  /** Directory holding etcd and kube-apiserver; default $KUBEBUILDER_ASSETS, then the ts-controller-manager cache. */
  binaryAssetsDirectory?: string;
  /**
   * The Kubernetes release to run ("1.34", "v1.34" or "v1.34.4"; a minor means any of its patches), default
   * $KUBERNETES_VERSION, else the default release if installed, else the newest one found. Looked up as binaries.ts
   * says; a set of another version is an error, never a silent substitute. In a clone of this repository
   * `KUBERNETES_VERSION=1.34 bash hack/build-tools.sh --envtest` builds one into the cache (docs/compatibility.md).
   */
  kubernetesVersion?: string;
  /** Extra kube-apiserver flags (appended; a later flag wins), e.g. ['--watch-cache=false']. */
  apiServerFlags?: string[];
  /** Extra etcd flags (appended). */
  etcdFlags?: string[];
  /** Time each component (and the CRDs) may take to become ready; default 60 s. */
  startTimeoutMs?: number;
  /** Progress lines ("etcd is up (0.4 s)"); default: none. */
  log?: (message: string) => void;
  /** Aborting it stops a start in progress (what was started is torn down) and rejects. */
  signal?: AbortSignal;
  /**
   * Webhooks served by the test itself (envtest's WebhookInstallOptions; webhooks.ts): a CA and a serving certificate
   * are made, the configurations in `paths` / `mutatingWebhooks` / `validatingWebhooks` and the CRDs' conversion
   * webhooks are pointed from their `service` at `https://<localServingHost>:<port><path>` with that CA, and
   * installed. Serve them where `env.webhook` says, then `await env.waitForWebhooks()`.
   */
  webhooks?: WebhookInstallOptions;
  /**
   * The project's RBAC manifests (files or directories, e.g. config/rbac; rbac.ts says what is read), installed before
   * startTestEnv resolves; `managerConnection` is then the ServiceAccount they bind (a TokenRequest token), and every
   * request RBAC refuses it fails the test with the rule to add. Read and checked before anything starts.
   */
  rbacPaths?: string[];
}

/**
 * What the manager under test connects with — spread it into ControllerManagerOptions:
 * `new ControllerManager({ ...env.managerConnection, logger })`.
 */
export interface ManagerConnection {
  /** The admin's kubeconfig, or with `rbacPaths` the ServiceAccount's. */
  readonly kubeConfig: KubeConfig;
  /** With `rbacPaths`: the ServiceAccount's connection, recording RBAC refusals (rbac.ts). */
  readonly transport?: RequestTransport;
}

type Component = 'etcd' | 'kube-apiserver';

/**
 * The processes and directory of one environment while it starts and runs: what stop() and a failed start tear
 * down. Owned by the TestEnv once startTestEnv resolves.
 */
class Processes {
  readonly pids = new Map<Component, number>();
  readonly dir: string;
  private readonly reaper: number | undefined;

  constructor(dir: string, reaper: number | undefined) {
    this.dir = dir;
    this.reaper = reaper;
  }

  logFile(name: Component): string {
    return join(this.dir, name, `${name}.log`);
  }

  /** Spawns a component detached (its own process group), stdout and stderr to `<dir>/<name>/<name>.log`. */
  async spawn(name: Component, cmd: ComponentCommand): Promise<void> {
    mkdirSync(join(this.dir, name), { recursive: true });
    const fd = openSync(this.logFile(name), 'a');
    const child = spawn(cmd.bin, cmd.args, { detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    child.unref();
    const pid = await new Promise<number>((res, rej) => {
      child.once('spawn', () => res(child.pid ?? -1));
      child.once('error', (err) => rej(new Error(`${name} failed to start: ${err.message} (${cmd.bin})`)));
    });
    this.pids.set(name, pid);
  }

  /** Polls the component's health URL until 200; rejects if it exits, after `timeoutMs`, or when `signal` aborts. */
  async waitReady(name: Component, cmd: ComponentCommand, pki: Pki, timeoutMs: number, signal: AbortSignal | undefined,
    log: (m: string) => void): Promise<void> {
    const t0 = Date.now();
    let last: string;
    for (;;) {
      signal?.throwIfAborted();
      const pid = this.pids.get(name);
      if (pid === undefined || !isAlive(pid)) {
        throw new Error(`${name} exited during startup; last lines of its log:\n${tail(this.logFile(name))}`);
      }
      try {
        const res = await probe(cmd.health, pki, 2_000);
        if (res.status === 200) break;
        last = `HTTP ${res.status}: ${res.body.slice(0, 300)}`;
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() - t0 > timeoutMs) {
        throw new Error(`${name} did not become ready within ${timeoutMs / 1000} s (${cmd.health}: ${last}); ` +
          `last lines of its log:\n${tail(this.logFile(name))}`);
      }
      await delay(50);
    }
    log(`${name} is up (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }

  /** kube-apiserver, then etcd (SIGTERM to the group, SIGKILL after 5 s); removes `dir`; ends the reaper. */
  async stop(): Promise<void> {
    for (const name of ['kube-apiserver', 'etcd'] as const) {
      const pid = this.pids.get(name);
      if (pid !== undefined) await killGroup(pid, 5_000);
    }
    rmSync(this.dir, { recursive: true, force: true });
    if (this.reaper !== undefined) signalGroup(this.reaper, 'SIGTERM');
  }
}

/** The running environment: connection details, an admin client, and stop(). See the file comment for ownership. */
export class TestEnv {
  /** https://127.0.0.1:<port> */
  readonly server: string;
  /** A kubeconfig file with the admin (system:masters) credential: KUBECONFIG for processes and kubectl. */
  readonly kubeconfigPath: string;
  /** The same kubeconfig loaded: `new ControllerManager({ kubeConfig: env.kubeConfig })`. */
  readonly kubeConfig: KubeConfig;
  /** An admin client (its metrics on a private registry); closed by stop(). */
  readonly client: RestClient;
  /** The etcd, kube-apiserver (and kubectl) this environment runs, and where they were found. */
  readonly binaries: ControlPlaneBinaries;
  /** The environment's temporary directory (PKI, data, `<component>/<component>.log`); removed by stop(). */
  readonly dir: string;
  /** Names of the CRDs installed so far (by crdPaths and installCRDs). */
  readonly crds: string[] = [];
  /** Wall time startTestEnv took, in milliseconds (CRDs included). */
  readonly startMs: number;
  /**
   * With the `webhooks` option: where the test's webhook server must listen (`bindAddress`) and the certificate
   * directory it must serve from (`certDir`: tls.crt, tls.key, ca.crt), e.g.
   * `new ControllerManager({ kubeConfig: env.kubeConfig, webhook: { bindAddress: env.webhook.bindAddress, certDir: env.webhook.certDir } })`.
   * Undefined without the option.
   */
  readonly webhook: WebhookServing | undefined;
  /** `<kind>/<name>` of the webhook configurations installed. */
  readonly webhookConfigurations: string[] = [];
  /**
   * With `rbacPaths`: the ServiceAccount the manager under test runs as (its kubeconfig for a manager run as a
   * process); undefined without.
   */
  readonly serviceAccount: ServiceAccountIdentity | undefined;
  /** What the manager under test connects with (see ManagerConnection): the ServiceAccount's with `rbacPaths`, else the admin's. */
  readonly managerConnection: ManagerConnection;
  private readonly processes: Processes;
  private readonly recorder: RefusalRecorder | undefined;
  private stopping: Promise<void> | undefined;

  private constructor(init: { server: string; kubeconfigPath: string; kubeConfig: KubeConfig; client: RestClient;
    binaries: ControlPlaneBinaries; processes: Processes; startMs: number; webhook: WebhookServing | undefined;
    serviceAccount: ServiceAccountIdentity | undefined; recorder: RefusalRecorder | undefined }) {
    this.server = init.server;
    this.kubeconfigPath = init.kubeconfigPath;
    this.kubeConfig = init.kubeConfig;
    this.client = init.client;
    this.binaries = init.binaries;
    this.processes = init.processes;
    this.dir = init.processes.dir;
    this.startMs = init.startMs;
    this.webhook = init.webhook;
    this.serviceAccount = init.serviceAccount;
    this.recorder = init.recorder;
    this.managerConnection = init.serviceAccount && init.recorder
      ? { kubeConfig: init.serviceAccount.kubeConfig, transport: init.recorder }
      : { kubeConfig: init.kubeConfig };
    if (init.recorder) watchRefusals(init.recorder);
  }

  /** With `rbacPaths`: what RBAC refused the manager so far, one per verb, resource and namespace (else none). */
  get refusals(): readonly Refusal[] {
    return this.recorder?.refusals ?? [];
  }

  /** Forgets the refusals so far, e.g. after a test removed a rule on purpose and restored it. */
  clearRefusals(): void {
    this.recorder?.clear();
  }

  /** Use startTestEnv(). */
  static async start(opts: TestEnvOptions = {}): Promise<TestEnv> {
    const t0 = Date.now();
    const log = opts.log ?? ((): void => {});
    const timeoutMs = opts.startTimeoutMs ?? 60_000;
    // The CRDs are read first: a mistyped path fails at once, naming it, before any process is started.
    const crdPaths = opts.crdPaths ?? [];
    let crdsToInstall = crdPaths.length > 0 ? readCRDs(crdPaths) : [];
    const webhookOpts = opts.webhooks;
    const webhookConfigs: WebhookConfiguration[] = webhookOpts ? [
      ...(webhookOpts.paths && webhookOpts.paths.length > 0 ? readWebhookConfigurations(webhookOpts.paths) : []),
      ...(webhookOpts.mutatingWebhooks ?? []), ...(webhookOpts.validatingWebhooks ?? []),
    ] : [];
    const rbac = opts.rbacPaths && opts.rbacPaths.length > 0 ? readRbac(opts.rbacPaths) : undefined;
    const binaries = findBinaries(opts.binaryAssetsDirectory, process.env, opts.kubernetesVersion ?? (process.env['KUBERNETES_VERSION'] || undefined));
    opts.signal?.throwIfAborted();
    const dir = mkdtempSync(join(tmpdir(), 'tscm-testenv-'));
    const processes = new Processes(dir, startReaper(dir));
    let client: RestClient | undefined;
    let recorder: RefusalRecorder | undefined;
    try {
      const [etcdPort, etcdPeerPort, apiPort, webhookPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
      // etcd needs no certificates: start it first and make the PKI (openssl, about a second) while it boots.
      const etcd = etcdCommand({ dir, bin: binaries.etcd, port: etcdPort, peerPort: etcdPeerPort });
      etcd.args.push(...(opts.etcdFlags ?? []));
      await processes.spawn('etcd', etcd);
      mkdirSync(join(dir, 'pki'));
      const pki = createPki(join(dir, 'pki'));
      const webhook = webhookOpts
        ? await createWebhookServing(join(dir, 'webhook-certs'), webhookOpts.localServingHost ?? '127.0.0.1', webhookOpts.localServingPort ?? webhookPort)
        : undefined;
      if (webhook) crdsToInstall = crdsToInstall.map((crd) => localConversion(crd, webhook.bindAddress, caBundleOf(webhook)));
      const apiserver = kubeApiserverCommand({ dir, bin: binaries.kubeApiserver, port: apiPort, etcdURL: etcd.url, pki });
      // With rbacPaths: the ServiceAccount's requests in an audit log, where refusals of a manager process are found.
      const audit = rbac ? auditOf(serviceAccountOf(rbac).user, dir) : undefined;
      if (audit) {
        writeFileSync(audit.policyFile, audit.policy);
        apiserver.args.push(...audit.flags);
      }
      apiserver.args.push(...(opts.apiServerFlags ?? []));
      const kubeconfigPath = join(dir, 'kubeconfig');
      writeFileSync(kubeconfigPath, adminKubeconfig(apiserver.server, pki), { mode: 0o600 });
      await processes.waitReady('etcd', etcd, pki, timeoutMs, opts.signal, log);
      await processes.spawn('kube-apiserver', apiserver);
      await processes.waitReady('kube-apiserver', apiserver, pki, timeoutMs, opts.signal, log);
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromFile(kubeconfigPath);
      client = new RestClient({ kubeConfig, registry: new Registry(), userAgent: 'ts-controller-manager-testing' });
      const crds = crdsToInstall.length > 0 ? await applyCRDs(client, crdsToInstall, crdPaths, { timeoutMs, signal: opts.signal }) : [];
      const installed = webhook ? await installWebhookConfigurations(client, webhook, webhookConfigs, opts.signal) : [];
      const serviceAccount = rbac
        ? await installRbac(client, kubeConfig, rbac, join(dir, 'manager.kubeconfig'), { timeoutMs, signal: opts.signal })
        : undefined;
      if (serviceAccount) recorder = new RefusalRecorder(serviceAccount.kubeConfig, (opts.rbacPaths ?? []).map(displayPath).join(', '), audit?.log);
      const env = new TestEnv({
        server: apiserver.server, kubeconfigPath, kubeConfig, client, binaries, processes, startMs: Date.now() - t0, webhook, serviceAccount, recorder,
      });
      env.crds.push(...crds);
      env.webhookConfigurations.push(...installed);
      log(`test environment ready in ${(env.startMs / 1000).toFixed(1)} s at ${env.server} (binaries: ${binaries.source})`);
      return env;
    } catch (err) {
      recorder?.close();
      await client?.close();
      await processes.stop();
      throw err;
    }
  }

  /**
   * Installs more CRDs (files or directories) and waits until they are Established and listable; returns their names.
   * With the `webhooks` option, their conversion webhooks are made local as at start.
   */
  async installCRDs(paths: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<string[]> {
    const webhook = this.webhook;
    const crds = readCRDs(paths).map((crd) => (webhook ? localConversion(crd, webhook.bindAddress, caBundleOf(webhook)) : crd));
    const names = await applyCRDs(this.client, crds, paths, opts);
    for (const n of names) if (!this.crds.includes(n)) this.crds.push(n);
    return names;
  }

  /**
   * With the `webhooks` option: resolves once the API server has loaded the webhook configurations and reaches the
   * test's webhook server (started by now on `webhook.bindAddress` with `webhook.certDir`) over TLS — from then on
   * every write they cover is intercepted. Rejects after `timeoutMs` (default 30 s) saying what the API server
   * answered, or when `signal` aborts. See webhooks.ts for how it knows.
   */
  async waitForWebhooks(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    if (!this.webhook) throw new Error('startTestEnv was started without the webhooks option: there is nothing to wait for');
    await waitForWebhooks(this.client, this.webhook, opts);
  }

  /** Pids of the components still running (each leads its own process group). */
  running(): number[] {
    return [...this.processes.pids.values()].filter(isAlive);
  }

  /**
   * Closes `client`, stops kube-apiserver, then etcd (SIGTERM to each process group, SIGKILL after 5 s), removes
   * `dir` and ends the reaper. Safe to call more than once (later calls wait for the first).
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.recorder) unwatchRefusals(this.recorder);
      this.recorder?.close();
      await this.client.close();
      await this.processes.stop();
    })();
    return this.stopping;
  }
}

/** `path` relative to the working directory when it is inside it (how a test's message names config/rbac). */
function displayPath(path: string): string {
  const r = relative(process.cwd(), path);
  return r && !r.startsWith('..') && !isAbsolute(r) ? r : path;
}

/** Starts the reaper (reaper.ts) for `dir`; undefined if it could not be spawned (then only stop() cleans up). */
function startReaper(dir: string): number | undefined {
  // Running from the sources (the ts-controller-manager-source condition) this file is env.ts, next to reaper.ts;
  // from the package it is dist/pkg/testing/env.js next to reaper.js.
  const here = fileURLToPath(import.meta.url);
  const script = join(here, '..', here.endsWith('.ts') ? 'reaper.ts' : 'reaper.js');
  if (!existsSync(script)) return undefined;
  const child = spawn(process.execPath, [script, String(process.pid), dir], { detached: true, stdio: 'ignore' });
  child.unref();
  return child.pid;
}

/**
 * Starts a private control plane (etcd + kube-apiserver) for a test suite, installs `crdPaths`, and resolves once
 * everything is ready. Call `stop()` when the suite ends (e.g. in `after`); a crashed test process is cleaned up by
 * the reaper. Throws when no binaries are found, saying how to get them.
 */
export function startTestEnv(opts: TestEnvOptions = {}): Promise<TestEnv> {
  return TestEnv.start(opts);
}
