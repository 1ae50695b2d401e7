/**
 * CI times from the CI run's own output (issue 41): `.ci/run` calls this at its end with what it recorded, and it
 * writes bench/results/ci/<UTC start>-<short commit>.json in the results-file format of bench/results.ts, so the
 * README and docs/contributing.md can quote `make test`'s time and test counts from a file, checked by
 * test/docs-figures.test.ts.
 *
 *   node bench/ci-results.ts --dir CI_DIR --started ISO --load-start '0.5 0.7 0.9' --exit-code RC
 *
 * CI_DIR holds `times.tsv` (one `name<TAB>seconds<TAB>exit code` line per part `.ci/run` timed) and `make-test.log`
 * (`make test`'s whole output). From the log, verbatim lines only: `make test`'s own line
 * `[make test] unit + integration tests: exit R (N s); real-node suite: exit R (ended N s after the start)` and the
 * node test runner's summaries (`ℹ tests N`, `ℹ pass N`, … `ℹ duration_ms N`): those before
 * `[make test] unit + integration tests: exit …` are the unit + integration lanes' (lane 1's, then lane 2's log; added
 * up, the duration the longest lane's), the last one after `[make test] ---- real-node suite` is the node suite's. Those lines are kept in `runs` (the evidence); the file is
 * small enough to commit. A CI run has no anchor (its times are the project's own cost on this machine): the file says
 * so, and the previous CI results file is the comparison.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BenchResults, val, type ResultTree } from './results.ts';

/** What one CI log says. */
export interface CiLog {
  /** Per part `.ci/run` timed: seconds and exit code. */
  parts: Record<string, { seconds: number; exitCode: number }>;
  unitIntegration?: { seconds: number; exitCode: number; summary: Record<string, number> };
  nodeSuite?: { endedSeconds: number; exitCode: number; summary: Record<string, number> };
  /** The lines the figures were read from, verbatim. */
  evidence: string[];
}

const SUMMARY = /^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$/;

/** Every complete runner summary in `lines` (keys tests, pass, fail, … duration_ms), with its lines, in order. */
function summaries(lines: string[]): Array<{ summary: Record<string, number>; lines: string[] }> {
  const out: Array<{ summary: Record<string, number>; lines: string[] }> = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^ℹ duration_ms /.test(lines[i] ?? '')) continue;
    const block: string[] = [];
    for (let j = i; j >= 0 && SUMMARY.test(lines[j] ?? ''); j--) block.unshift(lines[j] ?? '');
    const summary = Object.fromEntries(block.map((l) => SUMMARY.exec(l)).filter((m) => m !== null).map((m) => [m[1] ?? '', Number(m[2])]));
    if ('tests' in summary) out.push({ summary, lines: block });
  }
  return out;
}

/** The last complete runner summary in `lines`, with its lines. */
function lastSummary(lines: string[]): { summary: Record<string, number>; lines: string[] } | undefined {
  return summaries(lines).at(-1);
}

/**
 * The runs' summaries as one: counts added, `duration_ms` the longest (the runs went side by side), the lines of all.
 */
function combined(all: Array<{ summary: Record<string, number>; lines: string[] }>): { summary: Record<string, number>; lines: string[] } | undefined {
  if (all.length === 0) return undefined;
  const summary: Record<string, number> = {};
  for (const { summary: s } of all) {
    for (const [k, v] of Object.entries(s)) summary[k] = k === 'duration_ms' ? Math.max(summary[k] ?? 0, v) : (summary[k] ?? 0) + v;
  }
  return { summary, lines: all.flatMap((s) => s.lines) };
}

