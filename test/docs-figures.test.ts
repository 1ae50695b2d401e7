/**
 * Figures that cannot drift (issue 41, deliverable 2): every measured figure quoted in README.md and docs/*.md comes
 * from a results file a benchmark (bench/results.ts) or CI (.ci/run) wrote, and equals it. No cluster needed.
 *
 * How a document quotes a figure (the markers are HTML comments: invisible when rendered):
 *
 *   <!-- fig-source vscr = bench/results/vs-cr/2026-11-28T0430Z-9b32465.json -->   (once per document and file)
 *   converge **1.26×** (34.36 / 27.36 s)<!-- fig vscr: n1000.unlimited.converge.ratio, n1000.unlimited.converge.ts.median, n1000.unlimited.converge.cr.median -->
 *
 * A `fig` marker with k paths covers the last k numbers before it (back to the previous marker or the start of its
 * paragraph, list item or table cell); each must equal the file's `{ value, unit }` leaf at that path, rounded as
 * displayed (units converted: s/ms/µs/min, KiB/MiB/GiB; a number without a unit takes the unit of the one after it in
 * a range `a–b` or pair `a / b`, else the file's; `~` or `≈` before it: within 10 %). A path starting with `@` reads
 * the file's top level (`@load.during.max`).
 *
 * Checked here:
 *  - every results file a document names exists and carries what issue 41 asks of it: the bench, the command, the
 *    commit, start and end dates, the machine, the load at start, end and during the run, and the anchor measured in
 *    the same run (or why there is none); the block that declares it shows the run's date;
 *  - every marked figure equals its file;
 *  - no figure-shaped number goes unmarked: a number with a measurement unit (× attached, CPU-s/-ms/-µs, or a time,
 *    memory, rate or percent unit in a sentence or table column that reports a measurement — measured, median, peak,
 *    took, p99, runs, load, cold, warm …) must be covered by a `fig` marker, or be labelled "historical, unverified"
 *    (a figure whose run left no file, kept as history and said so): in its sentence, at the start of its paragraph
 *    or list item, in its table row or its column's header, or by a paragraph opening with the label that says it
 *    covers "this section". Bounds, defaults, settings and a test's inputs are not figures: a number after "default",
 *    "at most", "≤", "every", "timeout" …, or before "timeout", "by default", "requested" …, is skipped, as is anything
 *    in `code` or a “quoted test title”; `<!-- setting -->` after numbers says so where the wording does not (it
 *    covers the numbers back to the previous marker);
 *  - bench/README.md (the benchmarks' lab notebook) opens with that label, so none of its figures reads as verified.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ciResultTree, parseCiLog } from '../bench/ci-results.ts';

const repo = join(import.meta.dirname, '..');

// ---------------------------------------------------------------------------------------------------------------
// Parsing

/**
 * A paragraph, list item, heading or table cell: the unit a marker's numbers apply to. `historical`: the whole block
 * is labelled "historical, unverified" (a paragraph or list item that starts with the label, a table row that has it).
 */
interface Block { doc: string; line: number; text: string; historical: boolean; header?: string }

/**
 * README.md and docs/*.md, as [path, text]. Not the generated docs/reference/, and not docs/claims-audit.md: it quotes
 * other documents' lines to audit them, so a number there is a quotation, not a figure of its own.
 */
export function documents(): Array<[string, string]> {
  const docs = readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md') && f !== 'claims-audit.md').map((f) => `docs/${f}`);
  return ['README.md', ...docs].map((f) => [f, readFileSync(join(repo, f), 'utf8')]);
}

const HISTORICAL = /historical,\s+unverified/i;
/** The label opening a paragraph or list item (after its list marker, `>`, `*` or `_`). */
const LABEL_FIRST = /^\s*([-*+]\s+|\d+\.\s+|>\s*)?[*_]{0,2}historical,\s+unverified/i;

