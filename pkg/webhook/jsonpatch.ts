/**
 * The RFC 6902 JSON patch that turns one JSON document into another — what a mutating webhook answers
 * (`patchType: JSONPatch`), computed from the object the API server sent and the object the defaulter returned, as
 * controller-runtime's `PatchResponseFromRaw` does.
 *
 * Invariants of `jsonPatch(from, to)`:
 *  - Applying the operations in order to `from` gives a document JSON-equal to `to` (key order aside).
 *  - Only `add`, `remove` and `replace` are emitted; no operation for what is equal, so equal documents give `[]`.
 *  - Objects are compared key by key (keys removed, added, then changed, each in key order), recursively.
 *  - Arrays are compared index by index over the common length (recursively, so a changed field of an element is one
 *    `replace` deep inside it); extra elements of `to` are `add`ed at their indices in ascending order, surplus
 *    elements of `from` are `remove`d from the highest index down (so every index is valid when applied).
 *  - Path segments are escaped as RFC 6901 says: `~` → `~0`, then `/` → `~1` (e.g. annotation keys
 *    `example.com/x` → `/metadata/annotations/example.com~1x`).
 *  - `undefined` members count as absent (as JSON.stringify drops them); `to` must otherwise be plain JSON (objects,
 *    arrays, strings, finite numbers, booleans, null). Inputs are not modified, and values in the operations are
 *    copies.
 */
import { jsonEqual } from '../apimachinery/mergepatch.ts';
import type { JsonPatchOperation } from '../client/options.ts';

export type { JsonPatchOperation } from '../client/options.ts';

/** Escapes one JSON pointer segment (RFC 6901). */
export function escapePointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A deep copy as JSON would give it (undefined members dropped). */
function copy(v: unknown): unknown {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v)) as unknown;
}

/** The operations turning `from` into `to` (see the file comment). */
export function jsonPatch(from: unknown, to: unknown): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  diff(from, to, '', ops);
  return ops;
}

function diff(from: unknown, to: unknown, path: string, ops: JsonPatchOperation[]): void {
  if (jsonEqual(from, to)) return;
  if (isObject(from) && isObject(to)) {
    const fromKeys = Object.keys(from).filter((k) => from[k] !== undefined).sort();
    const toKeys = Object.keys(to).filter((k) => to[k] !== undefined).sort();
    const toSet = new Set(toKeys);
    const fromSet = new Set(fromKeys);
    for (const k of fromKeys) if (!toSet.has(k)) ops.push({ op: 'remove', path: `${path}/${escapePointerSegment(k)}` });
    for (const k of toKeys) if (!fromSet.has(k)) ops.push({ op: 'add', path: `${path}/${escapePointerSegment(k)}`, value: copy(to[k]) });
    for (const k of toKeys) if (fromSet.has(k)) diff(from[k], to[k], `${path}/${escapePointerSegment(k)}`, ops);
    return;
  }
  if (Array.isArray(from) && Array.isArray(to)) {
    const common = Math.min(from.length, to.length);
    for (let i = 0; i < common; i++) diff(from[i], to[i], `${path}/${i}`, ops);
    for (let i = common; i < to.length; i++) ops.push({ op: 'add', path: `${path}/${i}`, value: copy(to[i]) });
    for (let i = from.length - 1; i >= common; i--) ops.push({ op: 'remove', path: `${path}/${i}` });
    return;
  }
  if (to === undefined) {
    // Only reachable for the root (members that are undefined are skipped above): nothing left to be.
    ops.push({ op: 'remove', path });
    return;
  }
  ops.push({ op: 'replace', path, value: copy(to) });
}
