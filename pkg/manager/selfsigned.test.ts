import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer } from 'node:tls';
import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { ipBytes, selfSignedCertificate } from './selfsigned.ts';

test('the certificate parses, is self-signed, and carries the names and validity asked for', async () => {
  const now = new Date('2026-11-22T10:00:00Z');
  const { cert, key, notBefore, notAfter } = await selfSignedCertificate({
    commonName: 'metrics', dnsNames: ['localhost'], ips: ['127.0.0.1', '::1'], validityMs: 30 * 86_400_000, now,
  });
  const x = new X509Certificate(cert);
  assert.equal(x.subject, 'CN=metrics');
  assert.equal(x.issuer, 'CN=metrics');
  assert.ok(x.verify(x.publicKey), 'signature verifies with its own key');
  assert.ok(x.checkPrivateKey(createPrivateKey(key)), 'matches the private key');
  assert.equal(x.subjectAltName, 'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
  assert.equal(new Date(x.validFrom).toISOString(), '2026-11-22T09:00:00.000Z');
  assert.equal(new Date(x.validTo).toISOString(), '2026-12-22T10:00:00.000Z');
  assert.equal(notBefore.toISOString(), '2026-11-22T09:00:00.000Z');
  assert.equal(notAfter.toISOString(), '2026-12-22T10:00:00.000Z');
  assert.equal(x.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
  assert.equal(createPrivateKey(key).asymmetricKeyType, 'ec');
  assert.equal(x.ca, false);
  assert.deepEqual(x.keyUsage, ['1.3.6.1.5.5.7.3.1']);
});

test('a TLS client that trusts the certificate completes a handshake for 127.0.0.1', async () => {
  const { cert, key } = await selfSignedCertificate({ commonName: 'metrics', ips: ['127.0.0.1'] });
  const server = createServer({ cert, key }, (s) => s.end('hello'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  try {
    const socket = connect({ host: '127.0.0.1', port, ca: cert });
    let data = '';
    socket.setEncoding('utf8').on('data', (d: string) => (data += d));
    await once(socket, 'end');
    assert.equal(socket.authorized, true, String(socket.authorizationError));
    assert.equal(data, 'hello');
  } finally {
    server.close();
  }
});

test('every certificate gets a fresh key and serial', async () => {
  const a = new X509Certificate((await selfSignedCertificate({ commonName: 'x' })).cert);
  const b = new X509Certificate((await selfSignedCertificate({ commonName: 'x' })).cert);
  assert.notEqual(a.serialNumber, b.serialNumber);
  assert.notEqual(a.fingerprint256, b.fingerprint256);
});

test('validity from 2050 on is a GeneralizedTime; many names need a long-form DER length; OpenSSL reads it all', async () => {
  const now = new Date('2049-12-31T12:00:00.750Z');
  const dnsNames = Array.from({ length: 40 }, (_, i) => `name-${i}.metrics.example.svc.cluster.local`);
  const { cert, notBefore, notAfter } = await selfSignedCertificate({ commonName: 'é-metrics', dnsNames, ips: ['10.1.2.3'], now, validityMs: 86_400_000 });
  const x = new X509Certificate(cert);
  assert.equal(notBefore.toISOString(), '2049-12-31T11:00:00.000Z', 'whole seconds: what the certificate holds');
  assert.equal(notAfter.toISOString(), '2050-01-01T12:00:00.000Z');
  assert.equal(new Date(x.validTo).toISOString(), notAfter.toISOString());
  assert.equal(x.subject, 'CN=é-metrics');
  assert.ok(x.verify(x.publicKey));
  assert.equal(x.subjectAltName?.split(', ').length, 41);
  // OpenSSL's own strict DER parser, field by field.
  const text = execFileSync('openssl', ['x509', '-noout', '-text'], { input: cert, encoding: 'utf8' });
  assert.match(text, /Version: 3 \(0x2\)/);
  assert.match(text, /Signature Algorithm: ecdsa-with-SHA256/);
  assert.match(text, /X509v3 Basic Constraints: critical\s+CA:FALSE/);
  assert.match(text, /X509v3 Key Usage: critical\s+Digital Signature\n/);
  assert.match(text, /X509v3 Extended Key Usage: \s*TLS Web Server Authentication/);
  assert.match(text, /Not After : Jan {2}1 12:00:00 2050 GMT/);
  assert.match(execFileSync('openssl', ['asn1parse'], { input: cert, encoding: 'utf8' }), /GENERALIZEDTIME\s+:20500101120000Z/);
});

test('ipBytes: IPv4, IPv6 with ::, an IPv4 tail and a zone', () => {
  assert.deepEqual([...ipBytes('127.0.0.1')], [127, 0, 0, 1]);
  assert.equal(ipBytes('::1').toString('hex'), '00000000000000000000000000000001');
  assert.equal(ipBytes('::').toString('hex'), '0'.repeat(32));
  assert.equal(ipBytes('fd00:1:2::abcd').toString('hex'), 'fd00000100020000000000000000abcd');
  assert.equal(ipBytes('2001:db8:0:0:1:0:0:1').toString('hex'), '20010db8000000000001000000000001');
  assert.equal(ipBytes('::ffff:10.0.0.1').toString('hex'), '00000000000000000000ffff0a000001');
  assert.equal(ipBytes('fe80::1%eth0').toString('hex'), 'fe800000000000000000000000000001');
  assert.throws(() => ipBytes('not-an-ip'), /not an IP address/);
});
