import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { restClientFor } from '../../test/fakeapiserver/harness.ts';
import { ApiError } from '../client/rest.ts';
import { metadataListAccept, metadataWatchAccept, RestListWatcher, watchQuery } from './listwatch.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { coreResources, type ResourceType } from '../apimachinery/resource.ts';
import type { WatchEvent } from './watchdecoder.ts';

/** A real HTTP server; each test sets `handle` and reads what arrived in `requests`. */
let server: Server;
let base = '';
const requests: { url: URL; accept: string | undefined; closed: Promise<void> }[] = [];
let handle: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();

before(async () => {
  server = createServer((req, res) => {
    requests.push({ url: new URL(req.url ?? '/', 'http://x'), accept: req.headers.accept, closed: new Promise((r) => res.once('close', () => r())) });
    handle(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  return new Promise<void>((r) => server.close(() => r()));
});
beforeEach(() => {
  requests.length = 0;
});

const foos: ResourceType = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };
const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};
const signal = (): AbortSignal => new AbortController().signal;

async function collect(stream: AsyncIterable<WatchEvent<KubeObject>>): Promise<WatchEvent<KubeObject>[]> {
  const out: WatchEvent<KubeObject>[] = [];
  for await (const ev of stream) out.push(ev);
  return out;
}

describe('RestListWatcher.list', () => {
  it('GETs one page of the namespace collection with limit, continue and selectors; fills in apiVersion and kind', async () => {
    handle = (_req, res) => json(res, 200, {
      metadata: { resourceVersion: '42', continue: 'next-page' },
      items: [{ metadata: { name: 'a' } }, { apiVersion: 'other/v9', kind: 'Kept', metadata: { name: 'b' } }],
    });
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos, namespace: 'ns 1', labelSelector: 'app=web', fieldSelector: 'metadata.name!=x' });
    const page = await lw.list({ continueToken: 'tok', limit: 500, signal: signal() });
    const [req] = requests;
    assert.equal(req?.url.pathname, '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns%201/foos');
    assert.deepEqual(Object.fromEntries(req?.url.searchParams ?? []), {
      limit: '500', continue: 'tok', labelSelector: 'app=web', fieldSelector: 'metadata.name!=x',
    });
    assert.equal(page.resourceVersion, '42');
    assert.equal(page.continueToken, 'next-page');
    assert.deepEqual(page.items.map((i) => [i.apiVersion, i.kind, i.metadata?.name]), [
      ['samplecontroller.k8s.io/v1alpha1', 'Foo', 'a'],
      ['other/v9', 'Kept', 'b'],
    ]);
  });

  it('limit 0 is one unpaginated LIST; an empty continue is the last page; a missing items field is an empty list', async () => {
    handle = (_req, res) => json(res, 200, { metadata: { resourceVersion: '7', continue: '' } });
    const lw = new RestListWatcher({ client: restClientFor(base), resource: coreResources.configMaps });
    const page = await lw.list({ continueToken: undefined, limit: 0, signal: signal() });
    assert.equal(requests[0]?.url.pathname, '/api/v1/configmaps', 'no namespace: all namespaces');
    assert.equal(requests[0]?.url.search, '');
    assert.deepEqual(page, { items: [], continueToken: undefined, resourceVersion: '7' });
  });

  it('a cluster-scoped resource is listed cluster-wide even when a namespace is given', async () => {
    handle = (_req, res) => json(res, 200, { metadata: { resourceVersion: '1' }, items: [] });
    const lw = new RestListWatcher({ client: restClientFor(base), resource: coreResources.nodes, namespace: 'ignored' });
    await lw.list({ continueToken: undefined, limit: 10, signal: signal() });
    assert.equal(requests[0]?.url.pathname, '/api/v1/nodes');
  });

  it('an error answer rejects with ApiError carrying status and reason (the reflector backs off on it)', async () => {
    handle = (_req, res) => json(res, 410, { kind: 'Status', code: 410, reason: 'Expired', message: 'The provided continue parameter is too old' });
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos, namespace: 'n' });
    await assert.rejects(lw.list({ continueToken: 'old', limit: 500, signal: signal() }), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 410);
      assert.equal(err.reason, 'Expired');
      return true;
    });
  });

  it('a LIST page that does not answer within listTimeoutMs is aborted', async () => {
    handle = () => {}; // never answers
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos, listTimeoutMs: 50 });
    await assert.rejects(lw.list({ continueToken: undefined, limit: 1, signal: signal() }), (err: Error) => {
      assert.match(String((err.cause as Error | undefined)?.message), /request timed out after 50 ms/);
      return true;
    });
    await requests[0]?.closed;
  });
});

