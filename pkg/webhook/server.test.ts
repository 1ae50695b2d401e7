/**
 * WebhookServer over real HTTPS on loopback: reviews answered (allowed, denied, warnings, JSON patch, conversion),
 * and every bad-input answer (400, 404, 405, 413, slow clients cut, a throwing handler → 500, a slow one → 504),
 * with the metrics and log lines they leave.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { connect as h2connect, constants as h2constants, type ClientHttp2Session } from 'node:http2';
import { Agent, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterEach, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../apimachinery/meta.ts';
import { captureLogs, type LogLine } from '../log/capture.ts';
import type { TlsPair, TlsSource } from '../manager/httpserver.ts';
import { selfSignedCertificate } from '../manager/selfsigned.ts';
import { FakeClock } from '../util/clock.ts';
import { denied, type AdmissionReview } from './admission.ts';
import { WebhookBuilder } from './builder.ts';
import type { ConversionReview } from './conversion.ts';
import type { JsonPatchOperation } from './jsonpatch.ts';
import {
  defaultMaxRequestBytes, WebhookServer, type WebhookServerOptions,
} from './server.ts';

interface Widget extends KubeObject {
  spec: { replicas?: number; tier?: string; count?: number };
}

let pair: TlsPair;
before(async () => {
  const { cert, key } = await selfSignedCertificate({ commonName: 'webhook-test', ips: ['127.0.0.1'] });
  pair = { cert: Buffer.from(cert), key: Buffer.from(key) };
});
const staticTls = (): TlsSource => ({ start: () => Promise.resolve(pair) });

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

interface Running {
  server: WebhookServer;
  port: number;
  registry: Registry;
  lines: LogLine[];
}

async function serve(setup: (s: WebhookServer) => void, opts: WebhookServerOptions = {}): Promise<Running> {
  const registry = new Registry();
  const { logger, lines } = captureLogs();
  const server = new WebhookServer({ bindAddress: '127.0.0.1:0', tls: staticTls(), registry, logger, ...opts });
  setup(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  const { port } = await server.listening;
  return { server, port, registry, lines };
}

interface Reply {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

function post(port: number, path: string, body: string | Buffer, headers: Record<string, string> = {}, method = 'POST'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      host: '127.0.0.1', port, path, method, ca: pair.cert, agent: false,
      headers: { 'content-type': 'application/json', ...headers },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Starts a chunked POST (or `headers.method`), writes `first` and never ends the body; resolves with the status and
 * the time until the server closed the connection.
 */
function streamForever(port: number, path: string, first: Buffer, headers: { 'content-type': string; method?: string } = { 'content-type': 'application/json' },
): Promise<{ status: number; closedAfterMs: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      host: '127.0.0.1', port, path, method: headers.method ?? 'POST', ca: pair.cert, agent: false,
      headers: { 'content-type': headers['content-type'], 'transfer-encoding': 'chunked' },
    }, (res) => {
      status = res.statusCode ?? 0;
      res.resume();
    });
    let status = 0;
    // The connection's close, not the response's end (which comes first whether or not the server closes).
    req.on('socket', (socket) => socket.on('close', () => resolve({ status, closedAfterMs: Date.now() - t0 })));
    req.on('error', (err) => {
      if (status === 0) reject(err); // a reset after the answer is the server closing, as wanted
    });
    req.write(first); // never ended
  });
}

function admissionReview(request: Record<string, unknown>, apiVersion = 'admission.k8s.io/v1'): string {
  return JSON.stringify({ apiVersion, kind: 'AdmissionReview', request: { uid: 'uid-1', ...request } });
}

const widget = (spec: Widget['spec'], apiVersion = 'example.com/v2'): Widget => ({
  apiVersion, kind: 'Widget', metadata: { name: 'w', namespace: 'default', annotations: { keep: 'x' } }, spec,
});
const gvk = { group: 'example.com', version: 'v2', kind: 'Widget' };

async function metricValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = registry.getSingleMetric(name);
  const { values } = await m!.get();
  return values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
}

