/**
 * API paths: the REST URL path of a collection and of one object of a ResourceType, as the API server serves them
 * (`/api/v1/…` for the core group, `/apis/<group>/<version>/…` otherwise; `/namespaces/<ns>` for namespaced ones).
 *
 * Invariant: a path never carries a namespace for a cluster-scoped type (collectionPath throws if asked to), and
 * every namespace and name segment is URI-encoded.
 */
import { resourceId, type ResourceType } from './resource.ts';

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
