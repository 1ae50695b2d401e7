/**
 * A real Kubernetes control plane on loopback, built from upstream Go modules (hack/build-tools.sh).
 *
 * Modes:
 *  - minimal: etcd + kube-apiserver (RBAC on, TokenRequest, CRDs, Leases). Starts in a few seconds.
 *  - full:    minimal + kube-controller-manager (deployment, replicaset, garbage-collector, namespace,
 *             node-lifecycle controllers) + kube-scheduler + kwok with one fake Node, so Deployments get Ready Pods,
 *             ownerReference GC works and namespaces finish deleting.
 *  - node:    full without kwok, plus a REAL node (test/cluster/node.ts, docs/real-node.md): containerd + runc,
 *             the CNI bridge, kubelet and kube-proxy in the network namespace tscm-node. The API server listens on
 *             the host's end of the node's veth (HOST_IP) instead of 127.0.0.1 — Pods reach it through the
 *             `kubernetes` Service — with the Node authorizer, NodeRestriction and ServiceAccount admission (projected
 *             tokens), and kube-controller-manager also runs the serviceaccount, root-ca publisher and endpointslice
 *             controllers. Needs root.
 *
 * Process model: every component is spawned detached (its own process group) with stdout/stderr going to a log
 * file in its own directory, and its pid, binary, arguments and log are recorded in `<dir>/state.json`. Any process
 * can therefore `attach()` to a running control plane (make cluster-up → tests, test global setup → test files),
 * stop and restart single components with the same ports and data, and tear everything down by process group.
 * State changes are written to state.json synchronously after each step; callers must not restart components of one
 * control plane from two processes at the same time (integration tests run one file at a time).
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
// The minimal-mode core (etcd + kube-apiserver command lines, PKI, admin kubeconfig, process helpers) is shared with
// the library's test environment (`ts-controller-manager/testing`), so both run the same flags.
import { adminKubeconfig, etcdCommand, kubeApiserverCommand } from '../../pkg/testing/controlplane.ts';
import { createPki, type Pki } from '../../pkg/testing/pki.ts';
import { delay, freePort, isAlive, killGroup, tail } from '../../pkg/testing/process.ts';
import { HOST_IP, importPauseImage, NODE_NAME, nodeComponents, nodeNetwork } from './node.ts';

export { freePort, isAlive, killGroup };

export type ClusterMode = 'minimal' | 'full' | 'node';
export type ComponentName = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'kwok'
  | 'containerd' | 'kubelet' | 'kube-proxy';

interface ComponentState {
  name: ComponentName;
  bin: string;
  args: string[];
  log: string;
  pid: number | null;
  /** Health endpoint polled until 200, `unix:<path>` = until that socket exists; null = no check. */
  health: string | null;
}

export interface ClusterState {
  version: 1;
  mode: ClusterMode;
  dir: string;
  server: string;
  kubeconfig: string;
  etcdURL: string;
  nodeName: string | null;
  pki: Pki;
  components: Partial<Record<ComponentName, ComponentState>>;
}

export interface BinDirs {
  etcd: string;
  k8s: string;
  kwok: string;
  /** containerd, its shim, ctr, the CNI plugins and pause (node mode only). */
  node?: string;
}