describe('WebhookServer: reviews', () => {
  it('validator: allowed with warnings, denied by return and by throw (403 + message), per operation', async () => {
    const seen: string[] = [];
    const { port } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: (w, ctx) => {
        seen.push(`create ${ctx.request.uid}`);
        if ((w.spec.replicas ?? 0) > 10) return denied('replicas must be at most 10');
        return (w.spec.replicas ?? 0) === 0 ? ['replicas is 0: nothing will run'] : undefined;
      },
      validateUpdate: (oldW, newW) => {
        seen.push(`update ${oldW.spec.replicas} -> ${newW.spec.replicas}`);
        if (newW.spec.tier !== oldW.spec.tier) throw denied('tier is immutable', { code: 422, reason: 'Invalid' });
      },
      // validateDelete missing: DELETE is allowed.
    }).complete());
    const path = '/validate-example-com-v2-widget';

    const ok = await post(port, path, admissionReview({ operation: 'CREATE', object: widget({ replicas: 0 }) }));
    assert.equal(ok.status, 200);
    const okReview = JSON.parse(ok.body) as AdmissionReview;
    assert.equal(okReview.apiVersion, 'admission.k8s.io/v1');
    assert.equal(okReview.kind, 'AdmissionReview');
    assert.deepEqual(okReview.response, { uid: 'uid-1', allowed: true, warnings: ['replicas is 0: nothing will run'] });

    const no = JSON.parse((await post(port, path, admissionReview({ operation: 'CREATE', object: widget({ replicas: 11 }) }))).body) as AdmissionReview;
    assert.deepEqual(no.response, { uid: 'uid-1', allowed: false, status: { code: 403, reason: 'Forbidden', message: 'replicas must be at most 10' } });

    const upd = JSON.parse((await post(port, path, admissionReview({
      operation: 'UPDATE', object: widget({ replicas: 2, tier: 'gold' }), oldObject: widget({ replicas: 1, tier: 'silver' }),
    }))).body) as AdmissionReview;
    assert.deepEqual(upd.response, { uid: 'uid-1', allowed: false, status: { code: 422, reason: 'Invalid', message: 'tier is immutable' } });

    const del = JSON.parse((await post(port, path, admissionReview({ operation: 'DELETE', object: null, oldObject: widget({}) }))).body) as AdmissionReview;
    assert.deepEqual(del.response, { uid: 'uid-1', allowed: true });
    assert.deepEqual(seen, ['create uid-1', 'create uid-1', 'update 1 -> 2']);
  });

  it('defaulter: the answer is the JSON patch from the sent object to the result; unchanged → no patch; denial', async () => {
    const { port } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withDefaulter((w) => {
      if (w.spec.replicas === -1) throw denied('negative');
      if (w.spec.tier === 'fixed') return undefined; // nothing to default
      w.spec.tier ??= 'standard';
      w.metadata!.annotations = { 'example.com/defaulted': 'true' }; // replaces "keep": one remove, one add
      return w;
    }).complete());
    const path = '/mutate-example-com-v2-widget';
    const res = JSON.parse((await post(port, path, admissionReview({ operation: 'CREATE', object: widget({ replicas: 1 }) }))).body) as AdmissionReview;
    assert.equal(res.response?.allowed, true);
    assert.equal(res.response?.patchType, 'JSONPatch');
    const ops = JSON.parse(Buffer.from(res.response?.patch ?? '', 'base64').toString()) as JsonPatchOperation[];
    assert.deepEqual(ops, [
      { op: 'remove', path: '/metadata/annotations/keep' },
      { op: 'add', path: '/metadata/annotations/example.com~1defaulted', value: 'true' },
      { op: 'add', path: '/spec/tier', value: 'standard' },
    ]);
    const same = JSON.parse((await post(port, path, admissionReview({ operation: 'CREATE', object: widget({ tier: 'fixed' }) }))).body) as AdmissionReview;
    assert.deepEqual(same.response, { uid: 'uid-1', allowed: true });
    const neg = JSON.parse((await post(port, path, admissionReview({ operation: 'CREATE', object: widget({ replicas: -1 }) }))).body) as AdmissionReview;
    assert.deepEqual(neg.response?.status, { code: 403, reason: 'Forbidden', message: 'negative' });
    assert.equal(neg.response?.allowed, false);
  });

  it('conversion: v1 → v2 → v1 round trip through the hub, objects of several versions in one review, failures', async () => {
    const { port } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withConversion({
      hub: 'v2',
      spokes: {
        v1: {
          toHub: (o) => {
            const { count, ...rest } = (o as Widget).spec;
            if (count === 13) throw new Error('13 is unlucky');
            return { ...o, spec: { ...rest, replicas: count } } as Widget;
          },
          fromHub: (h) => {
            const { replicas, ...rest } = (h as Widget).spec;
            return { ...h, spec: { ...rest, count: replicas } } as Widget;
          },
        },
      },
    }).complete());
    const review = (desiredAPIVersion: string, objects: KubeObject[]): string =>
      JSON.stringify({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'c-1', desiredAPIVersion, objects } });
    const v1 = widget({ count: 3, tier: 'gold' }, 'example.com/v1');
    const toV2 = await post(port, '/convert', review('example.com/v2', [v1, widget({ replicas: 5 })]));
    assert.equal(toV2.status, 200);
    const r2 = JSON.parse(toV2.body) as ConversionReview;
    assert.equal(r2.kind, 'ConversionReview');
    assert.equal(r2.response?.uid, 'c-1');
    assert.deepEqual(r2.response?.result, { status: 'Success' });
    assert.deepEqual(r2.response?.convertedObjects, [widget({ replicas: 3, tier: 'gold' }), widget({ replicas: 5 })]);
    const back = JSON.parse((await post(port, '/convert', review('example.com/v1', r2.response?.convertedObjects ?? []))).body) as ConversionReview;
    assert.deepEqual(back.response?.convertedObjects, [v1, widget({ count: 5 }, 'example.com/v1')]);

    const unlucky = JSON.parse((await post(port, '/convert', review('example.com/v2', [widget({ count: 13 }, 'example.com/v1')]))).body) as ConversionReview;
    assert.deepEqual(unlucky.response, { uid: 'c-1', convertedObjects: [], result: { status: 'Failure', message: '13 is unlucky' } });
    const unknownVersion = JSON.parse((await post(port, '/convert', review('example.com/v3', [v1]))).body) as ConversionReview;
    assert.equal(unknownVersion.response?.result.status, 'Failure');
    assert.match(String((unknownVersion.response?.result as { message?: string }).message), /version "v3" is neither the hub \(v2\) nor a spoke/);
    const otherKind = JSON.parse((await post(port, '/convert', review('example.com/v2', [{ ...v1, kind: 'Gadget' }]))).body) as ConversionReview;
    assert.match(String((otherKind.response?.result as { message?: string }).message), /no conversion registered for Gadget/);
  });
});

