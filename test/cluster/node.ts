/**
 * The local control plane's real node (CLUSTER_MODE=node, docs/real-node.md): containerd 2.x + runc, the CNI bridge,
 * a kubelet and kube-proxy (iptables) — all in the network namespace `tscm-node` that hack/node/node.sh creates, so
 * the Pods' bridge, their NAT and kube-proxy's rules never touch the host's network. The host reaches the node at
 * NODE_IP through a veth pair; the API server of a node-mode control plane listens on HOST_IP (the host's end), which
 * is also the `kubernetes` Service's endpoint that Pods reach through kube-proxy.
 *
 * This file only computes configuration and writes config files; test/cluster/controlplane.ts spawns the components
 * (each through `nsenter --net`, which keeps the host's mount namespace, so cgroups and /proc stay the host's).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { signClientCert, type Pki } from '../../pkg/testing/pki.ts';

export const NODE_NETNS = 'tscm-node';
/** The host's end of the veth pair: the API server's address in node mode. */
export const HOST_IP = '172.31.250.1';
/** The node's address (kubelet, kube-proxy health) as seen from the host. */
export const NODE_IP = '172.31.250.2';
export const NODE_NAME = 'tscm-node';
/** The bridge plugin's host-local range: every Pod of the node gets an address from it. */
export const POD_CIDR = '10.244.0.0/24';
/** The sandbox image: hack/tools/node/pause.go packed by hack/node/oci-image.sh, imported at node start. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.1';
/** kubelet cgroup root (cgroup v1, cgroupfs driver); hack/node/node.sh creates and removes it. */
export const CGROUP_ROOT = '/tscm-node';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const nodeScript = join(repoRoot, 'hack', 'node', 'node.sh');

export interface NodeComponentSpec {
  bin: string;
  args: string[];
  /** `http(s)://…` polled until 200, or `unix:<path>` waited for until the socket exists. */
  health: string;
}

export type NodeComponentName = 'containerd' | 'kubelet' | 'kube-proxy';

/**
 * Runs hack/node/node.sh up|down for the node whose state lives in `dir`. `up` records this process as the node's
 * owner (another run reclaims the node once this process is gone), or none with `outlivesProcess` (the node lives
 * until `down`: `make cluster-up`).
 */
export function nodeNetwork(action: 'up' | 'down', dir: string, opts: { outlivesProcess?: boolean } = {}): void {
  const env = opts.outlivesProcess ? { ...process.env, TSCM_NODE_OWNER_PID: '0' } : process.env;
  try {
    execFileSync('bash', [nodeScript, action, dir], { stdio: ['ignore', 'pipe', 'pipe'], env });
  } catch (err) {
    const e = err as { stderr?: Buffer; stdout?: Buffer };
    throw new Error(`hack/node/node.sh ${action} failed: ${e.stderr?.toString().trim() ?? String(err)}`, { cause: err });
  }
}

function kubeconfigFor(server: string, caCert: string, cert: string, key: string): string {
  return `${JSON.stringify({
    apiVersion: 'v1', kind: 'Config',
    clusters: [{ name: 'tscm-local', cluster: { server, 'certificate-authority': caCert } }],
    users: [{ name: 'u', user: { 'client-certificate': cert, 'client-key': key } }],
    contexts: [{ name: 'tscm-local', context: { cluster: 'tscm-local', user: 'u' } }],
    'current-context': 'tscm-local',
  }, null, 2)}\n`;
}

/**
 * Writes the node's configuration below `dir` (containerd/, cni/, kubelet/, kube-proxy/) and returns how to start
 * containerd, the kubelet and kube-proxy. Credentials: the kubelet authenticates as `system:node:tscm-node` (Node
 * authorizer + NodeRestriction, as on real clusters), kube-proxy as `system:kube-proxy` (bootstrap RBAC binding
 * system:node-proxier).
 */
