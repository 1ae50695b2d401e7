/**
 * Request building of the typed client, against a FAKE API server (a plain HTTP server that records each request and
 * answers what the test scripts): methods, paths, query parameters, content types and bodies, deterministically.
 * What the real kube-apiserver does with them is proven in test/typedclient.test.ts.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../apimachinery/meta.ts';
import { selectorFromSet } from '../apimachinery/labelselector.ts';
import { coreResources, type ResourceType } from '../apimachinery/resource.ts';
import { ignoreAlreadyExists, ignoreNotFound } from './ignore.ts';
import { KubeConfig } from './kubeconfig.ts';
import { ApiError, RestClient } from './rest.ts';

interface ConfigMap extends KubeObject { data?: Record<string, string> }
interface Seen { method: string; path: string; query: Record<string, string>; contentType: string | undefined; body: unknown }

const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };

let server: Server;
let base = '';
let seen: Seen[] = [];
/** The scripted answer: status and JSON body for a request (default: 200 echoing the request). */
let answer: (req: Seen) => { status: number; body: unknown } = (req) => ({ status: 200, body: { echo: req } });

before(async () => {
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const s: Seen = {
        method: req.method ?? '', path: url.pathname, query: Object.fromEntries(url.searchParams),
        contentType: req.headers['content-type'], body: text ? JSON.parse(text) as unknown : undefined,
      };
      seen.push(s);
      const a = answer(s);
      res.writeHead(a.status, { 'content-type': 'application/json' }).end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  seen = [];
  answer = (req) => ({ status: 200, body: { echo: req } });
});

function rest(writeGate?: AbortSignal): RestClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: base }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new RestClient({ kubeConfig: kc, registry: new Registry(), ...(writeGate ? { writeGate } : {}) });
}

function last(): Seen {
  const s = seen.at(-1);
  assert.ok(s, 'a request was sent');
  return s;
}

test('get, list and create build the collection and object paths, in a namespace or across all', async () => {
  const c = rest();
  const cms = c.resource<ConfigMap>(coreResources.configMaps);
  await cms.namespace('ns1').get('a b', { resourceVersion: '0' });
  assert.deepEqual([last().method, last().path, last().query], ['GET', '/api/v1/namespaces/ns1/configmaps/a%20b', { resourceVersion: '0' }]);

  await cms.list({ labelSelector: selectorFromSet({ app: 'web' }), fieldSelector: 'metadata.name=x', limit: 10, continue: 'tok' });
  assert.deepEqual([last().path, last().query], ['/api/v1/configmaps', { labelSelector: 'app=web', fieldSelector: 'metadata.name=x', limit: '10', continue: 'tok' }]);
  await cms.namespace('ns1').list({ labelSelector: 'a in (b,c)' });
  assert.deepEqual([last().path, last().query], ['/api/v1/namespaces/ns1/configmaps', { labelSelector: 'a in (b,c)' }]);

  // create without .namespace(): the object's own namespace; with it: the client's.
  await cms.create({ metadata: { name: 'x', namespace: 'ns2' }, data: { k: 'v' } }, { dryRun: true, fieldManager: 'me', fieldValidation: 'Strict' });
  assert.deepEqual([last().method, last().path, last().query], ['POST', '/api/v1/namespaces/ns2/configmaps', { dryRun: 'All', fieldManager: 'me', fieldValidation: 'Strict' }]);
  assert.deepEqual(last().body, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'ns2' }, data: { k: 'v' } });
  assert.equal(last().contentType, 'application/json');

  await c.resource(foos).namespace('ns3').get('f');
  assert.equal(last().path, '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns3/foos/f');
  await c.resource(coreResources.namespaces).get('kube-system');
  assert.equal(last().path, '/api/v1/namespaces/kube-system');
  await c.close();
});

test('namespace misuse is an error before any request: cluster-scoped .namespace(), namespaced calls without one', async () => {
  const c = rest();
  assert.throws(() => c.resource(coreResources.namespaces).namespace('x'), /cluster-scoped/);
  const cms = c.resource<ConfigMap>(coreResources.configMaps);
  await assert.rejects(cms.get('a'), /namespaced: call \.namespace\(ns\) first/);
  await assert.rejects(cms.delete('a'), /namespaced/);
  await assert.rejects(cms.create({ metadata: { name: 'a' } }), /set metadata\.namespace/);
  await assert.rejects(cms.namespace('n').get(''), /a name is required/);
  await assert.rejects(cms.namespace('n').update({ metadata: {} }), /no metadata\.name/);
  assert.equal(seen.length, 0);
  await c.close();
});