export interface HttpResponse {
  status: number;
  body: string;
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const startOrder: ComponentName[] = [
  'etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok', 'containerd', 'kubelet', 'kube-proxy',
];
const STARTUP_TIMEOUT_MS = 90_000;

type Logger = (message: string) => void;
const defaultLogger: Logger = (message) => process.stderr.write(`[cluster] ${message}\n`);

/** Runs hack/build-tools.sh (builds on first use, cached afterwards) and returns the binary directories. */
export async function ensureBinaries(log: Logger = defaultLogger, opts: { node?: boolean } = {}): Promise<BinDirs> {
  log('checking control-plane binaries (hack/build-tools.sh; a cold build takes a while and prints progress)');
  // Only the control plane's binaries: cert-manager (test/certmanager.test.ts) comes from `make tools`; the real
  // node's (kubelet, kube-proxy, containerd, CNI plugins) only for node mode (--node).
  const child = spawn('bash', [join(repoRoot, 'hack', 'build-tools.sh'), '--print-env', '--control-plane', ...(opts.node ? ['--node'] : [])], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((res) => child.on('close', res));
  if (code !== 0) throw new Error(`hack/build-tools.sh failed (exit ${code}); see the messages above`);
  const env = Object.fromEntries(
    out.trim().split('\n').map((line) => {
      const i = line.indexOf('=');
      return [line.slice(0, i), line.slice(i + 1)];
    }),
  );
  const dirs = { etcd: env['ETCD_BIN_DIR'], k8s: env['K8S_BIN_DIR'], kwok: env['KWOK_BIN_DIR'], node: env['NODE_BIN_DIR'] };
  if (!dirs.etcd || !dirs.k8s || !dirs.kwok) throw new Error(`hack/build-tools.sh printed no binary directories: ${out}`);
  if (opts.node && !dirs.node) throw new Error(`hack/build-tools.sh printed no NODE_BIN_DIR: ${out}`);
  return dirs as BinDirs;
}

/** True when a unix socket at `path` accepts a connection (the server listens, not just created the file). */
function acceptsConnections(path: string): Promise<boolean> {
  return new Promise((res) => {
    const sock = connect(path);
    sock.once('connect', () => {
      sock.destroy();
      res(true);
    });
    sock.once('error', () => res(false));
  });
}

/**
 * The API server's flags for node mode, derived from the minimal-mode command line (pkg/testing/controlplane.ts):
 * the Node authorizer before RBAC; the ServiceAccount admission plugin back on (it adds the projected token volume the
 * kubelet fills, and kcm creates `default`); NodeRestriction; and for kubectl logs/exec through the kubelet the admin
 * certificate as the API server's client identity, reaching the node only by its InternalIP (the API server must never
 * resolve the node's name through the machine's DNS). Throws when a flag it rewrites is no longer there, so a change
 * of the shared command line cannot silently drop node mode's settings.
 */
function nodeApiserverArgs(args: string[], pki: Pki): string[] {
  // flag → its replacement ([] = removed)
  const rewrites = new Map<string, string[]>([
    ['--authorization-mode=RBAC', ['--authorization-mode=Node,RBAC']],
    ['--disable-admission-plugins=ServiceAccount', []],
    ['--enable-admission-plugins=OwnerReferencesPermissionEnforcement',
      ['--enable-admission-plugins=OwnerReferencesPermissionEnforcement,NodeRestriction']],
  ]);
  for (const flag of rewrites.keys()) {
    if (!args.includes(flag)) throw new Error(`node mode: the shared kube-apiserver command line has no ${flag}`);
  }
  const out = args.flatMap((a) => rewrites.get(a) ?? [a]);
  return [...out, `--kubelet-client-certificate=${pki.adminCert}`, `--kubelet-client-key=${pki.adminKey}`,
    '--kubelet-preferred-address-types=InternalIP'];
}

export class ControlPlane {
  readonly state: ClusterState;
  private readonly log: Logger;

  private constructor(state: ClusterState, log: Logger) {
    this.state = state;
    this.log = log;
  }

  get kubeconfig(): string {
    return this.state.kubeconfig;
  }

  get server(): string {
    return this.state.server;
  }

  /** Directory of the Kubernetes binaries (kubectl among them) this control plane runs. */
  get k8sBinDir(): string {
    return dirname(this.component('kube-apiserver').bin);
  }

  get mode(): ClusterMode {
    return this.state.mode;
  }

  /** Attaches to a control plane started by another process from its state directory. */
  static attach(dir: string, log: Logger = defaultLogger): ControlPlane {
    const file = join(dir, 'state.json');
    if (!existsSync(file)) throw new Error(`no control plane state at ${file}`);
    return new ControlPlane(JSON.parse(readFileSync(file, 'utf8')) as ClusterState, log);
  }

  /**
   * Starts a new control plane whose state lives in `dir` (created; must not hold a running cluster).
   * On failure every component started so far is stopped again and the error names the failed component and
   * carries the tail of its log.
   */
  static async start(opts: {
    mode: ClusterMode; dir: string; bins?: BinDirs; log?: Logger;
    /** Extra command-line flags per component (e.g. kube-apiserver --watch-cache=false for 410 tests). */
    extraArgs?: Partial<Record<ComponentName, string[]>>;
    /**
     * The control plane outlives this process (`make cluster-up`): its real node is never reclaimed by another run.
     * Otherwise a node-mode run whose process is gone leaves a node the next one reclaims (hack/node/node.sh).
     */
    outlivesProcess?: boolean;
  }): Promise<ControlPlane> {
    const log = opts.log ?? defaultLogger;
    const dir = resolve(opts.dir);
    if (existsSync(join(dir, 'state.json'))) {
      const old = ControlPlane.attach(dir, log);
      if (old.running().length > 0) {
        throw new Error(`a control plane is already running from ${dir} (pids ${old.running().join(', ')}); stop it first`);
      }
    }
    rmSync(dir, { recursive: true, force: true });
    const t0 = Date.now();
    const nodeMode = opts.mode === 'node';
    const bins = opts.bins ?? (await ensureBinaries(log, { node: nodeMode }));
    mkdirSync(join(dir, 'pki'), { recursive: true });
    const pki = createPki(join(dir, 'pki'), nodeMode ? [HOST_IP] : []);
    const apiAddress = nodeMode ? HOST_IP : '127.0.0.1';
    const [etcdPort, peerPort, apiPort, kcmPort, schedPort, kwokPort] = await Promise.all([
      freePort(), freePort(), freePort(), freePort(), freePort(), freePort(),
    ]);
    const server = `https://${apiAddress}:${apiPort}`;
    const etcdURL = `http://127.0.0.1:${etcdPort}`;
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, adminKubeconfig(server, pki));

    const comp = (name: ComponentName, bin: string, args: string[], health: string | null): ComponentState => {
      mkdirSync(join(dir, name), { recursive: true });
      return { name, bin, args: [...args, ...(opts.extraArgs?.[name] ?? [])], log: join(dir, name, `${name}.log`), pid: null, health };
    };
    const etcd = etcdCommand({ dir, bin: join(bins.etcd, 'etcd'), port: etcdPort, peerPort });
    const apiserver = kubeApiserverCommand({
      dir, bin: join(bins.k8s, 'kube-apiserver'), port: apiPort, etcdURL, pki, address: apiAddress,
    });
    const components: ClusterState['components'] = {
      etcd: comp('etcd', etcd.bin, etcd.args, etcd.health),
      'kube-apiserver': comp('kube-apiserver', apiserver.bin, nodeMode ? nodeApiserverArgs(apiserver.args, pki) : apiserver.args,
        apiserver.health),
    };
    if (opts.mode === 'full' || nodeMode) {
      const common = [
        `--kubeconfig=${kubeconfig}`, `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1',
        '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
      ];
      components['kube-controller-manager'] = comp('kube-controller-manager', join(bins.k8s, 'kube-controller-manager'), [
        ...common, `--secure-port=${kcmPort}`, `--cert-dir=${join(dir, 'kube-controller-manager')}`,
        `--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,namespace-controller,node-lifecycle-controller${
          nodeMode ? ',serviceaccount-controller,root-ca-certificate-publisher-controller,endpointslice-controller,pod-garbage-collector-controller' : ''}`,
        ...(nodeMode ? [`--root-ca-file=${pki.caCert}`] : []),
        '--node-monitor-period=5s', '--node-monitor-grace-period=40s', '--concurrent-deployment-syncs=10',
        '--concurrent-replicaset-syncs=10', '--v=0',
      ], `https://127.0.0.1:${kcmPort}/healthz`);
      components['kube-scheduler'] = comp('kube-scheduler', join(bins.k8s, 'kube-scheduler'), [
        ...common, `--secure-port=${schedPort}`, `--cert-dir=${join(dir, 'kube-scheduler')}`, '--v=0',
      ], `https://127.0.0.1:${schedPort}/healthz`);
    }
    if (opts.mode === 'full') {
      components.kwok = comp('kwok', join(bins.kwok, 'kwok'), [
        `--kubeconfig=${kubeconfig}`, '--manage-all-nodes=true', '--node-lease-duration-seconds=40',
        `--config=${join(dir, 'kwok', 'kwok.yaml')}`, `--server-address=127.0.0.1:${kwokPort}`,
      ], `http://127.0.0.1:${kwokPort}/healthz`);
      // Our own config file keeps kwok from reading ~/.kwok; the default stages (hack/build-tools.sh puts them next
      // to the binary) make the Node Ready and bound Pods Running/Ready.
      // (No KwokConfiguration object: a partial one leaves options such as nodeLeaseParallelism at zero.)
      writeFileSync(join(dir, 'kwok', 'kwok.yaml'), readFileSync(join(bins.kwok, 'stages.yaml'), 'utf8'));
    }
    if (nodeMode) {
      if (!bins.node) throw new Error('node mode needs the node binaries (hack/build-tools.sh --node)');
      const node = nodeComponents({ dir, server, pki, k8sBinDir: bins.k8s, nodeBinDir: bins.node });
      for (const [name, spec] of Object.entries(node) as [ComponentName, { bin: string; args: string[]; health: string }][]) {
        components[name] = comp(name, spec.bin, spec.args, spec.health);
      }
    }
    const state: ClusterState = {
      version: 1, mode: opts.mode, dir, server, kubeconfig, etcdURL,
      nodeName: opts.mode === 'full' ? 'kwok-node-0' : nodeMode ? NODE_NAME : null, pki, components,
    };
    const cp = new ControlPlane(state, log);
    cp.save();
    // The node's network namespace (and HOST_IP, the API server's address) exists before anything starts. When this
    // throws (e.g. another node runs: one per machine) nothing of ours runs yet and nothing may be torn down.
    if (nodeMode) nodeNetwork('up', dir, { outlivesProcess: opts.outlivesProcess ?? false });
    try {
      for (const name of startOrder) {
        if (components[name]) await cp.startComponent(name);
        // The sandbox image must be in containerd before the kubelet creates the first Pod sandbox.
        if (name === 'containerd' && bins.node) importPauseImage(dir, bins.node);
      }
      if (state.nodeName) await (nodeMode ? cp.waitNodeReady(state.nodeName) : cp.createReadyNode(state.nodeName));
    } catch (err) {
      await cp.stop({ removeState: false });
      throw err;
    }
    log(`${opts.mode} control plane ready in ${((Date.now() - t0) / 1000).toFixed(1)}s at ${server}`);
    return cp;
  }

  /** Pids of components that are alive. */
  running(): number[] {
    return Object.values(this.state.components)
      .map((c) => c.pid)
      .filter((pid): pid is number => pid !== null && isAlive(pid));
  }

  private save(): void {
    const file = join(this.state.dir, 'state.json');
    writeFileSync(`${file}.tmp`, JSON.stringify(this.state, null, 2));
    // rename is atomic: readers never see half a file.
    renameSync(`${file}.tmp`, file);
  }

  private component(name: ComponentName): ComponentState {
    const c = this.state.components[name];
    if (!c) throw new Error(`component ${name} is not part of this ${this.state.mode} control plane`);
    return c;
  }

  /** Starts (or restarts) one component with its recorded arguments and waits until it is healthy. */
  async startComponent(name: ComponentName): Promise<void> {
    const c = this.component(name);
    if (c.pid !== null && isAlive(c.pid)) throw new Error(`${name} is already running (pid ${c.pid})`);
    const fd = openSync(c.log, 'a');
    const child = spawn(c.bin, c.args, { detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    child.unref();
    const spawned = await new Promise<number>((res, rej) => {
      child.once('spawn', () => res(child.pid ?? -1));
      child.once('error', (err) => rej(new Error(`${name} failed to start: ${err.message} (${c.bin})`)));
    });
    c.pid = spawned;
    this.save();
    const t0 = Date.now();
    await this.waitHealthy(c);
    this.log(`${name} is up (pid ${spawned}, ${((Date.now() - t0) / 1000).toFixed(1)}s)`);
  }

  /** Stops one component (SIGTERM to its process group, SIGKILL after 10 s). Its data stays. */
  async stopComponent(name: ComponentName): Promise<void> {
    const c = this.component(name);
    if (c.pid !== null) await killGroup(c.pid);
    c.pid = null;
    this.save();
  }

  /** Stops every component in reverse start order; removes the state directory unless told not to. */
  async stop(opts: { removeState?: boolean } = {}): Promise<void> {
    for (const name of [...startOrder].reverse()) {
      const c = this.state.components[name];
      if (c?.pid != null) await killGroup(c.pid);
      if (c) c.pid = null;
    }
    // Pod containers outlive the kubelet and containerd (their shims are daemons): node.sh kills and unmounts them.
    if (this.state.mode === 'node') nodeNetwork('down', this.state.dir);
    if (opts.removeState ?? true) rmSync(this.state.dir, { recursive: true, force: true });
    else this.save();
  }

  private async waitHealthy(c: ComponentState): Promise<void> {
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    let last: string;
    for (;;) {
      if (c.pid === null || !isAlive(c.pid)) {
        throw new Error(`${c.name} exited during startup; last lines of ${c.log}:\n${tail(c.log)}`);
      }
      if (c.health === null) return;
      if (c.health.startsWith('unix:')) {
        const path = c.health.slice('unix:'.length);
        if (await acceptsConnections(path)) return;
        last = `${path} does not accept connections yet`;
      } else {
        try {
          const res = await this.get(c.health);
          if (res.status === 200) return;
          last = `HTTP ${res.status}: ${res.body.slice(0, 300)}`;
        } catch (err) {
          last = (err as Error).message;
        }
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${c.name} did not become healthy within ${STARTUP_TIMEOUT_MS / 1000}s (${c.health}: ${last}); ` +
            `last lines of ${c.log}:\n${tail(c.log)}`,
        );
      }
      await delay(200);
    }
  }

  /**
   * GET/POST/... against the API server (or any URL of this cluster) with the admin client certificate, or with a
   * bearer `token` (and no client certificate) when one is given. `timeoutMs` (default 10 s): no socket activity for
   * that long fails the request.
   */
  async request(method: string, urlOrPath: string, body?: unknown,
    opts: { headers?: Record<string, string>; token?: string; timeoutMs?: number } = {}): Promise<HttpResponse> {
    const headers = { ...opts.headers, ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}) };
    const url = new URL(urlOrPath, this.state.server);
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const { pki } = this.state;
    const reqOpts = {
      method,
      headers: { accept: 'application/json', ...(payload ? { 'content-type': 'application/json' } : {}), ...headers },
      timeout: opts.timeoutMs ?? 10_000,
      ...(url.protocol === 'https:'
        ? { ca: readFileSync(pki.caCert),
            ...(opts.token ? {} : { cert: readFileSync(pki.adminCert), key: readFileSync(pki.adminKey) }),
            // kube-controller-manager and kube-scheduler serve self-signed certificates of their own.
            rejectUnauthorized: url.port === new URL(this.state.server).port }
        : {}),
    };
    return new Promise((res, rej) => {
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, reqOpts, (resp) => {
        let data = '';
        resp.setEncoding('utf8').on('data', (c: string) => (data += c));
        resp.on('end', () => res({ status: resp.statusCode ?? 0, body: data }));
        resp.on('error', rej);
      });
      req.on('timeout', () => req.destroy(new Error(`timeout: ${method} ${url.href}`)));
      req.on('error', rej);
      if (payload) req.write(payload);
      req.end();
    });
  }

  get(urlOrPath: string): Promise<HttpResponse> {
    return this.request('GET', urlOrPath);
  }

  /** Mints a ServiceAccount token through the TokenRequest API (creating the ServiceAccount if needed). */
  async mintServiceAccountToken(namespace: string, serviceAccount: string, expirationSeconds = 3600): Promise<string> {
    const sa = await this.request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: serviceAccount },
    });
    if (sa.status !== 201 && sa.status !== 409) throw new Error(`creating ServiceAccount: HTTP ${sa.status} ${sa.body}`);
    const res = await this.request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`, {
      apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds },
    });
    if (res.status !== 201) throw new Error(`TokenRequest: HTTP ${res.status} ${res.body}`);
    return (JSON.parse(res.body) as { status: { token: string } }).status.token;
  }

  /** Waits until the real node's kubelet has registered its Node and it is Ready and untainted (node mode). */
  async waitNodeReady(name: string): Promise<void> {
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    let last = 'not registered';
    for (;;) {
      for (const n of ['containerd', 'kubelet', 'kube-controller-manager'] as const) {
        const c = this.component(n);
        if (c.pid === null || !isAlive(c.pid)) {
          throw new Error(`${n} exited while node ${name} was coming up; last lines of ${c.log}:\n${tail(c.log)}`);
        }
      }
      const got = await this.get(`/api/v1/nodes/${name}`);
      if (got.status === 200) {
        const node = JSON.parse(got.body) as {
          spec?: { taints?: { key: string }[] };
          status?: { conditions?: { type: string; status: string; message?: string }[] };
        };
        const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
        const taints = (node.spec?.taints ?? []).map((t) => t.key);
        if (ready?.status === 'True' && !taints.some((t) => t.startsWith('node.kubernetes.io/'))) {
          this.log(`node ${name} (kubelet) is Ready`);
          return;
        }
        last = `Ready=${ready?.status ?? '?'} (${ready?.message ?? ''}), taints ${taints.join(',') || 'none'}`;
      }
      if (Date.now() > deadline) {
        const kubelet = this.component('kubelet');
        throw new Error(`node ${name} did not become Ready: ${last}; last lines of ${kubelet.log}:\n${tail(kubelet.log)}`);
      }
      await delay(250);
    }
  }

  /** Creates a kwok-managed Node and waits until it is Ready and schedulable (not-ready taint removed). */
  private async createReadyNode(name: string): Promise<void> {
    const capacity = { cpu: '64', memory: '512Gi', pods: '1000' };
    const res = await this.request('POST', '/api/v1/nodes', {
      apiVersion: 'v1', kind: 'Node',
      metadata: {
        name,
        annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
        labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', type: 'kwok' },
      },
      status: { capacity, allocatable: capacity },
    });
    if (res.status !== 201 && res.status !== 409) throw new Error(`creating Node ${name}: HTTP ${res.status} ${res.body}`);
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    for (;;) {
      for (const c of [this.component('kwok'), this.component('kube-controller-manager')]) {
        if (c.pid === null || !isAlive(c.pid)) {
          throw new Error(`${c.name} exited while node ${name} was coming up; last lines of ${c.log}:\n${tail(c.log)}`);
        }
      }
      const got = await this.get(`/api/v1/nodes/${name}`);
      if (got.status === 200) {
        const node = JSON.parse(got.body) as {
          spec?: { taints?: { key: string }[] };
          status?: { conditions?: { type: string; status: string }[] };
        };
        const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
        const tainted = (node.spec?.taints ?? []).some((t) => t.key.startsWith('node.kubernetes.io/'));
        if (ready && !tainted) {
          this.log(`node ${name} is Ready`);
          return;
        }
      }
      if (Date.now() > deadline) {
        const kwok = this.component('kwok');
        const kcm = this.component('kube-controller-manager');
        throw new Error(
          `node ${name} did not become Ready and untainted (kwok marks it Ready, node-lifecycle-controller removes the ` +
            `taint); last lines of ${kwok.log}:\n${tail(kwok.log)}\nlast lines of ${kcm.log}:\n${tail(kcm.log)}`,
        );
      }
      await delay(250);
    }
  }

  /** Compacts etcd up to its current revision (forces 410 Gone for watches from older resourceVersions). */
  async compactEtcd(): Promise<number> {
    const post = async (path: string, body: unknown): Promise<unknown> => {
      const res = await this.request('POST', `${this.state.etcdURL}${path}`, body);
      if (res.status !== 200) throw new Error(`etcd ${path}: HTTP ${res.status} ${res.body}`);
      return JSON.parse(res.body);
    };
    const status = (await post('/v3/maintenance/status', {})) as { header: { revision: string } };
    const revision = Number(status.header.revision);
    await post('/v3/kv/compaction', { revision: String(revision), physical: true });
    return revision;
  }
}
