/**
 * Load generator for the informer benchmarks, run as a SEPARATE child process so that producing API writes does not
 * compete with the informer under test for the bench process's event loop.
 *
 *   node bench/informer/load.ts '<LoadConfig as JSON>'
 *
 * Modes:
 *  - `create`: creates `count` objects (ConfigMaps or Foos) named `<prefix>-<index>` with `concurrency` requests in
 *    flight (HTTP/1.1 keep-alive, admin client certificate). Each object carries its send time (see below).
 *  - `patch`: open-loop paced writes for `durationMs`: write i is due at t0 + i/rate; it is a JSON merge patch of
 *    ConfigMap `<prefix>-<i mod pool>` setting `data.sentAt`. At most `concurrency` writes are in flight (a late
 *    write is sent as soon as a slot frees; writes not sent when the window closes are skipped; the achieved rate is
 *    reported).
 *
 * Send timestamp: `data.sentAt` (ConfigMaps) / annotation `bench/sent-at` (Foos) is process.hrtime.bigint() in ns
 * taken immediately before the request is written: CLOCK_MONOTONIC, the same clock the bench process reads in its
 * handler (see stats.ts).
 *
 * Output: progress lines on stderr; one JSON LoadResult line on stdout at the end. Exit 1 if any write failed after
 * retries (429/5xx/network errors are retried up to 5 times).
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { monoNs, msBetween, percentile } from './stats.ts';

export interface LoadConfig {
  server: string;
  caCert: string;
  adminCert: string;
  adminKey: string;
  mode: 'create' | 'patch';
  kind: 'configmap' | 'foo';
  namespace: string;
  prefix: string;
  /** create: number of objects; patch: size of the pool of existing ConfigMaps patched round-robin. */
  count: number;
  concurrency: number;
  /** patch: writes per second. */
  rate?: number;
  /** patch: how long to write. */
  durationMs?: number;
  /** A label for progress lines. */
  label?: string;
  /** patch: also return every write's [sentAt, ackedAt] (ns, decimal strings), to correlate with handler times. */
  reportAcks?: boolean;
}

export interface LoadResult {
  writes: number;
  failed: number;
  /** monoNs of the first request sent and of the last response received (as decimal strings). */
  firstSendNs: string;
  lastAckNs: string;
  /** Acknowledged writes per second between the first send and the last ack. */
  ackRate: number;
  /** Send → response latency of the writes, ms. */
  ackP50Ms: number;
  ackP99Ms: number;
  /** CPU time (user + system) the generator process used, ms. */
  cpuMs: number;
  /** With reportAcks: [send timestamp carried in the object, response received] per write, monoNs decimal strings. */
  acks?: [string, string][];
}

export function objectName(prefix: string, i: number): string {
  return `${prefix}-${String(i).padStart(5, '0')}`;
}

const FOO_PATH = '/apis/samplecontroller.k8s.io/v1alpha1';

function configMap(name: string, i: number, sentAt: string): unknown {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels: { app: 'informer-bench', shard: String(i % 16) } },
    data: {
      sentAt,
      'app.properties': `name=${name}\nreplicas=${1 + (i % 10)}\nlog.level=info\nfeature.flags=a,b,c\n`,
      'settings.json': JSON.stringify({ id: i, owner: 'team-bench', timeoutSeconds: 30, endpoints: ['a.svc', 'b.svc'] }),
    },
  };
}

function foo(name: string, i: number, sentAt: string): unknown {
  return {
    apiVersion: 'samplecontroller.k8s.io/v1alpha1',
    kind: 'Foo',
    metadata: { name, labels: { app: 'informer-bench', shard: String(i % 16) }, annotations: { 'bench/sent-at': sentAt } },
    spec: { deploymentName: `${name}-deploy`, replicas: 1 + (i % 10) },
  };
}

class Client {
  private readonly agent: Agent;
  private readonly server: URL;

  constructor(cfg: LoadConfig) {
    this.server = new URL(cfg.server);
    this.agent = new Agent({
      keepAlive: true,
      maxSockets: cfg.concurrency,
      ca: readFileSync(cfg.caCert),
      cert: readFileSync(cfg.adminCert),
      key: readFileSync(cfg.adminKey),
    });
  }

