/**
 * Runs the real manager (`node cmd/manager/main.ts`) as a child process for end-to-end tests: free loopback ports
 * for metrics and probes, JSON log lines collected and parsed, helpers to poll its endpoints and to stop it with a
 * signal and read the exit code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { freePort } from '../cluster/controlplane.ts';
import type { MemoryCgroup } from './cgroup.ts';
import { StopTrying, waitFor, type WaitOptions } from './cluster.ts';

export const mainScript = join(import.meta.dirname, '..', '..', 'cmd', 'manager', 'main.ts');
/** The compiled entry point (`tsc -p tsconfig.build.json`): one file per module, as `npm`'s bin runs it. */
export const distMainScript = join(import.meta.dirname, '..', '..', 'dist', 'cmd', 'manager', 'main.js');
/**
 * The esbuild bundle of distMainScript (`make build` / `npm run build`: hack/bundle.ts), as the image runs it: the
 * same code in a few files, which starts with less CPU (bench/README.md "Fixed cost").
 */
export const bundleMainScript = join(import.meta.dirname, '..', '..', 'dist', 'bundle', 'main.js');

/**
 * Node flags the container image runs the manager with (Dockerfile ENTRYPOINT; a unit test keeps the two equal):
 * V8's old space is sized from the container's memory limit (half of it), so the garbage collector works before
 * the cgroup limit is reached instead of after (V8's default heap limit in a 256 MiB container is 259 MiB); the
 * young generation is capped at 2 MiB per semi-space (V8 grows it to 16 MiB at start-up and keeps it resident;
 * bench/README.md "Fixed cost").
 */
export const productionNodeFlags = ['--max-old-space-size-percentage=50', '--max-semi-space-size=2'];
/** The image's ENTRYPOINT (Dockerfile; test/memory.test.ts and test/image.test.ts keep the two equal): the bundle. */
export const imageEntrypoint = ['/usr/local/bin/node', ...productionNodeFlags, '/app/dist/bundle/main.js'];
/** The same command with the in-cluster ServiceAccount directory under `$TSCM_TEST_IN_CLUSTER_ROOT` (tests only). */
export const inClusterMainScript = join(import.meta.dirname, 'incluster-main.ts');

export interface LogLine {
  level?: string;
  msg?: string;
  time?: string;
  [key: string]: unknown;
}

export interface StartOptions {
  args?: string[];
  /** Environment of the child; PATH/HOME are added. No KUBECONFIG is inherited unless given here. */
  env?: NodeJS.ProcessEnv;
  /**
   * Serve metrics on a free port (default true), plain HTTP unless `args` say `--metrics-secure` (the manager's own
   * defaults are kubebuilder's: metrics off, and HTTPS with token authentication when on).
   */
  metrics?: boolean;
  /** Entry point (default: the TypeScript sources' main.ts; `distMainScript` for the compiled one). */
  script?: string;
  /**
   * Run this executable instead of Node (no Node flags, no script): another manager that takes the same
   * `--health-probe-bind-address`, `--metrics-bind-address` and `--metrics-secure` flags (bench/cr-anchor).
   */
  executable?: string;
  /** Node flags (default `productionNodeFlags`). */
  nodeFlags?: string[];
  /** Run inside this memory cgroup (the process joins it before exec). */
  cgroup?: MemoryCgroup;
  /** Collect stdout log lines (default true); false sends them to /dev/null (benchmarks). */
  collectLogs?: boolean;
  /**
   * Hand each stdout log line to this instead of keeping it in `logs` (a long run that only counts them: bench/soak).
   * Wins over `collectLogs`.
   */
  onLog?: (line: LogLine, raw: string) => void;
  /** Run "in-cluster style": the ServiceAccount directory is read under this root (test entry point). */
  inClusterRoot?: string;
}

