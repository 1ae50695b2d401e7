/**
 * The checks kube-apiserver makes of a CustomResourceDefinition's schemas before it accepts the CRD — a port of
 * k8s.io/apiextensions-apiserver's ValidateCustomResourceDefinitionOpenAPISchema (supported types and keywords,
 * properties vs additionalProperties, list and map types), the structural-schema rules (pkg/apiserver/schema
 * validation.go: a type everywhere, items for arrays, metadata restrictions, junctors) and the default checks (a
 * default must validate against its schema and have no unknown fields) — with the server's field paths and
 * messages: `CustomResourceDefinition.apiextensions.k8s.io "x" is invalid: spec.validation.openAPIV3Schema.
 * properties[spec].properties[replicas].type: Unsupported value: "int": supported values: "array", …`. Pure.
 *
 * Used by `gen types` (a CRD the server would refuse gets no types) and by the FakeClient (such a CRD is refused at
 * construction, as startTestEnv's install is). Not checked here: CEL rules (x-kubernetes-validations compile errors
 * and cost; the FakeClient checks what it can at construction), names, versions, conversion and printer columns.
 */
import { aggregateMessage, forbidden, goJSON, goQuote, GoText, invalid, notSupported, required, errorString, type FieldError } from './fielderrors.ts';
import { compilePatternDetail, validateValue, type ValidationSchema } from './openapivalidate.ts';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const types = ['array', 'boolean', 'integer', 'number', 'object', 'string'];
const metaFields = new Set(['apiVersion', 'kind', 'metadata']);
const key = (path: string, k: string): string => `${path}.properties[${k}]`;

/** A schema as read from YAML: the keywords the checks look at. */
type Schema = ValidationSchema & Json;

interface Ctx {
  /** Defaults are forbidden here, and why ("in top-level metadata"). */
  noDefaults?: string;
  insideMeta?: boolean;
}

