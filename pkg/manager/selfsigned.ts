/**
 * A self-signed X.509 serving certificate made in memory: an EC P-256 key from WebCrypto, ECDSA-SHA256, a validity
 * window, and subjectAltNames. Used by `--metrics-secure` when no `--metrics-cert-dir` is given, so the manager needs
 * no `openssl` binary and writes nothing to disk (the container's root filesystem is read-only).
 *
 * The certificate is built by `@peculiar/x509` (a maintained X.509/ASN.1 library on WebCrypto) instead of a
 * hand-written DER encoder. The library and the `reflect-metadata` polyfill it needs (through tsyringe; it adds
 * `Reflect.getMetadata` & co. to the global `Reflect`) are imported on the first call only: importing them costs
 * ~0.3–0.8 s on a 2-core machine, which a manager with `--metrics-cert-dir` or without secure metrics never pays.
 */
import { randomBytes, webcrypto } from 'node:crypto';
import type * as X509 from '@peculiar/x509';

export interface SelfSigned {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
  notBefore: Date;
  notAfter: Date;
}

export interface SelfSignedOptions {
  commonName: string;
  dnsNames?: string[];
  ips?: string[];
  /** Lifetime from `now` (default 365 days). notBefore is one hour before `now`, for clients with a slow clock. */
  validityMs?: number;
  now?: Date;
}

export const defaultValidityMs = 365 * 86_400_000;

type X509Module = typeof X509;
let x509Module: Promise<X509Module> | undefined;

function loadX509(): Promise<X509Module> {
  x509Module ??= (async () => {
    await import('reflect-metadata');
    return import('@peculiar/x509');
  })();
  return x509Module;
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').trimEnd();
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/**
 * Creates a self-signed certificate for `commonName` with the given DNS names and IP addresses as subjectAltNames:
 * CA:FALSE (critical), keyUsage digitalSignature (critical), extKeyUsage serverAuth, a random positive 128-bit serial.
 */
export async function selfSignedCertificate(opts: SelfSignedOptions): Promise<SelfSigned> {
  const x509 = await loadX509();
  const now = opts.now ?? new Date();
  const notBefore = new Date(now.getTime() - 3_600_000);
  const notAfter = new Date(now.getTime() + (opts.validityMs ?? defaultValidityMs));
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
  const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const serial = randomBytes(16);
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x01; // positive, and no leading zero byte to strip
  const names = [
    ...(opts.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(opts.ips ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial.toString('hex'),
      name: [{ CN: [opts.commonName] }],
      notBefore,
      notAfter,
      keys,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        ...(names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : []),
      ],
    },
    webcrypto,
  );
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { cert: cert.toString('pem') + '\n', key: pem('PRIVATE KEY', pkcs8), notBefore: cert.notBefore, notAfter: cert.notAfter };
}
