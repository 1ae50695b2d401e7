/**
 * The one check of a Network spec, v1 (`spec.cidr`, `spec.gateway`) and v2 (`spec.subnets`), shared by the Network
 * controller (a failure is `Ready=False InvalidSpec` with this message, and no Neutron call for that generation) and the
 * validating webhook (the same message in its denial). Pure: no I/O, no clock.
 *
 * Why the controller checks at all, although the CRD's CEL rules say part of this: older API servers lack the CIDR/IP
 * CEL library, objects may predate a rule, and what Neutron itself refuses should be refused before anything in
 * Neutron is touched (a CIDR change would otherwise already have deleted the working subnet).
 *
 * Per subnet (v1's one, each of v2's): cidr is an IPv4/IPv6 CIDR (host bits are cleared, as Neutron does); the gateway,
 * if any, an address of the same family inside it. And what neutron-server refuses for a subnet with DHCP enabled (the
 * default, and what the controller creates), as read in neutron 21 (Zed, the Debian package this project tests with),
 * neutron/db/db_base_plugin_v2.py `_validate_subnet` and neutron/ipam/utils.py `check_gateway_invalid_in_subnet`, and
 * checked against that neutron-server by test/network.test.ts:
 *  - prefix length 0 (neutron/db/ipam_backend_mixin.py `_validate_subnet_cidr`: "0 is not allowed as CIDR prefix length");
 *  - `if ((ip_ver == 4 and subnet_prefixlen > 30) or (ip_ver == 6 and subnet_prefixlen > 126))`: "Subnet has a prefix
 *    length that is incompatible with DHCP service enabled";
 *  - `net.is_multicast()` (224.0.0.0/4, ff00::/8) and `net.is_loopback()` (127.0.0.0/8, ::1/128);
 *  - `ip_ver == 4 and net.first == 0`: "First IP '0.0.0.0' of network is not supported if enable_dhcp is True";
 *  - an IPv4 gateway on the network or broadcast address ("Gateway is not valid on subnet"; IPv6 has no broadcast
 *    address and Neutron accepts a gateway on its first address).
 * What Neutron does NOT refuse, and so is accepted here:
 *  - link-local ranges (169.254.0.0/16, fe80::/10): `_validate_subnet` has no link-local rule (neutron-server 21
 *    answers 201 for 169.254.61.0/24 and fe80::/64, test/network.test.ts). Refusing them now would also turn existing
 *    Ready v1 Networks into InvalidSpec;
 *  - IPv6 prefixes other than /64: Neutron requires /64 only for SLAAC/DHCPv6-stateless subnets
 *    (`_validate_eui64_applicable`, "OpenStack uses the EUI-64 address format, which requires the prefix to be /64"),
 *    i.e. when ipv6_ra_mode or ipv6_address_mode is set; the controller sets neither (201 for a /48 and a /126, same
 *    test).
 * v2 also: 1–2 subnets, no duplicate CIDR, at most one per IP family (one Neutron network, one IPv4 + one IPv6 subnet).
 * A gateway outside the CIDR is refused here although Neutron accepts it (the CRD says "must lie inside cidr").
 */
import { apiVersion as v1APIVersion, type Network as NetworkV1, type NetworkSpec as NetworkSpecV1 } from '../../apis/samplecrd/v1/types.ts';
import {
  apiVersion as v2APIVersion, toHub, v2SubnetsAnnotation, type Network as NetworkV2, type NetworkSpec as NetworkSpecV2, type NetworkSpecSubnet,
} from '../../apis/samplecrd/v2/types.ts';
import { containsIP, formatCIDR, formatIP, lastAddress, parseCIDR, parseIP, within, type CIDR, type IP } from './ipnet.ts';

export interface DesiredSubnet {
  cidr: CIDR;
  /** Canonical CIDR text sent to Neutron. */
  cidrText: string;
  /** undefined: Neutron picks it at creation and the controller leaves it alone afterwards. */
  gateway: IP | undefined;
  gatewayText: string | undefined;
}