test('update PUTs the whole object with its resourceVersion; patch kinds map to their content types', async () => {
  const c = rest();
  const cms = c.resource<ConfigMap>(coreResources.configMaps).namespace('ns');
  await cms.update({ metadata: { name: 'a', resourceVersion: '42' }, data: { k: 'v' } });
  assert.deepEqual([last().method, last().path, last().contentType], ['PUT', '/api/v1/namespaces/ns/configmaps/a', 'application/json']);
  assert.deepEqual(last().body, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', resourceVersion: '42' }, data: { k: 'v' } });

  await cms.patch('a', { merge: { data: { k: null, j: 'w' }, metadata: { resourceVersion: '42' } } }, { fieldManager: 'me' });
  assert.deepEqual([last().method, last().contentType, last().query], ['PATCH', 'application/merge-patch+json', { fieldManager: 'me' }]);
  assert.deepEqual(last().body, { data: { k: null, j: 'w' }, metadata: { resourceVersion: '42' } });

  await cms.patch('a', { json: [{ op: 'test', path: '/data/k', value: 'v' }, { op: 'remove', path: '/data/k' }] });
  assert.equal(last().contentType, 'application/json-patch+json');
  assert.deepEqual(last().body, [{ op: 'test', path: '/data/k', value: 'v' }, { op: 'remove', path: '/data/k' }]);

  await cms.patch('a', { strategic: { data: { k: 'v2' } } }, { dryRun: true });
  assert.deepEqual([last().contentType, last().query], ['application/strategic-merge-patch+json', { dryRun: 'All' }]);
  await c.close();
});

test('apply sends an apply patch with apiVersion/kind filled, fieldManager, force and dryRun; no fieldManager, no request', async () => {
  const c = rest();
  const cms = c.resource<ConfigMap>(coreResources.configMaps).namespace('ns');
  await cms.apply({ metadata: { name: 'a', labels: { x: 'y' } }, data: { k: 'v' } }, { fieldManager: 'mgr', force: true, dryRun: true });
  assert.deepEqual([last().method, last().path, last().contentType], ['PATCH', '/api/v1/namespaces/ns/configmaps/a', 'application/apply-patch+yaml']);
  assert.deepEqual(last().query, { fieldManager: 'mgr', force: 'true', dryRun: 'All' });
  assert.deepEqual(last().body, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', labels: { x: 'y' } }, data: { k: 'v' } });

  await c.resource(foos).apply({ metadata: { name: 'f', namespace: 'ns4' } }, { fieldManager: 'mgr' });
  assert.deepEqual([last().path, last().query], ['/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns4/foos/f', { fieldManager: 'mgr' }]);
  assert.deepEqual(last().body, { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f', namespace: 'ns4' } });

  const n = seen.length;
  await assert.rejects(cms.apply({ metadata: { name: 'a' } }, { fieldManager: '' }), /needs a fieldManager/);
  assert.equal(seen.length, n);
  await c.close();
});

test('delete sends DeleteOptions (preconditions, propagation, grace period, dryRun) as its body, or no body', async () => {
  const c = rest();
  const cms = c.resource<ConfigMap>(coreResources.configMaps).namespace('ns');
  await cms.delete('a');
  assert.deepEqual([last().method, last().path, last().body], ['DELETE', '/api/v1/namespaces/ns/configmaps/a', undefined]);
  await cms.delete('a', { preconditions: { uid: 'u1', resourceVersion: '7' }, propagationPolicy: 'Foreground', gracePeriodSeconds: 0, dryRun: true });
  assert.deepEqual(last().body, {
    apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: 'u1', resourceVersion: '7' }, propagationPolicy: 'Foreground',
    gracePeriodSeconds: 0, dryRun: ['All'],
  });
  await c.close();
});

test('status() and scale() address the subresources; a Scale update carries its name and kind', async () => {
  const c = rest();
  const foo = c.resource<KubeObject & { status?: { availableReplicas?: number } }>(foos).namespace('ns');
  await foo.status().get('f');
  assert.equal(last().path, '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/f/status');
  await foo.status().update({ metadata: { name: 'f', resourceVersion: '3' }, status: { availableReplicas: 1 } });
  assert.deepEqual([last().method, last().path], ['PUT', '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/f/status']);
  assert.deepEqual(last().body, { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f', resourceVersion: '3' }, status: { availableReplicas: 1 } });
  await foo.status().patch('f', { merge: { status: { availableReplicas: 2 } } });
  assert.deepEqual([last().method, last().contentType], ['PATCH', 'application/merge-patch+json']);
  await foo.status().apply({ metadata: { name: 'f' }, status: { availableReplicas: 3 } }, { fieldManager: 'm', force: true });
  assert.deepEqual([last().path, last().contentType, last().query], [
    '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/f/status', 'application/apply-patch+yaml', { fieldManager: 'm', force: 'true' }]);

  const deploys = c.resource(coreResources.deployments).namespace('ns');
  await deploys.scale().get('d');
  assert.deepEqual([last().method, last().path], ['GET', '/apis/apps/v1/namespaces/ns/deployments/d/scale']);
  await deploys.scale().update('d', { metadata: { resourceVersion: '9' }, spec: { replicas: 4 } });
  assert.deepEqual(last().body, { apiVersion: 'autoscaling/v1', kind: 'Scale', metadata: { resourceVersion: '9', name: 'd', namespace: 'ns' }, spec: { replicas: 4 } });
  await deploys.scale().patch('d', { merge: { spec: { replicas: 5 } } });
  assert.deepEqual([last().method, last().contentType, last().body], ['PATCH', 'application/merge-patch+json', { spec: { replicas: 5 } }]);
  await c.close();
});

test('listAll follows continue tokens page by page, and reads everything at once when a token expired (410)', async () => {
  const c = rest();
  const cms = c.resource<ConfigMap>(coreResources.configMaps).namespace('ns');
  const item = (name: string): ConfigMap => ({ metadata: { name } });
  answer = (req) => {
    if (req.query['continue'] === undefined) return { status: 200, body: { metadata: { continue: 'p2' }, items: [item('a'), item('b')] } };
    return { status: 200, body: { metadata: {}, items: [item('c')] } };
  };
  const all = await cms.listAll({ limit: 2, labelSelector: 'x=y' });
  assert.deepEqual(all.map((o) => o.metadata?.name), ['a', 'b', 'c']);
  assert.deepEqual(seen.map((s) => s.query), [{ labelSelector: 'x=y', limit: '2' }, { labelSelector: 'x=y', limit: '2', continue: 'p2' }]);

  seen = [];
  answer = (req) => {
    if (req.query['continue']) return { status: 410, body: { kind: 'Status', reason: 'Expired', message: 'too old' } };
    if (req.query['limit']) return { status: 200, body: { metadata: { continue: 'old' }, items: [item('a')] } };
    return { status: 200, body: { metadata: {}, items: [item('a'), item('b')] } };
  };
  assert.deepEqual((await cms.listAll()).map((o) => o.metadata?.name), ['a', 'b']);
  assert.deepEqual(seen.map((s) => s.query), [{ limit: '500' }, { limit: '500', continue: 'old' }, {}]);
  await c.close();
});

test('ignoreNotFound / ignoreAlreadyExists swallow exactly their error; other errors pass through', async () => {
  const c = rest();
  const cms = c.resource<ConfigMap>(coreResources.configMaps).namespace('ns');
  answer = (req) => req.path.endsWith('/gone') ? { status: 404, body: { kind: 'Status', reason: 'NotFound' } }
    : req.path.endsWith('/taken') || req.method === 'POST' ? { status: 409, body: { kind: 'Status', reason: 'AlreadyExists' } }
      : { status: 409, body: { kind: 'Status', reason: 'Conflict' } };
  assert.equal(await ignoreNotFound(cms.get('gone')), undefined);
  assert.equal(await ignoreAlreadyExists(cms.create({ metadata: { name: 'taken' } })), undefined);
  await assert.rejects(ignoreNotFound(cms.get('taken')), (err: unknown) => err instanceof ApiError && err.reason === 'AlreadyExists');
  await assert.rejects(ignoreAlreadyExists(cms.update({ metadata: { name: 'x' } })), (err: unknown) => err instanceof ApiError && err.reason === 'Conflict');
  answer = () => ({ status: 200, body: { metadata: { name: 'here' } } });
  assert.equal((await ignoreNotFound(cms.get('here')))?.metadata?.name, 'here');
  await c.close();
});

test('writes go through the write gate and the caller signal: refused before sending once aborted; reads still work', async () => {
  const gate = new AbortController();
  const c = rest(gate.signal);
  const cms = c.resource<ConfigMap>(coreResources.configMaps).namespace('ns');
  gate.abort(new Error('leadership lost'));
  await assert.rejects(cms.apply({ metadata: { name: 'a' } }, { fieldManager: 'm' }), /leadership lost/);
  await assert.rejects(cms.delete('a'), /leadership lost/);
  await assert.rejects(cms.status().patch('a', { merge: {} }), /leadership lost/);
  assert.equal(seen.length, 0, 'no write was sent');
  await cms.get('a');
  assert.equal(seen.length, 1);

  const ac = new AbortController();
  ac.abort(new Error('reconcile cancelled'));
  const ungated = rest();
  await assert.rejects(ungated.resource<ConfigMap>(coreResources.configMaps).namespace('ns').create({ metadata: { name: 'b' } }, { signal: ac.signal }), /reconcile cancelled/);
  await ungated.close();
  await assert.rejects(cms.get('a', { signal: ac.signal }), /reconcile cancelled|aborted/i);
  assert.equal(seen.length, 1);
  await c.close();
});
