/**
 * Validation of a JSON value against a CRD's OpenAPI v3 schema as kube-apiserver does it: a port of k8s.io/kube-openapi
 * pkg/validation/validate (SchemaValidator and its type, schema-props, string, format, number, slice, enum and object
 * validators, in that order per node) and of apiextensions-apiserver's kubeOpenAPIResultToFieldErrors, which turns
 * each error into the field error of the 422 answer. Pure: no I/O.
 *
 *   validateValue(schema, object)              → FieldError[] (paths from the root: "spec.replicas")
 *   validateValue(statusSchema, status, 'status') → paths under "status", messages as the server words them
 *
 * What the port keeps of the Go code, on purpose: the message texts ("spec.replicas in body should be less than or
 * equal to 10"), which validators run for which JSON kind, the integer/float distinction of the decoded JSON (an
 * integer literal is an int64; the server checks `multipleOf`, `minimum` and `maximum` of integers in integer
 * arithmetic, truncating the bound), the range check of int32/int64/float formats ("Checked value must be of type
 * integer with format int32 in spec.replicas", reported under the field `<nil>`), and de-duplication of identical
 * messages. The order of errors of different properties is the schema's here; the server's follows Go map iteration
 * and varies between requests.
 *
 * Numbers: JSON.parse cannot tell `2` from `2.0`; a value is an integer (Go int64) when it is integral and within
 * ±2^63, as the server decodes every integer literal the client (JSON.stringify) writes.
 */
import { formatCheck } from './formats.ts';
import { invalid, notSupported, omitValue, required, tooLong, tooMany, typeInvalid, goFloat, goJSON, type FieldError } from './fielderrors.ts';

/** The schema fields validation reads (apiextensions.k8s.io/v1 JSONSchemaProps). */
export interface ValidationSchema {
  type?: string;
  format?: string;
  description?: string;
  nullable?: boolean;
  enum?: unknown[];
  default?: unknown;
  properties?: Record<string, ValidationSchema>;
  required?: string[];
  items?: ValidationSchema;
  additionalProperties?: boolean | ValidationSchema;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  allOf?: ValidationSchema[];
  anyOf?: ValidationSchema[];
  oneOf?: ValidationSchema[];
  not?: ValidationSchema;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: string;
  'x-kubernetes-validations'?: unknown[];
}

/** One kube-openapi error: its code decides the field error it becomes. */
interface OpenAPIError {
  code: 'type' | 'required' | 'tooLong' | 'tooShort' | 'pattern' | 'enum' | 'multipleOf' | 'max' | 'min' | 'unique'
    | 'maxItems' | 'minItems' | 'tooFewProperties' | 'tooManyProperties' | 'unallowedProperty' | 'multipleOfMustBePositive'
    | 'composite' | 'plain';
  /** The validator's path ("spec.replicas", ".spec" for a required root property, "" for the root). */
  name: string;
  value?: unknown;
  values?: unknown[];
  valid?: number;
  message: string;
}

type Kind = 'null' | 'bool' | 'int' | 'float' | 'string' | 'slice' | 'map';

/** The Go kind of a decoded JSON value (see the file comment on numbers). */
function kindOf(v: unknown): Kind {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'boolean': return 'bool';
    case 'string': return 'string';
    case 'number': return Number.isInteger(v) && Math.abs(v) < 2 ** 63 ? 'int' : 'float';
    default: return Array.isArray(v) ? 'slice' : 'map';
  }
}

/** The schema type names (with int-or-string: integer and string). */
function typesOf(s: ValidationSchema): string[] {
  if (s['x-kubernetes-int-or-string']) return ['integer', 'string'];
  return s.type ? [s.type] : [];
}

