/**
 * The endurance bench's memory growth (bench/soak/report.ts): the goal's slope over each process's whole life after
 * its warm-up, and the same slope over the last window alone — what tells a process that settled from one still
 * growing. Synthetic samples shaped like the 85-min run of 29 Nov 2026's leader: RSS rising 11 MiB between its 10th
 * and 40th minute, then level. And the split of anonymous memory by part (bench/soak/memparts.ts) it is fitted by.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Churn } from '../bench/soak/churn.ts';
import { anonParts } from '../bench/soak/memparts.ts';
import { LogCounts } from '../bench/soak/replicas.ts';
import { report } from '../bench/soak/report.ts';
import type { Sample } from '../bench/soak/sampler.ts';

const MiB = 1024 * 1024;
const min = 60_000;

/** The value at a dotted path of a results tree (bench/results.ts), if any. */
function at(tree: unknown, path: string): number | undefined {
  let node = tree;
  for (const k of path.split('.')) node = (node as Record<string, unknown> | undefined)?.[k];
  return (node as { value?: number } | undefined)?.value;
}

/** The report of `samples` from a run of `minutes` started at `t0`, with the goal's 10-min warm-up; no faults, churn or checkpoints. */
function reportOf(samples: Sample[], t0: number, minutes: number, minGrowthSpanMs = 24 * min): ReturnType<typeof report> {
  const churn = { counts: new Map(), failures: new Map(), skipped: 0 } as unknown as Churn; // report() reads only these
  return report({
    startedAt: t0, endedAt: t0 + minutes * min, warmupMs: 10 * min, minGrowthSpanMs, samples, faults: [], checkpoints: [],
    churn, churnMs: 0, logs: new LogCounts(), replicas: [],
  });
}

/** Asserts the results' value at `path` is within `tol` of `want`. */
function near(r: ReturnType<typeof report>, path: string, want: number, tol: number): void {
  const v = at(r.results, path);
  assert.ok(v !== undefined && Math.abs(v - want) < tol, `${path} ${v}, expected ${want}`);
}

/** One incarnation sampled every 30 s for `minutes`: `rss(minute)` MiB, `file(minute)` MiB of it mapped files, the heap `heap(minute)` MiB. */
function incarnation(name: string, t0: number, minutes: number, rss: (m: number) => number, heap: (m: number) => number, file: (m: number) => number = () => 40): Sample[] {
  const out: Sample[] = [];
  for (let ms = 0; ms <= minutes * min; ms += 30_000) {
    const m = ms / min;
    out.push({
      t: t0 + ms, replica: name[0] ?? 'a', incarnation: name, uptimeMs: ms, leader: name.startsWith('a'),
      rss: rss(m) * MiB, rssAnon: (rss(m) - file(m)) * MiB, rssFile: file(m) * MiB, heapUsed: heap(m) * MiB, heapTotal: heap(m) * MiB * 1.5, external: 3 * MiB, loopP99: 0.02,
      queueDepth: 0, reconcile: {}, lists: 0, watches: 0, apiErrors: 0, neutronErrors: 0,
    });
  }
  return out;
}

