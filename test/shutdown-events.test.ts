/**
 * Shutdown never holds the Lease for Event writes that do not answer (issue 23, Deliver 4): the real manager process
 * talks HTTP/2 to the real API server through a proxy that forwards everything except Event writes (POST/PATCH
 * …/events), which it withholds forever. Events are best effort (docs/safety.md, "Shutdown"): on SIGTERM the
 * controllers' own writes are waited for, the Event flush is abandoned at its deadline without cutting the streams,
 * and the Lease is released — exit 0, all within --graceful-shutdown-timeout.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { H2HoldingProxy } from './helpers/h2proxy.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';

interface Lease {
  spec: { holderIdentity?: string; leaseDurationSeconds?: number };
}

describe('shutdown with Event writes that never answer', () => {
  test('SIGTERM → exit 0 and the Lease released within --graceful-shutdown-timeout', async (t) => {
    const cp = cluster();
    const t0 = performance.now();
    const phases: string[] = [];
    const phase = (name: string): void => void phases.push(`${name} +${Math.round(performance.now() - t0)} ms`);
    await installCRDs();
    phase('CRDs');
    const ns = await testNamespace(t, 'evhang');
    const leaseName = 'evhang-leader';
    const gracefulMs = 10_000;
    const proxy = await H2HoldingProxy.start(cp, readFileSync(cp.kubeconfig, 'utf8'),
      (method, path) => (method === 'POST' || method === 'PATCH') && /^\/api\/v1\/namespaces\/[^/]+\/events(\/|$)/.test(path));
    t.after(() => proxy.close());
    const file = join(mkdtempSync(join(tmpdir(), 'tscm-evhang-')), 'kubeconfig');
    writeFileSync(file, proxy.kubeconfig());

    const mgr = await ManagerProcess.start({
      args: [`--kubeconfig=${file}`, '--controllers=foo', '--leader-elect', `--leader-election-namespace=${ns}`,
        `--leader-election-id=${leaseName}`, `--graceful-shutdown-timeout=${gracefulMs / 1000}s`],
      env: { WATCH_NAMESPACE: ns }, metrics: false,
    });
    t.after(() => mgr.stop('SIGKILL'));
    await mgr.waitForLog('lease acquired', (l) => l.msg === 'successfully acquired lease');
    await mgr.waitReady();
    phase('leader and ready');

    // Work that records Events: each Foo's first sync creates its Deployment and records "Synced".
    for (let i = 0; i < 3; i++) {
      expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
        apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: `foo-${i}` }, spec: { deploymentName: `d-${i}`, replicas: 1 },
      }), 201, 'create Foo');
    }
    await waitFor('3 Event writes withheld by the proxy', () => proxy.held.length >= 3, { timeoutMs: 60_000 });
    phase('Events withheld');
    for (let i = 0; i < 3; i++) expectStatus(await cp.get(`/apis/apps/v1/namespaces/${ns}/deployments/d-${i}`), 200, `Deployment d-${i}`);
    const before = expectStatus<Lease>(await cp.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${leaseName}`), 200, 'Lease');
    assert.notEqual(before.spec.holderIdentity ?? '', '', 'the manager holds the Lease before SIGTERM');
    assert.equal(proxy.held.length >= 3 && proxy.held.every((h) => h.path.includes('/events')), true);

    const sentAt = performance.now();
    mgr.proc.kill('SIGTERM');
    const exit = await Promise.race([
      mgr.exited,
      new Promise<'still running'>((r) => setTimeout(() => r('still running'), gracefulMs).unref()),
    ]);
    const tookMs = performance.now() - sentAt;
    assert.notEqual(exit, 'still running', `the manager was still running ${gracefulMs} ms after SIGTERM`);
    assert.deepEqual(exit, { code: 0, signal: null }, `exit after ${Math.round(tookMs)} ms; stderr: ${mgr.stderr.join('')}`);
    const after = expectStatus<Lease>(await cp.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${leaseName}`), 200, 'Lease');
    assert.equal(after.spec.holderIdentity ?? '', '', 'the Lease was released (holderIdentity emptied)');
    assert.equal(after.spec.leaseDurationSeconds, 1, 'the release write set leaseDurationSeconds 1');
    assert.ok(mgr.logs.some((l) => l.msg === 'released leader lease'), 'the manager logged the release');
    t.diagnostic(phases.join('; '));
    t.diagnostic(`exit 0 ${Math.round(tookMs)} ms after SIGTERM; ${proxy.held.length} Event writes withheld; ${proxy.forwarded.length} requests forwarded`);
  });
});