/** The format the server keeps after StripUnsupportedFormatsPostProcess. */
function effectiveFormat(s: ValidationSchema): string {
  const f = s.format ?? '';
  if (!f) return '';
  const types = typesOf(s);
  const t = types.length === 1 ? types[0] : '';
  switch (t) {
    case '': case 'string': return formatCheck(f) ? f : '';
    case 'integer': return f === 'int32' || f === 'int64' ? f : '';
    case 'number': return f === 'float' || f === 'double' ? f : '';
    default: return '';
  }
}

const at = (path: string, child: string): string => (path ? `${path}.${child}` : child);

/** Go's `%v` of a value inside an error message (numbers as int64/float64, strings bare). */
function v(x: unknown): string {
  if (typeof x === 'number') return kindOf(x) === 'int' ? BigInt(x).toString() : goFloat(x);
  if (typeof x === 'string') return x;
  if (Array.isArray(x)) return `[${x.map(v).join(' ')}]`;
  return goJSON(x);
}

/** swag.IsFloat64AJSONInteger: integral within a relative error of 1e-9. */
function isJSONInteger(f: number): boolean {
  if (!Number.isFinite(f)) return false;
  const g = Math.trunc(f);
  if (f === g) return true;
  const diff = Math.abs(f - g);
  if (g === 0) return diff < 1e-9 * Number.MIN_VALUE;
  return diff / Math.min(Math.abs(f) + Math.abs(g), Number.MAX_VALUE) < 1e-9;
}

/** The Go type name of a kind as schemaInfoForType reports it: [type, format]. */
function schemaInfo(kind: Kind): [string, string] {
  switch (kind) {
    case 'bool': return ['boolean', ''];
    case 'string': return ['string', ''];
    case 'int': return ['integer', 'int64'];
    case 'float': return ['number', 'float64'];
    case 'slice': return ['array', ''];
    case 'map': return ['object', ''];
    default: return ['', ''];
  }
}

const typeMessage = (path: string, typeName: string, value: unknown): string =>
  typeof value === 'string' ? `${path} in body must be of type ${typeName}: "${value}"` : `${path} in body must be of type ${typeName}`;

