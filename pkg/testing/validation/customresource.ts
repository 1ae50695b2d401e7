/**
 * What kube-apiserver does to a custom resource between the request body and etcd, from its CRD version's schema —
 * a port of k8s.io/apiextensions-apiserver's decoding (pruning, dropping non-nullable nulls, structural defaulting)
 * and strategy validation (type meta, the schema's OpenAPI v3 rules, list sets and maps, CEL rules), for the
 * FakeClient. Pure but for the CEL evaluator, which is loaded only for a schema with `x-kubernetes-validations`.
 *
 *   decode(obj, schema)            prune unknown fields, drop nulls of non-nullable fields without a default, default
 *   validate(obj, old?, schema, …) the field errors of the 422 answer ([] when valid)
 *
 * Order (as the server): decoding happens on every write body (create, update, the result of a patch or apply);
 * the status-subresource reset and generation come after it; validation last, on the object that would be stored.
 */
import { duplicate, goJSON, invalid, type FieldError } from '../../codegen/fielderrors.ts';
import { compilePatternDetail, validateValue, type ValidationSchema } from '../../codegen/openapivalidate.ts';
import type { CelValidator } from './cel.ts';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const metaFields = new Set(['apiVersion', 'kind', 'metadata']);

/** A deep copy of a JSON value. */
const copy = <T>(v: T): T => (v === undefined ? v : JSON.parse(JSON.stringify(v)) as T);

/**
 * Pruning (apiextensions-apiserver pkg/apiserver/schema/pruning): removes every field the schema does not specify,
 * except under `x-kubernetes-preserve-unknown-fields`; apiVersion, kind and metadata of the resource root and of
 * embedded resources are kept. Returns the pruned paths (the server's "unknown field" warnings). Mutates `obj`.
 */
export function prune(obj: unknown, schema: ValidationSchema | undefined, isResourceRoot = true): string[] {
  const pruned: string[] = [];
  const s = isResourceRoot ? { ...(schema ?? {}), 'x-kubernetes-embedded-resource': true } : schema;
  pruneNode(obj, s, [], pruned);
  return pruned.sort();
}

function pruneNode(x: unknown, s: ValidationSchema | undefined, path: string[], pruned: string[]): void {
  if (s?.['x-kubernetes-preserve-unknown-fields']) {
    skipPrune(x, s, path, pruned);
    return;
  }
  if (isObj(x)) {
    for (const k of Object.keys(x)) {
      if (s?.['x-kubernetes-embedded-resource'] && metaFields.has(k)) continue;
      const prop = s?.properties?.[k];
      if (prop) pruneNode(x[k], prop, [...path, k], pruned);
      else if (s && s.additionalProperties !== undefined && s.additionalProperties !== false) {
        pruneNode(x[k], typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined, [...path, k], pruned);
      } else {
        if (!metaFields.has(k) || path.length > 0) pruned.push([...path, k].join('.'));
        delete x[k];
      }
    }
  } else if (Array.isArray(x)) {
    x.forEach((item, i) => pruneNode(item, s?.items, [...path.slice(0, -1), `${path.at(-1) ?? ''}[${i}]`], pruned));
  }
}

function skipPrune(x: unknown, s: ValidationSchema, path: string[], pruned: string[]): void {
  if (isObj(x)) {
    for (const k of Object.keys(x)) {
      if (s['x-kubernetes-embedded-resource'] && metaFields.has(k)) continue;
      const prop = s.properties?.[k];
      if (prop) pruneNode(x[k], prop, [...path, k], pruned);
      else if (typeof s.additionalProperties === 'object') pruneNode(x[k], s.additionalProperties, [...path, k], pruned);
    }
  } else if (Array.isArray(x) && s.items) {
    x.forEach((item, i) => skipPrune(item, s.items as ValidationSchema, [...path, String(i)], pruned));
  }
}

/** The schema of member `k` of an object of schema `s` (a property, else additionalProperties). */
function memberSchema(s: ValidationSchema | undefined, k: string): ValidationSchema | undefined {
  const p = s?.properties?.[k];
  if (p) return p;
  return typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined;
}

/** PruneNonNullableNullsWithoutDefaults: drops `null` members whose schema is not nullable and has no default. Mutates. */
export function pruneNulls(x: unknown, s: ValidationSchema | undefined): void {
  if (isObj(x)) {
    for (const k of Object.keys(x)) {
      const ms = memberSchema(s, k);
      if (x[k] === null && ms && !ms.nullable && ms.default === undefined) delete x[k];
      else pruneNulls(x[k], ms);
    }
  } else if (Array.isArray(x)) {
    for (const item of x) pruneNulls(item, s?.items);
  }
}

/**
 * Structural defaulting (pkg/apiserver/schema/defaulting.Default): a missing property, or a null one whose schema is
 * not nullable, gets its default (then is defaulted inside); so does a null list item or map value. Mutates.
 */
