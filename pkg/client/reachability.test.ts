import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from './kubeconfig.ts';
import { isConnectionFailure, reachabilityOf, ServerReachability } from './reachability.ts';
import { ApiError, RestClient } from './rest.ts';

/** A plain-HTTP stand-in for the API server: 404 for /missing, 200 otherwise. */
let server: Server;
let base = '';
before(async () => {
  server = createServer((req, res) => {
    res.writeHead(req.url === '/missing' ? 404 : 200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

function client(url: string): RestClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: url }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return new RestClient({ kubeConfig: kc, registry: new Registry(), retry: { maxRetries: 0 } });
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('ServerReachability', () => {
  it('every answer of the server (a 404 too) notifies the subscribers of its transport, on a later microtask', async () => {
    const a = client(base);
    const b = client(base); // same kubeconfig settings: the same shared Transport, the same notifier
    try {
      assert.equal(a.reachability, b.reachability);
      let calls = 0;
      const unsubscribe = a.reachability.subscribe(() => calls++);
      await b.json('GET', '/ok');
      await assert.rejects(b.json('GET', '/missing'), (e) => e instanceof ApiError && e.status === 404);
      await flush();
      assert.equal(calls, 2);
      unsubscribe();
      await b.json('GET', '/ok');
      await flush();
      assert.equal(calls, 2, 'no call after unsubscribe');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a refused connection notifies nobody, and is a connection failure', async () => {
    const c = client(`http://127.0.0.1:${await closedPort()}`);
    try {
      let calls = 0;
      c.reachability.subscribe(() => calls++);
      const err = await c.json('GET', '/ok').then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof Error, 'the request failed');
      assert.equal(isConnectionFailure(err), true, String(err));
      await flush();
      assert.equal(calls, 0);
    } finally {
      await c.close();
    }
  });

  it('a listener that throws does not keep the others from being called', async () => {
    const r = new ServerReachability();
    const seen: string[] = [];
    r.subscribe(() => {
      throw new Error('boom');
    });
    r.subscribe(() => seen.push('second'));
    r.answered();
    await flush();
    assert.deepEqual(seen, ['second']);
  });

  it('one notification per burst of answers before the listeners ran', async () => {
    const r = new ServerReachability();
    let calls = 0;
    r.subscribe(() => calls++);
    r.answered();
    r.answered();
    r.answered();
    await flush();
    assert.equal(calls, 1);
  });

  it('reachabilityOf is scoped by transport: two transports, two notifiers', () => {
    const t1 = { cluster: { server: 'https://a' } } as never;
    const t2 = { cluster: { server: 'https://a' } } as never;
    assert.equal(reachabilityOf(t1), reachabilityOf(t1));
    assert.notEqual(reachabilityOf(t1), reachabilityOf(t2));
  });
});

describe('isConnectionFailure', () => {
  const sys = (code: string): Error => Object.assign(new Error(`connect ${code} 127.0.0.1:6443`), { code });
  it('no answer: refused, reset, timed out, HTTP/2 session errors, a cause chain', () => {
    for (const e of [sys('ECONNREFUSED'), sys('ECONNRESET'), sys('ETIMEDOUT'), sys('EPIPE'), sys('ERR_HTTP2_STREAM_ERROR'), sys('ERR_HTTP2_GOAWAY_SESSION')]) {
      assert.equal(isConnectionFailure(e), true, e.message);
    }
    assert.equal(isConnectionFailure(new DOMException('request timed out after 30000 ms', 'TimeoutError')), true);
    assert.equal(isConnectionFailure(new Error('fetch failed', { cause: sys('ECONNREFUSED') })), true);
  });
  it('an answer or a local failure is not: ApiError (403, 500), a malformed body, an abort, a credential plugin error', () => {
    assert.equal(isConnectionFailure(new ApiError(403, 'Forbidden', 'no', undefined)), false);
    assert.equal(isConnectionFailure(new ApiError(500, 'InternalError', 'etcd', undefined)), false);
    assert.equal(isConnectionFailure(new SyntaxError('Unexpected token')), false);
    assert.equal(isConnectionFailure(Object.assign(new Error('The operation was aborted'), { name: 'AbortError' })), false);
    assert.equal(isConnectionFailure(new Error('exec plugin failed: exit 1')), false);
    assert.equal(isConnectionFailure('ECONNREFUSED'), false);
  });
});
