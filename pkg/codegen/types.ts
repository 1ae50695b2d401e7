/**
 * CRD versions → one TypeScript file per API group/version (`<outDir>/<group's first label>/<version>/
 * zz_generated.types.ts`, kubebuilder's multi-group layout: samplecontroller.k8s.io/v1alpha1 →
 * samplecontroller/v1alpha1). Pure and deterministic: the same CRDs give byte-identical files whatever the order of
 * the inputs or of the keys in their YAML.
 *
 * Each file has, after a "Code generated … DO NOT EDIT." header naming its sources:
 *   group, version, apiVersion                        string constants of the group/version
 *   <kind>Kind, <kind>Plural, <kind>Resource          per kind ('foo' for Foo): the kind, the plural, and the
 *                                                     ResourceType informers, the builder and the client take
 *   interface <Kind> extends KubeObject               typed spec/status/… (apiVersion, kind, metadata from KubeObject)
 *   interface <ListKind>                              { apiVersion, kind, metadata (list metadata), items: <Kind>[] }
 *   the nested interfaces                             see schema.ts for the mapping
 * `KubeObject` and `ResourceType` are imported from `runtime`: the package name for a user's project, or (in this
 * repository) the path of its `pkg/` directory, imported relatively.
 */
import { posix } from 'node:path';
import type { CRDVersion } from './crd.ts';
import { objectMetaFields, renderDoc, SchemaEmitter } from './schema.ts';

export const generatedFileName = 'zz_generated.types.ts';
export const defaultRuntime = 'ts-controller-manager';

export interface GenerateOptions {
  /** Directory the group/version directories go under (posix path; relative paths are relative to the same base as `runtime`). */
  outDir: string;
  /**
   * Where `KubeObject` and `ResourceType` come from: `{ module }` a package imported as is (default
   * 'ts-controller-manager'); `{ pkgDir }` this project's `pkg/` directory (posix path, same base as `outDir`),
   * imported relatively from each file (`…/apimachinery/meta.ts`, `…/apimachinery/resource.ts`).
   */
  runtime?: { module: string } | { pkgDir: string };
}

export interface GeneratedFile {
  /** posix path: `<outDir>/<group dir>/<version>/zz_generated.types.ts`. */
  path: string;
  content: string;
}

/** `lowerCamel` of a kind for its constants: Foo → foo, DNSRecord → dnsRecord, URL → url. */
export function lowerCamel(kind: string): string {
  const m = /^[A-Z]+/.exec(kind);
  if (!m) return kind;
  const run = m[0];
  if (run.length === kind.length) return kind.toLowerCase();
  if (run.length === 1) return kind.charAt(0).toLowerCase() + kind.slice(1);
  return run.slice(0, -1).toLowerCase() + kind.slice(run.length - 1);
}

/** The directory of a group/version under `outDir`. */
export function groupVersionDir(outDir: string, group: string, version: string): string {
  return posix.join(outDir, group.split('.')[0] ?? group, version);
}

function importLines(dir: string, runtime: NonNullable<GenerateOptions['runtime']>): string {
  if ('module' in runtime) return `import type { KubeObject, ResourceType } from '${runtime.module}';\n`;
  const rel = (target: string): string => {
    const r = posix.relative(dir, posix.join(runtime.pkgDir, target));
    return r.startsWith('.') ? r : `./${r}`;
  };
  return `import type { KubeObject } from '${rel('apimachinery/meta.ts')}';\nimport type { ResourceType } from '${rel('apimachinery/resource.ts')}';\n`;
}

