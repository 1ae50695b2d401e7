/**
 * A self-signed X.509 serving certificate made in memory: an EC P-256 key from node:crypto, ECDSA-SHA256, a validity
 * window, and subjectAltNames. Used by `--metrics-secure` when no `--metrics-cert-dir` is given, so the manager needs
 * no `openssl` binary and writes nothing to disk (the container's root filesystem is read-only).
 *
 * The certificate has one fixed shape, so it is DER-encoded here (the handful of ASN.1 types it uses) and signed with
 * node:crypto. Until issue 30 it was built with `@peculiar/x509`; importing that library and the `reflect-metadata`
 * polyfill it needs cost +17 MiB RSS and 0.2–0.4 s at every start of the image's configuration (bench/README.md,
 * "Fixed cost"), for one certificate. OpenSSL (Node's X509Certificate and a TLS handshake) parses and verifies the
 * result in selfsigned.test.ts.
 *
 * The same builder makes a small CA (certificateAuthority) and serving certificates signed by it (signedCertificate),
 * for the webhook certificates the manager manages itself (pkg/webhook/certs); `openssl verify` and a TLS client
 * trusting only the CA check those in pkg/webhook/certs/pki.test.ts.
 *
 * DER invariants kept here: definite minimal lengths; a positive 128-bit serial with no leading zero byte; cA FALSE
 * omitted (DEFAULT); the keyUsage BIT STRING without trailing zero bits; UTCTime before 2050, GeneralizedTime from
 * 2050 (RFC 5280 4.1.2.5). notBefore/notAfter are whole seconds, and the returned Dates equal the encoded ones.
 */
import {
  createHash, createPrivateKey, generateKeyPair as generateKeyPairCb, type KeyObject, randomBytes, sign, X509Certificate,
} from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import { promisify } from 'node:util';

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

const generateKeyPair = promisify(generateKeyPairCb);

// ---- DER ----------------------------------------------------------------------------------------------------------

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  if (n < 0x80) return Buffer.concat([Buffer.from([tag, n]), content]);
  const len: number[] = [];
  for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) len.unshift(rest % 256);
  return Buffer.concat([Buffer.from([tag, 0x80 | len.length, ...len]), content]);
}
const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
/** A non-negative INTEGER from its big-endian magnitude (a 0x00 is prefixed when the top bit is set). */
const uint = (magnitude: Buffer): Buffer => tlv(0x02, (magnitude[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), magnitude]) : magnitude);
const bitString = (bytes: Buffer, unusedBits = 0): Buffer => tlv(0x03, Buffer.concat([Buffer.from([unusedBits]), bytes]));
const octetString = (bytes: Buffer): Buffer => tlv(0x04, bytes);
const TRUE = tlv(0x01, Buffer.from([0xff]));

function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const out = [40 * (arcs[0] ?? 0) + (arcs[1] ?? 0)];
  for (const arc of arcs.slice(2)) {
    const b128 = [arc & 0x7f];
    for (let rest = Math.floor(arc / 128); rest > 0; rest = Math.floor(rest / 128)) b128.unshift(0x80 | (rest & 0x7f));
    out.push(...b128);
  }
  return tlv(0x06, Buffer.from(out));
}

function time(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(digits.slice(2), 'ascii')) : tlv(0x18, Buffer.from(digits, 'ascii'));
}

/** iPAddress bytes of a SAN entry: 4 for IPv4, 16 for IPv6 (with `::` and a dotted IPv4 tail expanded). */
export function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!isIPv6(ip)) throw new Error(`not an IP address: ${ip}`);
  let text = ip.replace(/%.*$/, ''); // a zone id is not part of the address
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const groups = (s: string): number[] => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(g, 2 * i));
  return out;
}

const ecdsaWithSha256 = seq(oid('1.2.840.10045.4.3.2')); // parameters absent (RFC 5758 3.2)

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [TRUE] : []), octetString(value));
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n').trimEnd();
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/** The encoded pieces of one certificate (see `issue`). */
interface CertificateSpec {
  subject: Buffer;
  issuer: Buffer;
  /** The subject's public key. */
  publicKey: KeyObject;
  /** The issuer's private key (the subject's own for a self-signed certificate). */
  signerKey: KeyObject;
  extensions: Buffer[];
  notBefore: Date;
  notAfter: Date;
}

