/**
 * Installing CustomResourceDefinitions into a test environment, as envtest's `CRDDirectoryPaths` does: every
 * `.yaml`/`.yml`/`.json` file named, or found directly in a directory named (not recursively; other files such as a
 * kustomization.yaml are read and skipped because they hold no CRD), is parsed as one or more documents, and every
 * `apiextensions.k8s.io/v1` CustomResourceDefinition among them is applied (server-side apply, field manager
 * `ts-controller-manager-testing`, forced: re-installing is idempotent) and then waited for until its `Established`
 * condition is True and a LIST of every served version answers 200 — after that objects of it can be created and
 * listed (Established alone can still see a 404 for a moment).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, isAbsolute, join, resolve } from 'node:path';
import { loadAll } from 'js-yaml';
import type { Condition, KubeObject } from '../apimachinery/meta.ts';
import { ApiError } from '../client/errors.ts';
import type { RestClient } from '../client/rest.ts';
import { delay } from './process.ts';

/** The fields of a CustomResourceDefinition that installCRDs reads (the rest passes through). */
export interface CustomResourceDefinition extends KubeObject {
  /** The parts read here: group, scope, names, and each version's served flag, subresources and schema. */
  spec?: {
    group?: string;
    scope?: string;
    names?: { plural?: string; kind?: string };
    versions?: { name: string; served?: boolean; subresources?: { status?: unknown }; schema?: { openAPIV3Schema?: unknown } }[];
  };
  /** Its conditions (`Established` once the API server serves it). */
  status?: { conditions?: Condition[] };
}

const manifestExtensions = new Set(['.yaml', '.yml', '.json']);
const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/**
 * The documents of `paths` (files, or directories of `.yaml`/`.yml`/`.json` manifests, not recursive) that `pick`
 * accepts, in path then file-name order. Throws, naming the path and what it was resolved against, when a path does
 * not exist or holds none: `what` names the path in those messages ("CRD path", "webhook path") and `wanted` the
 * documents looked for.
 */
export function readManifests<T>(paths: string[], what: string, wanted: string, pick: (doc: KubeObject | null) => doc is T & KubeObject): T[] {
  const found: T[] = [];
  for (const path of paths) {
    let files: string[];
    try {
      files = statSync(path).isDirectory()
        ? readdirSync(path).filter((f) => manifestExtensions.has(extname(f))).sort().map((f) => join(path, f))
        : [path];
    } catch (err) {
      const where = isAbsolute(path) ? '' : ` (relative to the working directory: ${resolve(path)})`;
      const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (err as Error).message;
      throw new Error(`${what} ${path}${where} ${why}`, { cause: err });
    }
    const before = found.length;
    for (const file of files) {
      for (const doc of loadAll(readFileSync(file, 'utf8'))) if (pick(doc as KubeObject | null)) found.push(doc as T);
    }
    if (found.length === before) throw new Error(`${what} ${path} holds no ${wanted}`);
  }
  return found;
}

/** Reads the CRDs in `paths` (files, or directories of manifests); throws when a path does not exist or holds none. */
export function readCRDs(paths: string[]): CustomResourceDefinition[] {
  return readManifests(paths, 'CRD path', 'apiextensions.k8s.io/v1 CustomResourceDefinition',
    (o): o is CustomResourceDefinition => o?.kind === 'CustomResourceDefinition' && o.apiVersion === 'apiextensions.k8s.io/v1');
}

/**
 * Applies the CRDs found in `paths` and resolves with their names once every one is Established and every served
 * version can be listed (200); rejects after `timeoutMs` (default 30 s, for both waits together) naming what is still
 * not Established or not listable, or when `signal` aborts.
 */
export async function installCRDs(client: RestClient, paths: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<string[]> {
  return applyCRDs(client, readCRDs(paths), paths, opts);
}

/** installCRDs for CRDs already read (startTestEnv reads them before it starts anything, so a bad path fails at once). */
export async function applyCRDs(
  client: RestClient, crds: CustomResourceDefinition[], paths: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<string[]> {
  const names = crds.map((crd) => crd.metadata?.name ?? '');
  for (const [i, crd] of crds.entries()) {
    if (!names[i]) throw new Error(`a CustomResourceDefinition without metadata.name in ${paths.join(', ')}`);
    await client.json('PATCH', `${crdPath}/${names[i]}`, {
      query: { fieldManager: 'ts-controller-manager-testing', force: true },
      body: crd, contentType: 'application/apply-patch+yaml', signal: opts.signal,
    });
  }
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let pending = names;
  while (pending.length > 0) {
    opts.signal?.throwIfAborted();
    const established = await Promise.all(pending.map(async (name) => {
      const crd = await client.json<CustomResourceDefinition>('GET', `${crdPath}/${name}`, { signal: opts.signal });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
    }));
    pending = pending.filter((_, i) => !established[i]);
    if (pending.length === 0) break;
    if (Date.now() > deadline) throw new Error(`CRDs not Established within ${opts.timeoutMs ?? 30_000} ms: ${pending.join(', ')}`);
    await delay(50);
  }
  // Established is not yet "served": right after it, a LIST can still answer 404 for a moment (the discovery and
  // handler of the new resource are installed asynchronously). Return only once every served version of every CRD
  // answers a LIST with 200 — so the first request of a test (or an informer's first LIST) never races the install.
  let unlisted = crds.flatMap((crd) => (crd.spec?.versions ?? []).filter((v) => v.served !== false)
    .map((v) => `/apis/${crd.spec?.group ?? ''}/${v.name}/${crd.spec?.names?.plural ?? ''}`));
  while (unlisted.length > 0) {
    opts.signal?.throwIfAborted();
    const ok = await Promise.all(unlisted.map(async (path) => {
      try {
        await client.json('GET', path, { query: { limit: 1 }, signal: opts.signal });
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return false;
        throw err;
      }
    }));
    unlisted = unlisted.filter((_, i) => !ok[i]);
    if (unlisted.length === 0) break;
    if (Date.now() > deadline) throw new Error(`CRDs Established but not listable within ${opts.timeoutMs ?? 30_000} ms: ${unlisted.join(', ')}`);
    await delay(50);
  }
  return names;
}