export function applyDefaults(x: unknown, s: ValidationSchema | undefined): void {
  if (!s) return;
  if (isObj(x)) {
    for (const [k, prop] of Object.entries(s.properties ?? {})) {
      if (prop.default === undefined) continue;
      if (!(k in x) || (x[k] === null && !prop.nullable)) x[k] = copy(prop.default);
    }
    for (const k of Object.keys(x)) {
      const prop = s.properties?.[k];
      if (prop) applyDefaults(x[k], prop);
      else if (typeof s.additionalProperties === 'object') {
        const ap = s.additionalProperties;
        if (x[k] === null && !ap.nullable) x[k] = copy(ap.default ?? null);
        applyDefaults(x[k], ap);
      }
    }
  } else if (Array.isArray(x)) {
    const items = s.items;
    x.forEach((item, i) => {
      if (item === null && items && !items.nullable) x[i] = copy(items.default ?? null);
      applyDefaults(x[i], items);
    });
  }
}

/**
 * The decoding of a request body for a custom resource: pruning, dropping nulls, defaulting (with a schema; a CRD
 * version without one keeps everything). Mutates and returns `obj`.
 */
export function decode<T extends Json>(obj: T, schema: ValidationSchema | undefined): T {
  if (!schema) return obj;
  prune(obj, schema);
  pruneNulls(obj, schema);
  applyDefaults(obj, schema);
  return obj;
}

/** listtype.ValidateListSetsAndMaps: duplicate items of `x-kubernetes-list-type: set` and keys of `map` lists. */
export function validateListTypes(obj: unknown, s: ValidationSchema | undefined, path = ''): FieldError[] {
  const errs: FieldError[] = [];
  const walk = (x: unknown, sch: ValidationSchema | undefined, p: string): void => {
    if (!sch) return;
    if (Array.isArray(x)) {
      const lt = sch['x-kubernetes-list-type'];
      if (lt === 'set') {
        for (const i of duplicatesOf(x)) errs.push(duplicate(`${p}[${i}]`, x[i]));
      } else if (lt === 'map') {
        const bad = x.findIndex((item) => item !== null && !isObj(item));
        if (bad >= 0) {
          errs.push(invalid(`${p}[${bad}]`, x[bad], 'must be an object for an array of list-type map'));
        } else if (x.length > 1) {
          const keys = sch['x-kubernetes-list-map-keys'] ?? [];
          const keyOf = (item: unknown): Json => {
            const k: Json = {};
            if (isObj(item)) for (const f of keys) if (f in item) k[f] = item[f];
            return k;
          };
          const ks = x.map(keyOf);
          for (const i of duplicatesOf(ks)) errs.push(duplicate(`${p}[${i}]`, ks[i]));
        }
      }
      x.forEach((item, i) => walk(item, sch.items, `${p}[${i}]`));
    } else if (isObj(x)) {
      if (typeof sch.additionalProperties === 'object') for (const k of Object.keys(x)) walk(x[k], sch.additionalProperties, `${p}[${k}]`);
      for (const k of Object.keys(x)) {
        const prop = sch.properties?.[k];
        if (prop) walk(x[k], prop, p ? `${p}.${k}` : k);
      }
    }
  };
  walk(obj, s, path);
  return errs;
}

/** Indices of the second occurrence of each value that occurs more than once (validateListSet). */
function duplicatesOf(items: readonly unknown[]): number[] {
  const seen = new Map<string, number>();
  const out: number[] = [];
  items.forEach((x, i) => {
    const key = goJSON(x);
    const times = seen.get(key) ?? 0;
    seen.set(key, times + 1);
    if (times === 1) out.push(i);
  });
  return out;
}

/**
 * The schema, list-type and CEL errors of a custom resource (customResourceStrategy.Validate minus metadata): `obj`
 * against the whole schema, or for a /status write only its `status` against the status schema (list types of the
 * whole object, as the server); then the CEL rules (`cel`, with the stored `old` on update) — unless a value has the
 * wrong type, when the server skips them and says so.
 */
export function validateSchema(obj: Json, schema: ValidationSchema | undefined, statusOnly = false, cel?: CelValidator, old?: Json): FieldError[] {
  if (!schema) return [];
  const st = schema.properties?.['status'];
  const errs = statusOnly
    ? [...('status' in obj && st ? validateValue(st, obj['status'], 'status') : []), ...validateListTypes(obj, schema)]
    : [...validateValue(schema, obj), ...validateListTypes(obj, schema)];
  if (!cel) return errs;
  if (errs.some((e) => e.type === 'FieldValueTypeInvalid')) {
    return [...errs, invalid('<nil>', null, 'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation')];
  }
  return [...errs, ...cel.validate(obj, old)];
}

/**
 * What the fake cannot check in a CRD version's schema, one line each ("spec.x: pattern …"): patterns in RE2 syntax
 * that ECMAScript cannot compile. The FakeClient refuses such a CRD at construction (FakeUnsupportedError) rather
 * than validate it differently from the server.
 */
export function uncheckable(schema: ValidationSchema | undefined): string[] {
  const out: string[] = [];
  const walk = (s: ValidationSchema | undefined, path: string): void => {
    if (!s) return;
    if (typeof s.pattern === 'string' && s.pattern !== '') {
      const c = compilePatternDetail(s.pattern);
      if ('unsupported' in c) out.push(`${path || '<root>'}: ${c.unsupported}`);
    }
    for (const [k, p] of Object.entries(s.properties ?? {})) walk(p, path ? `${path}.${k}` : k);
    if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${path}[*]`);
    walk(s.items, `${path}[*]`);
    for (const j of ['allOf', 'anyOf', 'oneOf'] as const) (s[j] ?? []).forEach((x) => walk(x, path));
    walk(s.not, path);
  };
  walk(schema, '');
  return out;
}
