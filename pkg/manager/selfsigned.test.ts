import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer } from 'node:tls';
import { test } from 'node:test';
import { selfSignedCertificate } from './selfsigned.ts';

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
