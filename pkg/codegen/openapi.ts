/**
 * Kubernetes' built-in API types from the API server's OpenAPI v3 documents (`/openapi/v3/api/v1`,
 * `/openapi/v3/apis/apps/v1`, …) → one type-only TypeScript file per Go API package, k8s.io/api's layout:
 *   io.k8s.api.<group>.<version>.X                                  → <outDir>/<group>/<version>/  (core, apps, rbac, …)
 *   io.k8s.apimachinery.pkg.apis.meta.v1.X                          → <outDir>/meta/v1/
 *   io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.X      → <outDir>/apiextensions/v1/
 *   io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.X            → <outDir>/apiregistration/v1/
 * Pure and deterministic: the same schemas give byte-identical files whatever the order of the documents or keys.
 *
 * Invariants:
 *  - The files contain only `import type`, `export interface` and `export type`: they compile to an empty module
 *    (zero runtime cost); a kind is a `KubeObject` structurally (apiVersion?, kind?, metadata?: ObjectMeta).
 *  - One definition of each core meta type: meta/v1's ObjectMeta, OwnerReference, LabelSelector,
 *    LabelSelectorRequirement and Condition (runtimeMetaTypes) are not generated; meta/v1's file imports them from the
 *    runtime (`runtime`: the package, or its sources' apimachinery/meta.ts) and re-exports them, so every package
 *    uses the types the runtime's functions take (pkg/codegen/metatypes.test.ts). Nothing else is imported from
 *    outside `<outDir>`.
 *  - Wire format, as the API server sends JSON: a schema whose own type is a primitive is inlined where it is
 *    used — meta/v1 Time and MicroTime → `string` (RFC 3339), intstr.IntOrString → `number | string`,
 *    resource.Quantity → `string` (the server always serializes a quantity as a string), runtime.RawExtension and
 *    other objects without properties → `Record<string, unknown>`, schemas without a type (apiextensions JSON) →
 *    `unknown`. A schema with properties becomes an interface of its own name, and every `$ref` to it (bare or as
 *    `allOf: [{ $ref }]`) names it, imported type-only from its package's file when that is another one.
 *  - A schema name found in several documents must have the same content in each (the lists of
 *    x-kubernetes-group-version-kind aside: DeleteOptions and WatchEvent list their document's group; their union
 *    is used); otherwise it is an error.
 * Members are sorted by name; required members are not optional; enum → union of literals; the description, format
 * and a non-trivial default (not `{}` or `""`, Go's zero values) go into the doc comment.
 */
import { posix } from 'node:path';
import { arrayOf, docLines, literal, propertyKey, renderDoc, scalarType, type JSONSchemaProps } from './schema.ts';
import { generatedFileName, type GeneratedFile } from './types.ts';

/** The OpenAPI v3 schema fields the built-in generator reads. */
export interface OpenAPISchema extends Omit<JSONSchemaProps, 'properties' | 'items' | 'additionalProperties'> {
  $ref?: string;
  allOf?: OpenAPISchema[];
  oneOf?: OpenAPISchema[];
  anyOf?: OpenAPISchema[];
  properties?: Record<string, OpenAPISchema>;
  items?: OpenAPISchema;
  additionalProperties?: boolean | OpenAPISchema;
  'x-kubernetes-group-version-kind'?: { group: string; version: string; kind: string }[];
}

/** One OpenAPI v3 document: where it came from and its `components.schemas`. */
export interface OpenAPIDocument {
  source: string;
  schemas: Record<string, OpenAPISchema>;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** True when `value` (parsed JSON) is an OpenAPI v3 document with component schemas. */
export function isOpenAPIDocument(value: unknown): boolean {
  return isObj(value) && typeof value['openapi'] === 'string' && isObj(value['components']) && isObj(value['components']['schemas']);
}

/** Reads an OpenAPI v3 document (JSON text); throws naming `source` when it is not one. */
export function parseOpenAPI(text: string, source: string): OpenAPIDocument {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isOpenAPIDocument(value)) throw new Error(`${source}: not an OpenAPI v3 document with components.schemas`);
  const components = (value as { components: { schemas: Record<string, OpenAPISchema> } }).components;
  return { source, schemas: components.schemas };
}

