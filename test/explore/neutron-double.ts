/**
 * NeutronDouble — a FAULT-INJECTION DOUBLE of OpenStack Neutron's networks and subnets API (the calls of the Network
 * controller's NeutronNetworkAPI), in memory and deterministic. NOT Neutron: the controller's behaviour against the
 * real API is tested on a real neutron-server (test/network*.test.ts, test/neutron.test.ts). This double is for what a
 * real server cannot give: `explore` executions that must be repeatable (test/explore-shipped.test.ts: its
 * inventory() is the external state compared between executions), and unit tests that script failures
 * (pkg/controllers/network/controller.test.ts: failNext, seeded states).
 *
 * Semantics, as observed on neutron-server 21 "Zed" (../shared/notes/neutron.md); anything else is not modelled:
 *  - Networks: duplicate names allowed; `tags` set on create (what NeutronClient does in the POST or right after);
 *    addTag idempotent; listNetworks filters by id, name, tags (all), tagsAny, projectId; deleteNetwork deletes its
 *    subnets too (no ports exist here); an unknown id → 404 NetworkNotFound (getNetwork, deleteNetwork, addTag).
 *  - Subnets: createSubnet on an unknown network → 404; an unparsable CIDR → 400 InvalidInput; a CIDR overlapping
 *    another subnet of the same network (of any network with `overlappingIps: false`) → 400 "… overlaps with another
 *    subnet"; gateway_ip absent → the first address, null → none, given → taken as is (even outside the CIDR, as
 *    Neutron does); allocation_pools absent → Neutron's default around the gateway, given with the gateway inside one
 *    → 409 GatewayConflictWithAllocationPools. updateSubnet: `ifRevision` (If-Match) must equal revision_number, else
 *    412; a gateway inside the resulting pools → 409; every update bumps revision_number (tag changes do not here).
 *    listSubnets filters by networkId, name, cidr, tags, tagsAny, projectId; unknown id → 404 SubnetNotFound.
 *  - Every call is recorded in `ops` ("<call> <detail>"). A call whose AbortSignal is already aborted is refused
 *    with the signal's reason and changes nothing (as NeutronClient: nothing is sent) — recorded in `ops` and in
 *    `aborted`. A call applies its change when made and answers on a later turn of the event loop; if its signal
 *    aborted in between, it rejects with the reason and the change stays (a request cut off in flight: `cut`).
 *  - Identities are deterministic. With `ids: 'content'` (the default) they are named after what was created:
 *    `net:<name>#<k>` and `subnet:<name>:<cidr>#<k>`, k counting the creates of the same name, description (and CIDR)
 *    — so ids do not depend on the order Networks are reconciled in, nor on how many intermediate states a
 *    controller acted on (a CIDR it never saw made no subnet), while a duplicate create is another k (the smallest
 *    free one). A workload that comes back to an earlier CIDR of a Network makes a second create of that CIDR, which a
 *    controller that never saw the change in between does not: ids then differ legitimately. With `ids: 'sequence'`,
 *    `id-<n>` from one counter (unit tests). created_at comes from one counter (a logical clock: only its order
 *    means anything).
 *  - projectId() is `project` (undefined: noauth, where the server picks `fake_project_id` for creates).
 */
import type { NeutronNetworkAPI } from '../../pkg/controllers/network/controller.ts';
import { formatIP, generatePools, overlaps, parseCIDR, parseIP, type IPRange } from '../../pkg/controllers/network/ipnet.ts';
import type { WorldPoints } from '../../pkg/testing/index.ts';
import {
  errorForStatus, NeutronUnavailableError, type CallOptions, type Network, type NetworkCreate, type NetworkFilter, type Subnet, type SubnetCreate,
  type SubnetFilter, type SubnetUpdate, type TaggableResource, type UpdateOptions,
} from '../../pkg/neutron/index.ts';

/** The calls of NeutronNetworkAPI. */
export type NeutronOp = keyof NeutronNetworkAPI;

/** The calls that change Neutron (plan points under explore). */
const writes: ReadonlySet<NeutronOp> = new Set<NeutronOp>(['createNetwork', 'deleteNetwork', 'addTag', 'createSubnet', 'updateSubnet', 'deleteSubnet']);

/** What NeutronClient reports when a request's answer is lost: a 500, or its own per-request timeout. */
const lostAnswer = {
  error: (): Error => new NeutronUnavailableError({ status: 500, type: 'HTTP500', message: 'Internal Server Error (injected after the request was applied)' }),
  timeout: (): Error => new NeutronUnavailableError({ status: 0, type: 'Timeout', message: 'request timed out (injected after the request was applied)' }),
};

