/**
 * The test environment's reaper: a detached Node process (its own session and process group) that outlives the test
 * process and tears the environment down when that process dies without calling `stop()` — a crash, SIGKILL, a test
 * runner that killed it on timeout, or simply exiting early.
 *
 *   node reaper.(ts|js) <owner pid> <environment dir>
 *
 * Contract with env.ts: the owner spawns this first (before any component) with its own pid and the environment's
 * directory; every component it starts leads its own process group and names a path under `<dir>/` on its command
 * line (etcd's --data-dir, kube-apiserver's --cert-dir). Every 200 ms:
 *  - the directory is gone → the owner stopped the environment itself: exit;
 *  - our parent is no longer the owner (we were re-parented: the owner died; comparing ppid, not probing the pid,
 *    cannot be fooled by pid reuse) → SIGKILL the process group of every process whose command line names a path
 *    under `<dir>/` (found in /proc: no pid list to get out of date, none killed by a reused pid), wait until they are
 *    gone (at most 10 s), remove the directory, exit.
 * The owner's `stop()` also SIGTERMs this process after removing the directory. No imports beyond node: builtins, so
 * it starts in milliseconds.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';

const [ownerArg, dir] = process.argv.slice(2);
const owner = Number(ownerArg);
if (!Number.isInteger(owner) || owner <= 0 || !dir) {
  process.stderr.write('usage: reaper <owner pid> <environment dir>\n');
  process.exit(2);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function victims(envDir: string): number[] {
  const pids = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${envDir}/`)) pids.add(pid);
    } catch { /* gone meanwhile */ }
  }
  return [...pids];
}

async function reap(envDir: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  let left = victims(envDir);
  while (left.length > 0 && Date.now() < deadline) {
    for (const pid of left) {
      for (const target of [-pid, pid]) {
        try {
          process.kill(target, 'SIGKILL');
        } catch { /* not a group leader, or gone */ }
      }
    }
    await new Promise((r) => setTimeout(r, 50));
    left = victims(envDir).filter(alive);
  }
  rmSync(envDir, { recursive: true, force: true });
}

const timer = setInterval(() => {
  if (!existsSync(dir)) {
    clearInterval(timer);
    return;
  }
  if (process.ppid !== owner) {
    clearInterval(timer);
    void reap(dir);
  }
}, 200);