/** The package directory (`core/v1`) of a schema name, or undefined for the apimachinery leaf types inlined. */
export function packageOf(name: string): string | undefined {
  const m = /^io\.k8s\.api\.([a-z0-9]+)\.(v[0-9a-z]+)\.[A-Za-z0-9]+$/.exec(name) ??
    /^io\.k8s\.apimachinery\.pkg\.apis\.(meta)\.(v[0-9a-z]+)\.[A-Za-z0-9]+$/.exec(name) ??
    /^io\.k8s\.apiextensions-apiserver\.pkg\.apis\.(apiextensions)\.(v[0-9a-z]+)\.[A-Za-z0-9]+$/.exec(name) ??
    /^io\.k8s\.kube-aggregator\.pkg\.apis\.(apiregistration)\.(v[0-9a-z]+)\.[A-Za-z0-9]+$/.exec(name);
  return m ? `${m[1]}/${m[2]}` : undefined;
}

const shortName = (name: string): string => name.slice(name.lastIndexOf('.') + 1);
const refName = (ref: string): string => ref.replace(/^#\/components\/schemas\//, '');
const pascal = (s: string): string => s.split(/[^A-Za-z0-9]+/).filter((p) => p !== '').map((p) => p.charAt(0).toUpperCase() + p.slice(1)).join('');

function withoutGVK(s: OpenAPISchema): string {
  const { 'x-kubernetes-group-version-kind': _gvk, ...rest } = s;
  return JSON.stringify(rest);
}

/** The union of the documents' schemas; throws on a name with different content in two documents. */
export function mergeSchemas(docs: readonly OpenAPIDocument[]): { schemas: Map<string, OpenAPISchema>; sources: Map<string, string[]> } {
  const schemas = new Map<string, OpenAPISchema>();
  const sources = new Map<string, string[]>();
  for (const doc of [...docs].sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0))) {
    for (const [name, s] of Object.entries(doc.schemas)) {
      const seen = schemas.get(name);
      if (seen && withoutGVK(seen) !== withoutGVK(s)) {
        throw new Error(`schema ${name} differs between ${sources.get(name)?.[0] ?? '?'} and ${doc.source}`);
      }
      // The group/version/kinds of all documents, each once, sorted (DeleteOptions lists each document's own).
      const gvks = [...(seen?.['x-kubernetes-group-version-kind'] ?? []), ...(s['x-kubernetes-group-version-kind'] ?? [])];
      const unique = [...new Map(gvks.map((g) => [`${g.group}/${g.version}/${g.kind}`, g])).entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, g]) => g);
      schemas.set(name, unique.length > 0 ? { ...s, 'x-kubernetes-group-version-kind': unique } : s);
      sources.set(name, [...(sources.get(name) ?? []), doc.source]);
    }
  }
  return { schemas, sources };
}

/**
 * The meta/v1 schemas the runtime defines itself (pkg/apimachinery/meta.ts, with every field of the server's schema):
 * re-exported by the generated meta/v1, never declared there (see the invariants).
 */
export const runtimeMetaTypes: Readonly<Record<string, string>> = {
  'io.k8s.apimachinery.pkg.apis.meta.v1.Condition': 'Condition',
  'io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector': 'LabelSelector',
  'io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement': 'LabelSelectorRequirement',
  'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta': 'ObjectMeta',
  'io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference': 'OwnerReference',
};

/** Where the runtime's types come from: a package name, or the runtime's source directory (`pkg`, as types.ts). */
export type BuiltinRuntime = { module: string } | { pkgDir: string };

/** A named schema gets an interface when it is an object with properties; everything else is inlined. */
const isDeclared = (s: OpenAPISchema): boolean => s.properties !== undefined && Object.keys(s.properties).length > 0;