/** Options of NeutronDouble. */
export interface NeutronDoubleOptions {
  /** How ids are made (see the file comment); default 'content'. */
  ids?: 'content' | 'sequence';
  /** Neutron's allow_overlapping_ips (default true, as test/helpers/neutron.ts; false is Neutron's own default). */
  overlappingIps?: boolean;
  /**
   * explore's plan points (ExploreOptions.world's argument): every write (create, delete, tag, update) goes through
   * them, so explore crashes the manager right before or after it, or answers it 500 / with a timeout after it was
   * applied (NeutronUnavailableError, as NeutronClient reports both).
   */
  points?: WorldPoints;
}

/** A subnet as inventory() shows it. */
export interface SubnetInventory {
  id: string;
  name: string;
  description: string;
  cidr: string;
  gateway: string | null;
  pools: IPRange[];
  tags: string[];
}

/** A network and its subnets as inventory() shows them. */
export interface NetworkInventory {
  id: string;
  name: string;
  description: string;
  project: string;
  tags: string[];
  subnets: SubnetInventory[];
}

const DEFAULT_PROJECT = 'fake_project_id';

export class NeutronDouble implements NeutronNetworkAPI {
  /** The networks by id (tests may seed or inspect them; addNetwork seeds). */
  readonly networks = new Map<string, Network>();
  /** The subnets by id (addSubnet seeds). */
  readonly subnets = new Map<string, Subnet>();
  /** Every call, in order: "<call> <detail>" (projectId() is not a Neutron request and is not recorded). */
  readonly ops: string[] = [];
  /** The calls refused because their signal was already aborted (also in `ops`). */
  readonly aborted: string[] = [];
  /** The calls applied whose signal aborted before their answer (the change stays; the caller saw the reason). */
  readonly cut: string[] = [];
  /** Every call's signal, in order. */
  readonly signals: { op: NeutronOp; signal: AbortSignal | undefined }[] = [];
  /** The project of the credentials (projectId()); undefined = noauth. */
  project: string | undefined;
  private readonly idScheme: 'content' | 'sequence';
  private readonly overlappingIps: boolean;
  private clock = 0;
  /** Creates per content key (ids: 'content'). */
  private readonly creates = new Map<string, number>();
  private readonly failures = new Map<NeutronOp, (Error | undefined)[]>();
  private readonly points: WorldPoints | undefined;

  constructor(opts: NeutronDoubleOptions = {}) {
    this.idScheme = opts.ids ?? 'content';
    this.overlappingIps = opts.overlappingIps ?? true;
    this.points = opts.points;
  }

  /** The next calls of `op` fail with these errors in order, changing nothing (undefined: that call succeeds). */
  failNext(op: NeutronOp, ...errors: (Error | undefined)[]): void {
    this.failures.set(op, [...(this.failures.get(op) ?? []), ...errors]);
  }

  /** Seeds a network (no validation, no call recorded). */
  addNetwork(over: Partial<Network> = {}): Network {
    const n: Network = {
      ...this.identity(`net:${over.name ?? ''}`, over.description ?? ''), name: '', description: '', project_id: DEFAULT_PROJECT, admin_state_up: true, status: 'ACTIVE',
      shared: false, subnets: [], tags: [], revision_number: 1, ...over,
    };
    this.networks.set(n.id, n);
    return n;
  }

  /** Seeds a subnet on `networkId` (no validation, no call recorded); pools default to Neutron's around the gateway. */
  addSubnet(networkId: string, cidr: string, gateway: string | null, over: Partial<Subnet> = {}): Subnet {
    const c = parseCIDR(cidr);
    const s: Subnet = {
      ...this.identity(`subnet:${over.name ?? ''}:${cidr}`, over.description ?? ''), name: '', description: '', network_id: networkId, project_id: DEFAULT_PROJECT, cidr,
      gateway_ip: gateway, ip_version: c?.version ?? (cidr.includes(':') ? 6 : 4), allocation_pools: [], enable_dhcp: true,
      dns_nameservers: [], host_routes: [], tags: [], revision_number: 1, ...over,
    };
    if (over.allocation_pools === undefined && c) s.allocation_pools = generatePools(c, gateway ? parseIP(gateway) : undefined);
    this.subnets.set(s.id, s);
    this.networks.get(networkId)?.subnets.push(s.id);
    return s;
  }

  /**
   * The external state: every network with its subnets, by id — name, description, project, tags, CIDR, gateway,
   * pools (not revisions, timestamps or status: they count requests, not what exists).
   */
  inventory(): NetworkInventory[] {
    const subnetsOf = (id: string): SubnetInventory[] => [...this.subnets.values()].filter((s) => s.network_id === id)
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((s) => ({ id: s.id, name: s.name, description: s.description, cidr: s.cidr, gateway: s.gateway_ip, pools: s.allocation_pools, tags: [...s.tags].sort() }));
    return [...this.networks.values()].sort((a, b) => a.id.localeCompare(b.id)).map((n) => ({
      id: n.id, name: n.name, description: n.description, project: n.project_id, tags: [...n.tags].sort(), subnets: subnetsOf(n.id),
    }));
  }