/** A JSON value against one schema node (kube-openapi's SchemaValidator.Validate). */
function validateNode(s: ValidationSchema, path: string, data: unknown, out: OpenAPIError[]): void {
  const add = (e: OpenAPIError): void => {
    if (!out.some((o) => o.message === e.message && o.code === e.code && o.name === e.name)) out.push(e);
  };
  const types = typesOf(s);
  const format = effectiveFormat(s);
  const kind = kindOf(data);
  if (kind === 'null') {
    // type validator, then the enum validator
    if (types.length > 0 && !types.includes('null') && !s.nullable) add({ code: 'type', name: path, value: 'null', message: typeMessage(path, types.join(','), 'null') });
    enumCheck(s, path, data, add);
    return;
  }
  // type validator
  if (types.length > 0 || format !== '') {
    const [schType, fmt] = schemaInfo(kind);
    const isFloatInt = schType === 'number' && isJSONInteger(data as number) && types.includes('integer');
    const isIntFloat = schType === 'integer' && types.includes('number');
    const isLowerInt = format === 'int64' && fmt === 'int32';
    if (kind !== 'string' && kind !== 'slice' && format !== '' && !(types.includes(schType) || fmt === format || isFloatInt || isIntFloat || isLowerInt)) {
      add({ code: 'type', name: path, value: fmt, message: typeMessage(path, format, fmt) });
    } else if (!(!(types.includes('number') || types.includes('integer')) && format !== '' && (kind === 'string' || kind === 'slice'))) {
      if (!(types.includes(schType) || isFloatInt || isIntFloat)) add({ code: 'type', name: path, value: schType, message: typeMessage(path, types.join(','), schType) });
    }
  }
  // schema props validator (allOf, oneOf, anyOf, not)
  schemaProps(s, path, data, add);
  // string validator: the first of maxLength, minLength, pattern that fails
  if (kind === 'string') {
    const str = data as string;
    const len = [...str].length;
    if (s.maxLength !== undefined && len > s.maxLength) add({ code: 'tooLong', name: path, value: str, valid: s.maxLength, message: `${path} in body should be at most ${s.maxLength} chars long` });
    else if (s.minLength !== undefined && len < s.minLength) add({ code: 'tooShort', name: path, value: str, valid: s.minLength, message: `${path} in body should be at least ${s.minLength} chars long` });
    else if (s.pattern) {
      const re = compilePattern(s.pattern);
      if (typeof re === 'string') add({ code: 'pattern', name: path, value: str, message: `${path} in body should match '${s.pattern}, but pattern is invalid: ${re}'` });
      else if (!re.test(str)) add({ code: 'pattern', name: path, value: str, message: `${path} in body should match '${s.pattern}'` });
    }
    // format validator
    if (format !== '') {
      const check = formatCheck(format);
      if (check && !check(str)) add({ code: 'type', name: path, value: str, message: typeMessage(path, format, str) });
    }
  }
  // number validator
  if (kind === 'int' || kind === 'float') numberCheck(s, types, format, path, data as number, kind, add);
  // slice validator
  if (kind === 'slice') {
    const arr = data as unknown[];
    if (s.items) arr.forEach((item, i) => validateNode(s.items as ValidationSchema, `${path}[${i}]`, item, out));
    if (s.minItems !== undefined && arr.length < s.minItems) add({ code: 'minItems', name: path, value: arr.length, valid: s.minItems, message: `${path} in body should have at least ${s.minItems} items` });
    if (s.maxItems !== undefined && arr.length > s.maxItems) add({ code: 'maxItems', name: path, value: arr.length, valid: s.maxItems, message: `${path} in body should have at most ${s.maxItems} items` });
    if (s.uniqueItems && new Set(arr.map(goJSON)).size !== arr.length) add({ code: 'unique', name: path, message: `${path} in body shouldn't contain duplicates` });
  }
  // common validator (enum)
  enumCheck(s, path, data, add);
  // object validator
  if (kind === 'map') {
    const obj = data as Record<string, unknown>;
    const n = Object.keys(obj).length;
    if (s.minProperties !== undefined && n < s.minProperties) add({ code: 'tooFewProperties', name: path, value: n, valid: s.minProperties, message: `${path} in body should have at least ${s.minProperties} properties` });
    if (s.maxProperties !== undefined && n > s.maxProperties) add({ code: 'tooManyProperties', name: path, value: n, valid: s.maxProperties, message: `${path} in body should have at most ${s.maxProperties} properties` });
    const props = s.properties ?? {};
    if (s.additionalProperties === false) {
      for (const k of Object.keys(obj)) if (!(k in props)) add({ code: 'unallowedProperty', name: path, value: k, message: `${path}.${k} in body is a forbidden property` });
    } else if (typeof s.additionalProperties === 'object') {
      for (const [k, val] of Object.entries(obj)) if (!(k in props)) validateNode(s.additionalProperties, `${path}.${k}`, val, out);
    }
    for (const [k, ps] of Object.entries(props)) if (k in obj) validateNode(ps, at(path, k), obj[k], out);
    for (const k of s.required ?? []) if (!(k in obj)) add({ code: 'required', name: `${path}.${k}`, message: `${path}.${k} in body is required` });
  }
}

function enumCheck(s: ValidationSchema, path: string, data: unknown, add: (e: OpenAPIError) => void): void {
  if (!s.enum?.length) return;
  for (const e of s.enum) {
    if (e === null || e === undefined) continue;
    if (typeof e === 'number' && typeof data === 'number' ? e === data : goJSON(e) === goJSON(data)) return;
  }
  add({ code: 'enum', name: path, value: data, values: s.enum, message: `${path} in body should be one of [${s.enum.map(v).join(' ')}]` });
}