/** The schema a property refers to: `$ref`, or `allOf` with exactly one `$ref` (how v3 attaches a description). */
function refOf(s: OpenAPISchema): string | undefined {
  if (s.$ref) return refName(s.$ref);
  if (s.allOf?.length === 1 && s.allOf[0]?.$ref) return refName(s.allOf[0].$ref);
  return undefined;
}

/** Renders the types of one package file, collecting the names it needs from other packages. */
class PackageRenderer {
  /** Referenced schema name → the local identifier it is imported as, per package. */
  readonly imports = new Map<string, Map<string, string>>();
  private readonly pkg: string;
  private readonly schemas: ReadonlyMap<string, OpenAPISchema>;
  private readonly localNames: ReadonlySet<string>;

  constructor(pkg: string, schemas: ReadonlyMap<string, OpenAPISchema>, localNames: ReadonlySet<string>) {
    this.pkg = pkg;
    this.schemas = schemas;
    this.localNames = localNames;
  }

  private named(name: string, stack: readonly string[]): string {
    const s = this.schemas.get(name);
    if (!s) throw new Error(`$ref to ${name}, which no document defines`);
    if (name === 'io.k8s.apimachinery.pkg.api.resource.Quantity') return 'string';
    if (!isDeclared(s)) {
      if (stack.includes(name)) throw new Error(`inlined schema ${name} refers to itself`);
      return this.typeOf(s, [...stack, name]);
    }
    const pkg = packageOf(name);
    if (!pkg) throw new Error(`schema ${name} has properties but no package to be generated into`);
    const short = shortName(name);
    if (pkg === this.pkg) return short;
    const names = this.imports.get(pkg) ?? new Map<string, string>();
    this.imports.set(pkg, names);
    let local = names.get(name);
    if (!local) {
      // A name taken in this file (or by another import) is imported under its package's prefix: MetaV1Status.
      const taken = this.localNames.has(short) || [...this.imports.values()].some((m) => [...m.values()].includes(short));
      local = taken ? `${pascal(pkg)}${short}` : short;
      names.set(name, local);
    }
    return local;
  }

  typeOf(s: OpenAPISchema, stack: readonly string[] = []): string {
    const ref = refOf(s);
    if (ref) return this.named(ref, stack);
    if (s.format === 'int-or-string') return 'number | string';
    if (Array.isArray(s.enum) && s.enum.length > 0) return [...new Set(s.enum.map(literal))].sort().join(' | ');
    const alternatives = s.oneOf ?? s.anyOf;
    if (alternatives && alternatives.length > 0) return [...new Set(alternatives.map((a) => this.typeOf(a, stack)))].sort().join(' | ');
    const scalar = scalarType(s.type);
    if (scalar) return scalar;
    switch (s.type) {
      case 'array':
        return s.items ? arrayOf(this.typeOf(s.items, stack)) : 'unknown[]';
      case 'object':
      case undefined: {
        if (s.properties && Object.keys(s.properties).length > 0) return `{\n${this.members(s, '    ')}  }`;
        if (typeof s.additionalProperties === 'object') return `Record<string, ${this.typeOf(s.additionalProperties, stack)}>`;
        return s.type === 'object' ? 'Record<string, unknown>' : 'unknown';
      }
      default:
        return 'unknown';
    }
  }

  /**
   * Doc comment lines of a member: its description, format (an inlined named schema's, e.g. Time's date-time, when
   * it has none itself) and a default that is not Go's zero value.
   */
  private docOf(s: OpenAPISchema): string[] {
    const { default: def, ...rest } = s;
    const keepDefault = def !== undefined && !(isObj(def) && Object.keys(def).length === 0) && def !== '';
    const target = refOf(s);
    const named = target !== undefined ? this.schemas.get(target) : undefined;
    const format = rest.format ?? (named && !isDeclared(named) ? named.format : undefined);
    const doc: JSONSchemaProps = {};
    if (rest.description !== undefined) doc.description = rest.description;
    if (format !== undefined && format !== 'int-or-string') doc.format = format;
    if (keepDefault) doc.default = def;
    return docLines(doc);
  }