/** Parses `.ci/run`'s times.tsv and `make test`'s output. */
export function parseCiLog(timesTsv: string, makeTestLog: string): CiLog {
  const parts: CiLog['parts'] = {};
  const evidence: string[] = [];
  for (const line of timesTsv.split('\n').filter(Boolean)) {
    const [name = '', seconds = '', code = ''] = line.split('\t');
    parts[name] = { seconds: Number(seconds), exitCode: Number(code) };
    evidence.push(`=== [ci] ${name} took ${seconds}s${code === '0' ? '' : ` (FAILED, exit ${code})`}`);
  }
  // Colour codes, should a reporter add them: ESC [ … m.
  const ansi = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
  const lines = makeTestLog.split('\n').map((l) => l.replace(ansi, '').trimEnd());
  const out: CiLog = { parts, evidence };
  const ui = lines.findIndex((l) => /^\[make test\] unit \+ integration tests: exit \d+ after \d+ s/.test(l));
  if (ui >= 0) {
    const m = /exit (\d+) after (\d+) s/.exec(lines[ui] ?? '');
    const s = combined(summaries(lines.slice(0, ui)));
    out.unitIntegration = { seconds: Number(m?.[2]), exitCode: Number(m?.[1]), summary: s?.summary ?? {} };
    evidence.push(...(s?.lines ?? []), lines[ui] ?? '');
  }
  const nodeStart = lines.findIndex((l) => l.startsWith('[make test] ---- real-node suite'));
  const end = lines.findIndex((l) => /^\[make test\] unit \+ integration tests: exit \d+ \(\d+ s\); real-node suite: exit \d+ \(ended \d+ s after the start\)/.test(l));
  if (nodeStart >= 0 && end > nodeStart) {
    const m = /real-node suite: exit (\d+) \(ended (\d+) s/.exec(lines[end] ?? '');
    const s = lastSummary(lines.slice(nodeStart, end));
    out.nodeSuite = { endedSeconds: Number(m?.[2]), exitCode: Number(m?.[1]), summary: s?.summary ?? {} };
    evidence.push(...(s?.lines ?? []), lines[end] ?? '');
  }
  return out;
}

/** The results tree of a parsed log (seconds as `s`, counts as `count`). */
export function ciResultTree(log: CiLog): ResultTree {
  const tree: ResultTree = {};
  const key = (name: string): string => name.replace(/[^\w]+(\w)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase());
  for (const [name, p] of Object.entries(log.parts)) tree[key(name)] = { seconds: val(p.seconds, 's'), exitCode: val(p.exitCode, 'count') };
  const counts = (s: Record<string, number>): ResultTree => Object.fromEntries(Object.entries(s).map(([k, v]) => (k === 'duration_ms' ? ['duration', val(v / 1000, 's')] : [k, val(v, 'count')])));
  if (log.unitIntegration) {
    tree['unitIntegration'] = { seconds: val(log.unitIntegration.seconds, 's'), exitCode: val(log.unitIntegration.exitCode, 'count'), ...counts(log.unitIntegration.summary) };
  }
  if (log.nodeSuite) {
    tree['nodeSuite'] = { endedAfter: val(log.nodeSuite.endedSeconds, 's'), exitCode: val(log.nodeSuite.exitCode, 'count'), ...counts(log.nodeSuite.summary) };
  }
  return tree;
}

if (import.meta.main) {
  const { values: args } = parseArgs({
    options: { dir: { type: 'string' }, started: { type: 'string' }, 'load-start': { type: 'string' }, 'exit-code': { type: 'string', default: '0' } },
  });
  if (!args.dir) throw new Error('usage: node bench/ci-results.ts --dir CI_DIR --started ISO --load-start "1 5 15" --exit-code RC');
  const read = (f: string): string => {
    try {
      return readFileSync(`${args.dir}/${f}`, 'utf8');
    } catch {
      return '';
    }
  };
  const log = parseCiLog(read('times.tsv'), read('make-test.log'));
  const res = new BenchResults('ci', {
    name: null,
    description: 'none: a CI run\'s times are the project\'s own cost on this machine (`bash .ci/run` on a fresh clone); compare with the previous file in bench/results/ci/',
  }, {
    command: 'bash .ci/run',
    ...(args.started ? { started: new Date(args.started) } : {}),
    ...(args['load-start'] ? { loadStart: args['load-start'].split(/\s+/).map(Number) } : {}),
  });
  for (const [k, v] of Object.entries(ciResultTree(log))) res.set(k, v);
  res.set('exitCode', val(Number(args['exit-code']), 'count'));
  res.set('total', val((Date.now() - res.started.getTime()) / 1000, 's'));
  res.runs = log.evidence;
  res.write();
}
