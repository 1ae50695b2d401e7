/**
 * Network controller: a samplecrd.k8s.io/v1 Network is kept in sync with one OpenStack Neutron network and one subnet
 * (spec.cidr, spec.gateway); with `version: 'v2'` a samplecrd.k8s.io/v2 Network with one subnet per spec subnet (one
 * per IP family), each handled as v1's one subnet is, through the same code (docs/network-v2.md). An external
 * resource, so:
 *
 *   Network informer ──add / update (needsReconcile) / delete──▶ queue "ns/name" ──▶ reconcile (below) ──▶ Neutron
 *                                                                                                     └─▶ finalizer, /status, Events
 *
 *  - Identity: Neutron allows duplicate names, so the network and subnet carry the tag `k8s-uid:<uid>`, and the
 *    network also a description naming the UID (for a create whose tagging never happened). They are always looked up
 *    (name + description/tag, else tag) before anything is created: a retry after a crash or a timed-out POST finds
 *    them. Surplus networks (and subnets of another CIDR or duplicates) are deleted.
 *  - The finalizer is added (merge patch guarded by resourceVersion) before anything is created in Neutron, and a
 *    network is created only from a copy the server has just confirmed (that patch's answer, else the same patch
 *    with the list unchanged: 409/404 when the copy is stale) — a lagging cache never creates for a Network already
 *    gone; deletion
 *    deletes the Neutron network (subnets go with it; 404 = already gone), then removes the finalizer. Deletions that
 *    happened while the manager was down are seen as deletionTimestamp in the initial list. A Network the API server
 *    deleted with our finalizer still on it (kubernetes#77988: a DELETE under way ignores a finalizer added meanwhile)
 *    is seen in the informer's delete (its final state carries the finalizer) or in a 404 of our status write: once a
 *    GET confirms that UID is gone, its Neutron networks are deleted by UID all the same (BypassedFinalizers).
 *  - Updates: a gateway change is done in place, fenced by `If-Match: revision_number=N` (the revision read in this
 *    reconcile; a 412 — someone changed the subnet since — re-reads on a quiet requeue), changing only what the
 *    controller owns: the gateway, and the allocation pools only as far as the gateway forces them (ipnet.ts
 *    poolsForGatewayMove: default pools move with it; a narrowed pool is kept unless the new gateway falls inside it,
 *    and then only that pool is split around it). A CIDR change deletes the old subnet, then creates the new one
 *    (Neutron refuses overlapping subnets on one network); until the new one exists, status.subnetID keeps naming the
 *    subnet that still exists.
 *  - Fencing (docs/safety.md): the finalizer and status writes carry the resourceVersion of the object they were
 *    derived from; a 409 (the object changed since: a late write of an old leader, or a cache behind our own last
 *    write) requeues quietly. Every Neutron call takes the reconcile's signal, so none starts after shutdown or the
 *    loss of leadership aborted it.
 *  - Errors: an invalid spec or a Neutron 400 → Ready=False (InvalidSpec / NeutronRejected), one Warning Event,
 *    TerminalError, and no Neutron call again for that generation (the status records it, so also across restarts).
 *    Neutron unavailable (5xx, 429, timeouts, connection errors), 409s, auth failures → Ready=False with the reason, a
 *    Warning when the condition changes, and a plain error: the work queue retries with per-key exponential backoff.
 *  - Drift: a Ready Network is looked up again every driftCheckMs (5 min) by name + description and tag — a listing,
 *    not a GET of the recorded id — so a duplicate whose create committed later than any settle window is found and
 *    deleted then. A deletion Neutron refuses (auth, policy, NetworkInUse, unavailable) sets Ready=False DeleteFailed
 *    and records a Warning when that condition changes; the finalizer stays and the work queue retries.
 *  - Reads come only from the lister; Neutron is queried only inside a reconcile; status is written only when it
 *    differs. Per-request timeouts come from the Neutron client (10 s).
 */
import type { Network } from '../../apis/samplecrd/v1/types.ts';
import { v2SubnetsAnnotation, type Network as NetworkV2, type NetworkStatusSubnet } from '../../apis/samplecrd/v2/types.ts';
import { isConflict as isKubeConflict, isNotFound as isKubeNotFound, type RestClient } from '../../client/rest.ts';
import { requestKey, TerminalError, type Controller, type ReconcileContext, type Reconciler, type Request, type Result } from '../../controller/index.ts';
import type { Recorder } from '../../events/recorder.ts';
import type { Lister } from '../../informerfactory/lister.ts';
import { BypassedFinalizers } from '../../runtime/bypassedfinalizer.ts';
import { objectPath } from '../../apimachinery/paths.ts';
import type { Logger } from '../../log/logger.ts';
import {
  describeCloud, isNotFound, isRetryable, loadCloudConfig, NeutronAuthError, NeutronBadRequestError, NeutronClient, NeutronConflictError,
  NeutronError, NeutronForbiddenError, NeutronUnavailableError, type Network as NeutronNetwork, type Subnet,
} from '../../neutron/index.ts';
import type { ControllerSetup } from '../setup.ts';
import {
  computeStatus, computeStatusV2, FINALIZER, hasFinalizer, needsReconcile, networkRef, networkResource, networkV2Ref, networkV2Resource, neutronDescription,
  neutronName, readyThisGeneration, ReasonDeleted, ReasonDeleteFailed, ReasonInvalidSpec, ReasonNeutronAuthFailed, ReasonNeutronConflict,
  ReasonNeutronError, ReasonNeutronForbidden, ReasonNeutronRejected, ReasonNeutronUnavailable, ReasonSynced, rejectedThisGeneration, statusEqual,
  statusEqualV2, statusPatch, statusPatchV2, uidTag, validateNetworkSpec, type AnyNetwork, type DesiredSubnet,
} from './desired.ts';
import { overlaps, parseCIDR, poolsForGatewayMove, sameCIDR, sameIP, type IPVersion } from './ipnet.ts';
import { registerNetworksGauge } from './metrics.ts';
import type { NeutronNetworkAPI } from './neutronapi.ts';
import { SettleWindows } from './settling.ts';

