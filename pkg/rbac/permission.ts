/**
 * What a manager's code needs of RBAC, as its setup declares it — the input of `gen rbac` (pkg/codegen/rbac.ts), which writes
 * the least-privilege role from it (kubebuilder's `+kubebuilder:rbac` markers, but declared in the code that makes
 * the calls, through the builder):
 *
 *   mgr.controller('guestbook')
 *     .for(guestbookResource)                  // → list, watch on guestbooks (its informer)
 *     .owns(coreResources.configMaps)          // → list, watch on configmaps; update on guestbooks/finalizers
 *     .rbac(                                   // → what the reconcile calls beyond its informers
 *       { resource: guestbookResource, verbs: ['get', 'patch'], why: 'finalizer add/remove' },
 *       { resource: guestbookResource, subresource: 'status', verbs: ['patch'], why: 'the Ready condition' },
 *       { resource: coreResources.configMaps, verbs: ['get', 'create', 'patch', 'delete'], why: 'createOrPatch, cleanup' })
 *     .complete(reconcile);
 *
 * What is derived, not declared: an informer (`for`, `owns`, `watches`, `mgr.informer(type)`) lists and watches its
 * type; `owns` sets blockOwnerDeletion through setControllerReference, which needs `update` on the primary's
 * `finalizers` subresource (the OwnerReferencesPermissionEnforcement admission plugin); `mgr.recorderFor` writes Events
 * (create, and patch for a repeat); leader election reads, creates, renews and watches its Lease. Writes are never
 * derived (an owned type is not necessarily created, updated, patched and deleted): `.rbac()` names each.
 *
 * Recording: every declaration is appended to the ledger of the ControllerManager (or other ControllerHost) it was
 * made on, a WeakMap keyed by that object, so recording costs nothing at run time and holds nothing alive. Only
 * `gen rbac` reads it, on a manager that is never started.
 */
import type { ResourceType } from '../apimachinery/resource.ts';

/** The verbs of a resource rule, in the order rules list them (any other verb, e.g. `escalate`, sorts after these). */
export const verbOrder = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'] as const;

/** A Kubernetes API verb of a resource rule. */
export type Verb = (typeof verbOrder)[number];

/**
 * A permission the code needs beyond what its informers imply (ControllerBuilder.rbac): on a resource type (its group
 * and plural), or a plural given as a string with `group`; optionally one `subresource`, and only some
 * `resourceNames`. `why` is the comment above the rule in the generated role.
 */
export interface Permission {
  /** The type (group and plural come from it), or the plural as a string (then `group`, default "" = core). */
  resource: Pick<ResourceType, 'group' | 'resource'> | string;
  /** The API group when `resource` is a string ("" = core, the default). */
  group?: string;
  /** A subresource: "status", "finalizers", "scale", … (the rule names `<resource>/<subresource>`). */
  subresource?: string;
  /** The verbs the code uses (`Verb`, or another such as "escalate"). */
  verbs: readonly string[];
  /** Only these objects (a rule with resourceNames: not for list, watch or create, which name no object). */
  resourceNames?: readonly string[];
  /** Why the code needs it; written as the rule's comment in the generated role. Default ".rbac()". */
  why?: string;
}

/** One declared need, normalized: who declared it, why, and the rule (one resource, its names, its verbs). */
export interface Contribution {
  /** The controller (its name), or the manager's part: an Event component, "leader election", "informers". */
  who: string;
  /** What in the code needs it ("for", "owns", "finalizer add/remove", …). */
  why: string;
  /** Controller rules first; manager-level ones (Events) after them in the generated role. */
  scope: 'controller' | 'manager';
  group: string;
  /** The plural, with "/<subresource>" for a subresource. */
  resource: string;
  resourceNames: readonly string[];
  verbs: readonly string[];
}

/** The informer verbs: what a reflector's LIST and WATCH need. */
export const informerVerbs: readonly Verb[] = ['list', 'watch'];

/**
 * A Permission as a Contribution of `who`. Throws on what RBAC cannot express: no verbs, an empty resource, a
 * subresource both in `resource` and `subresource`.
 */
export function contributionOf(p: Permission, who: string): Contribution {
  const named = typeof p.resource === 'string';
  const group = named ? (p.group ?? '') : (p.resource as Pick<ResourceType, 'group'>).group;
  const base = named ? (p.resource as string) : (p.resource as Pick<ResourceType, 'resource'>).resource;
  if (!base) throw new Error(`${who}: .rbac() needs a resource`);
  if (p.subresource !== undefined && base.includes('/')) throw new Error(`${who}: .rbac() resource ${JSON.stringify(base)} names a subresource already; drop subresource`);
  if (p.verbs.length === 0) throw new Error(`${who}: .rbac() on ${base} lists no verbs`);
  return {
    who, why: p.why ?? '.rbac()', scope: 'controller', group,
    resource: p.subresource ? `${base}/${p.subresource}` : base,
    resourceNames: [...(p.resourceNames ?? [])], verbs: [...p.verbs],
  };
}

const ledgers = new WeakMap<object, Contribution[]>();

/** Appends `c` to the ledger of `host` (the ControllerManager the declaration was made on). */
export function recordPermission(host: object, c: Contribution): void {
  let l = ledgers.get(host);
  if (!l) ledgers.set(host, (l = []));
  l.push(c);
}

/** Everything recorded on `host`, in declaration order. */
export function recordedPermissions(host: object): readonly Contribution[] {
  return ledgers.get(host) ?? [];
}

/** `verbs` deduplicated, in verbOrder (others after, alphabetically). */
export function sortVerbs(verbs: Iterable<string>): string[] {
  const rank = (v: string): number => {
    const i = (verbOrder as readonly string[]).indexOf(v);
    return i < 0 ? verbOrder.length : i;
  };
  return [...new Set(verbs)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/**
 * What leader election calls (pkg/manager/leaderelection.ts, RestLeaseClient): GET the Lease, POST it once, PUT to
 * renew or take over, and a standby WATCHes it (field-selected, no list). test/deploy.test.ts proves each verb needed.
 */
export const leaderElectionContributions: readonly Contribution[] = [{
  who: 'leader election', why: 'its Lease: read, created once, renewed, watched by a standby', scope: 'manager',
  group: 'coordination.k8s.io', resource: 'leases', resourceNames: [], verbs: ['get', 'create', 'update', 'watch'],
}];
