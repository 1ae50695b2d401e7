/**
 * The CA and CA-signed serving certificates of selfsigned.ts, checked by OpenSSL twice: the `openssl` CLI
 * (`openssl verify -purpose sslserver`, and the extensions as `openssl x509 -text` prints them) and Node's TLS
 * (a client that trusts only the CA connects by the Service DNS name and by IP; one trusting another CA is refused).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { test } from 'node:test';
import { certificateAuthority, signedCertificate, subjectOf } from '../../manager/selfsigned.ts';

const dnsNames = ['webhook-service.system.svc', 'webhook-service.system.svc.cluster.local'];

function openssl(dir: string, files: Record<string, string>, args: string[]): { status: number | null; out: string } {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

function handshake(port: number, servername: string | undefined, ca: string): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, ...(servername ? { servername } : {}) }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert);
      else reject(new Error('no peer certificate'));
    });
    socket.on('error', reject);
  });
}

test('certificateAuthority + signedCertificate: openssl verifies the chain; the extensions are what a CA and a server need', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tscm-pki-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ca = await certificateAuthority({ commonName: 'test-webhook-ca@1', validityMs: 86_400_000 });
  const leaf = await signedCertificate({ ca, commonName: 'webhook-service.system.svc', dnsNames, ips: ['127.0.0.1'], validityMs: 3_600_000 });
  const other = await certificateAuthority({ commonName: 'test-webhook-ca@2', validityMs: 86_400_000 });

  const ok = openssl(dir, { 'ca.pem': ca.cert, 'leaf.pem': leaf.cert }, ['verify', '-purpose', 'sslserver', '-CAfile', 'ca.pem', 'leaf.pem']);
  assert.equal(ok.status, 0, ok.out);
  assert.match(ok.out, /leaf\.pem: OK/);
  const wrong = openssl(dir, { 'other.pem': other.cert }, ['verify', '-CAfile', 'other.pem', 'leaf.pem']);
  assert.notEqual(wrong.status, 0, 'a leaf does not verify against an unrelated CA');
  // A bundle of two CAs (a rotation's overlap) verifies a leaf of either.
  const both = openssl(dir, { 'both.pem': other.cert + ca.cert }, ['verify', '-purpose', 'sslserver', '-CAfile', 'both.pem', 'leaf.pem']);
  assert.equal(both.status, 0, both.out);

  const caText = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'ca.pem')], { encoding: 'utf8' });
  assert.match(caText, /X509v3 Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
  assert.match(caText, /X509v3 Key Usage: critical\s+Certificate Sign, CRL Sign/);
  assert.match(caText, /X509v3 Subject Key Identifier/);
  const leafText = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'leaf.pem')], { encoding: 'utf8' });
  assert.match(leafText, /CA:FALSE/);
  assert.match(leafText, /TLS Web Server Authentication/);
  assert.match(leafText, /DNS:webhook-service\.system\.svc, DNS:webhook-service\.system\.svc\.cluster\.local, IP Address:127\.0\.0\.1/);
  assert.match(leafText, /Issuer: CN\s*=\s*test-webhook-ca@1/);

  const x = new X509Certificate(leaf.cert);
  assert.ok(x.checkIssued(new X509Certificate(ca.cert)), 'issuer name and key identifier match the CA');
  assert.ok(x.verify(new X509Certificate(ca.cert).publicKey), 'signed by the CA key');
  assert.ok(!x.checkIssued(new X509Certificate(other.cert)));
  assert.ok(subjectOf(x.raw).equals(subjectOf(x.raw)));
  assert.equal(new X509Certificate(ca.cert).ca, true);
  assert.equal(x.ca, false);
});

test('signedCertificate: notAfter is clamped to the CA; a key that is not the CA\'s is refused', async () => {
  const ca = await certificateAuthority({ commonName: 'short-ca', validityMs: 60_000 });
  const leaf = await signedCertificate({ ca, commonName: 'x', dnsNames: ['x'], validityMs: 86_400_000 });
  assert.equal(leaf.notAfter.getTime(), ca.notAfter.getTime());
  assert.equal(new Date(new X509Certificate(leaf.cert).validTo).getTime(), ca.notAfter.getTime());
  const other = await certificateAuthority({ commonName: 'other', validityMs: 60_000 });
  await assert.rejects(signedCertificate({ ca: { cert: ca.cert, key: other.key }, commonName: 'x' }), /does not belong/);
});

test('Node TLS: a client trusting only the CA connects by the Service DNS name and by IP; one trusting another CA is refused', async (t) => {
  const ca = await certificateAuthority({ commonName: 'tls-ca', validityMs: 86_400_000 });
  const leaf = await signedCertificate({ ca, commonName: dnsNames[0] ?? '', dnsNames, ips: ['127.0.0.1'], validityMs: 3_600_000 });
  const other = await certificateAuthority({ commonName: 'tls-other', validityMs: 86_400_000 });
  const server: Server = createServer({ cert: leaf.cert, key: leaf.key }, (_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;

  for (const name of dnsNames) {
    const peer = await handshake(port, name, ca.cert);
    assert.equal(peer.fingerprint256, new X509Certificate(leaf.cert).fingerprint256);
  }
  await handshake(port, undefined, ca.cert); // by IP: the IP SAN
  await assert.rejects(handshake(port, dnsNames[0], other.cert), /unable to verify|self.signed|certificate/i);
  await assert.rejects(handshake(port, 'webhook-service.other.svc', ca.cert), /altnames|Hostname/i);
});