test('memory growth: a process that grew, then levelled, misses the goal over its life and shows level in the last window; one still growing shows in both', () => {
  const t0 = Date.parse('2026-11-29T00:40:00Z');
  const minutes = 80;
  const settling = (m: number): number => 131 + 11 * Math.min(1, Math.max(0, (m - 10) / 30)); // +11 MiB in 10–40 min
  const growing = (m: number): number => 90 + (5 * m) / 60; // +5 MiB/h all along
  const samples = [...incarnation('a#1', t0, minutes, settling, () => 27), ...incarnation('b#1', t0, minutes, () => 95, (m) => 14 + (3 * m) / 60)];
  const r = reportOf(samples, t0, minutes);
  const goal = r.goals.find((g) => g.name.startsWith('RSS and V8 heap growth'));
  assert.equal(goal?.verdict, 'missed', 'the goal is the whole span after the warm-up');
  assert.ok((at(r.results, 'memory.max.rss') ?? 0) > 5, `whole-span RSS slope ${at(r.results, 'memory.max.rss')}`);
  const lastRss = at(r.results, 'memory.lastWindow.max.rss');
  const lastHeap = at(r.results, 'memory.lastWindow.max.heap');
  assert.ok(lastRss !== undefined && Math.abs(lastRss) < 0.5, `levelled: last-window RSS ${lastRss} MiB/h`);
  assert.ok(lastHeap !== undefined && Math.abs(lastHeap - 3) < 0.5, `the heap still growing 3 MiB/h shows there too: ${lastHeap}`);
  assert.match(goal?.detail ?? '', /in the last window alone: /);

  // A process still growing: the last window says so too.
  near(reportOf(incarnation('a#1', t0, minutes, growing, () => 27), t0, minutes), 'memory.lastWindow.max.rss', 5, 0.5);
});

test("memory growth: RSS is split into anonymous memory and mapped files' pages, each fitted alone (the node binary's code pages are not a leak)", () => {
  const t0 = Date.parse('2026-11-29T00:40:00Z');
  const minutes = 70;
  // RSS +6 MiB/h, all of it file pages (the binary's code as new paths run); anonymous memory level.
  const file = (m: number): number => 40 + (6 * m) / 60;
  const samples = incarnation('a#1', t0, minutes, (m) => 90 + file(m), () => 27, file);
  const r = reportOf(samples, t0, minutes);
  for (const [path, want] of [['memory.max.rss', 6], ['memory.max.rssFile', 6], ['memory.max.rssAnon', 0], ['memory.lastWindow.max.rssFile', 6], ['memory.lastWindow.max.rssAnon', 0]] as const) {
    near(r, path, want, 0.3);
  }
  const goal = r.goals.find((g) => g.name.startsWith('RSS and V8 heap growth'));
  assert.equal(goal?.verdict, 'missed', 'the goal stays RSS as a whole');
  assert.match(goal?.detail ?? '', /RSS 6\.\d\d \(anonymous -?0\.\d\d, files 6\.\d\d\)/);
});

