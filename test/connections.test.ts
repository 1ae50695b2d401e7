/**
 * One TCP connection from the manager process to the API server, in every mode (issue 23, Deliver 3): the real
 * manager (`node cmd/manager/main.ts`) against the real API server, with no leader election, with --leader-elect
 * (a reader and a write-gated client) and with --leader-elect --sharding (plus the sharder's writer). The process's
 * ESTABLISHED TCP connections to the API server's port are counted from the kernel — /proc/<pid>/net/tcp{,6} rows
 * whose socket inode is one of /proc/<pid>/fd — every 100 ms from start until its controllers had written (a
 * Deployment created, a Foo status written, an Event recorded), and once more at the end.
 * With leader election the manager starts as a standby (the leader Lease is held by a departed leader), so its Lease
 * watch runs on the connection too: the Lease is then released, and the standby's watch wakes it (retry period 30 s,
 * so no poll could) before it leads and its controllers write.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { describe, test } from 'node:test';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';

/** Long timings: a standby's next poll is ≥ 30 s away, so only its Lease watch can wake it sooner. */
const slowPolls = ['--leader-elect-lease-duration=90s', '--leader-elect-renew-deadline=40s', '--leader-elect-retry-period=30s'];

/** ESTABLISHED TCP connections of process `pid` whose remote port is `port` (IPv4 and IPv6). */
function establishedTo(pid: number, port: number): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // the fd closed meanwhile
    }
  }
  let n = 0;
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const remote = f[2];
      if (!remote || f[3] !== '01' || !inodes.has(f[9] ?? '')) continue; // 01 = TCP_ESTABLISHED
      if (parseInt(remote.slice(remote.indexOf(':') + 1), 16) === port) n++;
    }
  }
  return n;
}

const modes: { name: string; args: (ns: string) => string[]; standby: boolean }[] = [
  { name: 'no leader election', args: () => [], standby: false },
  {
    name: '--leader-elect (a standby first, woken by its Lease watch)', standby: true,
    args: (ns) => ['--leader-elect', `--leader-election-namespace=${ns}`, '--leader-election-id=conn-test', ...slowPolls],
  },
  {
    name: '--leader-elect --sharding (a standby sharder first, woken by its Lease watch)', standby: true,
    args: (ns) => ['--leader-elect', '--sharding', `--leader-election-namespace=${ns}`, '--leader-election-id=conn-test', ...slowPolls],
  },
];

describe('one connection to the API server per process', () => {
  for (const mode of modes) {
    test(`${mode.name}: exactly 1 ESTABLISHED TCP connection to the API server, from start until after the controllers wrote`, async (t) => {
      const cp = cluster();
      await installCRDs();
      const ns = await testNamespace(t, 'conn');
      const apiPort = Number(new URL(cp.server).port);
      const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/conn-test`;
      if (mode.standby) {
        expectStatus(await cp.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, {
          apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'conn-test' },
          spec: { holderIdentity: 'departed-leader', leaseDurationSeconds: 3600 },
        }), 201, 'a departed leader\'s Lease');
      }
      const mgr = await ManagerProcess.start({
        args: [`--kubeconfig=${cp.kubeconfig}`, '--controllers=foo', ...mode.args(ns)],
        env: { WATCH_NAMESPACE: ns }, metrics: false,
      });
      t.after(() => mgr.stop('SIGKILL'));
      const pid = mgr.proc.pid;
      assert.ok(pid !== undefined);
      const samples: number[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling && mgr.running) {
          try {
            samples.push(establishedTo(pid, apiPort));
          } catch {
            // the process exited between the check and the read
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      if (mode.standby) {
        await mgr.waitForLog('the standby read the held Lease', (l) => l.msg === 'new leader observed' && l['holder'] === 'departed-leader', { timeoutMs: 60_000 });
        const lease = expectStatus<{ spec: Record<string, unknown> }>(await cp.get(leasePath), 200, 'Lease');
        expectStatus(await cp.request('PUT', leasePath, { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } }), 200, 'release the Lease');
        await mgr.waitForLog('the standby\'s Lease watch woke it', (l) => l.msg === 'lease released: attempting to acquire it now', { timeoutMs: 25_000 });
      }
      await mgr.waitReady({ timeoutMs: 60_000 });
      expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
        apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'one' }, spec: { deploymentName: 'one-d', replicas: 1 },
      }), 201, 'create Foo');
      // The controllers' writes went out: the Deployment, the Foo's status, and the "Synced" Event.
      await waitFor('the Deployment created', async () => (await cp.get(`/apis/apps/v1/namespaces/${ns}/deployments/one-d`)).status === 200);
      await waitFor('the Foo status written', async () => {
        const foo = expectStatus<{ status?: { availableReplicas?: number } }>(
          await cp.get(`/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos/one`), 200, 'Foo');
        return foo.status?.availableReplicas !== undefined;
      });
      await waitFor('the Synced Event recorded', async () => {
        const list = expectStatus<{ items: { reason: string }[] }>(await cp.get(`/api/v1/namespaces/${ns}/events`), 200, 'events');
        return list.items.some((e) => e.reason === 'Synced');
      });
      sampling = false;
      await sampler;
      const final = establishedTo(pid, apiPort);
      const seen = samples.filter((n) => n > 0);
      t.diagnostic(`${samples.length} samples; distinct counts seen: ${[...new Set(samples)].join(', ')}; final ${final}`);
      assert.equal(final, 1, 'one ESTABLISHED connection to the API server after the controllers wrote');
      assert.ok(seen.length > 0, 'connections were sampled while the manager ran');
      assert.equal(Math.max(...seen), 1, 'never more than one connection at any sample');
      assert.equal(await mgr.stop('SIGTERM'), 0);
    });
  }
});
