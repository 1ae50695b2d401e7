/**
 * Object metadata validation as kube-apiserver does it on create and update of every kind
 * (k8s.io/apimachinery/pkg/api/validation ValidateObjectMetaAccessor): the name (and generateName) by the kind's name
 * rule, label keys and values, annotation keys, finalizer names — with the server's messages. Pure.
 *
 * Not checked here (the FakeClient's own code answers them, or they are not modelled): namespace format (a namespace
 * must exist first), ownerReferences, managedFields.
 */
import { invalid, tooLong, type FieldError } from '../../codegen/fielderrors.ts';

type Json = Record<string, unknown>;

/** How a kind's names are checked: a DNS-1123 subdomain (most), a DNS-1123 label (Namespace; Service, relaxed in 1.34+). */
export type NameRule = 'subdomain' | 'label';

const dns1123Label = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const dns1123Subdomain = `${dns1123Label}(\\.${dns1123Label})*`;
const labelKey = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const labelValue = `(${labelKey})?`;

/** Go's validation.RegexError. */
function regexError(msg: string, fmt: string, ...examples: string[]): string {
  if (examples.length === 0) return `${msg} (regex used for validation is '${fmt}')`;
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(' or ')}regex used for validation is '${fmt}')`;
}

const maxLen = (n: number): string => `must be no more than ${n} characters`;
const full = (re: string): RegExp => new RegExp(`^${re}$`);

/** validation.IsDNS1123Subdomain. */
export function isDNS1123Subdomain(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 253) errs.push(maxLen(253));
  if (!full(dns1123Subdomain).test(v)) {
    errs.push(regexError("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character", dns1123Subdomain, 'example.com'));
  }
  return errs;
}

/** validation.IsDNS1123Label. */
export function isDNS1123Label(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 63) errs.push(maxLen(63));
  if (!full(dns1123Label).test(v)) {
    errs.push(full(dns1123Subdomain).test(v) ? 'must not contain dots'
      : regexError("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character", dns1123Label, 'my-name', '123-abc'));
  }
  return errs;
}

/** validation.IsQualifiedName (a label key): an optional DNS subdomain prefix and '/', then a name part. */
export function isQualifiedName(v: string): string[] {
  const errs: string[] = [];
  const parts = v.split('/');
  const keyMsg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
  let name: string;
  if (parts.length === 1) name = parts[0] ?? '';
  else if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    name = parts[1] ?? '';
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else errs.push(...isDNS1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else {
    return [`a valid label key ${regexError(keyMsg, labelKey, 'MyName', 'my.name', '123-abc')} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`];
  }
  if (name.length === 0) errs.push('name part must be non-empty');
  else if (name.length > 63) errs.push(`name part ${maxLen(63)}`);
  if (!full(labelKey).test(name)) errs.push(`name part ${regexError(keyMsg, labelKey, 'MyName', 'my.name', '123-abc')}`);
  return errs;
}

/** validation.IsValidLabelValue. */
export function isLabelValue(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 63) errs.push(maxLen(63));
  if (!full(labelValue).test(v)) {
    errs.push(regexError("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", labelValue, 'MyValue', 'my_value', '12345'));
  }
  return errs;
}

/** The name rule as a function (prefix: a generateName, whose trailing dash is allowed). */
function nameErrors(rule: NameRule, name: string, prefix: boolean): string[] {
  const n = prefix && name.length > 1 && name.endsWith('-') ? `${name.slice(0, -2)}a` : name;
  return rule === 'label' ? isDNS1123Label(n) : isDNS1123Subdomain(n);
}

/** The metadata errors of `meta` (create and update alike), paths under "metadata". */
export function validateObjectMeta(meta: Json, rule: NameRule): FieldError[] {
  const errs: FieldError[] = [];
  const gen = typeof meta['generateName'] === 'string' ? meta['generateName'] : '';
  if (gen) for (const m of nameErrors(rule, gen, true)) errs.push(invalid('metadata.generateName', gen, m));
  const name = typeof meta['name'] === 'string' ? meta['name'] : '';
  if (name) for (const m of nameErrors(rule, name, false)) errs.push(invalid('metadata.name', name, m));
  const labels = meta['labels'];
  if (labels && typeof labels === 'object') {
    for (const [k, v] of Object.entries(labels as Json)) {
      for (const m of isQualifiedName(k)) errs.push(invalid('metadata.labels', k, m));
      for (const m of isLabelValue(String(v))) errs.push(invalid('metadata.labels', v, m));
    }
  }
  const annotations = meta['annotations'];
  if (annotations && typeof annotations === 'object') {
    for (const k of Object.keys(annotations)) for (const m of isQualifiedName(k.toLowerCase())) errs.push(invalid('metadata.annotations', k, m));
    let size = 0;
    for (const [k, v] of Object.entries(annotations as Json)) size += Buffer.byteLength(k) + Buffer.byteLength(String(v));
    if (size > 256 * 1024) errs.push(tooLong('metadata.annotations', 256 * 1024));
  }
  const finalizers = meta['finalizers'];
  if (Array.isArray(finalizers)) {
    for (const f of finalizers) for (const m of isQualifiedName(String(f))) errs.push(invalid('metadata.finalizers', f, m));
  }
  return errs;
}
