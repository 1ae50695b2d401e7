/**
 * What the kubelet (and the control plane around it) did with the fields of config/manager/manager.yaml that
 * test/node.e2e.ts's securityContext test does not already read: each check reads the running process, its cgroups,
 * its sockets, its mounts, the files the kubelet wrote into it, the kubelet's own probe counters, or what a controller
 * derived (the EndpointSlice's port) — not the Pod spec echoed back by the API server. The one exception, labelled as
 * such: the Namespace's labels, which no component applies, are read back. docs/real-node.md ("config/manager/manager.yaml, field by field") maps every
 * field of manager.yaml to the check that exercises it, or says why none does.
 *
 * Contract: `assertManagerManifestApplied(env, pod)` is called while `pod` is the only manager Pod, Running and Ready,
 * from the unmodified rendered config/default (image substituted); it throws an AssertionError naming the field on the
 * first mismatch, and resolves the observed values as lines for t.diagnostic. It waits (≤ 90 s) for the kubelet's
 * first liveness probe (initialDelaySeconds 15, periodSeconds 20) and for a probe connection on the health port.
 * Root only (reads /proc/<pid>/ of another user's process and the node's network namespace).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { NODE_NETNS, normalizedImageName } from '../cluster/node.ts';
import { expectStatus, waitFor } from './cluster.ts';
import { MANAGER_DEPLOYMENT, MANAGER_NAMESPACE, NODE_TEST_IMAGE, type NodeEnv, type Pod } from './nodeenv.ts';

const run = promisify(execFile);

/** The values config/manager/manager.yaml sets (checked against the file by test/manifest-fields.test.ts's table). */
const MANIFEST = {
  args: ['--leader-elect', '--metrics-secure', '--metrics-bind-address=:8443', '--health-probe-bind-address=:8081'],
  metricsPort: 8443,
  healthPort: 8081,
  cpuRequestMilli: 10,
  cpuLimitMilli: 500,
  memoryRequestBytes: 128 * 1024 * 1024,
  tmpSizeLimitBytes: 16 * 1024 * 1024,
  liveness: { initialDelaySeconds: 15, periodSeconds: 20 },
  serviceAccount: 'ts-controller-manager-controller-manager', // controller-manager, with config/default's namePrefix
};
/** What config/default's manager_webhook_patch.yaml adds to the Deployment: its webhook flag and the webhook port. */
const DEFAULT_PATCH = { args: ['--webhook-cert-mode=self-managed'], webhookPort: 9443 };

/** One socket of /proc/<pid>/net/tcp{,6}: addresses rendered as IPv4 when v4 or v4-mapped. */
interface Socket { local: string; localPort: number; remote: string; remotePort: number; state: string }

const TCP_STATES: Record<string, string> = {
  '01': 'ESTABLISHED', '02': 'SYN_SENT', '03': 'SYN_RECV', '04': 'FIN_WAIT1', '05': 'FIN_WAIT2', '06': 'TIME_WAIT',
  '07': 'CLOSE', '08': 'CLOSE_WAIT', '09': 'LAST_ACK', '0A': 'LISTEN', '0B': 'CLOSING',
};

/** A /proc/net/tcp address (host byte order per 32-bit word, little-endian here) as text. */
function decodeAddress(hex: string): string {
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => [w.slice(6, 8), w.slice(4, 6), w.slice(2, 4), w.slice(0, 2)].map((b) => parseInt(b, 16)));
  if (bytes.length === 4) return bytes.join('.');
  // IPv4-mapped IPv6 (::ffff:a.b.c.d): how a dual-stack listener's IPv4 connections appear in tcp6.
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12).join('.');
  if (bytes.every((b) => b === 0)) return '::';
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return groups.join(':');
}