/** kube-openapi's numberValidator: the format range check, then multipleOf, minimum, maximum. */
function numberCheck(s: ValidationSchema, types: string[], format: string, path: string, n: number, kind: Kind, add: (e: OpenAPIError) => void): void {
  const typeName = types.length === 1 && (types[0] === 'integer' || types[0] === 'number') ? types[0] : '';
  const fmt = typeName === 'integer' && (format === 'int32' || format === 'int64') ? format : typeName === 'number' && (format === 'float' || format === 'double') ? format : '';
  const range = rangeError(n, kind, typeName, fmt, 'Checked', path);
  if (range) add({ code: 'plain', name: '', message: range });
  const isInt = kind === 'int';
  if (s.multipleOf !== undefined) {
    const f = s.multipleOf;
    if (isInt && !rangeError(f, kindOf(f), typeName, fmt, 'MultipleOf', path)) {
      const fi = Math.trunc(f);
      if (fi <= 0) add({ code: 'multipleOfMustBePositive', name: path, value: fi, message: `factor MultipleOf declared for ${path} must be positive: ${fi}` });
      else if (n % fi !== 0) add({ code: 'multipleOf', name: path, value: n, message: `${path} in body should be a multiple of ${fi}` });
    } else if (f <= 0) {
      add({ code: 'multipleOfMustBePositive', name: path, value: f, message: `factor MultipleOf declared for ${path} must be positive: ${v(f)}` });
    } else {
      const mult = f < 1 ? (1 / f) * n : n / f;
      if (!isJSONInteger(mult)) add({ code: 'multipleOf', name: path, value: n, message: `${path} in body should be a multiple of ${v(f)}` });
    }
  }
  if (s.minimum !== undefined) {
    const min = s.minimum;
    const ex = !!s.exclusiveMinimum;
    const bound = isInt && !rangeError(min, kindOf(min), typeName, fmt, 'Minimum boundary', path) ? Math.trunc(min) : min;
    if ((!ex && n < bound) || (ex && n <= bound)) add({ code: 'min', name: path, value: n, message: `${path} in body should be greater than ${ex ? '' : 'or equal to '}${v(bound)}` });
  }
  if (s.maximum !== undefined) {
    const max = s.maximum;
    const ex = !!s.exclusiveMaximum;
    const bound = isInt && !rangeError(max, kindOf(max), typeName, fmt, 'Maximum boundary', path) ? Math.trunc(max) : max;
    if ((!ex && n > bound) || (ex && n >= bound)) add({ code: 'max', name: path, value: n, message: `${path} in body should be less than ${ex ? '' : 'or equal to '}${v(bound)}` });
  }
}

/** IsValueValidAgainstRange: whether `n` (as its kind's string form) converts to the type/format; the error text or ''. */
function rangeError(n: number, kind: Kind, typeName: string, format: string, prefix: string, path: string): string {
  const rep = kind === 'int' ? BigInt(n).toString() : goFloat(n);
  let ok = true;
  if (typeName === 'integer') {
    const isIntRep = /^[-+]?\d+$/.test(rep);
    const big = isIntRep ? BigInt(rep) : undefined;
    if (format === 'int32') ok = big !== undefined && big >= -(2n ** 31n) && big < 2n ** 31n;
    else ok = big !== undefined && big >= -(2n ** 63n) && big < 2n ** 63n;
  } else if (format === 'float') {
    ok = Math.abs(n) <= 3.4028234663852886e38;
  }
  if (ok) return '';
  return format ? `${prefix} value must be of type ${typeName} with format ${format} in ${path}` : `${prefix} value must be of type ${typeName} (default format) in ${path}`;
}

/**
 * allOf / oneOf / anyOf / not (kube-openapi's schemaPropsValidator): the junctor's own error (`"spec.x" must validate
 * at least one schema (anyOf)`) and the errors of one failing alternative. The server merges the alternative that
 * ran the most checks ("MatchCount"); this port merges the first failing one: the junctor's message is exact, the
 * nested ones may name another alternative (FakeClient reports schemas with junctors at construction).
 */
