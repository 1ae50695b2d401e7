/**
 * Conversion between samplecrd.k8s.io/v1 and v2 Network (hub: v2), for the conversion webhook (`/convert`). Pure: whole
 * objects in, whole new objects out (the input is never modified), no I/O. Rules (docs/network-v2.md):
 *
 *  - v1 → v2 (`toHub`): `spec.cidr`/`spec.gateway` become `spec.subnets[0]`; `status.subnetID` becomes the
 *    `status.subnets` entry of that CIDR. Whatever v1 cannot say comes back from the annotation `v2SubnetsAnnotation`,
 *    which is removed.
 *  - v2 → v1 (`fromHub`): `spec.subnets[0]` becomes `spec.cidr`/`spec.gateway`; `status.subnetID` is the subnet ID of
 *    the `status.subnets` entry whose cidr is that first CIDR. The other spec subnets and status entries (and where
 *    the first one stood) are kept in the annotation, written only when something would otherwise be lost.
 *  - `metadata` (but that annotation), `networkID`, `observedGeneration` and `conditions` are copied as they are.
 *
 * Invariants (pkg/apis/samplecrd/v2/conversion.test.ts, thousands of generated objects): for every valid v2 object
 * `toHub(fromHub(x))` deep-equals x, and for every valid v1 object `fromHub(toHub(y))` deep-equals y (written by a v1
 * client, or read from v2). A v1 object read from v2 and then edited by a v1 client (new cidr, gateway or subnetID):
 * the edit wins, the extra subnets stay, and its v1 fields survive the round trip; only the annotation may come back
 * in its canonical form (e.g. a `status: []` made redundant by a new subnetID is left out). The annotation key is reserved: a v2 object carrying it loses it on a v1 round trip, and a malformed one on a v1
 * object is dropped (a validating webhook should refuse both).
 */
import type { ObjectMeta } from '../../../apimachinery/meta.ts';
import {
  apiVersion as v1APIVersion, type Network as NetworkV1, type NetworkSpec as NetworkSpecV1, type NetworkStatus as NetworkStatusV1,
} from '../v1/types.ts';
import {
  apiVersion as v2APIVersion, networkKind, type Network as NetworkV2, type NetworkSpec as NetworkSpecV2, type NetworkSpecSubnet,
  type NetworkStatus as NetworkStatusV2, type NetworkStatusSubnet,
} from './zz_generated.types.ts';

/** Annotation on a v1 Network holding what v1 cannot show of its v2 form (JSON, `SavedV2Fields`). */
export const v2SubnetsAnnotation = 'samplecrd.k8s.io/v2-subnets';

/** A v1 Network with apiVersion and kind set (what `fromHub` returns). */
export type NetworkV1Object = NetworkV1 & { apiVersion: typeof v1APIVersion; kind: typeof networkKind };
/** A v2 Network with apiVersion and kind set (what `toHub` returns). */
export type NetworkV2Object = NetworkV2 & { apiVersion: typeof v2APIVersion; kind: typeof networkKind };

