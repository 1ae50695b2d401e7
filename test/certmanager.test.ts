/**
 * The metrics certificate from a real cert-manager (issue 14), end to end on the shared control plane:
 *
 * cert-manager's controllers (built from the pinned module, hack/tools/cert-manager) issue config/certmanager's
 * self-signed Issuer and metrics Certificate — rendered from config/default with its optional sections enabled, as
 * a user deploys them — into the Secret `metrics-server-cert` (tls.crt, tls.key, ca.crt). The Secret is projected
 * into the manager's --metrics-cert-dir as the kubelet does (atomic `..data` swap), and a real Prometheus scrapes the
 * secure endpoint verifying it with the Secret's ca.crt and the Service DNS name (config/prometheus's cert-manager
 * variant). Then the Certificate is renewed as `cmctl renew` does: cert-manager issues a new certificate with a new
 * key (rotationPolicy: Always), which — the Issuer being self-signed — is also the new ca.crt and is not trusted by
 * the old one. The manager must present the new serial without a restart, and Prometheus must keep scraping over
 * new connections verified with the new CA only.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { describe, test } from 'node:test';
import { CertManager, certManagerBinDir, installCertManagerCRDs, projectSecret } from './helpers/certmanager.ts';
import { cluster, expectStatus, grantMetricsReader, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { enabledConfigCopy, find, render, type Doc } from './helpers/kustomize.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';
import { Prometheus } from './helpers/prometheus.ts';

/** The certificate a TLS handshake with the manager presents, verified against `ca` for `servername`. */
function presented(port: number, servername: string, ca: string): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername, ca }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert);
      else reject(new Error('no peer certificate'));
    });
    socket.on('error', reject);
  });
}

