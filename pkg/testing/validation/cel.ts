/**
 * CEL validation rules of a CRD schema (`x-kubernetes-validations`) for the FakeClient, as kube-apiserver evaluates
 * them (apiextensions-apiserver pkg/apiserver/schema/cel): each rule at every value its schema node matches, with
 * `self` that value and, for a transition rule, `oldSelf` the correlated old value (object properties, map values,
 * items of `x-kubernetes-list-type: map` lists by key); the 422 field error is the server's — the node's path (plus
 * the rule's `fieldPath`), the rule's `reason` (Invalid by default), the value for scalars (omitted for objects and
 * lists), `message`, else a non-empty string from `messageExpression`, else `failed rule: <rule>`; an evaluation
 * error is `Invalid value: "<type>": <error> evaluating rule: <rule>`.
 *
 * The evaluator is @marcbachmann/cel-js, loaded only when a schema has rules. What it cannot evaluate as the server
 * would is reported when the CRD is compiled (`compileRules` returns it and leaves those rules out; FakeClient.addCRD
 * names them — `unchecked`, a warning — or throws FakeUnsupportedError with `uncheckedRules: 'refuse'`): Kubernetes' CEL libraries the package lacks (`isSorted`,
 * `quantity`, `url`, `ip`, `cidr`, `format.*`, `sets.*`, `math.*`, `authorizer`, …), the package's own functions the
 * server does not have (`json`, `hex`, `at`), `optionalOldSelf`, and rules over `byte`, `duration`, `date` or
 * `date-time` strings (CEL bytes and timestamps on the server). An overload the package lacks at run time throws too
 * (`onUnsupported`). Not done: cost estimation and the runtime cost budget (the server refuses a CRD whose rules are
 * estimated too costly; the fake does not), validation ratcheting of unchanged values other than "a rule whose
 * value did not change is not evaluated on update".
 */
import { createRequire } from 'node:module';
import type * as CelJs from '@marcbachmann/cel-js';
import { duplicate, forbidden, invalid, omitValue, required, type FieldError } from '../../codegen/fielderrors.ts';
import type { ValidationSchema } from '../../codegen/openapivalidate.ts';

type CelModule = typeof CelJs;
type Program = ReturnType<InstanceType<CelModule['Environment']>['parse']>;
type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One `x-kubernetes-validations` entry. */
export interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: string;
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

interface Compiled {
  rule: CelRule;
  program: Program;
  message?: Program;
  transition: boolean;
}

/** The compiled rules of one CRD version's schema: `validate` gives their field errors. */
export interface CelValidator {
  /** The field errors of `obj` (and, on update, its stored `old`): [] when every rule holds. */
  validate(obj: unknown, old: unknown): FieldError[];
}

/** The rules of a schema compiled, or what the fake cannot check of them (one line per rule). */
export type CompiledRules = { validator?: CelValidator; unsupported: string[] };

let celModule: CelModule | undefined;
/** @marcbachmann/cel-js, loaded on first use (synchronously: require of an ES module without top-level await). */
function cel(): CelModule {
  celModule ??= createRequire(import.meta.url)('@marcbachmann/cel-js') as CelModule;
  return celModule;
}

/** Functions and macros both cel-js and Kubernetes' CEL environment have (standard CEL, strings ext, timestamps). */
const shared = new Set(['has', 'all', 'exists', 'exists_one', 'map', 'filter', 'size', 'int', 'uint', 'double', 'string', 'bytes', 'bool', 'dyn',
  'type', 'duration', 'timestamp', 'contains', 'startsWith', 'endsWith', 'matches', 'lowerAscii', 'upperAscii', 'trim', 'indexOf', 'lastIndexOf',
  'substring', 'split', 'join', 'getDate', 'getDayOfMonth', 'getDayOfWeek', 'getDayOfYear', 'getFullYear', 'getHours', 'getMilliseconds',
  'getMinutes', 'getMonth', 'getSeconds']);
const macros = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);
const unsupportedFormats = new Set(['byte', 'duration', 'date', 'date-time']);

interface Node { op: string; args: unknown }

