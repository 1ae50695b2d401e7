import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from './kubeconfig.ts';
import { Registry } from 'prom-client';
import { RestClient } from './rest.ts';

/** A plain-HTTP stand-in for the API server: records requests; `delayMs` delays the answer to writes. */
async function server(opts: { delayMs?: number } = {}): Promise<{ url: string; seen: string[]; close: () => Promise<void> }> {
  const seen: string[] = [];
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url}`);
    const answer = (): void => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    if (opts.delayMs && req.method !== 'GET') setTimeout(answer, opts.delayMs);
    else answer();
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`, seen,
    close: () => new Promise<void>((resolve) => {
      srv.closeAllConnections();
      srv.close(() => resolve());
    }),
  };
}

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

test('writeGate: once it aborted, every non-GET request is refused before anything is sent; GETs still work', async (t) => {
  const s = await server();
  t.after(s.close);
  const gate = new AbortController();
  const rest = new RestClient({ kubeConfig: kubeConfig(s.url), registry: new Registry(), writeGate: gate.signal });
  await rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} });
  gate.abort(new Error('leadership lost'));
  for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    await assert.rejects(rest.json(verb, '/api/v1/namespaces/ns/configmaps/x', { body: {} }), /leadership lost/);
  }
  await rest.json('GET', '/api/v1/namespaces/ns/configmaps');
  assert.deepEqual(s.seen, ['POST /api/v1/namespaces/ns/configmaps', 'GET /api/v1/namespaces/ns/configmaps']);
});

test('a write already sent is not cut by its signal or the gate (it runs to its answer); the next one is refused', async (t) => {
  const s = await server({ delayMs: 300 });
  t.after(s.close);
  const gate = new AbortController();
  const caller = new AbortController();
  const rest = new RestClient({ kubeConfig: kubeConfig(s.url), registry: new Registry(), writeGate: gate.signal });
  const pending = rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {}, signal: caller.signal });
  while (s.seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  caller.abort(new Error('shutting down'));
  gate.abort(new Error('leadership lost'));
  assert.deepEqual(await pending, {});
  await assert.rejects(rest.json('POST', '/api/v1/namespaces/ns/configmaps', { body: {} }), /leadership lost/);
  await assert.rejects(rest.json('PATCH', '/x', { body: {}, signal: caller.signal }), /shutting down|leadership lost/);
  assert.equal(s.seen.length, 1);
});
