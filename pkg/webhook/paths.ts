/**
 * Webhook paths as kubebuilder generates them (controller-runtime's builder `generateMutatePath` /
 * `generateValidatePath`), so manifests made by kubebuilder markers or by hand match:
 *
 *   /mutate-<group with '.' replaced by '-'>-<version>-<kind lower-case>     e.g. /mutate-samplecrd-k8s-io-v1-network
 *   /validate-<group with '.' replaced by '-'>-<version>-<kind lower-case>   e.g. /validate-apps-v1-deployment
 *   /convert                                                                 every kind's conversion (one path)
 *
 * The core group is empty, which gives two dashes (`/validate--v1-pod`), exactly as controller-runtime.
 */

export interface GroupVersionKindLike {
  /** The API group ('' for the core group). */
  readonly group: string;
  /** The version, e.g. 'v1'. */
  readonly version: string;
  /** The kind, e.g. 'Guestbook'. */
  readonly kind: string;
}

function suffix(gvk: GroupVersionKindLike): string {
  return `${gvk.group.replaceAll('.', '-')}-${gvk.version}-${gvk.kind.toLowerCase()}`;
}

/** kubebuilder's path of the defaulting webhook of a type: `/mutate-<group with dots as dashes>-<version>-<kind lowercase>`. */
export function mutatePath(gvk: GroupVersionKindLike): string {
  return `/mutate-${suffix(gvk)}`;
}

/** kubebuilder's path of the validating webhook of a type: `/validate-<group with dots as dashes>-<version>-<kind lowercase>`. */
export function validatePath(gvk: GroupVersionKindLike): string {
  return `/validate-${suffix(gvk)}`;
}

/** kubebuilder's path of the conversion webhook (one for every kind). */
export const convertPath = '/convert';
