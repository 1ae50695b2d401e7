/**
 * Initial sync: the informer's time to a synced cache vs a raw paginated LIST of the same objects, in one process,
 * against the same API server.
 *
 *  - Raw LIST (the reference): GET <collection>?limit=500, then &continue=… until no token; every page's body read
 *    as text and JSON.parse'd and its items collected into one array (the least a client that uses the objects must
 *    do). Same RestClient (undici + client-node TLS) the informer uses, a fresh one per run. Also measured: the same
 *    LIST dropping each page once parsed (shows what holding 10 000 objects costs in GC alone).
 *  - Informer: a fresh RestClient and SharedInformerFactory (namespace scope = the bench namespace), informerFor()
 *    with the default transform (managedFields stripped), one handler that enqueues `ns/name` into a work queue with
 *    a worker draining it. Clock from factory.run() until the handler registration reports synced (every object of
 *    the initial list cached AND handed to the handler).
 */
import type { ControlPlane } from '../../test/cluster/controlplane.ts';
import { SharedInformerFactory } from '../../pkg/informerfactory/index.ts';
import { metaNamespaceKey } from '../../pkg/apimachinery/keys.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { collectionPath } from '../../pkg/apimachinery/paths.ts';
import type { ResourceType } from '../../pkg/apimachinery/resource.ts';
import { Queue } from '../../pkg/workqueue/index.ts';
import { Registry } from 'prom-client';
import { RestClient, type RequestOptions, type Verb } from '../../pkg/client/rest.ts';
import { adminKubeConfig, restClient, until } from './cluster.ts';
import { monoNs, msBetween, selfCpuMs } from './stats.ts';

export interface RawListResult {
  ms: number;
  /** CPU time this process used meanwhile (client-side cost, independent of how busy the machine is). */
  cpuMs: number;
  items: number;
  pages: number;
  /** Bytes of JSON received (sum of page bodies, as UTF-16 string length ≈ bytes for ASCII JSON). */
  bytes: number;
}

/**
 * `keep`: collect the items of every page into one array until the end, as a client that uses the result must
 * (client-go's pager does; the informer has to as well). Otherwise each page is dropped once parsed.
 */
export async function rawPaginatedList(cp: ControlPlane, resource: ResourceType, namespace: string, keep = true): Promise<RawListResult> {
  const client = restClient(cp);
  const path = collectionPath(resource, namespace);
  const cpu0 = process.cpuUsage();
  const start = monoNs();
  let continueToken: string | undefined;
  let items = 0;
  let pages = 0;
  let bytes = 0;
  const kept: unknown[] = [];
  do {
    const res = await client.request('GET', path, { query: { limit: 500, continue: continueToken }, timeoutMs: 60_000 });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`LIST ${path}: HTTP ${res.status} ${text.slice(0, 300)}`);
    const body = JSON.parse(text) as { items?: unknown[]; metadata?: { continue?: string } };
    items += body.items?.length ?? 0;
    if (keep) for (const item of body.items ?? []) kept.push(item);
    bytes += text.length;
    pages++;
    continueToken = body.metadata?.continue || undefined;
  } while (continueToken);
  const ms = msBetween(start, monoNs());
  const cpuMs = selfCpuMs(cpu0);
  if (keep && kept.length !== items) throw new Error('raw LIST lost items');
  return { ms, cpuMs, items, pages, bytes };
}

export interface InformerSyncResult {
  ms: number;
  /** CPU time this process used from start to the last handler call. */
  cpuMs: number;
  /** Of `ms`: start → last LIST page received and parsed (the rest is queueing, caching and handler delivery). */
  listMs: number;
  cached: number;
  handled: number;
}

/** A RestClient that notes when its last JSON call (the informer's LIST pages) finished. */
class TimedRestClient extends RestClient {
  lastJsonDone = 0n;

  override async json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const r = await super.json<T>(method, path, opts);
    this.lastJsonDone = monoNs();
    return r;
  }
}

/** Runs a fresh informer until its handler has synced `expected` objects; stops it again. */
export async function informerSync(cp: ControlPlane, resource: ResourceType, namespace: string, expected: number): Promise<InformerSyncResult> {
  const client = new TimedRestClient({ kubeConfig: adminKubeConfig(cp), registry: new Registry(), userAgent: 'tscm-bench' });
  const factory = new SharedInformerFactory({ client, namespaces: [namespace] });
  const informer = factory.informerFor<KubeObject>(resource);
  const queue = new Queue<string>();
  let handled = 0;
  let end = 0n;
  let cpuMs = 0;
  const cpu0 = process.cpuUsage();
  const reg = informer.addEventHandler({
    onAdd: (obj) => {
      queue.add(metaNamespaceKey(obj));
      if (++handled === expected) {
        end = monoNs();
        cpuMs = selfCpuMs(cpu0);
      }
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
  return { ms: msBetween(start, end), cpuMs, listMs: msBetween(start, client.lastJsonDone), cached: informer.lister().list().length, handled };
}
