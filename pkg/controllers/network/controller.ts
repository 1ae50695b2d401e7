/**
 * Network controller: a samplecrd.k8s.io/v1 Network is kept in sync with one OpenStack Neutron network and one subnet
 * (spec.cidr, spec.gateway). An external resource, so:
 *
 *   Network informer ──add / update (needsReconcile) / delete──▶ queue "ns/name" ──▶ reconcile (below) ──▶ Neutron
 *                                                                                                     └─▶ finalizer, /status, Events
 *
 *  - Identity: Neutron allows duplicate names, so the network and subnet carry the tag `k8s-uid:<uid>`, and the
 *    network also a description naming the UID (for a create whose tagging never happened). They are always looked up
 *    (name + description/tag, else tag) before anything is created: a retry after a crash or a timed-out POST finds
 *    them. Surplus networks (and subnets of another CIDR or duplicates) are deleted.
 *  - The finalizer is added (merge patch guarded by resourceVersion) before anything is created in Neutron; deletion
 *    deletes the Neutron network (subnets go with it; 404 = already gone), then removes the finalizer. Deletions that
 *    happened while the manager was down are seen as deletionTimestamp in the initial list.
 *  - Updates: a gateway change is done in place (with the allocation pools moved around it); a CIDR change deletes
 *    the old subnet, then creates the new one (Neutron refuses overlapping subnets on one network).
 *  - Errors: an invalid spec or a Neutron 400 → Ready=False (InvalidSpec / NeutronRejected), one Warning Event,
 *    TerminalError, and no Neutron call again for that generation (the status records it, so also across restarts).
 *    Neutron unavailable (5xx, 429, timeouts, connection errors), 409s, auth failures → Ready=False with the reason, a
 *    Warning when the condition changes, and a plain error: the work queue retries with per-key exponential backoff.
 *  - Reads come only from the lister; Neutron is queried only inside a reconcile; status is written only when it
 *    differs. Per-request timeouts come from the Neutron client (10 s).
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Network } from '../../apis/samplecrd/v1/types.ts';
import { isNotFound as isKubeNotFound, type RestClient } from '../../client/rest.ts';
import { Controller, TerminalError, type Reconciler } from '../../controller/index.ts';
import type { Recorder } from '../../events/recorder.ts';
import type { Lister } from '../../informerfactory/lister.ts';
import { deletionHandlingKey, metaNamespaceKey } from '../../informerfactory/object.ts';
import { objectPath } from '../../informerfactory/resource.ts';
import type { Logger } from '../../log/logger.ts';
import {
  describeCloud, isNotFound, loadCloudConfig, NeutronAuthError, NeutronBadRequestError, NeutronClient, NeutronConflictError,
  NeutronError, NeutronUnavailableError, type Network as NeutronNetwork, type Subnet,
} from '../../neutron/index.ts';
import { addPriority, updatePriority } from '../../controller/priority.ts';
import type { ControllerSetup } from '../setup.ts';
import {
  computeStatus, FINALIZER, hasFinalizer, needsReconcile, networkRef, networkResource, neutronDescription, neutronName, readyThisGeneration,
  ReasonDeleted, ReasonDeleteFailed, ReasonInvalidSpec, ReasonNeutronAuthFailed, ReasonNeutronConflict, ReasonNeutronError,
  ReasonNeutronRejected, ReasonNeutronUnavailable, ReasonSynced, rejectedThisGeneration, statusEqual, statusPatch, uidTag,
  validateSpec, type DesiredSubnet, type Observation,
} from './desired.ts';
import { generatePools, parseCIDR, sameCIDR, sameIP } from './ipnet.ts';

export const networkControllerName = 'network';
const mergePatch = 'application/merge-patch+json';

/** The Neutron calls the controller makes (NeutronClient; a fake in unit tests). */
export type NeutronNetworkAPI = Pick<NeutronClient,
  'listNetworks' | 'createNetwork' | 'deleteNetwork' | 'addTag' | 'listSubnets' | 'createSubnet' | 'updateSubnet' | 'deleteSubnet'>;