function schemaProps(s: ValidationSchema, path: string, data: unknown, add: (e: OpenAPIError) => void): void {
  const run = (sub: ValidationSchema): OpenAPIError[] => {
    const errs: OpenAPIError[] = [];
    validateNode(sub, path, data, errs);
    return errs;
  };
  const q = JSON.stringify(path);
  if (s.anyOf?.length) {
    const results = s.anyOf.map(run);
    if (!results.some((r) => r.length === 0)) {
      add({ code: 'composite', name: '', message: `${q} must validate at least one schema (anyOf)` });
      for (const e of results[0] ?? []) add(e);
    }
  }
  if (s.oneOf?.length) {
    const results = s.oneOf.map(run);
    const valid = results.filter((r) => r.length === 0).length;
    if (valid !== 1) {
      add({ code: 'composite', name: '', message: `${q} must validate one and only one schema (oneOf). ${valid === 0 ? 'Found none valid' : `Found ${valid} valid alternatives`}` });
      if (valid === 0) for (const e of results[0] ?? []) add(e);
    }
  }
  if (s.allOf?.length) {
    const results = s.allOf.map(run);
    for (const r of results) for (const e of r) add(e);
    const validated = results.filter((r) => r.length === 0).length;
    if (validated !== results.length) add({ code: 'composite', name: '', message: `${q} must validate all the schemas (allOf)${validated === 0 ? '. None validated' : ''}` });
  }
  if (s.not && run(s.not).length === 0) add({ code: 'composite', name: '', message: `${q} must not validate the schema (not)` });
}

/** A schema pattern compiled: the regexp, Go's error (the server refuses the CRD), or why ECMAScript cannot run it. */
export type CompiledPattern = { re: RegExp } | { goError: string } | { unsupported: string };

const patternCache = new Map<string, CompiledPattern>();

/**
 * A schema pattern (Go RE2 syntax) as an ECMAScript regexp, unanchored as the server matches it. A pattern RE2 refuses
 * gets Go's error text (`error parsing regexp: missing closing ]: \`[a-\``) for the constructs both engines refuse
 * (unterminated classes and groups, an unmatched `)`, a repetition without argument or nested, a trailing backslash,
 * a reversed range or repeat count, a repeat count above 1000, lookarounds and backreferences, unknown \p classes).
 * A pattern ECMAScript cannot compile for another reason (RE2's `(?i)` flags, `(?P<name>…)`, `\z`, `\Q…\E`, POSIX
 * classes) is `unsupported`: RE2 may accept it, and the FakeClient refuses such a CRD with FakeUnsupportedError.
 */
export function compilePatternDetail(pattern: string): CompiledPattern {
  let c = patternCache.get(pattern);
  if (c === undefined) {
    c = compileUncached(pattern);
    patternCache.set(pattern, c);
  }
  return c;
}

/** The regexp of a pattern, or the text of why it has none (Go's error, or what ECMAScript lacks). */
export function compilePattern(pattern: string): RegExp | string {
  const c = compilePatternDetail(pattern);
  return 're' in c ? c.re : 'goError' in c ? c.goError : c.unsupported;
}