export function nodeComponents(opts: {
  dir: string; server: string; pki: Pki; k8sBinDir: string; nodeBinDir: string;
}): Record<NodeComponentName, NodeComponentSpec> {
  const { dir, server, pki, k8sBinDir, nodeBinDir } = opts;
  const pkiDir = dirname(pki.caCert);
  const nsenter = (bin: string, args: string[], env: string[] = []): { bin: string; args: string[] } => ({
    bin: 'nsenter', args: [`--net=/run/netns/${NODE_NETNS}`, '--', 'env', ...env, bin, ...args],
  });

  // --- containerd ------------------------------------------------------------------------------------------------
  const cd = join(dir, 'containerd');
  const cniConfDir = join(dir, 'cni', 'net.d');
  mkdirSync(cd, { recursive: true });
  mkdirSync(cniConfDir, { recursive: true });
  const sock = join(cd, 'containerd.sock');
  writeFileSync(join(cd, 'config.toml'), `# Written by test/cluster/node.ts: a private containerd (root, state and sockets below ${cd}).
version = 3
root = "${join(cd, 'root')}"
state = "${join(cd, 'state')}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "${sock}"
[ttrpc]
  address = "${sock}.ttrpc"
[debug]
  address = "${join(cd, 'debug.sock')}"
[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "${PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  # Root here lacks CAP_SYS_RESOURCE: lowering oom_score_adj (the kubelet asks -998 for sandboxes, -997 for Guaranteed
  # Pods) fails in runc's nsexec with "failed to update /proc/self/oom_score_adj: Permission denied". Clamp to
  # containerd's own value (0), as for rootless containerd.
  restrict_oom_score_adj = true
  # Pod network namespaces are bind-mounted below the state directory (so below <dir>, where node.sh down unmounts
  # them), not in the machine's /var/run/netns, where every Pod of every run left one behind.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["${nodeBinDir}"]
    conf_dir = "${cniConfDir}"
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "${NODE_IP}"
  stream_server_port = "0"
`);
  writeFileSync(join(cniConfDir, '10-tscm-bridge.conflist'), `${JSON.stringify({
    cniVersion: '1.0.0', name: 'tscm-bridge',
    plugins: [
      {
        type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: true, hairpinMode: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: POD_CIDR }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: join(dir, 'cni', 'ipam') },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  }, null, 2)}\n`);
  const containerd = nsenter(join(nodeBinDir, 'containerd'), ['--config', join(cd, 'config.toml')],
    [`PATH=${nodeBinDir}:/usr/sbin:/usr/bin:/sbin:/bin`]);

  // --- kubelet ---------------------------------------------------------------------------------------------------
  const kd = join(dir, 'kubelet');
  mkdirSync(join(kd, 'manifests'), { recursive: true });
  const kubeletCert = signClientCert(pkiDir, 'kubelet', `/O=system:nodes/CN=system:node:${NODE_NAME}`);
  writeFileSync(join(kd, 'kubeconfig'), kubeconfigFor(server, pki.caCert, kubeletCert.cert, kubeletCert.key));
  writeFileSync(join(kd, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  writeFileSync(join(kd, 'config.yaml'), `${JSON.stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1', kind: 'KubeletConfiguration',
    // The machine is a VM on cgroup v1 (hybrid: v1 controllers + an empty unified hierarchy): Kubernetes 1.35+ refuses
    // cgroup v1 unless told otherwise.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: CGROUP_ROOT,
    containerRuntimeEndpoint: `unix://${sock}`,
    address: NODE_IP, port: 10250, readOnlyPort: 0,
    healthzBindAddress: NODE_IP, healthzPort: 10248,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: pki.caCert } },
    authorization: { mode: 'Webhook' },
    staticPodPath: join(kd, 'manifests'),
    podLogsDir: join(kd, 'pod-logs'),
    clusterDomain: 'cluster.local',
    resolvConf: join(kd, 'resolv.conf'),
    failSwapOn: false,
    // Disk: the machine's filesystem is shared; never evict or garbage-collect images because of other tenants' usage.
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    imageGCHighThresholdPercent: 100, imageGCLowThresholdPercent: 99,
    // Fast feedback for tests: status and probes.
    nodeStatusUpdateFrequency: '2s', syncFrequency: '5s', fileCheckFrequency: '5s',
    serializeImagePulls: false,
    protectKernelDefaults: false,
    maxPods: 30,
  }, null, 2)}\n`);
  const kubelet = nsenter(join(k8sBinDir, 'kubelet'), [
    `--config=${join(kd, 'config.yaml')}`, `--kubeconfig=${join(kd, 'kubeconfig')}`,
    `--root-dir=${join(kd, 'root')}`, `--cert-dir=${join(kd, 'pki')}`,
    `--hostname-override=${NODE_NAME}`, `--node-ip=${NODE_IP}`, '--v=1',
  ], [`PATH=/usr/sbin:/usr/bin:/sbin:/bin`]);

  // --- kube-proxy ------------------------------------------------------------------------------------------------
  const pd = join(dir, 'kube-proxy');
  mkdirSync(pd, { recursive: true });
  const proxyCert = signClientCert(pkiDir, 'kube-proxy', '/CN=system:kube-proxy');
  writeFileSync(join(pd, 'kubeconfig'), kubeconfigFor(server, pki.caCert, proxyCert.cert, proxyCert.key));
  writeFileSync(join(pd, 'config.yaml'), `${JSON.stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: join(pd, 'kubeconfig') },
    mode: 'iptables', clusterCIDR: POD_CIDR, hostnameOverride: NODE_NAME,
    bindAddress: NODE_IP, healthzBindAddress: `${NODE_IP}:10256`, metricsBindAddress: `${NODE_IP}:10249`,
    // conntrack sysctls: leave them as they are (nf_conntrack_max is not per namespace).
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    iptables: { localhostNodePorts: false, syncPeriod: '5s', minSyncPeriod: '0s' },
  }, null, 2)}\n`);
  const kubeProxy = nsenter(join(k8sBinDir, 'kube-proxy'), [`--config=${join(pd, 'config.yaml')}`, '--v=1'],
    [`PATH=/usr/sbin:/usr/bin:/sbin:/bin`]);

  return {
    containerd: { ...containerd, health: `unix:${sock}` },
    kubelet: { ...kubelet, health: `http://${NODE_IP}:10248/healthz` },
    'kube-proxy': { ...kubeProxy, health: `http://${NODE_IP}:10256/healthz` },
  };
}

