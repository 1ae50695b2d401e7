/**
 * The manager replicas of the endurance bench, run the way a Deployment with two replicas runs them: each its own
 * process (the image's Node flags) in its own memory cgroup of the shipped limit (256 MiB, config/manager), with
 * `--leader-elect`, every controller, the Network controller on the NeutronProxy, metrics on loopback and the
 * profiling server on loopback (heap statistics and /debug/informers). A replica whose process exits — killed by the
 * bench, or exiting on its own (a lost Lease exits 1 by design) — is started again after `restartDelayMs`, as a
 * kubelet restarts a container; each process is one *incarnation* (`a#1`, `a#2`, …).
 *
 * Logs: each stdout line is counted by message and level (never kept in memory) and appended to
 * `<dir>/<replica>.log`; stderr is appended to `<dir>/<replica>.stderr`.
 *
 * Concurrency: one event loop. `stop()` ends supervision first, then the process, so nothing restarts afterwards.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/cluster/controlplane.ts';
import { MemoryCgroup } from '../../test/helpers/cgroup.ts';
import { ManagerProcess } from '../../test/helpers/managerprocess.ts';

export interface ReplicaOptions {
  name: string;
  /** The entry point: a frozen bundle (bench) or cmd/manager/main.ts (test). */
  script: string;
  kubeconfig: string;
  cloudsYaml: string;
  leaseNamespace: string;
  /** Working directory for the logs. */
  dir: string;
  /** Memory limit of the replica's cgroup (bytes); undefined = none. */
  memoryLimitBytes: number | undefined;
  restartDelayMs: number;
  /** Extra manager flags (they win over the defaults). */
  args?: readonly string[];
  /** Extra environment variables (KUBECONFIG and POD_NAMESPACE are the bench's). */
  env?: Readonly<Record<string, string>>;
  log: (msg: string) => void;
}

/** Messages and levels the replicas logged (all incarnations). */
export class LogCounts {
  readonly byMessage = new Map<string, number>();
  readonly byLevel = new Map<string, number>();
  total = 0;

  count(msg: string, level: string): void {
    this.total++;
    this.byMessage.set(msg, (this.byMessage.get(msg) ?? 0) + 1);
    this.byLevel.set(level, (this.byLevel.get(level) ?? 0) + 1);
  }
}

/** One exit of an incarnation: who, how, when (Date.now). */
export interface Exit { incarnation: string; code: number | null; signal: string | null; at: number; killedByBench: boolean; oomKills: number }

export class Replica {
  readonly name: string;
  readonly pprofPort: Promise<number>;
  readonly exits: Exit[] = [];
  /** The running process (undefined while restarting). */
  current: ManagerProcess | undefined;
  /** `<name>#<n>` of the current (or last) process. */
  incarnation = '';
  /** Date.now() the current process started. */
  startedAt = 0;
  private n = 0;
  private stopped = false;
  private killing = false;
  private readonly cgroup: MemoryCgroup | undefined;
  private readonly out: WriteStream;
  private readonly err: WriteStream;
  private readonly opts: ReplicaOptions;
  private readonly counts: LogCounts;
  private supervision: Promise<void> = Promise.resolve();
  private finalStats: { maxUsage: number; oomKills: number } | undefined;

  constructor(opts: ReplicaOptions, counts: LogCounts) {
    this.opts = opts;
    this.name = opts.name;
    this.counts = counts;
    this.pprofPort = freePort();
    this.cgroup = opts.memoryLimitBytes ? MemoryCgroup.create(`tscm-soak-${process.pid}-${opts.name}`, opts.memoryLimitBytes) : undefined;
    this.out = createWriteStream(join(opts.dir, `${opts.name}.log`), { flags: 'a' });
    this.err = createWriteStream(join(opts.dir, `${opts.name}.stderr`), { flags: 'a' });
  }

  /** Starts the first incarnation and keeps one running until stop(). Resolves once the first one is ready. */
  async start(): Promise<void> {
    await this.spawn();
    await this.current?.waitReady({ timeoutMs: 180_000 });
  }

