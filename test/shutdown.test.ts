/**
 * Graceful shutdown with real components on the real API server: Manager + LeaderElector (a real Lease) + shared
 * informers + a Controller whose 100 workers are all busy in slow reconciles when SIGTERM arrives (delivered through
 * installSignalHandlers from an EventEmitter standing in for `process`).
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { RestClient } from '../pkg/client/rest.ts';
import { Controller } from '../pkg/controller/index.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/index.ts';
import { metaNamespaceKey } from '../pkg/apimachinery/keys.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { LeaderElector, RestLeaseClient } from '../pkg/manager/leaderelection.ts';
import { installSignalHandlers, Manager } from '../pkg/manager/manager.ts';
import { runnable } from '../pkg/manager/runnable.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';

interface Setup {
  controller: Controller;
  exit: Promise<number>;
  sigterm: () => void;
  completed: () => number;
  sawAbort: () => number;
  ns: string;
  lease: string;
}

async function setup(t: TestContext, reconcileMs: number, gracefulShutdownTimeoutMs: number): Promise<Setup> {
  const cp = cluster();
  const ns = await testNamespace(t, 'shutdown');
  const registry = new Registry();
  const rest = new RestClient({ kubeConfig: adminKubeConfig(), registry });
  const factory = new SharedInformerFactory({ client: rest, namespaces: [ns] });
  let completed = 0;
  let sawAbort = 0;
  const controller = new Controller({
    name: 'slow', registry, maxConcurrentReconciles: 100, gracefulShutdownTimeoutMs,
    // The work itself: a slow step that does not take the signal (a timer stands in for it). `signal` aborts when
    // shutdown starts (as controller-runtime cancels the reconcile context); the graceful timeout bounds the wait.
    reconciler: async (_req, signal) => {
      await sleep(reconcileMs);
      if (signal.aborted) sawAbort++;
      completed++;
    },
  });
  factory.informerFor(coreResources.configMaps).addEventHandler({ onAdd: (o) => controller.enqueue(metaNamespaceKey(o)) });
  const lease = 'shutdown-test';
  const elector = new LeaderElector({
    lock: new RestLeaseClient(rest, ns, lease), name: lease, registry,
    leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000,
  });
  const manager = new Manager({ leaderElection: elector, gracefulShutdownTimeoutMs, waitForCacheSync: (s) => factory.waitForCacheSync({ signal: s }) });
  manager.add(runnable('informers', false, (s) => factory.run(s)));
  manager.add(controller);
  const proc = Object.assign(new EventEmitter(), { exit: (code: number): void => assert.fail(`unexpected immediate exit ${code}`) });
  const { signal } = installSignalHandlers(proc);
  const exit = manager.start(signal);
  for (let i = 0; i < 100; i++) {
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` } }), 201, 'create');
  }
  return { controller, exit, sigterm: () => proc.emit('SIGTERM', 'SIGTERM'), completed: () => completed, sawAbort: () => sawAbort, ns, lease };
}

async function leaseHolder(ns: string, lease: string): Promise<string> {
  const l = expectStatus<{ spec: { holderIdentity?: string } }>(
    await cluster().get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`), 200, 'get Lease');
  return l.spec.holderIdentity ?? '';
}

describe('graceful shutdown', () => {
  test('SIGTERM during 100 in-flight slow reconciles: all finish, the Lease is released, exit code 0', async (t) => {
    const s = await setup(t, 3_000, 30_000);
    await waitFor('100 reconciles in flight', () => s.controller.inFlight() === 100, { timeoutMs: 30_000 });
    assert.notEqual(await leaseHolder(s.ns, s.lease), '', 'we hold the lease while running');
    s.sigterm();
    assert.equal(await s.exit, 0);
    assert.equal(s.completed(), 100, 'every in-flight reconcile finished');
    assert.equal(s.sawAbort(), 100, 'their signals aborted when shutdown started');
    assert.equal(await leaseHolder(s.ns, s.lease), '', 'the lease was released');
  });

  test('reconciles longer than --graceful-shutdown-timeout: the timeout is reported (exit 1), the lease is NOT released', async (t) => {
    // ReleaseOnCancel contract (issue 11 item 2): abandoned reconciles still run, so a standby must wait for expiry.
    const s = await setup(t, 20_000, 1_000);
    await waitFor('100 reconciles in flight', () => s.controller.inFlight() === 100, { timeoutMs: 30_000 });
    const holder = await leaseHolder(s.ns, s.lease);
    assert.notEqual(holder, '');
    s.sigterm();
    const t0 = Date.now();
    assert.equal(await s.exit, 1);
    assert.ok(Date.now() - t0 < 15_000, 'did not wait for the reconciles');
    assert.equal(s.completed(), 0);
    assert.equal(await leaseHolder(s.ns, s.lease), holder, 'the lease was left to expire');
  });
});