function renderKind(v: CRDVersion, emitter: SchemaEmitter): string {
  const c = lowerCamel(v.kind);
  const root = v.schema;
  let out = `// ${v.kind}\n\n`;
  out += `export const ${c}Kind = '${v.kind}';\nexport const ${c}Plural = '${v.plural}';\n`;
  out += `/** The ${v.plural}.${v.group}/${v.version} collection (${v.namespaced ? 'namespaced' : 'cluster-scoped'}). */\n`;
  out += `export const ${c}Resource: ResourceType = { group, version, resource: ${c}Plural, kind: ${c}Kind, namespaced: ${String(v.namespaced)} };\n\n`;

  const doc: string[] = root.description ? root.description.trim().split('\n').map((l) => l.trimEnd()) : [`${v.kind} (${v.group}/${v.version}).`];
  if (v.deprecated) doc.push('', `@deprecated ${v.deprecationWarning ?? `${v.group}/${v.version} ${v.kind} is deprecated`}`);
  const props = Object.keys(root.properties ?? {}).filter((p) => !objectMetaFields.has(p));
  const open = root['x-kubernetes-preserve-unknown-fields'] === true;
  if (props.length === 0 && !open) {
    out += `${renderDoc(doc, '')}export type ${v.kind} = KubeObject;\n\n`;
  } else {
    const body = emitter.members(root, v.kind, props, open);
    out += `${renderDoc(doc, '')}export interface ${v.kind} extends KubeObject {\n${body}}\n\n`;
  }
  out += `/** A list of ${v.kind} objects (what a LIST of ${v.plural} answers). */\n`;
  out += `export interface ${v.listKind} {\n  apiVersion?: string;\n  kind?: string;\n`;
  out += '  metadata: { resourceVersion?: string; continue?: string; remainingItemCount?: number };\n';
  out += `  items: ${v.kind}[];\n}\n`;
  return out;
}

function renderFile(versions: readonly CRDVersion[], dir: string, runtime: NonNullable<GenerateOptions['runtime']>): string {
  const first = versions[0];
  if (!first) throw new Error('renderFile: no versions');
  const { group, version } = first;
  const sources = [...new Set(versions.map((v) => v.source))].sort();
  const kinds = versions.map((v) => v.kind);
  let out = '// Code generated by `ts-controller-manager gen types`. DO NOT EDIT.\n';
  for (const s of sources) out += `// Source: ${s}\n`;
  out += '\n';
  out += `/** ${group}/${version}: ${kinds.join(', ')}, from the openAPIV3Schema of ${kinds.length > 1 ? 'their CRDs' : 'its CRD'}. */\n`;
  out += importLines(dir, runtime);
  out += `\nexport const group = '${group}';\nexport const version = '${version}';\nexport const apiVersion = '${group}/${version}';\n`;

  const emitter = new SchemaEmitter();
  for (const n of ['group', 'version', 'apiVersion', 'KubeObject', 'ResourceType']) emitter.reserve(n);
  for (const v of versions) {
    emitter.reserve(v.kind);
    emitter.reserve(v.listKind);
  }
  for (const v of versions) {
    out += `\n${renderKind(v, emitter)}`;
    // The kind's nested types right after it, parents before children.
    for (const d of emitter.declarations.splice(0)) out += `\n${d.text}`;
  }
  return out;
}

/** Generates one file per group/version of `versions` (see the file comment). */
export function generateTypes(versions: readonly CRDVersion[], opts: GenerateOptions): GeneratedFile[] {
  const runtime = opts.runtime ?? { module: defaultRuntime };
  const byDir = new Map<string, CRDVersion[]>();
  for (const v of versions) {
    const dir = groupVersionDir(opts.outDir, v.group, v.version);
    const list = byDir.get(dir) ?? [];
    const other = list.find((o) => o.group !== v.group);
    if (other) throw new Error(`groups ${other.group} and ${v.group} would both be generated into ${dir}`);
    if (list.some((o) => o.kind === v.kind)) throw new Error(`${v.kind} ${v.group}/${v.version} is defined twice (${v.source})`);
    list.push(v);
    byDir.set(dir, list);
  }
  return [...byDir.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([dir, list]) => ({
      path: posix.join(dir, generatedFileName),
      content: renderFile([...list].sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0)), dir, runtime),
    }));
}