  private async spawn(): Promise<void> {
    this.n++;
    this.incarnation = `${this.name}#${this.n}`;
    const inc = this.incarnation;
    const proc = await ManagerProcess.start({
      script: this.opts.script,
      ...(this.cgroup ? { cgroup: this.cgroup } : {}),
      args: [
        '--leader-elect', `--leader-election-namespace=${this.opts.leaseNamespace}`, '--controllers=*',
        `--neutron-cloud-config=${this.opts.cloudsYaml}`, '--neutron-cloud=local',
        `--pprof-bind-address=127.0.0.1:${await this.pprofPort}`,
        ...(this.opts.args ?? []),
      ],
      env: { ...this.opts.env, KUBECONFIG: this.opts.kubeconfig, POD_NAMESPACE: this.opts.leaseNamespace },
      onLog: (line, raw) => {
        this.counts.count(typeof line.msg === 'string' ? line.msg : '(no msg)', typeof line.level === 'string' ? line.level : String(line.level ?? '?'));
        this.out.write(`${inc} ${raw}\n`);
      },
    });
    proc.proc.stderr?.on('data', (c: string | Buffer) => this.err.write(c));
    this.current = proc;
    this.startedAt = Date.now();
    this.opts.log(`replica ${inc} started (pid ${proc.proc.pid})`);
    this.supervision = proc.exited.then(async ({ code, signal }) => {
      const oomKills = this.cgroup?.oomKills() ?? 0;
      this.exits.push({ incarnation: inc, code, signal, at: Date.now(), killedByBench: this.killing, oomKills });
      this.opts.log(`replica ${inc} exited (${signal ?? `code ${code}`}${this.killing ? ', killed by the bench' : ''}; cgroup OOM kills so far ${oomKills}); stderr tail: ${proc.stderr.join('').slice(-300).trim()}`);
      proc.stderr.length = 0;
      this.killing = false;
      this.current = undefined;
      if (this.stopped) return;
      await new Promise((r) => setTimeout(r, this.opts.restartDelayMs));
      if (!this.stopped) await this.spawn();
    });
  }

  /** SIGKILLs the current process (as a node failure would); the supervisor starts the next incarnation. */
  kill(): void {
    if (!this.current?.running) return;
    this.killing = true;
    this.current.proc.kill('SIGKILL');
  }

  /** Whether this replica's current process holds the Lease (leader_election_master_status), undefined if unknown. */
  async isLeader(): Promise<boolean | undefined> {
    const m = await this.current?.metrics().catch(() => undefined);
    if (m === undefined) return undefined;
    return /^leader_election_master_status\{[^}]*\} 1$/m.test(m);
  }

  /** GET a path of the profiling server (heapstats, /debug/informers) as JSON; undefined when not answering. */
  async debug<T>(path: string): Promise<T | undefined> {
    if (!this.current?.running) return undefined;
    try {
      const res = await fetch(`http://127.0.0.1:${await this.pprofPort}${path}`, { signal: AbortSignal.timeout(10_000) });
      return res.status === 200 ? ((await res.json()) as T) : undefined;
    } catch {
      return undefined;
    }
  }

  /** The cgroup's peak usage (bytes) and OOM kills (after stop(): as they were when it was removed). */
  cgroupStats(): { maxUsage: number; oomKills: number } | undefined {
    return this.finalStats ?? (this.cgroup ? { maxUsage: this.cgroup.maxUsageBytes(), oomKills: this.cgroup.oomKills() } : undefined);
  }

  /** Ends supervision and stops the process (SIGTERM, SIGKILL after 40 s); removes the cgroup. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.current?.stop('SIGTERM', 40_000);
    await this.supervision.catch(() => {});
    this.finalStats = this.cgroupStats();
    this.cgroup?.remove();
    await Promise.all([new Promise((r) => this.out.end(r)), new Promise((r) => this.err.end(r))]);
  }
}
