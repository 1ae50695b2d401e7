/**
 * What a Node process's anonymous memory is made of, from /proc/<pid>/smaps: the endurance bench samples it so that
 * growth of RSS can be told apart — V8's heap pages, V8's compiled code, malloc's main arena, malloc's thread arenas,
 * the rest — in the results file instead of by hand (issue 43: the RSS goal is missed by anonymous memory only).
 *
 * The split reads the address map; it holds for glibc's malloc and V8 on x86-64 Linux (what the image runs), and is a
 * classification by layout, not by owner:
 *  - `mallocMain`: the `[heap]` mapping — glibc's main arena (brk), used by the main thread's malloc: Node's C++
 *    objects, V8's off-heap allocations (zones of the parser and compilers, array buffers' backing stores), OpenSSL.
 *  - `mallocThreads`: anonymous mappings in the mmap area (≥ 0x7f0000000000) that start on a 64 MiB boundary —
 *    glibc's non-main arenas are heaps of HEAP_MAX_SIZE (64 MiB on 64-bit), aligned to it, one or more per arena;
 *    the threads that malloc in them are V8's platform workers (concurrent marking, TurboFan) and libuv's pool.
 *  - `v8Code`: anonymous mappings that are readable, writable and executable — V8's code range.
 *  - `v8Pages`: the other anonymous mappings below 0x400000000000 — V8 places its heap pages (256 KiB each) at random
 *    hints below 2^46 on x64, and nothing else in the process asks for addresses there.
 *  - `other`: the rest of the anonymous mappings: thread stacks, malloc blocks above its mmap threshold, buffers.
 * Mappings with a path (the node binary, libraries, `[stack]`, `[vdso]`) are not counted, except `[heap]`. Sizes are
 * resident bytes (smaps `Rss`).
 */
import { readFileSync } from 'node:fs';

export interface AnonParts {
  mallocMain: number;
  mallocThreads: number;
  v8Code: number;
  v8Pages: number;
  other: number;
}

/** The parts' names in a fixed order (reports and tests iterate them). */
export const anonPartNames: readonly (keyof AnonParts)[] = ['v8Pages', 'v8Code', 'mallocMain', 'mallocThreads', 'other'];

const mmapArea = 0x7f00_0000_0000;
const v8HintLimit = 0x4000_0000_0000;
const heapMaxSize = 64 * 1024 * 1024;

/** Classifies the resident anonymous memory of an smaps text (see the module comment). */
export function anonParts(smaps: string): AnonParts {
  const parts: AnonParts = { mallocMain: 0, mallocThreads: 0, v8Code: 0, v8Pages: 0, other: 0 };
  let current: keyof AnonParts | undefined;
  for (const line of smaps.split('\n')) {
    // A mapping's header: "start-end perms offset dev inode [path]"; its fields ("Rss:   123 kB") follow.
    const header = /^([0-9a-f]+)-[0-9a-f]+ (\S{4}) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      const start = Number.parseInt(header[1] as string, 16);
      const perms = header[2] as string;
      const path = (header[3] as string).trim();
      if (path === '[heap]') current = 'mallocMain';
      else if (path !== '') current = undefined;
      else if (perms.startsWith('rwx')) current = 'v8Code';
      else if (start >= mmapArea && start % heapMaxSize === 0) current = 'mallocThreads';
      else if (start < v8HintLimit) current = 'v8Pages';
      else current = 'other';
      continue;
    }
    if (current && line.startsWith('Rss:')) {
      const kb = /^Rss:\s+(\d+) kB/.exec(line);
      if (kb) parts[current] += Number(kb[1]) * 1024;
      current = undefined;
    }
  }
  return parts;
}

/** anonParts of a running process, or undefined when it is gone. */
export function readAnonParts(pid: number): AnonParts | undefined {
  try {
    return anonParts(readFileSync(`/proc/${pid}/smaps`, 'utf8'));
  } catch {
    return undefined;
  }
}
