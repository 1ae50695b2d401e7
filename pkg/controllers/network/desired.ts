/**
 * The pure parts of the Network controller: the Network resource, how a Network is identified in Neutron (tag, name,
 * description), spec validation, the Ready condition and status, and which informer updates need a reconcile.
 */
import type { Condition, KubeObject } from '../../apimachinery/meta.ts';
import { apiVersion as networkApiVersion, networkKind, type Network, type NetworkSpec, type NetworkStatus } from '../../apis/samplecrd/v1/types.ts';
import { containsIP, formatCIDR, formatIP, lastAddress, parseCIDR, parseIP, within, type CIDR, type IP } from './ipnet.ts';

export { networkResource } from '../../apis/samplecrd/v1/types.ts';

/** Kept on every Network the controller manages until its Neutron network is gone. */
export const FINALIZER = 'samplecrd.k8s.io/neutron';

// Condition and Event reasons.
export const ReasonSynced = 'Synced';
export const ReasonInvalidSpec = 'InvalidSpec';
export const ReasonNeutronRejected = 'NeutronRejected';
export const ReasonNeutronUnavailable = 'NeutronUnavailable';
export const ReasonNeutronConflict = 'NeutronConflict';
export const ReasonNeutronAuthFailed = 'NeutronAuthFailed';
export const ReasonNeutronForbidden = 'NeutronForbidden';
export const ReasonNeutronError = 'NeutronError';
export const ReasonDeleteFailed = 'DeleteFailed';
export const ReasonDeleted = 'Deleted';

/** Reasons that mean "this generation cannot succeed": no Neutron call again until the spec changes. */
export const terminalReasons: ReadonlySet<string> = new Set([ReasonInvalidSpec, ReasonNeutronRejected]);

/** The Neutron tag that identifies the network and subnet of a Network (by UID: names are not unique in Neutron). */
export function uidTag(uid: string): string {
  return `k8s-uid:${uid}`;
}

/**
 * Description of the Neutron network. Besides the tag it identifies the network of a create whose tagging never
 * happened (Neutron Zed tags after the POST: a timed-out POST or a crash in between leaves an untagged network).
 */
export function neutronDescription(uid: string): string {
  return `ts-controller-manager Network uid ${uid}`;
}

/** Human-readable Neutron name `<namespace>/<name>` (at most 255 characters; not an identity). */
export function neutronName(net: KubeObject): string {
  return `${net.metadata?.namespace ?? ''}/${net.metadata?.name ?? ''}`.slice(0, 255);
}

/** The object with apiVersion/kind filled in (list items come without them), for Events. */
export function networkRef(net: Network): Network & { apiVersion: string; kind: string } {
  return { ...net, apiVersion: networkApiVersion, kind: networkKind };
}

export interface DesiredSubnet {
  cidr: CIDR;
  /** Canonical CIDR text sent to Neutron. */
  cidrText: string;
  /** undefined: Neutron picks it at creation and the controller leaves it alone afterwards. */
  gateway: IP | undefined;
  gatewayText: string | undefined;
}

export type Validation = { ok: true; desired: DesiredSubnet } | { ok: false; message: string };

/**
 * Address ranges Neutron refuses for a new subnet with DHCP enabled (the default, and what the controller creates):
 * multicast and loopback ("… IP subnet is not supported if enable_dhcp is True"). Link-local is accepted.
 */
const refusedRanges: readonly (readonly [string, string])[] = [
  ['224.0.0.0/4', 'multicast'], ['127.0.0.0/8', 'loopback'], ['ff00::/8', 'multicast'], ['::1/128', 'loopback'],
];

/**
 * The controller's own check of the spec, BEFORE anything in Neutron is touched (the CRD's CEL rules say part of this,
 * but older API servers lack the CIDR/IP CEL library and objects may predate the rule): cidr is an IPv4/IPv6 CIDR,
 * gateway an address of the same family inside it. Host bits in the cidr are cleared, as Neutron does. Also what
 * Neutron itself refuses (neutron/db/db_base_plugin_v2.py `_validate_subnet`, `_validate_subnet_cidr`,
 * ipam/utils.py `check_gateway_invalid_in_subnet`), so a change Neutron would reject never starts (a CIDR change
 * would otherwise have deleted the working subnet already), as checked against neutron-server 21 (Zed): prefix
 * length 0; with DHCP (the default) prefixes longer than /30 (IPv4) or /126 (IPv6), an IPv4 CIDR starting at
 * 0.0.0.0, multicast and loopback ranges; an IPv4 gateway on the network or broadcast address. Anything else Neutron
 * refuses becomes NeutronRejected. Takes a partial spec: the schema requires cidr, but stored objects may predate that.
 */
