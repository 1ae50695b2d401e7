/**
 * Process helpers for control-plane components: free loopback ports, liveness (zombies count as dead), killing a
 * component's whole process group, and a log file's tail for error messages.
 *
 * Every component is spawned `detached` (its own process group, led by the component), so killing `-pid` reaches
 * the component and anything it started, and a Ctrl-C to the test's terminal does not reach it (the owner — the
 * test process, or its reaper when the test process died — stops it).
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Every port freePort handed out in this process (the kernel may give a closed one again; we never do). */
const handedOut = new Set<number>();

/**
 * Returns a TCP port that was free on 127.0.0.1 a moment ago and that this process was not given before: the caller
 * binds it next, and two ports asked for in a row (a manager's probe and metrics servers) must differ — the kernel
 * picks bind(0) ports at random and may pick one it just released. Another process may still take the port in between.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((res, rej) => {
      const srv = createServer();
      srv.once('error', rej);
      srv.listen(0, '127.0.0.1', () => {
        const addr = srv.address();
        const p = typeof addr === 'object' && addr ? addr.port : 0;
        srv.close(() => res(p));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** True while `pid` is a live (non-zombie) process. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export const delay = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

/** Sends `sig` to the process group `pid` leads, or to `pid` alone when it leads none; never throws. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* already gone */
    }
  }
}

/** SIGTERM to the process group, then SIGKILL after `graceMs`; resolves when the leader is gone. */
export async function killGroup(pid: number, graceMs = 10_000): Promise<void> {
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      signalGroup(pid, 'SIGKILL');
      await delay(100);
      if (!isAlive(pid)) break;
    }
    await delay(50);
  }
}

/** The last `lines` lines of a log file, or "(no log)". */
export function tail(file: string, lines = 40): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