export interface NetworkReconcilerDeps {
  networks: Lister<Network>;
  rest: Pick<RestClient, 'json'>;
  neutron: NeutronNetworkAPI;
  recorder: Recorder;
  now?: () => Date;
  /**
   * FAULT INJECTION for tests only (TSCM_TEST_NETWORK_PAUSE_AFTER_CREATE_MS): after a reconcile created something in
   * Neutron, wait this long before writing status, so a test can kill the manager inside that window.
   */
  pauseAfterCreateMs?: number;
}

interface Progress {
  networkID: string | undefined;
  subnetID: string | undefined;
  /** What this reconcile changed in Neutron (for the Event and the log). */
  actions: string[];
  created: boolean;
}

/** How a Neutron failure is reported; `terminal` failures are not retried for the same generation. */
export function classifyNeutronError(err: unknown): { reason: string; message: string; terminal: boolean } | undefined {
  if (err instanceof NeutronBadRequestError) return { reason: ReasonNeutronRejected, message: `Neutron rejected the request: ${err.serverMessage}`, terminal: true };
  if (err instanceof NeutronUnavailableError) return { reason: ReasonNeutronUnavailable, message: `Neutron is unavailable (${err.type}); retrying with backoff`, terminal: false };
  if (err instanceof NeutronConflictError) return { reason: ReasonNeutronConflict, message: `Neutron: ${err.type}: ${err.serverMessage}; retrying with backoff`, terminal: false };
  if (err instanceof NeutronAuthError) return { reason: ReasonNeutronAuthFailed, message: `Neutron authentication failed (HTTP ${err.status}); retrying with backoff`, terminal: false };
  if (err instanceof NeutronError) return { reason: ReasonNeutronError, message: `Neutron: ${err.message}; retrying with backoff`, terminal: false };
  return undefined;
}

/** The one to keep among duplicates first: the id in status, then tagged ones, then the oldest (created_at, id). */
function byKeepOrder<T extends { id: string; created_at?: string; tags: string[] }>(items: T[], preferredId: string | undefined, tag: string): T[] {
  const rank = (x: T): number => (x.id === preferredId ? 0 : x.tags.includes(tag) ? 1 : 2);
  return [...items].sort((a, b) => rank(a) - rank(b) || (a.created_at ?? '').localeCompare(b.created_at ?? '') || a.id.localeCompare(b.id));
}

