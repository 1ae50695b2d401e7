/**
 * Resource quantities ("500m", "1Gi", 2) in the canonical form kube-apiserver stores them in — a port of
 * k8s.io/apimachinery/pkg/api/resource Quantity's parsing (rounded up to nano precision) and CanonicalizeBytes:
 * "0.5" → "500m", "1024Mi" → "1Gi", "0.5Gi" → "512Mi", "1000M" → "1G", a JSON number 2 → "2". Pure.
 *
 * A controller that compares the quantity it wrote ("0.5") with the one it reads back ("500m") as strings updates
 * forever; the FakeClient stores the server's form so a unit test shows that.
 */

const decimalSuffixes: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const binarySuffixes: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const decimalNames = new Map(Object.entries(decimalSuffixes).map(([k, v]) => [v, k]));
const binaryNames = new Map(Object.entries(binarySuffixes).map(([k, v]) => [v, k]));

type Format = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

/** A parsed quantity: value = mantissa × 10^scale exactly, and the format its suffix chose. */
interface Parsed { mantissa: bigint; scale: number; format: Format }

/** ParseQuantity: sign, digits, fraction, suffix; undefined when it does not parse (the server answers 400). */
function parse(input: string): Parsed | undefined {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE]?)$/.exec(input.trim());
  if (!m || ((m[2] ?? '') === '' && (m[3] ?? '') === '')) return undefined;
  const [, sign = '', whole = '', frac = '', suffix = ''] = m;
  let mantissa = BigInt(`${whole}${frac}` || '0');
  let scale = -frac.length;
  let format: Format;
  if (suffix in binarySuffixes) {
    format = 'BinarySI';
    mantissa *= 2n ** BigInt(binarySuffixes[suffix] ?? 0);
  } else if (/^[eE]/.test(suffix)) {
    format = 'DecimalExponent';
    scale += Number(suffix.slice(1));
  } else {
    format = 'DecimalSI';
    scale += decimalSuffixes[suffix] ?? 0;
  }
  if (sign === '-') mantissa = -mantissa;
  // Below nano precision the server rounds up (away from zero for positives, toward zero for negatives: Ceil).
  if (scale < -9) {
    const div = 10n ** BigInt(-9 - scale);
    const q = mantissa / div;
    mantissa = q * div === mantissa || mantissa < 0n ? q : q + 1n;
    scale = -9;
  }
  return { mantissa, scale, format };
}

/** RoundUp(scale): the smallest multiple of 10^scale at or above the value. */
function roundUp(p: Parsed, scale: number): Parsed {
  if (p.scale >= scale) return p;
  const div = 10n ** BigInt(scale - p.scale);
  const q = p.mantissa / div;
  return { ...p, mantissa: q * div === p.mantissa || p.mantissa < 0n ? q : q + 1n, scale };
}

/** The canonical string of a parsed quantity (CanonicalizeBytes). */
function format(p: Parsed): string {
  if (p.mantissa === 0n) return '0';
  let fmt = p.format;
  let integer: bigint | undefined;
  if (fmt === 'BinarySI') {
    const v = p.scale >= 0 ? p.mantissa * 10n ** BigInt(p.scale) : undefined;
    const exact = v !== undefined || p.mantissa % 10n ** BigInt(-p.scale) === 0n;
    const value = v ?? (exact ? p.mantissa / 10n ** BigInt(-p.scale) : 0n);
    if (!exact || (value > -1024n && value < 1024n)) fmt = 'DecimalSI';
    else integer = value;
  }
  if (fmt === 'BinarySI' && integer !== undefined) {
    let amount = integer;
    let exp = 0;
    while (exp < 60 && amount % 1024n === 0n) { amount /= 1024n; exp += 10; }
    return `${amount}${binaryNames.get(exp) ?? ''}`;
  }
  // AsCanonicalBytes: strip factors of 10, then make the exponent a multiple of 3.
  let amount = p.mantissa;
  let exp = p.scale;
  while (amount % 10n === 0n) { amount /= 10n; exp++; }
  const r = ((exp % 3) + 3) % 3;
  if (r === 1) { amount *= 10n; exp -= 1; } else if (r === 2) { amount *= 100n; exp -= 2; }
  if (fmt === 'DecimalExponent') return exp === 0 ? `${amount}` : `${amount}e${exp}`;
  const suffix = decimalNames.get(exp);
  return suffix === undefined ? `${amount}e${exp}` : `${amount}${suffix}`;
}

/** The canonical form of a quantity (a string or a JSON number), or undefined when it does not parse. */
export function canonicalQuantity(q: unknown): string | undefined {
  const p = typeof q === 'number' ? parse(String(q)) : typeof q === 'string' ? parse(q) : undefined;
  return p && format(p);
}

/** A resource list's value as SetDefaults_ResourceList stores it: rounded up to milli precision, canonical. */
export function canonicalResource(q: unknown): string | undefined {
  const p = typeof q === 'number' ? parse(String(q)) : typeof q === 'string' ? parse(q) : undefined;
  return p && format(roundUp(p, -3));
}
