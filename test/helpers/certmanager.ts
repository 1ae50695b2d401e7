/**
 * A real cert-manager for the tests: its controllers built from the pinned Go module (hack/tools/cert-manager, cached
 * by hack/build-tools.sh like the control plane) with the module's own CRDs, and its CA injector
 * (hack/tools/cert-manager-cainjector, the same module), run as local processes against a control plane (the shared one
 * by default, or a test's own, as test/helm.e2e.ts's node-mode one) for one namespace; `renew` does what `cmctl renew` does; and `projectSecret`
 * writes a Secret into a directory the way the kubelet updates a Secret volume, so a process reads it as a Pod would.
 */
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import type { ControlPlane } from '../cluster/controlplane.ts';
import { cluster, expectStatus, StopTrying, waitFor } from './cluster.ts';
import { kubectl, repoRoot } from './crds.ts';
import { writeSecretVolume } from './pki.ts';

const run = promisify(execFile);

/** A directory `hack/build-tools.sh --print-env --no-build` prints as `key` (built by `make tools`; never built from here). */
async function builtDir(key: string): Promise<string> {
  const { stdout } = await run('bash', [join(repoRoot, 'hack', 'build-tools.sh'), '--print-env', '--no-build'])
    .catch((err: Error & { stderr?: string }) => {
      throw new Error(`cert-manager is not built (run \`make tools\`): ${err.stderr ?? err.message}`);
    });
  const dir = new RegExp(`^${key}=(.+)$`, 'm').exec(stdout)?.[1];
  if (!dir) throw new Error(`hack/build-tools.sh printed no ${key}: ${stdout}`);
  return dir;
}

/** The directory with `cert-manager-controller` and `crds.yaml`. */
export const certManagerBinDir = (): Promise<string> => builtDir('CERT_MANAGER_BIN_DIR');

/** The directory with `cert-manager-cainjector`. */
export const certManagerCAInjectorBinDir = (): Promise<string> => builtDir('CERT_MANAGER_CAINJECTOR_BIN_DIR');