/** ValidateCustomResourceDefinitionOpenAPISchema (the specStandardValidatorV3 and the keyword rules), recursively. */
function openAPIErrors(s: Schema, path: string, ctx: Ctx, isRoot: boolean, out: FieldError[]): void {
  if (typeof s.type === 'string' && s.type !== '' && !types.includes(s.type)) out.push(notSupported(`${path}.type`, s.type, types));
  if (s.default !== undefined && ctx.noDefaults !== undefined) out.push(forbidden(`${path}.default`, `must not be set${ctx.noDefaults ? ` ${ctx.noDefaults}` : ''}`));
  if (s['id'] !== undefined && s['id'] !== '') out.push(forbidden(`${path}.id`, 'id is not supported'));
  if (s['additionalItems'] !== undefined) out.push(forbidden(`${path}.additionalItems`, 'additionalItems is not supported'));
  if (isObj(s['patternProperties']) && Object.keys(s['patternProperties']).length) out.push(forbidden(`${path}.patternProperties`, 'patternProperties is not supported'));
  if (isObj(s['definitions']) && Object.keys(s['definitions']).length) out.push(forbidden(`${path}.definitions`, 'definitions is not supported'));
  if (s['dependencies'] !== undefined) out.push(forbidden(`${path}.dependencies`, 'dependencies is not supported'));
  if (s['$ref'] !== undefined) out.push(forbidden(`${path}.$ref`, '$ref is not supported'));
  if (s.type === 'null') out.push(forbidden(`${path}.type`, 'type cannot be set to null, use nullable as an alternative'));
  if (Array.isArray(s['items'])) out.push(forbidden(`${path}.items`, 'items must be a schema object and not an array'));
  if (ctx.insideMeta && s['x-kubernetes-embedded-resource']) out.push(forbidden(`${path}.x-kubernetes-embedded-resource`, 'must not be used inside of resource meta'));
  if (s.uniqueItems) out.push(forbidden(`${path}.uniqueItems`, 'uniqueItems cannot be set to true since the runtime complexity becomes quadratic'));
  const props = isObj(s.properties) ? s.properties as Record<string, Schema> : {};
  if (s.additionalProperties !== undefined) {
    if (Object.keys(props).length && (s.additionalProperties === false || isObj(s.additionalProperties))) {
      out.push(forbidden(`${path}.additionalProperties`, 'additionalProperties and properties are mutual exclusive'));
    }
    if (isObj(s.additionalProperties)) {
      openAPIErrors(s.additionalProperties, `${path}.additionalProperties`, ctx.insideMeta ? { ...ctx, noDefaults: 'inside additionalProperties applying to object metadata' } : ctx, false, out);
    }
  }
  for (const [k, p] of Object.entries(props)) {
    if (!isObj(p)) continue;
    let sub = ctx;
    if ((isRoot || s['x-kubernetes-embedded-resource']) && metaFields.has(k)) {
      sub = { ...sub, insideMeta: true };
      if (isRoot) sub = { ...sub, noDefaults: `in top-level ${k}` };
    }
    openAPIErrors(p, key(path, k), sub, false, out);
  }
  if (isObj(s.not)) openAPIErrors(s.not, `${path}.not`, ctx, false, out);
  for (const j of ['allOf', 'oneOf', 'anyOf'] as const) (s[j] ?? []).forEach((sub, i) => isObj(sub) && openAPIErrors(sub, `${path}.${j}[${i}]`, ctx, false, out));
  if (isObj(s.items)) openAPIErrors(s.items, `${path}.items`, ctx, false, out);
  if (s['x-kubernetes-preserve-unknown-fields'] === false) out.push(invalid(`${path}.x-kubernetes-preserve-unknown-fields`, false, 'must be true or undefined'));
  const mapType = s['x-kubernetes-map-type'];
  if (mapType !== undefined) {
    if (s.type !== 'object') out.push(s.type ? invalid(`${path}.type`, s.type, 'must be object if x-kubernetes-map-type is specified') : required(`${path}.type`, 'must be object if x-kubernetes-map-type is specified'));
    if (mapType !== 'atomic' && mapType !== 'granular') out.push(notSupported(`${path}.x-kubernetes-map-type`, mapType, ['atomic', 'granular']));
  }
  const listType = s['x-kubernetes-list-type'];
  const items = isObj(s.items) ? s.items as Schema : undefined;
  if (listType !== undefined) {
    if (s.type !== 'array') out.push(s.type ? invalid(`${path}.type`, s.type, 'must be array if x-kubernetes-list-type is specified') : required(`${path}.type`, 'must be array if x-kubernetes-list-type is specified'));
    else if (listType === 'set' && items) {
      if (items.type === 'object' && items['x-kubernetes-map-type'] !== 'atomic') out.push(invalid(`${path}.items.x-kubernetes-map-type`, items['x-kubernetes-map-type'] ?? null, 'must be atomic as item of a list with x-kubernetes-list-type=set'));
      if (items.type === 'array' && items['x-kubernetes-list-type'] !== 'atomic') out.push(invalid(`${path}.items.x-kubernetes-list-type`, items['x-kubernetes-list-type'] ?? null, 'must be atomic as item of a list with x-kubernetes-list-type=set'));
    }
    if (listType !== 'atomic' && listType !== 'set' && listType !== 'map') out.push(notSupported(`${path}.x-kubernetes-list-type`, listType, ['atomic', 'set', 'map']));
  }
  const mapKeys = s['x-kubernetes-list-map-keys'];
  if (Array.isArray(mapKeys) && mapKeys.length && listType !== 'map') {
    out.push(listType === undefined ? required(`${path}.x-kubernetes-list-type`, 'must be map if x-kubernetes-list-map-keys is non-empty') : invalid(`${path}.x-kubernetes-list-type`, listType, 'must be map if x-kubernetes-list-map-keys is non-empty'));
  }
  if (listType === 'map') {
    if (!Array.isArray(mapKeys) || mapKeys.length === 0) out.push(required(`${path}.x-kubernetes-list-map-keys`, 'must not be empty if x-kubernetes-list-type is map'));
    if (!items) out.push(required(`${path}.items`, 'must have a schema if x-kubernetes-list-type is map'));
    else if (items.type !== 'object') out.push(invalid(`${path}.items.type`, items.type ?? '', "must be object if parent array's x-kubernetes-list-type is map"));
    else if (Array.isArray(mapKeys)) {
      const ip = isObj(items.properties) ? items.properties as Record<string, Schema> : {};
      let missing = false;
      for (const k of mapKeys) {
        const ks = ip[k];
        if (!ks) missing = true;
        else if (!['string', 'integer', 'number', 'boolean'].includes(ks.type ?? '') && !ks['x-kubernetes-int-or-string']) {
          out.push(invalid(`${path}.items.properties[${k}].type`, items.type, "must be a scalar type if parent array's x-kubernetes-list-type is map"));
        }
      }
      if (missing) out.push(invalid(`${path}.x-kubernetes-list-map-keys`, mapKeys, 'entries must all be names of item properties'));
      if (new Set(mapKeys).size !== mapKeys.length) out.push(invalid(`${path}.x-kubernetes-list-map-keys`, mapKeys, 'must not contain duplicate entries'));
    }
  }
  (s['x-kubernetes-validations'] ?? []).forEach((r, i) => {
    const rule = isObj(r) ? r : {};
    const rp = `${path}.x-kubernetes-validations[${i}]`;
    if (typeof rule['rule'] !== 'string' || rule['rule'].trim() === '') out.push(required(`${rp}.rule`, 'rule is not specified'));
    const msg = rule['message'];
    if (msg !== undefined) {
      if (typeof msg !== 'string' || msg.trim() === '') out.push(invalid(`${rp}.message`, msg, 'must be non-empty if specified'));
      else if (msg.includes('\n')) out.push(invalid(`${rp}.message`, msg, 'must not contain line breaks'));
    } else if (typeof rule['rule'] === 'string' && rule['rule'].includes('\n')) out.push(required(`${rp}.message`, 'message must be specified if rule contains line breaks'));
    if (rule['messageExpression'] !== undefined && (typeof rule['messageExpression'] !== 'string' || rule['messageExpression'].trim() === '')) {
      out.push(required(`${rp}.messageExpression`, 'messageExpression must be non-empty if specified'));
    }
    const reasons = ['FieldValueDuplicate', 'FieldValueForbidden', 'FieldValueInvalid', 'FieldValueRequired'];
    if (rule['reason'] !== undefined && !reasons.includes(typeof rule['reason'] === 'string' ? rule['reason'] : goJSON(rule['reason']))) out.push(notSupported(`${rp}.reason`, rule['reason'], reasons));
  });
  if (items && (listType === 'set' || listType === 'map')) {
    if (items.nullable) out.push(forbidden(`${path}.items.nullable`, `cannot be nullable when x-kubernetes-list-type is ${String(listType)}`));
    if (listType === 'map' && Array.isArray(mapKeys)) {
      const req = new Set(Array.isArray(items.required) ? items.required : []);
      const ip = isObj(items.properties) ? items.properties as Record<string, Schema> : {};
      for (const k of mapKeys) {
        const ks = ip[k];
        if (!ks) continue;
        if (!req.has(k) && ks.default === undefined) out.push(required(`${path}.items.properties[${k}].default`, 'this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property'));
        if (ks.nullable) out.push(forbidden(`${path}.items.properties[${k}].nullable`, 'this property is in x-kubernetes-list-map-keys, so it cannot be nullable'));
      }
    }
  }
}

