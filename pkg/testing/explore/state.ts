/**
 * End states and their comparison (pure): what `explore` compares between the reference execution and a perturbed
 * one. An end state is every stored object of the compared types, normalized so that what legitimately differs
 * between two executions of the same workload does not count, and what a user would call a different cluster does.
 *
 * Normalization (each rule: what differs between runs without being a bug):
 *  - metadata.uid, resourceVersion, creationTimestamp, managedFields, selfLink, deletionGracePeriodSeconds, generation:
 *    dropped (identities and counters of the run); deletionTimestamp becomes `true` (being deleted or not counts).
 *  - status.observedGeneration becomes `"current"` when it equals metadata.generation, else `"behind"` (a controller
 *    that stops observing is a difference; a different count of spec writes is not).
 *  - Timestamps of conditions and the like (lastTransitionTime, lastUpdateTime, lastHeartbeatTime, lastProbeTime,
 *    lastTimestamp, firstTimestamp, eventTime): dropped.
 *  - Objects made with generateName: their name becomes `<generateName>*` and they are compared as a multiset (an
 *    extra one is a difference; which suffix it got is not); the generated names are replaced where they appear in
 *    other strings too.
 *  - An object's uid, as a whole string or inside one (owner references, status fields that record a uid, a tag
 *    `k8s-uid:<uid>` in the external state), becomes `uid:<kind>/<namespace>/<name>`; an ownerReference uid that names
 *    no stored object becomes `uid:dangling`.
 *  - Extra fields to drop: `ignore` paths (dotted, `*` for any key), e.g. 'status.lastSyncTime'.
 */
import type { KubeObject } from '../../apimachinery/meta.ts';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keys dropped wherever they appear (timestamps of conditions, events and probes). */
const volatileKeys = new Set(['lastTransitionTime', 'lastUpdateTime', 'lastHeartbeatTime', 'lastProbeTime', 'lastTimestamp', 'firstTimestamp', 'eventTime']);

/** One compared object: its identity in the end state and its normalized content. */
export interface NormalizedObject {
  /** `<apiVersion> <kind> <namespace>/<name>` (name `<generateName>*` for generated ones). */
  id: string;
  /** The normalized object (JSON). */
  content: unknown;
}

/** A normalized end state: objects by id (a generated id can hold several), the external state, and invariant verdicts. */
export interface EndState {
  objects: Map<string, unknown[]>;
  external: unknown;
}

/** One difference between two end states. */
export interface Difference {
  /** The object's id, or 'external state'. */
  what: string;
  /** 'missing' (in the reference, not here), 'extra' (here, not in the reference), 'different'. */
  how: 'missing' | 'extra' | 'different';
  /** The first differing path and both values, for `different`. */
  detail?: string;
}

/**
 * Normalizes `objects` (every stored object of the compared types) and `external` into an EndState (see the file
 * comment); `ignore`: extra dotted paths to drop.
 */
export function normalize(objects: readonly KubeObject[], external: unknown, ignore: readonly string[] = []): EndState {
  const uids = new Map<string, string>();
  const generated = new Map<string, string>();
  for (const o of objects) {
    const m = o.metadata ?? {};
    const gen = m.generateName && m.name?.startsWith(m.generateName) && m.name.length > m.generateName.length ? `${m.generateName}*` : undefined;
    if (gen && m.name) generated.set(m.name, gen);
    if (m.uid) uids.set(m.uid, `uid:${o.kind ?? ''}/${m.namespace ?? ''}/${gen ?? m.name ?? ''}`);
  }
  const ignored = ignore.map((p) => p.split('.'));
  const out = new Map<string, unknown[]>();
  for (const o of objects) {
    const m = o.metadata ?? {};
    const name = (m.name && generated.get(m.name)) ?? m.name ?? '';
    const id = `${o.apiVersion ?? ''} ${o.kind ?? ''} ${m.namespace ? `${m.namespace}/` : ''}${name}`;
    const c = structuredClone(o) as Json;
    const cm = (c['metadata'] ?? {}) as Json;
    const generation = cm['generation'];
    for (const k of ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'selfLink', 'deletionGracePeriodSeconds', 'generation']) delete cm[k];
    if (cm['deletionTimestamp'] !== undefined) cm['deletionTimestamp'] = true;
    cm['name'] = name;
    if (Array.isArray(cm['ownerReferences'])) {
      for (const r of cm['ownerReferences'] as Json[]) r['uid'] = uids.get(String(r['uid'])) ?? 'uid:dangling';
    }
    const status = c['status'];
    if (isObj(status) && status['observedGeneration'] !== undefined) {
      status['observedGeneration'] = status['observedGeneration'] === generation ? 'current' : 'behind';
    }
    for (const path of ignored) drop(c, path);
    const content = rewrite(c, uids, generated);
    const list = out.get(id) ?? [];
    list.push(content);
    out.set(id, list);
  }
  for (const [id, list] of out) if (list.length > 1) out.set(id, list.sort((a, b) => stable(a).localeCompare(stable(b))));
  return { objects: out, external: rewrite(external, uids, generated) };
}

