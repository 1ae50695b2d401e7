/**
 * One initial sync in a FRESH process, for bench/watchlist.ts: paged LIST or streaming list (watch-list), so each
 * run's peak RSS is its own (VmHWM of a process that did nothing else).
 *
 *   node bench/informer/watchlist-child.ts '<WatchListChildConfig as JSON>'
 *
 * A SharedInformerFactory (namespace scope = the bench namespace, default transform) with `useWatchList` as given,
 * one informer, one handler counting adds. The clock runs from factory.run() until the handler has seen every
 * expected object and its registration reports synced. Then the process reports its peak RSS (VmHWM), its RSS before
 * the informer started (Node + imports + client), its own CPU time, and how the cache was filled (the reflector's
 * requests, from a counting wrapper of the RestClient: LIST pages and WATCH requests with sendInitialEvents).
 */
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { RestClient, type RequestOptions, type Verb } from '../../pkg/client/rest.ts';
import { SharedInformerFactory } from '../../pkg/informerfactory/index.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import type { ResourceType } from '../../pkg/apimachinery/resource.ts';
import { until } from './cluster.ts';
import { monoNs, msBetween, selfCpuMs } from './stats.ts';

export interface WatchListChildConfig {
  kubeconfig: string;
  resource: ResourceType;
  namespace: string;
  expected: number;
  watchList: boolean;
}

export interface WatchListChildResult {
  syncMs: number;
  /** VmHWM: the most resident memory the process ever had, bytes. */
  peakRss: number;
  /** VmRSS just before the informer started, bytes. */
  baseRss: number;
  cpuMs: number;
  cached: number;
  listRequests: number;
  streamingWatches: number;
}

/** A /proc/self/status field in bytes (its value is in kB). */
function statusBytes(field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** Counts the requests the reflector makes (a LIST page, or a WATCH asking for initial events). */
class CountingRestClient extends RestClient {
  lists = 0;
  streamingWatches = 0;

  private tally(method: Verb, opts: RequestOptions): void {
    const q = opts.query ?? {};
    if (method === 'GET' && q['watch'] === 'true' && q['sendInitialEvents'] === 'true') this.streamingWatches++;
    else if (method === 'GET' && q['watch'] !== 'true') this.lists++;
  }

  override request(method: Verb, path: string, opts: RequestOptions = {}): ReturnType<RestClient['request']> {
    this.tally(method, opts);
    return super.request(method, path, opts);
  }

  override json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    this.tally(method, opts);
    return super.json<T>(method, path, opts);
  }
}

async function main(cfg: WatchListChildConfig): Promise<WatchListChildResult> {
  const kc = new KubeConfig();
  kc.loadFromFile(cfg.kubeconfig);
  const client = new CountingRestClient({ kubeConfig: kc, registry: new Registry(), userAgent: `tscm-bench-watchlist/${cfg.watchList ? 'stream' : 'list'}` });
  const factory = new SharedInformerFactory({ client, namespaces: [cfg.namespace], useWatchList: cfg.watchList, registry: new Registry() });
  const informer = factory.informerFor<KubeObject>(cfg.resource);
  let handled = 0;
  let end = 0n;
  const reg = informer.addEventHandler({
    onAdd: () => {
      if (++handled === cfg.expected) end = monoNs();
    },
  });
  const baseRss = statusBytes('VmRSS');
  const cpu0 = process.cpuUsage();
  const ac = new AbortController();
  const start = monoNs();
  const running = factory.run(ac.signal);
  try {
    await until(`sync of ${cfg.expected} ${cfg.resource.resource}`, () => handled >= cfg.expected && reg.hasSynced(), 600_000, 10);
  } finally {
    ac.abort();
    await running;
  }
  return {
    syncMs: msBetween(start, end),
    peakRss: statusBytes('VmHWM'),
    baseRss,
    cpuMs: selfCpuMs(cpu0),
    cached: informer.lister().list().length,
    listRequests: client.lists,
    streamingWatches: client.streamingWatches,
  };
}

if (import.meta.main) {
  const arg = process.argv[2];
  if (!arg) {
    process.stderr.write('usage: node bench/informer/watchlist-child.ts <WatchListChildConfig JSON>\n');
    process.exit(2);
  }
  const result = await main(JSON.parse(arg) as WatchListChildConfig);
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}
