/**
 * Field errors as kube-apiserver words them (k8s.io/apimachinery/pkg/util/validation/field): the `<field>: <body>`
 * strings of a 422 Invalid answer, its `details.causes`, and the aggregate message
 * `<Kind>.<group> "<name>" is invalid: [<error>, <error>]`. Pure: no I/O. Used by the CRD checks of `gen types`
 * (structural.ts) and by the FakeClient's validation (pkg/testing/validation).
 *
 * Invariant: `errorBody` and `aggregateMessage` produce byte-for-byte what Go's `(*field.Error).ErrorBody()` and
 * `utilerrors.NewAggregate(list).Error()` produce for the same error list (duplicates dropped, one error unbracketed);
 * a bad value is printed as Go's `%v` / `%q` / `json.Marshal` would print the decoded JSON value.
 */

/** The cause types of `details.causes` (metav1.CauseType values of field errors). */
export type FieldErrorType =
  | 'FieldValueNotFound' | 'FieldValueRequired' | 'FieldValueDuplicate' | 'FieldValueInvalid' | 'FieldValueNotSupported'
  | 'FieldValueForbidden' | 'FieldValueTooLong' | 'FieldValueTooMany' | 'FieldValueTooFew' | 'InternalError'
  | 'FieldValueTypeInvalid' | 'FieldValueTooShort';

/** The marker of a value the message leaves out (Go's field.OmitValueType). */
export const omitValue: unique symbol = Symbol('omitValue');

/** One field error: what `details.causes[]` carries (type, field) and what its message is made of. */
export interface FieldError {
  type: FieldErrorType;
  /** The field path as Go prints it: `spec.ports[0].name`, `metadata.labels[app]`, `<nil>` for none. */
  field: string;
  /** The value printed after the type (Invalid, NotSupported, TooMany, …); `omitValue` for none. */
  badValue?: unknown;
  detail: string;
}

const typeWords: Record<FieldErrorType, string> = {
  FieldValueNotFound: 'Not found', FieldValueRequired: 'Required value', FieldValueDuplicate: 'Duplicate value',
  FieldValueInvalid: 'Invalid value', FieldValueNotSupported: 'Unsupported value', FieldValueForbidden: 'Forbidden',
  FieldValueTooLong: 'Too long', FieldValueTooMany: 'Too many', FieldValueTooFew: 'Too few', InternalError: 'Internal error',
  FieldValueTypeInvalid: 'Invalid value', FieldValueTooShort: 'Too short',
};

/** `field.Invalid(path, value, detail)`. */
export const invalid = (field: string, badValue: unknown, detail: string): FieldError => ({ type: 'FieldValueInvalid', field, badValue, detail });
/** `field.TypeInvalid(path, value, detail)`. */
export const typeInvalid = (field: string, badValue: unknown, detail: string): FieldError => ({ type: 'FieldValueTypeInvalid', field, badValue, detail });
/** `field.Required(path, detail)`. */
export const required = (field: string, detail = ''): FieldError => ({ type: 'FieldValueRequired', field, badValue: '', detail });
/** `field.Forbidden(path, detail)`. */
export const forbidden = (field: string, detail: string): FieldError => ({ type: 'FieldValueForbidden', field, badValue: '', detail });
/** `field.Duplicate(path, value)`. */
export const duplicate = (field: string, badValue: unknown): FieldError => ({ type: 'FieldValueDuplicate', field, badValue, detail: '' });
/** `field.NotSupported(path, value, validValues)`: "supported values: "a", "b"". */
export function notSupported(field: string, badValue: unknown, valid: readonly string[]): FieldError {
  return { type: 'FieldValueNotSupported', field, badValue, detail: valid.length ? `supported values: ${valid.map((v) => goQuote(v)).join(', ')}` : '' };
}
/** `field.TooLong(path, _, max)`: "may not be more than N bytes". */
export function tooLong(field: string, max: number): FieldError {
  return { type: 'FieldValueTooLong', field, badValue: '<value omitted>', detail: max >= 0 ? `may not be more than ${max} ${max === 1 ? 'byte' : 'bytes'}` : 'value is too long' };
}
/** `field.TooMany(path, actual, max)`: "must have at most N items". */
export function tooMany(field: string, actual: number, max: number): FieldError {
  return { type: 'FieldValueTooMany', field, badValue: actual >= 0 ? actual : omitValue, detail: max >= 0 ? `must have at most ${max} ${max === 1 ? 'item' : 'items'}` : 'has too many items' };
}

