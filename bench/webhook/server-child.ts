/**
 * The webhook process of bench/webhook.ts (forked with an IPC channel; not a command of its own): the library's
 * WebhookServer on 127.0.0.1:<free port> with a self-signed certificate for 127.0.0.1, serving the Network webhooks
 * as a user of the library would write them:
 *   /validate-samplecrd-k8s-io-v2-network   validateNetwork (pkg/controllers/network/validation.ts) on CREATE/UPDATE
 *   /convert                                Network v1 ↔ v2, hub v2, spokes.v1 = toHub/fromHub (pkg/apis/samplecrd/v2)
 *
 * Measured here, in the process that serves (the parent cannot see it):
 *  - handling time of every request, with performance.now(), to Node's `http.server.response.finish`
 *    diagnostics-channel message (the last byte of the answer handed to the socket) from (a) the request body's
 *    'end' — the webhook's OWN time: JSON parse, validate or convert, JSON answer, TLS write — and (b) the
 *    `http.server.request.start` message (headers parsed, the server's handler about to run): (a) plus the wait for
 *    the body, which is the SENDER's pace (a CPU-starved API server writes the body late). Neither includes the TLS
 *    handshake or the wait for the event loop to pick the bytes up (the event-loop delay histogram shows that);
 *  - the size of each ConversionReview the API server sent: the number of objects converted per request (the
 *    spoke functions count calls per request context — a context is made per request by the server);
 *  - the event loop's delay (perf_hooks.monitorEventLoopDelay sampling every 20 ms: a 1 ms timer alone cost ~35 CPU-ms
 *    per second here, i.e. ~170 µs per call at 200 calls/s) and this thread's run-queue wait.
 *
 * With `--http2` the server is started with `http2: true` (ALPN h2 + http/1.1): an HTTP/2 request is timed the same
 * way from node:http2's `http2.server.stream.start` message (its headers received) and its stream's 'end' (body
 * complete) to the stream's 'finish' (the last byte of the answer handed to the session); `h2Calls` counts them.
 *
 * Protocol (process.send / 'message'): → {type:'ready', port, caBundle}; ← {type:'reset'} → {type:'reset'} clears
 * what was recorded; ← {type:'collect'} → {type:'stats', …} (ChildStats: what was recorded since the last reset);
 * ← {type:'converted'} → {type:'converted', objects} (objects converted since the reset); ← {type:'stop'} stops the server and exits 0 (a CPU profile, under --cpu-prof, is written then).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { fromHub, toHub, type Network as NetworkV2 } from '../../pkg/apis/samplecrd/v2/types.ts';
import { validateNetwork } from '../../pkg/controllers/network/validation.ts';
import { selfSignedCertificate } from '../../pkg/manager/selfsigned.ts';
import { denied, type HandlerContext, type ValidationResult } from '../../pkg/webhook/admission.ts';
import { WebhookBuilder } from '../../pkg/webhook/builder.ts';
import { WebhookServer } from '../../pkg/webhook/server.ts';
import { runQueueWaitMs } from '../informer/stats.ts';

export const validatePathV2 = '/validate-samplecrd-k8s-io-v2-network';

/** One served request. */
export interface Served {
  path: string;
  /** Request headers parsed → answer written. */
  ms: number;
  /** Request body complete → answer written: the webhook's own work (parse, validate or convert, answer). */
  ownMs: number;
  code: number;
  /** Request body size (Content-Length; the API server always sends it). */
  bytes: number;
}

export interface ChildStats {
  type: 'stats';
  served: Served[];
  /** Connections (TLS) that carried their first request since the reset: how often the API server reconnected. */
  connections: number;
  /** Of `served`, the requests that came over HTTP/2. */
  h2Calls: number;
  /** Most requests being handled at once (request start → response finished). */
  maxInFlight: number;
  /** Objects converted per ConversionReview request (toHub/fromHub calls per request context). */
  batchSizes: number[];
  /** process.cpuUsage() since the reset, ms (user + system, all threads). */
  cpuMs: number;
  /** Run-queue wait of the JavaScript thread since the reset, ms. */
  runQueueMs: number;
  /** Event-loop delay since the reset, ms: p50, p99, max. */
  loopDelay: { p50: number; p99: number; max: number };
  /** The library's own controller_runtime_webhook_latency_seconds, per path: count and sum (s) since the start. */
  libraryLatency: Record<string, { count: number; sum: number }>;
}

export type ParentMessage = { type: 'reset' } | { type: 'collect' } | { type: 'converted' } | { type: 'stop' };
export type ChildMessage = { type: 'ready'; port: number; caBundle: string } | { type: 'reset' } | { type: 'converted'; objects: number } | ChildStats;

function send(msg: ChildMessage): void {
  process.send?.(msg);
}

