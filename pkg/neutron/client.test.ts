/**
 * NeutronClient mechanics (timeouts, cancellation, pagination, query building, tag fallback, error decoding) against
 * a UNIT-TEST FAKE (fakeserver.ts) with canned Neutron-shaped responses. Real Neutron behaviour is covered by
 * test/neutron.test.ts.
 */
import { describe, it, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { NeutronClient } from './client.ts';
import {
  isRetryable, NeutronAuthError, NeutronBadRequestError, NeutronConflictError, NeutronError, NeutronForbiddenError, NeutronNotFoundError,
  NeutronUnavailableError,
} from './errors.ts';
import { FakeServer, reply, type FakeHandler } from './fakeserver.ts';
import { StaticAuth } from './keystone.ts';

let servers: FakeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function fake(handler: FakeHandler): Promise<{ server: FakeServer; client: NeutronClient }> {
  const server = await FakeServer.start(handler);
  servers.push(server);
  return { server, client: new NeutronClient({ auth: new StaticAuth(`${server.url}/v2.0/`), timeoutMs: 2_000 }) };
}

const net = (id: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ id, name: `n-${id}`, tags: [], subnets: [], ...extra });

describe('NeutronClient transport', () => {
  it('times out a request that gets no answer → retryable NeutronUnavailableError(Timeout)', async () => {
    const { client, server } = await fake(() => {}); // never answers
    // 1 s, not less: on 2 loaded cores connect + send alone took > 150 ms once (the deadline ran out before sending).
    await assert.rejects(client.getNetwork('x', { timeoutMs: 1_000 }), (e: Error) =>
      e instanceof NeutronUnavailableError && e.type === 'Timeout' && e.status === 0 && isRetryable(e) && e.message.includes('GET /v2.0/networks/x'));
    // The server may see the request's arrival a tick after the client gave up: poll (bounded) instead of reading once.
    for (const deadline = Date.now() + 30_000; server.requests.length === 0 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
    assert.equal(server.requests.length, 1, 'the request was sent (the deadline did not run out before it)');
  });

  it('the client default timeout applies when the call has none', async () => {
    const server = await FakeServer.start(() => {});
    servers.push(server);
    const client = new NeutronClient({ auth: new StaticAuth(server.url), timeoutMs: 100 });
    await assert.rejects(client.listNetworks(), (e: Error) => e instanceof NeutronUnavailableError && e.type === 'Timeout');
  });

  it('a caller abort rejects with the caller reason, not a NeutronError', async () => {
    const { client, server } = await fake(() => {});
    const ac = new AbortController();
    const p = client.getNetwork('x', { signal: ac.signal });
    await waitUntil(() => server.requests.length === 1);
    const reason = new Error('shutting down');
    ac.abort(reason);
    await assert.rejects(p, (e: unknown) => e === reason);
    const pre = new AbortController();
    pre.abort(new Error('already'));
    await assert.rejects(client.getNetwork('y', { signal: pre.signal }), /already/);
    assert.equal(server.requests.length, 1, 'an already-aborted call sends nothing');
  });

  it('connection refused → retryable NeutronUnavailableError(ConnectionError)', async () => {
    const port = await freePort();
    const client = new NeutronClient({ auth: new StaticAuth(`http://127.0.0.1:${port}`) });
    await assert.rejects(client.listNetworks(), (e: Error) =>
      e instanceof NeutronUnavailableError && e.type === 'ConnectionError' && /ECONNREFUSED/.test(e.message) && isRetryable(e));
  });

  it('decodes Neutron errors into typed errors', async () => {
    const { client } = await fake((req, res) => {
      if (req.method === 'DELETE') reply(res, 409, { NeutronError: { type: 'NetworkInUse', message: 'Unable to complete operation on network n1. There are one or more ports still in use on the network.', detail: '' } }, { 'x-openstack-request-id': 'req-abc' });
      else if (req.method === 'POST') reply(res, 400, { NeutronError: { type: 'InvalidInput', message: "Invalid input for cidr. Reason: 'x' is not a valid IP subnet.", detail: '' } });
      else if (req.method === 'PUT') reply(res, 503, 'Service Unavailable');
      else reply(res, 404, { NeutronError: { type: 'NetworkNotFound', message: 'Network n1 could not be found.', detail: '' } });
    });
    await assert.rejects(client.deleteNetwork('n1'), (e: Error) =>
      e instanceof NeutronConflictError && e.type === 'NetworkInUse' && e.status === 409 && e.requestId === 'req-abc' && !isRetryable(e));
    await assert.rejects(client.createSubnet({ network_id: 'n1', cidr: 'x' }), (e: Error) => e instanceof NeutronBadRequestError && e.type === 'InvalidInput');
    await assert.rejects(client.getNetwork('n1'), (e: Error) => e instanceof NeutronNotFoundError && e.type === 'NetworkNotFound');
    await assert.rejects(client.updateNetwork('n1', { name: 'x' }), (e: Error) => e instanceof NeutronUnavailableError && e.status === 503 && isRetryable(e));
  });

  it('a non-JSON success body is a retryable BadResponse', async () => {
    const { client } = await fake((_req, res) => reply(res, 200, '<html>proxy page</html>'));
    await assert.rejects(client.getNetwork('n1'), (e: Error) => e instanceof NeutronUnavailableError && e.type === 'BadResponse');
  });
});

describe('NeutronClient requests', () => {
  it('lists every page with limit/marker until a short page', async () => {
    const all = ['a', 'b', 'c', 'd', 'e'].map((id) => net(id));
    const { client, server } = await fake((req, res) => {
      const limit = Number(req.query.get('limit'));
      const marker = req.query.get('marker');
      const start = marker ? all.findIndex((n) => n['id'] === marker) + 1 : 0;
      const page = all.slice(start, start + limit);
      const links = page.length === limit ? [{ rel: 'next', href: `${server.url}/v2.0/networks?limit=${limit}&marker=${String(page.at(-1)?.['id'])}` }] : [];
      reply(res, 200, { networks: page, networks_links: links });
    });
    const got = await client.listNetworks({ name: 'x y', tags: ['t1', 't2'], tagsAny: ['u'] }, { pageSize: 2 });
    assert.deepEqual(got.map((n) => n.id), ['a', 'b', 'c', 'd', 'e']);
    assert.deepEqual(server.requests.map((r) => r.query.get('marker')), [null, 'b', 'd']);
    for (const r of server.requests) {
      assert.equal(r.path, '/v2.0/networks');
      assert.equal(r.query.get('name'), 'x y');
      assert.equal(r.query.get('tags'), 't1,t2');
      assert.equal(r.query.get('tags-any'), 'u');
      assert.equal(r.query.get('limit'), '2');
    }
  });

  it('stops when a full page has no next link', async () => {
    const { client, server } = await fake((_req, res) => reply(res, 200, { networks: [net('a'), net('b')] }));
    assert.equal((await client.listNetworks({}, { pageSize: 2 })).length, 2);
    assert.equal(server.requests.length, 1);
  });

  it('lists subnets by network_id', async () => {
    const { client, server } = await fake((_req, res) => reply(res, 200, { subnets: [{ id: 's1', network_id: 'n1' }] }));
    const subnets = await client.listSubnets({ networkId: 'n1' });
    assert.equal(subnets[0]?.id, 's1');
    assert.equal(server.requests[0]?.query.get('network_id'), 'n1');
  });

  it('rejects tags Neutron cannot store or that would change a filter, before sending', async () => {
    const { client, server } = await fake((_req, res) => reply(res, 200, { networks: [] }));
    await assert.rejects(client.listNetworks({ tags: ['a,b'] }), (e: Error) => e instanceof NeutronBadRequestError && e.type === 'InvalidTag');
    await assert.rejects(client.addNetworkTag('n1', 'a/b'), NeutronBadRequestError);
    await assert.rejects(client.addNetworkTag('n1', ''), NeutronBadRequestError);
    await assert.rejects(client.getNetwork(''), NeutronNotFoundError);
    assert.equal(server.requests.length, 0);
  });

  it('escapes ids and tags in paths', async () => {
    const { client, server } = await fake((_req, res) => reply(res, 201));
    await client.addNetworkTag('n 1?', 'k8s:ns=a b');
    assert.equal(server.requests[0]?.path, '/v2.0/networks/n%201%3F/tags/k8s%3Ans%3Da%20b');
  });

  it('sends If-Match for ifRevision; a stale revision (412) is a non-retryable NeutronError', async () => {
    const { client, server } = await fake((_req, res) => reply(res, 412, { NeutronError: { type: 'RevisionNumberConstraintFailed', message: 'Constrained to 1, but current revision is 2', detail: '' } }));
    await assert.rejects(client.updateSubnet('s1', { gateway_ip: '10.0.0.254' }, { ifRevision: 1 }), (e: Error) =>
      e instanceof NeutronError && e.status === 412 && !isRetryable(e));
    assert.equal(server.requests[0]?.headers['if-match'], 'revision_number=1');
    assert.deepEqual(JSON.parse(server.requests[0]?.body ?? ''), { subnet: { gateway_ip: '10.0.0.254' } });
  });

  it('derives ip_version from the cidr', async () => {
    const { client, server } = await fake((req, res) => reply(res, 201, { subnet: { id: 's', ...(JSON.parse(req.body) as { subnet: object }).subnet } }));
    await client.createSubnet({ network_id: 'n', cidr: '10.0.0.0/24' });
    await client.createSubnet({ network_id: 'n', cidr: 'fd00::/64', gateway_ip: null });
    const bodies = server.requests.map((r) => (JSON.parse(r.body) as { subnet: Record<string, unknown> }).subnet);
    assert.equal(bodies[0]?.['ip_version'], 4);
    assert.equal(bodies[1]?.['ip_version'], 6);
    assert.equal(bodies[1]?.['gateway_ip'], null);
  });

  it('sends extra headers (keystonecontext identity) on every request', async () => {
    const server = await FakeServer.start((_req, res) => reply(res, 200, { networks: [] }));
    servers.push(server);
    const client = new NeutronClient({ auth: new StaticAuth(server.url), headers: { 'X-User-Id': 'u1', 'X-Project-Id': 'p1', 'X-Roles': 'member' } });
    await client.listNetworks();
    assert.equal(server.requests[0]?.headers['x-project-id'], 'p1');
    assert.equal(server.requests[0]?.headers['x-roles'], 'member');
  });
});

describe('NeutronClient create with tags', () => {
  /** A fake that knows networks, tags and (optionally) the tag-creation extension. */
  async function taggingFake(opts: { tagCreation: boolean; failTags?: boolean; hangTags?: boolean }): Promise<{ server: FakeServer; client: NeutronClient; nets: Map<string, Record<string, unknown>> }> {
    const nets = new Map<string, Record<string, unknown>>();
    const f = await fake((req, res) => {
      if (req.path === '/v2.0/extensions') {
        reply(res, 200, { extensions: [{ alias: 'standard-attr-tag' }, ...(opts.tagCreation ? [{ alias: 'tag-creation' }] : [])] });
      } else if (req.method === 'POST' && req.path === '/v2.0/networks') {
        const body = (JSON.parse(req.body) as { network: Record<string, unknown> }).network;
        if ('tags' in body && !opts.tagCreation) {
          reply(res, 400, { NeutronError: { type: 'HTTPBadRequest', message: "Attribute 'tags' not allowed in POST", detail: '' } });
          return;
        }
        const n = net(`id${nets.size + 1}`, body);
        nets.set(n['id'] as string, n);
        reply(res, 201, { network: n });
      } else if (req.method === 'PUT' && /^\/v2\.0\/networks\/[^/]+\/tags$/.test(req.path)) {
        if (opts.hangTags) return; // never answered: the caller's abort ends it
        if (opts.failTags) {
          reply(res, 500, { NeutronError: { type: 'HTTPInternalServerError', message: 'boom', detail: '' } });
          return;
        }
        const n = nets.get(req.path.split('/')[3] ?? '');
        if (n) n['tags'] = (JSON.parse(req.body) as { tags: string[] }).tags;
        reply(res, 200, { tags: n?.['tags'] });
      } else if (req.method === 'GET' && req.path.startsWith('/v2.0/networks/')) {
        reply(res, 200, { network: nets.get(req.path.split('/')[3] ?? '') });
      } else if (req.method === 'DELETE') {
        nets.delete(req.path.split('/')[3] ?? '');
        reply(res, 204);
      } else reply(res, 404, {});
    });
    return { ...f, nets };
  }

  it('without tag-creation: POST without tags, then PUT the tags, then return the tagged network', async () => {
    const { client, server } = await taggingFake({ tagCreation: false });
    const n = await client.createNetwork({ name: 'x', tags: ['a', 'b'] });
    assert.deepEqual(n.tags, ['a', 'b']);
    assert.deepEqual(server.requests.map((r) => `${r.method} ${r.path}`),
      ['GET /v2.0/extensions', 'POST /v2.0/networks', 'PUT /v2.0/networks/id1/tags', 'GET /v2.0/networks/id1']);
    await client.createNetwork({ name: 'y', tags: ['c'] });
    assert.equal(server.matching('GET', '/v2.0/extensions').length, 1, 'extension list is cached');
  });

  it('with tag-creation: tags go in the POST', async () => {
    const { client, server } = await taggingFake({ tagCreation: true });
    const n = await client.createNetwork({ name: 'x', tags: ['a'] });
    assert.deepEqual(n.tags, ['a']);
    assert.deepEqual(server.requests.map((r) => `${r.method} ${r.path}`), ['GET /v2.0/extensions', 'POST /v2.0/networks']);
  });

  it('deletes the new network when tagging fails, and throws the tagging error', async () => {
    const { client, nets, server } = await taggingFake({ tagCreation: false, failTags: true });
    await assert.rejects(client.createNetwork({ name: 'x', tags: ['a'] }), (e: Error) => e instanceof NeutronUnavailableError && e.status === 500);
    assert.equal(nets.size, 0);
    assert.equal(server.matching('DELETE', '/v2.0/networks/id1').length, 1);
  });

  it('the clean-up DELETE takes the caller\'s signal: aborted while tagging → rejects with the reason, no DELETE sent', async () => {
    // README: every Neutron call takes the reconcile's signal — the best-effort clean-up of a network whose tagging
    // failed included (a reconcile told to stop writes nothing more; the untagged network is logged, see createTagged).
    const { client, server } = await taggingFake({ tagCreation: false, hangTags: true });
    const ac = new AbortController();
    const p = client.createNetwork({ name: 'x', tags: ['a'] }, { signal: ac.signal });
    await waitUntil(() => server.matching('PUT', '/v2.0/networks/id1/tags').length === 1);
    const reason = new Error('reconcile aborted');
    ac.abort(reason);
    await assert.rejects(p, (e: unknown) => e === reason);
    assert.deepEqual(server.matching('DELETE', '/v2.0/networks/id1'), [], 'no DELETE after the signal aborted');
  });

  it('no tags: a single POST, no extension probe', async () => {
    const { client, server } = await taggingFake({ tagCreation: false });
    await client.createNetwork({ name: 'plain' });
    assert.deepEqual(server.requests.map((r) => `${r.method} ${r.path}`), ['POST /v2.0/networks']);
  });
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Polls a condition (never a fixed sleep). */
async function waitUntil(cond: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('NeutronClient against clouds unlike the local default (issue 12)', () => {
  it('follows next links when the server caps the page below the requested limit (pagination_max_limit)', async () => {
    const all = ['a', 'b', 'c', 'd', 'e'].map((id) => net(id));
    const cap = 2; // the server's pagination_max_limit: smaller than what the client asks for
    const { client, server } = await fake((req, res) => {
      const limit = Math.min(Number(req.query.get('limit')), cap);
      const marker = req.query.get('marker');
      const start = marker ? all.findIndex((n) => n['id'] === marker) + 1 : 0;
      const page = all.slice(start, start + limit);
      const links = start + limit < all.length ? [{ rel: 'next', href: `http://neutron.example:9696/v2.0/networks?limit=${limit}&marker=${String(page.at(-1)?.['id'])}&name=x` }] : [];
      reply(res, 200, { networks: page, networks_links: links });
    });
    const got = await client.listNetworks({ name: 'x' }, { pageSize: 500 });
    assert.deepEqual(got.map((n) => n.id), ['a', 'b', 'c', 'd', 'e']);
    assert.deepEqual(server.requests.map((r) => r.query.get('marker')), [null, 'b', 'd']);
    assert.ok(server.requests.every((r) => r.query.get('name') === 'x'), 'the filter stays on every page');
  });

  it('a cloud that omits tags (and subnets) in its answers: empty arrays, not undefined', async () => {
    const { client } = await fake((req, res) => {
      if (req.path === '/v2.0/networks') reply(res, 200, { networks: [{ id: 'a', name: 'n' }] });
      else if (req.path === '/v2.0/networks/a') reply(res, 200, { network: { id: 'a', name: 'n' } });
      else if (req.path === '/v2.0/subnets') reply(res, 200, { subnets: [{ id: 's', network_id: 'a', cidr: '10.0.0.0/24' }] });
      else reply(res, 404, {});
    });
    const [n] = await client.listNetworks();
    assert.deepEqual([n?.tags, n?.subnets], [[], []]);
    const one = await client.getNetwork('a');
    assert.deepEqual([one.tags, one.subnets], [[], []]);
    const [s] = await client.listSubnets({ networkId: 'a' });
    assert.deepEqual(s?.tags, []);
  });

  it('403 is a policy error carrying the server message, not an authentication failure', async () => {
    const { client } = await fake((_req, res) => reply(res, 403, { NeutronError: { type: 'PolicyNotAuthorized', message: 'rule:create_network:shared is disallowed by policy', detail: '' } }));
    await assert.rejects(client.createNetwork({ name: 'x', shared: true }), (e: Error) =>
      e instanceof NeutronForbiddenError && !(e instanceof NeutronAuthError) && e.status === 403
      && e.serverMessage === 'rule:create_network:shared is disallowed by policy' && !isRetryable(e));
  });

  it('Retry-After on 429 and 503 is kept on the error (seconds and HTTP-date forms)', async () => {
    let n = 0;
    const { client } = await fake((_req, res) => {
      n++;
      if (n === 1) reply(res, 429, { NeutronError: { type: 'OverLimit', message: 'slow down', detail: '' } }, { 'retry-after': '7' });
      else if (n === 2) reply(res, 503, 'Service Unavailable', { 'retry-after': new Date(Date.now() + 30_000).toUTCString() });
      else reply(res, 503, 'Service Unavailable');
    });
    await assert.rejects(client.listNetworks(), (e: Error) => e instanceof NeutronUnavailableError && e.retryAfterMs === 7_000);
    await assert.rejects(client.listNetworks(), (e: Error) =>
      e instanceof NeutronUnavailableError && e.retryAfterMs !== undefined && e.retryAfterMs > 20_000 && e.retryAfterMs <= 31_000);
    await assert.rejects(client.listNetworks(), (e: Error) => e instanceof NeutronUnavailableError && e.retryAfterMs === undefined);
  });

  it('projectId: the token\'s project with Keystone, undefined without', async () => {
    const { client } = await fake((_req, res) => reply(res, 200, { networks: [] }));
    assert.equal(await client.projectId(), undefined);
  });
});