/** The content of `v2SubnetsAnnotation`. Fields are omitted when they have nothing to say. */
interface SavedV2Fields {
  /** `spec.subnets` after the first. */
  subnets?: NetworkSpecSubnet[];
  /** `status.subnets` without the entry of the first spec CIDR (v1's `status.subnetID`). */
  status?: NetworkStatusSubnet[];
  /** Index of that entry in `status.subnets` (omitted when 0). */
  statusPrimaryAt?: number;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseSaved(text: string | undefined): SavedV2Fields | undefined {
  if (text === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObj(v)) return undefined;
  const out: SavedV2Fields = {};
  const specOk = (s: unknown): s is NetworkSpecSubnet => isObj(s) && typeof s['cidr'] === 'string' && (s['gateway'] === undefined || typeof s['gateway'] === 'string');
  const statusOk = (s: unknown): s is NetworkStatusSubnet => isObj(s) && typeof s['cidr'] === 'string' && typeof s['subnetID'] === 'string';
  if (v['subnets'] !== undefined) {
    if (!Array.isArray(v['subnets']) || !v['subnets'].every(specOk)) return undefined;
    out.subnets = v['subnets'].map((s) => ({ cidr: s.cidr, ...(s.gateway !== undefined && { gateway: s.gateway }) }));
  }
  if (v['status'] !== undefined) {
    if (!Array.isArray(v['status']) || !v['status'].every(statusOk)) return undefined;
    out.status = v['status'].map((s) => ({ cidr: s.cidr, subnetID: s.subnetID }));
  }
  const at = v['statusPrimaryAt'];
  if (at !== undefined) {
    if (typeof at !== 'number' || !Number.isInteger(at) || at < 0) return undefined;
    out.statusPrimaryAt = at;
  }
  return out;
}

/** metadata deep-copied, with the annotation set (text) or removed (undefined); an emptied map is dropped. */
function withAnnotation(metadata: ObjectMeta | undefined, text: string | undefined): ObjectMeta | undefined {
  const meta = structuredClone(metadata);
  if (meta === undefined) return text === undefined ? undefined : { annotations: { [v2SubnetsAnnotation]: text } };
  const annotations = { ...meta.annotations };
  delete annotations[v2SubnetsAnnotation];
  if (text !== undefined) annotations[v2SubnetsAnnotation] = text;
  const had = metadata?.annotations?.[v2SubnetsAnnotation] !== undefined;
  if (Object.keys(annotations).length > 0) meta.annotations = annotations;
  else delete meta.annotations;
  // Metadata that held nothing but the annotation was absent in the v2 object it came from.
  return had && Object.keys(meta).length === 0 ? undefined : meta;
}

const withMetadata = (metadata: ObjectMeta | undefined): { metadata?: ObjectMeta } => (metadata === undefined ? {} : { metadata });

/** v1 → v2 (hub). See the file comment for the rules. */
export function toHub(net: NetworkV1): NetworkV2Object {
  const { apiVersion: _a, kind: _k, metadata, spec, status, ...rest } = net;
  const saved = parseSaved(metadata?.annotations?.[v2SubnetsAnnotation]);
  const key = spec?.cidr ?? '';

  let specV2: NetworkSpecV2 | undefined;
  if (spec !== undefined || saved?.subnets !== undefined) {
    const first: NetworkSpecSubnet[] = spec === undefined ? [] : [{ cidr: spec.cidr, ...(spec.gateway !== undefined && { gateway: spec.gateway }) }];
    specV2 = { subnets: [...first, ...structuredClone(saved?.subnets ?? [])] };
  }

  let statusV2: NetworkStatusV2 | undefined;
  if (status !== undefined) {
    const { subnetID, networkID, observedGeneration, conditions, ...other } = status;
    const primary: NetworkStatusSubnet | undefined = subnetID === undefined ? undefined : { cidr: key, subnetID };
    let subnets: NetworkStatusSubnet[] | undefined;
    if (saved?.status !== undefined) {
      subnets = saved.status.filter((s) => s.cidr !== key);
      if (primary) subnets.splice(Math.min(saved.statusPrimaryAt ?? 0, subnets.length), 0, primary);
    } else if (primary) {
      subnets = [primary];
    }
    statusV2 = {
      ...structuredClone(other),
      ...(networkID !== undefined && { networkID }),
      ...(subnets !== undefined && { subnets }),
      ...(observedGeneration !== undefined && { observedGeneration }),
      ...(conditions !== undefined && { conditions: structuredClone(conditions) }),
    };
  }

  return {
    ...structuredClone(rest),
    apiVersion: v2APIVersion,
    kind: networkKind,
    ...withMetadata(withAnnotation(metadata, undefined)),
    ...(specV2 !== undefined && { spec: specV2 }),
    ...(statusV2 !== undefined && { status: statusV2 }),
  };
}

/** v2 (hub) → v1. See the file comment for the rules. */
export function fromHub(net: NetworkV2): NetworkV1Object {
  const { apiVersion: _a, kind: _k, metadata, spec, status, ...rest } = net;
  const saved: SavedV2Fields = {};
  const [first, ...others] = spec?.subnets ?? [];
  let specV1: NetworkSpecV1 | undefined;
  if (spec !== undefined) {
    // A valid v2 spec has at least one subnet (minItems 1); an empty list has no v1 form and reads as no spec.
    if (first) specV1 = { cidr: first.cidr, ...(first.gateway !== undefined && { gateway: first.gateway }) };
    if (others.length > 0) saved.subnets = structuredClone(others);
  }
  const key = first?.cidr ?? '';

  let statusV1: NetworkStatusV1 | undefined;
  if (status !== undefined) {
    const { subnets, networkID, observedGeneration, conditions, ...other } = status;
    const at = subnets?.findIndex((s) => s.cidr === key) ?? -1;
    const primary = at >= 0 ? subnets?.[at] : undefined;
    if (subnets !== undefined && !(primary && subnets.length === 1)) {
      saved.status = subnets.filter((_, i) => i !== at).map((s) => ({ cidr: s.cidr, subnetID: s.subnetID }));
      if (at > 0) saved.statusPrimaryAt = at;
    }
    statusV1 = {
      ...structuredClone(other),
      ...(networkID !== undefined && { networkID }),
      ...(primary !== undefined && { subnetID: primary.subnetID }),
      ...(observedGeneration !== undefined && { observedGeneration }),
      ...(conditions !== undefined && { conditions: structuredClone(conditions) }),
    };
  }

  const text = Object.keys(saved).length > 0 ? JSON.stringify(saved) : undefined;
  return {
    ...structuredClone(rest),
    apiVersion: v1APIVersion,
    kind: networkKind,
    ...withMetadata(withAnnotation(metadata, text)),
    ...(specV1 !== undefined && { spec: specV1 }),
    ...(statusV1 !== undefined && { status: statusV1 }),
  };
}

/**
 * A Network (v1 or v2, by its apiVersion) in `desiredAPIVersion`, as a ConversionReview asks: the same version is
 * returned as a copy with apiVersion/kind set. Throws on an apiVersion that is neither (the webhook answers Failure).
 */
export function convertNetwork(obj: NetworkV1 | NetworkV2, desiredAPIVersion: string): NetworkV1Object | NetworkV2Object {
  if (desiredAPIVersion !== v1APIVersion && desiredAPIVersion !== v2APIVersion) throw new Error(`cannot convert Network to ${desiredAPIVersion}: known ${v1APIVersion}, ${v2APIVersion}`);
  if (obj.apiVersion !== v1APIVersion && obj.apiVersion !== v2APIVersion) {
    throw new Error(`cannot convert Network from ${String(obj.apiVersion)}: known ${v1APIVersion}, ${v2APIVersion}`);
  }
  if (obj.apiVersion === desiredAPIVersion) return { ...structuredClone(obj), apiVersion: desiredAPIVersion, kind: networkKind } as NetworkV1Object | NetworkV2Object;
  // The casts: apiVersion was checked above; the generated types keep it a plain string.
  return obj.apiVersion === v1APIVersion ? toHub(obj as NetworkV1) : fromHub(obj as NetworkV2);
}