type Level = 'root' | 'item' | 'field';

const isIntOrStringAnyOf = (xs: unknown): boolean => Array.isArray(xs) && xs.length === 2
  && JSON.stringify(xs) === JSON.stringify([{ type: 'integer' }, { type: 'string' }]);

/** validateStructuralInvariants and validateExtensions (apiextensions-apiserver pkg/apiserver/schema/validation.go). */
function structuralErrors(s: Schema, lvl: Level, path: string, out: FieldError[]): void {
  if (s.type === 'array' && !isObj(s.items)) out.push(required(`${path}.items`, 'must be specified'));
  if (isObj(s.items)) structuralErrors(s.items, 'item', `${path}.items`, out);
  const props = isObj(s.properties) ? s.properties as Record<string, Schema> : {};
  for (const [k, p] of Object.entries(props)) if (isObj(p)) structuralErrors(p, 'field', key(path, k), out);
  if (s.additionalProperties !== undefined && s.additionalProperties !== false) {
    if (lvl === 'root') out.push(forbidden(`${path}.additionalProperties`, 'must not be used at the root'));
    if (isObj(s.additionalProperties)) structuralErrors(s.additionalProperties, 'field', `${path}.additionalProperties`, out);
  }
  const ios = !!s['x-kubernetes-int-or-string'];
  const preserve = !!s['x-kubernetes-preserve-unknown-fields'];
  const embedded = !!s['x-kubernetes-embedded-resource'];
  if (ios && preserve) out.push(invalid(`${path}.x-kubernetes-preserve-unknown-fields`, true, 'must be false if x-kubernetes-int-or-string is true'));
  if (ios && embedded) out.push(invalid(`${path}.x-kubernetes-embedded-resource`, true, 'must be false if x-kubernetes-int-or-string is true'));
  junctorErrors(s, path, isIntOrStringAnyOf(s.anyOf), Array.isArray(s.allOf) && isIntOrStringAnyOf((s.allOf[0] as Schema | undefined)?.anyOf), out);
  const type = s.type ?? '';
  if (embedded && type !== 'object') {
    out.push(type === '' ? required(`${path}.type`, 'must be object if x-kubernetes-embedded-resource is true') : invalid(`${path}.type`, type, 'must be object if x-kubernetes-embedded-resource is true'));
  } else if (type === '' && !ios && !preserve) {
    out.push(required(`${path}.type`, lvl === 'root' ? 'must not be empty at the root' : lvl === 'item' ? 'must not be empty for specified array items' : 'must not be empty for specified object fields'));
  }
  if (embedded && s.additionalProperties !== undefined && s.additionalProperties !== false) out.push(forbidden(`${path}.additionalProperties`, 'must not be used if x-kubernetes-embedded-resource is set'));
  if (lvl === 'root' && type !== '' && type !== 'object') out.push(invalid(`${path}.type`, type, 'must be object at the root'));
  const checkMeta = lvl === 'root' || embedded;
  for (const f of ['kind', 'apiVersion']) {
    const fs = props[f];
    if (fs && checkMeta && fs.type !== 'string') out.push(invalid(`${key(path, f)}.type`, fs.type ?? '', 'must be string'));
  }
  const meta = props['metadata'];
  if (meta) {
    if (checkMeta && meta.type !== 'object') out.push(invalid(`${key(path, 'metadata')}.type`, meta.type ?? '', 'must be object'));
    if (lvl === 'root') {
      const rest: Json = { ...meta };
      delete rest['type']; delete rest['default'];
      const mp = isObj(meta.properties) ? Object.keys(meta.properties) : [];
      if (mp.length && mp.every((p) => p === 'name' || p === 'generateName')) delete rest['properties'];
      if (Object.keys(rest).length) out.push(forbidden(key(path, 'metadata'), 'must not specify anything other than name and generateName, but metadata is implicitly specified'));
    }
  }
  if (embedded && !preserve && Object.keys(props).length === 0) out.push(required(`${path}.properties`, 'must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields'));
}

