/**
 * Samples every running replica of the endurance bench every `intervalMs`: RSS from /proc (VmRSS, and what it is made
 * of: RssAnon and RssFile + RssShmem; the anonymous part split by memparts.ts from smaps), and from its
 * /metrics the V8 heap (used, total), external memory, the event-loop delay (p99 since the previous scrape),
 * work-queue depth, reconciles and their latency histogram, informer lists and watch streams, API and Neutron
 * requests, and whether it leads. Histograms and counters are kept as what grew since the same incarnation's previous
 * sample (a new incarnation starts from zero), so windows can be summed across restarts.
 *
 * Each sample is also appended to `<dir>/samples.jsonl` (one JSON line) as it is taken.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { processRss } from '../../test/helpers/cgroup.ts';
import { type AnonParts, readAnonParts } from './memparts.ts';
import { histogram, labelValues, parseSamples, sum } from './promtext.ts';
import type { Replica } from './replicas.ts';
import { bucketDelta, type Buckets } from './stats.ts';

export interface Sample {
  /** Date.now(). */
  t: number;
  replica: string;
  incarnation: string;
  /** ms since the incarnation started. */
  uptimeMs: number;
  leader: boolean;
  rss: number;
  /** Of rss: RssAnon (what the process allocated) and RssFile + RssShmem (mapped files, the node binary's pages). */
  rssAnon: number;
  rssFile: number;
  /** Of rssAnon, resident bytes by part (memparts.ts: V8's pages and code, malloc's arenas, the rest); absent in the
   *  samples.jsonl of runs older than memparts.ts. */
  anon?: AnonParts;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** nodejs_eventloop_lag_p99_seconds (s). */
  loopP99: number;
  /** nodejs_eventloop_lag_max_seconds (s): the longest the event loop stood still since the previous sample (the
   *  sampler is the only scraper: prom-client resets the histogram at each scrape). A stall of seconds is one value in
   *  a window's p99 and invisible there. Absent in the samples.jsonl of older runs. */
  loopMax?: number;
  queueDepth: number;
  /** Since the previous sample of this incarnation, per controller: reconcile latency buckets, reconciles, errors. */
  reconcile: Record<string, { buckets: [number, number][]; count: number; errors: number }>;
  /** Since the previous sample of this incarnation: lists and watch streams begun, API requests failed, Neutron 5xx/errors. */
  lists: number;
  watches: number;
  apiErrors: number;
  neutronErrors: number;
}

interface Last { lists: number; watches: number; apiErrors: number; neutronErrors: number; hist: Map<string, Buckets>; count: Map<string, number>; errors: Map<string, number> }

export class Sampler {
  readonly samples: Sample[] = [];
  private readonly replicas: readonly Replica[];
  private readonly file: string;
  private readonly last = new Map<string, Last>();

  constructor(replicas: readonly Replica[], dir: string) {
    this.replicas = replicas;
    this.file = join(dir, 'samples.jsonl');
  }

  /** Samples until `signal` aborts. */
  async run(intervalMs: number, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const t0 = Date.now();
      await this.sampleAll();
      await new Promise((r) => setTimeout(r, Math.max(0, intervalMs - (Date.now() - t0))));
    }
  }

  async sampleAll(): Promise<void> {
    await Promise.all(this.replicas.map((r) => this.sample(r).catch(() => undefined)));
  }

  private async sample(r: Replica): Promise<void> {
    const proc = r.current;
    if (!proc?.running) return;
    const inc = r.incarnation;
    const text = await proc.metrics();
    const mem = processRss(proc.proc.pid ?? 0);
    const anon = readAnonParts(proc.proc.pid ?? 0);
    if (mem === undefined || anon === undefined) return; // the process exited meanwhile
    const s = parseSamples(text);
    const prev = this.last.get(inc);
    const now: Last = {
      lists: sum(s, 'informer_lists_total'), watches: sum(s, 'informer_watches_total'),
      apiErrors: s.filter((x) => x.name === 'rest_client_requests_total' && (x.labels['code'] === '<error>' || (x.labels['code'] ?? '').startsWith('5'))).reduce((a, x) => a + x.value, 0),
      neutronErrors: s.filter((x) => x.name === 'openstack_requests_total' && (x.labels['code'] === '<error>' || (x.labels['code'] ?? '').startsWith('5'))).reduce((a, x) => a + x.value, 0),
      hist: new Map(), count: new Map(), errors: new Map(),
    };
    const reconcile: Sample['reconcile'] = {};
    for (const c of labelValues(s, 'controller_runtime_reconcile_total', 'controller')) {
      const h = histogram(s, 'controller_runtime_reconcile_time_seconds', { controller: c });
      const count = sum(s, 'controller_runtime_reconcile_total', { controller: c });
      const errors = sum(s, 'controller_runtime_reconcile_errors_total', { controller: c });
      now.hist.set(c, h);
      now.count.set(c, count);
      now.errors.set(c, errors);
      reconcile[c] = { buckets: [...bucketDelta(h, prev?.hist.get(c))], count: count - (prev?.count.get(c) ?? 0), errors: errors - (prev?.errors.get(c) ?? 0) };
    }
    this.last.set(inc, now);
    const sample: Sample = {
      t: Date.now(), replica: r.name, incarnation: inc, uptimeMs: Date.now() - r.startedAt,
      leader: s.some((x) => x.name === 'leader_election_master_status' && x.value === 1),
      rss: mem.rss, rssAnon: mem.anon, rssFile: mem.file, anon, heapUsed: sum(s, 'nodejs_heap_size_used_bytes'), heapTotal: sum(s, 'nodejs_heap_size_total_bytes'),
      external: sum(s, 'nodejs_external_memory_bytes'), loopP99: sum(s, 'nodejs_eventloop_lag_p99_seconds'),
      loopMax: sum(s, 'nodejs_eventloop_lag_max_seconds'),
      queueDepth: sum(s, 'workqueue_depth'), reconcile,
      lists: now.lists - (prev?.lists ?? 0), watches: now.watches - (prev?.watches ?? 0),
      apiErrors: now.apiErrors - (prev?.apiErrors ?? 0), neutronErrors: now.neutronErrors - (prev?.neutronErrors ?? 0),
    };
    this.samples.push(sample);
    appendFileSync(this.file, `${JSON.stringify(sample)}\n`);
  }
}
