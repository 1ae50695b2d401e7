/**
 * The results file every benchmark writes (issue 41): one JSON file per run, so a figure quoted in README.md or docs/
 * can name the run it came from, and `test/docs-figures.test.ts` can compare the quoted figure with it.
 *
 *   bench/results/<bench>/<UTC start, YYYY-MM-DDTHHMMZ>-<short commit>.json
 *
 * One file per run (never rewritten): history stays, and a figure quoted from a run keeps its file after the next run.
 * The files are small (medians and per-run values, no samples); commit the ones the docs quote.
 * `TSCM_BENCH_RESULTS_DIR` moves the root (e.g. a scratch directory for a smoke run).
 *
 * What a file holds (schema 1; the test checks every quoted file has it):
 *  - `bench`, `command` (how to run it again: `node <flags> bench/x.ts <args>`), `commit` (HEAD when the bench
 *    started) and `dirty` (tracked files that differed from it — the measured code was not exactly the commit);
 *  - `started` / `ended` (ISO UTC), `machine` (CPUs, their model, memory, Node, kernel);
 *  - `load`: the 1/5/15-min load averages at start and end, and the 1-min load sampled during the run
 *    (min / median / max over the start, each `sampleLoad()` — wherever the bench measures a round — and the end);
 *  - `anchor`: what the bench compares against, measured in the same run (`name`, `description`); a bench without one
 *    says why in `description` and sets `name` to null;
 *  - `results`: a tree whose leaves are `{ value, unit }` (units: s, ms, µs, min, MiB, KiB, GiB, ×, %, /s, CPU-s,
 *    CPU-ms, CPU-µs, count, …). A figure in the docs names its leaf by a dotted path (`converge.ratio`);
 *  - `runs` (optional): the per-run records the medians came from.
 *
 * Invariant: `results` values are computed by the bench from what it measured in THIS run; nothing is copied from an
 * earlier file. A bench writes its file once, at the end (`write()`), also when a goal is missed.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join, relative } from 'node:path';

const repo = join(import.meta.dirname, '..');

/** One measured value and its unit: a leaf of `results`. */
export interface Value { value: number; unit: string }

/** The `results` tree: named groups down to Values (or a short note, e.g. a verdict). */
export interface ResultTree { [key: string]: ResultTree | Value | string | boolean }

/** What the bench compares against, measured in the same run. */
export interface Anchor { name: string | null; description: string }

/** The file's contents (schema 1). */
export interface ResultsFile {
  schema: 1;
  bench: string;
  command: string;
  commit: string;
  dirty: string[];
  started: string;
  ended: string;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string; kernel: string };
  load: { start: number[]; end: number[]; during: { min: number; median: number; max: number; samples: number } };
  anchor: Anchor;
  results: ResultTree;
  runs?: unknown[];
}

/** Overrides for a results file written after the fact (bench/ci-results.ts: the CI run started long before). */
export interface RunOverrides { command?: string; started?: Date; loadStart?: number[] }

/** A Value leaf; NaN and ±Infinity (not measured) are refused: leave the leaf out instead. */
export function val(value: number, unit: string): Value {
  if (!Number.isFinite(value)) throw new Error(`results: a ${unit} value is ${value}; leave an unmeasured value out`);
  return { value: Number(value.toPrecision(6)), unit };
}

/** Median, min and max of several runs' values (at least one), each a Value; `n` runs. */
export function spread(xs: readonly number[], unit: string): ResultTree {
  const finite = xs.filter((x) => Number.isFinite(x));
  if (finite.length === 0) throw new Error(`results: no finite ${unit} value to summarise`);
  const s = [...finite].sort((a, b) => a - b);
  const m = s.length >> 1;
  const median = s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
  return { median: val(median, unit), min: val(s[0] as number, unit), max: val(s[s.length - 1] as number, unit), n: val(s.length, 'count') };
}

/** `a / b` as a × Value (both from the same run). */
export function ratio(a: number, b: number): Value {
  return val(a / b, '×');
}

