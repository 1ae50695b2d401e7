/**
 * OpenAPI v3 (structural) schema → TypeScript type expressions and interface declarations. Pure: no I/O.
 *
 * Mapping (apiextensions.k8s.io/v1 JSONSchemaProps, as the API server prunes and validates them):
 *   string / integer / number / boolean      → string / number / number / boolean (`format` → `@format` tag)
 *   enum                                     → union of the literals ('A' | 'B'), duplicates dropped
 *   array                                    → T[] of `items` (unknown[] without items)
 *   object with properties                   → a named interface; required → non-optional members
 *   object with only additionalProperties    → Record<string, T> (true → Record<string, unknown>)
 *   object with properties AND additionalProperties or x-kubernetes-preserve-unknown-fields
 *                                            → the interface plus an index signature `[key: string]: unknown`
 *   object with neither (the server prunes every field) → Record<string, never>
 *   x-kubernetes-preserve-unknown-fields     → Record<string, unknown> on an object, unknown without a type
 *   x-kubernetes-int-or-string               → number | string
 *   x-kubernetes-embedded-resource           → extends KubeObject (apiVersion, kind, metadata come from it)
 *   nullable                                 → | null
 *   description, format, default and the numeric/length/pattern/item-count limits → the member's doc comment
 * Names: a nested object is named after its parent and property (Foo → FooSpec → FooSpecTemplate), an array's item
 * object after the singular of the property (conditions → NetworkStatusCondition), a map value `…Value`; a name
 * already taken gets a numeric suffix. Members are sorted by name, so the output depends only on the schema's
 * content, never on its key order.
 *
 * Invariant: an emitted declaration never has an empty body (typescript-eslint forbids empty interfaces), and never
 * a type the recommended lint rules reject (`unknown | null` is emitted as `unknown`).
 */
import type { ValidationSchema } from './openapivalidate.ts';

/** The JSONSchemaProps fields the generator reads: the validator's schema type (one definition of a CRD schema node). */
export type JSONSchemaProps = ValidationSchema;

/** A named declaration: an interface or a type alias, already rendered. */
export interface Declaration {
  name: string;
  text: string;
}

/** Fields every Kubernetes object has; an embedded resource or a kind takes them from KubeObject. */
export const objectMetaFields: ReadonlySet<string> = new Set(['apiVersion', 'kind', 'metadata']);

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `Pascal` case of a property name: 'deploymentName' → 'DeploymentName', 'x-foo.bar' → 'XFooBar'. */
export function pascalCase(name: string): string {
  const parts = name.split(/[^A-Za-z0-9]+/).filter((p) => p !== '');
  const s = parts.map((p) => p.charAt(0).toUpperCase() + p.slice(1)).join('');
  return s === '' ? 'Field' : /^[0-9]/.test(s) ? `_${s}` : s;
}

/** English singular of a (Pascal-case) plural, for array item types; '…Item' when it is not a plural. */
export function singular(name: string): string {
  if (/[^aeiou]ies$/.test(name)) return `${name.slice(0, -3)}y`;
  if (/(ss|x|ch|sh)es$/.test(name)) return name.slice(0, -2);
  if (/[^su]s$/.test(name) && !/is$/.test(name)) return name.slice(0, -1);
  return `${name}Item`;
}

/** The TypeScript type of a scalar schema `type` (string, integer, number, boolean), else undefined. */
export function scalarType(type: unknown): 'string' | 'number' | 'boolean' | undefined {
  if (type === 'string' || type === 'boolean') return type;
  return type === 'integer' || type === 'number' ? 'number' : undefined;
}

/** An array of `item`: `T[]` for a plain (possibly array) name, `Array<…>` for anything else (a union, an object). */
export function arrayOf(item: string): string {
  return /^[A-Za-z0-9_$]+(\[\])*$/.test(item) ? `${item}[]` : `Array<${item}>`;
}

