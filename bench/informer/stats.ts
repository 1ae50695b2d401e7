/**
 * Small numeric helpers for the informer benchmarks: a machine-wide monotonic clock, percentiles, formatting.
 *
 * Clock: `monoNs()` is process.hrtime.bigint(), i.e. Linux CLOCK_MONOTONIC. That clock is shared by every process of
 * one boot, so a timestamp taken in the load-generator child and one taken in the bench process compare directly
 * (no wall-clock steps, no NTP slewing between two different clocks, nanosecond resolution).
 */

/** CLOCK_MONOTONIC in nanoseconds (same clock in every process of the machine). */
export function monoNs(): bigint {
  return process.hrtime.bigint();
}

/** Milliseconds between two monoNs() readings. */
export function msBetween(fromNs: bigint, toNs: bigint): number {
  return Number(toNs - fromNs) / 1e6;
}

/** Nearest-rank percentile of `values` (0 < p ≤ 100); NaN for an empty list. Does not modify `values`. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export const MiB = 1024 * 1024;

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(0)} ms`;
  return `${ms.toFixed(1)} ms`;
}

export function fmtRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return 'n/a';
  return `${Math.round(perSecond).toLocaleString('en-US')}/s`;
}

export function fmtMiB(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}

export function fmtInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** Renders a GitHub-flavoured markdown table. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  const lines = [
    `| ${header.map(esc).join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ];
  return lines.join('\n');
}