/** The functions a rule calls that the fake cannot evaluate as the server, and whether it reads oldSelf. */
function inspect(ast: Node): { missing: string[]; transition: boolean } {
  const missing = new Set<string>();
  let transition = false;
  const walk = (n: unknown, bound: Set<string>): void => {
    if (!isObj(n) || typeof n['op'] !== 'string') return;
    const { op, args } = n as unknown as Node;
    if (op === 'id') {
      if (args === 'oldSelf') transition = true;
      else if (args !== 'self' && !bound.has(String(args))) missing.add(String(args));
      return;
    }
    if (op === 'call' && Array.isArray(args)) {
      const [name, params] = args as [string, unknown[]];
      if (!shared.has(name)) missing.add(`${name}()`);
      for (const p of params) walk(p, bound);
      return;
    }
    if (op === 'rcall' && Array.isArray(args)) {
      const [name, recv, params] = args as [string, Node, unknown[]];
      if (recv.op === 'id' && recv.args !== 'self' && recv.args !== 'oldSelf' && !bound.has(String(recv.args))) {
        missing.add(`${String(recv.args)}.${name}()`);
        return;
      }
      if (!shared.has(name)) missing.add(`${name}()`);
      walk(recv, bound);
      if (macros.has(name) && isObj(params[0]) && params[0]['op'] === 'id') {
        const inner = new Set([...bound, String(params[0]['args'])]);
        for (const p of params.slice(1)) walk(p, inner);
      } else for (const p of params) walk(p, bound);
      return;
    }
    if (op === 'value') return;
    const list = Array.isArray(args) ? args : [args];
    for (const a of list) {
      if (Array.isArray(a)) for (const x of a) walk(x, bound);
      else walk(a, bound);
    }
  };
  walk(ast, new Set());
  return { missing: [...missing], transition };
}

/** Whether a schema node or one below it has a format the server turns into a CEL type cel-js is not given. */
function hasCelFormat(s: ValidationSchema | undefined): string | undefined {
  if (!s) return undefined;
  if (s.type === 'string' && s.format && unsupportedFormats.has(s.format)) return s.format;
  for (const p of Object.values(s.properties ?? {})) { const f = hasCelFormat(p); if (f) return f; }
  if (typeof s.additionalProperties === 'object') { const f = hasCelFormat(s.additionalProperties); if (f) return f; }
  return hasCelFormat(s.items);
}

/** Whether a schema (anywhere) has x-kubernetes-validations. */
export function hasRules(s: ValidationSchema | undefined): boolean {
  if (!s) return false;
  if (s['x-kubernetes-validations']?.length) return true;
  if (Object.values(s.properties ?? {}).some(hasRules)) return true;
  return (typeof s.additionalProperties === 'object' && hasRules(s.additionalProperties)) || hasRules(s.items);
}

/**
 * Compiles every rule of a CRD version's schema; `unsupported` lists what the fake cannot evaluate as the server
 * (the caller refuses the CRD then). No validator when the schema has no rules (cel-js is not loaded).
 */
