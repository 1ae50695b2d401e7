/**
 * Test PKI: a CA and serving certificates it signs (what a cert-manager CA or self-signed Issuer puts into a
 * Secret: tls.crt, tls.key, ca.crt), made with @peculiar/x509 on WebCrypto; and the kubelet's Secret-volume layout
 * (`..data` symlink swapped atomically) for writing them.
 */
import 'reflect-metadata';
import { randomBytes, webcrypto } from 'node:crypto';
import { mkdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';

const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
/** A positive 128-bit serial (leading 01: never negative, never a leading zero byte). */
const serial = (): string => '01' + randomBytes(15).toString('hex');

function pemKey(der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').trimEnd();
  return `-----BEGIN PRIVATE KEY-----\n${b64}\n-----END PRIVATE KEY-----\n`;
}

export interface IssueOptions {
  /** IP addresses in the subjectAltName (e.g. 127.0.0.1 for a server reached by IP). */
  ips?: string[];
  /** A client certificate (extendedKeyUsage clientAuth) instead of a serving one. */
  client?: boolean;
}

export interface TestCA {
  cert: string;
  issue(dnsNames: string[], commonName?: string, opts?: IssueOptions): Promise<{ cert: string; key: string }>;
}

/**
 * A CA valid for a day that issues certificates valid for an hour: serving ones (serverAuth, the given DNS names and
 * IPs) or client ones (clientAuth).
 */
export async function createCA(name: string): Promise<TestCA> {
  const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const now = Date.now();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(), name: [{ CN: [name] }], notBefore: new Date(now - 3_600_000), notAfter: new Date(now + 86_400_000),
    keys, signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  }, webcrypto);
  return {
    cert: ca.toString('pem') + '\n',
    async issue(dnsNames: string[], commonName = dnsNames[0] ?? 'server', opts: IssueOptions = {}) {
      const leafKeys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: serial(), subject: [{ CN: [commonName] }], issuer: ca.subject,
        notBefore: new Date(Date.now() - 3_600_000), notAfter: new Date(Date.now() + 3_600_000),
        publicKey: leafKeys.publicKey, signingKey: keys.privateKey, signingAlgorithm: alg,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([opts.client ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension([
            ...dnsNames.map((value) => ({ type: 'dns' as const, value })),
            ...(opts.ips ?? []).map((value) => ({ type: 'ip' as const, value })),
          ]),
          await x509.AuthorityKeyIdentifierExtension.create(ca, false, webcrypto),
        ],
      }, webcrypto);
      return { cert: leaf.toString('pem') + '\n', key: pemKey(await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey)) };
    },
  };
}

/**
 * Writes `files` into `dir` as the kubelet updates a Secret volume: a new `..<n>` directory, a `..data_tmp` symlink
 * to it renamed over `..data` (atomic), `<name>` → `..data/<name>` links, and the previous version removed.
 */
export async function writeSecretVolume(dir: string, files: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true });
  const previous = await readlink(join(dir, '..data')).catch(() => undefined);
  const version = `..${Date.now()}.${randomBytes(4).toString('hex')}`;
  await mkdir(join(dir, version));
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, version, name), content);
  await symlink(version, join(dir, '..data_tmp'));
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  for (const name of Object.keys(files)) await symlink(join('..data', name), join(dir, name)).catch(() => undefined);
  if (previous) await rm(join(dir, previous), { recursive: true, force: true });
}
