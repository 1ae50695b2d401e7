/**
 * Retrying "try again later" answers (retry.ts, rest.ts). The API server here is a FAKE (a plain node:http server
 * answering a scripted sequence): the only way to inject 429/5xx with exact Retry-After values deterministically.
 * test/typedclient.test.ts checks the real kube-apiserver's answer right after a CRD is established.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, test } from 'node:test';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Registry } from 'prom-client';
import { KubeConfig } from './kubeconfig.ts';
import { ApiError, RestClient, type RestClientOptions } from './rest.ts';
import { retryAfterSeconds, retryDelayMs, defaultRetryPolicy } from './retry.ts';

interface Answer { status: number; retryAfter?: string }
let script: Answer[] = [];
const seen: { method: string; url: string; at: number; body: string }[] = [];
let server: Server;
let base = '';

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', at: performance.now(), body });
      const a = script.shift() ?? { status: 200 };
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (a.retryAfter !== undefined) headers['retry-after'] = a.retryAfter;
      const payload = a.status < 300
        ? { ok: seen.length }
        : { kind: 'Status', status: 'Failure', reason: a.status === 429 ? 'TooManyRequests' : 'InternalError', message: `scripted ${a.status}` };
      res.writeHead(a.status, headers).end(JSON.stringify(payload));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  script = [];
  seen.length = 0;
});

function client(extra: Partial<RestClientOptions> = {}): { rest: RestClient; registry: Registry } {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: base }], users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const registry = new Registry();
  return { rest: new RestClient({ kubeConfig: kc, registry, ...extra }), registry };
}

async function metric(registry: Registry, name: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await registry.getSingleMetric(name)?.get())?.values ?? []) {
    out[Object.entries(v.labels).filter(([k]) => k !== 'host').map(([k, x]) => `${k}=${String(x)}`).sort().join(',')] = v.value;
  }
  return out;
}

test('retryDelayMs: client-go checkWait (429 or 5xx with integer Retry-After), writes only on 429, bounded', () => {
  const p = defaultRetryPolicy;
  assert.equal(retryDelayMs('GET', 429, { 'retry-after': '1' }, 0, p), 1000);
  assert.equal(retryDelayMs('GET', 503, { 'retry-after': '2' }, 0, p), 2000);
  assert.equal(retryDelayMs('GET', 500, { 'retry-after': '0' }, 0, p), 0);
  assert.equal(retryDelayMs('POST', 429, { 'retry-after': '1' }, 0, p), 1000, 'a 429 was not processed: any verb');
  for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    assert.equal(retryDelayMs(verb, 503, { 'retry-after': '1' }, 0, p), undefined, `${verb} 503 may have been applied`);
  }
  assert.equal(retryDelayMs('GET', 429, {}, 0, p), undefined, 'no Retry-After: no retry');
  assert.equal(retryDelayMs('GET', 409, { 'retry-after': '1' }, 0, p), undefined, '4xx other than 429');
  assert.equal(retryDelayMs('GET', 429, { 'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT' }, 0, p), undefined, 'HTTP-date form not read');
  assert.equal(retryDelayMs('GET', 429, { 'retry-after': '-1' }, 0, p), undefined);
  assert.equal(retryDelayMs('GET', 429, { 'retry-after': '3600' }, 0, p), p.maxDelayMs, 'capped');
  assert.equal(retryDelayMs('GET', 429, { 'retry-after': '1' }, 9, p), 1000);
  assert.equal(retryDelayMs('GET', 429, { 'retry-after': '1' }, 10, p), undefined, 'at most 10 retries');
  assert.equal(retryAfterSeconds({ 'retry-after': ' 7 ' }), 7);
});

test('a GET answered 429 Retry-After: 1 is retried after ~1 s and succeeds; both counters count it; the retry is logged at debug level', async () => {
  const lines: { level: number; msg: string; retry?: number; status?: number }[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write(chunk: Buffer, _enc, cb) { lines.push(JSON.parse(chunk.toString()) as typeof lines[number]); cb(); } }));
  const { rest, registry } = client({ log });
  script = [{ status: 429, retryAfter: '1' }];
  const got = await rest.json<{ ok: number }>('GET', '/apis/x/v1/foos');
  assert.deepEqual(got, { ok: 2 });
  assert.equal(seen.length, 2);
  const waited = seen[1]!.at - seen[0]!.at;
  assert.ok(waited >= 950 && waited < 3000, `waited ${waited.toFixed(0)} ms for Retry-After: 1`);
  assert.deepEqual(await metric(registry, 'rest_client_requests_total'), { 'code=200,method=GET': 1, 'code=429,method=GET': 1 });
  assert.deepEqual(await metric(registry, 'rest_client_request_retries_total'), { 'code=200,verb=GET': 1 });
  assert.deepEqual(lines.map((l) => [l.level, l.msg, l.status, l.retry]), [[20, 'server asked to retry (Retry-After)', 429, 1]]);
  await rest.close();
});

test('a POST is retried on 429 with the same body, but a 5xx on a POST is returned at once', async () => {
  const { rest } = client();
  script = [{ status: 429, retryAfter: '0' }];
  const created = await rest.json<{ ok: number }>('POST', '/api/v1/namespaces/a/configmaps', { body: { metadata: { name: 'x' } } });
  assert.deepEqual(created, { ok: 2 });
  assert.deepEqual(seen.map((s) => s.body), ['{"metadata":{"name":"x"}}', '{"metadata":{"name":"x"}}']);
  seen.length = 0;
  script = [{ status: 503, retryAfter: '0' }];
  await assert.rejects(rest.json('POST', '/api/v1/namespaces/a/configmaps', { body: {} }), (e: unknown) => e instanceof ApiError && e.status === 503);
  assert.equal(seen.length, 1);
  await rest.close();
});

test('5xx with Retry-After on a GET is retried; without Retry-After it is not', async () => {
  const { rest } = client();
  script = [{ status: 503, retryAfter: '0' }, { status: 500, retryAfter: '0' }];
  assert.deepEqual(await rest.json('GET', '/x'), { ok: 3 });
  seen.length = 0;
  script = [{ status: 503 }];
  await assert.rejects(rest.json('GET', '/x'), (e: unknown) => e instanceof ApiError && e.status === 503);
  assert.equal(seen.length, 1);
  await rest.close();
});

test('bounded: after maxRetries the last 429 is the answer (ApiError TooManyRequests); by default 10 retries of at most 10 s each', async () => {
  assert.deepEqual(defaultRetryPolicy, { maxRetries: 10, maxDelayMs: 10_000 }, 'docs/client.md states these');
  const { rest, registry } = client({ retry: { maxRetries: 3 } });
  script = Array.from({ length: 10 }, () => ({ status: 429, retryAfter: '0' }));
  await assert.rejects(rest.json('GET', '/x'), (e: unknown) => e instanceof ApiError && e.status === 429 && e.reason === 'TooManyRequests');
  assert.equal(seen.length, 4, 'first attempt + 3 retries');
  assert.deepEqual(await metric(registry, 'rest_client_request_retries_total'), { 'code=429,verb=GET': 3 });
  const off = client({ retry: { maxRetries: 0 } });
  seen.length = 0;
  await assert.rejects(off.rest.json('GET', '/x'));
  assert.equal(seen.length, 1, 'maxRetries 0: no retry');
  await rest.close();
  await off.rest.close();
});

test('the wait honours the caller\'s AbortSignal (GET and write): rejected at once, nothing more sent', async () => {
  const { rest, registry } = client();
  for (const verb of ['GET', 'POST'] as const) {
    seen.length = 0;
    script = [{ status: 429, retryAfter: '5' }];
    const ac = new AbortController();
    const started = performance.now();
    const p = rest.json(verb, '/x', { signal: ac.signal, body: verb === 'POST' ? {} : undefined });
    // Abort only once the 429 has been received (counted), i.e. in the Retry-After wait: aborting while the first
    // request is still in flight tests the request's own abort, not the wait's.
    while (!((await metric(registry, 'rest_client_requests_total'))[`code=429,method=${verb}`])) await new Promise((r) => setTimeout(r, 5));
    ac.abort(new Error('stop'));
    await assert.rejects(p, /stop/);
    assert.ok(performance.now() - started < 2000, `${verb}: did not wait out the 5 s`);
    assert.equal(seen.length, 1);
  }
  await rest.close();
});

test('a write retried on 429 is refused before its retry when the write gate closed during the wait', async () => {
  const gate = new AbortController();
  const { rest } = client({ writeGate: gate.signal });
  script = [{ status: 429, retryAfter: '1' }];
  const p = rest.json('POST', '/x', { body: {} });
  while (seen.length === 0) await new Promise((r) => setTimeout(r, 10));
  gate.abort(new Error('leadership lost'));
  await assert.rejects(p, /leadership lost/);
  assert.equal(seen.length, 1, 'the retry never went on the wire');
  await rest.close();
});