export class ManagerProcess {
  readonly proc: ChildProcess;
  readonly healthPort: number;
  readonly metricsPort: number | undefined;
  readonly logs: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  private constructor(proc: ChildProcess, healthPort: number, metricsPort: number | undefined, onLog?: (line: LogLine, raw: string) => void) {
    this.proc = proc;
    this.healthPort = healthPort;
    this.metricsPort = metricsPort;
    let buf = '';
    proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let parsed: LogLine;
        try {
          parsed = JSON.parse(line) as LogLine;
        } catch {
          parsed = { msg: line };
        }
        if (onLog) onLog(parsed, line);
        else this.logs.push(parsed);
      }
    });
    proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => this.stderr.push(chunk));
    this.exited = new Promise((res) => proc.on('exit', (code, signal) => {
      this.exitInfo = { code, signal };
      res(this.exitInfo);
    }));
  }

  static async start(opts: StartOptions = {}): Promise<ManagerProcess> {
    const healthPort = await freePort();
    const metricsPort = opts.metrics === false ? undefined : await freePort();
    const args = [
      ...(opts.executable !== undefined ? [] : [
        ...(opts.nodeFlags ?? productionNodeFlags),
        opts.script ?? (opts.inClusterRoot !== undefined ? inClusterMainScript : mainScript),
      ]),
      `--health-probe-bind-address=127.0.0.1:${healthPort}`,
      `--metrics-bind-address=${metricsPort === undefined ? '0' : `127.0.0.1:${metricsPort}`}`,
      // Plain scrapes by `metrics()`; a later `--metrics-secure` in opts.args wins (the last occurrence of a flag does).
      ...(metricsPort === undefined ? [] : ['--metrics-secure=false']),
      ...(opts.args ?? []),
    ];
    const exe = opts.executable ?? process.execPath;
    const [cmd, argv] = opts.cgroup ? opts.cgroup.wrap(exe, args) : [exe, args];
    const proc = spawn(cmd, argv, {
      env: {
        PATH: process.env['PATH'], HOME: process.env['HOME'], ...opts.env,
        ...(opts.inClusterRoot !== undefined ? { TSCM_TEST_IN_CLUSTER_ROOT: opts.inClusterRoot } : {}),
      },
      stdio: ['ignore', opts.collectLogs === false && !opts.onLog ? 'ignore' : 'pipe', 'pipe'],
    });
    return new ManagerProcess(proc, healthPort, metricsPort, opts.onLog);
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /** GET a probe endpoint on the health port; resolves {status, body} (status 0 when not listening yet). */
  async probe(path: string): Promise<{ status: number; body: string }> {
    try {
      const res = await fetch(`http://127.0.0.1:${this.healthPort}${path}`, { signal: AbortSignal.timeout(5000) });
      return { status: res.status, body: await res.text() };
    } catch {
      return { status: 0, body: '' };
    }
  }

  async metrics(): Promise<string> {
    if (this.metricsPort === undefined) throw new Error('metrics disabled for this manager');
    const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) });
    if (res.status !== 200) throw new Error(`/metrics: HTTP ${res.status}`);
    return res.text();
  }

  /** Waits until a log line matches; fails early (with the stderr) if the process exits first. */
  async waitForLog(what: string, match: (l: LogLine) => boolean, opts: WaitOptions = {}): Promise<LogLine> {
    return waitFor(what, async () => {
      const hit = this.logs.find(match);
      if (hit) return hit;
      if (!this.running) throw await this.exitedError();
      return undefined;
    }, opts);
  }

  /** Waits until /readyz answers 200; fails early (with the exit and the stderr) if the process exits first. */
  async waitReady(opts: WaitOptions = {}): Promise<void> {
    await waitFor('manager /readyz 200', async () => {
      if (!this.running) throw await this.exitedError();
      return (await this.probe('/readyz')).status === 200;
    }, opts);
  }

  /**
   * What ends a wait on an exited process: its exit and its stderr — all of it: 'exit' can come before stderr's last
   * chunk (waiting at most 1 s for the pipe to close, which a process it started may hold open).
   */
  private async exitedError(): Promise<StopTrying> {
    const err = this.proc.stderr;
    if (err && !err.closed) await Promise.race([once(err, 'close'), new Promise((r) => setTimeout(r, 1000).unref())]);
    return new StopTrying(`manager exited (${JSON.stringify(this.exitInfo)}): ${this.stderr.join('')}`);
  }

  /** Sends `signal` and resolves with the exit code (kills with SIGKILL after `timeoutMs`). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 60_000): Promise<number | null> {
    if (this.running) this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    const { code } = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

/** Reads one sample value from Prometheus text exposition (undefined when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const labelText = rest[0] === '{' ? rest.slice(1, rest.indexOf('}')) : '';
    const ok = Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
