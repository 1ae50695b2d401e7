/**
 * From declared needs (permission.ts) to the rules of a Role or ClusterRole, and their YAML.
 *
 * Merging: one rule per (API group, resource or `resource/subresource`, resourceNames): the union of the verbs every
 * contribution to it needs, with who needed which verbs and why as the rule's comment. Rules are ordered as declared
 * (the first contribution to a resource places it; a subresource follows its resource), the manager's own (Events)
 * after every controller's, so a generated file reads like the setup that declared it and is stable across runs.
 *
 * Writing: only the `rules:` of a file is generated. Everything above it (comments, apiVersion, kind, metadata) is
 * kept as it is on disk, so a project's names, labels and namespace placeholders are its own; `rules:` must be the
 * last top-level key of the file.
 */
import { sortVerbs, type Contribution } from './permission.ts';

/** A rule to grant, with the reasons behind each verb. */
export interface RoleRule {
  group: string;
  /** The plural, or `plural/subresource`. */
  resource: string;
  resourceNames: readonly string[];
  /** Sorted (permission.ts verbOrder). */
  verbs: readonly string[];
  /** Who needs which verbs and why, in declaration order (the comment). */
  reasons: readonly { who: string; why: string; verbs: readonly string[] }[];
}

/** The rules `contributions` need, merged and ordered (see the file comment). */
export function mergeContributions(contributions: readonly Contribution[]): RoleRule[] {
  interface Acc { group: string; resource: string; resourceNames: string[]; verbs: Set<string>; reasons: RoleRule['reasons'][number][]; manager: boolean; order: number }
  const byKey = new Map<string, Acc>();
  /** First appearance of each base resource (group + plural without the subresource). */
  const baseOrder = new Map<string, number>();
  for (const c of contributions) {
    const names = [...new Set(c.resourceNames)].sort();
    const key = `${c.group}|${c.resource}|${names.join(',')}`;
    const base = `${c.group}|${c.resource.split('/')[0] ?? ''}`;
    if (!baseOrder.has(base)) baseOrder.set(base, baseOrder.size);
    let acc = byKey.get(key);
    if (!acc) byKey.set(key, (acc = { group: c.group, resource: c.resource, resourceNames: names, verbs: new Set(), reasons: [], manager: true, order: byKey.size }));
    for (const v of c.verbs) acc.verbs.add(v);
    acc.reasons.push({ who: c.who, why: c.why, verbs: sortVerbs(c.verbs) });
    if (c.scope === 'controller') acc.manager = false;
  }
  const rank = (a: Acc): [number, number, number, number] => [
    a.manager ? 1 : 0, baseOrder.get(`${a.group}|${a.resource.split('/')[0] ?? ''}`) ?? 0, a.resource.includes('/') ? 1 : 0, a.order,
  ];
  return [...byKey.values()].sort((a, b) => {
    const [x, y] = [rank(a), rank(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
    return 0;
  }).map((a) => ({ group: a.group, resource: a.resource, resourceNames: a.resourceNames, verbs: sortVerbs(a.verbs), reasons: a.reasons }));
}

/** A YAML flow-sequence item: plain when that is unambiguous, else a JSON (double-quoted) string. */
function item(s: string): string {
  return /^[A-Za-z0-9]([-A-Za-z0-9._/]*[A-Za-z0-9])?$/.test(s) ? s : JSON.stringify(s);
}

const list = (xs: readonly string[]): string => `[${xs.map(item).join(', ')}]`;

/**
 * The comment lines of a rule: one per contributor (or contributors with the same reasons),
 * `who: why, why (verbs); why (verbs)`, wrapped at 120 columns.
 */
function commentLines(rule: RoleRule): string[] {
  const byWho = new Map<string, Map<string, string[]>>();
  for (const r of rule.reasons) {
    let parts = byWho.get(r.who);
    if (!parts) byWho.set(r.who, (parts = new Map<string, string[]>()));
    const verbs = r.verbs.join(', ');
    const whys = parts.get(verbs) ?? [];
    if (!whys.includes(r.why)) whys.push(r.why);
    parts.set(verbs, whys);
  }
  // Contributors with the same reasons share a line ("foo-controller, bar-controller: Events (create, patch)").
  const byText = new Map<string, string[]>();
  for (const [who, parts] of byWho) {
    const text = [...parts].map(([verbs, whys]) => `${whys.join(', ')} (${verbs})`).join('; ');
    byText.set(text, [...(byText.get(text) ?? []), who]);
  }
  return [...byText].flatMap(([text, whos]) =>
    wrap(`${whos.join(', ')}: ${text}`, 120 - '  # '.length).map((l, i) => `  #${i === 0 ? ' ' : '   '}${l}`));
}

/** Words of `text` in lines of at most `width` characters (a longer word gets a line of its own). */
function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width - (out.length > 0 ? 2 : 0)) {
      out.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(line);
  return out;
}

/** The `rules:` key and its items, each with its comment (what follows `rules:` in a generated file). */
export function renderRules(rules: readonly RoleRule[]): string {
  if (rules.length === 0) return 'rules: []\n';
  const out = ['rules:'];
  for (const r of rules) {
    out.push(...commentLines(r));
    out.push(`  - apiGroups: ${list([r.group])}`, `    resources: ${list([r.resource])}`);
    if (r.resourceNames.length > 0) out.push(`    resourceNames: ${list(r.resourceNames)}`);
    out.push(`    verbs: ${list(r.verbs)}`);
  }
  return `${out.join('\n')}\n`;
}

/**
 * `text` (a Role or ClusterRole manifest) with everything from its top-level `rules:` on replaced by `rules`. Throws
 * naming `file` when there is no top-level `rules:` or another top-level key follows it (it would be lost).
 */
export function replaceRules(text: string, rules: readonly RoleRule[], file: string): string {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => /^rules:(\s|$)/.test(l));
  if (at < 0) throw new Error(`${file}: no top-level "rules:" to generate (gen rbac writes the rules and keeps what is above them)`);
  const after = lines.slice(at + 1).find((l) => /^[^\s#-]/.test(l));
  if (after !== undefined) throw new Error(`${file}: "rules:" must be the last top-level key (found ${JSON.stringify(after)} after it)`);
  return `${lines.slice(0, at).join('\n')}${at > 0 ? '\n' : ''}${renderRules(rules)}`;
}
