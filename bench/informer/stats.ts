/**
 * Small numeric helpers for the informer benchmarks: a machine-wide monotonic clock, percentiles, formatting.
 *
 * Clock: `monoNs()` is process.hrtime.bigint(), i.e. Linux CLOCK_MONOTONIC. That clock is shared by every process of
 * one boot, so a timestamp taken in the load-generator child and one taken in the bench process compare directly
 * (no wall-clock steps, no NTP slewing between two different clocks, nanosecond resolution).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** CLOCK_MONOTONIC in nanoseconds (same clock in every process of the machine). */
export function monoNs(): bigint {
  return process.hrtime.bigint();
}

/** Milliseconds between two monoNs() readings. */
export function msBetween(fromNs: bigint, toNs: bigint): number {
  return Number(toNs - fromNs) / 1e6;
}

let clockTicks: number | undefined;

/** CPU time (user + system, all threads) a process has used so far, in ms, from /proc/<pid>/stat; NaN if gone. */
export function procCpuMs(pid: number): number {
  try {
    clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks;
  } catch {
    return NaN;
  }
}

/** CPU time (user + system, all threads) this process has used since `since` (a process.cpuUsage() value), ms. */
export function selfCpuMs(since?: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
}

/**
 * Time this process's main thread (the JavaScript thread) has spent runnable but WAITING for a CPU, in ms
 * (/proc/self/schedstat, field 2). Its growth per wall second shows how much of a latency is the machine's
 * contention rather than our own work. NaN where unavailable.
 */
export function runQueueWaitMs(): number {
  try {
    return Number(readFileSync('/proc/self/schedstat', 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return NaN;
  }
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

/** Four full GCs 50 ms apart (the process must run with --expose-gc), then process.memoryUsage(): retained memory. */
export async function settle(): Promise<NodeJS.MemoryUsage> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  return process.memoryUsage();
}
