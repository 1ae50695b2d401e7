/**
 * Summarises V8 profiles by where the cost goes (issue 30):
 *
 *  - `.cpuprofile` (from /debug/pprof/profile or `node --cpu-prof`): self time of every sample attributed to a
 *    PHASE by the innermost frame of this project (or of a dependency) on its stack — list/watch + decode
 *    (pkg/informerfactory's reflector, list/watch, watch decoder, and pkg/client under them), cache (delta queue,
 *    indexer, shared informer, handlers), work queue, reconcile (pkg/controller, pkg/controllers), HTTP write path
 *    (pkg/client and pkg/events under a controller), manager (leases, servers), logging, metrics, module
 *    load/compile, network I/O with no project frame (node:http2/tls/net/stream internals), GC, VM/native — and
 *    within each phase how much ran in node: internals. Plus the top self-time functions. V8 attributes builtins
 *    (JSON.parse, JSON.stringify) to their JavaScript caller: JSON decoding shows as `json` (pkg/client/rest) and
 *    `parseWatchEvent` (pkg/informerfactory/watchdecoder) self time.
 *  - `.heapsnapshot`: retained self size by node type and constructor name (what the MiB are made of).
 *
 *   node bench/profile-summary.ts a.cpuprofile [b.cpuprofile …]      (several CPU profiles are summed)
 *   node bench/profile-summary.ts a.heapprofile [b.heapprofile …]    (allocations by phase)
 *   node bench/profile-summary.ts x.heapsnapshot
 *   node bench/profile-summary.ts --diff before.heapsnapshot after.heapsnapshot   (what grew: a leak hunt)
 *
 * As a module: `summariseCpu(profiles)` / `summariseSnapshot(snapshot)` return the numbers and markdown.
 */
import { readFileSync } from 'node:fs';

