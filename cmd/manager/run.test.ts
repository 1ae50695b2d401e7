/**
 * servedNetworkVersion (docs/network-v2.md, "Controller"): the binary's Network controller reconciles v2 when the API
 * server's discovery of samplecrd.k8s.io lists v2, else v1 — also when the group is not served (404) or discovery
 * fails (logged). Against a local HTTP server answering the discovery request as kube-apiserver does (the answers are
 * the fault injection; the client is the real RestClient).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Writable } from 'node:stream';
import pino from 'pino';
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { RestClient } from '../../pkg/client/rest.ts';
import { Registry } from 'prom-client';
import { servedNetworkVersion } from './run.ts';

let server: Server;
let answer: { status: number; body: unknown } = { status: 200, body: {} };
const paths: string[] = [];

before(async () => {
  server = createServer((req, res) => {
    paths.push(req.url ?? '');
    req.resume();
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
after(() => new Promise<void>((r) => server.close(() => r())));

function client(): RestClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }], users: [{ name: 'u', token: 'tok' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new RestClient({ kubeConfig: kc, registry: new Registry(), retry: { maxRetries: 0 } });
}

const group = (...versions: string[]): unknown => ({
  kind: 'APIGroup', apiVersion: 'v1', name: 'samplecrd.k8s.io', versions: versions.map((v) => ({ groupVersion: `samplecrd.k8s.io/${v}`, version: v })),
});

test('servedNetworkVersion: v2 when discovery lists it; v1 when only v1 is served, the group is not served (404) or discovery fails (a warning)', async () => {
  const lines: { level: number; msg: string }[] = [];
  const log = pino({ level: 'info' }, new Writable({ write(chunk: Buffer, _enc, cb) { lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string }); cb(); } }));
  const rest = client();
  after(() => rest.close());
  const cases: [{ status: number; body: unknown }, 'v1' | 'v2'][] = [
    [{ status: 200, body: group('v1', 'v2') }, 'v2'],
    [{ status: 200, body: group('v1') }, 'v1'],
    [{ status: 404, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 } }, 'v1'],
    [{ status: 500, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'boom', code: 500 } }, 'v1'],
  ];
  for (const [a, want] of cases) {
    answer = a;
    assert.equal(await servedNetworkVersion(rest, log, AbortSignal.timeout(10_000)), want, `answer ${a.status}`);
  }
  assert.deepEqual([...new Set(paths)], ['/apis/samplecrd.k8s.io']);
  assert.deepEqual(lines.filter((l) => l.level === 40).map((l) => l.msg), ['discovery of samplecrd.k8s.io failed; the Network controller reconciles v1'],
    'only the failed discovery warns, not the 404');
});