/** The structural rules inside allOf/anyOf/oneOf/not (no types, defaults, descriptions … there), and pattern validity. */
function junctorErrors(s: Schema, path: string, skipAnyOf: boolean, skipFirstAllOfAnyOf: boolean, out: FieldError[]): void {
  if (!skipAnyOf) (s.anyOf ?? []).forEach((v, i) => nestedErrors(v as Schema, `${path}.anyOf[${i}]`, false, out));
  (s.allOf ?? []).forEach((v, i) => nestedErrors(v as Schema, `${path}.allOf[${i}]`, skipFirstAllOfAnyOf && i === 0, out));
  (s.oneOf ?? []).forEach((v, i) => nestedErrors(v as Schema, `${path}.oneOf[${i}]`, false, out));
  if (isObj(s.not)) nestedErrors(s.not, `${path}.not`, false, out);
  if (typeof s.pattern === 'string' && s.pattern !== '') {
    const re = compilePatternDetail(s.pattern);
    if ('goError' in re) out.push(invalid(`${path}.pattern`, s.pattern, `must be a valid regular expression, but isn't: ${re.goError}`));
  }
}

function nestedErrors(v: Schema, path: string, skipAnyOf: boolean, out: FieldError[]): void {
  if (!isObj(v)) return;
  junctorErrors(v, path, skipAnyOf, false, out);
  if (isObj(v.items)) nestedErrors(v.items, `${path}.items`, false, out);
  for (const [k, p] of Object.entries(isObj(v.properties) ? v.properties : {})) nestedErrors(p as Schema, key(path, k), false, out);
  if (typeof v.type === 'string' && v.type !== '') out.push(forbidden(`${path}.type`, 'must be empty to be structural'));
  if (v.additionalProperties !== undefined) out.push(forbidden(`${path}.additionalProperties`, 'must be undefined to be structural'));
  if (v.default !== undefined) out.push(forbidden(`${path}.default`, 'must be undefined to be structural'));
  if (v['title']) out.push(forbidden(`${path}.title`, 'must be empty to be structural'));
  if (v['description']) out.push(forbidden(`${path}.description`, 'must be empty to be structural'));
  if (v.nullable) out.push(forbidden(`${path}.nullable`, 'must be false to be structural'));
  if (v['x-kubernetes-preserve-unknown-fields']) out.push(forbidden(`${path}.x-kubernetes-preserve-unknown-fields`, 'must be false to be structural'));
  if (v['x-kubernetes-embedded-resource']) out.push(forbidden(`${path}.x-kubernetes-embedded-resource`, 'must be false to be structural'));
  if (v['x-kubernetes-int-or-string']) out.push(forbidden(`${path}.x-kubernetes-int-or-string`, 'must be false to be structural'));
  if (Array.isArray(v['x-kubernetes-list-map-keys']) && v['x-kubernetes-list-map-keys'].length) out.push(forbidden(`${path}.x-kubernetes-list-map-keys`, 'must be empty to be structural'));
  if (v['x-kubernetes-list-type'] !== undefined) out.push(forbidden(`${path}.x-kubernetes-list-type`, 'must be undefined to be structural'));
  if (v['x-kubernetes-map-type'] !== undefined) out.push(forbidden(`${path}.x-kubernetes-map-type`, 'must be undefined to be structural'));
  if (Array.isArray(v['x-kubernetes-validations']) && v['x-kubernetes-validations'].length) out.push(forbidden(`${path}.x-kubernetes-validations`, 'must be empty to be structural'));
  if (isObj(v.properties) && 'metadata' in v.properties) out.push(forbidden(key(path, 'metadata'), 'must not be specified in a nested context'));
}

