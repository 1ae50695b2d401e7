/**
 * What an endurance run found, from its samples, faults, checkpoints, churn and logs: the results tree of the bench's
 * results file (bench/results.ts) and the goals of issue 43, each met, missed or not measurable in this run.
 *
 * Windows: after the warm-up, the FIRST window (the anchor) and the LAST window are each an hour, or half of what is
 * left after the warm-up when the run is shorter than 2 h + the warm-up. Memory growth is the least-squares slope of
 * the 5-minute floors (minimum per window) of each incarnation's part — as standby, as leader (growthRates) — after
 * its own warm-up, over parts that ran at least `minGrowthSpanMs` after it; RSS, V8 heap used and external memory
 * alike, and RSS's two parts alone (anonymous memory, and the mapped files' pages — the node binary's code as new
 * paths first run it: shared, reclaimable and bounded by the binary's size, where a leak is anonymous). The same
 * slope over the LAST window alone (`memory.lastWindow`: the worst of the parts that covered 80 % of it) tells a
 * process still growing from one that settled: in the 85-min run of 29 Nov 2026 the leader's RSS floor rose by
 * 11 MiB between its 10th and 40th minute and by under 1 MiB in the 40 min after, which the whole-span slope
 * (9 MiB/h, the goal's measure) hides. The anonymous part is fitted by what it is made of too (`anon`: V8's pages and
 * code, malloc's main and thread arenas, the rest; memparts.ts), where every sample of a part has the split.
 */
import type { ResultTree } from '../results.ts';
import { val } from '../results.ts';
import type { CheckpointResult } from './checkpoint.ts';
import type { Churn } from './churn.ts';
import type { FaultRecord } from './faults.ts';
import type { LogCounts, Replica } from './replicas.ts';
import { anonPartNames, type AnonParts } from './memparts.ts';
import type { Sample } from './sampler.ts';
import { addBuckets, bucketQuantile, median, slope, windowFloors, type Buckets } from './stats.ts';

const MiB = 1024 * 1024;
const HOUR = 3_600_000;

export interface ReportInput {
  startedAt: number;
  endedAt: number;
  warmupMs: number;
  /** Shortest post-warm-up span of an incarnation whose growth counts. */
  minGrowthSpanMs: number;
  samples: readonly Sample[];
  faults: readonly FaultRecord[];
  checkpoints: readonly CheckpointResult[];
  churn: Churn;
  /** ms the churn ran (pauses excluded). */
  churnMs: number;
  logs: LogCounts;
  replicas: readonly Replica[];
}

export interface Goal { name: string; verdict: 'met' | 'missed' | 'not measured'; detail: string }

export interface Report { results: ResultTree; goals: Goal[]; lines: string[] }

/**
 * MiB/h of the floors of an incarnation's part (growthRates); rssAnon and rssFile are what its RSS is made of
 * (sampler.ts), each fitted alone.
 */
interface Growth {
  incarnation: string; spanMs: number; rss: number; rssAnon: number; rssFile: number; heap: number; external: number;
  /** rssAnon's parts, each fitted alone; absent when a sample of the part lacks the split. */
  anon?: AnonParts;
}

/**
 * Growth rates (MiB/h) of each incarnation's parts — `a#2 (standby)`, `a#2 (leader)`: a standby that becomes the
 * leader starts its controllers then, and their memory arrives at once (a step, not growth) — each after its own
 * warm-up (from the process's start, or from the first sample as leader), and from `fromT` on (a Date.now() time).
 * Samples are in time order per incarnation.
 */