describe('WebhookServer: bad input', () => {
  const validatorPath = '/validate-example-com-v2-widget';
  const withValidator = (s: WebhookServer): void => new WebhookBuilder<Widget>(s, gvk).withValidator({}).complete();

  it('400 with a reason: malformed JSON, wrong apiVersion or kind, no request/uid, empty body, not JSON content; 404, 405', async () => {
    const { port, registry } = await serve(withValidator);
    const cases: Array<[string | Buffer, RegExp, Record<string, string>?]> = [
      ['{"apiVersion": ', /malformed JSON/],
      [admissionReview({ operation: 'CREATE', object: widget({}) }, 'admission.k8s.io/v1beta1'), /expected apiVersion admission.k8s.io\/v1 kind AdmissionReview, got apiVersion "admission.k8s.io\/v1beta1"/],
      [JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'x' } }), /got apiVersion "admission.k8s.io\/v1" kind "ConversionReview"/],
      [JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), /has no request/],
      [JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }), /request has no uid/],
      ['[1]', /not a JSON object/],
      ['', /request body is empty/],
      [admissionReview({ operation: 'CREATE' }), /CREATE review without object/],
      ['{}', /expected application\/json/, { 'content-type': 'text/plain' }],
    ];
    for (const [body, reason, headers] of cases) {
      const r = await post(port, validatorPath, body, headers);
      assert.equal(r.status, 400, `${String(body)} → 400`);
      assert.match(r.body, reason);
    }
    assert.equal((await post(port, '/validate-other', '{}')).status, 404);
    const get = await post(port, validatorPath, '', {}, 'GET');
    assert.equal(get.status, 405);
    assert.equal(get.headers['allow'], 'POST');
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatorPath, code: '400' }), cases.length);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatorPath, code: '405' }), 1);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: '/validate-other', code: '404' }), undefined,
      'unregistered paths are not counted');
  });

  it('413 over the limit: from Content-Length before any body byte, and mid-stream without reading the rest', async () => {
    const { port, registry } = await serve(withValidator, { maxRequestBytes: 1024 });
    const big = await post(port, validatorPath, Buffer.alloc(2048, 0x20));
    assert.equal(big.status, 413);
    assert.match(big.body, /larger than 1024 bytes/);
    assert.equal(big.headers['connection'], 'close');

    // Chunked (no Content-Length): 1 KiB + 1 is sent, then the client keeps the request open, as a client that
    // would stream gigabytes. The server answers 413 at once and closes; it never waits for (or reads) the end.
    const reply = await streamForever(port, validatorPath, Buffer.alloc(1025, 0x20));
    assert.equal(reply.status, 413);
    assert.ok(reply.closedAfterMs < 5_000, `closed after ${reply.closedAfterMs} ms`);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatorPath, code: '413' }), 2);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_refused_total', { webhook: validatorPath, reason: 'body_too_large' }), 2);
  });

  it('a client still writing a large body when refused reads the answer (413, 429), not a broken pipe: the connection lingers after it', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered = false;
    const mutatePath = '/mutate-example-com-v2-widget';
    const { port } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: async (w) => {
        if (w.spec.tier !== 'hold') return;
        entered = true;
        await gate;
      },
    }).withDefaulter(() => undefined).complete(), { maxRequestBytes: 32 * 1024 * 1024, maxInFlightBytes: 32 * 1024 * 1024, maxRequestBytesByPath: { [validatorPath]: 1024 * 1024 }, maxRequestsInFlight: 1 });
    cleanups.push(() => release());
    // In another process, as kube-apiserver is: 16 MiB written as fast as the connection takes them, far more than the
    // socket buffers hold when the answer comes. Closed at once, the connection reset under 2 to 5 of 10 here.
    const bodies = (path: string, count: number, declared: boolean): Promise<Record<string, number>> => new Promise((resolve, reject) => {
      const script = `
        const https = require('node:https');
        const one = () => new Promise((resolve) => {
          const req = https.request({ host: '127.0.0.1', port: ${port}, path: '${path}', method: 'POST', ca: process.env.CA, agent: false,
            headers: { 'content-type': 'application/json', ...(${declared} ? { 'content-length': String(16 * 1024 * 1024) } : {}) } }, (res) => {
            res.resume();
            res.on('end', () => resolve(String(res.statusCode)));
            res.on('close', () => resolve(String(res.statusCode)));
          });
          req.on('error', (e) => resolve(e.code || e.message));
          req.end(Buffer.alloc(16 * 1024 * 1024, 0x20));
        });
        (async () => {
          const seen = {};
          for (let i = 0; i < ${count}; i++) { const r = await one(); seen[r] = (seen[r] || 0) + 1; }
          process.stdout.write(JSON.stringify(seen));
        })();`;
      const child = spawn(process.execPath, ['-e', script], { env: { CA: pair.cert.toString() }, stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
      child.on('error', reject);
      child.on('exit', () => resolve(JSON.parse(out || '{}') as Record<string, number>));
    });
    assert.deepEqual(await bodies(validatorPath, 6, true), { 413: 6 }, 'declared length over the limit');
    assert.deepEqual(await bodies(validatorPath, 2, false), { 413: 2 }, 'chunked, passing the limit');
    const held = post(port, validatorPath, review({ object: widget({ tier: 'hold' }) }));
    await until('a request holding the only slot', () => entered);
    assert.deepEqual(await bodies(mutatePath, 6, true), { 429: 6 }, 'refused for the slot (within the limit of its path)');
    release();
    assert.equal((await held).status, 200);
  });

  it('an answer given before the body was read (wrong content type, wrong method, unknown path) closes the connection', async () => {
    const { port } = await serve(withValidator);
    for (const [path, headers, status] of [
      [validatorPath, { 'content-type': 'text/plain' }, 400],
      [validatorPath, { 'content-type': 'application/json', method: 'PUT' }, 405],
      ['/nowhere', { 'content-type': 'application/json' }, 404],
    ] as const) {
      const reply = await streamForever(port, path, Buffer.alloc(100, 0x20), headers);
      assert.equal(reply.status, status);
      assert.ok(reply.closedAfterMs < 5_000, `${path} ${status}: closed after ${reply.closedAfterMs} ms`);
    }
  });

  it('a slow client cannot hold a connection: headers not finished, or a body never finished, are cut at the timeouts (the body: 408, counted)', async () => {
    const { port, registry } = await serve(withValidator, { headersTimeoutMs: 300, requestTimeoutMs: 600 });
    const hold = (data: string): Promise<{ closedAfterMs: number; received: string }> => new Promise((resolve, reject) => {
      const t0 = Date.now();
      let received = '';
      const socket = tlsConnect({ host: '127.0.0.1', port, ca: pair.cert }, () => socket.write(data));
      socket.setEncoding('utf8').on('data', (c: string) => (received += c));
      socket.on('close', () => resolve({ closedAfterMs: Date.now() - t0, received }));
      socket.on('error', reject);
    });
    const headersOnly = await hold(`POST ${validatorPath} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n`);
    assert.ok(headersOnly.closedAfterMs >= 250 && headersOnly.closedAfterMs < 3_000, `closed after ${headersOnly.closedAfterMs} ms`);
    assert.match(headersOnly.received, /^HTTP\/1.1 408/);
    const bodyUnfinished = await hold(`POST ${validatorPath} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`);
    assert.ok(bodyUnfinished.closedAfterMs >= 500 && bodyUnfinished.closedAfterMs < 3_000, `closed after ${bodyUnfinished.closedAfterMs} ms`);
    assert.match(bodyUnfinished.received, /^HTTP\/1.1 408 [^]*request body not complete within 600 ms/);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_refused_total', { webhook: validatorPath, reason: 'request_timeout' }), 1);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatorPath, code: '408' }), 1);
  });

  it('a TLS handshake never started is cut at the handshake timeout', async () => {
    const { port } = await serve(withValidator, { handshakeTimeoutMs: 300 });
    const { connect } = await import('node:net');
    const t0 = Date.now();
    const closedAfterMs = await new Promise<number>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port });
      s.on('close', () => resolve(Date.now() - t0));
      s.on('error', reject);
    });
    assert.ok(closedAfterMs >= 250 && closedAfterMs < 3_000, `closed after ${closedAfterMs} ms`);
  });

  it('a handler that throws → HTTP 500 (no review), logged once with the uid', async () => {
    const { port, registry, lines } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: (w) => {
        if (w.spec.replicas === 1) throw new TypeError('bug in the validator');
      },
    }).complete());
    const r = await post(port, validatorPath, admissionReview({ uid: 'uid-500', operation: 'CREATE', object: widget({ replicas: 1 }) }));
    assert.equal(r.status, 500);
    assert.match(r.body, /webhook handler failed \(request uid uid-500\)/);
    assert.doesNotMatch(r.body, /bug in the validator/, 'the error itself is not shown to API clients');
    const logged = lines.filter((l) => l.uid === 'uid-500');
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.equal(logged[0]?.level, 'error');
    assert.equal(logged[0]?.webhook, validatorPath);
    assert.match(JSON.stringify(logged[0]?.err), /bug in the validator/);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatorPath, code: '500' }), 1);
  });

  it('a handler past its timeout → HTTP 504 at the deadline, its signal aborted, logged once; its late failure is ignored', async () => {
    let signalReason: unknown;
    let finishLate!: () => void;
    const lateDone = new Promise<void>((r) => (finishLate = r));
    const { port, registry, lines } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: (_w, ctx) => new Promise((_resolve, reject) => {
        ctx.signal.addEventListener('abort', () => {
          signalReason = ctx.signal.reason;
          // Fails a little after the abort, as a handler that notices late would.
          setTimeout(() => {
            reject(new Error('late failure'));
            finishLate();
          }, 50);
        });
      }),
    }).complete(), { handlerTimeoutMs: 200 });
    const t0 = Date.now();
    const r = await post(port, validatorPath, admissionReview({ uid: 'uid-slow', operation: 'CREATE', object: widget({}) }));
    const ms = Date.now() - t0;
    assert.equal(r.status, 504);
    assert.match(r.body, /timed out after 200 ms \(request uid uid-slow\)/);
    assert.ok(ms >= 180 && ms < 3_000, `answered after ${ms} ms`);
    assert.equal((signalReason as Error).name, 'TimeoutError');
    await lateDone;
    await new Promise((r2) => setImmediate(r2));
    const logged = lines.filter((l) => l.uid === 'uid-slow');
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.match(logged[0]?.msg ?? '', /timed out/);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatorPath, code: '504' }), 1);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_in_flight', { webhook: validatorPath }), 0);
    const latency = (await registry.getSingleMetric('controller_runtime_webhook_latency_seconds')!.get()).values as Array<{ metricName?: string; value: number }>;
    assert.equal(latency.find((v) => v.metricName === 'controller_runtime_webhook_latency_seconds_count')?.value, 1);
  });
});