/** Pruning of a default value (the unknown fields it has), as pruning.Prune does: true when nothing would be dropped. */
function isPruned(v: unknown, s: Schema | undefined, embedded: boolean): boolean {
  if (s?.['x-kubernetes-preserve-unknown-fields']) return true;
  if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) {
      if ((embedded || s?.['x-kubernetes-embedded-resource']) && metaFields.has(k)) continue;
      const p = isObj(s?.properties) ? (s.properties as Record<string, Schema>)[k] : undefined;
      if (p) { if (!isPruned(x, p, false)) return false; } else if (isObj(s?.additionalProperties)) {
        if (!isPruned(x, s.additionalProperties, false)) return false;
      } else if (s?.additionalProperties !== true) return false;
    }
  } else if (Array.isArray(v)) {
    return v.every((x) => isPruned(x, isObj(s?.items) ? s.items as Schema : undefined, false));
  }
  return true;
}

/** ValidateDefaults: each default (outside resource metadata) pruned and valid against its own schema. */
function defaultErrors(s: Schema, path: string, insideMeta: boolean, out: FieldError[]): void {
  if (s.default !== undefined && !insideMeta) {
    if (!isPruned(s.default, s, !!s['x-kubernetes-embedded-resource'])) out.push(invalid(`${path}.default`, s.default, 'must not have unknown fields'));
    out.push(...validateValue(s, s.default, `${path}.default`));
    // An embedded resource (the root too) is an object with apiVersion and kind (objectmeta's ValidateEmbeddedResource).
    if (s['x-kubernetes-embedded-resource'] && isObj(s.default)) {
      for (const f of ['apiVersion', 'kind']) if (s.default[f] === undefined) out.push(required(`${path}.default.${f}`));
    }
  }
  if (isObj(s.items)) defaultErrors(s.items, `${path}.items`, insideMeta, out);
  for (const [k, p] of Object.entries(isObj(s.properties) ? s.properties as Record<string, Schema> : {})) {
    defaultErrors(p, key(path, k), insideMeta || (!!s['x-kubernetes-embedded-resource'] && metaFields.has(k)), out);
  }
}

