/** CRD manifests for the code generator's tests (pkg/codegen): YAML text, as a user's config/crd file holds it. */

export interface CRDManifestOptions {
  kind: string;
  /** The plural resource name; the CRD is named `<plural>.<group>`. */
  plural: string;
  /** Default `example.com`. */
  group?: string;
  /** Default `Namespaced`. */
  scope?: 'Namespaced' | 'Cluster';
  /** The top-level properties of the openAPIV3Schema (an object), one YAML line each, e.g. `kind: {type: string}`. */
  properties: string[];
}

/** An apiextensions.k8s.io/v1 CustomResourceDefinition with one version, `v1`, served and stored. */
export function crdManifest(o: CRDManifestOptions): string {
  const group = o.group ?? 'example.com';
  return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${o.plural}.${group}}
spec:
  group: ${group}
  scope: ${o.scope ?? 'Namespaced'}
  names: {kind: ${o.kind}, plural: ${o.plural}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
${o.properties.map((p) => `            ${p}\n`).join('')}`;
}
