/**
 * Initial sync: the informer's time to a synced cache vs a raw paginated LIST of the same objects, in one process,
 * against the same API server.
 *
 *  - Raw LIST (the reference): GET <collection>?limit=500, then &continue=… until no token; every page's body read
 *    as text and JSON.parse'd (the least any client must do). Same RestClient (undici + client-node TLS) the informer
 *    uses, a fresh one per run.
 *  - Informer: a fresh RestClient and SharedInformerFactory (namespace scope = the bench namespace), informerFor()
 *    with the default transform (managedFields stripped), one handler that enqueues `ns/name` into a work queue with
 *    a worker draining it. Clock from factory.run() until the handler registration reports synced (every object of
 *    the initial list cached AND handed to the handler).
 */
import type { ControlPlane } from '../../test/cluster/controlplane.ts';
import {
  collectionPath, metaNamespaceKey, SharedInformerFactory, type KubeObject, type ResourceType,
} from '../../pkg/informerfactory/index.ts';
import { Queue } from '../../pkg/workqueue/index.ts';
import { restClient, until } from './cluster.ts';
import { monoNs, msBetween } from './stats.ts';

export interface RawListResult {
  ms: number;
  items: number;
  pages: number;
  /** Bytes of JSON received (sum of page bodies, as UTF-16 string length ≈ bytes for ASCII JSON). */
  bytes: number;
}

export async function rawPaginatedList(cp: ControlPlane, resource: ResourceType, namespace: string): Promise<RawListResult> {
  const client = restClient(cp);
  const path = collectionPath(resource, namespace);
  const start = monoNs();
  let continueToken: string | undefined;
  let items = 0;
  let pages = 0;
  let bytes = 0;
  do {
    const res = await client.request('GET', path, { query: { limit: 500, continue: continueToken }, timeoutMs: 60_000 });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`LIST ${path}: HTTP ${res.status} ${text.slice(0, 300)}`);
    const body = JSON.parse(text) as { items?: unknown[]; metadata?: { continue?: string } };
    items += body.items?.length ?? 0;
    bytes += text.length;
    pages++;
    continueToken = body.metadata?.continue || undefined;
  } while (continueToken);
  return { ms: msBetween(start, monoNs()), items, pages, bytes };
}

export interface InformerSyncResult {
  ms: number;
  cached: number;
  handled: number;
}

/** Runs a fresh informer until its handler has synced `expected` objects; stops it again. */
export async function informerSync(cp: ControlPlane, resource: ResourceType, namespace: string, expected: number): Promise<InformerSyncResult> {
  const factory = new SharedInformerFactory({ client: restClient(cp), namespaces: [namespace] });
  const informer = factory.informerFor<KubeObject>(resource);
  const queue = new Queue<string>();
  let handled = 0;
  let end = 0n;
  const reg = informer.addEventHandler({
    onAdd: (obj) => {
      queue.add(metaNamespaceKey(obj));
      if (++handled === expected) end = monoNs();
    },
  });
  const worker = (async (): Promise<void> => {
    for (;;) {
      const r = await queue.get();
      if (r.shutdown) return;
      queue.done(r.item);
    }
  })();
  const ac = new AbortController();
  const start = monoNs();
  const running = factory.run(ac.signal);
  try {
    // The clock stops inside the handler call that saw the last object (end); the registration must then report
    // synced (its last initial notification returned), which is checked without adding to the measured time.
    await until(`informer sync of ${expected} ${resource.resource}`, () => handled >= expected && reg.hasSynced(), 300_000, 20);
  } finally {
    ac.abort();
    await running;
    queue.shutDown();
    await worker;
  }
  return { ms: msBetween(start, end), cached: informer.lister().list().length, handled };
}