export interface CallFrame { functionName: string; url: string; lineNumber: number; columnNumber: number }
export interface CpuProfileNode { id: number; callFrame: CallFrame; children?: number[] }
export interface CpuProfile { nodes: CpuProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

export const phases = [
  'list/watch + decode', 'cache (informer, indexer, handlers)', 'work queue', 'reconcile', 'HTTP write path',
  'HTTP client, caller not on the stack (async)', 'profiler itself',
  'manager (leases, servers)', 'logging', 'metrics', 'module load/compile', 'network I/O (no project frame)', 'GC',
  'VM/native (program)', 'other',
] as const;
export type Phase = (typeof phases)[number];

type Leaf = 'JSON.parse' | 'JSON.stringify' | 'node internals' | 'code';

/** The project room of a frame's URL ("client", "informerfactory/reflector", …) or undefined. */
function projectFile(url: string): string | undefined {
  const m = /\/(?:dist\/)?(pkg|cmd)\/(.+?)\.(?:js|ts)$/.exec(url);
  if (!m || url.includes('/node_modules/')) return undefined;
  return `${m[1]}/${m[2]}`;
}

function depName(url: string): string | undefined {
  const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  return m?.[1];
}

const decodeFiles = /^pkg\/informerfactory\/(reflector|listwatch|watchdecoder|reflectorstate|watchcounter)$/;

/** Phase of one stack (leaf first). */
function phaseOf(stack: CallFrame[]): Phase {
  const leaf = stack[0];
  if (!leaf) return 'other';
  if (leaf.functionName === '(garbage collector)') return 'GC';
  if (leaf.functionName === '(program)' || leaf.functionName === '(root)') return 'VM/native (program)';
  if (stack.some((f) => f.url.includes('/pkg/manager/pprof.') || f.functionName === 'getHeapSnapshot')) return 'profiler itself';
  let sawClient = false;
  for (const f of stack) {
    const file = projectFile(f.url);
    if (file) {
      if (file.startsWith('pkg/client/')) {
        sawClient = true;
        continue; // who called the client decides: the informers (list/watch) or a controller (writes)
      }
      if (decodeFiles.test(file)) return 'list/watch + decode';
      if (file.startsWith('pkg/informerfactory/')) return sawClient ? 'list/watch + decode' : 'cache (informer, indexer, handlers)';
      if (file.startsWith('pkg/workqueue/')) return 'work queue';
      if (file.startsWith('pkg/events/')) return 'HTTP write path';
      if (file.startsWith('pkg/controller/') || file.startsWith('pkg/controllers/')) return sawClient ? 'HTTP write path' : 'reconcile';
      if (file.startsWith('pkg/log/')) return 'logging';
      if (file.startsWith('pkg/metrics/')) return 'metrics';
      if (file.startsWith('pkg/manager/') || file.startsWith('pkg/runtime/') || file.startsWith('pkg/sharding/') || file.startsWith('cmd/')) {
        return 'manager (leases, servers)';
      }
      continue; // pkg/util etc.: look further up
    }
    const dep = depName(f.url);
    if (dep === 'pino' || dep === 'sonic-boom' || dep === 'thread-stream') return 'logging';
    if (dep === 'prom-client' || dep === 'tdigest' || dep === 'bintrees') return 'metrics';
    if (/^node:internal\/modules\//.test(f.url) || f.functionName === 'compileSourceTextModule') return 'module load/compile';
  }
  // Client work resumed from the event loop (response bodies, stream events): its caller is behind an await. At
  // N ≥ 1 000 almost every request is a write (3 per Foo, against N/500 list pages and one watch per type).
  if (sawClient) return 'HTTP client, caller not on the stack (async)';
  if (stack.some((f) => /^node:(internal\/)?(http2|_tls|tls|net|stream|internal\/stream|internal\/streams)/.test(f.url))) return 'network I/O (no project frame)';
  return 'other';
}

function leafKind(f: CallFrame): Leaf {
  if (f.url === '' && f.functionName === 'parse') return 'JSON.parse';
  if (f.url === '' && f.functionName === 'stringify') return 'JSON.stringify';
  if (f.url.startsWith('node:')) return 'node internals';
  return 'code';
}

export interface CpuSummary {
  /** Sampled wall time excluding (idle), ms. */
  busyMs: number;
  idleMs: number;
  byPhase: Map<Phase, { ms: number; leaf: Record<Leaf, number>; fns: Map<string, number> }>;
  topSelf: { name: string; ms: number }[];
  markdown: string;
}

/** Sums one or more CPU profiles (see the module comment). */
export function summariseCpu(profiles: CpuProfile[], top = 15): CpuSummary {
  const byPhase = new Map<Phase, { ms: number; leaf: Record<Leaf, number>; fns: Map<string, number> }>();
  const self = new Map<string, number>();
  let busyMs = 0;
  let idleMs = 0;
  let excludedMs = 0;
  for (const p of profiles) {
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const cache = new Map<number, { phase: Phase; leaf: Leaf; name: string; idle: boolean }>();
    const info = (id: number): { phase: Phase; leaf: Leaf; name: string; idle: boolean } => {
      let v = cache.get(id);
      if (v) return v;
      const stack: CallFrame[] = [];
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
        const n = nodes.get(cur);
        if (n) stack.push(n.callFrame);
      }
      const leaf = stack[0] ?? { functionName: '', url: '', lineNumber: 0, columnNumber: 0 };
      const file = projectFile(leaf.url) ?? depName(leaf.url) ?? leaf.url.replace(/^node:/, 'node:');
      v = {
        phase: phaseOf(stack), leaf: leafKind(leaf), idle: leaf.functionName === '(idle)',
        name: `${leaf.functionName || '(anonymous)'}${file ? ` ${file}${leaf.url ? `:${leaf.lineNumber + 1}` : ''}` : ''}`,
      };
      cache.set(id, v);
      return v;
    };
    // Sample i lasts until sample i+1 (as DevTools draws it); the last one gets the median interval.
    const deltas = p.timeDeltas.slice(1);
    const sorted = [...deltas].sort((a, b) => a - b);
    const typical = sorted[Math.floor(sorted.length / 2)] ?? 1000;
    p.samples.forEach((id, i) => {
      const ms = Math.max(0, deltas[i] ?? typical) / 1000;
      const v = info(id);
      if (v.idle || v.phase === 'profiler itself') {
        if (v.idle) idleMs += ms;
        else excludedMs += ms;
        return;
      }
      busyMs += ms;
      const e = byPhase.get(v.phase) ?? { ms: 0, leaf: { 'JSON.parse': 0, 'JSON.stringify': 0, 'node internals': 0, code: 0 }, fns: new Map<string, number>() };
      e.ms += ms;
      e.leaf[v.leaf] += ms;
      e.fns.set(v.name, (e.fns.get(v.name) ?? 0) + ms);
      byPhase.set(v.phase, e);
      self.set(v.name, (self.get(v.name) ?? 0) + ms);
    });
  }
  const topSelf = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, ms]) => ({ name, ms }));
  const pct = (ms: number): string => (busyMs > 0 ? `${((100 * ms) / busyMs).toFixed(1)} %` : '–');
  const lines = [
    `busy (sampled, not idle): ${(busyMs / 1000).toFixed(2)} s; idle ${(idleMs / 1000).toFixed(2)} s` +
      `${excludedMs > 0 ? `; the profiler itself ${(excludedMs / 1000).toFixed(2)} s (excluded)` : ''}`,
    '',
    '| phase | CPU s | share | of which in node: internals s | its top self time (s) |',
    '|---|---:|---:|---:|---|',
    ...phases.filter((ph) => byPhase.has(ph)).sort((a, b) => (byPhase.get(b)?.ms ?? 0) - (byPhase.get(a)?.ms ?? 0)).map((ph) => {
      const e = byPhase.get(ph) ?? { ms: 0, leaf: { 'JSON.parse': 0, 'JSON.stringify': 0, 'node internals': 0, code: 0 }, fns: new Map<string, number>() };
      const fns = [...e.fns.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([f, ms]) => `\`${f.replace(/ node:internal\//, ' ').replace(/:\d+$/, '')}\` ${(ms / 1000).toFixed(2)}`);
      return `| ${ph} | ${(e.ms / 1000).toFixed(2)} | ${pct(e.ms)} | ${(e.leaf['node internals'] / 1000).toFixed(2)} | ${fns.join(', ')} |`;
    }),
    '',
    '| top self time | CPU s | share |',
    '|---|---:|---:|',
    ...topSelf.map((t) => `| \`${t.name}\` | ${(t.ms / 1000).toFixed(2)} | ${pct(t.ms)} |`),
  ];
  return { busyMs, idleMs, byPhase, topSelf, markdown: lines.join('\n') };
}