/** A TypeScript literal for an enum value or default. */
export function literal(v: unknown): string {
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n').replace(/\r/g, '\\r')}'`;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v === null) return 'null';
  return JSON.stringify(v);
}

/** A property key: bare when it is an identifier, quoted otherwise. */
export function propertyKey(name: string): string {
  return identifier.test(name) ? name : literal(name);
}

/** Doc comment lines (description, then tags) of a schema; [] when there is nothing to say. */
export function docLines(s: JSONSchemaProps): string[] {
  const lines: string[] = [];
  if (typeof s.description === 'string' && s.description.trim() !== '') lines.push(...s.description.trim().split('\n').map((l) => l.trimEnd()));
  const tags: string[] = [];
  if (s.format) tags.push(`@format ${s.format}`);
  if (s.default !== undefined) tags.push(`@default ${JSON.stringify(s.default)}`);
  if (s.minimum !== undefined) tags.push(`@minimum ${s.minimum}${s.exclusiveMinimum ? ' (exclusive)' : ''}`);
  if (s.maximum !== undefined) tags.push(`@maximum ${s.maximum}${s.exclusiveMaximum ? ' (exclusive)' : ''}`);
  if (s.multipleOf !== undefined) tags.push(`@multipleOf ${s.multipleOf}`);
  if (s.minLength !== undefined) tags.push(`@minLength ${s.minLength}`);
  if (s.maxLength !== undefined) tags.push(`@maxLength ${s.maxLength}`);
  if (s.pattern !== undefined) tags.push(`@pattern ${s.pattern}`);
  if (s.minItems !== undefined) tags.push(`@minItems ${s.minItems}`);
  if (s.maxItems !== undefined) tags.push(`@maxItems ${s.maxItems}`);
  if (s.minProperties !== undefined) tags.push(`@minProperties ${s.minProperties}`);
  if (s.maxProperties !== undefined) tags.push(`@maxProperties ${s.maxProperties}`);
  if (lines.length > 0 && tags.length > 0) lines.push('');
  return [...lines, ...tags];
}

/** Renders doc comment lines at `indent`; '' for no lines. `*\/` inside the text is escaped. */
export function renderDoc(lines: readonly string[], indent: string): string {
  if (lines.length === 0) return '';
  const safe = lines.map((l) => l.replace(/\*\//g, '*\\/'));
  if (safe.length === 1 && (safe[0] ?? '').length + indent.length <= 110) return `${indent}/** ${safe[0]} */\n`;
  return `${indent}/**\n${safe.map((l) => (l === '' ? `${indent} *` : `${indent} * ${l}`)).join('\n')}\n${indent} */\n`;
}

/**
 * Collects the declarations of one generated file. `reserve` names that are declared by other means (the kind's own
 * interfaces, the file's constants) so nested types never take them.
 */
export class SchemaEmitter {
  readonly declarations: Declaration[] = [];
  private readonly taken = new Set<string>();

  reserve(name: string): void {
    this.taken.add(name);
  }

  /** `name`, or `name2`, `name3`, … if taken; the result is taken from now on. */
  uniqueName(name: string): string {
    let n = name;
    for (let i = 2; this.taken.has(n); i++) n = `${name}${i}`;
    this.taken.add(n);
    return n;
  }

  /** The TypeScript type of `s`; object types with properties are declared as interfaces named from `nameHint`. */
  typeOf(s: JSONSchemaProps, nameHint: string): string {
    const t = this.baseType(s, nameHint);
    return s.nullable && t !== 'unknown' ? `${t} | null` : t;
  }

  private baseType(s: JSONSchemaProps, nameHint: string): string {
    if (s['x-kubernetes-int-or-string']) return 'number | string';
    if (Array.isArray(s.enum) && s.enum.length > 0) {
      return [...new Set(s.enum.filter((v) => v !== null || !s.nullable).map(literal))].join(' | ');
    }
    const scalar = scalarType(s.type);
    if (scalar) return scalar;
    switch (s.type) {
      case 'array':
        return s.items ? arrayOf(this.typeOf(s.items, singular(nameHint))) : 'unknown[]';
      case 'object':
        return this.objectType(s, nameHint);
      default:
        // No type: allowed for int-or-string (above) and preserve-unknown-fields; an object when it has properties.
        if (s.properties) return this.objectType(s, nameHint);
        return 'unknown';
    }
  }

  private objectType(s: JSONSchemaProps, nameHint: string): string {
    const embedded = s['x-kubernetes-embedded-resource'] === true;
    const open = s['x-kubernetes-preserve-unknown-fields'] === true || s.additionalProperties === true;
    const props = Object.keys(s.properties ?? {}).filter((p) => !(embedded && objectMetaFields.has(p)));
    if (props.length === 0) {
      const ap = s.additionalProperties;
      if (typeof ap === 'object') return `Record<string, ${this.typeOf(ap, `${nameHint}Value`)}>`;
      if (embedded) return open ? 'KubeObject & Record<string, unknown>' : 'KubeObject';
      return open ? 'Record<string, unknown>' : 'Record<string, never>';
    }
    const name = this.uniqueName(nameHint);
    const index = this.declarations.length;
    this.declarations.push({ name, text: '' }); // placeholder: keeps parents before their children
    const body = this.members(s, name, props, open || typeof s.additionalProperties === 'object');
    const doc = renderDoc(docLines({ ...(s.description !== undefined ? { description: s.description } : {}) }), '');
    this.declarations[index] = { name, text: `${doc}export interface ${name}${embedded ? ' extends KubeObject' : ''} {\n${body}}\n` };
    return name;
  }

  /** Rendered members (sorted) of the object `s` whose interface is `owner`; `indexSignature` adds `[key: string]: unknown`. */
  members(s: JSONSchemaProps, owner: string, props: readonly string[], indexSignature: boolean): string {
    const required = new Set(Array.isArray(s.required) ? s.required : []);
    let out = '';
    for (const p of [...props].sort()) {
      const ps = s.properties?.[p] ?? {};
      out += renderDoc(docLines(ps), '  ');
      out += `  ${propertyKey(p)}${required.has(p) ? '' : '?'}: ${this.typeOf(ps, `${owner}${pascalCase(p)}`)};\n`;
    }
    if (indexSignature) out += '  /** Fields the schema does not list (kept by the API server). */\n  [key: string]: unknown;\n';
    return out;
  }
}
