/**
 * IP addresses and CIDRs as the Network controller needs them: strict parsing (as Kubernetes CEL's isIP/isCIDR:
 * no leading zeros in IPv4, no IPv6 zones), canonical formatting (IPv4 dotted decimal, IPv6 RFC 5952), containment,
 * and Neutron's default allocation pools. Addresses are bigints so IPv4 and IPv6 share one code path.
 */

export type IPVersion = 4 | 6;

export interface IP {
  version: IPVersion;
  value: bigint;
}

export interface CIDR {
  version: IPVersion;
  /** The network address (host bits cleared). */
  network: bigint;
  prefix: number;
}

export interface IPRange {
  start: string;
  end: string;
}

const bits = (v: IPVersion): number => (v === 4 ? 32 : 128);

function parseIPv4(s: string): bigint | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  let out = 0n;
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out = (out << 8n) | BigInt(n);
  }
  return out;
}

function parseIPv6(s: string): bigint | undefined {
  if (s.includes('%')) return undefined; // zones are not addresses of a subnet
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const groups = (part: string): number[] | undefined => {
    if (part === '') return [];
    const out: number[] = [];
    const items = part.split(':');
    for (let i = 0; i < items.length; i++) {
      const item = items[i] ?? '';
      if (i === items.length - 1 && item.includes('.')) {
        const v4 = parseIPv4(item);
        if (v4 === undefined) return undefined;
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(item)) return undefined;
        out.push(parseInt(item, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0] ?? '');
  const tail = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  let out = 0n;
  for (const g of [...head, ...new Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail]) out = (out << 16n) | BigInt(g);
  return out;
}

/** Parses an IPv4 or IPv6 address; undefined when it is not one. */
export function parseIP(s: string): IP | undefined {
  if (s.includes(':')) {
    const value = parseIPv6(s);
    return value === undefined ? undefined : { version: 6, value };
  }
  const value = parseIPv4(s);
  return value === undefined ? undefined : { version: 4, value };
}

/** Canonical text: dotted decimal, or RFC 5952 (lower case, longest run of ≥2 zero groups as `::`). */
export function formatIP(ip: IP): string {
  if (ip.version === 4) return [24n, 16n, 8n, 0n].map((s) => String((ip.value >> s) & 0xffn)).join('.');
  const g = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (xs: number[]): string => xs.map((x) => x.toString(16)).join(':');
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

function mask(version: IPVersion, prefix: number): bigint {
  const total = bits(version);
  return ((1n << BigInt(total)) - 1n) ^ ((1n << BigInt(total - prefix)) - 1n);
}

/**
 * Parses `address/prefix`. Host bits are allowed and cleared (Kubernetes' isCIDR accepts them and Neutron normalises
 * them the same way); `hostBits` tells whether there were any.
 */
export function parseCIDR(s: string): (CIDR & { hostBits: boolean }) | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIP(s.slice(0, slash));
  const prefixText = s.slice(slash + 1);
  if (!ip || !/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bits(ip.version)) return undefined;
  const network = ip.value & mask(ip.version, prefix);
  return { version: ip.version, network, prefix, hostBits: network !== ip.value };
}

export function formatCIDR(c: CIDR): string {
  return `${formatIP({ version: c.version, value: c.network })}/${c.prefix}`;
}

/** The last address of the CIDR (IPv4 broadcast). */
export function lastAddress(c: CIDR): bigint {
  return c.network | ((1n << BigInt(bits(c.version) - c.prefix)) - 1n);
}

export function containsIP(c: CIDR, ip: IP): boolean {
  return ip.version === c.version && ip.value >= c.network && ip.value <= lastAddress(c);
}

export function sameCIDR(a: CIDR, b: CIDR): boolean {
  return a.version === b.version && a.network === b.network && a.prefix === b.prefix;
}

/** Whether two address strings denote the same address (false if either does not parse). */
export function sameIP(a: string | null | undefined, b: string | null | undefined): boolean {
  if (!a || !b) return false;
  const x = parseIP(a);
  const y = parseIP(b);
  return x !== undefined && y !== undefined && x.version === y.version && x.value === y.value;
}

/**
 * Neutron's default allocation pools for a subnet (neutron.ipam.utils.generate_pools): every address but the network
 * address (and the IPv4 broadcast address), minus the gateway. Needed to move a gateway in place: Neutron refuses a
 * gateway inside the current pools (409 GatewayConflictWithAllocationPools), so the pools move with it.
 */
export function generatePools(c: CIDR, gateway: IP | undefined): IPRange[] {
  const first = c.network;
  const last = lastAddress(c);
  const fmt = (v: bigint): string => formatIP({ version: c.version, value: v });
  if (first === last) return [{ start: fmt(first), end: fmt(last) }];
  const lo = first + 1n;
  const hi = c.version === 4 ? last - 1n : last;
  if (lo >= hi) return [];
  const g = gateway && gateway.version === c.version ? gateway.value : undefined;
  if (g === undefined || g < lo || g > hi) return [{ start: fmt(lo), end: fmt(hi) }];
  const out: IPRange[] = [];
  if (g > lo) out.push({ start: fmt(lo), end: fmt(g - 1n) });
  if (g < hi) out.push({ start: fmt(g + 1n), end: fmt(hi) });
  return out;
}

/** Whether two CIDRs share an address (one contains the other: CIDRs never partially overlap). */
export function overlaps(a: CIDR, b: CIDR): boolean {
  if (a.version !== b.version) return false;
  return a.network <= lastAddress(b) && b.network <= lastAddress(a);
}

/** Whether `inner` lies entirely inside `outer` (given as CIDR text, e.g. '224.0.0.0/4'). */
export function within(inner: CIDR, outerText: string): boolean {
  const outer = parseCIDR(outerText);
  if (!outer || outer.version !== inner.version || inner.prefix < outer.prefix) return false;
  return inner.network >= outer.network && lastAddress(inner) <= lastAddress(outer);
}

/**
 * The allocation pools to send with a gateway move, or undefined to leave them alone. The controller owns the
 * gateway, and the pools only as far as the gateway forces them:
 *  - pools that are still Neutron's default for the old gateway (nobody narrowed them) move with it: the default for
 *    the new gateway (undefined if that is what they already are);
 *  - otherwise (someone narrowed or split them) they are kept, except that a pool containing the new gateway (Neutron
 *    refuses a gateway inside a pool: 409) is split around it — only that pool changes; empty halves are dropped.
 * Pools that do not parse, or of another family, are kept as they are.
 */
export function poolsForGatewayMove(c: CIDR, oldGateway: string | null | undefined, newGateway: IP, pools: readonly IPRange[]): IPRange[] | undefined {
  const old = oldGateway ? parseIP(oldGateway) : undefined;
  if (samePools(pools, generatePools(c, old))) {
    const moved = generatePools(c, newGateway);
    return samePools(pools, moved) ? undefined : moved;
  }
  const fmt = (v: bigint): string => formatIP({ version: c.version, value: v });
  let changed = false;
  const out: IPRange[] = [];
  for (const p of pools) {
    const start = parseIP(p.start);
    const end = parseIP(p.end);
    if (!start || !end || start.version !== newGateway.version || end.version !== newGateway.version
      || newGateway.value < start.value || newGateway.value > end.value) {
      out.push({ start: p.start, end: p.end });
      continue;
    }
    changed = true;
    if (newGateway.value > start.value) out.push({ start: p.start, end: fmt(newGateway.value - 1n) });
    if (newGateway.value < end.value) out.push({ start: fmt(newGateway.value + 1n), end: p.end });
  }
  return changed ? out : undefined;
}

/** Whether two pool lists cover the same ranges (order and address spelling ignored). */
export function samePools(a: readonly IPRange[], b: readonly IPRange[]): boolean {
  if (a.length !== b.length) return false;
  const key = (r: IPRange): string => `${String(parseIP(r.start)?.value ?? r.start)}-${String(parseIP(r.end)?.value ?? r.end)}`;
  const ka = a.map(key).sort();
  const kb = b.map(key).sort();
  return ka.every((k, i) => k === kb[i]);
}