  once(method: string, path: string, body: string, contentType: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        new URL(path, this.server),
        {
          method,
          agent: this.agent,
          headers: { accept: 'application/json', 'content-type': contentType, 'content-length': Buffer.byteLength(body) },
          timeout: 30_000,
        },
        (res) => {
          let data = '';
          res.setEncoding('utf8').on('data', (c: string) => (data += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`timeout: ${method} ${path}`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Sends with retries; `makeBody` is called per attempt (fresh send timestamp). Returns [sentNs, ackedNs]. */
  async send(method: string, path: string, makeBody: () => string, contentType: string, okStatus: number[]): Promise<[bigint, bigint]> {
    let lastError = '';
    for (let attempt = 0; attempt < 6; attempt++) {
      if (attempt > 0) await sleep(100 * attempt);
      const body = makeBody();
      const sent = monoNs();
      try {
        const res = await this.once(method, path, body, contentType);
        const acked = monoNs();
        if (okStatus.includes(res.status)) return [sent, acked];
        lastError = `HTTP ${res.status}: ${res.body.slice(0, 300)}`;
        if (res.status !== 429 && res.status < 500) break;
      } catch (err) {
        lastError = (err as Error).message;
      }
    }
    throw new Error(`${method} ${path}: ${lastError}`);
  }

  close(): void {
    this.agent.destroy();
  }
}

async function run(cfg: LoadConfig): Promise<LoadResult> {
  const client = new Client(cfg);
  const label = cfg.label ?? `${cfg.mode} ${cfg.kind}`;
  const lat: number[] = [];
  const acks: [string, string][] = [];
  let first: bigint | undefined;
  let last = 0n;
  let failed = 0;
  let done = 0;
  let firstError = '';
  const t0 = monoNs();

  const one = async (i: number): Promise<void> => {
    try {
      let sent: bigint;
      let acked: bigint;
      if (cfg.mode === 'create') {
        const name = objectName(cfg.prefix, i);
        const path = cfg.kind === 'configmap'
          ? `/api/v1/namespaces/${cfg.namespace}/configmaps`
          : `${FOO_PATH}/namespaces/${cfg.namespace}/foos`;
        const make = cfg.kind === 'configmap' ? configMap : foo;
        [sent, acked] = await client.send('POST', path, () => JSON.stringify(make(name, i, String(monoNs()))), 'application/json', [201]);
      } else {
        const name = objectName(cfg.prefix, i % cfg.count);
        let sentAt = '';
        const body = (): string => {
          sentAt = String(monoNs());
          return JSON.stringify({ data: { sentAt } });
        };
        [sent, acked] = await client.send('PATCH', `/api/v1/namespaces/${cfg.namespace}/configmaps/${name}`,
          body, 'application/merge-patch+json', [200]);
        // sentAt is the value of the successful attempt: the one the handler sees in the object.
        if (cfg.reportAcks) acks.push([sentAt, String(acked)]);
      }
      if (first === undefined || sent < first) first = sent;
      if (acked > last) last = acked;
      lat.push(msBetween(sent, acked));
    } catch (err) {
      failed++;
      firstError ||= (err as Error).message;
    }
    done++;
  };

  const total = cfg.mode === 'create' ? cfg.count : Math.round(((cfg.rate ?? 1000) * (cfg.durationMs ?? 10_000)) / 1000);
  const progressEvery = Math.max(1, Math.round(total / 10));
  let nextProgress = progressEvery;
  const inflight = new Set<Promise<void>>();
  const launch = (i: number): void => {
    const p = one(i).finally(() => {
      inflight.delete(p);
      if (done >= nextProgress) {
        nextProgress += progressEvery;
        const s = msBetween(t0, monoNs()) / 1000;
        process.stderr.write(`[load] ${label}: ${done}/${total} (${Math.round(done / s)}/s)\n`);
      }
    });
    inflight.add(p);
  };

  if (cfg.mode === 'create') {
    for (let i = 0; i < total; i++) {
      while (inflight.size >= cfg.concurrency) await Promise.race(inflight);
      launch(i);
    }
  } else {
    const intervalNs = BigInt(Math.round(1e9 / (cfg.rate ?? 1000)));
    const start = monoNs();
    // Writes still unsent when the window closes (server slower than the requested rate) are skipped.
    const endNs = start + BigInt(cfg.durationMs ?? 10_000) * 1_000_000n;
    let next = 0;
    while (next < total && monoNs() < endNs) {
      const now = monoNs();
      while (next < total && start + BigInt(next) * intervalNs <= now && inflight.size < cfg.concurrency) launch(next++);
      if (inflight.size >= cfg.concurrency) await Promise.race(inflight);
      else await sleep(1);
    }
  }
  await Promise.all(inflight);
  client.close();
  if (firstError) process.stderr.write(`[load] ${label}: ${failed} writes failed; first error: ${firstError}\n`);
  const firstNs = first ?? t0;
  const seconds = msBetween(firstNs, last) / 1000;
  return {
    writes: lat.length,
    failed,
    firstSendNs: String(firstNs),
    lastAckNs: String(last),
    ackRate: seconds > 0 ? lat.length / seconds : NaN,
    ackP50Ms: percentile(lat, 50),
    ackP99Ms: percentile(lat, 99),
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
    ...(cfg.reportAcks ? { acks } : {}),
  };
}

if (import.meta.main) {
  const arg = process.argv[2];
  if (!arg) {
    process.stderr.write('usage: node bench/informer/load.ts <LoadConfig JSON>\n');
    process.exit(2);
  }
  const result = await run(JSON.parse(arg) as LoadConfig);
  // stdout is a pipe: exit only once the (possibly large) line is flushed.
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(result.failed > 0 ? 1 : 0));
}
