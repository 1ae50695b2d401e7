/**
 * Resource identity: which REST collection a client reads and writes and an informer lists and watches.
 *
 * A ResourceType names the collection by group/version/resource (the URL) and records kind (the objects' type) and
 * whether it is namespaced. The core group is the empty string and lives under `/api/v1`; every other group under
 * `/apis/<group>/<version>` (paths.ts).
 *
 * Invariant: a ResourceType is a plain immutable value; two with equal group/version/resource name the same
 * collection (`resourceId` is the key for maps and logs).
 */

export interface ResourceType {
  /** API group; '' for the core group (pods, services, configmaps, …). */
  readonly group: string;
  /** API version, e.g. 'v1'. */
  readonly version: string;
  /** Lower-case plural used in URLs, e.g. 'deployments'. */
  readonly resource: string;
  /** The objects' kind, e.g. 'Deployment'. */
  readonly kind: string;
  /** Whether its objects live in namespaces (false: cluster-scoped, e.g. Namespaces, Nodes, CRDs). */
  readonly namespaced: boolean;
}

/** `v1` for the core group, `<group>/<version>` otherwise (the objects' apiVersion). */
export function apiVersionOf(r: ResourceType): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** The API group of an apiVersion ("apps/v1" → "apps", "v1" → ""). */
export function apiGroupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

/** A stable identifier `<resource>.<group>/<version>` (e.g. `deployments.apps/v1`, `pods/v1`), used in logs and keys. */
export function resourceId(r: ResourceType): string {
  return `${r.group ? `${r.resource}.${r.group}` : r.resource}/${r.version}`;
}

/** A few built-in resource types the controllers of this project use. */
export const coreResources = {
  pods: { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true },
  services: { group: '', version: 'v1', resource: 'services', kind: 'Service', namespaced: true },
  configMaps: { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true },
  secrets: { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true },
  events: { group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
  namespaces: { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false },
  nodes: { group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false },
  deployments: { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true },
  replicaSets: { group: 'apps', version: 'v1', resource: 'replicasets', kind: 'ReplicaSet', namespaced: true },
  leases: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true },
} as const satisfies Record<string, ResourceType>;