/** Splits a document into blocks (fenced code dropped; table rows split into cells). */
export function blocks(doc: string, text: string): Block[] {
  const out: Block[] = [];
  let cur: { line: number; lines: string[] } | undefined;
  let fenced = false;
  /** The current table's header cells (a table cell's column names what its numbers are). */
  let header: string[] | undefined;
  let prevRow: string[] | undefined;
  const flush = (): void => {
    if (cur) {
      const t = cur.lines.join('\n');
      out.push({ doc, line: cur.line, text: t, historical: LABEL_FIRST.test(t) });
    }
    cur = undefined;
  };
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (/^\s*(```|~~~)/.test(raw)) {
      flush();
      fenced = !fenced;
      return;
    }
    if (fenced) return;
    if (raw.trim() === '') return flush();
    if (/^\s*\|/.test(raw)) {
      flush();
      const historical = HISTORICAL.test(raw);
      const cells = raw.split(/(?<!\\)\|/).slice(1, -1);
      if (cells.every((c) => /^\s*:?-+:?\s*$/.test(c))) {
        header = prevRow;
        return;
      }
      prevRow = cells;
      cells.forEach((cell, i) => {
        if (cell.trim()) out.push({ doc, line, text: cell, historical, header: header?.[i] ?? '' });
      });
      return;
    }
    header = undefined;
    prevRow = undefined;
    if (/^\s*(#{1,6}\s|[-*+]\s|\d+\.\s|>)/.test(raw)) flush();
    if (!cur) cur = { line, lines: [] };
    cur.lines.push(raw);
    if (/^\s*#{1,6}\s/.test(raw)) flush();
  });
  flush();
  // A label block that says "this section" covers the rest of its section (to the next heading of its level or above).
  let level = 0;
  let covering = 0;
  for (const b of out) {
    const h = /^\s*(#{1,6})\s/.exec(b.text);
    if (h) {
      level = h[1]?.length ?? 0;
      if (covering && level <= covering) covering = 0;
      continue;
    }
    if (covering) b.historical = true;
    else if (b.historical && /this section/i.test(b.text)) covering = level || 1;
  }
  return out;
}

/** A number in running text with what follows it. */
interface Num { index: number; end: number; value: number; decimals: number; unit: string | undefined; approx: boolean; text: string }

const UNIT = String.raw`(CPU-µs|CPU-ms|CPU-s|CPU-seconds?|µs|ms|seconds?|s|minutes?|min|hours?|h|MiB|GiB|KiB|MB|GB|kB|KB|×|x|%|/s|tests)`;
/** Long unit names as their short ones. */
const UNIT_ALIAS: Record<string, string> = { second: 's', seconds: 's', minute: 'min', minutes: 'min', hour: 'h', hours: 'h', x: '×', 'CPU-second': 'CPU-s', 'CPU-seconds': 'CPU-s' };
/** Number, optionally grouped by spaces (1 404, 10 000), with decimals; not part of a word, version or path. */
const NUMBER = new RegExp(String.raw`(?<![\w.\-/:#=@])([~≈]\s?)?(\d{1,3}(?:[  ]\d{3})+(?!\d)|\d+)(\.\d+)?(?![\d.]\d|\.\d|-[a-zA-Z]|[a-zA-Z_](?<!×|x))(?:\s?${UNIT}(?![\w-]))?`, 'gu');

/** Replaces `code spans`, “quoted test titles” and HTML comments by spaces (same length, so indices stay). */
function blankOut(text: string): string {
  return text.replace(/`[^`]*`/g, (m) => ' '.repeat(m.length)).replace(/“[^”]*”/g, (m) => ' '.repeat(m.length))
    .replace(/<!--[\s\S]*?-->/g, (m) => ' '.repeat(m.length));
}

/** The numbers of `text` (indices into it), units propagated backwards over ranges and pairs (`0.79–1.05 ms`). */
export function numbers(text: string): Num[] {
  const clean = blankOut(text);
  const out: Num[] = [];
  for (const m of clean.matchAll(NUMBER)) {
    const digits = `${(m[2] ?? '').replace(/[  ]/g, '')}${m[3] ?? ''}`;
    let unit = m[4];
    // "1.2 × retry": a multiplication, not a ratio.
    if ((unit === '×' || unit === 'x') && /^\s?[×x]\s+[\p{L}\d`(]/u.test(clean.slice(m.index + (m[0].length - (m[4]?.length ?? 0)) - 1))) unit = undefined;
    if (unit === 'x' && !/\dx$/.test(m[0])) unit = undefined; // "3 x" is a letter
    out.push({
      index: m.index, end: m.index + m[0].length, value: Number(digits), decimals: (m[3] ?? '.').length - 1,
      unit: unit === undefined ? undefined : (UNIT_ALIAS[unit] ?? unit), approx: Boolean(m[1]), text: m[0],
    });
  }
  for (let i = out.length - 2; i >= 0; i--) {
    const a = out[i] as Num;
    const b = out[i + 1] as Num;
    if (a.unit === undefined && b.unit !== undefined && /^\s*(–|-|\/|,|and|to|→|vs\.?|against)\s*$/.test(clean.slice(a.end, b.index))) a.unit = b.unit;
  }
  return out;
}

/** A `fig` marker: the alias, the paths, where it sits in its block. */
interface Marker { alias: string; paths: string[]; index: number; end: number }

const MARKER = /<!--\s*fig\s+([\w-]+)\s*:\s*([^>]*?)\s*-->/g;
/** `<!-- setting -->`: the numbers before it (back to the previous marker) are settings or inputs, not measurements. */
const SETTING_MARKER = /<!--\s*setting\s*-->/g;
const SOURCE = /<!--\s*fig-source\s+([\w-]+)\s*=\s*(\S+)\s*-->/g;

/** The `fig` markers of a block, in order. */
export function markers(text: string): Marker[] {
  return [...text.matchAll(MARKER)].map((m) => ({
    alias: m[1] ?? '', paths: (m[2] ?? '').split(/[\s,]+/).filter(Boolean), index: m.index, end: m.index + m[0].length,
  }));
}

// ---------------------------------------------------------------------------------------------------------------
// What counts as a figure

/** Units that are a measurement wherever they stand. */
const STRONG = new Set(['×', 'CPU-s', 'CPU-ms', 'CPU-µs']);
/** Words that make a sentence report a measurement. */
const MEASURED = /\b(measured|measures?|measurement|median|medians|mean|peak(ed|s)?|took|taking|wall|load( average)?|quiet|busy|runs?|rounds?|observed|seen|p50|p99|fresh-clone|cold|warm|last\s+(CI\s+)?run|benchmarks?|bench|A\/B|on\s+this\s+(\d-core\s+)?machine|here)\b/i;
/** Words right before a number that make it a bound, default or setting, not a measurement. */
const SETTING = /(default(s|ing)?( to| of|:| is)?|at most|at least|up to|no more than|every|each|per|near|over|timeout( of)?|limit(ed)?( to| of)?|capped at|≤|≥|<|>|=|\+|±|within|lease( duration)?|period|interval|deadline|delay|grace|poll(s|ing)?|budget|goal:?|target|retry|retries|for|after|before|than|window|TTL|max(imum)?|min(imum)?\(?|bounded( by)?|by|committed|commits|delivered|(restarted|retried|started) at)\s*(the\s+)?[~≈]?\s*$/i;
/** Words right after a number that make it a setting (`a 30 s retry period`, `2–4.4 s by default`). */
const SETTING_AFTER = /^\s*([\w-]+\s+)?(by default|timeouts?|retry|period|bound|evaluation|poll|window|lease|deadline|interval|grace|budget|limit|token|TTL|cache|requested)\b/i;
/** Between two numbers of one range or list (`2–4.4 s`, `1, 2, 4 s`): the first is judged with the last. */
const JOINED = /^\s*(–|-|to|,|and)\s*$/;

/** The sentence of `text` around index `i` (to the previous and next `. `, `.` + newline, or blank line). */
function sentenceAround(text: string, i: number): string {
  const stops = ['. ', '.\n', '\n\n'];
  const start = Math.max(-1, ...stops.map((s) => text.lastIndexOf(s, i)));
  const ends = stops.map((s) => text.indexOf(s, i)).filter((x) => x >= 0);
  return text.slice(start + 1, ends.length ? Math.min(...ends) : text.length);
}

/** True when `n` (in `text`) is a measured figure by the rules above; the end of a range is judged by its start. */
export function isFigure(text: string, n: Num, header = ''): boolean {
  if (n.unit === undefined) return false;
  // A CI run's test count (loops make tests, so it is measured, not read from the files); a handful of tests is a
  // count of a file's `test(` calls, which test/docs-claims.test.ts checks against the file.
  if (n.unit === 'tests') return n.value >= 100;
  const clean = blankOut(text);
  const all = numbers(text);
  const prev = all.filter((x) => x.end <= n.index).at(-1);
  const next = all.find((x) => x.index >= n.end);
  // The words around a number, blanked markers and line breaks squeezed to one space.
  const wordsBefore = (i: number): string => clean.slice(0, i).replace(/\s+$/, ' ').slice(-30);
  const wordsAfter = (i: number): string => clean.slice(i).replace(/^\s+/, ' ').slice(0, 30);
  if (next && next.unit === n.unit && JOINED.test(clean.slice(n.end, next.index)) && SETTING_AFTER.test(wordsAfter(next.end))) return false;
  if (prev && JOINED.test(clean.slice(prev.end, n.index)) && !SETTING.test(wordsBefore(n.index))) {
    return isFigure(text, { ...prev, unit: prev.unit ?? n.unit }, header);
  }
  if (SETTING.test(wordsBefore(n.index)) || SETTING_AFTER.test(wordsAfter(n.end))) return false;
  if (/^\s*\(?\s*`--[\w-]+/.test(text.slice(n.end, n.end + 40))) return false; // `30 s (\`--max-queue-wait\`)`: a flag's value
  if (STRONG.has(n.unit)) return true;
  return MEASURED.test(sentenceAround(clean, n.index)) || MEASURED.test(header);
}

// ---------------------------------------------------------------------------------------------------------------
// Results files

interface Leaf { value: number; unit: string }

const TIME: Record<string, number> = { 'µs': 1e-6, ms: 1e-3, s: 1, min: 60, h: 3600, 'CPU-µs': 1e-6, 'CPU-ms': 1e-3, 'CPU-s': 1 };
const MEMORY: Record<string, number> = { KiB: 1024, MiB: 2 ** 20, GiB: 2 ** 30, kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9 };

/** `leaf` in the document's unit (undefined: units that do not convert). */
export function convert(leaf: Leaf, unit: string | undefined): number | undefined {
  if (unit === undefined || unit === leaf.unit || (leaf.unit === 'count' && (unit === '' || unit === 'tests'))) return leaf.value;
  const cpu = (u: string): boolean => u.startsWith('CPU-');
  for (const table of [TIME, MEMORY]) {
    const from = table[leaf.unit];
    const to = table[unit];
    // CPU time may be shown as plain time ("2.51 s of CPU"), plain time never as CPU time.
    if (from !== undefined && to !== undefined && (!cpu(unit) || cpu(leaf.unit))) return (leaf.value * from) / to;
  }
  return undefined;
}

/** Why `n` does not show `leaf` (undefined: it does). */
export function mismatch(n: Num, leaf: Leaf): string | undefined {
  const v = convert(leaf, n.unit);
  if (v === undefined) return `unit ${n.unit ?? '(none)'} is not the file's ${leaf.unit}`;
  const tolerance = n.approx ? Math.abs(v) * 0.1 : 0.5 * 10 ** -n.decimals + 1e-9;
  return Math.abs(v - n.value) <= tolerance ? undefined : `the file says ${v} ${n.unit ?? leaf.unit}`;
}

/**
 * The leaf at a dotted path of a results file's `results`; a path starting with `@` is read from the file's top level
 * instead (`@load.during.max`: the run's load, a plain number).
 */
export function leafAt(file: unknown, path: string): Leaf | undefined {
  let node: unknown = path.startsWith('@') ? file : (file as { results?: unknown }).results;
  for (const k of path.replace(/^@/, '').split('.')) node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[k] : undefined;
  if (typeof node === 'number' && path.startsWith('@')) return { value: node, unit: '' };
  const l = node as Leaf | undefined;
  return l && typeof l.value === 'number' && typeof l.unit === 'string' ? l : undefined;
}

/** What issue 41 asks of every results file; the problems found (empty: none). */
export function fileProblems(f: unknown): string[] {
  const p: string[] = [];
  const o = (f ?? {}) as Record<string, unknown>;
  const load = (o['load'] ?? {}) as Record<string, unknown>;
  const machine = (o['machine'] ?? {}) as Record<string, unknown>;
  const anchor = o['anchor'] as { name?: unknown; description?: unknown } | undefined;
  if (o['schema'] !== 1) p.push('schema is not 1');
  if (typeof o['bench'] !== 'string' || !o['bench']) p.push('no bench');
  if (typeof o['command'] !== 'string' || !o['command']) p.push('no command');
  if (typeof o['commit'] !== 'string' || !/^[0-9a-f]{40}$/.test(o['commit'])) p.push('no commit (40 hex digits)');
  for (const k of ['started', 'ended']) if (typeof o[k] !== 'string' || Number.isNaN(Date.parse(o[k]))) p.push(`no ${k} date`);
  if (typeof machine['cpus'] !== 'number') p.push('no machine.cpus');
  for (const k of ['start', 'end']) if (!Array.isArray(load[k]) || (load[k] as unknown[]).length !== 3) p.push(`no load.${k} (1/5/15 min)`);
  if (typeof load['during'] !== 'object') p.push('no load.during');
  if (!anchor || (anchor.name !== null && typeof anchor.name !== 'string') || typeof anchor.description !== 'string' || !anchor.description) {
    p.push('no anchor (name, or null with the reason in description)');
  }
  if (typeof o['results'] !== 'object' || o['results'] === null) p.push('no results');
  return p;
}

/** The dates a document may show for a run that started at `iso`: 2026-11-28, 28 Nov 2026, 28 Nov. */
function dateForms(iso: string): string[] {
  const d = new Date(iso);
  const mon = d.toLocaleString('en-US', { month: 'short', timeZone: 'UTC' });
  return [iso.slice(0, 10), `${d.getUTCDate()} ${mon} ${d.getUTCFullYear()}`, `${d.getUTCDate()} ${mon}`];
}

// ---------------------------------------------------------------------------------------------------------------
// The checks, as lists of problems (so the test prints all of them at once)

/** Marked figures that do not match, sources that are missing or incomplete. */
export function checkMarked(docs: Array<[string, string]>): string[] {
  const problems: string[] = [];
  for (const [doc, text] of docs) {
    const sources = new Map<string, { path: string; data: unknown }>();
    for (const b of blocks(doc, text)) {
      for (const s of b.text.matchAll(SOURCE)) {
        const [alias = '', path = ''] = [s[1], s[2]];
        const where = `${doc}:${b.line}`;
        if (!existsSync(join(repo, path))) {
          problems.push(`${where}: fig-source ${alias} = ${path}: no such file`);
          continue;
        }
        let data: unknown;
        try {
          data = JSON.parse(readFileSync(join(repo, path), 'utf8'));
        } catch (err) {
          problems.push(`${where}: ${path}: not JSON (${String(err)})`);
          continue;
        }
        for (const p of fileProblems(data)) problems.push(`${where}: ${path}: ${p}`);
        const started = (data as { started?: string }).started ?? '';
        if (started && !dateForms(started).some((d) => b.text.includes(d))) {
          problems.push(`${where}: the block declaring ${path} does not show the run's date (${dateForms(started).slice(0, 2).join(' or ')})`);
        }
        sources.set(alias, { path, data });
      }
    }
    for (const b of blocks(doc, text)) {
      let from = 0;
      for (const m of markers(b.text)) {
        const where = `${doc}:${b.line}`;
        const src = sources.get(m.alias);
        if (!src) {
          problems.push(`${where}: fig ${m.alias}: no fig-source ${m.alias} in ${doc}`);
          from = m.end;
          continue;
        }
        const nums = numbers(b.text.slice(0, m.index)).filter((n) => n.index >= from);
        if (nums.length < m.paths.length) {
          problems.push(`${where}: fig ${m.alias}: ${m.paths.length} paths but ${nums.length} numbers before the marker`);
          from = m.end;
          continue;
        }
        const shown = nums.slice(nums.length - m.paths.length);
        m.paths.forEach((path, i) => {
          const n = shown[i] as Num;
          const leaf = leafAt(src.data, path);
          if (!leaf) problems.push(`${where}: "${n.text.trim()}": ${src.path} has no value at ${path}`);
          else {
            const why = mismatch(n, leaf);
            if (why) problems.push(`${where}: "${n.text.trim()}" (${path}): ${why}`);
          }
        });
        from = m.end;
      }
    }
  }
  return problems;
}

/** Figure-shaped numbers not covered by a marker and not in a historical block. */
export function checkUnmarked(docs: Array<[string, string]>): string[] {
  const problems: string[] = [];
  for (const [doc, text] of docs) {
    for (const b of blocks(doc, text)) {
      if (b.historical || HISTORICAL.test(b.header ?? '')) continue;
      const covered = new Set<number>();
      const all = [...markers(b.text), ...[...b.text.matchAll(SETTING_MARKER)].map((m) => ({ index: m.index, end: m.index + m[0].length, paths: undefined }))]
        .sort((x, y) => x.index - y.index);
      let from = 0;
      for (const m of all) {
        const nums = numbers(b.text.slice(0, m.index)).filter((n) => n.index >= from);
        for (const n of m.paths ? nums.slice(Math.max(0, nums.length - m.paths.length)) : nums) covered.add(n.index);
        from = m.end;
      }
      for (const n of numbers(b.text)) {
        if (covered.has(n.index) || !isFigure(b.text, n, b.header)) continue;
        if (HISTORICAL.test(sentenceAround(blankOut(b.text), n.index)) || HISTORICAL.test(sentenceAround(b.text, n.index))) continue;
        const lineInBlock = b.text.slice(0, n.index).split('\n').length - 1;
        problems.push(`${doc}:${b.line + lineInBlock}: "${n.text.trim()}" — ${b.text.slice(Math.max(0, n.index - 50), n.end + 20).replace(/\s+/g, ' ').trim()}`);
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------

describe('figures in README.md and docs/ come from results files', () => {
  test('the parser: numbers, ranges, units, multiplications, code and markers', () => {
    const t = 'converge **1.15×** (5.56 / 4.82 s; raw 3.93 s), 1 404 tests, v1.36.3, `30 s`, lease > 1.2 × retry, 0.79–1.05 ms, ~35 min';
    const ns = numbers(t);
    assert.deepEqual(ns.map((n) => [n.value, n.unit ?? null, n.decimals]), [
      [1.15, '×', 2], [5.56, 's', 2], [4.82, 's', 2], [3.93, 's', 2], [1404, 'tests', 0], [1.2, null, 1], [0.79, 'ms', 2], [1.05, 'ms', 2], [35, 'min', 0],
    ]);
    assert.equal(ns.at(-1)?.approx, true);
    assert.equal(mismatch(ns[0] as Num, { value: 1.1534, unit: '×' }), undefined);
    assert.match(mismatch(ns[0] as Num, { value: 1.16, unit: '×' }) ?? '', /file says 1\.16/);
    assert.equal(mismatch(ns[1] as Num, { value: 5555, unit: 'ms' }), undefined, 'ms → s');
    assert.match(mismatch(ns[1] as Num, { value: 5.56, unit: 'MiB' }) ?? '', /unit/);
    assert.equal(mismatch(ns.at(-1) as Num, { value: 2072, unit: 's' }), undefined, '~35 min is 2 072 s within 10 %');
    const m = markers('a 1.15×<!-- fig vscr: n1000.converge.ratio -->');
    assert.deepEqual(m.map((x) => [x.alias, x.paths]), [['vscr', ['n1000.converge.ratio']]]);
  });

  test('what is a figure: measured values yes; defaults, bounds, settings and code no', () => {
    const fig = (t: string, token: string): boolean => {
      const n = numbers(t).find((x) => x.text.trim().startsWith(token));
      assert.ok(n, `${token} in ${t}`);
      return isFigure(t, n);
    };
    assert.equal(fig('converge 1.15× against controller-runtime', '1.15'), true);
    assert.equal(fig('the suite took 698 s on this machine', '698'), true);
    assert.equal(fig('peak RSS 105 MiB', '105'), true);
    assert.equal(fig('its handler timeout (default 10 s)', '10'), false);
    assert.equal(fig('a hand-over ≤ 3 s, asserted in 7 runs', '3'), false);
    assert.equal(fig('retried every 30 s until Neutron answers', '30'), false);
    assert.equal(fig('the limit is 256 MiB', '256'), false);
    assert.equal(fig('unit + integration in 2 032 s (1 404 tests)', '1 404'), true);
    assert.equal(fig('the node suite (12 tests)', '12'), false);
  });

  test('a figure without a file, a wrong figure, an incomplete file and an unmarked figure each fail', () => {
    const wrong: Array<[string, string]> = [['x.md', [
      '<!-- fig-source a = bench/results/no-such-bench/none.json -->',
      '',
      'Measured: converge 1.15×<!-- fig a: converge.ratio -->, and 7.3 s to ready over 3 runs.',
      '',
      'Ratio 2.0×<!-- fig b: r -->',
    ].join('\n')]];
    const marked = checkMarked(wrong);
    assert.ok(marked.some((p) => /no such file/.test(p)), marked.join('\n'));
    assert.ok(marked.some((p) => /no fig-source b/.test(p)), marked.join('\n'));
    const unmarked = checkUnmarked(wrong);
    assert.ok(unmarked.some((p) => p.includes('"7.3 s"')), unmarked.join('\n'));
    assert.ok(!unmarked.some((p) => p.includes('"1.15×"')), 'the marked figure is covered');
    assert.deepEqual(checkUnmarked([['y.md', '*Historical, unverified* (24 Nov): converge 1.47× in 3 runs.']]), []);
    const partly = checkUnmarked([['z.md', 'Measured 3.1 s in 3 runs. Earlier (historical, unverified) 9.9 s in 2 runs.\n\n| row | 4.4× | historical, unverified |']]);
    assert.equal(partly.length, 1, partly.join('\n'));
    assert.match(partly[0] ?? '', /"3\.1 s"/);
    const section = checkUnmarked([['s.md', '## Log\n\n*Historical, unverified* timings in this section.\n\n- run 1 took 7.5 s\n\n### Sub\n\nrun 2 took 8 s\n\n## Next\n\nrun 3 took 9 s']]);
    assert.deepEqual(section.map((p) => /"(.*?)"/.exec(p)?.[1]), ['9 s'], section.join('\n'));
    assert.deepEqual(fileProblems({ schema: 1, bench: 'b', command: 'node bench/b.ts', commit: 'abc', started: 'x', load: {}, machine: {}, results: {} }).sort(), [
      'no anchor (name, or null with the reason in description)', 'no commit (40 hex digits)', 'no ended date', 'no load.during',
      'no load.end (1/5/15 min)', 'no load.start (1/5/15 min)', 'no machine.cpus', 'no started date',
    ]);
  });

  test('CI times come from the CI run\'s own output: .ci/run\'s parts and make test\'s summaries parsed from its log', () => {
    const times = 'control plane, cert-manager and helm binaries\t3\t0\nreal-node binaries\t0\t0\nmake test\t2072\t0\n';
    const log = [
      '[make test] real-node suite (test/node-reclaim.e2e.ts test/node.e2e.ts test/helm.e2e.ts) started in the background; its log: /x/.test-node.log',
      '[make test] integration lane 2 (test/sharding.test.ts) started in the background; its log: /x/.test-lane2.log',
      '✔ a test (5ms)', 'ℹ tests 1400', 'ℹ suites 3', 'ℹ pass 1400', 'ℹ fail 0', 'ℹ cancelled 0', 'ℹ skipped 0', 'ℹ todo 0', 'ℹ duration_ms 2031877.5',
      '[make test] lane 1 (unit tests and the other integration files): exit 0 after 2032 s; waiting for lane 2',
      '[make test] ---- integration lane 2, log /x/.test-lane2.log ----',
      '✔ sharding (5ms)', 'ℹ tests 4', 'ℹ suites 1', 'ℹ pass 4', 'ℹ fail 0', 'ℹ cancelled 0', 'ℹ skipped 0', 'ℹ todo 0', 'ℹ duration_ms 1500000',
      '[make test] unit + integration tests: exit 0 after 2032 s (lane 1: exit 0; lane 2: exit 0); waiting for the real-node suite',
      '[make test] ---- real-node suite (test/node-reclaim.e2e.ts test/node.e2e.ts test/helm.e2e.ts), log /x/.test-node.log ----',
      'ℹ tests 20', 'ℹ suites 0', 'ℹ pass 20', 'ℹ fail 0', 'ℹ cancelled 0', 'ℹ skipped 0', 'ℹ todo 0', 'ℹ duration_ms 872000',
      '[make test] unit + integration tests: exit 0 (2032 s); real-node suite: exit 0 (ended 873 s after the start)',
    ].join('\n');
    const parsed = parseCiLog(times, log);
    assert.deepEqual(parsed.parts['make test'], { seconds: 2072, exitCode: 0 });
    assert.equal(parsed.unitIntegration?.seconds, 2032);
    assert.equal(parsed.unitIntegration?.summary['tests'], 1404, 'the lanes\' counts added');
    assert.equal(parsed.unitIntegration?.summary['duration_ms'], 2031877.5, 'the longest lane\'s duration');
    assert.equal(parsed.nodeSuite?.endedSeconds, 873);
    assert.equal(parsed.nodeSuite?.summary['pass'], 20);
    const tree = ciResultTree(parsed);
    assert.equal(leafAt({ results: tree }, 'makeTest.seconds')?.value, 2072);
    assert.equal(leafAt({ results: tree }, 'unitIntegration.tests')?.value, 1404);
    assert.equal(leafAt({ results: tree }, 'nodeSuite.duration')?.value, 872);
    assert.ok(parsed.evidence.includes('ℹ tests 1400') && parsed.evidence.includes('ℹ tests 4') && parsed.evidence.some((l) => l.startsWith('[make test] unit + integration tests: exit 0 (2032 s)')));
  });

  test('every marked figure in README.md and docs/*.md equals its results file, which names its run, load and anchor', () => {
    const problems = checkMarked(documents());
    assert.deepEqual(problems, [], `\n${problems.join('\n')}`);
  });

  test('no unmarked figure in README.md and docs/*.md (mark it with its results file, or label it "historical, unverified")', () => {
    const problems = checkUnmarked(documents());
    assert.deepEqual(problems, [], `${problems.length} figures without a results file:\n${problems.join('\n')}`);
  });

  test('bench/README.md, the lab notebook, says its figures are historical and where the verified ones are', () => {
    const head = readFileSync(join(repo, 'bench/README.md'), 'utf8').split('\n\n').slice(0, 3).join('\n\n');
    assert.match(head, HISTORICAL);
    assert.match(head, /docs\/benchmarks\.md/);
    assert.match(head, /bench\/results\//);
  });
});