/**
 * Imports an image archive (OCI layout or docker-archive tar, e.g. `podman save`) into the node's containerd, in the
 * CRI's namespace k8s.io where the kubelet finds it. Pods using it need `imagePullPolicy: Never` or `IfNotPresent`
 * (no registry is reachable).
 */
export function importImage(dir: string, nodeBinDir: string, archive: string): string {
  return execFileSync(join(nodeBinDir, 'ctr'), [
    '--address', join(dir, 'containerd', 'containerd.sock'), '-n', 'k8s.io', 'images', 'import', archive,
  ], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * The name the kubelet (containerd's CRI) looks an image reference up by: a reference without a registry domain is
 * Docker Hub's (`ts-controller-manager:dev` → `docker.io/library/ts-controller-manager:dev`).
 */
export function normalizedImageName(ref: string): string {
  const first = ref.split('/')[0] ?? '';
  const hasDomain = ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasDomain) return ref;
  return ref.includes('/') ? `docker.io/${ref}` : `docker.io/library/${ref}`;
}

/**
 * Loads an image from the project's podman storage (what `make docker-build` builds) into the node's containerd, as
 * `kind load docker-image` does: `podman save` → `ctr import`, then tagged with the name the kubelet resolves the
 * reference to (normalizedImageName), so a Pod's `image: ts-controller-manager:dev` finds it without a registry.
 * Returns that name.
 */
export function loadImage(dir: string, nodeBinDir: string, ref: string): string {
  const tmp = mkdtempSync(join(tmpdir(), 'tscm-node-image-'));
  try {
    const archive = join(tmp, 'image.tar');
    execFileSync('bash', [join(repoRoot, 'hack', 'image', 'podman.sh'), 'save', '--format', 'docker-archive', '-o', archive, ref],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    importImage(dir, nodeBinDir, archive);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  // podman names a reference without a domain localhost/<ref>; the archive carries that name.
  const first = ref.split('/')[0] ?? '';
  const stored = ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost') ? ref : `localhost/${ref}`;
  const wanted = normalizedImageName(ref);
  if (wanted !== stored) {
    execFileSync(join(nodeBinDir, 'ctr'), ['--address', join(dir, 'containerd', 'containerd.sock'), '-n', 'k8s.io', 'images', 'tag', '--force', stored, wanted],
      { stdio: ['ignore', 'pipe', 'pipe'] });
  }
  return wanted;
}

/** Packs the node's pause binary as PAUSE_IMAGE (hack/node/oci-image.sh) and imports it. */
export function importPauseImage(dir: string, nodeBinDir: string): void {
  const tar = join(dir, 'containerd', 'pause.tar');
  execFileSync('bash', [join(repoRoot, 'hack', 'node', 'oci-image.sh'), PAUSE_IMAGE, tar, '/pause', `${join(nodeBinDir, 'pause')}=/pause`],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  importImage(dir, nodeBinDir, tar);
}
