/**
 * Memory regression (issue 10): the real manager process converges 1 000 Foos inside the 256 MiB memory
 * limit that config/manager ships, run the way a Pod limit applies (a cgroup v1 memory limit joined before exec, with
 * the image's Node flags). Before the transport fix it was OOM-killed at about 540 of 1 000 Foos; a change that blows
 * memory up again fails here. Speed is a benchmark (bench/scale.ts), not asserted.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { MemoryCgroup } from './helpers/cgroup.ts';
import { StopTrying, suffix, waitFor } from './helpers/cluster.ts';
import { privateControlPlane, repoRoot } from './helpers/crds.ts';
import { imageEntrypoint, ManagerProcess } from './helpers/managerprocess.ts';

const FOOS = 1000;
const LIMIT = 256 * 1024 * 1024;

describe('memory limit', () => {
  test('the image runs node with the same flags as these tests (V8 heap sized from the container limit)', () => {
    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'))?.[1];
    assert.deepEqual(JSON.parse(entrypoint ?? '[]'), imageEntrypoint);
  });

  test(`${FOOS} Foos converge with the manager inside a 256 MiB memory cgroup (not OOM-killed)`, async (t) => {
    // A private minimal control plane: the Deployments get no Pods and nothing else loads the machine.
    const cp = await privateControlPlane(t, 'mem');
    const ns = 'mem';
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < FOOS) {
        const i = next++;
        const res = await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
          apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: `foo-${i}` }, spec: { deploymentName: `foo-${i}`, replicas: 1 },
        });
        assert.equal(res.status, 201, res.body);
      }
    }));

    const cgroup = MemoryCgroup.create(`tscm-test-${suffix()}`, LIMIT);
    const mgr = await ManagerProcess.start({
      cgroup, collectLogs: false,
      args: ['--controllers=foo', '--foo-concurrency=8'], env: { KUBECONFIG: cp.kubeconfig, WATCH_NAMESPACE: ns },
    });
    try {
      await waitFor(`all ${FOOS} Foo statuses written while the manager runs`, async () => {
        if (!mgr.running) throw new StopTrying(`manager exited: ${JSON.stringify(await mgr.exited)}, OOM kills ${cgroup.oomKills()}: ${mgr.stderr.join('')}`);
        const res = await cp.request('GET', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`);
        const foos = (JSON.parse(res.body) as { items: Foo[] }).items;
        return foos.filter((f) => f.status?.availableReplicas !== undefined).length === FOOS;
      }, { timeoutMs: 300_000, intervalMs: 500 });
      // Not OOM-killed: still running, no kill in the cgroup's oom_control, and a clean exit 0 on SIGTERM (an OOM
      // kill is SIGKILL). And inside the limit: the usage never even reached it (failcnt 0), so no reclaim was forced.
      assert.ok(mgr.running, 'the manager is still running after convergence');
      assert.equal(cgroup.oomKills(), 0, 'no OOM kill in the cgroup');
      const failcnt = cgroup.failCount();
      t.diagnostic(`cgroup max usage ${(cgroup.maxUsageBytes() / 1048576).toFixed(0)} MiB of 256, failcnt ${failcnt}`);
      assert.equal(failcnt, 0, `memory usage reached the 256 MiB limit ${failcnt} times (max usage ${cgroup.maxUsageBytes()})`);
      const code = await mgr.stop('SIGTERM', 30_000);
      assert.deepEqual(await mgr.exited, { code: 0, signal: null }, `graceful exit after convergence, not killed (stop returned ${code})`);
      assert.equal(cgroup.oomKills(), 0, 'no OOM kill during shutdown either');
    } finally {
      await mgr.stop('SIGKILL', 30_000);
      cgroup.remove();
    }
  });
});