async function main(): Promise<void> {
  if (!process.send) throw new Error('bench/webhook/server-child.ts is forked by bench/webhook.ts (needs an IPC channel)');
  const registry = new Registry();
  const { cert, key } = await selfSignedCertificate({ commonName: 'webhook-bench', ips: ['127.0.0.1'] });
  const http2 = process.argv.includes('--http2');
  const server = new WebhookServer({
    bindAddress: '127.0.0.1:0', registry, http2,
    tls: { start: () => Promise.resolve({ cert: Buffer.from(cert), key: Buffer.from(key) }) },
  });

  let served: Served[] = [];
  let batches = new Map<HandlerContext, number>();
  const count = (ctx: HandlerContext): void => void batches.set(ctx, (batches.get(ctx) ?? 0) + 1);

  const check = (n: NetworkV2): ValidationResult => {
    const r = validateNetwork(n);
    return r.ok ? undefined : denied(r.message);
  };
  new WebhookBuilder<NetworkV2>(server, { group: 'samplecrd.k8s.io', version: 'v2', kind: 'Network' })
    .withValidator({ validateCreate: check, validateUpdate: (_old, n) => check(n) })
    .withConversion({
      hub: 'v2',
      spokes: {
        v1: {
          toHub: (o: KubeObject, ctx) => {
            count(ctx);
            return toHub(o);
          },
          fromHub: (h: KubeObject, ctx) => {
            count(ctx);
            return fromHub(h);
          },
        },
      },
    })
    .complete();

  const started = new WeakMap<IncomingMessage, number>();
  const bodyEnd = new WeakMap<IncomingMessage, number>();
  const sockets = new WeakSet<object>();
  let connections = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  diagnosticsChannel.subscribe('http.server.request.start', (m) => {
    const { request } = m as { request: IncomingMessage };
    started.set(request, performance.now());
    // An 'end' listener does not start the stream flowing; this one runs before the server's own (added later).
    request.once('end', () => bodyEnd.set(request, performance.now()));
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    if (!sockets.has(request.socket)) {
      sockets.add(request.socket);
      connections++;
    }
  });
  diagnosticsChannel.subscribe('http.server.response.finish', (m) => {
    const { request, response } = m as { request: IncomingMessage; response: ServerResponse };
    const t0 = started.get(request);
    if (t0 === undefined) return;
    inFlight--;
    const t1 = performance.now();
    served.push({
      path: (request.url ?? '').split('?')[0] ?? '', ms: t1 - t0, ownMs: t1 - (bodyEnd.get(request) ?? t0), code: response.statusCode,
      bytes: Number(request.headers['content-length'] ?? 0),
    });
  });

  let h2Calls = 0;
  diagnosticsChannel.subscribe('http2.server.stream.start', (m) => {
    const { stream, headers } = m as { stream: ServerHttp2Stream; headers: IncomingHttpHeaders };
    const t0 = performance.now();
    let bodyAt: number | undefined;
    stream.once('end', () => (bodyAt = performance.now()));
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    if (!sockets.has(stream.session ?? stream)) {
      sockets.add(stream.session ?? stream);
      connections++;
    }
    const list = served;
    stream.once('finish', () => {
      inFlight--;
      if (list !== served) return; // reset meanwhile
      const t1 = performance.now();
      h2Calls++;
      served.push({
        path: (headers[':path'] ?? '').split('?')[0] ?? '', ms: t1 - t0, ownMs: t1 - (bodyAt ?? t0),
        code: Number(stream.sentHeaders?.[':status'] ?? 0), bytes: Number(headers['content-length'] ?? 0),
      });
    });
  });

  const loop = monitorEventLoopDelay({ resolution: 20 });
  loop.enable();
  let cpu0 = process.cpuUsage();
  let rq0 = runQueueWaitMs();

  const ac = new AbortController();
  const running = server.start(ac.signal);
  const { port } = await server.listening;

  process.on('message', (msg: ParentMessage) => {
    if (msg.type === 'reset') {
      served = [];
      connections = 0;
      h2Calls = 0;
      maxInFlight = inFlight;
      batches = new Map();
      loop.reset();
      cpu0 = process.cpuUsage();
      rq0 = runQueueWaitMs();
      send({ type: 'reset' });
    } else if (msg.type === 'converted') {
      let objects = 0;
      for (const n of batches.values()) objects += n;
      send({ type: 'converted', objects });
    } else if (msg.type === 'collect') {
      void (async () => {
        const cpu = process.cpuUsage(cpu0);
        const { values } = await registry.getSingleMetric('controller_runtime_webhook_latency_seconds')!.get();
        const libraryLatency: ChildStats['libraryLatency'] = {};
        for (const v of values as { metricName?: string; labels: Record<string, string | number>; value: number }[]) {
          const path = String(v.labels['webhook']);
          const entry = (libraryLatency[path] ??= { count: 0, sum: 0 });
          if (v.metricName?.endsWith('_count')) entry.count = v.value;
          if (v.metricName?.endsWith('_sum')) entry.sum = v.value;
        }
        send({
          type: 'stats', served, connections, h2Calls, maxInFlight, batchSizes: [...batches.values()], cpuMs: (cpu.user + cpu.system) / 1000,
          runQueueMs: runQueueWaitMs() - rq0,
          loopDelay: { p50: loop.percentile(50) / 1e6, p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
          libraryLatency,
        });
      })();
    } else {
      ac.abort();
      void running.then(() => process.exit(0));
    }
  });
  // The parent died: do not outlive it.
  process.on('disconnect', () => {
    ac.abort();
    void running.finally(() => process.exit(0));
  });
  send({ type: 'ready', port, caBundle: Buffer.from(cert).toString('base64') });
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    process.stderr.write(`webhook child failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
