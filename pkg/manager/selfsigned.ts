/**
 * A self-signed X.509 certificate made in memory with Node's crypto: an EC P-256 key, ECDSA-SHA256 signature, a
 * validity window, and subjectAltNames. Used by `--metrics-secure` when no `--metrics-cert-dir` is given, so the
 * manager needs no `openssl` binary and writes nothing to disk (the container's root filesystem is read-only).
 *
 * Only the DER needed for one certificate is encoded here (SEQUENCE, INTEGER, OID, strings, times, BIT/OCTET
 * STRING, context tags); the public key's SubjectPublicKeyInfo and the signature come from Node's crypto as DER.
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { isIP } from 'node:net';

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
}

const seq = (...c: Buffer[]): Buffer => tlv(0x30, ...c);
const set = (...c: Buffer[]): Buffer => tlv(0x31, ...c);
const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
const octets = (b: Buffer): Buffer => tlv(0x04, b);
const bits = (b: Buffer): Buffer => tlv(0x03, Buffer.from([0]), b);
const explicit = (n: number, b: Buffer): Buffer => tlv(0xa0 + n, b);

function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a + b];
  for (const v of rest) {
    const chunk = [v & 0x7f];
    for (let x = v >> 7; x > 0; x >>= 7) chunk.unshift(0x80 | (x & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

function positiveInteger(b: Buffer): Buffer {
  return tlv(0x02, (b[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

/** UTCTime for years < 2050, GeneralizedTime after (RFC 5280 4.1.2.5). */
function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14); // YYYYMMDDHHMMSS
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  const [head = '', tail = ''] = ip.split('::');
  const groups = (s: string): number[] => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const h = groups(head);
  const t = groups(tail);
  const all = ip.includes('::') ? [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t] : h;
  return Buffer.from(all.flatMap((g) => [g >> 8, g & 0xff]));
}

export interface SelfSigned {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
}

/**
 * Creates a self-signed certificate for `commonName` valid from one hour ago for `validDays`, with the given DNS
 * names and IP addresses as subjectAltNames (server authentication only).
 */
export function selfSignedCertificate(opts: { commonName: string; dnsNames?: string[]; ips?: string[]; validDays?: number; now?: Date }): SelfSigned {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = opts.now ?? new Date();
  const ecdsaWithSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(set(seq(oid('2.5.4.3'), utf8(opts.commonName))));
  const san = Buffer.concat([
    ...(opts.dnsNames ?? []).map((d) => tlv(0x82, Buffer.from(d, 'ascii'))),
    ...(opts.ips ?? []).map((ip) => tlv(0x87, ipBytes(ip))),
  ]);
  const extensions = explicit(3, seq(
    seq(oid('2.5.29.19'), tlv(0x01, Buffer.from([0xff])), octets(seq())), // basicConstraints: critical, CA:FALSE
    seq(oid('2.5.29.15'), tlv(0x01, Buffer.from([0xff])), octets(bits(Buffer.from([0x80])))), // keyUsage: digitalSignature
    seq(oid('2.5.29.37'), octets(seq(oid('1.3.6.1.5.5.7.3.1')))), // extKeyUsage: serverAuth
    ...(san.length > 0 ? [seq(oid('2.5.29.17'), octets(seq(san)))] : []),
  ));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const tbs = seq(
    explicit(0, tlv(0x02, Buffer.from([2]))), // v3
    positiveInteger(serial),
    ecdsaWithSha256,
    name,
    seq(time(new Date(now.getTime() - 3_600_000)), time(new Date(now.getTime() + (opts.validDays ?? 365) * 86_400_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const signature = sign('sha256', tbs, privateKey); // DER-encoded ECDSA signature
  const der = seq(tbs, ecdsaWithSha256, bits(signature));
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n').trimEnd();
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