function issue(spec: CertificateSpec): Buffer {
  const serial = randomBytes(16);
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x01; // positive, and no leading zero byte to strip
  const tbs = seq(
    tlv(0xa0, uint(Buffer.from([2]))), // [0] version v3
    uint(serial),
    ecdsaWithSha256,
    spec.issuer,
    seq(time(spec.notBefore), time(spec.notAfter)),
    spec.subject,
    spec.publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...spec.extensions)), // [3] extensions
  );
  const signature = sign('sha256', tbs, spec.signerKey); // ECDSA-Sig-Value, DER
  return seq(tbs, ecdsaWithSha256, bitString(signature));
}

const wholeSeconds = (ms: number): Date => new Date(Math.floor(ms / 1000) * 1000);
/** A Name with one CN (UTF8String). */
const cnName = (commonName: string): Buffer => seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(commonName, 'utf8')))));

/**
 * The key identifier of a public key: SHA-1 of its DER SubjectPublicKeyInfo (RFC 7093 section 2 allows any method;
 * the issuer side computes the same from the CA's key, so a certificate's authorityKeyIdentifier equals its CA's
 * subjectKeyIdentifier).
 */
function keyIdentifier(publicKey: KeyObject): Buffer {
  return createHash('sha1').update(publicKey.export({ type: 'spki', format: 'der' })).digest();
}

/** The serving extensions: CA:FALSE, digitalSignature, serverAuth, the SANs (and an AKI when a CA signs). */
function servingExtensions(opts: SelfSignedOptions, authorityKeyId?: Buffer): Buffer[] {
  const altNames = [
    ...(opts.dnsNames ?? []).map((dns) => tlv(0x82, Buffer.from(dns, 'ascii'))), // [2] dNSName (IA5String)
    ...(opts.ips ?? []).map((ip) => tlv(0x87, ipBytes(ip))), // [7] iPAddress
  ];
  return [
    extension('2.5.29.19', true, seq()), // basicConstraints: cA FALSE (the DEFAULT, so omitted)
    extension('2.5.29.15', true, bitString(Buffer.from([0x80]), 7)), // keyUsage: digitalSignature (bit 0)
    extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))), // extKeyUsage: serverAuth
    ...(altNames.length > 0 ? [extension('2.5.29.17', false, seq(...altNames))] : []), // subjectAltName
    ...(authorityKeyId ? [extension('2.5.29.35', false, seq(tlv(0x80, authorityKeyId)))] : []), // AKI [0] keyIdentifier
  ];
}

function validity(now: Date | undefined, validityMs: number | undefined): { notBefore: Date; notAfter: Date } {
  const t = (now ?? new Date()).getTime();
  return { notBefore: wholeSeconds(t - 3_600_000), notAfter: wholeSeconds(t + (validityMs ?? defaultValidityMs)) };
}

/**
 * Creates a self-signed certificate for `commonName` with the given DNS names and IP addresses as subjectAltNames:
 * CA:FALSE (critical), keyUsage digitalSignature (critical), extKeyUsage serverAuth, a random positive 128-bit serial.
 */
export async function selfSignedCertificate(opts: SelfSignedOptions): Promise<SelfSigned> {
  const { notBefore, notAfter } = validity(opts.now, opts.validityMs);
  const { publicKey, privateKey } = await generateKeyPair('ec', { namedCurve: 'P-256' });
  const name = cnName(opts.commonName);
  const cert = issue({ subject: name, issuer: name, publicKey, signerKey: privateKey, extensions: servingExtensions(opts), notBefore, notAfter });
  return { cert: pem('CERTIFICATE', cert), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), notBefore, notAfter };
}

