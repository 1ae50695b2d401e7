/**
 * Resource identity: which REST collection an informer lists and watches.
 *
 * A ResourceType names the collection by group/version/resource (the URL) and records kind (the objects' type) and
 * whether it is namespaced. The core group is the empty string and lives under `/api/v1`; every other group under
 * `/apis/<group>/<version>`.
 */

export interface ResourceType {
  /** API group; '' for the core group (pods, services, configmaps, …). */
  readonly group: string;
  readonly version: string;
  /** Lower-case plural used in URLs, e.g. 'deployments'. */
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

/** `v1` for the core group, `<group>/<version>` otherwise (the objects' apiVersion). */
export function apiVersionOf(r: ResourceType): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** A stable identifier `<resource>.<group>/<version>` (e.g. `deployments.apps/v1`, `pods/v1`), used in logs and keys. */
export function resourceId(r: ResourceType): string {
  return `${r.group ? `${r.resource}.${r.group}` : r.resource}/${r.version}`;
}

function groupVersionPrefix(r: ResourceType): string {
  return r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
}

/**
 * The collection path for list and watch. `namespace` undefined or '' means all namespaces; it is ignored (and
 * must not be given) for cluster-scoped resources.
 *
 *   collectionPath(pods, 'default')   → /api/v1/namespaces/default/pods
 *   collectionPath(deployments)       → /apis/apps/v1/deployments
 */
export function collectionPath(r: ResourceType, namespace?: string): string {
  if (namespace && !r.namespaced) throw new Error(`${resourceId(r)} is cluster-scoped; no namespace allowed`);
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${groupVersionPrefix(r)}${ns}/${r.resource}`;
}

/** The path of one object (for callers that need it; the informer itself only uses collections). */
export function objectPath(r: ResourceType, namespace: string | undefined, name: string): string {
  return `${collectionPath(r, r.namespaced ? namespace : undefined)}/${encodeURIComponent(name)}`;
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
