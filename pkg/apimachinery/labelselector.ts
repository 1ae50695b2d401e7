/**
 * Label selectors for Lister.list and the client's list calls: the string syntax of `kubectl -l` / `?labelSelector=` and metav1.LabelSelector.
 *
 * Supported requirements, comma-separated (all must hold):
 *   `a=b`, `a==b`    label a present and equal to b
 *   `a!=b`           label a absent, or present and different from b
 *   `a`, `!a`        label a present / absent
 *   `a in (x,y)`     label a present with one of the values
 *   `a notin (x,y)`  label a absent, or present with none of the values
 *   `a>3`, `a<3`     label a present and an integer greater / less than the bound
 * The empty selector matches everything. Pure functions; selectors are immutable and safe to share.
 *
 * Invariant: a Selector never changes after it is built, and `matches` depends only on the labels it is given.
 */
import type { LabelSelector } from './meta.ts';

export type Operator = 'Equals' | 'NotEquals' | 'Exists' | 'DoesNotExist' | 'In' | 'NotIn' | 'GreaterThan' | 'LessThan';

export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: readonly string[];
}

/** A parsed label selector (apimachinery's labels.Selector): its requirements, a matcher, and its canonical string. */
export interface Selector {
  /** Its requirements, all of which must hold (ANDed). */
  readonly requirements: readonly Requirement[];
  /** True when the selector selects everything. */
  readonly empty: boolean;
  /** Whether a set of labels (undefined = none) satisfies every requirement. */
  matches(labels: Readonly<Record<string, string>> | undefined): boolean;
  /** The selector in the API server's syntax (`app=web,tier!=db`), as sent in `labelSelector`. */
  toString(): string;
}

const KEY = String.raw`[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?`;
const VALUE = String.raw`(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?`;
const reNotExists = new RegExp(`^!\\s*(${KEY})$`);
const reExists = new RegExp(`^(${KEY})$`);
const reSet = new RegExp(`^(${KEY})\\s+(in|notin)\\s*\\((.*)\\)$`);
const reEq = new RegExp(`^(${KEY})\\s*(==|!=|=)\\s*(${VALUE})$`);
const reCmp = new RegExp(`^(${KEY})\\s*(>|<)\\s*(-?[0-9]+)$`);
const reValue = new RegExp(`^${VALUE}$`);

function matchRequirement(r: Requirement, labels: Readonly<Record<string, string>> | undefined): boolean {
  const has = labels !== undefined && Object.hasOwn(labels, r.key);
  const v = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'Equals':
    case 'In':
      return v !== undefined && r.values.includes(v);
    case 'NotEquals':
    case 'NotIn':
      return v === undefined || !r.values.includes(v);
    case 'GreaterThan':
    case 'LessThan': {
      if (v === undefined || !/^-?[0-9]+$/.test(v)) return false;
      const n = Number(v);
      const bound = Number(r.values[0]);
      return r.operator === 'GreaterThan' ? n > bound : n < bound;
    }
  }
}

function requirementString(r: Requirement): string {
  switch (r.operator) {
    case 'Exists':
      return r.key;
    case 'DoesNotExist':
      return `!${r.key}`;
    case 'Equals':
      return `${r.key}=${r.values[0] ?? ''}`;
    case 'NotEquals':
      return `${r.key}!=${r.values[0] ?? ''}`;
    case 'In':
      return `${r.key} in (${r.values.join(',')})`;
    case 'NotIn':
      return `${r.key} notin (${r.values.join(',')})`;
    case 'GreaterThan':
      return `${r.key}>${r.values[0] ?? ''}`;
    case 'LessThan':
      return `${r.key}<${r.values[0] ?? ''}`;
  }
}

/** Builds a selector from requirements (already validated). */
export function newSelector(requirements: readonly Requirement[]): Selector {
  const reqs = [...requirements];
  return {
    requirements: reqs,
    empty: reqs.length === 0,
    matches: (labels) => reqs.every((r) => matchRequirement(r, labels)),
    toString: () => reqs.map(requirementString).join(','),
  };
}

/** The selector that matches every set of labels (labels.Everything()). */
export const everything: Selector = newSelector([]);

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
    if (depth < 0) throw new Error(`label selector: unbalanced ')' in ${JSON.stringify(s)}`);
  }
  if (depth !== 0) throw new Error(`label selector: unbalanced '(' in ${JSON.stringify(s)}`);
  parts.push(s.slice(start));
  return parts;
}

function parseRequirement(part: string, whole: string): Requirement {
  let m = reNotExists.exec(part);
  if (m) return { key: m[1] as string, operator: 'DoesNotExist', values: [] };
  m = reExists.exec(part);
  if (m) return { key: m[1] as string, operator: 'Exists', values: [] };
  m = reSet.exec(part);
  if (m) {
    const values = (m[3] as string).split(',').map((v) => v.trim());
    if (values.length === 1 && values[0] === '') values.length = 0;
    for (const v of values) {
      if (!reValue.test(v)) throw new Error(`label selector: invalid value ${JSON.stringify(v)} in ${JSON.stringify(whole)}`);
    }
    if (values.length === 0) throw new Error(`label selector: empty set in ${JSON.stringify(whole)}`);
    return { key: m[1] as string, operator: m[2] === 'in' ? 'In' : 'NotIn', values };
  }
  m = reEq.exec(part);
  if (m) return { key: m[1] as string, operator: m[2] === '!=' ? 'NotEquals' : 'Equals', values: [m[3] as string] };
  m = reCmp.exec(part);
  if (m) return { key: m[1] as string, operator: m[2] === '>' ? 'GreaterThan' : 'LessThan', values: [m[3] as string] };
  throw new Error(`label selector: cannot parse ${JSON.stringify(part)} in ${JSON.stringify(whole)}`);
}

/** Parses the string syntax; throws Error on a malformed selector. '' selects everything. */
export function parseSelector(s: string): Selector {
  if (s.trim() === '') return everything;
  return newSelector(splitTopLevel(s).map((p) => parseRequirement(p.trim(), s)));
}

/** A selector requiring every label of `set` (like labels.SelectorFromSet). */
export function selectorFromSet(set: Readonly<Record<string, string>>): Selector {
  return newSelector(Object.entries(set).map(([key, v]) => ({ key, operator: 'Equals' as const, values: [v] })));
}

/**
 * Converts a metav1.LabelSelector. Note the API's convention: an empty LabelSelector `{}` selects everything,
 * while a missing (undefined) one selects nothing (`nothing` below) — callers pick which applies to them.
 */
export function selectorFromLabelSelector(ls: LabelSelector): Selector {
  const reqs: Requirement[] = Object.entries(ls.matchLabels ?? {}).map(([key, v]) => ({ key, operator: 'Equals', values: [v] }));
  for (const e of ls.matchExpressions ?? []) {
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0) throw new Error(`label selector: operator ${e.operator} needs values (key ${e.key})`);
        reqs.push({ key: e.key, operator: e.operator, values });
        break;
      case 'Exists':
      case 'DoesNotExist':
        reqs.push({ key: e.key, operator: e.operator, values: [] });
        break;
      default:
        throw new Error(`label selector: unknown operator ${JSON.stringify(e.operator)} (key ${e.key})`);
    }
  }
  return newSelector(reqs);
}

/** Selects no object. */
export const nothing: Selector = {
  requirements: [],
  empty: false,
  matches: () => false,
  toString: () => '<nothing>',
};
