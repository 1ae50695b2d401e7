/**
 * A real Prometheus (Debian's `prometheus` package) for end-to-end tests: started on a free loopback port with a
 * scrape configuration the test writes, killed when the test ends, and queried through its HTTP API (PromQL
 * instant queries and the active targets' health). Its log is kept for failure messages.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../cluster/controlplane.ts';
import { waitFor } from './cluster.ts';

export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

interface QueryResult {
  status: string;
  data: { result: Sample[] };
}

export interface Target {
  labels: Record<string, string>;
  health: string;
  lastError: string;
}

export class Prometheus {
  readonly port: number;
  private stderr = '';

  private constructor(port: number) {
    this.port = port;
  }

  /**
   * Writes `config` (prometheus.yml as JSON) into `dir`, starts Prometheus with its TSDB there and waits until it is
   * ready. The process is SIGKILLed through `t.after`.
   */
  static async start(t: { after(fn: () => void): void }, dir: string, config: Record<string, unknown>): Promise<Prometheus> {
    writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config));
    const prom = new Prometheus(await freePort());
    const proc = spawn('prometheus', [
      `--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${prom.port}`, '--log.level=warn',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    proc.stderr.on('data', (d: Buffer) => (prom.stderr += d.toString()));
    t.after(() => proc.kill('SIGKILL'));
    await waitFor('Prometheus ready', async () => (await fetch(`${prom.url}/-/ready`).catch(() => undefined))?.status === 200)
      .catch(prom.withLog);
    return prom;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Rethrows `err` with Prometheus's log appended (for `.catch` on waits that depend on scrapes). */
  readonly withLog = (err: unknown): never => {
    throw new Error(`${String(err)}\nprometheus log:\n${this.stderr}`);
  };

  /** A PromQL instant query; asserts Prometheus answered `success`. */
  async query(q: string): Promise<Sample[]> {
    const res = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(q)}`);
    const body = (await res.json()) as QueryResult;
    assert.equal(body.status, 'success', JSON.stringify(body));
    return body.data.result;
  }

  /** The first sample's value of an instant query, or undefined when the result is empty. */
  async value(q: string): Promise<number | undefined> {
    const v = (await this.query(q))[0]?.value[1];
    return v === undefined ? undefined : Number(v);
  }

  /** Active targets by their `job` label. */
  async targets(): Promise<Map<string, Target>> {
    const body = (await (await fetch(`${this.url}/api/v1/targets`)).json()) as { data: { activeTargets: Target[] } };
    return new Map(body.data.activeTargets.map((a) => [a.labels['job'] ?? '', a]));
  }

  /** The target of `job` if its health is `want` ('up' or 'down'), else undefined (for waitFor). */
  async health(job: string, want: 'up' | 'down'): Promise<Target | undefined> {
    const target = (await this.targets()).get(job);
    return target?.health === want ? target : undefined;
  }

  /**
   * Waits until `job` has at least `n` more successful scrapes than now (sum_over_time of `up`) and is up: scrapes
   * that happened after the caller's change.
   */
  async waitForSuccessfulScrapes(job: string, n: number, timeoutMs = 60_000): Promise<void> {
    const q = `sum_over_time(up{job="${job}"}[10m])`;
    const before = (await this.value(q)) ?? 0;
    await waitFor(`${n} more successful scrapes of ${job}`, async () => {
      const after = (await this.value(q)) ?? 0;
      return after >= before + n && (await this.health(job, 'up')) !== undefined;
    }, { timeoutMs }).catch(this.withLog);
  }
}