/** Whether a schema node (or one below it) has a keyword NewStructural cannot convert ($ref, id, patternProperties, …). */
function unconvertible(s: unknown): boolean {
  if (!isObj(s)) return false;
  if (['$ref', 'id', 'additionalItems', 'patternProperties', 'definitions', 'dependencies'].some((k) => s[k] !== undefined && s[k] !== '') || Array.isArray(s['items'])) return true;
  const children = [s['items'], s['additionalProperties'], s['not'], ...Object.values(isObj(s['properties']) ? s['properties'] : {}),
    ...(['allOf', 'anyOf', 'oneOf'] as const).flatMap((j) => (Array.isArray(s[j]) ? s[j] as unknown[] : []))];
  return children.some(unconvertible);
}

/**
 * The fields of Go's internal apiextensions.JSONSchemaProps in declaration order: [Go name, JSON keyword, kind]. The
 * kind says how json.Marshal prints the member when the keyword is absent (its zero value) and how a present one is
 * converted (a nested schema, a map or list of schemas, …).
 */
const goFields: [string, string, 'str' | 'ptr' | 'bool' | 'schema' | 'schemas' | 'schemaMap' | 'items' | 'orBool' | 'deps' | 'docs' | 'rules'][] = [
  ['ID', 'id', 'str'], ['Schema', '$schema', 'str'], ['Ref', '$ref', 'ptr'], ['Description', 'description', 'str'], ['Type', 'type', 'str'],
  ['Nullable', 'nullable', 'bool'], ['Format', 'format', 'str'], ['Title', 'title', 'str'], ['Default', 'default', 'ptr'],
  ['Maximum', 'maximum', 'ptr'], ['ExclusiveMaximum', 'exclusiveMaximum', 'bool'], ['Minimum', 'minimum', 'ptr'],
  ['ExclusiveMinimum', 'exclusiveMinimum', 'bool'], ['MaxLength', 'maxLength', 'ptr'], ['MinLength', 'minLength', 'ptr'],
  ['Pattern', 'pattern', 'str'], ['MaxItems', 'maxItems', 'ptr'], ['MinItems', 'minItems', 'ptr'], ['UniqueItems', 'uniqueItems', 'bool'],
  ['MultipleOf', 'multipleOf', 'ptr'], ['Enum', 'enum', 'ptr'], ['MaxProperties', 'maxProperties', 'ptr'], ['MinProperties', 'minProperties', 'ptr'],
  ['Required', 'required', 'ptr'], ['Items', 'items', 'items'], ['AllOf', 'allOf', 'schemas'], ['OneOf', 'oneOf', 'schemas'],
  ['AnyOf', 'anyOf', 'schemas'], ['Not', 'not', 'schema'], ['Properties', 'properties', 'schemaMap'],
  ['AdditionalProperties', 'additionalProperties', 'orBool'], ['PatternProperties', 'patternProperties', 'schemaMap'],
  ['Dependencies', 'dependencies', 'deps'], ['AdditionalItems', 'additionalItems', 'orBool'], ['Definitions', 'definitions', 'schemaMap'],
  ['ExternalDocs', 'externalDocs', 'docs'], ['Example', 'example', 'ptr'], ['XPreserveUnknownFields', 'x-kubernetes-preserve-unknown-fields', 'ptr'],
  ['XEmbeddedResource', 'x-kubernetes-embedded-resource', 'bool'], ['XIntOrString', 'x-kubernetes-int-or-string', 'bool'],
  ['XListMapKeys', 'x-kubernetes-list-map-keys', 'ptr'], ['XListType', 'x-kubernetes-list-type', 'ptr'], ['XMapType', 'x-kubernetes-map-type', 'ptr'],
  ['XValidations', 'x-kubernetes-validations', 'rules'],
];

