/**
 * The pure parts of the Network controller: the Network resource, how a Network is identified in Neutron (tag, name,
 * description), spec validation, the Ready condition and status, and which informer updates need a reconcile.
 */
import type { Condition, KubeObject } from '../../apimachinery/meta.ts';
import { apiVersion as networkApiVersion, networkKind, type Network, type NetworkStatus } from '../../apis/samplecrd/v1/types.ts';
import {
  apiVersion as networkV2ApiVersion, type Network as NetworkV2, type NetworkStatus as NetworkStatusV2, type NetworkStatusSubnet,
} from '../../apis/samplecrd/v2/types.ts';

export { networkResource } from '../../apis/samplecrd/v1/types.ts';
export { networkResource as networkV2Resource } from '../../apis/samplecrd/v2/types.ts';

/** A Network of either served version: what the version-independent helpers below take. */
export type AnyNetwork = Network | NetworkV2;

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

/** networkRef for a v2 Network. */
export function networkV2Ref(net: NetworkV2): NetworkV2 & { apiVersion: string; kind: string } {
  return { ...net, apiVersion: networkV2ApiVersion, kind: networkKind };
}

export { validateNetwork, validateNetworkSpec, validateSpec, type DesiredSubnet, type SpecValidation, type Validation } from './validation.ts';

export function readyCondition(net: AnyNetwork): Condition | undefined {
  return net.status?.conditions?.find((c) => c.type === 'Ready');
}

/** The spec of this generation was already found invalid or rejected by Neutron (recorded in status). */
export function rejectedThisGeneration(net: AnyNetwork): Condition | undefined {
  const c = readyCondition(net);
  const gen = net.metadata?.generation ?? 0;
  return c && c.status === 'False' && terminalReasons.has(c.reason ?? '') && c.observedGeneration === gen
    && net.status?.observedGeneration === gen ? c : undefined;
}

/** Ready=True for the current generation. */
export function readyThisGeneration(net: AnyNetwork): boolean {
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
export function computeStatus(net: AnyNetwork, o: Observation, now: Date): NetworkStatus {
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

/** The observation of a v2 Network: the Neutron subnet of each spec subnet that exists, by CIDR. */
export interface ObservationV2 {
  networkID: string | undefined;
  subnets: NetworkStatusSubnet[] | undefined;
  ready: boolean;
  reason: string;
  message: string;
}

/** computeStatus for v2: `subnets` instead of `subnetID`; the same Ready condition rules. */
export function computeStatusV2(net: NetworkV2, o: ObservationV2, now: Date): NetworkStatusV2 {
  const { subnetID: _none, ...rest } = computeStatus(net, { ...o, subnetID: undefined }, now);
  return { ...rest, ...(o.subnets !== undefined && { subnets: o.subnets }) };
}

export function statusEqualV2(a: NetworkStatusV2 | undefined, b: NetworkStatusV2): boolean {
  if (!a) return false;
  const key = (s: NetworkStatusSubnet[] | undefined): string => JSON.stringify((s ?? []).map((x) => [x.cidr, x.subnetID]));
  return key(a.subnets) === key(b.subnets)
    && statusEqual({ ...(a.networkID !== undefined && { networkID: a.networkID }), ...(a.observedGeneration !== undefined && { observedGeneration: a.observedGeneration }), ...(a.conditions && { conditions: a.conditions }) },
      { ...(b.networkID !== undefined && { networkID: b.networkID }), ...(b.observedGeneration !== undefined && { observedGeneration: b.observedGeneration }), ...(b.conditions && { conditions: b.conditions }) });
}

/** statusPatch for v2 (the list of subnets is replaced as a whole; merge patch replaces lists). */
export function statusPatchV2(net: NetworkV2, status: NetworkStatusV2): unknown {
  return {
    metadata: { uid: net.metadata?.uid, resourceVersion: net.metadata?.resourceVersion },
    status: { networkID: status.networkID ?? null, subnets: status.subnets ?? null, observedGeneration: status.observedGeneration, conditions: status.conditions },
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
export function needsReconcile(old: AnyNetwork, cur: AnyNetwork): boolean {
  const o = old.metadata ?? {};
  const n = cur.metadata ?? {};
  return o.resourceVersion === n.resourceVersion
    || o.generation !== n.generation
    || o.deletionTimestamp !== n.deletionTimestamp
    || o.uid !== n.uid
    || (hasFinalizer(old) && !hasFinalizer(cur));
}
