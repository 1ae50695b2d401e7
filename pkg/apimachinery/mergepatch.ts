/**
 * JSON merge patch (RFC 7386) between two JSON values: what controller-runtime's `client.MergeFrom(before)` sends.
 *
 * Invariant: applying `mergePatchDiff(before, after)` to `before` (RFC 7386 rules) gives `after`, for JSON values
 * without `null` members in `after` (merge patch cannot set null: it deletes). Objects are diffed key by key (a key
 * gone from `after` is `null`), everything else — arrays included — is replaced whole when not deeply equal.
 * `undefined` members count as absent. Returns undefined when there is no difference.
 */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep equality of JSON values (`undefined` members equal absent ones). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!jsonEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

/**
 * The JSON merge patch (RFC 7386) from `before` to `after` (both JSON objects), or undefined when they are equal.
 * Applying it to `before` gives `after` (see the file comment for the `null` caveat).
 */
export function mergePatchDiff(before: unknown, after: unknown): Record<string, unknown> | undefined {
  if (!isObject(before) || !isObject(after)) throw new Error('mergePatchDiff: both values must be JSON objects');
  const patch: Record<string, unknown> = {};
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const b = before[k];
    const a = after[k];
    if (a === undefined) {
      if (b !== undefined) patch[k] = null;
    } else if (isObject(a) && isObject(b)) {
      const sub = mergePatchDiff(b, a);
      if (sub) patch[k] = sub;
    } else if (!jsonEqual(a, b)) {
      patch[k] = a;
    }
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}