export function validateSpec(spec: Partial<NetworkSpec> | undefined): Validation {
  const cidrRaw = spec?.cidr;
  if (!cidrRaw) return { ok: false, message: 'spec.cidr must be set' };
  const cidr = parseCIDR(cidrRaw.trim());
  if (!cidr) return { ok: false, message: `spec.cidr ${JSON.stringify(cidrRaw)} is not an IPv4 or IPv6 CIDR such as 192.168.0.0/24` };
  const { hostBits: _ignored, ...c } = cidr;
  const cidrText = formatCIDR(c);
  if (c.prefix === 0) return { ok: false, message: `spec.cidr ${cidrText}: Neutron does not allow prefix length 0` };
  if (c.prefix > (c.version === 4 ? 30 : 126)) {
    return { ok: false, message: `spec.cidr ${cidrText}: Neutron refuses prefixes longer than /${c.version === 4 ? 30 : 126} on subnets with DHCP` };
  }
  if (c.version === 4 && c.network === 0n) return { ok: false, message: `spec.cidr ${cidrText}: Neutron refuses subnets starting at 0.0.0.0 with DHCP` };
  for (const [range, what] of refusedRanges) {
    if (within(c, range)) return { ok: false, message: `spec.cidr ${cidrText} is a ${what} range (${range}); Neutron refuses such subnets with DHCP enabled` };
  }
  const gwRaw = spec?.gateway;
  if (gwRaw === undefined || gwRaw === '') return { ok: true, desired: { cidr: c, cidrText, gateway: undefined, gatewayText: undefined } };
  const gateway = parseIP(gwRaw.trim());
  if (!gateway) return { ok: false, message: `spec.gateway ${JSON.stringify(gwRaw)} is not an IP address` };
  if (!containsIP(c, gateway)) return { ok: false, message: `spec.gateway ${gwRaw} is not inside spec.cidr ${cidrText}` };
  if (c.version === 4 && (gateway.value === c.network || gateway.value === lastAddress(c))) {
    const which = gateway.value === c.network ? 'network' : 'broadcast';
    return { ok: false, message: `spec.gateway ${formatIP(gateway)} is the ${which} address of ${cidrText}; Neutron refuses it ("Gateway is not valid on subnet")` };
  }
  return { ok: true, desired: { cidr: c, cidrText, gateway, gatewayText: formatIP(gateway) } };
}

export function readyCondition(net: Network): Condition | undefined {
  return net.status?.conditions?.find((c) => c.type === 'Ready');
}

/** The spec of this generation was already found invalid or rejected by Neutron (recorded in status). */
export function rejectedThisGeneration(net: Network): Condition | undefined {
  const c = readyCondition(net);
  const gen = net.metadata?.generation ?? 0;
  return c && c.status === 'False' && terminalReasons.has(c.reason ?? '') && c.observedGeneration === gen
    && net.status?.observedGeneration === gen ? c : undefined;
}

/** Ready=True for the current generation. */
export function readyThisGeneration(net: Network): boolean {
  const c = readyCondition(net);
  return c?.status === 'True' && c.observedGeneration === (net.metadata?.generation ?? 0);
}

export interface Observation {
  networkID: string | undefined;
  subnetID: string | undefined;
  ready: boolean;
  reason: string;
  message: string;
}

/**
 * The status a Network should have after an observation: ids, observedGeneration, and the Ready condition (other
 * condition types are kept). lastTransitionTime changes only when the condition's status does.
 */
export function computeStatus(net: Network, o: Observation, now: Date): NetworkStatus {
  const gen = net.metadata?.generation ?? 0;
  const prev = readyCondition(net);
  const status: Condition['status'] = o.ready ? 'True' : 'False';
  const ready: Condition = {
    type: 'Ready', status, reason: o.reason, message: o.message, observedGeneration: gen,
    lastTransitionTime: prev?.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z'),
  };
  const others = (net.status?.conditions ?? []).filter((c) => c.type !== 'Ready');
  return {
    ...(o.networkID !== undefined && { networkID: o.networkID }),
    ...(o.subnetID !== undefined && { subnetID: o.subnetID }),
    observedGeneration: gen,
    conditions: [...others, ready],
  };
}

function conditionKey(c: Condition): string {
  return JSON.stringify([c.type, c.status, c.reason ?? '', c.message ?? '', c.observedGeneration ?? null, c.lastTransitionTime ?? '']);
}

export function statusEqual(a: NetworkStatus | undefined, b: NetworkStatus): boolean {
  if (!a) return false;
  if (a.networkID !== b.networkID || a.subnetID !== b.subnetID || a.observedGeneration !== b.observedGeneration) return false;
  const ca = (a.conditions ?? []).map(conditionKey);
  const cb = (b.conditions ?? []).map(conditionKey);
  return ca.length === cb.length && ca.every((k, i) => k === cb[i]);
}

/**
 * JSON merge patch body for /status: ids that disappeared are removed (null). Fenced: the uid (not a re-created
 * Network of the same name) and the resourceVersion of the Network the status was derived from (409 if it changed).
 */
export function statusPatch(net: Network, status: NetworkStatus): unknown {
  return {
    metadata: { uid: net.metadata?.uid, resourceVersion: net.metadata?.resourceVersion },
    status: { networkID: status.networkID ?? null, subnetID: status.subnetID ?? null, observedGeneration: status.observedGeneration, conditions: status.conditions },
  };
}

export function hasFinalizer(net: KubeObject): boolean {
  return net.metadata?.finalizers?.includes(FINALIZER) ?? false;
}

/**
 * Whether an informer update needs a reconcile: a resync (same resourceVersion: level-triggered drift check against
 * Neutron), a spec change (generation), deletion starting, a new object under the same name, or our finalizer removed
 * by someone else. Status-only updates (our own status writes) and our own finalizer addition do not: re-reconciling
 * on them would bypass the work queue's backoff after a failure and double the Neutron reads of every change.
 */
export function needsReconcile(old: Network, cur: Network): boolean {
  const o = old.metadata ?? {};
  const n = cur.metadata ?? {};
  return o.resourceVersion === n.resourceVersion
    || o.generation !== n.generation
    || o.deletionTimestamp !== n.deletionTimestamp
    || o.uid !== n.uid
    || (hasFinalizer(old) && !hasFinalizer(cur));
}
