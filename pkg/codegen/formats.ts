/**
 * The string formats kube-apiserver checks in custom resources (k8s.io/apiextensions-apiserver's supported formats,
 * validated by k8s.io/kube-openapi's strfmt registry): a port of each check. Pure: no I/O.
 *
 * A format kube-apiserver does not support is not checked by it either (it strips it from the schema); `formatCheck`
 * answers `undefined` for those. Format names are normalised as the server does (`date-time` → `datetime`).
 *
 * Exactness: every supported format is ported from its Go check except `email` (net/mail.ParseAddress: the common
 * `local@domain` and `Name <local@domain>` forms, not RFC 5322 comments or quoted pairs), `uri` (url.ParseRequestURI:
 * an absolute URI or an absolute path), and `isbn`, `isbn10`, `isbn13`, `creditcard`, `ssn` (govalidator's
 * checksums): `approximateFormats` names them so that callers can say so.
 */

/** Formats the fake checks only approximately (see the file comment). */
export const approximateFormats: ReadonlySet<string> = new Set(['email', 'uri', 'isbn', 'isbn10', 'isbn13', 'creditcard', 'ssn']);

const uuid = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const uuid3 = /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const uuid4 = /^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i;
const uuid5 = /^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i;
const hostname = /^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$/u;
const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/;
const hexcolor = /^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/;
const rgbPart = '\\s*(0|[1-9]\\d?|1\\d\\d?|2[0-4]\\d|25[0-5])\\s*';
const rgbcolor = new RegExp(`^rgb\\(${rgbPart},${rgbPart},${rgbPart}\\)$`);
const shortName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const longName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dateTimeTime = /^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$/;

/** Go's time.Parse("2006-01-02", s): four-digit year, two-digit month and day, a real calendar day. */
export function isDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12 || d < 1) return false;
  const days = [31, (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1] ?? 0;
  return d <= days;
}

/** strfmt.IsDateTime. */
function isDateTime(s: string): boolean {
  if (s.length < 4) return false;
  const parts = s.toLowerCase().split('t');
  if (parts.length < 2 || !isDate(parts[0] ?? '')) return false;
  const m = dateTimeTime.exec(parts[1] ?? '');
  return !!m && (m[1] ?? '') <= '23' && (m[2] ?? '') <= '59' && (m[3] ?? '') <= '59';
}

const goDurationUnits: Record<string, number> = { ns: 1, us: 1e3, 'µs': 1e3, 'μs': 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

/** Go's time.ParseDuration: [-+]? then one or more decimal numbers each with a unit (ns us µs ms s m h), or "0". */
export function isGoDuration(s: string): boolean {
  let rest = s.replace(/^[-+]/, '');
  if (rest === '0') return true;
  if (rest === '') return false;
  while (rest !== '') {
    const m = /^(\d*)(\.\d*)?([^\d.]+)/.exec(rest);
    if (!m || ((m[1] ?? '') === '' && (m[2] ?? '').length <= 1)) return false;
    const unit = /^(ns|us|µs|μs|ms|s|m|h)/.exec(m[3] ?? '');
    if (!unit || goDurationUnits[unit[1] ?? ''] === undefined) return false;
    rest = rest.slice((m[1] ?? '').length + (m[2] ?? '').length + (unit[1] ?? '').length);
  }
  return true;
}

const durationUnits = [['ns', 'nano'], ['us', 'µs', 'micro'], ['ms', 'milli'], ['s', 'sec'], ['m', 'min'], ['h', 'hr', 'hour'], ['d', 'day'], ['w', 'wk', 'week']];

/** strfmt.ParseDuration: Go's form, else at least one "<digits> <unit>" group with a known unit. */
function isDuration(s: string): boolean {
  if (isGoDuration(s)) return true;
  let ok = false;
  for (const m of s.matchAll(/((\d+)\s*([A-Za-zµ]+))/g)) {
    const unit = (m[3] ?? '').trim().toLowerCase();
    for (const variants of durationUnits) {
      variants.forEach((v, i) => {
        if ((i === variants.length - 1 && unit.startsWith(v)) || v.toLowerCase() === unit) ok = true;
      });
    }
    if (!ok) return false;
  }
  return ok;
}

/** net.ParseIP for IPv4 (leading zeros tolerated as ParseIPSloppy does). */
function parseIPv4(s: string): boolean {
  const parts = s.split('.');
  return parts.length === 4 && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255);
}

