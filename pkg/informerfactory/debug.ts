/**
 * What a running process's informer caches hold, for the debug endpoint `/debug/informers` (pkg/manager/pprof.ts
 * serves it beside the profiles, with the same access rules): per informer its resource, scope and selectors,
 * whether it synced, how many objects it caches, the resourceVersion it reflects, a digest of its contents, and each
 * reflector's phase and counts (lists begun, watch streams opened, the last failure). With `keys` it also lists every cached key with
 * its resourceVersion — what a benchmark or an operator compares with a LIST from the API server to prove the cache
 * equals the server's state.
 *
 * What it reveals: object names, namespaces and resourceVersions, never their contents (no spec, status, labels or
 * annotations; a Secret informer would show the Secrets' names only). That is less than a heap snapshot of the same
 * endpoint reveals.
 *
 * Cost: O(objects) per request (a sort and a SHA-256 over `key rv` lines; ~10 ms per 10 000 objects), read-only, on
 * the event loop between two deltas, so the cache is never seen half-updated.
 */
import { createHash } from 'node:crypto';
import { resourceVersionOf, type KubeObject } from '../apimachinery/meta.ts';
import { resourceId } from '../apimachinery/resource.ts';
import type { SharedIndexInformer } from './sharedinformer.ts';

/** One reflector's part of an informer (one per watched namespace; '' = all namespaces or cluster-scoped). */
export interface ReflectorDebug {
  namespace: string;
  phase: string;
  phaseForMs: number;
  resourceVersion: string;
  lists: number;
  watches: number;
  /** The last request failure since the last list reached the cache, in one line. */
  lastError?: string;
}

/** One informer as `/debug/informers` shows it. */
export interface InformerDebug {
  /** `resourceId`, e.g. `foos.samplecontroller.k8s.io/v1alpha1`. */
  resource: string;
  kind: string;
  /** The namespaces it lists and watches ([] = all, or cluster-scoped). */
  namespaces: string[];
  metadataOnly: boolean;
  /** The selectors of its lists and watches, when it has them: the cache holds the matching objects only. */
  labelSelector?: string;
  fieldSelector?: string;
  synced: boolean;
  objects: number;
  /** The resourceVersion the cache reflects ('' before the first list). */
  resourceVersion: string;
  /** `sha256:` + hex of the sorted `key resourceVersion\n` lines: equal caches have equal digests. */
  digest: string;
  reflectors: ReflectorDebug[];
  /** With `keys`: every cached key (`namespace/name`, or `name`) with its resourceVersion. */
  keys?: Record<string, string>;
}

/** The sorted `[key, resourceVersion]` pairs of a cache, and their digest. */
export function cacheDigest(entries: Iterable<readonly [string, string]>): { sorted: [string, string][]; digest: string } {
  const sorted = [...entries].map(([k, rv]): [string, string] => [k, rv]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const hash = createHash('sha256');
  for (const [k, rv] of sorted) hash.update(`${k} ${rv}\n`);
  return { sorted, digest: `sha256:${hash.digest('hex')}` };
}

/** Describes informers (see the module comment); `keys` adds every key with its resourceVersion. */
export function describeInformers(informers: readonly SharedIndexInformer<KubeObject>[], opts: { keys?: boolean } = {}): InformerDebug[] {
  return informers.map((i) => {
    const indexer = i.getIndexer();
    const { sorted, digest } = cacheDigest(indexer.listKeys().map((k): [string, string] => [k, resourceVersionOf(indexer.getByKey(k))]));
    return {
      resource: resourceId(i.resource),
      kind: i.resource.kind,
      namespaces: i.scopes.filter((s) => s !== ''),
      metadataOnly: i.metadataOnly,
      ...(i.labelSelector ? { labelSelector: i.labelSelector } : {}),
      ...(i.fieldSelector ? { fieldSelector: i.fieldSelector } : {}),
      synced: i.hasSynced(),
      objects: sorted.length,
      resourceVersion: i.lastSyncResourceVersion(),
      digest,
      reflectors: i.reflectorStatus().map((r) => ({
        namespace: r.namespace, phase: r.phase, phaseForMs: Math.round(r.phaseForMs), resourceVersion: r.resourceVersion,
        lists: r.lists, watches: r.watches,
        ...(r.lastError ? { lastError: `${r.lastError.status ? `HTTP ${r.lastError.status} ` : ''}${r.lastError.reason}: ${r.lastError.message}` } : {}),
      })),
      ...(opts.keys ? { keys: Object.fromEntries(sorted) } : {}),
    };
  });
}