/** json.Marshal of a schema as Go's internal JSONSchemaProps struct (how the server prints a whole schema as a bad value). */
function goSchemaJSON(s: unknown): string {
  if (!isObj(s)) return 'null';
  const str = (v: unknown): string => goJSON(typeof v === 'string' ? v : '');
  const schemas = (v: unknown): string => (Array.isArray(v) ? `[${v.map(goSchemaJSON).join(',')}]` : 'null');
  const orBool = (v: unknown): string => (v === undefined ? 'null' : isObj(v) ? `{"Allows":true,"Schema":${goSchemaJSON(v)}}` : `{"Allows":${v === true},"Schema":null}`);
  const map = (v: unknown, f: (x: unknown) => string): string => (isObj(v) ? `{${Object.keys(v).sort().map((k) => `${goJSON(k)}:${f(v[k])}`).join(',')}}` : 'null');
  const member = (kind: (typeof goFields)[number][2], v: unknown): string => {
    switch (kind) {
      case 'str': return str(v);
      case 'bool': return String(v === true);
      case 'ptr': return v === undefined ? 'null' : goJSON(v);
      case 'schema': return goSchemaJSON(v);
      case 'schemas': return schemas(v);
      case 'schemaMap': return map(v, goSchemaJSON);
      case 'items': return v === undefined ? 'null' : Array.isArray(v) ? `{"Schema":null,"JSONSchemas":${schemas(v)}}` : `{"Schema":${goSchemaJSON(v)},"JSONSchemas":null}`;
      case 'orBool': return orBool(v);
      case 'deps': return map(v, (d) => (Array.isArray(d) ? `{"Schema":null,"Property":${goJSON(d)}}` : `{"Schema":${goSchemaJSON(d)},"Property":null}`));
      case 'docs': return isObj(v) ? `{"Description":${str(v['description'])},"URL":${str(v['url'])}}` : 'null';
      case 'rules': return Array.isArray(v) ? `[${v.map((r) => {
        const o = isObj(r) ? r : {};
        const opt = (k: string): string => (o[k] === undefined ? 'null' : goJSON(o[k]));
        return `{"Rule":${str(o['rule'])},"Message":${str(o['message'])},"MessageExpression":${str(o['messageExpression'])},"Reason":${opt('reason')},"FieldPath":${str(o['fieldPath'])},"OptionalOldSelf":${opt('optionalOldSelf')}}`;
      }).join(',')}]` : 'null';
    }
  };
  return `{${goFields.map(([name, k, kind]) => `"${name}":${member(kind, s[k])}`).join(',')}}`;
}

/** The Go fields allowed at the root with a status subresource (allowedFieldsAtRootSchema), in its order. */
const allowedAtRoot = ['Description', 'Type', 'Format', 'Title', 'Maximum', 'ExclusiveMaximum', 'Minimum', 'ExclusiveMinimum', 'MaxLength',
  'MinLength', 'Pattern', 'MaxItems', 'MinItems', 'UniqueItems', 'MultipleOf', 'Required', 'Items', 'Properties', 'ExternalDocs', 'Example',
  'XPreserveUnknownFields', 'XValidations'];