/** Prometheus's own counter of TCP connections its scrape dialer of `job` established. */
async function dialerConnections(prom: Prometheus, job: string): Promise<number> {
  const text = await (await fetch(`${prom.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`net_conntrack_dialer_conn_established_total{dialer_name="${job}"}`));
  if (!line) throw new Error(`Prometheus exposes no net_conntrack_dialer_conn_established_total for ${job}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('cert-manager issues and renews the metrics certificate', () => {
  test('self-signed Issuer → Certificate → Secret → --metrics-cert-dir → Prometheus verifies it, also after a renewal', async (t) => {
    const cp = cluster();
    const binDir = await certManagerBinDir();
    await Promise.all([installCRDs(), installCertManagerCRDs(binDir)]);
    const ns = await testNamespace(t, 'certmgr');
    const work = mkdtempSync(join(tmpdir(), 'tscm-certmanager-'));
    t.after(() => rmSync(work, { recursive: true, force: true }));

    // config/certmanager's objects exactly as config/default renders them (name prefix, the Service's DNS names),
    // created in this test's namespace.
    const config = enabledConfigCopy();
    t.after(() => rmSync(config, { recursive: true, force: true }));
    const docs = await render(join(config, 'default'));
    const inNs = (doc: Doc | undefined): Doc => {
      assert.ok(doc);
      return { ...doc, metadata: { ...doc.metadata, namespace: ns } };
    };
    const issuer = inNs(find(docs, 'Issuer'));
    const certificate = inNs(find(docs, 'Certificate'));
    const dnsNames = certificate.spec?.['dnsNames'] as string[];
    const secretName = certificate.spec?.['secretName'] as string;
    const serverName = dnsNames[0] ?? '';
    assert.equal(serverName, 'ts-controller-manager-controller-manager-metrics-service.ts-controller-manager-system.svc');

    const cm = CertManager.start(t, binDir, ns);
    expectStatus(await cp.request('POST', `/apis/cert-manager.io/v1/namespaces/${ns}/issuers?fieldValidation=Strict`, issuer), 201, 'Issuer');
    expectStatus(await cp.request('POST', `/apis/cert-manager.io/v1/namespaces/${ns}/certificates?fieldValidation=Strict`, certificate), 201, 'Certificate');
    const issued = await cm.waitReady(certificate.metadata.name, 1);

    // The kubelet projects the Secret into the Pod; the manager starts on it.
    const certDir = join(work, 'metrics-certs');
    const volume = await projectSecret(t, ns, secretName, certDir, ['tls.crt', 'tls.key', 'ca.crt']);
    const first = new X509Certificate(volume.files['tls.crt'] ?? '');
    const firstCa = volume.files['ca.crt'] ?? '';
    assert.equal(issued.status?.revision, 1);
    assert.equal(first.fingerprint256, new X509Certificate(await cm.requestedCertificate(certificate.metadata.name, 1)).fingerprint256,
      'the Secret holds revision 1 as signed for its CertificateRequest');
    assert.equal(new Date(first.validTo).toISOString(), new Date(issued.status?.notAfter ?? 0).toISOString());
    assert.equal(first.subjectAltName, dnsNames.map((n) => `DNS:${n}`).join(', '));
    assert.equal(new X509Certificate(firstCa).fingerprint256, first.fingerprint256, 'a self-signed Issuer: ca.crt is the certificate itself');
    assert.equal(first.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'privateKey ECDSA 256 as config/certmanager asks');

    const mgr = await ManagerProcess.start({
      args: [`--kubeconfig=${cp.kubeconfig}`, '--controllers=deployment', '--metrics-secure', `--metrics-cert-dir=${certDir}`],
      env: { WATCH_NAMESPACE: ns },
    });
    t.after(() => mgr.stop('SIGKILL'));
    await mgr.waitReady();
    const port = mgr.metricsPort ?? 0;
    assert.equal((await presented(port, serverName, firstCa)).serialNumber, first.serialNumber);

    // Prometheus as config/prometheus's cert-manager variant configures it: ca from the Secret, the Service name.
    await grantMetricsReader(t, ns, 'prometheus');
    writeFileSync(join(work, 'token'), await cp.mintServiceAccountToken(ns, 'prometheus', 3600));
    const prom = await Prometheus.start(t, work, {
      global: { scrape_interval: '1s', scrape_timeout: '1s' },
      scrape_configs: [{
        job_name: 'metrics', scheme: 'https',
        tls_config: { ca_file: join(certDir, 'ca.crt'), server_name: serverName, insecure_skip_verify: false },
        authorization: { type: 'Bearer', credentials_file: join(work, 'token') },
        static_configs: [{ targets: [`127.0.0.1:${port}`] }],
      }],
    });
    await waitFor('Prometheus scrapes the verified endpoint', () => prom.health('metrics', 'up'), { timeoutMs: 60_000 }).catch(prom.withLog);
    await prom.waitForSuccessfulScrapes('metrics', 2);
    const connectionsBefore = await dialerConnections(prom, 'metrics');

    // Renewal, as `cmctl renew`: a new key and a new self-signed certificate, which the old one does not vouch for.
    await cm.renew(certificate.metadata.name);
    const renewed = await cm.waitReady(certificate.metadata.name, 2);
    await waitFor('the renewed Secret projected', () => volume.files['tls.crt'] !== first.toString() && volume.updates >= 2, { timeoutMs: 60_000 })
      .catch(cm.withLog);
    const second = new X509Certificate(volume.files['tls.crt'] ?? '');
    const secondCa = volume.files['ca.crt'] ?? '';
    assert.equal(renewed.status?.revision, 2);
    assert.equal(second.fingerprint256, new X509Certificate(await cm.requestedCertificate(certificate.metadata.name, 2)).fingerprint256,
      'the Secret holds revision 2');
    assert.notEqual(second.serialNumber, first.serialNumber);
    assert.ok(!second.publicKey.equals(first.publicKey), 'rotationPolicy Always: a new private key');
    assert.equal(new X509Certificate(secondCa).fingerprint256, second.fingerprint256);
    assert.ok(!second.verify(first.publicKey) && !first.verify(second.publicKey), 'neither certificate vouches for the other');

    // The manager serves the new certificate on new handshakes (no restart), verified with the new CA only...
    const served = await waitFor('the manager presents the renewed serial', async () => {
      const cert = await presented(port, serverName, secondCa).catch(() => undefined);
      return cert?.serialNumber === second.serialNumber ? cert : undefined;
    }, { timeoutMs: 30_000 });
    assert.equal(served.fingerprint256, second.fingerprint256);
    assert.equal(mgr.running, true);
    await assert.rejects(presented(port, serverName, firstCa), /self[- ]signed|unable to verify|certificate/i, 'the old CA no longer verifies it');

    // ...and Prometheus dials a new connection (the manager closes keep-alive connections made before the change; a
    // scrape over one of those would prove nothing), whose handshake gets the new certificate: its scrapes succeed
    // only because Prometheus re-read ca_file.
    await waitFor('Prometheus dials a new connection after the renewal', async () =>
      (await dialerConnections(prom, 'metrics')) > connectionsBefore, { timeoutMs: 60_000 }).catch(prom.withLog);
    await prom.waitForSuccessfulScrapes('metrics', 3);
    const failed = (await prom.value('count_over_time(up{job="metrics"}[10m]) - sum_over_time(up{job="metrics"}[10m])')) ?? 0;
    t.diagnostic(`scrapes that failed over the whole test (the renewal window included): ${failed}`);
  });
});