export function networkReconciler(deps: NetworkReconcilerDeps): Reconciler {
  const { networks, rest, neutron, recorder } = deps;
  const now = deps.now ?? ((): Date => new Date());

  const statusPath = (net: Network): string => `${objectPath(networkResource, net.metadata?.namespace, net.metadata?.name ?? '')}/status`;

  /** Writes the status for an observation if it differs from the cached one; true when written. */
  async function writeStatus(net: Network, o: Observation, signal: AbortSignal): Promise<boolean> {
    const status = computeStatus(net, o, now());
    if (statusEqual(net.status, status)) return false;
    await rest.json('PATCH', statusPath(net), { body: statusPatch(net, status), contentType: mergePatch, signal });
    return true;
  }

  /** Sets or clears our finalizer; the resourceVersion makes a concurrent change fail (409) instead of being lost. */
  async function patchFinalizers(net: Network, finalizers: string[], signal: AbortSignal): Promise<void> {
    await rest.json('PATCH', objectPath(networkResource, net.metadata?.namespace, net.metadata?.name ?? ''), {
      body: { metadata: { finalizers, resourceVersion: net.metadata?.resourceVersion } }, contentType: mergePatch, signal,
    });
  }

  /**
   * The Neutron networks of this Network: tagged with its UID, or untagged with its name and description (a create
   * whose tagging never happened: Neutron Zed tags after the POST, so a timed-out POST or a crash in between leaves
   * one, and a timed-out POST may even commit after the retry created another). One name query finds both kinds in the
   * common case; the tag query runs when it found no tagged one (a network renamed in Neutron), or always with `all`.
   */
  async function findNetworks(net: Network, signal: AbortSignal, all = false): Promise<NeutronNetwork[]> {
    const uid = net.metadata?.uid ?? '';
    const tag = uidTag(uid);
    const named = (await neutron.listNetworks({ name: neutronName(net) }, { signal }))
      .filter((n) => n.tags.includes(tag) || n.description === neutronDescription(uid));
    if (!all && named.some((n) => n.tags.includes(tag))) return named;
    const tagged = await neutron.listNetworks({ tags: [tag] }, { signal });
    return [...tagged, ...named.filter((n) => !tagged.some((t) => t.id === n.id))];
  }

  async function ensureNetwork(net: Network, p: Progress, signal: AbortSignal, log: Logger): Promise<NeutronNetwork> {
    const tag = uidTag(net.metadata?.uid ?? '');
    const [keep, ...surplus] = byKeepOrder(await findNetworks(net, signal), net.status?.networkID, tag);
    for (const dup of surplus) {
      log.warn({ neutronNetwork: dup.id }, 'Deleting a duplicate Neutron network');
      await neutron.deleteNetwork(dup.id, { signal }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
      p.actions.push(`deleted duplicate network ${dup.id}`);
    }
    if (keep && !keep.tags.includes(tag)) {
      await neutron.addTag('networks', keep.id, tag, { signal });
      p.actions.push(`adopted untagged network ${keep.id}`);
    }
    if (keep) return keep;
    const created = await neutron.createNetwork({ name: neutronName(net), description: neutronDescription(net.metadata?.uid ?? '') }, { signal });
    p.created = true;
    p.actions.push(`created network ${created.id}`);
    log.info({ neutronNetwork: created.id }, 'Created Neutron network');
    // Tagged in a second call (Neutron Zed has no tags in POST anyway): if tagging fails, the next attempt adopts the
    // network by name + description.
    await neutron.addTag('networks', created.id, tag, { signal });
    return { ...created, tags: [...created.tags, tag] };
  }

  async function ensureSubnet(net: Network, network: NeutronNetwork, d: DesiredSubnet, p: Progress, signal: AbortSignal, log: Logger): Promise<Subnet> {
    const tag = uidTag(net.metadata?.uid ?? '');
    const subnets = network.subnets.length > 0 ? await neutron.listSubnets({ networkId: network.id }, { signal }) : [];
    const matching = subnets.filter((s) => {
      const c = parseCIDR(s.cidr);
      return c !== undefined && sameCIDR(c, d.cidr);
    });
    const [keep] = byKeepOrder(matching, net.status?.subnetID, tag);
    for (const s of subnets.filter((x) => x !== keep)) {
      log.info({ neutronSubnet: s.id, cidr: s.cidr }, 'Deleting Neutron subnet');
      await neutron.deleteSubnet(s.id, { signal }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
      p.actions.push(`deleted subnet ${s.id} (${s.cidr})`);
    }
    p.subnetID = keep?.id;
    if (!keep) {
      const created = await neutron.createSubnet({
        network_id: network.id, cidr: d.cidrText, ip_version: d.cidr.version, name: neutronName(net),
        ...(d.gatewayText !== undefined && { gateway_ip: d.gatewayText }),
      }, { signal }).catch(async (err: unknown) => {
        // Neutron refuses overlapping subnets on one network: a 400 while a subnet exists now means an earlier,
        // timed-out create committed late — not a bad spec. Retry; the next attempt adopts that subnet.
        if (err instanceof NeutronBadRequestError && (await neutron.listSubnets({ networkId: network.id }, { signal })).length > 0) {
          throw new Error(`a subnet appeared on Neutron network ${network.id} while creating one (a late earlier create?); retrying`, { cause: err });
        }
        throw err;
      });
      p.created = true;
      p.actions.push(`created subnet ${created.id} (${created.cidr}, gateway ${created.gateway_ip ?? 'none'})`);
      log.info({ neutronSubnet: created.id, cidr: created.cidr }, 'Created Neutron subnet');
      await neutron.addTag('subnets', created.id, tag, { signal }); // failing: tagged by the next attempt, which finds it by network
      return { ...created, tags: [...created.tags, tag] };
    }
    if (!keep.tags.includes(tag)) await neutron.addTag('subnets', keep.id, tag, { signal }); // a create whose tagging never happened
    if (d.gateway === undefined || sameIP(keep.gateway_ip, d.gatewayText)) return keep;
    const updated = await neutron.updateSubnet(keep.id, { gateway_ip: d.gatewayText ?? null, allocation_pools: generatePools(d.cidr, d.gateway) }, { signal });
    p.actions.push(`updated gateway of subnet ${keep.id} from ${keep.gateway_ip ?? 'none'} to ${updated.gateway_ip ?? 'none'}`);
    log.info({ neutronSubnet: keep.id, from: keep.gateway_ip, to: updated.gateway_ip }, 'Updated Neutron subnet gateway');
    return updated;
  }

  /** Deletion: Neutron network(s) first (subnets go with them), then the finalizer. */
  async function finalize(net: Network, signal: AbortSignal, log: Logger): Promise<void> {
    if (!hasFinalizer(net)) return;
    const deleted: string[] = [];
    for (const n of await findNetworks(net, signal, true)) {
      try {
        await neutron.deleteNetwork(n.id, { signal });
        deleted.push(n.id);
      } catch (err) {
        if (isNotFound(err)) continue;
        if (err instanceof NeutronConflictError) {
          recorder.event(networkRef(net), 'Warning', ReasonDeleteFailed, `Cannot delete Neutron network ${n.id}: ${err.type}: ${err.serverMessage}; retrying with backoff`);
        }
        throw err;
      }
    }
    if (deleted.length > 0) {
      log.info({ neutronNetworks: deleted }, 'Deleted Neutron network');
      recorder.event(networkRef(net), 'Normal', ReasonDeleted, `Deleted Neutron network ${deleted.join(', ')}`);
    }
    try {
      await patchFinalizers(net, (net.metadata?.finalizers ?? []).filter((f) => f !== FINALIZER), signal);
    } catch (err) {
      if (!isKubeNotFound(err)) throw err;
    }
  }

  return async ({ namespace, name }, signal, { log }) => {
    const net = networks.get(namespace, name);
    if (!net) return; // gone: our finalizer guarantees it went through finalize() first
    if (net.metadata?.deletionTimestamp) return finalize(net, signal, log);
    if (rejectedThisGeneration(net)) return; // already reported; retrying cannot help until the spec changes

    const ref = networkRef(net);
    const v = validateSpec(net.spec);
    if (!v.ok) {
      await writeStatus(net, { networkID: net.status?.networkID, subnetID: net.status?.subnetID, ready: false, reason: ReasonInvalidSpec, message: v.message }, signal);
      recorder.event(ref, 'Warning', ReasonInvalidSpec, v.message);
      throw new TerminalError(`invalid spec: ${v.message}`);
    }

    if (!hasFinalizer(net)) await patchFinalizers(net, [...(net.metadata?.finalizers ?? []), FINALIZER], signal);

    const p: Progress = { networkID: net.status?.networkID, subnetID: net.status?.subnetID, actions: [], created: false };
    let subnet: Subnet;
    try {
      const network = await ensureNetwork(net, p, signal, log);
      p.networkID = network.id;
      subnet = await ensureSubnet(net, network, v.desired, p, signal, log);
      p.subnetID = subnet.id;
    } catch (err) {
      const c = classifyNeutronError(err);
      if (p.actions.length > 0) log.info({ actions: p.actions }, 'Partially synced before the failure');
      if (!c) throw err;
      // A converged Network stays Ready while Neutron is briefly unreachable (e.g. during a resync's drift check).
      if (!(c.reason === ReasonNeutronUnavailable && readyThisGeneration(net) && p.actions.length === 0)) {
        const changed = await writeStatus(net, { networkID: p.networkID, subnetID: p.subnetID, ready: false, reason: c.reason, message: c.message }, signal);
        if (changed || c.terminal) recorder.event(ref, 'Warning', c.reason, c.message);
      }
      throw c.terminal ? TerminalError.from(err) : err;
    }

    if (p.created && deps.pauseAfterCreateMs) {
      log.warn({ ms: deps.pauseAfterCreateMs }, 'FAULT INJECTION: pausing between the Neutron create and the status write');
      await delay(deps.pauseAfterCreateMs, undefined, { signal });
    }
    const message = `Neutron network ${p.networkID} with subnet ${subnet.id} (${subnet.cidr}, gateway ${subnet.gateway_ip ?? 'none'})`;
    await writeStatus(net, { networkID: p.networkID, subnetID: p.subnetID, ready: true, reason: ReasonSynced, message }, signal);
    if (p.actions.length > 0) recorder.event(ref, 'Normal', ReasonSynced, `Synced with Neutron: ${p.actions.join('; ')}`);
  };
}

/** Test-only fault injection (see NetworkReconcilerDeps.pauseAfterCreateMs). */
export const PAUSE_AFTER_CREATE_ENV = 'TSCM_TEST_NETWORK_PAUSE_AFTER_CREATE_MS';

/**
 * Setup. Neutron settings come from --neutron-cloud-config / $NEUTRON_CLOUD_CONFIG and --neutron-cloud / $OS_CLOUD:
 *  - neither set → the controller does not start; one warning at startup says why (returns undefined);
 *  - set but unusable (file missing, cloud not found, fields missing) → an error log and a thrown Error: the manager
 *    exits non-zero at startup rather than run with Networks whose deletion would hang on the finalizer.
 * With only a cloud name, clouds.yaml is looked up as openstacksdk does ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
 * ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml). Neutron is not contacted at startup.
 */
export const networkControllerSetup: ControllerSetup = {
  name: networkControllerName,
  setup(ctx) {
    const log = ctx.logger.child({ controller: networkControllerName });
    const { cloudConfig, cloud } = ctx.neutron;
    if (!cloudConfig && !cloud) {
      log.warn('Network controller not started: no Neutron configuration (set --neutron-cloud-config or NEUTRON_CLOUD_CONFIG to a clouds.yaml, and --neutron-cloud or OS_CLOUD if it holds several clouds)');
      return Promise.resolve(undefined);
    }
    let neutron: NeutronClient;
    try {
      const cfg = loadCloudConfig({ ...(cloudConfig && { path: cloudConfig }), ...(cloud && { cloud }) });
      neutron = NeutronClient.fromCloud(cfg, { logger: log, userAgent: 'ts-controller-manager' });
      log.info({ neutron: describeCloud(cfg) }, 'Network controller using Neutron');
    } catch (err) {
      const msg = `Network controller: unusable Neutron configuration: ${err instanceof Error ? err.message : String(err)}`;
      log.error({ neutronCloudConfig: cloudConfig, neutronCloud: cloud }, msg);
      return Promise.reject(new Error(msg, { cause: err }));
    }
    const pauseRaw = process.env[PAUSE_AFTER_CREATE_ENV];
    const pauseAfterCreateMs = pauseRaw ? Number(pauseRaw) : 0;
    if (pauseAfterCreateMs > 0) log.warn({ [PAUSE_AFTER_CREATE_ENV]: pauseAfterCreateMs }, 'FAULT INJECTION enabled: test-only pause between Neutron creates and status writes');

    const informer = ctx.factory.informerFor<Network>(networkResource);
    const controller = new Controller({
      name: networkControllerName,
      reconciler: networkReconciler({
        networks: informer.lister(), rest: ctx.rest, neutron, recorder: ctx.recorder,
        ...(pauseAfterCreateMs > 0 && { pauseAfterCreateMs }),
      }),
      maxConcurrentReconciles: ctx.concurrency,
      logger: ctx.logger,
      registry: ctx.registry,
      gracefulShutdownTimeoutMs: ctx.gracefulShutdownTimeoutMs,
    });
    const reg = informer.addEventHandler({
      onAdd: (n, initial) => controller.enqueue(metaNamespaceKey(n), addPriority(initial)),
      onUpdate: (old, n) => {
        if (needsReconcile(old, n)) controller.enqueue(metaNamespaceKey(n), updatePriority(old, n));
      },
      onDelete: (n) => controller.enqueue(deletionHandlingKey(n)),
    });
    return Promise.resolve({ runnable: controller, syncedChecks: [() => reg.hasSynced()] });
  },
};