export type { NeutronNetworkAPI } from './neutronapi.ts';

export const networkControllerName = 'network';
const mergePatch = 'application/merge-patch+json';

/** Default: how long a create whose outcome is unknown (timeout, lost connection, 5xx) may still commit. */
export const DEFAULT_CREATE_SETTLE_MS = 60_000;
/** Default period of the drift check of a Ready Network (±10 % jitter). */
export const DEFAULT_DRIFT_CHECK_MS = 5 * 60_000;
/** Retry period while the CIDR overlaps another subnet (Neutron's default allow_overlapping_ips = False). */
export const OVERLAP_RETRY_MS = 30_000;
/** Bounds for a server's Retry-After. */
const RETRY_AFTER_MIN_MS = 1_000;
const RETRY_AFTER_MAX_MS = 10 * 60_000;

export interface NetworkReconcilerDeps {
  /**
   * Which Network version this reconciler serves: 'v1' (default; one subnet, status.subnetID) or 'v2' (one subnet per
   * IP family, status.subnets). The same reconcile path serves both (docs/network-v2.md).
   */
  version?: 'v1' | 'v2';
  networks: { get(namespace: string | undefined, name: string): AnyNetwork | undefined };
  /** Writes (finalizer, status) and one read: the GET that tells a Network deleted with our finalizer from a moved one. */
  rest: Pick<RestClient, 'json'>;
  neutron: NeutronNetworkAPI;
  recorder: Recorder;
  now?: () => Date;
  /**
   * After a network create whose outcome is unknown (timed out, connection lost, 5xx: Neutron may still commit it),
   * no other create is made for that Network until this long after the failure; lookups in between adopt the late
   * network if it appears. After every create, one more full lookup runs this long later and deletes a leftover from
   * an earlier attempt (of this process or of one that died) that committed later still. Default 60 s: longer than
   * Neutron takes for a create even when its database waits for a lock (MySQL's innodb_lock_wait_timeout is 50 s).
   */
  createSettleMs?: number;
  /** A Ready Network is checked against Neutron again after this period (±10 % jitter); default 5 min. */
  driftCheckMs?: number;
  /** [0,1) source for the jitter (tests). */
  random?: () => number;
  /**
   * Networks the API server deleted while they still carried our finalizer (kubernetes#77988: a finalizer added while
   * a DELETE was under way is ignored), filled by the informer's deletes (setup below): the reconcile of such a key
   * deletes the Neutron networks of that UID, as finalize() would have. Without it, such a Network's Neutron network
   * leaks (test/network-finalizer-race.test.ts).
   */
  bypassed?: BypassedFinalizers<AnyNetwork>;
}

interface Progress {
  networkID: string | undefined;
  /** v1: the subnet status.subnetID names. */
  subnetID: string | undefined;
  /** v2: per IP family, the subnet of ours that exists (and the CIDR its status entry is keyed by). */
  subnets: Map<IPVersion, NetworkStatusSubnet>;
  /** What this reconcile changed in Neutron (for the Event and the log). */
  actions: string[];
}

/** Resolves once the server has confirmed the reconcile's copy of the Network (see confirmOnce); StaleCache if not. */
type Confirm = () => Promise<void>;

/** No network was found and an earlier create's outcome is still unknown: look again after `ms`, do not create. */
class AwaitingEarlierCreate extends Error {
  readonly ms: number;

  constructor(ms: number) {
    super(`an earlier Neutron network create has an unknown outcome (it may still commit); looking again in ${Math.ceil(ms / 1000)} s before creating`);
    this.name = 'AwaitingEarlierCreate';
    this.ms = ms;
  }
}

/** A fenced Neutron update was refused with 412: the resource changed since it was read. Re-read on a quiet requeue. */
class StaleRevision extends Error {
  constructor(what: string, cause: unknown) {
    super(`${what} changed in Neutron since it was read (412 on If-Match); re-reading`, { cause });
    this.name = 'StaleRevision';
  }
}

/**
 * The cached Network is not the server's any more (gone, re-created, being deleted, or changed): nothing is written
 * to Neutron from it. Quiet requeue: the informer catches up and the next reconcile sees what is there.
 */
class StaleCache extends Error {
  constructor(why: string) {
    super(`the cached Network is stale (${why}); not writing to Neutron from it, requeued`);
    this.name = 'StaleCache';
  }
}

/** Neutron's answer to a stale `If-Match: revision_number=N` (412 Precondition Failed). */
export function isStaleRevision(err: unknown): boolean {
  return err instanceof NeutronError && err.status === 412;
}

/** Neutron's refusal of a subnet whose CIDR overlaps another one (on this network, or anywhere without overlapping IPs). */
export function isOverlapError(err: unknown): boolean {
  return err instanceof NeutronBadRequestError && /overlaps with/i.test(err.serverMessage);
}

/** How a Neutron failure is reported; `terminal` failures are not retried for the same generation. */
export function classifyNeutronError(err: unknown): { reason: string; message: string; terminal: boolean } | undefined {
  if (isOverlapError(err)) {
    return { reason: ReasonNeutronConflict, message: `Neutron: the CIDR overlaps another subnet (Neutron's allow_overlapping_ips = False, or on this network): ${(err as NeutronError).serverMessage}; retrying every ${OVERLAP_RETRY_MS / 1000} s`, terminal: false };
  }
  if (err instanceof NeutronBadRequestError) return { reason: ReasonNeutronRejected, message: `Neutron rejected the request: ${err.serverMessage}`, terminal: true };
  if (err instanceof NeutronUnavailableError) return { reason: ReasonNeutronUnavailable, message: `Neutron is unavailable (${err.type}); retrying with backoff`, terminal: false };
  if (err instanceof NeutronConflictError) return { reason: ReasonNeutronConflict, message: `Neutron: ${err.type}: ${err.serverMessage}; retrying with backoff`, terminal: false };
  if (err instanceof NeutronForbiddenError) return { reason: ReasonNeutronForbidden, message: `Neutron's policy forbids ${err.method ?? ''} ${err.path ?? ''}: ${err.serverMessage}; retrying with backoff`.replace(/\s+/g, ' '), terminal: false };
  if (err instanceof NeutronAuthError) return { reason: ReasonNeutronAuthFailed, message: `Neutron authentication failed (${err.status > 0 ? `HTTP ${err.status} ` : ''}${err.type}: ${err.serverMessage}); retrying with backoff`, terminal: false };
  if (err instanceof NeutronError) return { reason: ReasonNeutronError, message: `Neutron: ${err.message}; retrying with backoff`, terminal: false };
  return undefined;
}