  projectId(signal?: AbortSignal): Promise<string | undefined> {
    return this.call('projectId', undefined, signal, () => this.project);
  }

  listNetworks(f: NetworkFilter = {}, o?: CallOptions): Promise<Network[]> {
    return this.call('listNetworks', f.tags ? `tags=${f.tags.join(',')}` : `name=${f.name ?? ''}`, o?.signal, () => [...this.networks.values()]
      .filter((n) => (f.id === undefined || n.id === f.id) && (f.name === undefined || n.name === f.name) && (f.projectId === undefined || n.project_id === f.projectId)
        && (f.tags ?? []).every((t) => n.tags.includes(t)) && (f.tagsAny === undefined || f.tagsAny.some((t) => n.tags.includes(t))))
      .map((n) => structuredClone(n)));
  }

  getNetwork(id: string, o?: CallOptions): Promise<Network> {
    return this.call('getNetwork', id, o?.signal, () => structuredClone(this.network(id)));
  }

  createNetwork(spec: NetworkCreate, o?: CallOptions): Promise<Network> {
    return this.call('createNetwork', spec.name ?? '', o?.signal, () => structuredClone(this.addNetwork({
      name: spec.name ?? '', description: spec.description ?? '', tags: [...new Set(spec.tags ?? [])], project_id: spec.project_id ?? this.project ?? DEFAULT_PROJECT,
      ...(spec.admin_state_up !== undefined && { admin_state_up: spec.admin_state_up }), ...(spec.shared !== undefined && { shared: spec.shared }),
    })));
  }

  deleteNetwork(id: string, o?: CallOptions): Promise<void> {
    return this.call('deleteNetwork', id, o?.signal, () => {
      this.network(id);
      this.networks.delete(id);
      for (const [sid, s] of this.subnets) if (s.network_id === id) this.subnets.delete(sid);
    });
  }

  addTag(resource: TaggableResource, id: string, tag: string, o?: CallOptions): Promise<void> {
    return this.call('addTag', `${resource}/${id}`, o?.signal, () => {
      const r = resource === 'networks' ? this.network(id) : this.subnet(id);
      if (!r.tags.includes(tag)) r.tags.push(tag);
    });
  }

  listSubnets(f: SubnetFilter = {}, o?: CallOptions): Promise<Subnet[]> {
    return this.call('listSubnets', f.networkId ?? '', o?.signal, () => [...this.subnets.values()]
      .filter((s) => (f.networkId === undefined || s.network_id === f.networkId) && (f.name === undefined || s.name === f.name)
        && (f.cidr === undefined || s.cidr === f.cidr) && (f.projectId === undefined || s.project_id === f.projectId)
        && (f.tags ?? []).every((t) => s.tags.includes(t)) && (f.tagsAny === undefined || f.tagsAny.some((t) => s.tags.includes(t))))
      .map((s) => structuredClone(s)));
  }

  createSubnet(spec: SubnetCreate, o?: CallOptions): Promise<Subnet> {
    return this.call('createSubnet', spec.cidr, o?.signal, () => {
      const network = this.network(spec.network_id);
      const c = parseCIDR(spec.cidr);
      if (!c) throw errorForStatus({ status: 400, type: 'InvalidInput', message: `Invalid input for cidr. Reason: '${spec.cidr}' is not a valid IP subnet.` });
      for (const other of this.subnets.values()) {
        const oc = parseCIDR(other.cidr);
        if ((this.overlappingIps ? other.network_id === network.id : true) && oc && overlaps(c, oc)) {
          throw errorForStatus({ status: 400, type: 'InvalidInput', message: `Invalid input for operation: Requested subnet with cidr: ${spec.cidr} for network: ${network.id} overlaps with another subnet.` });
        }
      }
      const gateway = spec.gateway_ip === undefined ? formatIP({ version: c.version, value: c.network + 1n }) : spec.gateway_ip;
      const pools = spec.allocation_pools ?? generatePools(c, gateway ? parseIP(gateway) : undefined);
      this.checkGateway(gateway, pools);
      return structuredClone(this.addSubnet(network.id, spec.cidr, gateway, {
        name: spec.name ?? '', description: spec.description ?? '', tags: [...new Set(spec.tags ?? [])], ip_version: spec.ip_version ?? c.version,
        allocation_pools: structuredClone(pools), project_id: spec.project_id ?? this.project ?? DEFAULT_PROJECT,
        ...(spec.enable_dhcp !== undefined && { enable_dhcp: spec.enable_dhcp }), ...(spec.dns_nameservers && { dns_nameservers: spec.dns_nameservers }),
      }));
    });
  }