export function growthRates(samples: readonly Sample[], warmupMs: number, minSpanMs: number, fromT = -Infinity): Growth[] {
  const parts = new Map<string, { start: number; ss: Sample[] }>();
  const seen = new Set<string>();
  for (const s of samples) {
    const key = `${s.incarnation} (${s.leader ? 'leader' : 'standby'})`;
    let part = parts.get(key);
    if (!part) {
      // The incarnation's first part starts with the process; a later one where its role changed.
      part = { start: seen.has(s.incarnation) ? s.t : s.t - s.uptimeMs, ss: [] };
      parts.set(key, part);
    }
    seen.add(s.incarnation);
    if (s.t - part.start >= warmupMs && s.t >= fromT) part.ss.push(s);
  }
  const out: Growth[] = [];
  for (const [inc, { ss }] of parts) {
    const span = (ss[ss.length - 1]?.t ?? 0) - (ss[0]?.t ?? 0);
    if (span < minSpanMs) continue;
    const rate = (f: (s: Sample) => number): number => (slope(windowFloors(ss.map((s) => [s.t, f(s)]), 5 * 60_000)) ?? 0) * HOUR / MiB;
    const g: Growth = { incarnation: inc, spanMs: span, rss: rate((s) => s.rss), rssAnon: rate((s) => s.rssAnon), rssFile: rate((s) => s.rssFile), heap: rate((s) => s.heapUsed), external: rate((s) => s.external) };
    if (ss.every((s) => s.anon)) {
      const anon: AnonParts = { mallocMain: 0, mallocThreads: 0, v8Code: 0, v8Pages: 0, other: 0 };
      for (const k of anonPartNames) anon[k] = rate((s) => s.anon?.[k] ?? 0);
      g.anon = anon;
    }
    out.push(g);
  }
  return out.sort((a, b) => b.spanMs - a.spanMs);
}

/** `{ anon: { part: worst MiB/h } }` over the growths that have the split, or nothing when none has it. */
function anonTree(growth: readonly Growth[]): ResultTree {
  const withParts = growth.flatMap((g) => (g.anon ? [g.anon] : []));
  if (!withParts.length) return {};
  return { anon: Object.fromEntries(anonPartNames.map((k) => [k, val(Math.max(...withParts.map((a) => a[k])), 'MiB/h')])) };
}

/** [start, end) of the first and last windows (Date.now() times). */
export function windows(startedAt: number, endedAt: number, warmupMs: number): { first: [number, number]; last: [number, number] } {
  const from = startedAt + warmupMs;
  const len = Math.min(HOUR, Math.max(0, (endedAt - from) / 2));
  return { first: [from, from + len], last: [endedAt - len, endedAt] };
}

function reconcileBuckets(samples: readonly Sample[], [a, b]: [number, number]): Map<string, { buckets: Buckets; count: number; errors: number }> {
  const out = new Map<string, { buckets: Buckets; count: number; errors: number }>();
  for (const s of samples) {
    if (s.t < a || s.t >= b) continue;
    for (const [c, r] of Object.entries(s.reconcile)) {
      const cur = out.get(c) ?? { buckets: new Map<number, number>(), count: 0, errors: 0 };
      // JSON turns the +Inf bound into null (samples read back from samples.jsonl).
      addBuckets(cur.buckets, new Map<number, number>(r.buckets.map(([le, n]): [number, number] => [le ?? Infinity, n])));
      cur.count += r.count;
      cur.errors += r.errors;
      out.set(c, cur);
    }
  }
  return out;
}

