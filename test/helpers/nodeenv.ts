/**
 * The real-node test environment shared by test/node*.e2e.ts (issue 26, docs/real-node.md): a node-mode control
 * plane (test/cluster/node.ts), the project's image built with podman as test/image.test.ts builds it and imported
 * into the node's containerd, and the few reads every real-node test makes (the manager's Pods, the Lease holder,
 * the container's cgroup and process).
 *
 * One node-mode control plane per machine at a time (fixed network namespace, veth addresses and cgroup root).
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ControlPlane, ensureBinaries, type ComponentName } from '../cluster/controlplane.ts';
import { CGROUP_ROOT, loadImage } from '../cluster/node.ts';
import { expectStatus } from './cluster.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..');

/**
 * The tag the tests give the image they build and load. A short reference, as a user's `IMG` is: the kubelet resolves
 * it to docker.io/library/…, which `loadImage` (`make node-load`) tags it as.
 */
export const NODE_TEST_IMAGE = 'ts-controller-manager:node-test';
/** Names config/default renders (namePrefix ts-controller-manager-, namespace ts-controller-manager-system). */
export const MANAGER_NAMESPACE = 'ts-controller-manager-system';
export const MANAGER_DEPLOYMENT = 'ts-controller-manager-controller-manager';
export const MANAGER_LEASE = 'ts-controller-manager.samplecontroller.k8s.io';
export const MANAGER_SELECTOR = 'app.kubernetes.io/name=ts-controller-manager,control-plane=controller-manager';

export interface ContainerStatus {
  name: string; ready: boolean; restartCount: number; containerID?: string;
  state?: { running?: unknown; terminated?: { exitCode: number; reason?: string; finishedAt?: string } };
  lastState?: { terminated?: { exitCode: number; reason?: string } };
}
export interface Pod {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec: { nodeName?: string; automountServiceAccountToken?: boolean; volumes?: { name: string; projected?: unknown }[] };
  status: { phase?: string; podIP?: string; conditions?: { type: string; status: string }[]; containerStatuses?: ContainerStatus[] };
}

export const isReady = (p: Pod): boolean => (p.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

export interface NodeEnv {
  cp: ControlPlane;
  /** How long each set-up step took, for t.diagnostic. */
  timings: string[];
  /** kubectl of the control plane's release, with its kubeconfig; resolves stdout. */
  kubectl(...args: string[]): Promise<string>;
  /** `kubectl kustomize <dir>` with the test image substituted (as `make deploy` does), applied server-side. */
  applyKustomize(dir: string, opts?: { forceConflicts?: boolean; edit?: (rendered: string) => string }): Promise<void>;
  /** The manager's Pods in config/default's namespace. */
  managerPods(): Promise<Pod[]>;
  /** The manager Lease's holderIdentity ('' when free or absent). */
  leaseHolder(): Promise<string>;
  /** The memory cgroup directory of a running container, and its first process's pid (host pid namespace). */
  container(pod: Pod, name?: string): Promise<{ cgroup: string; pid: string }>;
  stop(): Promise<void>;
}

/**
 * Starts a node-mode control plane (extra API server flags allowed), builds the image and imports it into the
 * node's containerd.
 */
export async function startNodeEnv(opts: { extraArgs?: Partial<Record<ComponentName, string[]>> } = {}): Promise<NodeEnv> {
  const dir = mkdtempSync(join(tmpdir(), 'tscm-node-'));
  const timings: string[] = [];
  let t0 = Date.now();
  const cp = await ControlPlane.start({ mode: 'node', dir, ...(opts.extraArgs ? { extraArgs: opts.extraArgs } : {}) });
  const env = nodeEnvFor(cp, timings);
  try {
    timings.push(`node-mode control plane ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    t0 = Date.now();
    const setup = await run('bash', [join(repo, 'hack', 'image', 'setup.sh')], { cwd: repo, maxBuffer: 64 << 20 });
    assert.match(setup.stdout, /BASE_IMAGE=\S+/, `hack/image/setup.sh printed no BASE_IMAGE: ${setup.stdout}`);
    await run('bash', [join(repo, 'hack', 'image', 'build.sh'), NODE_TEST_IMAGE], {
      cwd: repo, maxBuffer: 64 << 20, env: { ...process.env, BUILDER: 'podman' },
    });
    timings.push(`image setup + build ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    t0 = Date.now();
    const bins = await ensureBinaries(() => {}, { node: true });
    assert.ok(bins.node, 'node binaries (hack/build-tools.sh --node)');
    loadImage(dir, bins.node, NODE_TEST_IMAGE); // what `make node-load` does
    timings.push(`podman save + ctr import ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } catch (err) {
    await env.stop();
    throw err;
  }
  return env;
}

function nodeEnvFor(cp: ControlPlane, timings: string[]): NodeEnv {
  const kubectlBin = join(cp.k8sBinDir, 'kubectl');
  const kubectl = async (...args: string[]): Promise<string> =>
    (await run(kubectlBin, ['--kubeconfig', cp.kubeconfig, ...args], { cwd: repo, maxBuffer: 64 << 20 })).stdout;
  return {
    cp,
    timings,
    kubectl,
    async applyKustomize(kdir, o = {}) {
      let rendered = (await kubectl('kustomize', kdir)).replace(/image: ts-controller-manager:latest/g, `image: ${NODE_TEST_IMAGE}`);
      assert.ok(rendered.includes(`image: ${NODE_TEST_IMAGE}`), `the rendered ${kdir} uses the test image`);
      if (o.edit) rendered = o.edit(rendered);
      const apply = spawn(kubectlBin, ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', ...(o.forceConflicts ? ['--force-conflicts'] : []), '-f', '-'],
        { stdio: ['pipe', 'ignore', 'inherit'] });
      apply.stdin.end(rendered);
      assert.equal(await new Promise<number | null>((res) => apply.on('close', res)), 0, `kubectl apply ${kdir}`);
    },
    async managerPods() {
      return expectStatus<{ items: Pod[] }>(await cp.get(
        `/api/v1/namespaces/${MANAGER_NAMESPACE}/pods?labelSelector=${encodeURIComponent(MANAGER_SELECTOR)}`), 200, 'pods').items;
    },
    async leaseHolder() {
      const res = await cp.get(`/apis/coordination.k8s.io/v1/namespaces/${MANAGER_NAMESPACE}/leases/${MANAGER_LEASE}`);
      return res.status === 200 ? ((JSON.parse(res.body) as { spec: { holderIdentity?: string } }).spec.holderIdentity ?? '') : '';
    },
    async container(pod, name = 'manager') {
      const id = pod.status.containerStatuses?.find((c) => c.name === name)?.containerID?.replace(/^containerd:\/\//, '');
      assert.ok(id, `container ID of ${pod.metadata.name}/${name}`);
      // cgroup v1, cgroupfs driver, below the kubelet's cgroup root.
      const cgroup = (await run('find', [`/sys/fs/cgroup/memory${CGROUP_ROOT}`, '-type', 'd', '-name', id])).stdout.trim();
      assert.ok(cgroup, `memory cgroup of ${id}`);
      const pid = readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').trim().split('\n')[0];
      assert.ok(pid, `a process in ${cgroup}`);
      return { cgroup, pid };
    },
    async stop() {
      await cp.stop(); // removes its state directory
    },
  };
}