  members(s: OpenAPISchema, indent: string): string {
    const required = new Set(s.required ?? []);
    let out = '';
    for (const p of Object.keys(s.properties ?? {}).sort()) {
      const ps = s.properties?.[p] ?? {};
      out += renderDoc(this.docOf(ps), indent);
      out += `${indent}${propertyKey(p)}${required.has(p) ? '' : '?'}: ${this.typeOf(ps)};\n`;
    }
    return out;
  }
}

function renderPackage(pkg: string, names: readonly string[], merged: ReturnType<typeof mergeSchemas>, outDir: string, runtime: BuiltinRuntime): string {
  const { schemas, sources } = merged;
  const localNames = new Set(names.map(shortName));
  const r = new PackageRenderer(pkg, schemas, localNames);
  const fromRuntime = names.filter((n) => runtimeMetaTypes[n] !== undefined).map((n) => runtimeMetaTypes[n] ?? '').sort();
  let body = '';
  for (const name of names) {
    if (runtimeMetaTypes[name] !== undefined) continue;
    const s = schemas.get(name) ?? {};
    const doc = s.description ? s.description.trim().split('\n').map((l) => l.trimEnd()) : [];
    for (const gvk of s['x-kubernetes-group-version-kind'] ?? []) {
      if (doc.length > 0 && !doc.at(-1)?.startsWith('apiVersion')) doc.push('');
      doc.push(`apiVersion: ${gvk.group ? `${gvk.group}/` : ''}${gvk.version}, kind: ${gvk.kind}`);
    }
    body += `\n${renderDoc(doc, '')}export interface ${shortName(name)} {\n${r.members(s, '  ')}}\n`;
  }
  const files = [...new Set(names.flatMap((n) => sources.get(n) ?? []))].sort();
  let out = '// Code generated by `ts-controller-manager gen types`. DO NOT EDIT.\n';
  for (const f of files) out += `// Source: ${f}\n`;
  out += `\n/** Kubernetes ${pkg} (types only: this module has no runtime code), in the JSON wire format. */\n`;
  const dir = posix.join(outDir, pkg);
  for (const [other, imported] of [...r.imports].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const specs = [...imported].map(([name, local]) => (shortName(name) === local ? local : `${shortName(name)} as ${local}`)).sort();
    const rel = posix.relative(dir, posix.join(outDir, other, generatedFileName));
    out += `import type { ${specs.join(', ')} } from '${rel.startsWith('.') ? rel : `./${rel}`}';\n`;
  }
  if (fromRuntime.length > 0) {
    let from: string;
    if ('module' in runtime) {
      from = runtime.module;
    } else {
      const rel = posix.relative(dir, posix.join(runtime.pkgDir, 'apimachinery', 'meta.ts'));
      from = rel.startsWith('.') ? rel : `./${rel}`;
    }
    out += `import type { ${fromRuntime.join(', ')} } from '${from}';\nexport type { ${fromRuntime.join(', ')} };\n`;
  }
  return out + body;
}

/**
 * Generates one file per Go API package found in `docs` (see the file comment); `runtime` (default the package
 * ts-controller-manager) is where meta/v1 takes the runtime's meta types from.
 */
export function generateBuiltinTypes(docs: readonly OpenAPIDocument[], opts: { outDir: string; runtime?: BuiltinRuntime }): GeneratedFile[] {
  const runtime = opts.runtime ?? { module: 'ts-controller-manager' };
  const merged = mergeSchemas(docs);
  const byPackage = new Map<string, string[]>();
  for (const [name, s] of merged.schemas) {
    if (!isDeclared(s)) continue;
    const pkg = packageOf(name);
    if (!pkg) throw new Error(`schema ${name} has properties but no package to be generated into`);
    byPackage.set(pkg, [...(byPackage.get(pkg) ?? []), name]);
  }
  return [...byPackage.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([pkg, names]) => ({
      path: posix.join(opts.outDir, pkg, generatedFileName),
      content: renderPackage(pkg, [...names].sort((a, b) => (shortName(a) < shortName(b) ? -1 : shortName(a) > shortName(b) ? 1 : 0)), merged, opts.outDir, runtime),
    }));
}