/** v1: the one subnet. */
export type Validation = { ok: true; desired: DesiredSubnet } | { ok: false; message: string; field: string };

/**
 * Both versions: the subnets in spec order (v1: one). `field` is the path of the offending field (for a webhook's
 * denial cause); `message` names it too, so it reads on its own in a condition or an Event.
 */
export type SpecValidation = { ok: true; desired: DesiredSubnet[] } | { ok: false; message: string; field: string };

/** Address ranges Neutron refuses for a subnet with DHCP enabled (see the file comment). */
const refusedRanges: readonly (readonly [string, string])[] = [
  ['224.0.0.0/4', 'multicast'], ['127.0.0.0/8', 'loopback'], ['ff00::/8', 'multicast'], ['::1/128', 'loopback'],
];

type SubnetCheck = { ok: true; desired: DesiredSubnet } | { ok: false; message: string; field: string };

/** One subnet; `at` is the path of the subnet's fields ('spec.' for v1, 'spec.subnets[i].' for v2). */
function checkSubnet(cidrRaw: string | undefined, gwRaw: string | undefined, at: string): SubnetCheck {
  const cidrField = `${at}cidr`;
  const gwField = `${at}gateway`;
  const fail = (field: string, message: string): SubnetCheck => ({ ok: false, field, message });
  if (!cidrRaw) return fail(cidrField, `${cidrField} must be set`);
  const cidr = parseCIDR(cidrRaw.trim());
  if (!cidr) return fail(cidrField, `${cidrField} ${JSON.stringify(cidrRaw)} is not an IPv4 or IPv6 CIDR such as 192.168.0.0/24`);
  const { hostBits: _ignored, ...c } = cidr;
  const cidrText = formatCIDR(c);
  if (c.prefix === 0) return fail(cidrField, `${cidrField} ${cidrText}: Neutron does not allow prefix length 0`);
  if (c.prefix > (c.version === 4 ? 30 : 126)) {
    return fail(cidrField, `${cidrField} ${cidrText}: Neutron refuses prefixes longer than /${c.version === 4 ? 30 : 126} on subnets with DHCP`);
  }
  if (c.version === 4 && c.network === 0n) return fail(cidrField, `${cidrField} ${cidrText}: Neutron refuses subnets starting at 0.0.0.0 with DHCP`);
  for (const [range, what] of refusedRanges) {
    if (within(c, range)) return fail(cidrField, `${cidrField} ${cidrText} is a ${what} range (${range}); Neutron refuses such subnets with DHCP enabled`);
  }
  if (gwRaw === undefined || gwRaw === '') return { ok: true, desired: { cidr: c, cidrText, gateway: undefined, gatewayText: undefined } };
  const gateway = parseIP(gwRaw.trim());
  if (!gateway) return fail(gwField, `${gwField} ${JSON.stringify(gwRaw)} is not an IP address`);
  if (!containsIP(c, gateway)) return fail(gwField, `${gwField} ${gwRaw} is not inside ${cidrField} ${cidrText}`);
  if (c.version === 4 && (gateway.value === c.network || gateway.value === lastAddress(c))) {
    const which = gateway.value === c.network ? 'network' : 'broadcast';
    return fail(gwField, `${gwField} ${formatIP(gateway)} is the ${which} address of ${cidrText}; Neutron refuses it ("Gateway is not valid on subnet")`);
  }
  return { ok: true, desired: { cidr: c, cidrText, gateway, gatewayText: formatIP(gateway) } };
}

/**
 * Checks a Network spec of either version (see the file comment for the rules). Takes a partial spec: the schema
 * requires cidr/subnets, but stored objects may predate that (and a webhook may see anything).
 */
