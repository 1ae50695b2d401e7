/**
 * Certificates and keys for a local control plane (the test environment's and test/cluster's), made with the
 * machine's `openssl` (Debian ships it; so do most Linux distributions and macOS).
 *
 * One throw-away CA signs the kube-apiserver serving certificate (SANs for loopback and the in-cluster service
 * names) and an admin client certificate in group `system:masters`. A separate RSA key pair signs ServiceAccount
 * tokens (TokenRequest API). Everything lives in the cluster's own state directory and dies with it.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Pki {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
  saPublicKey: string;
  saPrivateKey: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`openssl ${args[0] ?? ''} failed: ${stderr.trim() || String(err)}`, { cause: err });
  }
}

/** Signs a leaf certificate for `subject` with the CA in `dir`, using the given X.509 v3 extensions. */
function signLeaf(dir: string, name: string, subject: string, extensions: string): void {
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], dir);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(
    ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`,
      '-days', '3650', '-sha256', '-extfile', `${name}.ext`],
    dir,
  );
}

/**
 * Signs a client certificate `<dir>/<name>.crt` (key `<name>.key`) for `subject` (e.g. `/O=system:nodes/CN=system:node:x`)
 * with the CA that createPki made in `dir`; returns the two paths.
 */
export function signClientCert(dir: string, name: string, subject: string): { cert: string; key: string } {
  signLeaf(dir, name, subject, ['extendedKeyUsage=clientAuth', 'keyUsage=critical,digitalSignature,keyEncipherment', ''].join('\n'));
  return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
}

/**
 * Creates the CA, serving, admin and ServiceAccount-signing material in `dir` (which must exist). `extraIPs` are added
 * to the serving certificate's SANs (an API server address other than loopback, e.g. the real node's in
 * test/cluster/node.ts).
 */
export function createPki(dir: string, extraIPs: string[] = []): Pki {
  openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '3650', '-sha256',
      '-subj', '/CN=ts-controller-manager-local-ca',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    dir,
  );
  signLeaf(dir, 'serving', '/CN=kube-apiserver', [
    `subjectAltName=IP:127.0.0.1,IP:10.0.0.1,${extraIPs.map((ip) => `IP:${ip},`).join('')}DNS:localhost,DNS:kubernetes,` +
      'DNS:kubernetes.default,DNS:kubernetes.default.svc',
    'extendedKeyUsage=serverAuth',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    '',
  ].join('\n'));
  signLeaf(dir, 'admin', '/O=system:masters/CN=admin', [
    'extendedKeyUsage=clientAuth',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    '',
  ].join('\n'));
  openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'sa.key'], dir);
  openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
  return {
    caCert: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    servingCert: join(dir, 'serving.crt'),
    servingKey: join(dir, 'serving.key'),
    adminCert: join(dir, 'admin.crt'),
    adminKey: join(dir, 'admin.key'),
    saPublicKey: join(dir, 'sa.pub'),
    saPrivateKey: join(dir, 'sa.key'),
  };
}
