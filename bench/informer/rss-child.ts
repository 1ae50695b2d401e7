/**
 * Memory of an informer cache, measured in a FRESH process per variant (so nothing the bench process did before
 * pollutes it). Run with --expose-gc:
 *
 *   node --expose-gc bench/informer/rss-child.ts '<RssConfig as JSON>'
 *
 * 1. Baseline: a SharedInformerFactory informer of the same type on an EMPTY namespace is started and synced (so
 *    modules, TLS/undici connection state, JIT and the informer's fixed structures are already paid for), and the
 *    bench namespace's objects are LISTed once (limit=500 pages, parsed, dropped) so the transient memory of
 *    receiving and parsing the pages is in the baseline too; then the garbage collector runs a few times and
 *    process.memoryUsage() is read.
 * 2. A second informer of the same type on the bench namespace (transform: default = strip managedFields, or
 *    identity `(o) => o`) is started and synced; it stays running (the cache stays alive) while GC runs again and
 *    memory is read.
 * Reported: the deltas (rss, heapUsed, external+arrayBuffers) and the number of cached objects. RSS can still hold
 * pages V8 freed but did not return to the OS; heapUsed after full GCs is the retained JS heap, the steadier number.
 */
import { settle } from './stats.ts';
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { Registry } from 'prom-client';
import { RestClient } from '../../pkg/client/rest.ts';
import { SharedInformerFactory } from '../../pkg/informerfactory/index.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { collectionPath } from '../../pkg/apimachinery/paths.ts';
import type { ResourceType } from '../../pkg/apimachinery/resource.ts';

export interface RssConfig {
  kubeconfig: string;
  resource: ResourceType;
  namespace: string;
  emptyNamespace: string;
  transform: 'strip' | 'identity';
  expected: number;
}

export interface RssResult {
  objects: number;
  rssDelta: number;
  heapUsedDelta: number;
  externalDelta: number;
  /** Whether the cached objects still carry metadata.managedFields (sanity check of the variant). */
  managedFieldsCached: boolean;
}


async function main(cfg: RssConfig): Promise<RssResult> {
  const kc = new KubeConfig();
  kc.loadFromFile(cfg.kubeconfig);
  const client = new RestClient({ kubeConfig: kc, registry: new Registry() });
  const ac = new AbortController();

  const empty = new SharedInformerFactory({ client, namespaces: [cfg.emptyNamespace] });
  empty.informerFor(cfg.resource);
  const runs = [empty.run(ac.signal)];
  if (!(await empty.waitForCacheSync({ timeoutMs: 60_000 }))) throw new Error('empty informer did not sync');
  let listed = 0;
  let continueToken: string | undefined;
  do {
    const page = await client.json<{ items?: unknown[]; metadata?: { continue?: string } }>(
      'GET', collectionPath(cfg.resource, cfg.namespace), { query: { limit: 500, continue: continueToken } });
    listed += page.items?.length ?? 0;
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  if (listed !== cfg.expected) throw new Error(`listed ${listed} objects, expected ${cfg.expected}`);
  const before = await settle();

  const factory = new SharedInformerFactory({ client, namespaces: [cfg.namespace] });
  const informer = factory.informerFor<KubeObject>(
    cfg.resource,
    cfg.transform === 'identity' ? { transform: (o: KubeObject) => o } : {},
  );
  runs.push(factory.run(ac.signal));
  if (!(await factory.waitForCacheSync({ timeoutMs: 300_000 }))) throw new Error('informer did not sync');
  const cached = informer.lister().list().length;
  if (cached !== cfg.expected) throw new Error(`cached ${cached} objects, expected ${cfg.expected}`);
  const after = await settle();
  const managedFieldsCached = informer.lister().list().some((o) => o.metadata?.managedFields !== undefined);

  ac.abort();
  await Promise.all(runs);
  return {
    objects: cached,
    rssDelta: after.rss - before.rss,
    heapUsedDelta: after.heapUsed - before.heapUsed,
    externalDelta: after.external + after.arrayBuffers - (before.external + before.arrayBuffers),
    managedFieldsCached,
  };
}

if (import.meta.main) {
  const arg = process.argv[2];
  if (!arg) {
    process.stderr.write('usage: node --expose-gc bench/informer/rss-child.ts <RssConfig JSON>\n');
    process.exit(2);
  }
  const result = await main(JSON.parse(arg) as RssConfig);
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}