describe('RestListWatcher.watch', () => {
  it('resolves on 200 with the decoded events; reports every chunk and skips unknown event types', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"11"}}}\n');
      res.write('{"type":"FROBNICATED","object":{}}\n');
      res.end('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}\n');
    };
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos, namespace: 'n', labelSelector: 'x=y' });
    const chunks: number[] = [];
    const unknown: string[] = [];
    const stream = await lw.watch({
      resourceVersion: '10', timeoutSeconds: 300, sendInitialEvents: false, signal: signal(),
      onData: (n) => chunks.push(n), onUnknownEventType: (t) => unknown.push(t),
    });
    const events = await collect(stream);
    assert.deepEqual(events.map((e) => [e.type, e.object.metadata?.resourceVersion]), [['ADDED', '11'], ['BOOKMARK', '12']]);
    assert.deepEqual(unknown, ['FROBNICATED']);
    assert.ok(chunks.length > 0 && chunks.every((n) => n > 0));
    const q = Object.fromEntries(requests[0]?.url.searchParams ?? []);
    assert.deepEqual(q, { watch: 'true', allowWatchBookmarks: 'true', timeoutSeconds: '300', resourceVersion: '10', labelSelector: 'x=y' });
  });

  it('a non-200 answer rejects with ApiError (410 Gone → the reflector relists)', async () => {
    handle = (_req, res) => json(res, 410, { kind: 'Status', code: 410, reason: 'Gone', message: 'too old resource version: 1 (5)' });
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos });
    await assert.rejects(
      lw.watch({ resourceVersion: '1', timeoutSeconds: 60, sendInitialEvents: false, signal: signal() }),
      (err: unknown) => err instanceof ApiError && err.status === 410 && /too old resource version/.test(err.message),
    );
  });

  it('aborting the signal tears an open watch down: the iteration ends with an error and the server sees the close', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}\n'); // then silence
    };
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos });
    const ac = new AbortController();
    const stream = await lw.watch({ resourceVersion: '1', timeoutSeconds: 60, sendInitialEvents: false, signal: ac.signal });
    const iter = stream[Symbol.asyncIterator]();
    const first: IteratorResult<WatchEvent<KubeObject>> = await iter.next();
    assert.equal(first.done ? undefined : first.value.object.metadata?.name, 'a');
    const next = iter.next();
    ac.abort(new Error('reflector stopped'));
    await assert.rejects(next);
    await requests[0]?.closed;
  });
});

describe('RestListWatcher metadataOnly', () => {
  const full = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'a', labels: { x: '1' } }, spec: { replicas: 3 }, status: { availableReplicas: 1 } };

  it('asks for PartialObjectMetadata(List); a server that falls back to full objects still yields metadata only, under the resource\'s kind', async () => {
    handle = (_req, res) => json(res, 200, { metadata: { resourceVersion: '7' }, items: [full] });
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos, metadataOnly: true });
    const page = await lw.list({ continueToken: undefined, limit: 500, signal: signal() });
    assert.equal(requests[0]?.accept, metadataListAccept);
    assert.deepEqual(page.items, [{ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'a', labels: { x: '1' } } }]);
  });

  it('a PartialObjectMetadata answer gets the resource\'s apiVersion and kind; watch events too, ERROR and BOOKMARK pass untouched', async () => {
    const partial = { apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadata', metadata: { name: 'b' } };
    handle = (req, res) => {
      if (!req.url?.includes('watch=true')) return json(res, 200, { kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '7' }, items: [partial] });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end([
        { type: 'ADDED', object: partial },
        { type: 'MODIFIED', object: full },
        { type: 'BOOKMARK', object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '9' } } },
        { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', code: 410, reason: 'Expired' } },
      ].map((e) => JSON.stringify(e)).join('\n') + '\n');
    };
    const lw = new RestListWatcher({ client: restClientFor(base), resource: foos, metadataOnly: true });
    const page = await lw.list({ continueToken: undefined, limit: 500, signal: signal() });
    assert.deepEqual(page.items, [{ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'b' } }]);
    const events = await collect(await lw.watch({ resourceVersion: '7', timeoutSeconds: 60, sendInitialEvents: false, signal: signal() }));
    assert.equal(requests[1]?.accept, metadataWatchAccept);
    assert.deepEqual(events.map((e) => [e.type, e.object.kind, Object.keys(e.object).sort().join(',')]), [
      ['ADDED', 'Foo', 'apiVersion,kind,metadata'],
      ['MODIFIED', 'Foo', 'apiVersion,kind,metadata'],
      ['BOOKMARK', 'PartialObjectMetadata', 'apiVersion,kind,metadata'],
      ['ERROR', 'Status', 'apiVersion,code,kind,reason'],
    ]);
  });

  it('without metadataOnly the Accept header is plain JSON', async () => {
    handle = (_req, res) => json(res, 200, { metadata: { resourceVersion: '7' }, items: [full] });
    const page = await new RestListWatcher({ client: restClientFor(base), resource: foos }).list({ continueToken: undefined, limit: 500, signal: signal() });
    assert.equal(requests[0]?.accept, 'application/json');
    assert.deepEqual(page.items, [full]);
  });
});

describe('watchQuery', () => {
  it('a streaming list asks for the initial events from the most recent state (no resourceVersion)', () => {
    assert.deepEqual(watchQuery({ resourceVersion: '', timeoutSeconds: 400, sendInitialEvents: true }), {
      watch: 'true', allowWatchBookmarks: 'true', timeoutSeconds: 400, resourceVersion: undefined,
      sendInitialEvents: 'true', resourceVersionMatch: 'NotOlderThan', labelSelector: undefined, fieldSelector: undefined,
    });
  });

  it('a plain watch resumes from its resourceVersion; empty selectors are left out', () => {
    const q = watchQuery({ resourceVersion: '99', timeoutSeconds: 300, sendInitialEvents: false }, { labelSelector: '', fieldSelector: 'a=b' });
    assert.equal(q.resourceVersion, '99');
    assert.equal(q.sendInitialEvents, undefined);
    assert.equal(q.resourceVersionMatch, undefined);
    assert.equal(q.labelSelector, undefined);
    assert.equal(q.fieldSelector, 'a=b');
  });
});