  updateSubnet(id: string, patch: SubnetUpdate, o?: UpdateOptions): Promise<Subnet> {
    const detail = `${id} ${JSON.stringify(patch)}${o?.ifRevision !== undefined ? ` if-match=${o.ifRevision}` : ''}`;
    return this.call('updateSubnet', detail, o?.signal, () => {
      const s = this.subnet(id);
      if (o?.ifRevision !== undefined && o.ifRevision !== s.revision_number) {
        throw errorForStatus({ status: 412, type: 'HTTP412', message: 'Constraint revision_number failed' });
      }
      const next = { ...s, ...structuredClone(patch) };
      if (patch.gateway_ip !== undefined || patch.allocation_pools !== undefined) this.checkGateway(next.gateway_ip, next.allocation_pools);
      Object.assign(s, next, { revision_number: s.revision_number + 1 });
      return structuredClone(s);
    });
  }

  deleteSubnet(id: string, o?: CallOptions): Promise<void> {
    return this.call('deleteSubnet', id, o?.signal, () => {
      const s = this.subnet(id);
      this.subnets.delete(id);
      const n = this.networks.get(s.network_id);
      if (n) n.subnets = n.subnets.filter((x) => x !== id);
    });
  }

  /**
   * One call: refused with the signal's reason when already aborted; else a scripted failure (failNext) or `apply`,
   * now; answered on a later turn of the event loop (with the reason if the signal aborted in between).
   */
  private call<T>(op: NeutronOp, detail: string | undefined, signal: AbortSignal | undefined, apply: () => T): Promise<T> {
    const line = detail === undefined ? undefined : `${op} ${detail}`;
    if (line !== undefined) this.ops.push(line);
    this.signals.push({ op, signal });
    if (signal?.aborted) {
      this.aborted.push(line ?? op);
      return Promise.reject(signal.reason as Error);
    }
    let outcome: { ok: T } | { err: Error };
    try {
      const scripted = this.failures.get(op)?.shift();
      if (scripted) throw scripted;
      const points = this.points;
      outcome = { ok: points && line !== undefined && writes.has(op) ? points.write(line, apply, lostAnswer) : apply() };
    } catch (err) {
      outcome = { err: err instanceof Error ? err : new Error(String(err)) };
    }
    return new Promise<T>((resolve, reject) => setImmediate(() => {
      if (signal?.aborted) {
        this.cut.push(line ?? op);
        reject(signal.reason as Error); // the caller's reason, unchanged (as NeutronClient)
      } else if ('ok' in outcome) resolve(outcome.ok);
      else reject(outcome.err);
    }));
  }

  private checkGateway(gateway: string | null, pools: readonly IPRange[]): void {
    const g = gateway ? parseIP(gateway) : undefined;
    if (!g) return;
    for (const p of pools) {
      const start = parseIP(p.start);
      const end = parseIP(p.end);
      if (start && end && start.version === g.version && g.value >= start.value && g.value <= end.value) {
        throw errorForStatus({ status: 409, type: 'GatewayConflictWithAllocationPools', message: `Gateway ip ${gateway ?? ''} conflicts with allocation pool ${p.start}-${p.end}.` });
      }
    }
  }

  private network(id: string): Network {
    const n = this.networks.get(id);
    if (!n) throw errorForStatus({ status: 404, type: 'NetworkNotFound', message: `Network ${id} could not be found.` });
    return n;
  }

  private subnet(id: string): Subnet {
    const s = this.subnets.get(id);
    if (!s) throw errorForStatus({ status: 404, type: 'SubnetNotFound', message: `Subnet ${id} could not be found.` });
    return s;
  }

  /** A new id and created_at: `<shown>#<k>` (k: the creates of `shown` with this `hidden` part, then the first free). */
  private identity(shown: string, hidden: string): { id: string; created_at: string } {
    const created_at = this.stamp();
    if (this.idScheme === 'sequence') return { id: `id-${this.clock}`, created_at };
    const key = `${shown}\n${hidden}`;
    let k = (this.creates.get(key) ?? 0) + 1;
    this.creates.set(key, k);
    while (this.networks.has(`${shown}#${k}`) || this.subnets.has(`${shown}#${k}`)) k++;
    return { id: `${shown}#${k}`, created_at };
  }

  /** The logical clock as a timestamp (2024-01-01 plus that many seconds). */
  private stamp(): string {
    this.clock++;
    return new Date(Date.UTC(2024, 0, 1) + this.clock * 1000).toISOString().replace(/\.000Z$/, 'Z');
  }
}