export interface HeapProfileNode { callFrame: CallFrame; selfSize: number; children: HeapProfileNode[] }

/**
 * Sampled allocation bytes of sampling heap profiles (`/debug/pprof/heap?allocated=1`: every allocation, collected
 * or not) by the same phases as the CPU view, with the top allocating functions.
 */
export function summariseHeapProfiles(profiles: { head: HeapProfileNode }[], top = 10): { totalBytes: number; markdown: string } {
  const byPhase = new Map<Phase, number>();
  const self = new Map<string, number>();
  let total = 0;
  const walk = (n: HeapProfileNode, stack: CallFrame[]): void => {
    const here = [n.callFrame, ...stack];
    if (n.selfSize > 0) {
      const ph = phaseOf(here);
      byPhase.set(ph, (byPhase.get(ph) ?? 0) + n.selfSize);
      const file = projectFile(n.callFrame.url) ?? depName(n.callFrame.url) ?? n.callFrame.url;
      const name = `${n.callFrame.functionName || '(anonymous)'}${file ? ` ${file}:${n.callFrame.lineNumber + 1}` : ''}`;
      self.set(name, (self.get(name) ?? 0) + n.selfSize);
      total += n.selfSize;
    }
    for (const c of n.children) walk(c, here);
  };
  for (const p of profiles) walk(p.head, []);
  const MiB = 1024 * 1024;
  const pct = (b: number): string => (total > 0 ? `${((100 * b) / total).toFixed(1)} %` : '–');
  const markdown = [
    `sampled allocations: ${(total / MiB).toFixed(0)} MiB`,
    '',
    '| phase | allocated MiB | share |',
    '|---|---:|---:|',
    ...[...byPhase.entries()].sort((a, b) => b[1] - a[1]).map(([ph, b]) => `| ${ph} | ${(b / MiB).toFixed(1)} | ${pct(b)} |`),
    '',
    '| top allocating function | MiB | share |',
    '|---|---:|---:|',
    ...[...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([n, b]) => `| \`${n}\` | ${(b / MiB).toFixed(1)} | ${pct(b)} |`),
  ].join('\n');
  return { totalBytes: total, markdown };
}

export interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: (string[] | string)[] }; node_count: number };
  nodes: number[];
  strings: string[];
}

/** Self size and count by node type + constructor/name (strings grouped as "(strings)"). */
function aggregateSnapshot(s: HeapSnapshot): { total: number; agg: Map<string, { bytes: number; count: number }> } {
  const fields = s.snapshot.meta.node_fields;
  const width = fields.length;
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  const iSize = fields.indexOf('self_size');
  const types = s.snapshot.meta.node_types[0] as string[];
  const agg = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType] ?? 0] ?? '?';
    const size = s.nodes[i + iSize] ?? 0;
    total += size;
    let key: string;
    if (type === 'string' || type === 'concatenated string' || type === 'sliced string') key = '(strings)';
    else if (type === 'object' || type === 'closure' || type === 'native') key = `${type === 'object' ? '' : `${type} `}${s.strings[s.nodes[i + iName] ?? 0] ?? '?'}`;
    else key = `(${type})`;
    const e = agg.get(key) ?? { bytes: 0, count: 0 };
    e.bytes += size;
    e.count++;
    agg.set(key, e);
  }
  return { total, agg };
}

