/**
 * A cgroup v1 memory limit for a child process, the way a Pod's `resources.limits.memory` applies to a container:
 * `/sys/fs/cgroup/memory/<name>/memory.limit_in_bytes`, the child joins it before it execs (so every byte it ever
 * allocates is charged), and an OOM kill shows as SIGKILL plus `oom_kill` in memory.oom_control.
 * Root only (these machines are); `MemoryCgroup.create` throws with the reason when the controller is not writable.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = '/sys/fs/cgroup/memory';

export class MemoryCgroup {
  readonly dir: string;
  readonly limitBytes: number;

  private constructor(dir: string, limitBytes: number) {
    this.dir = dir;
    this.limitBytes = limitBytes;
  }

  static create(name: string, limitBytes: number): MemoryCgroup {
    const dir = join(root, name);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
      // No swap: a limit is a limit (memsw may be absent when swap accounting is off).
      if (existsSync(join(dir, 'memory.swappiness'))) writeFileSync(join(dir, 'memory.swappiness'), '0');
    } catch (err) {
      throw new Error(`cannot create memory cgroup ${dir} (cgroup v1 memory controller writable as root is required): ${(err as Error).message}`, { cause: err });
    }
    return new MemoryCgroup(dir, limitBytes);
  }

  /**
   * An existing memory cgroup directory someone else made and owns (e.g. the one the kubelet made for a container):
   * read it with the methods below; never `remove()` it.
   */
  static open(dir: string): MemoryCgroup {
    return new MemoryCgroup(dir, Number(readFileSync(join(dir, 'memory.limit_in_bytes'), 'utf8').trim()));
  }

  /** Memory charged to the cgroup now (bytes). */
  usageBytes(): number {
    return Number(this.read('memory.usage_in_bytes').trim());
  }

  /** memory.stat as numbers (cgroup v1: rss, cache, mapped_file, total_rss, …; bytes). */
  stat(): Record<string, number> {
    return Object.fromEntries(this.read('memory.stat').trim().split('\n').map((l) => {
      const [k, v] = l.split(' ');
      return [k ?? '', Number(v)];
    }));
  }

  /** [command, args] that run `cmd args…` inside this cgroup (the shell joins it, then execs: same pid). */
  wrap(cmd: string, args: readonly string[]): [string, string[]] {
    return ['/bin/sh', ['-c', `echo $$ > ${join(this.dir, 'cgroup.procs')} && exec "$@"`, 'sh', cmd, ...args]];
  }

  private read(file: string): string {
    return readFileSync(join(this.dir, file), 'utf8');
  }

  /** Highest memory charged to the cgroup so far (bytes). */
  maxUsageBytes(): number {
    return Number(this.read('memory.max_usage_in_bytes').trim());
  }

  /**
   * How many times a charge hit the limit (`memory.failcnt`): 0 means the usage never reached it, so the kernel never
   * had to reclaim the cgroup's memory or consider an OOM kill. (`max_usage_in_bytes` can never exceed the limit:
   * comparing it with the limit proves nothing.)
   */
  failCount(): number {
    return Number(this.read('memory.failcnt').trim());
  }

  /** Number of processes the kernel OOM-killed in this cgroup. */
  oomKills(): number {
    const m = /oom_kill (\d+)/.exec(this.read('memory.oom_control'));
    return m ? Number(m[1]) : 0;
  }

  /** Removes the cgroup (its processes must have exited). */
  remove(): void {
    try {
      rmdirSync(this.dir);
    } catch {
      // still busy or already gone
    }
  }
}

/**
 * VmRSS and VmHWM (peak) of a live process, in bytes (undefined once it exited), and what the RSS is made of: `anon`
 * (RssAnon: the heap, stacks, what the process allocated) and `file` (RssFile + RssShmem: mapped files — the node
 * binary's code and data as the process touches them; shared and reclaimable, bounded by the files' size).
 */
export function processRss(pid: number): { rss: number; peak: number; anon: number; file: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), peak: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem') };
  } catch {
    return undefined;
  }
}