export function validateNetworkSpec(version: 'v1', spec: Partial<NetworkSpecV1> | undefined): SpecValidation;
export function validateNetworkSpec(version: 'v2', spec: Partial<NetworkSpecV2> | undefined): SpecValidation;
export function validateNetworkSpec(version: 'v1' | 'v2', spec: Partial<NetworkSpecV1> | Partial<NetworkSpecV2> | undefined): SpecValidation {
  if (version === 'v1') {
    const s = spec as Partial<NetworkSpecV1> | undefined; // the overloads tie the spec's type to `version`
    const r = checkSubnet(s?.cidr, s?.gateway, 'spec.');
    return r.ok ? { ok: true, desired: [r.desired] } : r;
  }
  const subnets: readonly Partial<NetworkSpecSubnet>[] | undefined = (spec as Partial<NetworkSpecV2> | undefined)?.subnets;
  if (!subnets || subnets.length === 0) return { ok: false, field: 'spec.subnets', message: 'spec.subnets must list at least one subnet' };
  if (subnets.length > 2) {
    return { ok: false, field: 'spec.subnets', message: `spec.subnets has ${String(subnets.length)} entries; a Network has at most 2 (one IPv4 and one IPv6)` };
  }
  const desired: DesiredSubnet[] = [];
  for (const [i, s] of subnets.entries()) {
    const r = checkSubnet(s.cidr, s.gateway, `spec.subnets[${String(i)}].`);
    if (!r.ok) return r;
    const dup = desired.findIndex((d) => d.cidrText === r.desired.cidrText);
    if (dup >= 0) {
      return { ok: false, field: `spec.subnets[${String(i)}].cidr`, message: `spec.subnets[${String(i)}].cidr ${r.desired.cidrText} duplicates spec.subnets[${String(dup)}].cidr` };
    }
    const same = desired.findIndex((d) => d.cidr.version === r.desired.cidr.version);
    if (same >= 0) {
      return {
        ok: false, field: `spec.subnets[${String(i)}].cidr`,
        message: `spec.subnets[${String(same)}].cidr ${desired[same]?.cidrText ?? ''} and spec.subnets[${String(i)}].cidr ${r.desired.cidrText} are both IPv${String(r.desired.cidr.version)}; a Network has at most one IPv4 and one IPv6 subnet`,
      };
    }
    desired.push(r.desired);
  }
  return { ok: true, desired };
}

/** v1's spec (the controller's single-subnet path): `validateNetworkSpec('v1', spec)` with its one subnet. */
export function validateSpec(spec: Partial<NetworkSpecV1> | undefined): Validation {
  const r = validateNetworkSpec('v1', spec);
  if (!r.ok) return r;
  const [d] = r.desired;
  if (!d) throw new Error('validateNetworkSpec v1 returned no subnet'); // cannot happen: v1 has exactly one
  return { ok: true, desired: d };
}

/**
 * A whole Network object as a validating webhook sees it, by its apiVersion: v2 → `validateNetworkSpec('v2', spec)`,
 * and the conversion annotation `v2SubnetsAnnotation` is refused on it (reserved: conversion.ts); v1 →
 * `validateNetworkSpec('v1', spec)`, or, when it carries that annotation (a dual-stack Network read and written as v1),
 * its v2 form `toHub(obj)` with v2 field paths, so a v1 edit cannot make the second subnet invalid (e.g. a new cidr of
 * the other subnet's family). Any other apiVersion is refused.
 */
export function validateNetwork(obj: NetworkV1 | NetworkV2): SpecValidation {
  const annotated = obj.metadata?.annotations?.[v2SubnetsAnnotation] !== undefined;
  if (obj.apiVersion === v2APIVersion) {
    if (annotated) {
      return {
        ok: false, field: `metadata.annotations[${v2SubnetsAnnotation}]`,
        message: `metadata.annotations[${v2SubnetsAnnotation}] is reserved for v1 ↔ v2 conversion and may not be set on a v2 Network`,
      };
    }
    return validateNetworkSpec('v2', (obj as NetworkV2).spec); // the cast: apiVersion says which
  }
  if (obj.apiVersion === v1APIVersion) {
    return annotated ? validateNetworkSpec('v2', toHub(obj as NetworkV1).spec) : validateNetworkSpec('v1', (obj as NetworkV1).spec);
  }
  return { ok: false, field: 'apiVersion', message: `apiVersion ${JSON.stringify(obj.apiVersion ?? '')} is not ${v1APIVersion} or ${v2APIVersion}` };
}