/** Self size by node type + constructor/name (strings grouped as "(strings)"), largest first. */
export function summariseSnapshot(s: HeapSnapshot, top = 20): { totalBytes: number; rows: { name: string; bytes: number; count: number }[]; markdown: string } {
  const { total, agg } = aggregateSnapshot(s);
  const rows = [...agg.entries()].map(([name, e]) => ({ name, ...e })).sort((a, b) => b.bytes - a.bytes).slice(0, top);
  const MiB = 1024 * 1024;
  const markdown = [
    `heap snapshot: ${(total / MiB).toFixed(1)} MiB self size in ${s.snapshot.node_count} nodes`,
    '',
    '| constructor / type | MiB | share | count |',
    '|---|---:|---:|---:|',
    ...rows.map((r) => `| \`${r.name.slice(0, 60)}\` | ${(r.bytes / MiB).toFixed(2)} | ${((100 * r.bytes) / total).toFixed(1)} % | ${r.count} |`),
  ].join('\n');
  return { totalBytes: total, rows, markdown };
}

/**
 * What grew between two snapshots of the same process (a leak hunt: take one after the warm-up and one an hour
 * later): the change of self size and count by constructor / type, largest growth first. Snapshots hold live
 * objects only (V8 collects before taking one), so growth here is retained memory, not garbage.
 */
export function diffSnapshots(a: HeapSnapshot, b: HeapSnapshot, top = 25): { deltaBytes: number; rows: { name: string; deltaBytes: number; deltaCount: number; bytes: number; count: number }[]; markdown: string } {
  const A = aggregateSnapshot(a);
  const B = aggregateSnapshot(b);
  const names = new Set([...A.agg.keys(), ...B.agg.keys()]);
  const rows = [...names].map((name) => {
    const x = A.agg.get(name) ?? { bytes: 0, count: 0 };
    const y = B.agg.get(name) ?? { bytes: 0, count: 0 };
    return { name, deltaBytes: y.bytes - x.bytes, deltaCount: y.count - x.count, bytes: y.bytes, count: y.count };
  }).sort((p, q) => Math.abs(q.deltaBytes) - Math.abs(p.deltaBytes)).slice(0, top);
  const KiB = 1024;
  const markdown = [
    `heap snapshots: ${(A.total / KiB / 1024).toFixed(2)} → ${(B.total / KiB / 1024).toFixed(2)} MiB self size (${((B.total - A.total) / KiB).toFixed(0)} KiB), ${a.snapshot.node_count} → ${b.snapshot.node_count} nodes`,
    '',
    '| constructor / type | Δ KiB | Δ count | KiB after | count after |',
    '|---|---:|---:|---:|---:|',
    ...rows.map((r) => `| \`${r.name.slice(0, 60)}\` | ${(r.deltaBytes / KiB).toFixed(1)} | ${r.deltaCount} | ${(r.bytes / KiB).toFixed(0)} | ${r.count} |`),
  ].join('\n');
  return { deltaBytes: B.total - A.total, rows, markdown };
}

if (import.meta.main) {
  const files = process.argv.slice(2);
  if (files[0] === '--diff') {
    const [a, b] = files.slice(1);
    if (!a || !b || files.length !== 3) {
      process.stderr.write('usage: node bench/profile-summary.ts --diff before.heapsnapshot after.heapsnapshot\n');
      process.exit(2);
    }
    const read = (f: string): HeapSnapshot => JSON.parse(readFileSync(f, 'utf8')) as HeapSnapshot;
    process.stdout.write(diffSnapshots(read(a), read(b)).markdown + '\n');
    process.exit(0);
  }
  if (files.length === 0) {
    process.stderr.write('usage: node bench/profile-summary.ts FILE.cpuprofile… | FILE.heapsnapshot\n');
    process.exit(2);
  }
  const snaps = files.filter((f) => f.endsWith('.heapsnapshot'));
  const heaps = files.filter((f) => f.endsWith('.heapprofile'));
  const cpus = files.filter((f) => !f.endsWith('.heapsnapshot') && !f.endsWith('.heapprofile'));
  if (heaps.length) process.stdout.write(summariseHeapProfiles(heaps.map((f) => JSON.parse(readFileSync(f, 'utf8')) as { head: HeapProfileNode })).markdown + '\n');
  if (cpus.length) process.stdout.write(summariseCpu(cpus.map((f) => JSON.parse(readFileSync(f, 'utf8')) as CpuProfile)).markdown + '\n');
  for (const f of snaps) process.stdout.write(summariseSnapshot(JSON.parse(readFileSync(f, 'utf8')) as HeapSnapshot).markdown + '\n');
}