/** The one to keep among duplicates first: the id in status, then tagged ones, then the oldest (created_at, id). */
function byKeepOrder<T extends { id: string; created_at?: string; tags: string[] }>(items: T[], preferredId: string | undefined, tag: string): T[] {
  const rank = (x: T): number => (x.id === preferredId ? 0 : x.tags.includes(tag) ? 1 : 2);
  return [...items].sort((a, b) => rank(a) - rank(b) || (a.created_at ?? '').localeCompare(b.created_at ?? '') || a.id.localeCompare(b.id));
}

const hasUidTag = (tags: string[]): boolean => tags.some((t) => t.startsWith('k8s-uid:'));

export function networkReconciler(deps: NetworkReconcilerDeps): Reconciler {
  const { networks, rest, neutron, recorder } = deps;
  const now = deps.now ?? ((): Date => new Date());
  const nowMs = (): number => now().getTime();
  const settleMs = deps.createSettleMs ?? DEFAULT_CREATE_SETTLE_MS;
  const driftMs = deps.driftCheckMs ?? DEFAULT_DRIFT_CHECK_MS;
  const random = deps.random ?? Math.random;
  /** Per Network UID: until when lookups must be full and creates wait (settling.ts). */
  const settling = new SettleWindows(nowMs);

  const v2 = deps.version === 'v2';
  const resource = v2 ? networkV2Resource : networkResource;
  const objPath = (net: AnyNetwork): string => objectPath(resource, net.metadata?.namespace, net.metadata?.name ?? '');
  // The casts: this reconciler's lister holds Networks of `deps.version` only.
  const ref = (net: AnyNetwork): AnyNetwork & { apiVersion: string; kind: string } => (v2 ? networkV2Ref(net as NetworkV2) : networkRef(net as Network));
  const familyOf = (cidr: string): IPVersion | undefined => parseCIDR(cidr)?.version;

  /** The subnet id status records for `family` (v1: status.subnetID, whatever its family). */
  function recordedSubnetID(net: AnyNetwork, family: IPVersion): string | undefined {
    if (!v2) return (net as Network).status?.subnetID;
    return (net as NetworkV2).status?.subnets?.find((s) => familyOf(s.cidr) === family)?.subnetID;
  }

  /** The Progress a reconcile starts from: the ids status records. */
  function recordedProgress(net: AnyNetwork): Progress {
    const subnets = new Map<IPVersion, NetworkStatusSubnet>();
    for (const s of v2 ? (net as NetworkV2).status?.subnets ?? [] : []) {
      const f = familyOf(s.cidr);
      if (f !== undefined && !subnets.has(f)) subnets.set(f, { cidr: s.cidr, subnetID: s.subnetID });
    }
    return { networkID: net.status?.networkID, subnetID: v2 ? undefined : (net as Network).status?.subnetID, subnets, actions: [] };
  }

  /** Records the subnet of ours that exists for `family` (undefined: none); `cidr` keys its v2 status entry. */
  function setSubnet(p: Progress, family: IPVersion, id: string | undefined, cidr: string): void {
    p.subnetID = id;
    if (id === undefined) p.subnets.delete(family);
    else p.subnets.set(family, { cidr, subnetID: id });
  }

  /**
   * Writes the status for an observation (ids from `p`) if it differs from the cached one; true when written. v2:
   * status.subnets in spec order of the families (`order`), then any other family still recorded.
   */
  async function writeStatus(net: AnyNetwork, p: Pick<Progress, 'networkID' | 'subnetID' | 'subnets'>, o: { ready: boolean; reason: string; message: string }, signal: AbortSignal, order: IPVersion[] = []): Promise<boolean> {
    let body: unknown;
    if (v2) {
      const n = net as NetworkV2;
      const families = [...order, ...[...p.subnets.keys()].filter((f) => !order.includes(f))];
      const subnets = families.flatMap((f) => {
        const s = p.subnets.get(f);
        return s ? [s] : [];
      });
      const status = computeStatusV2(n, { networkID: p.networkID, subnets: subnets.length > 0 ? subnets : undefined, ...o }, now());
      if (statusEqualV2(n.status, status)) return false;
      body = statusPatchV2(n, status);
    } else {
      const n = net as Network;
      const status = computeStatus(n, { networkID: p.networkID, subnetID: p.subnetID, ...o }, now());
      if (statusEqual(n.status, status)) return false;
      body = statusPatch(n, status);
    }
    await rest.json('PATCH', `${objPath(net)}/status`, { body, contentType: mergePatch, signal });
    return true;
  }

  /**
   * Sets or clears our finalizer; the resourceVersion makes a concurrent change fail (409) instead of being lost.
   * Returns the object as written (its new resourceVersion fences the status write that follows).
   */
  async function patchFinalizers(net: AnyNetwork, finalizers: string[], signal: AbortSignal): Promise<AnyNetwork> {
    return rest.json<AnyNetwork>('PATCH', objPath(net), {
      body: { metadata: { finalizers, resourceVersion: net.metadata?.resourceVersion } }, contentType: mergePatch, signal,
    });
  }

  /**
   * The Neutron networks of this Network in our project: tagged with its UID, or untagged with its name and
   * description (a create whose tagging never happened: Neutron Zed tags after the POST, so a timed-out POST or a
   * crash in between leaves one, and a timed-out POST may commit late). One name query finds both kinds in the common
   * case; the tag query runs when it found no tagged one (a network renamed in Neutron), or always with `all`.
   * `projectId` (the token's project) keeps another project's look-alikes out: admin credentials list every project.
   */
  async function findNetworks(net: AnyNetwork, projectId: string | undefined, signal: AbortSignal, all = false): Promise<NeutronNetwork[]> {
    const uid = net.metadata?.uid ?? '';
    const tag = uidTag(uid);
    const scope = projectId !== undefined ? { projectId } : {};
    const inScope = (n: NeutronNetwork): boolean => projectId === undefined || n.project_id === projectId;
    const named = (await neutron.listNetworks({ name: neutronName(net), ...scope }, { signal }))
      .filter((n) => inScope(n) && (n.tags.includes(tag) || n.description === neutronDescription(uid)));
    if (!all && named.some((n) => n.tags.includes(tag))) return named;
    const tagged = (await neutron.listNetworks({ tags: [tag], ...scope }, { signal })).filter(inScope);
    return [...tagged, ...named.filter((n) => !tagged.some((t) => t.id === n.id))];
  }

  /** The network recorded in status, if it is still ours (tag, project); undefined when gone or no longer ours. */
  async function recordedNetwork(net: AnyNetwork, projectId: string | undefined, signal: AbortSignal): Promise<NeutronNetwork | undefined> {
    const id = net.status?.networkID;
    if (!id) return undefined;
    try {
      const n = await neutron.getNetwork(id, { signal });
      return n.tags.includes(uidTag(net.metadata?.uid ?? '')) && (projectId === undefined || n.project_id === projectId) ? n : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined; // a 404 from the resource path itself: gone (deleted behind our back)
      throw err;
    }
  }

  /**
   * Every Neutron write derived from a cached copy of the Network waits for the server to confirm that copy: the
   * finalizer patch with the list unchanged, guarded by the cached resourceVersion — a no-op the server answers with
   * the object when the copy is current (so not being deleted either: the cache would show it), 409 when it changed or
   * was re-created, 404 when it is gone (→ StaleCache, a quiet requeue). A cache can lag the server (a new leader's or
   * a standby's, after an API-server restart), and a write from its copy acts on a spec the user has replaced:
   *  - a network created for a Network already finalized and gone leaks (nobody deletes it; the endurance bench);
   *  - the subnet of the current CIDR is deleted as "stale" and the old one re-created — in a cloud, a subnet the user
   *    wants, with its ports (explore, stale-standby); likewise a gateway moved back, a tag adopted;
   *  - the duplicate sweep keeps the network the old status names and deletes the one the current status names.
   * Hence `confirmOnce` (one per reconcile): called before the reconcile's first write of any kind to Neutron, it costs
   * at most one PATCH per reconcile that writes, none for one that writes nothing (the common, converged drift check)
   * and none for a `live` copy (our finalizer patch just answered it). The verb is the one the finalizer already needs
   * (a PATCH, not a GET: it also fences). finalize() needs none: its cleanup is by the UID's tag, not the spec, and a deletion is final
   * (deletionTimestamp cannot be unset, the UID never comes back). Not a lock: the Network may change right after the
   * confirmation; what is left is the window of this reconcile's own Neutron calls, not the cache's lag.
   */
  function confirmOnce(net: AnyNetwork, live: boolean, signal: AbortSignal): Confirm {
    let confirmed: Promise<void> | undefined = live ? Promise.resolve() : undefined;
    return () => (confirmed ??= confirmLive(net, signal));
  }

  async function confirmLive(net: AnyNetwork, signal: AbortSignal): Promise<void> {
    try {
      await patchFinalizers(net, net.metadata?.finalizers ?? [], signal);
    } catch (err) {
      if (isKubeNotFound(err)) throw new StaleCache('gone from the server');
      if (isKubeConflict(err)) throw new StaleCache('changed or re-created since it was cached');
      throw err;
    }
  }

  async function ensureNetwork(net: AnyNetwork, projectId: string | undefined, p: Progress, signal: AbortSignal, log: Logger, confirm: Confirm): Promise<NeutronNetwork> {
    const uid = net.metadata?.uid ?? '';
    const tag = uidTag(uid);
    const until = settling.end(uid);
    // Always a listing by name + description (and tag), also for the drift check of a converged Network (usually one
    // list call): a GET of the recorded id would miss a duplicate whose create committed after every settle window.
    const [keep, ...surplus] = byKeepOrder(await findNetworks(net, projectId, signal), net.status?.networkID, tag);
    if (surplus.length > 0) await confirm(); // which one is kept depends on the status of this copy
    for (const dup of surplus) {
      log.warn({ neutronNetwork: dup.id }, 'Deleting a duplicate Neutron network');
      await neutron.deleteNetwork(dup.id, { signal }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
      p.actions.push(`deleted duplicate network ${dup.id}`);
    }
    if (keep) {
      if (!keep.tags.includes(tag)) {
        await confirm();
        await neutron.addTag('networks', keep.id, tag, { signal });
        p.actions.push(`adopted untagged network ${keep.id}`);
      }
      if (until !== undefined && nowMs() >= until) settling.close(uid);
      return keep;
    }
    if (until !== undefined && nowMs() < until) throw new AwaitingEarlierCreate(until - nowMs());
    await confirm();
    let created: NeutronNetwork;
    try {
      created = await neutron.createNetwork({ name: neutronName(net), description: neutronDescription(uid) }, { signal });
    } catch (err) {
      // Timed out, connection lost, 5xx: the server may still commit this create. Do not create again before it
      // had time to; the lookups in between adopt it if it appears.
      if (isRetryable(err)) settling.open(uid, settleMs);
      throw err;
    }
    settling.open(uid, settleMs); // the sweep: one full lookup later catches a late commit of an earlier attempt
    p.actions.push(`created network ${created.id}`);
    log.info({ neutronNetwork: created.id }, 'Created Neutron network');
    // Tagged in a second call (Neutron Zed has no tags in POST anyway): if tagging fails, the next attempt adopts the
    // network by name + description.
    await neutron.addTag('networks', created.id, tag, { signal });
    return { ...created, tags: [...created.tags, tag] };
  }

  async function createOurSubnet(net: AnyNetwork, networkId: string, spec: { cidr: string; ipVersion: 4 | 6; gateway?: string | null; pools?: Subnet['allocation_pools'] }, signal: AbortSignal): Promise<Subnet> {
    const uid = net.metadata?.uid ?? '';
    const created = await neutron.createSubnet({
      network_id: networkId, cidr: spec.cidr, ip_version: spec.ipVersion, name: neutronName(net), description: neutronDescription(uid),
      ...(spec.gateway !== undefined && { gateway_ip: spec.gateway }), ...(spec.pools && { allocation_pools: spec.pools }),
    }, { signal });
    await neutron.addTag('subnets', created.id, uidTag(uid), { signal }); // failing: the next attempt finds it by description
    return { ...created, tags: [...created.tags, uidTag(uid)] };
  }

  async function deleteSubnets(subnets: Subnet[], p: Progress, signal: AbortSignal, log: Logger, confirm: Confirm): Promise<void> {
    if (subnets.length > 0) await confirm();
    for (const s of subnets) {
      log.info({ neutronSubnet: s.id, cidr: s.cidr }, 'Deleting Neutron subnet');
      await neutron.deleteSubnet(s.id, { signal }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
      p.actions.push(`deleted subnet ${s.id} (${s.cidr})`);
    }
  }

  /**
   * The subnet of `d` on our network. Only subnets the controller made (our tag, or our description for a create
   * whose tagging never happened) are ever deleted; anyone else's subnets on the network are left alone (they may
   * have ports). An untagged subnet of exactly the desired CIDR is adopted (what a late create of ours leaves).
   * A CIDR change never leaves fewer working subnets than before: a new CIDR that does not overlap the old one is
   * created first and the old deleted after; an overlapping one (Neutron refuses overlaps on one network) needs the old
   * deleted first, and if Neutron then refuses the new one the old one is re-created before the error is reported.
   */
  async function ensureSubnet(net: AnyNetwork, network: NeutronNetwork, listed: Subnet[] | undefined, d: DesiredSubnet, specCidr: string, p: Progress, signal: AbortSignal, log: Logger, confirm: Confirm): Promise<Subnet> {
    const uid = net.metadata?.uid ?? '';
    const tag = uidTag(uid);
    const family = d.cidr.version;
    const subnets = listed ?? (network.subnets.length > 0 ? await neutron.listSubnets({ networkId: network.id }, { signal }) : []);
    // v1: every subnet of ours is this one's (a CIDR change may change the family). v2: only those of its family (the
    // other family's subnet is the other spec subnet's; reconcile() deletes ours of a family no longer in the spec).
    const ours = subnets.filter((s) => (s.tags.includes(tag) || s.description === neutronDescription(uid)) && (!v2 || s.ip_version === family));
    const isDesired = (s: Subnet): boolean => {
      const c = parseCIDR(s.cidr);
      return c !== undefined && sameCIDR(c, d.cidr);
    };
    const candidates = subnets.filter((s) => isDesired(s) && (ours.includes(s) || !hasUidTag(s.tags)));
    const [keep] = byKeepOrder(candidates, recordedSubnetID(net, family), tag);
    const stale = ours.filter((s) => s !== keep);
    if (keep) {
      setSubnet(p, family, keep.id, specCidr);
      await deleteSubnets(stale, p, signal, log, confirm);
      if (!keep.tags.includes(tag)) {
        await confirm();
        await neutron.addTag('subnets', keep.id, tag, { signal }); // a create whose tagging never happened
      }
      if (d.gateway === undefined || sameIP(keep.gateway_ip, d.gatewayText)) return keep;
      await confirm();
      const pools = poolsForGatewayMove(d.cidr, keep.gateway_ip, d.gateway, keep.allocation_pools);
      let updated: Subnet;
      try {
        // Fenced by the revision read above: a subnet someone changed since (e.g. narrowed its pools) is re-read
        // rather than overwritten with pools computed from the old state.
        updated = await neutron.updateSubnet(keep.id, { gateway_ip: d.gatewayText ?? null, ...(pools && { allocation_pools: pools }) }, { signal, ifRevision: keep.revision_number });
      } catch (err) {
        if (isStaleRevision(err)) throw new StaleRevision(`subnet ${keep.id}`, err);
        throw err;
      }
      p.actions.push(`updated gateway of subnet ${keep.id} from ${keep.gateway_ip ?? 'none'} to ${updated.gateway_ip ?? 'none'}`);
      log.info({ neutronSubnet: keep.id, from: keep.gateway_ip, to: updated.gateway_ip, allocationPools: updated.allocation_pools }, 'Updated Neutron subnet gateway');
      return updated;
    }
    const overlapping = stale.filter((s) => {
      const c = parseCIDR(s.cidr);
      return c !== undefined && overlaps(c, d.cidr);
    });
    // Until the new subnet exists, status names the subnet of ours that still exists (the recorded one if it is among
    // them): a refused disjoint CIDR change keeps the old subnet, and the status says so.
    const surviving = stale.filter((s) => !overlapping.includes(s));
    const kept = surviving.find((s) => s.id === recordedSubnetID(net, family)) ?? surviving[0];
    setSubnet(p, family, kept?.id, kept?.cidr ?? specCidr);
    await deleteSubnets(overlapping, p, signal, log, confirm);
    await confirm();
    let created: Subnet;
    try {
      created = await createOurSubnet(net, network.id, { cidr: d.cidrText, ipVersion: d.cidr.version, ...(d.gatewayText !== undefined && { gateway: d.gatewayText }) }, signal);
    } catch (err) {
      // Neutron refuses overlapping subnets on one network: a 400 while one of ours with this CIDR exists now means an
      // earlier, timed-out create committed late — not a bad spec. Retry; the next attempt adopts that subnet.
      if (err instanceof NeutronBadRequestError && (await neutron.listSubnets({ networkId: network.id }, { signal })).some((s) => isDesired(s) && !hasUidTag(s.tags.filter((t) => t !== tag)))) {
        throw new Error(`a subnet appeared on Neutron network ${network.id} while creating one (a late earlier create?); retrying`, { cause: err });
      }
      if (err instanceof NeutronBadRequestError && overlapping.length > 0) await restoreSubnets(net, network.id, overlapping, p, signal, log);
      throw err;
    }
    p.actions.push(`created subnet ${created.id} (${created.cidr}, gateway ${created.gateway_ip ?? 'none'})`);
    log.info({ neutronSubnet: created.id, cidr: created.cidr }, 'Created Neutron subnet');
    setSubnet(p, family, created.id, specCidr);
    await deleteSubnets(stale.filter((s) => !overlapping.includes(s)), p, signal, log, confirm);
    return created;
  }

  /**
   * Best effort: puts back the subnets a refused CIDR change had deleted (same CIDR, gateway, pools, tag). With the
   * reconcile's signal, like every Neutron call: once shutdown or the loss of leadership aborted it, nothing more is
   * sent to Neutron (another leader may be acting on this Network). An aborted restore leaves the Network without a
   * subnet; the status then names none and the next reconcile (of whoever leads) reports the refusal again.
   */
  async function restoreSubnets(net: AnyNetwork, networkId: string, subnets: Subnet[], p: Progress, signal: AbortSignal, log: Logger): Promise<void> {
    for (const s of subnets) {
      if (signal.aborted) return;
      try {
        const back = await createOurSubnet(net, networkId, { cidr: s.cidr, ipVersion: s.ip_version, gateway: s.gateway_ip, pools: s.allocation_pools }, signal);
        p.actions.push(`restored subnet ${s.cidr} as ${back.id} after Neutron refused the new CIDR`);
        setSubnet(p, s.ip_version, back.id, s.cidr);
        log.warn({ neutronSubnet: back.id, cidr: s.cidr }, 'Neutron refused the new CIDR: restored the previous subnet');
      } catch (err) {
        if (signal.aborted) {
          log.warn({ cidr: s.cidr }, 'Neutron refused the new CIDR; restoring the previous subnet was abandoned: the reconcile was aborted');
          return;
        }
        log.error({ err, cidr: s.cidr }, 'Neutron refused the new CIDR and the previous subnet could not be restored; retrying on the next generation');
      }
    }
  }

  /**
   * Deletion: Neutron network(s) first (subnets go with them), then the finalizer. A Neutron failure (auth, policy,
   * NetworkInUse, unavailable) keeps the finalizer, sets Ready=False DeleteFailed with the cause, records a Warning
   * when that condition changes, and is retried by the work queue.
   */
  async function finalize(net: AnyNetwork, signal: AbortSignal, log: Logger): Promise<void> {
    if (!hasFinalizer(net)) return;
    const progress = { current: undefined as string | undefined };
    let deleted: string[];
    try {
      deleted = await deleteNeutronNetworks(net, signal, progress);
    } catch (err) {
      const c = classifyNeutronError(err);
      if (!c || signal.aborted) throw err;
      const what = progress.current !== undefined ? `Neutron network ${progress.current}` : 'the Neutron network';
      const detail = err instanceof NeutronConflictError ? `${err.type}: ${err.serverMessage}; retrying with backoff` : c.message;
      const message = `Cannot delete ${what}: ${detail}`;
      const changed = await writeStatus(net, recordedProgress(net), { ready: false, reason: ReasonDeleteFailed, message }, signal);
      if (changed) recorder.event(ref(net), 'Warning', ReasonDeleteFailed, message);
      throw err;
    }
    if (deleted.length > 0) {
      log.info({ neutronNetworks: deleted }, 'Deleted Neutron network');
      recorder.event(ref(net), 'Normal', ReasonDeleted, `Deleted Neutron network ${deleted.join(', ')}`);
    }
    try {
      await patchFinalizers(net, (net.metadata?.finalizers ?? []).filter((f) => f !== FINALIZER), signal);
    } catch (err) {
      if (!isKubeNotFound(err)) throw err;
    }
    settling.close(net.metadata?.uid ?? '');
  }

  /**
   * Deletes every Neutron network of the Network's UID (its tag, or name + description; and the one its status
   * records if still ours); subnets go with them. Returns the ids deleted (404: already gone, not counted).
   * `progress.current` names the network being deleted when a call fails.
   */
  async function deleteNeutronNetworks(net: AnyNetwork, signal: AbortSignal, progress: { current: string | undefined }): Promise<string[]> {
    const deleted: string[] = [];
    const projectId = await neutron.projectId(signal);
    const found = await findNetworks(net, projectId, signal, true);
    const recorded = found.some((n) => n.id === net.status?.networkID) ? undefined : await recordedNetwork(net, projectId, signal);
    for (const n of recorded ? [recorded, ...found] : found) {
      progress.current = n.id;
      try {
        await neutron.deleteNetwork(n.id, { signal });
        deleted.push(n.id);
      } catch (err) {
        if (isNotFound(err)) continue; // only a 404 of the network's own path means "gone" (auth errors are NeutronAuthError)
        throw err;
      }
    }
    return deleted;
  }

  /**
   * A Network the API server deleted with our finalizer still on it (BypassedFinalizers): finalize() never ran, so
   * its Neutron networks are deleted now, by its UID — once the API server confirms that UID is gone (404, or another
   * object under the name). An informer's delete does not prove it: with --sharding the informer selects this
   * shard's label, and a Network moved to another shard leaves it as a delete, our finalizer on it, alive. A failure
   * is retried by the work queue with backoff (the entry stays until it succeeds).
   */
  async function cleanUpBypassed(gone: AnyNetwork, signal: AbortSignal, log: Logger): Promise<void> {
    let current: AnyNetwork | undefined;
    try {
      current = await rest.json<AnyNetwork>('GET', objPath(gone), { signal });
    } catch (err) {
      if (!isKubeNotFound(err)) throw err;
    }
    if (current?.metadata?.uid === gone.metadata?.uid) {
      log.debug({ uid: gone.metadata?.uid }, 'a Network that left the cache with our finalizer still exists (out of this informer\'s selector, e.g. another shard): nothing to clean up');
      deps.bypassed?.done(gone);
      return;
    }
    const deleted = await deleteNeutronNetworks(gone, signal, { current: undefined });
    log.warn({ uid: gone.metadata?.uid, neutronNetworks: deleted },
      'The API server deleted the Network while it still carried our finalizer (kubernetes#77988): deleted its Neutron networks without it');
    settling.close(gone.metadata?.uid ?? '');
    deps.bypassed?.done(gone);
  }

  /** Next drift check: the period ±10 %, or the pending sweep if sooner. */
  function nextCheck(uid: string): Result {
    const jittered = Math.round(driftMs * (0.9 + 0.2 * random()));
    const until = settling.end(uid);
    return { requeueAfter: until === undefined ? jittered : Math.max(1, Math.min(jittered, until - nowMs())) };
  }

  /**
   * Fencing: a Kubernetes write refused with 409 was derived from a Network that has changed since (a late write, or
   * the cache behind our own last write): not an error. Requeue quietly (rate-limited); the next reconcile reads the
   * newer version. (Status-only changes do not queue a Network: needsReconcile.)
   */
  const reconciler: Reconciler = async (req, signal, ctx) => {
    try {
      return await reconcile(req, signal, ctx);
    } catch (err) {
      if (!isKubeConflict(err)) throw err;
      ctx.log.debug({ err }, 'the Network changed since the cached version a write was derived from (409); requeueing');
      return { requeue: true };
    }
  };
  return reconciler;

  async function reconcile({ namespace, name }: Request, signal: AbortSignal, { log }: ReconcileContext): Promise<Result | void> {
    let net = networks.get(namespace, name);
    // Gone without finalize() despite our finalizer (kubernetes#77988), perhaps re-created since under the same name.
    const gone = deps.bypassed?.get(requestKey({ namespace, name }));
    if (gone && gone.metadata?.uid !== net?.metadata?.uid) await cleanUpBypassed(gone, signal, log);
    if (!net) return; // gone: through finalize() (our finalizer), or just cleaned up above
    if (net.metadata?.deletionTimestamp) return finalize(net, signal, log);
    if (rejectedThisGeneration(net)) return; // already reported; retrying cannot help until the spec changes
    // A v1 view of a dual-stack object (conversion.ts keeps what v1 cannot show in this annotation) shows one subnet:
    // reconciling it as v1 would take the other family's subnet for a stale one of ours and delete it in Neutron.
    // Only a v2 controller may act on it (e.g. an older manager after the CRD moved to v2, or one that read discovery
    // wrongly): leave it untouched, no write anywhere.
    if (!v2 && net.metadata?.annotations?.[v2SubnetsAnnotation] !== undefined) {
      log.warn({ annotation: v2SubnetsAnnotation }, 'a dual-stack Network seen through v1: not reconciled (only a controller on samplecrd.k8s.io/v2 may act on it)');
      return;
    }

    const netRef = ref(net);
    const uid = net.metadata?.uid ?? '';
    // The casts: this reconciler's lister holds Networks of `deps.version` only.
    const v = v2 ? validateNetworkSpec('v2', (net as NetworkV2).spec) : validateNetworkSpec('v1', (net as Network).spec);
    if (!v.ok) {
      await writeStatus(net, recordedProgress(net), { ready: false, reason: ReasonInvalidSpec, message: v.message }, signal);
      recorder.event(netRef, 'Warning', ReasonInvalidSpec, v.message);
      throw new TerminalError(`invalid spec: ${v.message}`);
    }
    const order = v.desired.map((d) => d.cidr.version);
    // The CIDR text each subnet's v2 status entry is keyed by: as written in the spec (v1 ignores it).
    const specCidrs = v2 ? ((net as NetworkV2).spec?.subnets ?? []).map((s) => s.cidr) : [];

    // live: the server answered this object now (the finalizer patch), not only the cache. Otherwise the first
    // Neutron write confirms the cached copy first (once) — see confirmOnce.
    let live = false;
    if (!hasFinalizer(net)) {
      net = await patchFinalizers(net, [...(net.metadata?.finalizers ?? []), FINALIZER], signal);
      live = true;
    }
    const confirm = confirmOnce(net, live, signal);

    const p = recordedProgress(net);
    const subnets: Subnet[] = [];
    try {
      const projectId = await neutron.projectId(signal);
      const network = await ensureNetwork(net, projectId, p, signal, log, confirm);
      p.networkID = network.id;
      // v1: ensureSubnet lists the subnets itself (as it always has). v2: listed once here for both families, and
      // ours of a family the spec no longer has are deleted after the others exist.
      const listed = v2 && network.subnets.length > 0 ? await neutron.listSubnets({ networkId: network.id }, { signal }) : v2 ? [] : undefined;
      for (const [i, d] of v.desired.entries()) {
        subnets.push(await ensureSubnet(net, network, listed, d, specCidrs[i] ?? d.cidrText, p, signal, log, confirm));
      }
      if (listed) {
        const tag = uidTag(uid);
        const unwanted = listed.filter((s) => (s.tags.includes(tag) || s.description === neutronDescription(uid)) && !order.includes(s.ip_version));
        await deleteSubnets(unwanted, p, signal, log, confirm);
        for (const s of unwanted) p.subnets.delete(s.ip_version);
      }
      for (const f of [...p.subnets.keys()]) if (!order.includes(f)) p.subnets.delete(f); // v2: gone or never made
    } catch (err) {
      if (p.actions.length > 0) log.info({ actions: p.actions }, 'Partially synced before the failure');
      if (err instanceof AwaitingEarlierCreate) {
        log.info({ ms: err.ms }, err.message);
        return { requeueAfter: err.ms };
      }
      if (err instanceof StaleRevision || err instanceof StaleCache) {
        log.debug({ err }, err.message);
        return { requeue: true };
      }
      const c = classifyNeutronError(err);
      if (!c) throw err;
      // A converged Network stays Ready while Neutron is briefly unreachable (e.g. during a drift check).
      if (!(c.reason === ReasonNeutronUnavailable && readyThisGeneration(net) && p.actions.length === 0)) {
        const changed = await writeStatus(net, p, { ready: false, reason: c.reason, message: c.message }, signal, order);
        if (changed || c.terminal) recorder.event(netRef, 'Warning', c.reason, c.message);
      }
      if (isOverlapError(err)) return { requeueAfter: Math.round(OVERLAP_RETRY_MS * (0.9 + 0.2 * random())) };
      if (err instanceof NeutronUnavailableError && err.retryAfterMs !== undefined) {
        return { requeueAfter: Math.min(RETRY_AFTER_MAX_MS, Math.max(RETRY_AFTER_MIN_MS, err.retryAfterMs)) };
      }
      throw c.terminal ? TerminalError.from(err) : err;
    }

    const described = subnets.map((s) => `${s.id} (${s.cidr}, gateway ${s.gateway_ip ?? 'none'})`).join(', ');
    const message = `Neutron network ${p.networkID ?? ''} with subnet${subnets.length > 1 ? 's' : ''} ${described}`;
    // Neutron has these changes whether or not the (fenced) status write below lands: say so first.
    if (p.actions.length > 0) recorder.event(netRef, 'Normal', ReasonSynced, `Synced with Neutron: ${p.actions.join('; ')}`);
    try {
      await writeStatus(net, p, { ready: true, reason: ReasonSynced, message }, signal, order);
    } catch (err) {
      // Gone while we worked: with our finalizer on it (the copy the server confirmed has it), so deleted without
      // finalize() (kubernetes#77988). Clean up by its UID on the requeue, whether or not the informer's delete says so.
      if (!isKubeNotFound(err) || !deps.bypassed || !hasFinalizer(net)) throw err;
      deps.bypassed.record(net);
      log.debug({ err }, 'the Network is gone (404) although it carries our finalizer; cleaning up its Neutron networks');
      return { requeue: true };
    }
    return nextCheck(uid);
  }
}

/**
 * Setup. Neutron settings come from --neutron-cloud-config / $NEUTRON_CLOUD_CONFIG and --neutron-cloud / $OS_CLOUD:
 *  - neither set → the controller does not start; one warning at startup says why (returns undefined);
 *  - set but unusable (file missing, cloud not found, fields missing) → an error log and a thrown Error: the manager
 *    exits non-zero at startup rather than run with Networks whose deletion would hang on the finalizer.
 * With only a cloud name, clouds.yaml is looked up as openstacksdk does ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
 * ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml). Neutron is not contacted at startup. Tests may hand it
 * a Neutron API instead (settings.neutron.client: a fault-injection double), so they run this same setup.
 */
export const networkControllerSetup: ControllerSetup = {
  name: networkControllerName,
  setup(mgr, { concurrency, neutron: settings }) {
    const log = mgr.logger.child({ controller: networkControllerName });
    const { cloudConfig, cloud, client } = settings ?? {};
    if (!cloudConfig && !cloud && !client) {
      log.warn('Network controller not started: no Neutron configuration (set --neutron-cloud-config or NEUTRON_CLOUD_CONFIG to a clouds.yaml, and --neutron-cloud or OS_CLOUD if it holds several clouds)');
      return undefined;
    }
    let neutron: NeutronNetworkAPI;
    if (client) {
      neutron = client; // a test's double (settings.neutron.client): everything below is what the binary runs
      log.info('Network controller using the Neutron API it was given (a test double)');
    } else {
      try {
        const cfg = loadCloudConfig({ ...(cloudConfig && { path: cloudConfig }), ...(cloud && { cloud }) });
        neutron = NeutronClient.fromCloud(cfg, { logger: log, userAgent: 'ts-controller-manager', registry: mgr.registry });
        log.info({ neutron: describeCloud(cfg) }, 'Network controller using Neutron');
      } catch (err) {
        const msg = `Network controller: unusable Neutron configuration: ${err instanceof Error ? err.message : String(err)}`;
        log.error({ neutronCloudConfig: cloudConfig, neutronCloud: cloud }, msg);
        throw new Error(msg, { cause: err });
      }
    }
    // Updates only when they need a reconcile (desired.ts needsReconcile: resyncs, spec, deletion; not our status).
    // Deletes that skipped finalize() (kubernetes#77988) are recorded by the builder's delete handler before it
    // enqueues the key, on a standby too; the controller's start enqueues what a standby recorded.
    const version = settings?.networkVersion ?? 'v1';
    const bypassed = new BypassedFinalizers<AnyNetwork>(FINALIZER);
    const builder = mgr.controller(networkControllerName)
      .for<AnyNetwork>(version === 'v2' ? networkV2Resource : networkResource, { update: needsReconcile, bypassedFinalizers: bypassed });
    // The gauge reads only metadata and the Ready condition, which both versions have.
    registerNetworksGauge(mgr.registry, { lister: builder.informer().lister() as Lister<Network>, active: () => mgr.controllersStarted() });
    const controller: Controller = builder
      // What the reconcile writes (gen rbac → config/rbac/role.yaml); Neutron is outside the cluster.
      .rbac(
        { resource: networkResource, verbs: ['patch'], why: 'finalizer add/remove' },
        { resource: networkResource, verbs: ['get'], why: 'a Network that left the cache with our finalizer: gone (clean up Neutron) or only out of this shard' },
        { resource: networkResource, subresource: 'status', verbs: ['patch'], why: 'the Ready condition and Neutron IDs' },
      )
      .withOptions(concurrency !== undefined ? { concurrency } : {})
      .complete(networkReconciler({
        version, networks: builder.informer().lister(), rest: mgr.client, neutron, recorder: mgr.recorderFor(`${networkControllerName}-controller`),
        ...(settings?.createSettleMs !== undefined && { createSettleMs: settings.createSettleMs }),
        ...(settings?.driftCheckMs !== undefined && { driftCheckMs: settings.driftCheckMs }),
        bypassed,
      }));
    return controller;
  },
};