/** Polls `cond` (every 5 ms) until it holds; fails after 5 s with `what`. */
async function until(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!cond()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** `json` followed by spaces (valid JSON) to exactly `size` bytes. */
function padded(json: string, size: number): Buffer {
  const head = Buffer.from(json);
  assert.ok(head.length <= size, `${head.length} > ${size}`);
  return Buffer.concat([head, Buffer.alloc(size - head.length, 0x20)]);
}

/**
 * A POST whose body the test writes piece by piece — chunked, or with `contentLength` declared; `reply` resolves with
 * the answer, also one the server gives before the body ended (then the client's later writes may fail: ignored).
 */
function upload(port: number, path: string, contentLength?: number): { write(b: Buffer): void; end(b?: Buffer): void; reply: Promise<Reply> } {
  const framing: Record<string, string> = contentLength === undefined ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(contentLength) };
  let answered = false;
  let resolveReply!: (r: Reply) => void;
  let rejectReply!: (err: Error) => void;
  const reply = new Promise<Reply>((resolve, reject) => {
    resolveReply = resolve;
    rejectReply = reject;
  });
  const req = httpsRequest({
    host: '127.0.0.1', port, path, method: 'POST', ca: pair.cert, agent: false, headers: { 'content-type': 'application/json', ...framing },
  }, (res) => {
    answered = true;
    let text = '';
    res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolveReply({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
  });
  req.on('error', (err) => {
    if (!answered) rejectReply(err);
  });
  return { write: (b) => void req.write(b), end: (b) => void (b ? req.end(b) : req.end()), reply };
}

describe('WebhookServer: limits', () => {
  const holding = (server: WebhookServer): { requests: number; bytes: number } => {
    const { requests, bytes } = server.inFlight();
    return { requests, bytes };
  };
  const refused = (registry: Registry, webhook: string, reason: string): Promise<number | undefined> =>
    metricValue(registry, 'controller_runtime_webhook_refused_total', { webhook, reason });

  it('maxRequestsInFlight: a request beyond it is answered 429 with Retry-After at once (body unread, connection closed), counted; a freed slot serves the next', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered = 0;
    const { port, registry, server } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: async () => {
        entered++;
        await gate;
      },
    }).complete(), { maxRequestsInFlight: 2 });
    const bodies = [review({ uid: 'a' }), review({ uid: 'b' })];
    const held = bodies.map((b) => post(port, validatePath, b));
    await until('two requests in their handler', () => entered === 2);
    assert.deepEqual(holding(server), { requests: 2, bytes: Buffer.byteLength(bodies[0]!) + Buffer.byteLength(bodies[1]!) });

    const third = await post(port, validatePath, review({ uid: 'c' }));
    assert.equal(third.status, 429);
    assert.equal(third.headers['retry-after'], '1');
    assert.match(third.body, /2 requests in flight \(maxRequestsInFlight\)/);
    // A body that never ends is not waited for: answered and closed at once.
    const endless = await streamForever(port, validatePath, Buffer.alloc(100, 0x20));
    assert.equal(endless.status, 429);
    assert.ok(endless.closedAfterMs < 5_000, `closed after ${endless.closedAfterMs} ms`);
    assert.equal(entered, 2, 'no refused request reached the handler');

    release();
    for (const r of await Promise.all(held)) assert.equal(r.status, 200);
    assert.deepEqual(holding(server), { requests: 0, bytes: 0 });
    assert.equal((await post(port, validatePath, review({ uid: 'd' }))).status, 200);
    assert.equal(await refused(registry, validatePath, 'max_requests_in_flight'), 2);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatePath, code: '429' }), 2);
  });

  it('body limits per path: maxRequestBytesByPath overrides maxRequestBytes; by default every path, /convert too, takes defaultMaxRequestBytes', async () => {
    const mutatePath = '/mutate-example-com-v2-widget';
    const both = (s: WebhookServer): void => new WebhookBuilder<Widget>(s, gvk).withValidator({}).withDefaulter(() => undefined).complete();
    const { port, registry } = await serve(both, { maxRequestBytes: 1024, maxRequestBytesByPath: { [validatePath]: 4096 } });
    assert.equal((await post(port, validatePath, padded(review(), 4096))).status, 200, 'its own limit');
    const over = await post(port, validatePath, padded(review(), 4097));
    assert.equal(over.status, 413);
    assert.match(over.body, /larger than 4096 bytes/);
    assert.equal((await post(port, mutatePath, padded(review(), 1024))).status, 200);
    assert.equal((await post(port, mutatePath, padded(review(), 1025))).status, 413, 'the default limit');
    assert.equal(await refused(registry, validatePath, 'body_too_large'), 1);
    assert.equal(await refused(registry, mutatePath, 'body_too_large'), 1);

    // The defaults, with bodies of those sizes.
    const conv = (s: WebhookServer): void => {
      new WebhookBuilder<Widget>(s, gvk).withValidator({}).withConversion({ hub: 'v2', spokes: { v1: { toHub: (o) => o, fromHub: (o) => o } } }).complete();
    };
    const defaults = await serve(conv);
    const conversion = JSON.stringify({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'c', desiredAPIVersion: 'example.com/v2', objects: [widget({ count: 1 }, 'example.com/v1')] } });
    assert.equal((await post(defaults.port, '/convert', padded(conversion, defaultMaxRequestBytes))).status, 200);
    assert.equal((await post(defaults.port, '/convert', padded(conversion, defaultMaxRequestBytes + 1))).status, 413);
    assert.equal((await post(defaults.port, validatePath, padded(review(), defaultMaxRequestBytes))).status, 200);
    assert.equal((await post(defaults.port, validatePath, padded(review(), defaultMaxRequestBytes + 1))).status, 413);
  });

  it('maxInFlightBytes: body bytes held at once are bounded — a declared Content-Length over what remains → 429 at once, a chunked body passing it → 429 mid-stream; bytes are returned at the answer', async () => {
    const { port, registry, server } = await serve(withValidatorFor, { maxRequestBytes: 4096, maxInFlightBytes: 5000 });
    const a = upload(port, validatePath);
    const aBody = padded(review({ uid: 'a' }), 3000);
    a.write(aBody.subarray(0, 2900));
    await until('2 900 bytes of A held', () => server.inFlight().bytes === 2900);

    const declared = await post(port, validatePath, padded(review({ uid: 'b' }), 2200));
    assert.equal(declared.status, 429);
    assert.equal(declared.headers['retry-after'], '1');
    assert.match(declared.body, /request bodies in flight would pass 5000 bytes \(maxInFlightBytes\)/);

    const c = upload(port, validatePath);
    c.write(Buffer.alloc(2200, 0x20));
    const cReply = await c.reply;
    assert.equal(cReply.status, 429);
    assert.match(cReply.body, /maxInFlightBytes/);
    await until('C\'s bytes returned', () => server.inFlight().bytes === 2900);

    a.end(aBody.subarray(2900));
    assert.equal((await a.reply).status, 200);
    assert.deepEqual(holding(server), { requests: 0, bytes: 0 });
    assert.equal((await post(port, validatePath, padded(review({ uid: 'b' }), 2200))).status, 200, 'the same request fits now');
    assert.equal(await refused(registry, validatePath, 'max_in_flight_bytes'), 2);
  });

  it('maxConnections: a connection beyond it is closed at accept (before TLS), counted with webhook=""; once one closes, a new one is served', async () => {
    const { port, registry, server } = await serve(withValidatorFor, { maxConnections: 2 });
    const open = (): Promise<TLSSocket> => new Promise((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port, ca: pair.cert }, () => resolve(socket));
      socket.on('error', reject);
      socket.on('close', () => reject(new Error('closed before the TLS handshake')));
    });
    const first = await open();
    const second = await open();
    cleanups.push(() => {
      second.destroy();
    });
    await assert.rejects(open(), /before the TLS handshake|ECONNRESET|socket disconnected/);
    assert.equal(await refused(registry, '', 'max_connections'), 1);
    first.destroy();
    await until('the server saw the connection close', () => server.inFlight().connections === 1);
    assert.equal((await post(port, validatePath, review())).status, 200);
  });

  it('option values out of range are refused: counts must be positive integers, maxInFlightBytes at least every body limit, path keys absolute', () => {
    const mk = (o: WebhookServerOptions): WebhookServer => new WebhookServer({ tls: staticTls(), registry: new Registry(), ...o });
    assert.throws(() => mk({ maxRequestsInFlight: 0 }), /maxRequestsInFlight must be a positive integer, got 0/);
    assert.throws(() => mk({ maxConnections: 1.5 }), /maxConnections must be a positive integer, got 1.5/);
    assert.throws(() => mk({ maxInFlightBytes: -1 }), /maxInFlightBytes must be a positive integer/);
    assert.throws(() => mk({ maxRequestBytes: 2048, maxInFlightBytes: 1024 }), /maxInFlightBytes \(1024\) must be at least the largest body limit \(maxRequestBytes 2048\)/);
    assert.throws(() => mk({ maxInFlightBytes: 8 * 1024 * 1024, maxRequestBytesByPath: { '/convert': 16 * 1024 * 1024 } }),
      /must be at least the largest body limit \(\/convert 16777216\)/);
    mk({ maxInFlightBytes: 4096 }); // the default limit (7 MiB) is lowered to it
    assert.throws(() => mk({ maxRequestBytesByPath: { convert: 10 } }), /maxRequestBytesByPath: path "convert" must start with "\/"/);
    assert.throws(() => mk({ maxRequestBytesByPath: { '/convert': 0 } }), /maxRequestBytesByPath\["\/convert"\] must be a positive integer, got 0/);
  });
});