/** net.ParseIP for IPv6 (with an optional embedded IPv4 tail). */
function parseIPv6(s: string): boolean {
  if (!s.includes(':')) return false;
  let body = s;
  let groups = 8;
  const lastColon = s.lastIndexOf(':');
  if (s.slice(lastColon + 1).includes('.')) {
    if (!parseIPv4(s.slice(lastColon + 1))) return false;
    body = s.slice(0, lastColon + 1) + '0';
    groups = 7;
  }
  const halves = body.split('::');
  if (halves.length > 2) return false;
  const parse = (h: string): string[] | undefined => (h === '' ? [] : h.split(':'));
  const a = parse(halves[0] ?? '');
  const b = halves.length === 2 ? parse(halves[1] ?? '') : [];
  if (!a || !b || [...a, ...b].some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return false;
  const n = a.length + b.length;
  return halves.length === 2 ? n < groups : n === groups;
}

const isIP = (s: string): boolean => parseIPv4(s) || parseIPv6(s);

/** net.ParseCIDR (ParseCIDRSloppy). */
function isCIDR(s: string): boolean {
  const i = s.indexOf('/');
  if (i < 0) return false;
  const [ip, bits] = [s.slice(0, i), s.slice(i + 1)];
  if (!/^\d{1,3}$/.test(bits)) return false;
  if (parseIPv4(ip)) return Number(bits) <= 32;
  return parseIPv6(ip) && Number(bits) <= 128;
}

/** net.ParseMAC: 6, 8 or 20 octets separated by ':' or '-', or dotted groups of four hex digits. */
function isMAC(s: string): boolean {
  if (/^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/.test(s) || /^([0-9a-fA-F]{2}[:-]){7}[0-9a-fA-F]{2}$/.test(s) || /^([0-9a-fA-F]{2}[:-]){19}[0-9a-fA-F]{2}$/.test(s)) {
    return new Set(s.replace(/[0-9a-fA-F]/g, '')).size === 1;
  }
  return /^([0-9a-fA-F]{4}\.){2}[0-9a-fA-F]{4}$/.test(s) || /^([0-9a-fA-F]{4}\.){3}[0-9a-fA-F]{4}$/.test(s) || /^([0-9a-fA-F]{4}\.){9}[0-9a-fA-F]{4}$/.test(s);
}

/** An approximation of net/mail.ParseAddress: `local@domain` or `Display Name <local@domain>` (dot-atom parts). */
function isEmail(s: string): boolean {
  const atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
  const addr = `${atext}(\\.${atext})*@${atext}(\\.${atext})*`;
  return new RegExp(`^\\s*(${addr}|[^<>@]*<${addr}>)\\s*$`).test(s);
}

/** An approximation of url.ParseRequestURI: an absolute URI (scheme:…) or an absolute path, no spaces or fragment. */
function isRequestURI(s: string): boolean {
  if (s === '' || [...s].some((c) => c <= ' ' || c === '\x7f')) return false;
  if (s.startsWith('/')) return true;
  return /^[A-Za-z][A-Za-z0-9+.-]*:/.test(s) && !/#/.test(s.replace(/^[^:]*:/, '').split('?')[0] ?? '');
}

function isISBN10(s: string): boolean {
  const d = s.replace(/[\s-]/g, '');
  if (!/^\d{9}[\dX]$/.test(d)) return false;
  let sum = 0;
  for (let i = 0; i < 9; i++) sum += (i + 1) * Number(d[i]);
  sum += d[9] === 'X' ? 100 : 10 * Number(d[9]);
  return sum % 11 === 0;
}

function isISBN13(s: string): boolean {
  const d = s.replace(/[\s-]/g, '');
  if (!/^\d{13}$/.test(d)) return false;
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Number(d[i]) * (i % 2 === 0 ? 1 : 3);
  return (10 - (sum % 10)) % 10 === Number(d[12]);
}

function isCreditCard(s: string): boolean {
  const d = s.replace(/[^0-9]/g, '');
  if (!/^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$/.test(d)) return false;
  let sum = 0;
  let double = false;
  for (let i = d.length - 1; i >= 0; i--) {
    let n = Number(d[i]);
    if (double) { n *= 2; if (n > 9) n -= 9; }
    sum += n;
    double = !double;
  }
  return sum % 10 === 0;
}

const checks: Record<string, (s: string) => boolean> = {
  bsonobjectid: (s) => /^[0-9a-fA-F]{24}$/.test(s),
  uri: isRequestURI,
  email: isEmail,
  hostname: (s) => hostname.test(s) && s.length <= 255 && s.split('.').every((p) => p.length <= 63),
  ipv4: (s) => parseIPv4(s),
  ipv6: (s) => isIP(s) && s.includes(':'),
  cidr: isCIDR,
  mac: isMAC,
  uuid: (s) => uuid.test(s),
  uuid3: (s) => uuid3.test(s),
  uuid4: (s) => uuid4.test(s),
  uuid5: (s) => uuid5.test(s),
  isbn: (s) => isISBN10(s) || isISBN13(s),
  isbn10: isISBN10,
  isbn13: isISBN13,
  creditcard: isCreditCard,
  ssn: (s) => /^\d{3}[- ]?\d{2}[- ]?\d{4}$/.test(s),
  hexcolor: (s) => hexcolor.test(s),
  rgbcolor: (s) => rgbcolor.test(s),
  byte: (s) => base64.test(s),
  password: () => true,
  date: isDate,
  duration: isDuration,
  datetime: isDateTime,
  'k8sshortname': (s) => s.length <= 63 && shortName.test(s),
  'k8slongname': (s) => s.length <= 253 && longName.test(s),
};

/** The name a format is registered under (dashes removed, as go-openapi normalises). */
export const normalizeFormat = (format: string): string => format.replaceAll('-', '');

/**
 * The check kube-apiserver applies to a string of `format` (`date-time`, `email`, …), or undefined when it checks
 * nothing for that format (unsupported formats are stripped from the schema by the server).
 */
export function formatCheck(format: string): ((s: string) => boolean) | undefined {
  return checks[normalizeFormat(format)];
}