/** Go's `(*field.Error).ErrorBody()`: "Invalid value: 50: detail". */
export function errorBody(e: FieldError): string {
  let s = typeWords[e.type];
  switch (e.type) {
    case 'FieldValueRequired': case 'FieldValueForbidden': case 'FieldValueTooLong': case 'FieldValueTooShort': case 'InternalError':
      break;
    default:
      if (e.badValue !== omitValue) s += `: ${goValue(e.badValue)}`;
  }
  return e.detail ? `${s}: ${e.detail}` : s;
}

/** Go's `(*field.Error).Error()`: "spec.replicas: Invalid value: 50: …". */
export function errorString(e: FieldError): string {
  return `${e.field}: ${errorBody(e)}`;
}

/** Go's aggregate of an error list: duplicates dropped, one error as is, several as "[a, b]"; '' for none. */
export function aggregateMessage(errs: readonly FieldError[]): string {
  const seen = [...new Set(errs.map(errorString))];
  return seen.length === 1 ? (seen[0] ?? '') : seen.length ? `[${seen.join(', ')}]` : '';
}

/**
 * `apierrors.NewInvalid(groupKind, name, errs)`'s Status body: message `Kind.group "name" is invalid: …`, reason
 * Invalid, code 422, `details` with group, kind, name and one cause per error.
 */
export function invalidStatus(group: string, kind: string, name: string, errs: readonly FieldError[]): Record<string, unknown> {
  const agg = aggregateMessage(errs);
  const gk = group ? `${kind}.${group}` : kind;
  return {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: agg ? `${gk} ${goQuote(name)} is invalid: ${agg}` : `${gk} ${goQuote(name)} is invalid`,
    reason: 'Invalid',
    details: { name, ...(group ? { group } : {}), kind, causes: errs.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field })) },
    code: 422,
  };
}

/** A decoded JSON value printed as Go prints the bad value of a field error (numbers and bools `%v`, strings `%q`, else JSON). */
export function goValue(v: unknown): string {
  if (typeof v === 'number') return goNumber(v);
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return goQuote(v);
  return goJSON(v);
}

/**
 * A JSON number as Go's `%v` prints what the API server decoded it to: an integer (int64) in decimal, any other number
 * (float64) as `goFloat`.
 */
export function goNumber(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) < 2 ** 63) return BigInt(n).toString();
  return goFloat(n);
}

/** Go's `strconv.FormatFloat(f, 'g', -1, 64)` (what `%v` prints for a float64): `1.5`, `1e+06`, `1.2345675e+06`, `1e-05`. */
export function goFloat(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : '-Inf';
  if (n === 0) return Object.is(n, -0) ? '-0' : '0';
  const [mant = '', expStr = '0'] = n.toExponential().split('e');
  const exp = Number(expStr);
  if (exp >= -4 && exp < 6) return String(n);
  return `${mant}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/** Go's `strconv.Quote` / `%q` for printable text: double quotes, `\"`, `\\`, and \n \t \r escapes. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/**
 * A bad value already in the form Go prints it (e.g. the JSON of a Go struct, whose members keep their declaration
 * order where `goJSON` sorts the keys of a map): printed as is.
 */
export class GoText {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/** Go's `json.Marshal` of a decoded JSON value: object keys sorted, `<`, `>`, `&` escaped as \u003c… (HTML-safe). */
export function goJSON(v: unknown): string {
  if (v instanceof GoText) return v.text;
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number') return goJSONNumber(v);
  if (typeof v === 'string') return JSON.stringify(v).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(goJSON).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o).sort().map((k) => `${goJSON(k)}:${goJSON(o[k])}`).join(',')}}`;
}

/** A number as Go's encoding/json writes a float64 (integers plain; exponent form below 1e-6 and from 1e21). */
function goJSONNumber(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) < 2 ** 63) return BigInt(n).toString();
  const abs = Math.abs(n);
  if (abs !== 0 && (abs < 1e-6 || abs >= 1e21)) {
    return n.toExponential().replace(/e([+-])(\d)$/, 'e$10$2');
  }
  return String(n);
}