/** Parses the text of /proc/.../net/tcp or tcp6 (header lines, even several, skipped). */
export function parseProcNetTcp(text: string): Socket[] {
  return text.split('\n').map((l) => l.trim().split(/\s+/)).filter((f) => f.length > 3 && f[0] !== 'sl').map((f) => {
    const [local = '', localPort = '0'] = f[1]!.split(':');
    const [remote = '', remotePort = '0'] = f[2]!.split(':');
    return {
      local: decodeAddress(local), localPort: parseInt(localPort, 16),
      remote: decodeAddress(remote), remotePort: parseInt(remotePort, 16), state: TCP_STATES[f[3]!] ?? f[3]!,
    };
  });
}

const socketsOf = (pid: string): Socket[] =>
  ['tcp', 'tcp6'].flatMap((f) => parseProcNetTcp(readFileSync(`/proc/${pid}/net/${f}`, 'utf8')));

async function nodeSockets(): Promise<Socket[]> {
  const { stdout } = await run('nsenter', [`--net=/run/netns/${NODE_NETNS}`, 'cat', '/proc/net/tcp', '/proc/net/tcp6']);
  return parseProcNetTcp(stdout);
}

/** The v1 hierarchy directory of `controller` for a process, from /proc/<pid>/cgroup (host cgroup namespace). */
function cgroupDir(pid: string, controller: string): string {
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')) {
    const [, controllers = '', path = ''] = line.split(':');
    if (!controllers.split(',').includes(controller)) continue;
    const mount = [`/sys/fs/cgroup/${controllers}`, `/sys/fs/cgroup/${controller}`].find((m) => existsSync(m));
    assert.ok(mount, `the ${controller} hierarchy (${controllers}) is mounted`);
    return join(mount, path);
  }
  throw new assert.AssertionError({ message: `process ${pid} is in no ${controller} cgroup` });
}

const readTrim = (file: string): string => readFileSync(file, 'utf8').trim();

/** The kubelet's `prober_probe_total` samples for one Pod's container (its /metrics/probes, through the API server). */
async function probeCounts(env: NodeEnv, pod: Pod, container: string): Promise<Record<string, number>> {
  const node = env.cp.state.nodeName;
  assert.ok(node, 'node-mode control plane has a node');
  const res = await env.cp.get(`/api/v1/nodes/${node}/proxy/metrics/probes`);
  assert.equal(res.status, 200, `kubelet /metrics/probes: ${res.body.slice(0, 300)}`);
  const counts: Record<string, number> = {};
  for (const line of res.body.split('\n')) {
    if (!line.startsWith('prober_probe_total{')) continue;
    const labels: Record<string, string> = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
    if (labels.pod_uid !== pod.metadata.uid || labels.container !== container) continue;
    counts[`${labels.probe_type ?? '?'}/${labels.result ?? '?'}`] = Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return counts;
}

/** Kubelet's GetContainerOOMScoreAdjust for a Burstable container (pkg/kubelet/qos/policy.go, v1.36). */
export function burstableOomScoreAdj(memoryRequestBytes: number, memoryCapacityBytes: number): number {
  const adj = 1000 - Number((1000n * BigInt(memoryRequestBytes)) / BigInt(memoryCapacityBytes));
  if (adj < 1000 - 997) return 1000 - 997;
  if (adj === 1000) return 999;
  return adj;
}

/** A Kubernetes binary-SI/decimal memory quantity as bytes (the forms a Node's capacity uses). */
function quantityBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q);
  assert.ok(m, `memory quantity ${q}`);
  const mult: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]]! : 1);
}

/**
 * Asserts what the kubelet, containerd/runc, the token projection and the endpointslice controller did with
 * manager.yaml's fields (see the file comment); resolves one line per observation.
 */