test('memory growth: a standby that becomes the leader is measured as two parts, each after its own warm-up (its controllers start then; the step is no growth)', () => {
  const t0 = Date.parse('2026-11-29T07:33:40Z');
  const minutes = 64;
  // Standby for 36 min at a level, then the leader: 30 MiB more within a minute (caches' work, queues, controllers), then level.
  const step = (m: number): number => (m < 36 ? 92 : 122);
  const samples = incarnation('a#2', t0, minutes, step, (m) => (m < 36 ? 14 : 27)).map((s) => ({ ...s, leader: s.uptimeMs >= 36 * min }));
  const r = reportOf(samples, t0, minutes, 15 * min);
  const goal = r.goals.find((g) => g.name.startsWith('RSS and V8 heap growth'));
  assert.equal(goal?.verdict, 'met', goal?.detail);
  assert.match(goal?.detail ?? '', /a#2 \(standby\) over 26 min: RSS 0\.00 .*a#2 \(leader\) over 18 min: RSS 0\.00 /);
  assert.equal(at(r.results, 'memory.incarnationsMeasured'), 2, 'both parts measured');
  assert.equal(at(r.results, 'memory.max.rss'), 0);
});

/** One smaps entry: its header and the Rss field (the real file has ~20 fields per mapping; only Rss is read). */
function mapping(start: bigint, kb: number, perms: string, path = '', sizeKb = kb): string {
  const end = start + BigInt(sizeKb * 1024);
  return `${start.toString(16)}-${end.toString(16)} ${perms} 00000000 00:00 0${path ? `                          ${path}` : ''}\n` +
    `Size:             ${sizeKb} kB\nKernelPageSize:        4 kB\nRss:              ${kb} kB\nPss:              ${kb} kB\nAnonymous:        ${kb} kB\nVmFlags: rd wr mr mw me ac\n`;
}

test('memory parts: smaps is split by layout into V8 pages, V8 code, malloc main arena, malloc thread arenas and the rest; mapped files are not counted', () => {
  const KiB = 1024;
  const text = [
    mapping(0x55d0_0000_0000n, 4000, 'r-xp', '/usr/local/bin/node'), // the binary's code: a file, not counted
    mapping(0x55d1_0000_0000n, 300, 'rw-p', '/usr/local/bin/node'), // its .data (copy-on-write): still a file mapping
    mapping(0x1f6c_e000n, 14_620, 'rw-p', '[heap]'), // brk: malloc's main arena
    mapping(0x0a8c_87d0_0000n, 256, 'rw-p'), // V8 pages at random hints below 2^46
    mapping(0x2c0b_3c8c_0000n, 512, 'rw-p'),
    mapping(0x7fdb_cc00_0000n, 3_744, 'rwxp', '', 524_288), // V8's code range
    mapping(0x7fdb_c800_0000n, 1_884, 'rw-p', '', 1_992), // a thread arena's heap: 64 MiB-aligned in the mmap area
    mapping(0x7fdb_c81f_2000n, 0, '---p', '', 63_544), // its reserved rest
    mapping(0x7fdc_0b9f_e000n, 1_032, 'rw-p', '', 1_152), // a thread's stack or a large malloc block
    mapping(0x7ffd_1000_0000n, 132, 'rw-p', '[stack]'),
  ].join('');
  assert.deepEqual(anonParts(text), { mallocMain: 14_620 * KiB, mallocThreads: 1_884 * KiB, v8Code: 3_744 * KiB, v8Pages: 768 * KiB, other: 1_032 * KiB });
  assert.deepEqual(anonParts(''), { mallocMain: 0, mallocThreads: 0, v8Code: 0, v8Pages: 0, other: 0 });
});

test('memory growth: anonymous memory is fitted by part too, so the part that grows is named in the results file', () => {
  const t0 = Date.parse('2026-11-29T11:04:00Z');
  const minutes = 70;
  // Anonymous memory +2 MiB/h, all of it malloc's thread arenas; V8's pages level.
  const threads = (m: number): number => 5 + (2 * m) / 60;
  const samples = incarnation('a#1', t0, minutes, (m) => 80 + threads(m), () => 27).map((s) => {
    const m = s.uptimeMs / min;
    return { ...s, anon: { v8Pages: 30 * MiB, v8Code: 4 * MiB, mallocMain: 9 * MiB, mallocThreads: threads(m) * MiB, other: 2 * MiB } };
  });
  const r = reportOf(samples, t0, minutes);
  for (const [path, want] of [['memory.longest.anon.mallocThreads', 2], ['memory.longest.anon.v8Pages', 0], ['memory.max.anon.mallocThreads', 2], ['memory.lastWindow.max.anon.mallocThreads', 2], ['memory.lastWindow.max.anon.mallocMain', 0]] as const) {
    near(r, path, want, 0.05);
  }
  const goal = r.goals.find((g) => g.name.startsWith('RSS and V8 heap growth'));
  assert.match(goal?.detail ?? '', /anonymous 2\.00 = v8Pages 0\.00 \+ v8Code 0\.00 \+ mallocMain 0\.00 \+ mallocThreads 2\.00 \+ other 0\.00,/);
  // Samples from before the split (an older samples.jsonl): no parts, and no claim about them.
  const old = reportOf(samples.map(({ anon: _anon, ...s }) => s), t0, minutes);
  assert.equal(at(old.results, 'memory.longest.anon.mallocThreads'), undefined);
  assert.ok(at(old.results, 'memory.longest.rss') !== undefined);
});