/** The differences of `actual` from `reference`, in id order; [] when they are equal. */
export function compare(reference: EndState, actual: EndState): Difference[] {
  const diffs: Difference[] = [];
  const ids = [...new Set([...reference.objects.keys(), ...actual.objects.keys()])].sort();
  for (const id of ids) {
    const r = reference.objects.get(id) ?? [];
    const a = actual.objects.get(id) ?? [];
    if (a.length < r.length) diffs.push({ what: id, how: 'missing', ...(r.length > 1 || a.length > 0 ? { detail: `${r.length} in the reference, ${a.length} here` } : {}) });
    else if (a.length > r.length) diffs.push({ what: id, how: 'extra', ...(a.length > 1 || r.length > 0 ? { detail: `${r.length} in the reference, ${a.length} here` } : {}) });
    else {
      for (let i = 0; i < r.length; i++) {
        const d = firstDifference(r[i], a[i], '');
        if (d !== undefined) {
          diffs.push({ what: id, how: 'different', detail: d });
          break;
        }
      }
    }
  }
  const d = firstDifference(reference.external, actual.external, '');
  if (d !== undefined) diffs.push({ what: 'external state', how: 'different', detail: d });
  return diffs;
}

/** A one-line description of a Difference. */
export function describeDifference(d: Difference): string {
  return `${d.what}: ${d.how}${d.detail ? ` (${d.detail})` : ''}`;
}

/** The first path at which `a` and `b` differ, with both values; undefined when equal. */
export function firstDifference(a: unknown, b: unknown, path: string): string | undefined {
  if (Object.is(a, b)) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  if (isObj(a) && isObj(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const d = firstDifference(a[k], b[k], path ? `${path}.${k}` : k);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  return `${path || '(root)'}: reference ${short(a)}, here ${short(b)}`;
}

function short(v: unknown): string {
  const s = v === undefined ? 'absent' : JSON.stringify(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** JSON with sorted keys (a canonical form for sorting and equality). */
export function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (isObj(v)) return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stable(v[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/** A copy with volatile keys dropped and uids / generated names rewritten in every string. */
function rewrite(v: unknown, uids: ReadonlyMap<string, string>, generated: ReadonlyMap<string, string>): unknown {
  if (typeof v === 'string') {
    const u = uids.get(v);
    if (u) return u;
    let s = v;
    for (const [name, gen] of generated) if (s.includes(name)) s = s.split(name).join(gen);
    // A uid inside a longer string (a tag `k8s-uid:<uid>`, a description naming it): the object it names.
    if (s.length > 36) for (const [uid, ref] of uids) if (s.includes(uid)) s = s.split(uid).join(ref);
    return s;
  }
  if (Array.isArray(v)) return v.map((x) => rewrite(x, uids, generated));
  if (isObj(v)) {
    const out: Json = {};
    for (const [k, x] of Object.entries(v)) if (!volatileKeys.has(k)) out[k] = rewrite(x, uids, generated);
    return out;
  }
  return v;
}

function drop(o: unknown, path: readonly string[]): void {
  if (!isObj(o) || path.length === 0) return;
  const [head = '', ...rest] = path;
  const keys = head === '*' ? Object.keys(o) : [head];
  for (const k of keys) {
    if (rest.length === 0) delete o[k];
    else {
      const child = o[k];
      if (Array.isArray(child)) for (const c of child) drop(c, rest);
      else drop(child, rest);
    }
  }
}
