/**
 * A real cert-manager for the integration tests: its controllers built from the pinned Go module
 * (hack/tools/cert-manager, cached by hack/build-tools.sh like the control plane) with the module's own CRDs, run
 * against the shared control plane for one namespace; `renew` does what `cmctl renew` does; and `projectSecret`
 * writes a Secret into a directory the way the kubelet updates a Secret volume, so a process reads it as a Pod would.
 */
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import type { ControlPlane } from '../cluster/controlplane.ts';
import { cluster, expectStatus, waitFor } from './cluster.ts';
import { kubectl, repoRoot } from './crds.ts';
import { writeSecretVolume } from './pki.ts';

const run = promisify(execFile);

/** The directory with `cert-manager-controller` and `crds.yaml` (built by `make tools`; never built from here). */
export async function certManagerBinDir(): Promise<string> {
  const { stdout } = await run('bash', [join(repoRoot, 'hack', 'build-tools.sh'), '--print-env', '--no-build'])
    .catch((err: Error & { stderr?: string }) => {
      throw new Error(`cert-manager is not built (run \`make tools\`): ${err.stderr ?? err.message}`);
    });
  const dir = /^CERT_MANAGER_BIN_DIR=(.+)$/m.exec(stdout)?.[1];
  if (!dir) throw new Error(`hack/build-tools.sh printed no CERT_MANAGER_BIN_DIR: ${stdout}`);
  return dir;
}

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

export class CertManager {
  private readonly logText: string[] = [];
  private exit: string | undefined;
  readonly namespace: string;

  private constructor(namespace: string) {
    this.namespace = namespace;
  }

  /**
   * Starts cert-manager's controllers with the admin kubeconfig, watching only `namespace`; stopped (SIGTERM, then
   * SIGKILL after 10 s) when the test ends.
   */
  static start(t: { after(fn: () => Promise<void>): void }, binDir: string, namespace: string,
    cp: ControlPlane = cluster()): CertManager {
    const cm = new CertManager(namespace);
    const proc = spawn(join(binDir, 'cert-manager-controller'), [
      `--kubeconfig=${cp.kubeconfig}`, `--namespace=${namespace}`, '--v=2',
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    for (const s of [proc.stdout, proc.stderr]) s.setEncoding('utf8').on('data', (d: string) => cm.logText.push(d));
    const exited = new Promise<void>((res) => proc.on('exit', (code, signal) => {
      cm.exit = `exit ${code ?? signal}`;
      res();
    }));
    t.after(async () => {
      if (cm.exit) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    });
    return cm;
  }

  /** Its log so far (klog), for failure messages. */
  get log(): string {
    return this.logText.join('');
  }

  /** Rethrows `err` with cert-manager's log tail appended; throws at once if the controller has exited. */
  readonly withLog = (err: unknown): never => {
    throw new Error(`${String(err)}\ncert-manager (${this.exit ?? 'running'}) log tail:\n${this.log.split('\n').slice(-40).join('\n')}`);
  };

  private alive(): void {
    if (this.exit) throw new Error(`cert-manager-controller exited (${this.exit})`);
  }

  async certificate(name: string, cp: ControlPlane = cluster()): Promise<CertificateObject> {
    return expectStatus<CertificateObject>(
      await cp.get(`/apis/cert-manager.io/v1/namespaces/${this.namespace}/certificates/${name}`), 200, `Certificate ${name}`);
  }

  /**
   * The certificate (PEM) the CertificateRequest of revision `revision` of Certificate `name` was signed with — what
   * cert-manager's issuing controller copies into the Secret for that revision.
   */
  async requestedCertificate(name: string, revision: number, cp: ControlPlane = cluster()): Promise<string> {
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
  async renew(name: string, cp: ControlPlane = cluster()): Promise<void> {
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