function compileUncached(pattern: string): CompiledPattern {
  const go = (code: string, expr: string): CompiledPattern => ({ goError: `error parsing regexp: ${code}: \`${expr}\`` });
  const plain = pattern.replace(/\\./g, '__');
  const perl = /(\(\?<?[=!])/.exec(plain);
  if (perl) return go('invalid or unsupported Perl syntax', perl[1] ?? '');
  const backref = /\\[1-9]/.exec(pattern.replace(/\\\\/g, '__'));
  if (backref) return go('invalid escape sequence', backref[0]);
  const big = /\{(\d+)(?:,(\d*))?\}/g;
  for (let m = big.exec(plain); m; m = big.exec(plain)) {
    if (Number(m[1]) > 1000 || Number(m[2] || 0) > 1000) return go('invalid repeat count', m[0]);
  }
  try {
    return { re: new RegExp(pattern, 'u') };
  } catch (err) {
    const msg = (err as Error).message;
    const what = msg.slice(msg.lastIndexOf(': ') + 2);
    switch (what) {
      case 'Unterminated character class': return go('missing closing ]', pattern.slice(unclosedClass(pattern)));
      case 'Unterminated group': return go('missing closing )', pattern);
      case "Unmatched ')'": return go('unexpected )', pattern);
      case '\\ at end of pattern': return { goError: 'error parsing regexp: trailing backslash at end of expression: ``' };
      case 'Nothing to repeat': {
        const m = /(^|[(|]|[*+?}])([*+?])(\??)/.exec(plain.replace(/\[[^\]]*\]/g, 'x'));
        if (m && m[1] !== '' && /[*+?}]/.test(m[1] ?? '')) return go('invalid nested repetition operator', `${m[1] ?? ''}${m[2] ?? ''}${m[3] ?? ''}`);
        if (m) return go('missing argument to repetition operator', `${m[2] ?? ''}${m[3] ?? ''}`);
        break;
      }
      case 'Range out of order in character class': {
        const m = /([^\\[\]])-([^\\\]])/g;
        for (let r = m.exec(pattern); r; r = m.exec(pattern)) if ((r[1] ?? '') > (r[2] ?? '')) return go('invalid character class range', `${r[1] ?? ''}-${r[2] ?? ''}`);
        break;
      }
      case 'numbers out of order in {} quantifier': {
        const m = /\{\d+,\d+\}/.exec(plain);
        if (m) return go('invalid repeat count', m[0]);
        break;
      }
      case 'Invalid property name': {
        const m = /\\[pP]\{[^}]*\}/.exec(pattern);
        if (m) return go('invalid character class range', m[0]);
        break;
      }
      default: break;
    }
    return { unsupported: `ECMAScript cannot compile the pattern ${JSON.stringify(pattern)} (${what}); RE2 syntax it lacks ((?i), (?P<name>…), \\z, \\Q…\\E, [[:alpha:]]) is not checked` };
  }
}

/** The index of the `[` that opens a character class never closed (for Go's "missing closing ]"). */
function unclosedClass(pattern: string): number {
  let open = -1;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === '\\') i++;
    else if (open < 0 && ch === '[') {
      open = i;
      if (pattern[i + 1] === '^') i++;
      if (pattern[i + 1] === ']') i++;
    } else if (open >= 0 && ch === ']') open = -1;
  }
  return Math.max(open, 0);
}

/** kubeOpenAPIResultToFieldErrors: each kube-openapi error as the server's field error, under `root` ('' or "status"). */
function toFieldError(e: OpenAPIError, root: string): FieldError {
  const name = e.name.replace(/^\./, '');
  const field = e.code === 'plain' || e.code === 'composite' ? (root || '<nil>') : (name && e.name !== '.' ? at(root, name) : root || '<nil>');
  const value = e.value ?? '';
  switch (e.code) {
    case 'required': return required(field);
    case 'enum': return notSupported(field, e.value, (e.values ?? []).map((x) => (typeof x === 'string' ? x : goJSON(x))));
    case 'tooLong': return tooLong(field, e.valid ?? -1);
    case 'maxItems': case 'tooManyProperties': return tooMany(field, typeof e.value === 'number' ? e.value : -1, e.valid ?? -1);
    case 'type': return typeInvalid(field, value, e.message);
    case 'plain': case 'composite': return invalid(field, '', e.message);
    default: return invalid(field, value, e.message);
  }
}

/**
 * The field errors kube-apiserver reports for `data` against `schema` (a CRD version's openAPIV3Schema, or its
 * `status` property for a /status write with `root` "status"). [] when valid.
 */
export function validateValue(schema: ValidationSchema, data: unknown, root = ''): FieldError[] {
  const errs: OpenAPIError[] = [];
  validateNode(schema, '', data, errs);
  return errs.map((e) => toFieldError(e, root));
}

export { omitValue };
