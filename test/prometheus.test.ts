/**
 * A real Prometheus (Debian's package) scrapes two real managers on loopback — one plain, one with --metrics-secure
 * and a bearer token bound to a metrics-reader ClusterRole — and PromQL sees the controller-runtime series.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { freePort } from './cluster/controlplane.ts';
import { cluster, expectStatus, grantMetricsReader, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';

interface QueryResult {
  status: string;
  data: { result: { metric: Record<string, string>; value: [number, string] }[] };
}

describe('real Prometheus', () => {
  test('scrapes plain and secure /metrics; PromQL returns reconcile totals per controller and workqueue_depth', async (t) => {
    const cp = cluster();
    await installCRDs();
    const ns = await testNamespace(t, 'prom');
    const args = [`--kubeconfig=${cp.kubeconfig}`, '--controllers=foo,deployment'];
    const plain = await ManagerProcess.start({ args, env: { WATCH_NAMESPACE: ns } });
    t.after(() => plain.stop('SIGKILL'));
    const secure = await ManagerProcess.start({ args: [...args, '--metrics-secure'], env: { WATCH_NAMESPACE: ns } });
    t.after(() => secure.stop('SIGKILL'));

    // Prometheus's own identity: a ServiceAccount bound to a metrics-reader ClusterRole (as config/rbac ships).
    await grantMetricsReader(t, ns, 'prometheus');
    const dir = mkdtempSync(join(tmpdir(), 'tscm-prometheus-'));
    writeFileSync(join(dir, 'token'), await cp.mintServiceAccountToken(ns, 'prometheus', 3600));
    writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s' },
      scrape_configs: [
        { job_name: 'plain', static_configs: [{ targets: [`127.0.0.1:${plain.metricsPort}`] }] },
        {
          job_name: 'secure', scheme: 'https',
          // The manager's self-signed serving certificate; authentication is what this checks.
          tls_config: { insecure_skip_verify: true },
          authorization: { type: 'Bearer', credentials_file: join(dir, 'token') },
          static_configs: [{ targets: [`127.0.0.1:${secure.metricsPort}`] }],
        },
      ],
    }));
    const port = await freePort();
    const prom = spawn('prometheus', [
      `--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let promLog = '';
    prom.stderr.on('data', (d: Buffer) => (promLog += d.toString()));
    t.after(() => prom.kill('SIGKILL'));

    await Promise.all([plain.waitReady(), secure.waitReady()]);
    const api = `http://127.0.0.1:${port}/api/v1`;
    await waitFor('Prometheus ready', async () => (await fetch(`http://127.0.0.1:${port}/-/ready`).catch(() => undefined))?.status === 200);
    const query = async (q: string): Promise<QueryResult['data']['result']> => {
      const res = await fetch(`${api}/query?query=${encodeURIComponent(q)}`);
      const body = (await res.json()) as QueryResult;
      assert.equal(body.status, 'success', JSON.stringify(body));
      return body.data.result;
    };

    const targets = await waitFor('both targets up', async () => {
      const up = await query('up');
      return up.length === 2 && up.every((r) => r.value[1] === '1') ? up : undefined;
    }, { timeoutMs: 60_000 }).catch((err: unknown) => {
      throw new Error(`${String(err)}\nprometheus log:\n${promLog}`);
    });
    assert.deepEqual(targets.map((r) => r.metric['job']).sort(), ['plain', 'secure']);

    for (const job of ['plain', 'secure']) {
      const totals = await waitFor(`${job}: reconcile totals per controller`, async () => {
        const r = await query(`sum by (controller) (controller_runtime_reconcile_total{job="${job}"})`);
        return r.length === 2 ? r : undefined;
      });
      assert.deepEqual(totals.map((r) => r.metric['controller']).sort(), ['deployment', 'foo']);
      const depth = await query(`workqueue_depth{job="${job}"}`);
      assert.deepEqual([...new Set(depth.map((r) => r.metric['name']))].sort(), ['deployment', 'foo']);
    }
    // A reconcile shows up as an increase: create a Foo and watch the plain manager's success counter move.
    expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'counted' }, spec: { deploymentName: 'counted', replicas: 1 },
    }), 201, 'Foo');
    await waitFor('a successful foo reconcile scraped', async () => {
      const r = await query('controller_runtime_reconcile_total{job="plain",controller="foo",result="success"} > 0');
      return r.length === 1;
    }, { timeoutMs: 60_000 });
  });
});