/**
 * Creates a self-signed certificate authority: basicConstraints cA TRUE with pathLenConstraint 0 (critical: it signs
 * only end-entity certificates), keyUsage keyCertSign + cRLSign (critical), and a subjectKeyIdentifier. Give each CA
 * a distinct `commonName` (selfmanaged.ts appends the creation time): during a CA rotation two CAs sit in one trust
 * bundle, and chain building picks an issuer by subject name first (then by key identifier).
 */
export async function certificateAuthority(opts: Omit<SelfSignedOptions, 'dnsNames' | 'ips'>): Promise<SelfSigned> {
  const { notBefore, notAfter } = validity(opts.now, opts.validityMs);
  const { publicKey, privateKey } = await generateKeyPair('ec', { namedCurve: 'P-256' });
  const name = cnName(opts.commonName);
  const extensions = [
    extension('2.5.29.19', true, seq(TRUE, uint(Buffer.from([0])))), // basicConstraints: cA TRUE, pathLen 0
    extension('2.5.29.15', true, bitString(Buffer.from([0x06]), 1)), // keyUsage: keyCertSign (5), cRLSign (6)
    extension('2.5.29.14', false, octetString(keyIdentifier(publicKey))), // subjectKeyIdentifier
  ];
  const cert = issue({ subject: name, issuer: name, publicKey, signerKey: privateKey, extensions, notBefore, notAfter });
  return { cert: pem('CERTIFICATE', cert), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), notBefore, notAfter };
}

/**
 * Creates a serving certificate (the same extensions as selfSignedCertificate, plus an authorityKeyIdentifier)
 * signed by `ca` (PEM certificate and key, e.g. from certificateAuthority). Its issuer is the CA's subject, copied
 * byte for byte from the CA certificate. notAfter is clamped to the CA's: a certificate never outlives its issuer.
 * Throws if the key does not belong to the certificate.
 */
export async function signedCertificate(opts: SelfSignedOptions & { ca: { cert: string; key: string } }): Promise<SelfSigned> {
  const caCert = new X509Certificate(opts.ca.cert);
  const caKey = createPrivateKey(opts.ca.key);
  if (!caCert.checkPrivateKey(caKey)) throw new Error('the CA key does not belong to the CA certificate');
  const v = validity(opts.now, opts.validityMs);
  const caNotAfter = new Date(caCert.validTo);
  const notAfter = v.notAfter.getTime() > caNotAfter.getTime() ? caNotAfter : v.notAfter;
  const notBefore = v.notBefore;
  const { publicKey, privateKey } = await generateKeyPair('ec', { namedCurve: 'P-256' });
  const cert = issue({
    subject: cnName(opts.commonName), issuer: subjectOf(caCert.raw), publicKey, signerKey: caKey,
    extensions: servingExtensions(opts, keyIdentifier(caCert.publicKey)), notBefore, notAfter,
  });
  return { cert: pem('CERTIFICATE', cert), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), notBefore, notAfter };
}

/** One DER element at `offset`: where its content starts and ends. */
function element(der: Buffer, offset: number): { tag: number; start: number; end: number } {
  const tag = der[offset] ?? 0;
  const first = der[offset + 1] ?? 0;
  if (first < 0x80) return { tag, start: offset + 2, end: offset + 2 + first };
  const n = first & 0x7f;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + (der[offset + 2 + i] ?? 0);
  return { tag, start: offset + 2 + n, end: offset + 2 + n + len };
}

/** The encoded subject Name of a DER certificate (tbsCertificate's sixth field, after the [0] version). */
export function subjectOf(certDer: Buffer): Buffer {
  const cert = element(certDer, 0);
  const tbs = element(certDer, cert.start);
  let at = tbs.start;
  let field = element(certDer, at);
  if (field.tag === 0xa0) { at = field.end; field = element(certDer, at); } // version
  for (let i = 0; i < 4; i++) { at = field.end; field = element(certDer, at); } // serial, signature, issuer, validity
  if (field.tag !== 0x30 || field.end > tbs.end) throw new Error('not a certificate: no subject Name');
  return certDer.subarray(at, field.end);
}