export function compileRules(schema: ValidationSchema | undefined): CompiledRules {
  if (!hasRules(schema)) return { unsupported: [] };
  const { Environment } = cel();
  const env = new Environment({ homogeneousAggregateLiterals: false }).registerVariable('self', 'dyn').registerVariable('oldSelf', 'dyn');
  const rules = new Map<ValidationSchema, Compiled[]>();
  const unsupported: string[] = [];
  const walk = (s: ValidationSchema, path: string): void => {
    const list = (s['x-kubernetes-validations'] ?? []) as CelRule[];
    const compiled: Compiled[] = [];
    list.forEach((r, i) => {
      const where = `${path || '<root>'} x-kubernetes-validations[${i}] ${JSON.stringify(r.rule)}`;
      if (r.optionalOldSelf) { unsupported.push(`${where}: optionalOldSelf`); return; }
      const format = hasCelFormat(s);
      if (format) { unsupported.push(`${where}: a value of format ${format} (a CEL ${format === 'byte' ? 'bytes' : format === 'duration' ? 'duration' : 'timestamp'} on the server)`); return; }
      let program: Program;
      let message: Program | undefined;
      try {
        program = env.parse(r.rule);
        message = r.messageExpression ? env.parse(r.messageExpression) : undefined;
      } catch (err) {
        unsupported.push(`${where}: cel-js cannot parse it (${(err as Error).message.split('\n')[0] ?? ''}); the server's compile error is not reproduced`);
        return;
      }
      const seen = inspect(program.ast);
      const missing = [...seen.missing, ...(message ? inspect(message.ast).missing : [])];
      if (missing.length) { unsupported.push(`${where}: ${[...new Set(missing)].join(', ')} (a Kubernetes CEL library function or variable cel-js does not have)`); return; }
      compiled.push({ rule: r, program, ...(message ? { message } : {}), transition: seen.transition });
    });
    if (compiled.length) rules.set(s, compiled);
    for (const [k, p] of Object.entries(s.properties ?? {})) walk(p, path ? `${path}.${k}` : k);
    if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${path}[*]`);
    if (s.items) walk(s.items, `${path}[*]`);
  };
  if (schema) walk(schema, '');
  return { validator: { validate: (obj, old) => evaluate(rules, schema, obj, old) }, unsupported };
}

/** Thrown when cel-js meets an overload at run time that the server's environment has (e.g. indexOf of a list). */
export class CelUnsupportedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CelUnsupportedError';
  }
}

/** A JSON value as the server gives it to CEL: integers (of integer fields, and of untyped ones) as int (bigint). */
function toCel(v: unknown, s: ValidationSchema | undefined): unknown {
  if (typeof v === 'number') return Number.isInteger(v) && (s?.type === 'integer' || s?.['x-kubernetes-int-or-string'] || !s?.type) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map((x) => toCel(x, s?.items));
  if (isObj(v)) {
    const out: Json = {};
    for (const [k, x] of Object.entries(v)) out[k] = toCel(x, s?.properties?.[k] ?? (typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined));
    return out;
  }
  return v;
}

const jsonEqual = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** `.a.b`, `['k']`, `[0]` of a rule's fieldPath as Go prints the field path: `.a.b`, `[k]`, `[0]`. */
function fieldPathSuffix(fp: string): string {
  let out = '';
  const re = /\.([A-Za-z_][A-Za-z0-9_-]*)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*(\d+)\s*\]/gy;
  for (let m = re.exec(fp); m; m = re.exec(fp)) out += m[1] !== undefined ? `.${m[1]}` : `[${m[2] ?? m[3] ?? m[4] ?? ''}]`;
  return out;
}

function evaluate(rules: Map<ValidationSchema, Compiled[]>, root: ValidationSchema | undefined, obj: unknown, oldObj: unknown): FieldError[] {
  const errs: FieldError[] = [];
  const walk = (s: ValidationSchema | undefined, v: unknown, old: unknown, hasOld: boolean, path: string): void => {
    if (!s || v === undefined || v === null) return;
    const compiled = rules.get(s);
    if (compiled && !(hasOld && jsonEqual(v, old))) {
      const self = toCel(v, s);
      for (const c of compiled) {
        if (c.transition && !hasOld) continue;
        const ctx = { self, ...(c.transition ? { oldSelf: toCel(old, s) } : {}) };
        const rule = c.rule;
        let ok: unknown;
        try {
          ok = c.program(ctx);
        } catch (err) {
          const msg = (err as Error).message.split('\n')[0] ?? '';
          if (/no matching overload|no such overload/i.test(msg)) throw new CelUnsupportedError(`the CEL rule ${JSON.stringify(rule.rule)} at ${path || '<root>'}: cel-js: ${msg}`);
          const type = s['x-kubernetes-int-or-string'] ? (typeof v === 'string' ? 'string' : 'integer') : (s.type ?? 'object');
          errs.push(invalid(path || '<nil>', type, `${msg.replace(/^No such key: /, 'no such key: ')} evaluating rule: ${rule.rule.trim()}`));
          continue;
        }
        if (ok === true) continue;
        let detail = rule.message ?? `failed rule: ${rule.rule.trim()}`;
        if (c.message) {
          try {
            const m: unknown = c.message(ctx);
            if (typeof m === 'string' && m.trim() !== '' && !m.includes('\n')) detail = m;
          } catch {
            // the server logs the messageExpression's error and uses the message (or "failed rule: …")
          }
        }
        const field = `${path}${rule.fieldPath ? fieldPathSuffix(rule.fieldPath) : ''}`.replace(/^\./, '') || '<nil>';
        const value = isObj(v) || Array.isArray(v) ? omitValue : v;
        switch (rule.reason) {
          case 'FieldValueForbidden': errs.push(forbidden(field, detail)); break;
          case 'FieldValueRequired': errs.push(required(field, detail)); break;
          case 'FieldValueDuplicate': errs.push(duplicate(field, value)); break;
          default: errs.push(invalid(field, value, detail));
        }
      }
    }
    if (isObj(v)) {
      const o = isObj(old) ? old : undefined;
      for (const [k, x] of Object.entries(v)) {
        const p = s.properties?.[k];
        if (p) walk(p, x, o?.[k], !!o && k in o, path ? `${path}.${k}` : k);
        else if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, x, o?.[k], !!o && k in o, `${path}[${k}]`);
      }
    } else if (Array.isArray(v)) {
      const keys = s['x-kubernetes-list-type'] === 'map' ? s['x-kubernetes-list-map-keys'] ?? [] : undefined;
      const keyOf = (item: unknown): string => JSON.stringify((keys ?? []).map((k) => (isObj(item) ? item[k] : undefined)));
      const olds = keys && Array.isArray(old) ? new Map<string, unknown>((old as unknown[]).map((o) => [keyOf(o), o])) : undefined;
      v.forEach((item, i) => {
        const o = olds?.get(keyOf(item));
        walk(s.items, item, o, o !== undefined, `${path}[${i}]`);
      });
    }
  };
  walk(root, obj, oldObj, oldObj !== undefined, '');
  return errs;
}
