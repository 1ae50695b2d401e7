/**
 * A real Prometheus (Debian's package) scrapes two real managers on loopback — one plain, one with --metrics-secure
 * and a bearer token bound to a metrics-reader ClusterRole — and PromQL sees the controller-runtime series.
 *
 * And as config/prometheus's cert-manager variant (issue 14): the manager serves tls.crt/tls.key from
 * --metrics-cert-dir laid out as a mounted Secret; Prometheus verifies it with ca_file (the Secret's ca.crt) and
 * server_name (the metrics Service's DNS name); a wrong server_name is refused. Then the Secret is renewed the way a
 * self-signed cert-manager Issuer renews it (new key, new self-signed CA in ca.crt, kubelet's ..data swap): once the
 * old certificate is no longer trusted, scrapes succeed only because the manager serves the new one.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cluster, expectStatus, grantMetricsReader, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';
import { createCA, writeSecretVolume } from './helpers/pki.ts';
import { Prometheus } from './helpers/prometheus.ts';

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
    await Promise.all([plain.waitReady(), secure.waitReady()]);
    const prom = await Prometheus.start(t, dir, {
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
    });

    const targets = await waitFor('both targets up', async () => {
      const up = await prom.query('up');
      return up.length === 2 && up.every((r) => r.value[1] === '1') ? up : undefined;
    }, { timeoutMs: 60_000 }).catch(prom.withLog);
    assert.deepEqual(targets.map((r) => r.metric['job']).sort(), ['plain', 'secure']);

    for (const job of ['plain', 'secure']) {
      const totals = await waitFor(`${job}: reconcile totals per controller`, async () => {
        const r = await prom.query(`sum by (controller) (controller_runtime_reconcile_total{job="${job}"})`);
        return r.length === 2 ? r : undefined;
      });
      assert.deepEqual(totals.map((r) => r.metric['controller']).sort(), ['deployment', 'foo']);
      const depth = await prom.query(`workqueue_depth{job="${job}"}`);
      assert.deepEqual([...new Set(depth.map((r) => r.metric['name']))].sort(), ['deployment', 'foo']);
    }
    // A reconcile shows up as an increase: create a Foo and watch the plain manager's success counter move.
    expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'counted' }, spec: { deploymentName: 'counted', replicas: 1 },
    }), 201, 'Foo');
    await waitFor('a successful foo reconcile scraped', async () => {
      const r = await prom.query('controller_runtime_reconcile_total{job="plain",controller="foo",result="success"} > 0');
      return r.length === 1;
    }, { timeoutMs: 60_000 });
  });

  test('verifies a --metrics-cert-dir certificate (ca_file + server_name) and keeps scraping across a renewal', async (t) => {
    const cp = cluster();
    await installCRDs();
    const ns = await testNamespace(t, 'promtls');
    const serverName = 'ts-controller-manager-controller-manager-metrics-service.ts-controller-manager-system.svc';
    const dir = mkdtempSync(join(tmpdir(), 'tscm-prometheus-tls-'));
    const certDir = join(dir, 'metrics-certs');
    // Each renewal brings a new CA, as with a self-signed Issuer (whose certificate is its own CA).
    const issue = async (): Promise<{ cert: string; key: string }> => {
      const ca = await createCA('metrics-ca');
      const leaf = await ca.issue([serverName, `${serverName}.cluster.local`]);
      return { cert: leaf.cert + ca.cert, key: leaf.key };
    };
    const first = await createCA('metrics-ca-1');
    const firstLeaf = await first.issue([serverName]);
    await writeSecretVolume(certDir, { 'tls.crt': firstLeaf.cert, 'tls.key': firstLeaf.key, 'ca.crt': first.cert });

    const mgr = await ManagerProcess.start({
      args: [`--kubeconfig=${cp.kubeconfig}`, '--controllers=deployment', '--metrics-secure', `--metrics-cert-dir=${certDir}`],
      env: { WATCH_NAMESPACE: ns },
    });
    t.after(() => mgr.stop('SIGKILL'));
    await grantMetricsReader(t, ns, 'prometheus');
    writeFileSync(join(dir, 'token'), await cp.mintServiceAccountToken(ns, 'prometheus', 3600));
    const job = (name: string, server_name: string): Record<string, unknown> => ({
      job_name: name, scheme: 'https',
      tls_config: { ca_file: join(certDir, 'ca.crt'), server_name, insecure_skip_verify: false },
      authorization: { type: 'Bearer', credentials_file: join(dir, 'token') },
      static_configs: [{ targets: [`127.0.0.1:${mgr.metricsPort}`] }],
    });
    await mgr.waitReady();
    const prom = await Prometheus.start(t, dir, {
      global: { scrape_interval: '1s', scrape_timeout: '1s' },
      scrape_configs: [job('verified', serverName), job('wrong-name', 'somebody-else.example.com')],
    });
    await waitFor('the verified job up', () => prom.health('verified', 'up'), { timeoutMs: 60_000 }).catch(prom.withLog);
    const wrong = await waitFor('the wrong server_name refused', () => prom.health('wrong-name', 'down'), { timeoutMs: 60_000 }).catch(prom.withLog);
    assert.match(wrong.lastError, /certificate|x509/i);

    // Renewal: new key and a new self-signed CA; Prometheus re-reads ca_file, so the old certificate is no longer
    // trusted — a successful scrape now proves the manager serves the new one.
    const renewed = await issue();
    const renewedCa = renewed.cert.slice(renewed.cert.indexOf('-----BEGIN CERTIFICATE-----', 10));
    await writeSecretVolume(certDir, { 'tls.crt': renewed.cert, 'tls.key': renewed.key, 'ca.crt': renewedCa });
    await mgr.waitForLog('the manager reloaded its certificate', (l) => l.msg === 'serving certificate reloaded');
    const presented = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: mgr.metricsPort ?? 0, servername: serverName, ca: renewedCa }, () => {
        resolve(socket.getPeerCertificate().fingerprint256);
        socket.end();
      });
      socket.on('error', reject);
    });
    assert.equal(presented, new X509Certificate(renewed.cert).fingerprint256, 'the renewed certificate, verified with the new CA');
    // Three more successful scrapes of the verified job after the renewal, against the new CA only.
    await prom.waitForSuccessfulScrapes('verified', 3);
  });
});
