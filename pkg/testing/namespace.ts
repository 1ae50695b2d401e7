/**
 * `testNamespace(env, { t })`: a namespace of its own for one test, deleted after it.
 *
 *   test('copies the ConfigMap', async (t) => {
 *     const ns = await testNamespace(env, { t });          // env: a TestEnv, a FakeClient, or any { client } / ApiClient
 *     await env.client.resource(coreResources.configMaps).namespace(ns.name).create(…);
 *   });                                                     // deleted when the test ends (t.after)
 *   // or: await using ns = await testNamespace(env);     // deleted when the block ends
 *
 * Contract: the name is `<prefix>-<5 random characters>` (prefix: the test's name made DNS-safe, else `test`), so it
 * never collides with another test's or an earlier run's (a deleted namespace stays Terminating in an envtest-style
 * control plane: no namespace controller empties it). `delete()` is idempotent and ignores a namespace already gone.
 * Deletion is the API's: on a real server the namespace only becomes Terminating there (and its objects stay) — give
 * every test its own namespace instead of reusing one.
 */
import { coreResources } from '../apimachinery/resource.ts';
import { ignoreNotFound } from '../client/ignore.ts';
import type { ApiClient } from '../client/typed.ts';

/** A namespace made by testNamespace: its name and its (idempotent) deletion. */
export interface TestNamespace {
  /** `<prefix>-<5 random characters>`: never reused, so a namespace still Terminating never collides. */
  readonly name: string;
  /** Deletes the namespace (idempotent). */
  delete(): Promise<void>;
  /** `await using ns = await testNamespace(…)`: delete() when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Options of testNamespace: the test it belongs to, a name prefix, labels. */
export interface TestNamespaceOptions {
  /** A node:test TestContext (anything with `name` and `after(fn)`): the namespace is deleted after that test. */
  t?: { name?: string; after(fn: () => Promise<void> | void): void };
  /** Name prefix; default the test's name (DNS-safe, ≤ 40 characters), else `test`. */
  prefix?: string;
  /** Labels of the namespace. */
  labels?: Record<string, string>;
}

const alphabet = 'bcdfghjklmnpqrstvwxz2456789';

/**
 * Creates a namespace of its own for one test (`<prefix>-<5 random characters>`, never reused) and deletes it after
 * the test (`t`), or on `await using`; `delete()` is idempotent.
 */
export async function testNamespace(env: ApiClient | { client: ApiClient }, opts: TestNamespaceOptions = {}): Promise<TestNamespace> {
  const client = 'client' in env ? env.client : env;
  const base = (opts.prefix ?? opts.t?.name ?? 'test').toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+/, '').slice(0, 40).replace(/-+$/, '') || 'test';
  const suffix = Array.from({ length: 5 }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
  const name = `${base}-${suffix}`;
  const api = client.resource(coreResources.namespaces);
  await api.create({ metadata: { name, ...(opts.labels ? { labels: opts.labels } : {}) } });
  let deleted: Promise<void> | undefined;
  const del = (): Promise<void> => (deleted ??= ignoreNotFound(api.delete(name)).then(() => undefined));
  opts.t?.after(del);
  return { name, delete: del, [Symbol.asyncDispose]: del };
}