/** git's output (not trimmed: porcelain lines start with a space), '' when git fails. */
const git = (...a: string[]): string => {
  try {
    return execFileSync('git', a, { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return '';
  }
};

/**
 * Collects one run's results; `write()` at the end writes the file. Construct it before measuring (it records the
 * start, the commit and the load at start).
 */
export class BenchResults {
  readonly bench: string;
  readonly started: Date;
  readonly results: ResultTree = {};
  runs: unknown[] | undefined;
  private anchor: Anchor;
  private readonly loadStart: number[];
  private readonly command: string | undefined;
  private readonly loads: number[] = [];
  private readonly commit = git('rev-parse', 'HEAD').trim() || process.env['TSCM_BENCH_COMMIT'] || 'unknown';
  private readonly dirty = git('status', '--porcelain', '--untracked-files=no').split('\n').filter(Boolean).map((l) => l.slice(3))
    .filter((p) => !p.startsWith('bench/results/') && !p.endsWith('.md'));

  constructor(bench: string, anchor: Anchor, overrides: RunOverrides = {}) {
    this.bench = bench;
    this.anchor = anchor;
    this.started = overrides.started ?? new Date();
    this.loadStart = overrides.loadStart ?? loadavg();
    this.command = overrides.command;
    this.sampleLoad();
  }

  /** Records the 1-min load average now (call once per round or phase). */
  sampleLoad(): void {
    this.loads.push(loadavg()[0] ?? NaN);
  }

  /** Replaces the anchor's description (e.g. once its version is known). */
  setAnchor(anchor: Anchor): void {
    this.anchor = anchor;
  }

  /** Sets a leaf or a subtree at a dotted path (`converge.ratio`), creating the groups on the way. */
  set(path: string, v: Value | ResultTree | string | boolean): void {
    const keys = path.split('.');
    let node = this.results;
    for (const k of keys.slice(0, -1)) {
      const next = node[k];
      if (next === undefined) node = (node[k] = {});
      else if (typeof next === 'object' && !isValue(next)) node = next;
      else throw new Error(`results: ${path}: ${k} is already a value`);
    }
    node[keys[keys.length - 1] as string] = v;
  }

  /** The file's contents now. */
  toJSON(): ResultsFile {
    const script = process.argv[1] ? relative(repo, process.argv[1]) : '?';
    // The samples taken at each round, the start (constructor) and now: `during` spans the whole run.
    const loads = [...this.loads, loadavg()[0] ?? NaN].filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
    const round2 = (x: number): number => Math.round(x * 100) / 100;
    return {
      schema: 1,
      bench: this.bench,
      command: this.command ?? ['node', ...process.execArgv, script, ...process.argv.slice(2)].join(' '),
      commit: this.commit,
      dirty: this.dirty,
      started: this.started.toISOString(),
      ended: new Date().toISOString(),
      machine: {
        cpus: cpus().length, cpuModel: cpus()[0]?.model ?? '?', memoryGiB: Math.round(totalmem() / 2 ** 30),
        node: process.version, kernel: release(),
      },
      load: {
        start: this.loadStart.map(round2), end: loadavg().map(round2),
        during: {
          min: round2(loads[0] ?? NaN), median: round2(loads[loads.length >> 1] ?? NaN), max: round2(loads[loads.length - 1] ?? NaN),
          samples: loads.length,
        },
      },
      anchor: this.anchor,
      results: this.results,
      ...(this.runs ? { runs: this.runs } : {}),
    };
  }

  /** Writes the file and returns its path relative to the repository (also printed on stderr). */
  write(): string {
    const root = process.env['TSCM_BENCH_RESULTS_DIR'] || join(repo, 'bench', 'results');
    const dir = join(root, this.bench);
    mkdirSync(dir, { recursive: true });
    const stamp = this.started.toISOString().slice(0, 16).replace(':', '');
    const file = join(dir, `${stamp}Z-${this.commit.slice(0, 7)}.json`);
    writeFileSync(file, `${JSON.stringify(this.toJSON(), null, 1)}\n`);
    const shown = relative(repo, file).startsWith('..') ? file : relative(repo, file);
    process.stderr.write(`[bench] results: ${shown}\n`);
    return shown;
  }
}

/** True for a `{ value, unit }` leaf. */
export function isValue(x: unknown): x is Value {
  return typeof x === 'object' && x !== null && typeof (x as Value).value === 'number' && typeof (x as Value).unit === 'string';
}
