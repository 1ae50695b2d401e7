/**
 * Reads CustomResourceDefinitions (apiextensions.k8s.io/v1) from YAML text: one entry per version with its
 * `schema.openAPIV3Schema`. Pure: the caller reads the files. Multi-document YAML is fine; documents of another kind
 * (a kustomization's other objects) are skipped; a file without any CRD, a v1beta1 CRD, a version without a schema or
 * a CRD kube-apiserver would refuse (structural.ts: the server's own message) is an error naming the file.
 */
import { loadAll } from 'js-yaml';
import type { JSONSchemaProps } from './schema.ts';
import { crdInvalidMessage, validateCRDSchemas } from './structural.ts';

/** One version of one CRD: everything the type generator needs. */
export interface CRDVersion {
  /** Where it came from (as given by the caller; recorded in the generated header). */
  source: string;
  group: string;
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  namespaced: boolean;
  served: boolean;
  storage: boolean;
  deprecated: boolean;
  deprecationWarning: string | undefined;
  schema: JSONSchemaProps;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function str(o: Obj, field: string, where: string): string {
  const v = o[field];
  if (typeof v !== 'string' || v === '') throw new Error(`${where}: ${field} must be a non-empty string`);
  return v;
}

/** Every version of every CRD in `text` (YAML, one or more documents), in document and version order. */
export function parseCRDs(text: string, source: string): CRDVersion[] {
  let docs: unknown[];
  try {
    docs = loadAll(text);
  } catch (err) {
    throw new Error(`${source}: not valid YAML: ${(err as Error).message.split('\n')[0] ?? ''}`, { cause: err });
  }
  const out: CRDVersion[] = [];
  docs.forEach((doc, i) => {
    if (!isObj(doc) || doc['kind'] !== 'CustomResourceDefinition') return;
    const where = `${source}: document ${i + 1}`;
    if (doc['apiVersion'] !== 'apiextensions.k8s.io/v1') {
      throw new Error(`${where}: apiVersion ${String(doc['apiVersion'])} is not supported (want apiextensions.k8s.io/v1)`);
    }
    const spec = doc['spec'];
    if (!isObj(spec)) throw new Error(`${where}: no spec`);
    const names = spec['names'];
    if (!isObj(names)) throw new Error(`${where}: no spec.names`);
    const group = str(spec, 'group', `${where}: spec`);
    const kind = str(names, 'kind', `${where}: spec.names`);
    const plural = str(names, 'plural', `${where}: spec.names`);
    const listKind = typeof names['listKind'] === 'string' && names['listKind'] !== '' ? names['listKind'] : `${kind}List`;
    const versions = spec['versions'];
    if (!Array.isArray(versions) || versions.length === 0) throw new Error(`${where}: no spec.versions`);
    const refused = validateCRDSchemas(doc);
    if (refused.length) {
      const name = isObj(doc['metadata']) && typeof doc['metadata']['name'] === 'string' ? doc['metadata']['name'] : '';
      throw new Error(`${where}: kube-apiserver would refuse this CRD: ${crdInvalidMessage(name, refused)}`);
    }
    for (const v of versions as unknown[]) {
      if (!isObj(v)) throw new Error(`${where}: spec.versions has a non-object entry`);
      const version = str(v, 'name', `${where}: spec.versions[]`);
      const schema = isObj(v['schema']) ? v['schema']['openAPIV3Schema'] : undefined;
      if (!isObj(schema)) throw new Error(`${where}: version ${version} has no schema.openAPIV3Schema`);
      out.push({
        source, group, version, kind, listKind, plural,
        namespaced: spec['scope'] !== 'Cluster',
        served: v['served'] === true,
        storage: v['storage'] === true,
        deprecated: v['deprecated'] === true,
        deprecationWarning: typeof v['deprecationWarning'] === 'string' ? v['deprecationWarning'] : undefined,
        schema,
      });
    }
  });
  if (out.length === 0) throw new Error(`${source}: no apiextensions.k8s.io/v1 CustomResourceDefinition found`);
  return out;
}