export function report(input: ReportInput): Report {
  const r: ResultTree = {};
  const goals: Goal[] = [];
  const lines: string[] = [];
  const set = (path: string, v: ResultTree[string]): void => {
    const keys = path.split('.');
    let node = r;
    for (const k of keys.slice(0, -1)) node = (node[k] ??= {}) as ResultTree;
    node[keys[keys.length - 1] as string] = v;
  };
  const durationMs = input.endedAt - input.startedAt;
  set('run.minutes', val(durationMs / 60_000, 'min'));
  set('run.warmup', val(input.warmupMs / 60_000, 'min'));

  // Churn.
  const churnCounts: ResultTree = {};
  let ok = 0;
  let failed = 0;
  for (const [k, c] of input.churn.counts) {
    churnCounts[k.replace(' ', '.')] = { ok: val(c.ok, 'count'), failed: val(c.failed, 'count') };
    ok += c.ok;
    failed += c.failed;
  }
  set('churn.changes', val(ok, 'count'));
  set('churn.failed', val(failed, 'count'));
  set('churn.skipped', val(input.churn.skipped, 'count'));
  if (input.churnMs > 0) set('churn.rate', val(ok / (input.churnMs / 1000), '/s'));
  set('churn.byKindOp', churnCounts);
  const failures = [...input.churn.failures].sort((a, b) => b[1] - a[1]); // most frequent first
  const failedBy: ResultTree = {};
  for (const [why, n] of failures) failedBy[why] = val(n, 'count');
  set('churn.failedBy', failedBy);
  lines.push(`churn: ${ok} changes answered (${input.churnMs > 0 ? (ok / (input.churnMs / 1000)).toFixed(1) : '–'}/s while running), ${failed} failed` +
    `${failed ? ` (${failures.map(([why, n]) => `${n} ${why}`).join(', ')})` : ''}, ${input.churn.skipped} skipped (no request slot)`);

  // Memory growth.
  const growth = growthRates(input.samples, input.warmupMs, input.minGrowthSpanMs);
  set('memory.incarnationsMeasured', val(growth.length, 'count'));
  if (growth.length) {
    const worst = (f: (g: Growth) => number): number => Math.max(...growth.map(f));
    const longest = growth[0] as Growth;
    set('memory.longest', { incarnation: longest.incarnation, span: val(longest.spanMs / 60_000, 'min'), rss: val(longest.rss, 'MiB/h'), rssAnon: val(longest.rssAnon, 'MiB/h'), rssFile: val(longest.rssFile, 'MiB/h'), heap: val(longest.heap, 'MiB/h'), external: val(longest.external, 'MiB/h'), ...anonTree([longest]) });
    set('memory.max', { rss: val(worst((g) => g.rss), 'MiB/h'), rssAnon: val(worst((g) => g.rssAnon), 'MiB/h'), rssFile: val(worst((g) => g.rssFile), 'MiB/h'), heap: val(worst((g) => g.heap), 'MiB/h'), external: val(worst((g) => g.external), 'MiB/h'), ...anonTree(growth) });
    const over = growth.filter((g) => g.rss > 1 || g.heap > 1);
    const describe = (g: Growth): string =>
      `${g.incarnation} over ${(g.spanMs / 60_000).toFixed(0)} min: RSS ${g.rss.toFixed(2)} (anonymous ${g.rssAnon.toFixed(2)}` +
      `${g.anon ? ` = ${anonPartNames.map((k) => `${k} ${(g.anon as AnonParts)[k].toFixed(2)}`).join(' + ')}` : ''}, files ${g.rssFile.toFixed(2)}), heap ${g.heap.toFixed(2)}, external ${g.external.toFixed(2)} MiB/h`;
    // The last window alone (file comment): the parts that covered at least 80 % of it, the worst of them.
    const { last } = windows(input.startedAt, input.endedAt, input.warmupMs);
    const lastGrowth = growthRates(input.samples, input.warmupMs, Math.min(input.minGrowthSpanMs, 0.8 * (last[1] - last[0])), last[0]);
    if (lastGrowth.length) {
      const worstLast = (f: (g: Growth) => number): number => Math.max(...lastGrowth.map(f));
      set('memory.lastWindow', {
        incarnations: val(lastGrowth.length, 'count'),
        max: { rss: val(worstLast((g) => g.rss), 'MiB/h'), rssAnon: val(worstLast((g) => g.rssAnon), 'MiB/h'), rssFile: val(worstLast((g) => g.rssFile), 'MiB/h'), heap: val(worstLast((g) => g.heap), 'MiB/h'), external: val(worstLast((g) => g.external), 'MiB/h'), ...anonTree(lastGrowth) },
      });
    }
    goals.push({ name: 'RSS and V8 heap growth ≤ 1 MiB/h after warm-up', verdict: over.length ? 'missed' : 'met',
      detail: growth.map(describe).join('; ') + (lastGrowth.length ? `; in the last window alone: ${lastGrowth.map(describe).join('; ')}` : '') });
  } else {
    goals.push({ name: 'RSS and V8 heap growth ≤ 1 MiB/h after warm-up', verdict: 'not measured', detail: `no incarnation ran ${(input.minGrowthSpanMs / 60_000).toFixed(0)} min after its warm-up` });
  }
  const peak = (f: (s: Sample) => number): number => Math.max(0, ...input.samples.map(f));
  set('memory.peakRss', val(peak((s) => s.rss) / MiB, 'MiB'));
  set('memory.peakHeapUsed', val(peak((s) => s.heapUsed) / MiB, 'MiB'));
  set('memory.peakExternal', val(peak((s) => s.external) / MiB, 'MiB'));
  for (const rep of input.replicas) {
    const cg = rep.cgroupStats();
    if (cg) set(`memory.cgroup.${rep.name}`, { maxUsage: val(cg.maxUsage / MiB, 'MiB'), oomKills: val(cg.oomKills, 'count') });
  }

  // Latency windows.
  const w = windows(input.startedAt, input.endedAt, input.warmupMs);
  set('windows.length', val((w.first[1] - w.first[0]) / 60_000, 'min'));
  const first = reconcileBuckets(input.samples, w.first);
  const last = reconcileBuckets(input.samples, w.last);
  const ratios: string[] = [];
  let latencyMissed = false;
  let latencyMeasured = false;
  for (const c of new Set([...first.keys(), ...last.keys()])) {
    const p1 = bucketQuantile(0.99, first.get(c)?.buckets ?? new Map<number, number>());
    const p2 = bucketQuantile(0.99, last.get(c)?.buckets ?? new Map<number, number>());
    if (p1 !== undefined) set(`latency.${c}.first.p99`, val(p1 * 1000, 'ms'));
    if (p2 !== undefined) set(`latency.${c}.last.p99`, val(p2 * 1000, 'ms'));
    set(`latency.${c}.first.reconciles`, val(first.get(c)?.count ?? 0, 'count'));
    set(`latency.${c}.last.reconciles`, val(last.get(c)?.count ?? 0, 'count'));
    if (p1 !== undefined && p2 !== undefined && p1 > 0) {
      latencyMeasured = true;
      set(`latency.${c}.ratio`, val(p2 / p1, '×'));
      if (p2 / p1 > 1.2) latencyMissed = true;
      ratios.push(`${c} ${(p1 * 1000).toFixed(0)} → ${(p2 * 1000).toFixed(0)} ms (${(p2 / p1).toFixed(2)}×)`);
    }
  }
  goals.push({ name: 'reconcile p99, last window ≤ 1.2 × first', verdict: latencyMeasured ? (latencyMissed ? 'missed' : 'met') : 'not measured', detail: ratios.join('; ') || 'no reconciles in a window' });
  for (const [name, win] of [['first', w.first], ['last', w.last]] as const) {
    const ss = input.samples.filter((s) => s.t >= win[0] && s.t < win[1]);
    const loops = ss.map((s) => s.loopP99 * 1000);
    const depth = ss.filter((s) => s.leader).map((s) => s.queueDepth);
    if (loops.length) set(`eventLoop.${name}`, { p99Median: val(median(loops) ?? 0, 'ms'), p99Max: val(Math.max(...loops), 'ms') });
    if (depth.length) set(`queueDepth.${name}`, { median: val(median(depth) ?? 0, 'count'), max: val(Math.max(...depth), 'count') });
  }

  // Informers: lists (initial + relists) and watch streams, all incarnations.
  const lists = input.samples.reduce((n, s) => n + s.lists, 0);
  const watches = input.samples.reduce((n, s) => n + s.watches, 0);
  set('informers.lists', val(lists, 'count'));
  set('informers.watches', val(watches, 'count'));
  set('informers.apiErrors', val(input.samples.reduce((n, s) => n + s.apiErrors, 0), 'count'));
  set('informers.neutronErrors', val(input.samples.reduce((n, s) => n + s.neutronErrors, 0), 'count'));

  // Faults and recoveries.
  const restarts = input.faults.filter((f) => f.kind === 'apiserver-crash' || f.kind === 'apiserver-graceful');
  const slowCaches: string[] = [];
  for (const kind of ['apiserver-crash', 'apiserver-graceful', 'compaction', 'leader-kill', 'neutron-errors', 'neutron-slow'] as const) {
    const fs = input.faults.filter((f) => f.kind === kind);
    if (!fs.length) continue;
    set(`faults.${kind}.count`, val(fs.length, 'count'));
    const caches = fs.flatMap((f) => Object.values(f.recovery?.cachesMs ?? {})).filter((x): x is number => x !== undefined);
    const missing = fs.flatMap((f) => Object.values(f.recovery?.cachesMs ?? {})).filter((x) => x === undefined).length;
    const rec = fs.map((f) => f.recovery?.reconcileMs).filter((x): x is number => x !== undefined);
    if (caches.length) set(`faults.${kind}.cachesWatching`, { median: val((median(caches) ?? 0) / 1000, 's'), max: val(Math.max(...caches) / 1000, 's') });
    if (missing) set(`faults.${kind}.cachesNotWithinTimeout`, val(missing, 'count'));
    if (rec.length) set(`faults.${kind}.reconcileAgain`, { median: val((median(rec) ?? 0) / 1000, 's'), max: val(Math.max(...rec) / 1000, 's') });
    const exits = fs.reduce((n, f) => n + (f.recovery?.exits.length ?? 0), 0);
    if (fs[0]?.recovery) set(`faults.${kind}.replicaExits`, val(exits, 'count'));
    const affected = fs.reduce((n, f) => n + (f.affected ?? 0), 0);
    if (fs[0]?.affected !== undefined) set(`faults.${kind}.requestsAffected`, val(affected, 'count'));
    const down = fs.map((f) => f.durationMs);
    if (kind.startsWith('apiserver') || kind === 'compaction') set(`faults.${kind}.downtime`, { median: val((median(down) ?? 0) / 1000, 's'), max: val(Math.max(...down) / 1000, 's') });
    lines.push(`${kind} ×${fs.length}: ${caches.length ? `caches watching again median ${((median(caches) ?? 0) / 1000).toFixed(1)} s, max ${(Math.max(...caches) / 1000).toFixed(1)} s; ` : ''}` +
      `${rec.length ? `reconciling again median ${((median(rec) ?? 0) / 1000).toFixed(1)} s, max ${(Math.max(...rec) / 1000).toFixed(1)} s; ` : ''}` +
      `${fs[0]?.recovery ? `replica exits ${exits}` : `${affected} requests affected`}`);
  }
  for (const f of restarts) {
    for (const [rep, ms] of Object.entries(f.recovery?.cachesMs ?? {})) if (ms === undefined || ms > 10_000) slowCaches.push(`${f.kind} at ${new Date(f.at).toISOString().slice(11, 19)}: ${rep} ${ms === undefined ? 'not within the timeout' : `${(ms / 1000).toFixed(1)} s`}`);
  }
  // Each restart: the slowest replica's time to caches watching again (∞: not within the recovery timeout).
  const perRestart = restarts.map((f) => {
    const worst = Math.max(...Object.values(f.recovery?.cachesMs ?? {}).map((x) => x ?? Infinity));
    return `${f.kind === 'apiserver-crash' ? 'crash' : 'graceful'} ${new Date(f.at).toISOString().slice(11, 16)} ${Number.isFinite(worst) ? `${(worst / 1000).toFixed(1)} s` : 'not within the timeout'}`;
  });
  goals.push({ name: 'caches watching again ≤ 10 s after every kube-apiserver restart', verdict: restarts.length ? (slowCaches.length ? 'missed' : 'met') : 'not measured',
    detail: restarts.length ? perRestart.join(', ') : 'no restart' });

  // Checkpoints.
  const cps = input.checkpoints;
  set('checkpoints.count', val(cps.length, 'count'));
  set('checkpoints.converged', val(cps.filter((c) => c.converged).length, 'count'));
  set('checkpoints.cacheMismatches', val(cps.reduce((n, c) => n + c.mismatches.length, 0), 'count'));
  set('checkpoints.cachesCompared', val(cps.reduce((n, c) => n + c.cachesCompared, 0), 'count'));
  const leaked = Math.max(0, ...cps.map((c) => c.report.counts.leaked + c.report.counts.untagged));
  const duplicated = Math.max(0, ...cps.map((c) => c.report.counts.duplicated));
  set('checkpoints.neutronLeaked', val(leaked, 'count'));
  set('checkpoints.neutronDuplicated', val(duplicated, 'count'));
  const convergeMs = cps.map((c) => c.convergeMs);
  if (convergeMs.length) set('checkpoints.convergeTime', { median: val((median(convergeMs) ?? 0) / 1000, 's'), max: val(Math.max(...convergeMs) / 1000, 's') });
  const objects = cps.map((c) => c.report.counts.foos + c.report.counts.deployments + c.report.counts.networks);
  if (objects.length) set('checkpoints.objects', { median: val(median(objects) ?? 0, 'count'), max: val(Math.max(...objects), 'count') });
  goals.push({ name: '0 checkpoint mismatches (every cache equals the API server; every object converged)', verdict: cps.length ? (cps.every((c) => c.converged && c.cachesEqual) ? 'met' : 'missed') : 'not measured',
    detail: `${cps.length} checkpoints, ${cps.filter((c) => c.converged).length} converged, ${cps.reduce((n, c) => n + c.mismatches.length, 0)} cache mismatches in ${cps.reduce((n, c) => n + c.cachesCompared, 0)} comparisons` });
  goals.push({ name: '0 leaked or duplicated Neutron networks', verdict: cps.length ? (leaked + duplicated === 0 ? 'met' : 'missed') : 'not measured', detail: `at the checkpoints: at most ${leaked} leaked, ${duplicated} duplicated` });

  // Replicas.
  const exits = input.replicas.flatMap((rep) => rep.exits);
  set('replicas.exits', val(exits.length, 'count'));
  set('replicas.exitsByBench', val(exits.filter((e) => e.killedByBench).length, 'count'));
  set('replicas.exitsOnTheirOwn', val(exits.filter((e) => !e.killedByBench).length, 'count'));
  set('replicas.oomKills', val(Math.max(0, ...exits.map((e) => e.oomKills)), 'count'));

  // Logs.
  set('logs.lines', val(input.logs.total, 'count'));
  if (durationMs > 0) set('logs.perHour', val(input.logs.total / (durationMs / HOUR), 'count'));
  const top = [...input.logs.byMessage].sort((a, b) => b[1] - a[1]).slice(0, 8);
  const topTree: ResultTree = {};
  top.forEach(([msg, n], i) => (topTree[String(i + 1)] = { message: msg, lines: val(n, 'count'), share: val((100 * n) / Math.max(1, input.logs.total), '%') }));
  set('logs.top', topTree);
  for (const [lvl, n] of input.logs.byLevel) set(`logs.byLevel.${lvl}`, val(n, 'count'));
  lines.push(`logs: ${input.logs.total} lines; top: ${top.slice(0, 3).map(([m, n]) => `"${m}" ${((100 * n) / Math.max(1, input.logs.total)).toFixed(0)} %`).join(', ')}`);
  return { results: r, goals, lines };
}