describe('WebhookServer: lifecycle and certificates', () => {
  it('ready() fails before serving and after stop; passes while serving', async () => {
    const server = new WebhookServer({ bindAddress: '127.0.0.1:0', tls: staticTls(), registry: new Registry() });
    assert.throws(() => server.ready(), /not serving/);
    const ac = new AbortController();
    const done = server.start(ac.signal);
    await server.listening;
    server.ready();
    ac.abort();
    await done;
    assert.throws(() => server.ready(), /not serving/);
  });

  it('shutdownDelayMs: after the signal it still answers (each answer closing its connection, an idle pooled one too — not cut under its caller; ready() failing), then the port closes', async () => {
    const { clock, server, ac, done, port } = await drainingServer(5_000);
    const review = admissionReview({ operation: 'CREATE', object: widget({}) });
    // A caller's pooled keep-alive connection, idle when the signal comes (an API server's connection pool).
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => agent.destroy());
    const pooledCall = (): Promise<{ connection: string | undefined; socket: Socket }> => new Promise((resolve, reject) => {
      const req = httpsRequest({ host: '127.0.0.1', port, path: '/validate-example-com-v2-widget', method: 'POST', ca: pair.cert, agent, headers: { 'content-type': 'application/json' } }, (res) => {
        assert.equal(res.statusCode, 200);
        res.resume();
        res.once('end', () => resolve({ connection: res.headers.connection, socket: req.socket! }));
      });
      req.on('error', reject);
      req.end(review);
    });
    const first = await pooledCall();
    assert.notEqual(first.connection, 'close', 'kept alive while serving');
    // Until the socket is back in the agent's pool (idle).
    while (Object.keys(agent.freeSockets).length === 0) await new Promise((r) => setImmediate(r));
    let idleCut = false;
    first.socket.once('close', () => (idleCut = true));
    ac.abort();
    assert.throws(() => server.ready(), /draining/);
    // A caller's next request may be on that connection already: it is served, not cut, and told to re-dial.
    await new Promise((r) => setImmediate(r));
    assert.equal(idleCut, false, 'the idle pooled connection is not cut at the drain\'s start');
    const reused = await pooledCall();
    assert.equal(reused.socket, first.socket, 'the pooled connection carried the next request');
    assert.equal(reused.connection, 'close', 'answered with Connection: close: its caller closes it');
    const during = await post(port, '/validate-example-com-v2-widget', review);
    assert.equal(during.status, 200, 'still answered while draining');
    assert.equal(during.headers.connection, 'close', 'the caller re-dials (reaches another replica) for its next call');
    let stopped = false;
    void done.then(() => (stopped = true));
    assert.equal(stopped, false, 'not stopped before the delay');
    clock.step(5_000);
    await done;
    await assert.rejects(post(port, '/validate-example-com-v2-widget', review), /ECONNREFUSED/);
    assert.throws(() => server.ready(), /not serving/);
  });

  it('shutdownDelayMs: past the delay the port closes only after 1 s without a new connection, and at twice the delay at the latest', async () => {
    const { clock, ac, done, port } = await drainingServer(5_000);
    let stopped = false;
    void done.then(() => (stopped = true));
    const review = admissionReview({ operation: 'CREATE', object: widget({}) });
    const call = async (): Promise<void> => assert.equal((await post(port, '/validate-example-com-v2-widget', review)).status, 200);
    ac.abort();
    clock.step(4_500);
    await call(); // a caller still routed here half a second before the delay ends
    clock.step(500);
    await new Promise((r) => setImmediate(r));
    assert.equal(stopped, false, 'still open: a connection came 0.5 s ago');
    await call();
    // Callers keep coming every 0.5 s: the port stays open until twice the delay (10 s after the signal), then closes.
    for (let at = 5_500; at < 10_000; at += 500) {
      clock.step(500);
      await call();
      assert.equal(stopped, false, `still open ${at} ms after the signal`);
    }
    clock.step(500);
    await done;
    await assert.rejects(post(port, '/validate-example-com-v2-widget', review), /ECONNREFUSED/);
  });

  it('without shutdownDelayMs the port closes at the signal', async () => {
    const server = new WebhookServer({ bindAddress: '127.0.0.1:0', tls: staticTls(), registry: new Registry() });
    withValidatorFor(server);
    const ac = new AbortController();
    const done = server.start(ac.signal);
    const { port } = await server.listening;
    ac.abort();
    await done;
    await assert.rejects(post(port, '/validate-example-com-v2-widget', admissionReview({ operation: 'CREATE', object: widget({}) })), /ECONNREFUSED/);
  });

  it('certDir: serves tls.crt/tls.key from the directory; a missing certificate fails the start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-certs-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'tls.crt'), pair.cert);
    writeFileSync(join(dir, 'tls.key'), pair.key);
    const { port } = await serve(withValidatorFor, { tls: undefined, certDir: dir });
    const r = await post(port, '/validate-example-com-v2-widget', admissionReview({ operation: 'CREATE', object: widget({}) }));
    assert.equal(r.status, 200);

    const empty = new WebhookServer({ bindAddress: '127.0.0.1:0', certDir: join(dir, 'nothing'), registry: new Registry() });
    await assert.rejects(empty.start(new AbortController().signal), /certificate in .*nothing/);
    assert.throws(() => empty.ready(), /not serving/);
  });

  it('certDir: a renewed tls.crt/tls.key is presented to new connections without a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-certs-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'tls.crt'), pair.cert);
    writeFileSync(join(dir, 'tls.key'), pair.key);
    const { port } = await serve(withValidatorFor, { tls: undefined, certDir: dir });
    const serialSeen = (): Promise<string> => new Promise((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
        resolve(socket.getPeerX509Certificate()?.serialNumber ?? '');
        socket.end();
      });
      socket.on('error', reject);
    });
    const first = new X509Certificate(pair.cert).serialNumber;
    assert.equal(await serialSeen(), first);
    const renewed = await selfSignedCertificate({ commonName: 'webhook-test', ips: ['127.0.0.1'] });
    // Key first, then certificate: in between the pair does not match and the old one stays in use.
    writeFileSync(join(dir, 'tls.key'), renewed.key);
    writeFileSync(join(dir, 'tls.crt'), renewed.cert);
    const want = new X509Certificate(renewed.cert).serialNumber;
    const deadline = Date.now() + 10_000;
    let seen = first;
    while (seen !== want) {
      assert.ok(Date.now() < deadline, 'the renewed certificate was served within 10 s');
      await new Promise((r) => setTimeout(r, 50));
      seen = await serialSeen();
    }
  });

  it('option values that are not positive numbers are refused', () => {
    assert.throws(() => new WebhookServer({ tls: staticTls(), handlerTimeoutMs: 0 }), /handlerTimeoutMs must be a positive number, got 0/);
    assert.throws(() => new WebhookServer({ tls: staticTls(), maxRequestBytes: Number.NaN }), /maxRequestBytes must be a positive number/);
  });

  it('registering the same path twice, or a hub that is also a spoke, throws', () => {
    const s = new WebhookServer({ bindAddress: '127.0.0.1:0', tls: staticTls(), registry: new Registry() });
    new WebhookBuilder<Widget>(s, gvk).withValidator({}).complete();
    assert.throws(() => new WebhookBuilder<Widget>(s, gvk).withValidator({}).complete(), /already registered/);
    assert.throws(() => new WebhookBuilder<Widget>(s, gvk).complete(), /needs withDefaulter, withValidator or withConversion/);
    const conv = { toHub: (o: KubeObject) => o, fromHub: (o: KubeObject) => o };
    assert.throws(() => new WebhookBuilder<Widget>(s, gvk).withConversion({ hub: 'v2', spokes: { v2: conv } }).complete(), /cannot also be a spoke/);
    assert.deepEqual(s.paths(), ['/validate-example-com-v2-widget']);
  });
});