/** Installs cert-manager's CRDs (from the pinned module) and waits until they are Established (idempotent). */
export async function installCertManagerCRDs(binDir: string): Promise<void> {
  await kubectl('apply', '--server-side', '--force-conflicts', '-f', join(binDir, 'crds.yaml'));
  // Polled rather than `kubectl wait`, which fails on a CRD whose status the API server has not written yet.
  const cp = cluster();
  for (const name of ['issuers', 'clusterissuers', 'certificates', 'certificaterequests']) {
    await waitFor(`CRD ${name}.cert-manager.io Established`, async () => {
      const crd = expectStatus<{ status?: { conditions?: Condition[] } }>(
        await cp.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}.cert-manager.io`), 200, name);
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
  }
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface CertificateObject {
  metadata: { name: string; namespace: string; generation: number; resourceVersion: string };
  spec: { secretName: string; dnsNames?: string[] };
  status?: { conditions?: Condition[]; revision?: number; notAfter?: string };
}

/** A cert-manager process with its klog output kept; stopped (SIGTERM, then SIGKILL after 10 s) when the test ends. */
class LoggedProcess {
  private readonly logText: string[] = [];
  exit: string | undefined;
  readonly bin: string;

  constructor(t: { after(fn: () => Promise<void>): void }, bin: string, args: string[]) {
    this.bin = bin;
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    for (const s of [proc.stdout, proc.stderr]) s.setEncoding('utf8').on('data', (d: string) => this.logText.push(d));
    const exited = new Promise<void>((res) => proc.on('exit', (code, signal) => {
      this.exit = `exit ${code ?? signal}`;
      res();
    }));
    t.after(async () => {
      if (this.exit) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    });
  }

  get log(): string {
    return this.logText.join('');
  }
}

export class CertManager {
  private readonly controller: LoggedProcess;
  private cainjector: LoggedProcess | undefined;
  readonly namespace: string;
  private readonly cp: ControlPlane;

  private constructor(controller: LoggedProcess, namespace: string, cp: ControlPlane) {
    this.controller = controller;
    this.namespace = namespace;
    this.cp = cp;
  }

  /**
   * Starts cert-manager's controllers with the admin kubeconfig of `cp`, watching only `namespace`; stopped (SIGTERM,
   * then SIGKILL after 10 s) when the test ends. The methods below default to `cp`.
   */
  static start(t: { after(fn: () => Promise<void>): void }, binDir: string, namespace: string,
    cp: ControlPlane = cluster()): CertManager {
    return new CertManager(new LoggedProcess(t, join(binDir, 'cert-manager-controller'), [
      `--kubeconfig=${cp.kubeconfig}`, `--namespace=${namespace}`, '--v=2',
    ]), namespace, cp);
  }

  /**
   * Also starts cert-manager's CA injector (`cert-manager-cainjector` in `binDir`) for the same namespace and control
   * plane: it fills the caBundle of every ValidatingWebhookConfiguration, MutatingWebhookConfiguration, CRD conversion
   * and APIService annotated `cert-manager.io/inject-ca-from: <namespace>/<Certificate>`.
   */
  startCAInjector(t: { after(fn: () => Promise<void>): void }, binDir: string): void {
    this.cainjector = new LoggedProcess(t, join(binDir, 'cert-manager-cainjector'), [
      `--kubeconfig=${this.cp.kubeconfig}`, `--namespace=${this.namespace}`, '--v=2',
    ]);
  }

  /** The controller's log so far (klog), for failure messages. */
  get log(): string {
    return this.controller.log;
  }

  /** Rethrows `err` with the log tails of cert-manager's processes appended. */
  readonly withLog = (err: unknown): never => {
    const tail = (p: LoggedProcess): string => `${p.bin.slice(p.bin.lastIndexOf('/') + 1)} (${p.exit ?? 'running'}) log tail:\n${p.log.split('\n').slice(-40).join('\n')}`;
    throw new Error([String(err), ...[this.controller, this.cainjector].filter((p) => p !== undefined).map(tail)].join('\n'));
  };

  /** Throws at once if a process of cert-manager has exited. */
  alive(): void {
    for (const p of [this.controller, this.cainjector]) if (p?.exit) throw new StopTrying(`${p.bin} exited (${p.exit})`);
  }

  async certificate(name: string, cp: ControlPlane = this.cp): Promise<CertificateObject> {
    return expectStatus<CertificateObject>(
      await cp.get(`/apis/cert-manager.io/v1/namespaces/${this.namespace}/certificates/${name}`), 200, `Certificate ${name}`);
  }

  /**
   * The certificate (PEM) the CertificateRequest of revision `revision` of Certificate `name` was signed with — what
   * cert-manager's issuing controller copies into the Secret for that revision.
   */
  async requestedCertificate(name: string, revision: number, cp: ControlPlane = this.cp): Promise<string> {
    interface Request { metadata: { annotations?: Record<string, string> }; status?: { certificate?: string } }
    const list = expectStatus<{ items: Request[] }>(
      await cp.get(`/apis/cert-manager.io/v1/namespaces/${this.namespace}/certificaterequests`), 200, 'CertificateRequests');
    const req = list.items.find((r) => r.metadata.annotations?.['cert-manager.io/certificate-name'] === name &&
      r.metadata.annotations['cert-manager.io/certificate-revision'] === String(revision));
    if (!req?.status?.certificate) throw new Error(`no signed CertificateRequest for ${name} revision ${revision}`);
    return Buffer.from(req.status.certificate, 'base64').toString('utf8');
  }

  /** Waits until the Certificate is Ready=True at `revision` (cert-manager's issuance counter) or later. */
  async waitReady(name: string, revision = 1, timeoutMs = 90_000): Promise<CertificateObject> {
    return waitFor(`Certificate ${name} Ready at revision ${revision}`, async () => {
      this.alive();
      const crt = await this.certificate(name);
      const ready = crt.status?.conditions?.find((c) => c.type === 'Ready');
      return ready?.status === 'True' && ready.observedGeneration === crt.metadata.generation && (crt.status?.revision ?? 0) >= revision
        ? crt : undefined;
    }, { timeoutMs }).catch(this.withLog);
  }

  /**
   * Triggers a re-issuance as `cmctl renew` does: sets the Certificate's Issuing condition to True (reason
   * ManuallyTriggered) through the status subresource; cert-manager's issuing machinery does the rest.
   */
  async renew(name: string, cp: ControlPlane = this.cp): Promise<void> {
    const crt = await this.certificate(name, cp);
    const issuing: Condition = {
      type: 'Issuing', status: 'True', reason: 'ManuallyTriggered', message: 'Certificate re-issuance manually triggered',
      lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), observedGeneration: crt.metadata.generation,
    };
    const status = { ...crt.status, conditions: [...(crt.status?.conditions ?? []).filter((c) => c.type !== 'Issuing'), issuing] };
    expectStatus(await cp.request('PUT', `/apis/cert-manager.io/v1/namespaces/${this.namespace}/certificates/${name}/status`,
      { ...crt, apiVersion: 'cert-manager.io/v1', kind: 'Certificate', status }), 200, 'Certificate status (Issuing)');
  }
}

export interface SecretProjection {
  /** resourceVersion of the Secret last written to the directory. */
  readonly resourceVersion: string | undefined;
  /** The files last written (decoded). */
  readonly files: Record<string, string>;
  /** Writes, counting the first. */
  readonly updates: number;
}

/**
 * Projects Secret `ns/name` into `dir` like the kubelet's Secret volume: polls the Secret (every 200 ms — the kubelet
 * syncs within about a minute) and writes each new version with {@link writeSecretVolume} (the atomic `..data` swap).
 * Resolves once the first version (with every key of `keys`) is on disk; stops when the test ends.
 */
export async function projectSecret(t: { after(fn: () => void): void }, ns: string, name: string, dir: string,
  keys: string[], cp: ControlPlane = cluster()): Promise<SecretProjection> {
  const state: { resourceVersion: string | undefined; files: Record<string, string>; updates: number } =
    { resourceVersion: undefined, files: {}, updates: 0 };
  let stopped = false;
  let failure: Error | undefined;
  const sync = async (): Promise<void> => {
    const res = await cp.get(`/api/v1/namespaces/${ns}/secrets/${name}`);
    if (res.status === 404) return;
    const secret = expectStatus<{ metadata: { resourceVersion: string }; data?: Record<string, string> }>(res, 200, `Secret ${name}`);
    if (secret.metadata.resourceVersion === state.resourceVersion) return;
    const files = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    if (!keys.every((k) => files[k])) return; // not issued yet
    await writeSecretVolume(dir, files);
    failure = undefined;
    Object.assign(state, { resourceVersion: secret.metadata.resourceVersion, files, updates: state.updates + 1 });
  };
  const loop = async (): Promise<void> => {
    while (!stopped) {
      await sync().catch((err: unknown) => (failure = err instanceof Error ? err : new Error(JSON.stringify(err))));
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  void loop();
  t.after(() => (stopped = true));
  await waitFor(`Secret ${ns}/${name} projected into ${dir}`, () => {
    if (failure) throw failure;
    return state.updates > 0;
  }, { timeoutMs: 90_000 });
  return state;
}