/**
 * The field errors kube-apiserver reports for one CRD version's openAPIV3Schema at `path`
 * ("spec.validation.openAPIV3Schema" when every version has the same schema, else
 * "spec.versions[i].schema.openAPIV3Schema"); [] when it would accept it.
 */
export function validateCRDSchema(schema: unknown, path: string, statusSubresource: boolean): FieldError[] {
  const out: FieldError[] = [];
  if (!isObj(schema)) return [required(path, '')];
  const s = schema as Schema;
  if (statusSubresource) {
    // Go walks the struct's fields in order, skipping zero values, and stops at the first that is not allowed.
    for (const [name, k] of goFields) {
      const v = s[k];
      if (v === undefined || v === null || v === false || v === '') continue;
      if (name === 'Type') {
        if (v !== 'object') { out.push(invalid(`${path}.type`, v, 'only "object" is allowed as the type at the root of the schema if the status subresource is enabled')); break; }
        continue;
      }
      if (!allowedAtRoot.includes(name)) {
        out.push(invalid(path, new GoText(goSchemaJSON(s)), `only [${allowedAtRoot.join(' ')}] fields are allowed at the root of the schema if the status subresource is enabled`));
        break;
      }
    }
  }
  if (s.nullable) out.push(forbidden(`${path}.nullable`, 'nullable cannot be true at the root'));
  const structural: FieldError[] = [];
  // Keywords NewStructural cannot convert: the server then reports only their own errors (below).
  if (!unconvertible(s)) structuralErrors(s, 'root', path, structural);
  structural.sort((a, b) => (errorString(a) < errorString(b) ? -1 : errorString(a) > errorString(b) ? 1 : 0));
  out.push(...structural);
  if (structural.length === 0) defaultErrors({ ...s, 'x-kubernetes-embedded-resource': true }, path, false, out);
  openAPIErrors(s, path, {}, true, out);
  return out;
}

/**
 * The errors kube-apiserver reports for the schemas of a CRD manifest (apiextensions.k8s.io/v1): every version's
 * `schema.openAPIV3Schema`, hoisted to `spec.validation` when all versions have the same one, as the server converts
 * it. [] when it would accept them.
 */
export function validateCRDSchemas(crd: unknown): FieldError[] {
  const spec = isObj(crd) && isObj(crd['spec']) ? crd['spec'] : {};
  const versions = (Array.isArray(spec['versions']) ? spec['versions'] : []).filter(isObj);
  const schemaOf = (v: Json): unknown => (isObj(v['schema']) ? v['schema']['openAPIV3Schema'] : undefined);
  const statusOf = (v: Json): boolean => isObj(v['subresources']) && v['subresources']['status'] !== undefined && v['subresources']['status'] !== null;
  const same = (f: (v: Json) => unknown): boolean => versions.every((v) => JSON.stringify(f(v)) === JSON.stringify(f(versions[0] ?? {})));
  if (versions.length > 0 && same(schemaOf)) {
    const sub = same(statusOf) ? statusOf(versions[0] ?? {}) : false;
    if (schemaOf(versions[0] ?? {}) !== undefined) return validateCRDSchema(schemaOf(versions[0] ?? {}), 'spec.validation.openAPIV3Schema', sub);
  }
  // A version without a schema: apiextensions.k8s.io/v1 requires one ("spec.versions[i].schema.openAPIV3Schema: Required value").
  return versions.flatMap((v, i) => (schemaOf(v) === undefined ? [required(`spec.versions[${i}].schema.openAPIV3Schema`)]
    : validateCRDSchema(schemaOf(v), `spec.versions[${i}].schema.openAPIV3Schema`, statusOf(v))));
}

/** The server's message for a CRD it refuses: `CustomResourceDefinition.apiextensions.k8s.io "<name>" is invalid: …`. */
export function crdInvalidMessage(name: string, errs: readonly FieldError[]): string {
  return `CustomResourceDefinition.apiextensions.k8s.io ${goQuote(name)} is invalid: ${aggregateMessage(errs)}`;
}