/** A started server with a validator, `shutdownDelayMs` and a FakeClock (the drain's timers), on a free port. */
async function drainingServer(shutdownDelayMs: number, opts: WebhookServerOptions = {}, setup: (s: WebhookServer) => void = withValidatorFor,
): Promise<{ clock: FakeClock; server: WebhookServer; ac: AbortController; done: Promise<void>; port: number }> {
  const clock = new FakeClock();
  const server = new WebhookServer({ bindAddress: '127.0.0.1:0', tls: staticTls(), registry: new Registry(), shutdownDelayMs, clock, ...opts });
  setup(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  const { port } = await server.listening;
  // A test that fails mid-drain must not leave the server waiting on the fake clock (the file would never end).
  cleanups.push(async () => {
    ac.abort();
    for (let i = 0; i < 10 && !(await Promise.race([done.then(() => true), Promise.resolve(false)])); i++) clock.step(2 * shutdownDelayMs);
  });
  return { clock, server, ac, done, port };
}

function withValidatorFor(s: WebhookServer): void {
  new WebhookBuilder<Widget>(s, gvk).withValidator({}).complete();
}

/** An HTTP/2 session to the server on `port` (TLS, ALPN h2), destroyed at the end of the test. */
async function h2session(port: number): Promise<ClientHttp2Session> {
  const session = h2connect(`https://127.0.0.1:${port}`, { ca: pair.cert });
  cleanups.push(() => {
    session.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  session.on('error', () => {}); // a GOAWAY'd or closed session may report a late error; the requests report theirs
  return session;
}

/** One request on an HTTP/2 session; resolves with the answer (status, body, headers). */
function h2post(session: ClientHttp2Session, path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json', ...headers });
    let status = 0;
    let responseHeaders: Reply['headers'] = {};
    let text = '';
    req.on('response', (h) => {
      status = Number(h[':status']);
      responseHeaders = h;
    });
    req.setEncoding('utf8').on('data', (c: string) => (text += c));
    req.on('end', () => resolve({ status, body: text, headers: responseHeaders }));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Opens a request on `session`, writes `first` and never ends the body; resolves with the status and the time until
 * the server closed the stream (its RST_STREAM or end), and whether the session is still open then.
 */
function h2streamForever(session: ClientHttp2Session, path: string, first: Buffer): Promise<{ status: number; closedAfterMs: number; body: string }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    let status = 0;
    let body = '';
    req.on('response', (h) => (status = Number(h[':status'])));
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('error', () => {}); // the server resetting the stream is what is tested; 'close' reports it
    req.on('close', () => resolve({ status, closedAfterMs: Date.now() - t0, body }));
    req.write(first); // never ended
  });
}

const review = (request: Record<string, unknown> = {}): string => admissionReview({ operation: 'CREATE', object: widget({}), ...request });
const validatePath = '/validate-example-com-v2-widget';

describe('WebhookServer: HTTP/2 (http2: true)', () => {
  it('h2 is negotiated by ALPN and reviews are answered, many at once on one connection; HTTP/1.1 clients are still answered', async () => {
    const { port, registry } = await serve(withValidatorFor, { http2: true });
    const session = await h2session(port);
    assert.equal(session.alpnProtocol, 'h2');
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => h2post(session, validatePath, review({ uid: `h2-${i}` }))));
    for (const [i, r] of replies.entries()) {
      assert.equal(r.status, 200);
      assert.deepEqual((JSON.parse(r.body) as AdmissionReview).response, { uid: `h2-${i}`, allowed: true });
    }
    const h1 = await post(port, validatePath, review({ uid: 'h1' }));
    assert.equal(h1.status, 200);
    assert.deepEqual((JSON.parse(h1.body) as AdmissionReview).response, { uid: 'h1', allowed: true });
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatePath, code: '200' }), 11);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_in_flight', { webhook: validatePath }), 0);
  });

  it('without http2 the server offers no h2 (ALPN): HTTP/1.1 only', async () => {
    const { port } = await serve(withValidatorFor);
    const alpn = await new Promise<string | false>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port, ca: pair.cert, ALPNProtocols: ['h2', 'http/1.1'] }, () => {
        resolve(socket.alpnProtocol ?? false);
        socket.end();
      });
      socket.on('error', reject);
    });
    assert.notEqual(alpn, 'h2');
  });

  it('bad input over h2: 413 from Content-Length and mid-stream, an unread body answered — only the stream is reset; a body never finished → 408 at requestTimeoutMs; the session keeps serving', async () => {
    const { port, registry } = await serve(withValidatorFor, { http2: true, maxRequestBytes: 1024 });
    const session = await h2session(port);
    const big = await h2post(session, validatePath, Buffer.alloc(2048, 0x20), { 'content-length': '2048' });
    assert.equal(big.status, 413);
    assert.match(big.body, /larger than 1024 bytes/);
    // The request timeout is 30 s here: a stream closed sooner was reset by the answer, not by the timeout.
    const streamed = await h2streamForever(session, validatePath, Buffer.alloc(1025, 0x20));
    assert.equal(streamed.status, 413);
    assert.match(streamed.body, /larger than 1024 bytes/);
    assert.ok(streamed.closedAfterMs < 5_000, `stream closed after ${streamed.closedAfterMs} ms`);
    const unread = await h2streamForever(session, '/nowhere', Buffer.alloc(100, 0x20));
    assert.equal(unread.status, 404);
    assert.ok(unread.closedAfterMs < 5_000, `stream closed after ${unread.closedAfterMs} ms`);
    assert.equal(session.closed || session.destroyed, false, 'the session survives its streams being reset');
    assert.equal((await h2post(session, validatePath, review())).status, 200);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_requests_total', { webhook: validatePath, code: '413' }), 2);

    const slowServer = await serve(withValidatorFor, { http2: true, requestTimeoutMs: 600, headersTimeoutMs: 300 });
    const slowSession = await h2session(slowServer.port);
    const slow = await h2streamForever(slowSession, validatePath, Buffer.from('{"a":'));
    assert.equal(slow.status, 408);
    assert.ok(slow.closedAfterMs >= 500 && slow.closedAfterMs < 3_000, `stream closed after ${slow.closedAfterMs} ms`);
    assert.equal((await h2post(slowSession, validatePath, review())).status, 200, 'the session survives');
  });

  it('maxRequestsInFlight over h2: a stream beyond it is answered 429 with Retry-After and only that stream is reset; the session serves the next', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered = 0;
    const { port, registry } = await serve((s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: async () => {
        entered++;
        await gate;
      },
    }).complete(), { http2: true, maxRequestsInFlight: 1 });
    const session = await h2session(port);
    const held = h2post(session, validatePath, review({ uid: 'held' }));
    await until('one request in its handler', () => entered === 1);
    const over = await h2streamForever(session, validatePath, Buffer.alloc(100, 0x20));
    assert.equal(over.status, 429);
    assert.match(over.body, /1 requests in flight \(maxRequestsInFlight\)/);
    release();
    assert.equal((await held).status, 200);
    assert.equal(session.closed || session.destroyed, false);
    assert.equal((await h2post(session, validatePath, review())).status, 200);
    assert.equal(await metricValue(registry, 'controller_runtime_webhook_refused_total', { webhook: validatePath, reason: 'max_requests_in_flight' }), 1);
  });

  it('a renewed certificate: open sessions get GOAWAY, a new session gets the new certificate (and h2)', async () => {
    let update!: (p: TlsPair) => void;
    const rotating: TlsSource = {
      start: (_signal, onUpdate) => {
        update = onUpdate;
        return Promise.resolve(pair);
      },
    };
    const { port } = await serve(withValidatorFor, { http2: true, tls: rotating });
    const old = await h2session(port);
    assert.equal((old.socket as TLSSocket).getPeerX509Certificate()?.serialNumber, new X509Certificate(pair.cert).serialNumber);
    assert.equal((await h2post(old, validatePath, review())).status, 200);
    const renewed = await selfSignedCertificate({ commonName: 'webhook-test', ips: ['127.0.0.1'] });
    const goaway = once(old, 'goaway');
    update({ cert: Buffer.from(renewed.cert), key: Buffer.from(renewed.key) });
    const [code] = await goaway as [number];
    assert.equal(code, h2constants.NGHTTP2_NO_ERROR);
    const fresh = h2connect(`https://127.0.0.1:${port}`, { ca: Buffer.from(renewed.cert) });
    cleanups.push(() => {
      fresh.destroy();
    });
    await once(fresh, 'connect');
    assert.equal(fresh.alpnProtocol, 'h2');
    assert.equal((fresh.socket as TLSSocket).getPeerX509Certificate()?.serialNumber, new X509Certificate(renewed.cert).serialNumber);
    assert.equal((await h2post(fresh, validatePath, review())).status, 200);
  });

  it('shutdownDelayMs: at the signal open sessions get GOAWAY and their in-flight request completes; new connections are answered (then GOAWAY) until the port closes', async () => {
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { clock, server, ac, done, port } = await drainingServer(5_000, { http2: true }, (s) => new WebhookBuilder<Widget>(s, gvk).withValidator({
      validateCreate: async (w) => {
        if (w.spec.tier !== 'slow') return;
        entered();
        await gate;
      },
    }).complete());
    const pooled = await h2session(port);
    const idle = await h2session(port);
    assert.equal((await h2post(idle, validatePath, review())).status, 200);
    const inflight = h2post(pooled, validatePath, review({ uid: 'in-flight', object: widget({ tier: 'slow' }) }));
    await inHandler;
    const goaways = [once(pooled, 'goaway'), once(idle, 'goaway')];
    ac.abort();
    for (const [code] of await Promise.all(goaways) as [number][]) assert.equal(code, h2constants.NGHTTP2_NO_ERROR);
    assert.throws(() => server.ready(), /draining/);
    release();
    const answered = await inflight;
    assert.equal(answered.status, 200, 'the request in flight at the GOAWAY is answered');
    assert.deepEqual((JSON.parse(answered.body) as AdmissionReview).response, { uid: 'in-flight', allowed: true });

    // A caller still routed here (a new connection) is answered, and told to go elsewhere for its next call.
    const late = await h2session(port);
    const lateGoaway = once(late, 'goaway');
    assert.equal((await h2post(late, validatePath, review())).status, 200);
    await lateGoaway;
    const h1 = await post(port, validatePath, review());
    assert.equal(h1.status, 200);
    assert.equal(h1.headers.connection, 'close');
    let stopped = false;
    void done.then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(stopped, false, 'not stopped before the delay');
    clock.step(5_000);
    await done;
    await assert.rejects(h2session(port), /ECONNREFUSED/);
    assert.throws(() => server.ready(), /not serving/);
  });

  it('an http2 value that is not a boolean is refused', () => {
    assert.throws(() => new WebhookServer({ tls: staticTls(), http2: 'yes' as unknown as boolean }), /http2 must be a boolean/);
  });
});
