/**
 * The reconcile timeout on the real control plane (controller-runtime's ReconciliationTimeout): the manager default
 * `reconcileTimeoutMs` aborts a reconcile's signal, which aborts the real API request the reconcile is waiting on (a
 * watch that would otherwise stay open for minutes); the reconcile fails with the TimeoutError, is retried with
 * backoff and counted in controller_runtime_reconcile_timeouts_total. A reconcile that finishes in time is not.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';

async function counter(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const data = await registry.getSingleMetric(name)?.get();
  return data?.values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))?.value ?? 0;
}

describe('reconcile timeout', () => {
  test('aborts the in-flight API request of a slow reconcile; the reconcile errs, is retried and counted as a timeout', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'rtimeout');
    const registry = new Registry();
    const mgr = new ControllerManager({
      kubeConfig: adminKubeConfig(), namespaces: [ns], syncPeriodMs: 0, registry, logger: silentLogger, reconcileTimeoutMs: 1_000,
    });
    const calls = new Map<string, number>();
    const failures: unknown[] = [];
    mgr.controller('timeout-test').for(coreResources.configMaps).complete(async ({ namespace, name }, signal) => {
      const n = (calls.get(name) ?? 0) + 1;
      calls.set(name, n);
      if (name !== 'slow' || n > 1) return;
      try {
        // A watch with nothing to report: the server keeps it open for 5 minutes; only the signal ends it sooner.
        await mgr.client.json('GET', `/api/v1/namespaces/${namespace}/secrets?watch=true&timeoutSeconds=300&fieldSelector=metadata.name%3Dnone`,
          { signal, timeoutMs: 0 });
      } catch (err) {
        failures.push(err);
        throw err;
      }
      failures.push('the watch returned');
    });
    const ac = new AbortController();
    const exited = mgr.start(ac.signal);
    t.after(async () => { ac.abort(); assert.equal(await exited, 0); });
    await waitFor('controller started', () => mgr.controllersStarted());

    const labels = { controller: 'timeout-test' };
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'fast' } }), 201, 'create fast');
    await waitFor('fast reconciled', () => calls.get('fast') === 1);
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'slow' } }), 201, 'create slow');
    await waitFor('slow retried after its timeout', () => (calls.get('slow') ?? 0) >= 2, { timeoutMs: 30_000 });

    assert.equal(failures.length, 1);
    const err = failures[0];
    // The transport rejects with an AbortError whose cause is the signal's reason (or with the reason itself).
    const chain: unknown[] = [];
    for (let e: unknown = err; e instanceof Error && chain.length < 5; e = e.cause) chain.push(e);
    const reason = chain.find((e) => e instanceof DOMException && e.name === 'TimeoutError');
    assert.ok(reason instanceof DOMException, `the watch was aborted with the reconcile timeout's reason: ${chain.map(String).join(' ← ')}`);
    assert.match(reason.message, /reconcile timed out after 1000 ms/);
    assert.equal(await counter(registry, 'controller_runtime_reconcile_timeouts_total', labels), 1);
    assert.equal(await counter(registry, 'controller_runtime_reconcile_total', { ...labels, result: 'error' }), 1);
    assert.equal(await counter(registry, 'controller_runtime_reconcile_total', { ...labels, result: 'success' }), 2, 'fast, then slow on retry');
  });
});