export async function assertManagerManifestApplied(env: NodeEnv, pod: Pod): Promise<string[]> {
  const out: string[] = [];
  const { pid } = await env.container(pod);
  const podIP = pod.status.podIP;
  assert.ok(podIP, 'the Pod has an IP');

  // containers[manager].args: the process's argv, after the image's entrypoint.
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  const args = [...MANIFEST.args, ...DEFAULT_PATCH.args];
  assert.deepEqual(argv.slice(-args.length), args, `args (manager.yaml's, then config/default's webhook patch): /proc/${pid}/cmdline is ${JSON.stringify(argv)}`);
  out.push(`cmdline: ${argv.join(' ')}`);

  // env[WATCH_NAMESPACE].value "": present and empty in the process environment (empty = all namespaces).
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  assert.ok(environ.includes('WATCH_NAMESPACE='), `WATCH_NAMESPACE="" in the environment: ${environ.filter((e) => e.startsWith('WATCH')).join(' ')}`);
  out.push(`environ: ${environ.filter((e) => /^(POD_NAMESPACE|WATCH_NAMESPACE)=/.test(e)).map((e) => JSON.stringify(e)).join(' ')}`);

  // ports + the bind-address args: the process listens on 8443 and 8081 in the Pod's network namespace.
  const listening = socketsOf(pid).filter((s) => s.state === 'LISTEN');
  for (const port of [MANIFEST.metricsPort, MANIFEST.healthPort, DEFAULT_PATCH.webhookPort]) {
    assert.ok(listening.some((s) => s.localPort === port), `a listener on ${port} in the Pod's netns: ${JSON.stringify(listening)}`);
  }
  out.push(`listening in the Pod's netns: ${listening.map((s) => `${s.local}:${s.localPort}`).join(', ')}`);

  // resources: the kubelet's CRI request, applied by runc to the container's cgroup v1 cpu controller.
  const cpu = cgroupDir(pid, 'cpu');
  const shares = Number(readTrim(join(cpu, 'cpu.shares')));
  const quota = Number(readTrim(join(cpu, 'cpu.cfs_quota_us')));
  const period = Number(readTrim(join(cpu, 'cpu.cfs_period_us')));
  // MilliCPUToShares(10m) = 10*1024/1000 = 10 (floor; minimum 2); MilliCPUToQuota(500m, 100000) = 50000.
  assert.equal(shares, Math.max(2, Math.floor((MANIFEST.cpuRequestMilli * 1024) / 1000)), `requests.cpu 10m → cpu.shares (${cpu})`);
  assert.equal(period, 100_000, 'cfs period: the kubelet\'s default 100 ms');
  assert.equal(quota, (MANIFEST.cpuLimitMilli * period) / 1000, `limits.cpu 500m → cpu.cfs_quota_us (${cpu})`);
  const podCpu = dirname(cpu);
  out.push(`cpu cgroup ${cpu}: cpu.shares ${shares}, cpu.cfs_quota_us ${quota} / cpu.cfs_period_us ${period}; ` +
    `pod level: cpu.shares ${readTrim(join(podCpu, 'cpu.shares'))}, quota ${readTrim(join(podCpu, 'cpu.cfs_quota_us'))}`);
  // requests < limits: the kubelet placed the Pod in its Burstable QoS cgroup.
  assert.match(cpu, new RegExp(`/burstable/pod${pod.metadata.uid}/`), 'requests below limits: the Pod\'s cgroup is under the kubelet\'s burstable QoS cgroup');
  // requests.memory: cgroup v1 has nothing the kubelet writes it to (memory.min/MemoryQoS is cgroup v2 only); it does
  // set the container's oom_score_adj (Burstable formula over the Node's memory capacity).
  const mem = cgroupDir(pid, 'memory');
  out.push(`memory cgroup ${mem}: memory.limit_in_bytes ${readTrim(join(mem, 'memory.limit_in_bytes'))}, ` +
    `memory.soft_limit_in_bytes ${readTrim(join(mem, 'memory.soft_limit_in_bytes'))} (requests.memory is not written to cgroup v1)`);
  const node = expectStatus<{ status: { capacity: { memory: string } } }>(await env.cp.get(`/api/v1/nodes/${env.cp.state.nodeName ?? ''}`), 200, 'Node');
  const capacity = quantityBytes(node.status.capacity.memory);
  const oomAdj = Number(readTrim(`/proc/${pid}/oom_score_adj`));
  assert.equal(oomAdj, burstableOomScoreAdj(MANIFEST.memoryRequestBytes, capacity),
    `requests.memory 128Mi → oom_score_adj 1000 - 1000*128Mi/${node.status.capacity.memory}`);
  out.push(`oom_score_adj ${oomAdj} (requests.memory 128Mi of the Node's ${node.status.capacity.memory})`);

  // volumes[tmp].emptyDir {medium: Memory, sizeLimit: 16Mi} at volumeMounts[tmp].mountPath /tmp: a tmpfs of 16 MiB.
  const tmp = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').map((l) => l.split(' ')).find((m) => m[4] === '/tmp');
  assert.ok(tmp, '/tmp is a mount point in the container');
  const [fstype, , superOpts = ''] = tmp.slice(tmp.indexOf('-') + 1);
  assert.equal(fstype, 'tmpfs', 'emptyDir medium Memory');
  assert.ok(superOpts.split(',').includes(`size=${MANIFEST.tmpSizeLimitBytes / 1024}k`), `sizeLimit 16Mi → tmpfs size: ${superOpts}`);
  out.push(`/tmp: ${fstype} ${superOpts}`);

  // serviceAccountName: the token the kubelet projected into the container is the ServiceAccount's, bound to the Pod.
  const token = readTrim(`/proc/${pid}/root/var/run/secrets/kubernetes.io/serviceaccount/token`);
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
    sub: string; iat: number; exp: number; 'kubernetes.io'?: { pod?: { name: string; uid: string }; node?: { name: string } };
  };
  assert.equal(claims.sub, `system:serviceaccount:${MANAGER_NAMESPACE}:${MANIFEST.serviceAccount}`, 'serviceAccountName → token sub');
  assert.equal(claims['kubernetes.io']?.pod?.uid, pod.metadata.uid, 'the token is bound to this Pod');
  out.push(`projected token: sub ${claims.sub}, pod ${claims['kubernetes.io']?.pod?.name ?? '?'}, node ${claims['kubernetes.io']?.node?.name ?? '?'}, ` +
    `lifetime ${claims.exp - claims.iat} s`);

  // containers[manager].image: replaced (as make deploy does); the kubelet ran the substituted image.
  const status = pod.status.containerStatuses?.find((c) => c.name === 'manager') as { image?: string; imageID?: string } | undefined;
  assert.ok([NODE_TEST_IMAGE, normalizedImageName(NODE_TEST_IMAGE)].includes(status?.image ?? ''), `the kubelet ran the substituted image: ${status?.image ?? '?'}`);
  out.push(`image ${status?.image ?? '?'} (${status?.imageID ?? '?'})`);

  // The Namespace document's labels: read back from the API server (kubectl apply kept them; nothing selects on them).
  const nsLabels = expectStatus<{ metadata: { labels?: Record<string, string> } }>(
    await env.cp.get(`/api/v1/namespaces/${MANAGER_NAMESPACE}`), 200, 'Namespace').metadata.labels ?? {};
  assert.equal(nsLabels['app.kubernetes.io/name'], 'ts-controller-manager', 'Namespace label app.kubernetes.io/name');
  assert.equal(nsLabels['control-plane'], 'controller-manager', 'Namespace label control-plane');
  out.push(`Namespace ${MANAGER_NAMESPACE} labels ${JSON.stringify(nsLabels)}`);

  // ports[https-metrics]: the metrics Service's targetPort https-metrics resolved to 8443 by the endpointslice controller.
  const slices = expectStatus<{ items: { ports?: { name?: string; port?: number; protocol?: string }[] }[] }>(await env.cp.get(
    `/apis/discovery.k8s.io/v1/namespaces/${MANAGER_NAMESPACE}/endpointslices?labelSelector=${encodeURIComponent('kubernetes.io/service-name=ts-controller-manager-controller-manager-metrics-service')}`),
  200, 'EndpointSlices');
  const slicePorts = slices.items.flatMap((s) => s.ports ?? []);
  assert.deepEqual(slicePorts, [{ name: 'https-metrics', port: MANIFEST.metricsPort, protocol: 'TCP' }], 'targetPort https-metrics → 8443');
  out.push(`metrics EndpointSlice ports ${JSON.stringify(slicePorts)}`);

  // Probes, port: health → 8081. The kubelet (in the node's network namespace) connects to <podIP>:8081: seen from
  // either end (whichever closes first keeps TIME_WAIT). Nothing else in the tests contacts port 8081.
  const probeConn = await waitFor('a kubelet probe connection to the Pod\'s health port', async () => {
    const fromPod = socketsOf(pid).find((s) => s.localPort === MANIFEST.healthPort && s.state !== 'LISTEN');
    if (fromPod) return `Pod side ${fromPod.remote}:${fromPod.remotePort} → ${fromPod.local}:${fromPod.localPort} ${fromPod.state}`;
    const fromNode = (await nodeSockets()).find((s) => s.remote === podIP && s.remotePort === MANIFEST.healthPort);
    return fromNode ? `node side ${fromNode.local}:${fromNode.localPort} → ${fromNode.remote}:${fromNode.remotePort} ${fromNode.state}` : undefined;
  }, { timeoutMs: 60_000, intervalMs: 200 });
  out.push(`probe connection: ${probeConn}`);

  // The kubelet's own probe counters: both probes ran and succeeded; liveness no more often than its period allows
  // after its initial delay (a hard bound: the worker's ticker never fires early; startedAt is truncated to seconds).
  const startedAt = (pod.status.containerStatuses?.find((c) => c.name === 'manager')?.state?.running as { startedAt?: string } | undefined)?.startedAt;
  assert.ok(startedAt, 'the container\'s startedAt');
  const counts = await waitFor('the kubelet\'s first successful liveness probe', async () => {
    const c = await probeCounts(env, pod, 'manager');
    return (c['Liveness/successful'] ?? 0) >= 1 && (c['Readiness/successful'] ?? 0) >= 1 ? c : undefined;
  }, { timeoutMs: 90_000, intervalMs: 1000 });
  const age = (Date.now() - Date.parse(startedAt)) / 1000;
  const { initialDelaySeconds, periodSeconds } = MANIFEST.liveness;
  const livenessTotal = Object.entries(counts).filter(([k]) => k.startsWith('Liveness/')).reduce((a, [, v]) => a + v, 0);
  assert.ok(livenessTotal <= Math.floor((age - initialDelaySeconds) / periodSeconds) + 1,
    `liveness probes (${livenessTotal}) at most one per ${periodSeconds} s after ${initialDelaySeconds} s (container age ${age.toFixed(1)} s)`);
  out.push(`kubelet prober_probe_total at container age ${age.toFixed(1)} s: ${JSON.stringify(counts)}`);

  // The default-container annotation: `kubectl logs deployment/…` without -c (the log is served by the kubelet). With
  // one container kubectl needs no default, so this shows the logs path works, not the annotation.
  const acquired = await waitFor('the manager\'s "successfully acquired lease" in kubectl logs deployment/… (no -c)', async () => {
    const logs = await env.kubectl('-n', MANAGER_NAMESPACE, 'logs', `deployment/${MANAGER_DEPLOYMENT}`);
    return logs.split('\n').find((l) => l.includes('successfully acquired lease'));
  }, { timeoutMs: 60_000, intervalMs: 1000 });
  out.push(`kubectl logs deployment/${MANAGER_DEPLOYMENT} (no -c): ${acquired.slice(0, 200)}`);
  return out;
}
