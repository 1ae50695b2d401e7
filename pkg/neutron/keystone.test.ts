/**
 * Keystone v3 authentication against a UNIT-TEST FAKE (fakeserver.ts) that plays both Keystone and Neutron with
 * canned responses; the real Neutron API is covered by test/neutron.test.ts.
 */
import { describe, it, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';
import { newLogger } from '../log/logger.ts';
import { FakeClock } from '../util/clock.ts';
import { NeutronClient } from './client.ts';
import { cloudFromSettings, type CloudConfig } from './clouds.ts';
import { isNotFound, isRetryable, NeutronAuthError, NeutronUnavailableError } from './errors.ts';
import { FakeServer, reply, type RecordedRequest } from './fakeserver.ts';
import { KeystoneAuth, keystoneV3Url, networkEndpointFromCatalog, normaliseNetworkEndpoint } from './keystone.ts';

const HOUR = 60 * 60_000;

let servers: FakeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

interface FakeCloud {
  server: FakeServer;
  /** Tokens issued so far, in order. */
  issued: string[];
  /** Tokens Neutron rejects with 401 (revoked). */
  revoked: Set<string>;
  /** Override the next token responses. */
  tokenStatus: number;
  lifetimeMs: number;
  /** Server clock of issued_at (to show skew does not matter). */
  serverNow: () => number;
  catalogUrl: () => string;
}

/** A fake Keystone (POST /v3/auth/tokens) + fake Neutron (GET /v2.0/networks) on one port. */
async function fakeCloud(): Promise<FakeCloud> {
  const f: FakeCloud = {
    server: undefined as unknown as FakeServer, // set right below, before any request can arrive
    issued: [], revoked: new Set(), tokenStatus: 201, lifetimeMs: HOUR, serverNow: () => Date.now(),
    catalogUrl: () => `${f.server.url}/v2.0/`,
  };
  f.server = await FakeServer.start((req: RecordedRequest, res: ServerResponse) => {
    if (req.method === 'POST' && req.path === '/v3/auth/tokens') {
      if (f.tokenStatus !== 201) {
        reply(res, f.tokenStatus, { error: { code: f.tokenStatus, title: f.tokenStatus === 401 ? 'Unauthorized' : 'Service Unavailable', message: 'The request you have made requires authentication.' } });
        return;
      }
      const token = `tok-${f.issued.length + 1}-${Math.random().toString(36).slice(2)}`;
      f.issued.push(token);
      const issuedAt = f.serverNow();
      reply(res, 201, {
        token: {
          issued_at: new Date(issuedAt).toISOString(), expires_at: new Date(issuedAt + f.lifetimeMs).toISOString(),
          project: { id: 'proj-demo-id', name: 'demo', domain: { id: 'default', name: 'Default' } },
          catalog: [
            { type: 'identity', endpoints: [{ interface: 'public', region_id: 'RegionOne', url: `${f.server.url}/v3` }] },
            {
              type: 'network', endpoints: [
                { interface: 'internal', region_id: 'RegionOne', url: 'http://internal.invalid:9696' },
                { interface: 'public', region_id: 'RegionTwo', url: 'http://region-two.invalid:9696' },
                { interface: 'public', region_id: 'RegionOne', url: f.catalogUrl() },
              ],
            },
          ],
        },
      }, { 'x-subject-token': token });
      return;
    }
    if (req.path === '/v2.0/networks' || req.path.startsWith('/v2.0/networks/')) {
      if (req.method === 'DELETE') {
        const token = String(req.headers['x-auth-token'] ?? '');
        reply(res, !f.issued.includes(token) || f.revoked.has(token) ? 401 : 204);
        return;
      }
      const token = String(req.headers['x-auth-token'] ?? '');
      if (!f.issued.includes(token) || f.revoked.has(token)) {
        reply(res, 401, '<html><body><h1>401 Unauthorized</h1>This server could not verify that you are authorized</body></html>');
        return;
      }
      reply(res, 200, { networks: [{ id: 'n1', name: 'one' }] });
      return;
    }
    reply(res, 404, {});
  });
  servers.push(f.server);
  return f;
}

function passwordCloud(f: FakeCloud, extra: Record<string, unknown> = {}): CloudConfig {
  return cloudFromSettings('test', {
    auth_type: 'password',
    auth: { auth_url: f.server.url, username: 'alice', password: 'pw-secret-123', project_name: 'demo', user_domain_name: 'Default', project_domain_name: 'Default' },
    region_name: 'RegionOne',
    ...extra,
  }, '/fake/clouds.yaml');
}

describe('KeystoneAuth', () => {
  it('authenticates with a project-scoped password token and uses the catalog endpoint', async () => {
    const f = await fakeCloud();
    const auth = new KeystoneAuth(passwordCloud(f));
    const client = new NeutronClient({ auth });
    const nets = await client.listNetworks();
    assert.deepEqual(nets.map((n) => n.id), ['n1']);
    const [tokenReq] = f.server.matching('POST', '/v3/auth/tokens');
    assert.ok(tokenReq);
    assert.deepEqual(JSON.parse(tokenReq.body), {
      auth: {
        identity: { methods: ['password'], password: { user: { name: 'alice', domain: { name: 'Default' }, password: 'pw-secret-123' } } },
        scope: { project: { name: 'demo', domain: { name: 'Default' } } },
      },
    });
    const [netReq] = f.server.matching('GET', '/v2.0/networks');
    assert.equal(netReq?.headers['x-auth-token'], f.issued[0]);
    assert.equal(await client.endpoint(), f.server.url, 'catalog URL normalised (no /v2.0, no trailing slash)');
  });

  it('selects the endpoint by interface and region', () => {
    const catalog = [{ type: 'network', endpoints: [
      { interface: 'public', region_id: 'A', url: 'http://a-pub/' },
      { interface: 'internal', region_id: 'A', url: 'http://a-int' },
      { interface: 'public', region: 'B', url: 'http://b-pub/v2.0' },
    ] }];
    assert.equal(networkEndpointFromCatalog(catalog, 'public', undefined), 'http://a-pub');
    assert.equal(networkEndpointFromCatalog(catalog, 'internal', 'A'), 'http://a-int');
    assert.equal(networkEndpointFromCatalog(catalog, 'public', 'B'), 'http://b-pub');
    assert.throws(() => networkEndpointFromCatalog(catalog, 'admin', 'A'), (e: Error) =>
      e instanceof NeutronAuthError && e.type === 'EndpointNotFound' &&
      e.message.includes('no network endpoint for interface admin in region A') && e.message.includes('public@A, internal@A, public@B'));
    assert.throws(() => networkEndpointFromCatalog([{ type: 'compute', endpoints: [] }], 'public', undefined), /network endpoints: none/);
  });

  it('normalises auth_url and catalog URLs', () => {
    assert.equal(keystoneV3Url('https://k:5000'), 'https://k:5000/v3');
    assert.equal(keystoneV3Url('https://k:5000/identity/v3/'), 'https://k:5000/identity/v3');
    assert.equal(keystoneV3Url('https://k:5000/v2.0'), 'https://k:5000/v3');
    assert.equal(normaliseNetworkEndpoint('http://n:9696/v2.0/'), 'http://n:9696');
  });

  it('a network_endpoint_override bypasses the catalog but still sends the token', async () => {
    const f = await fakeCloud();
    f.catalogUrl = () => 'http://catalog.invalid:9696';
    const client = NeutronClient.fromCloud(passwordCloud(f, { network_endpoint_override: `${f.server.url}/v2.0` }));
    await client.listNetworks();
    assert.equal(f.server.matching('GET', '/v2.0/networks')[0]?.headers['x-auth-token'], f.issued[0]);
  });

  it('sends the application credential method without a scope', async () => {
    const f = await fakeCloud();
    const cloud = cloudFromSettings('ac', {
      auth_type: 'v3applicationcredential',
      auth: { auth_url: `${f.server.url}/v3`, application_credential_id: 'ac-id', application_credential_secret: 'ac-secret' },
      region_name: 'RegionOne',
    }, '/fake/clouds.yaml');
    await new NeutronClient({ auth: new KeystoneAuth(cloud) }).listNetworks();
    const body = JSON.parse(f.server.matching('POST', '/v3/auth/tokens')[0]?.body ?? '{}') as unknown;
    assert.deepEqual(body, { auth: { identity: { methods: ['application_credential'], application_credential: { id: 'ac-id', secret: 'ac-secret' } } } });
  });

  it('caches the token and shares one in-flight authentication between concurrent callers', async () => {
    const f = await fakeCloud();
    const auth = new KeystoneAuth(passwordCloud(f));
    const client = new NeutronClient({ auth });
    await Promise.all([client.listNetworks(), client.listNetworks(), client.listNetworks()]);
    await client.listNetworks();
    assert.equal(f.issued.length, 1);
    assert.equal(auth.tokenRequests, 1);
    assert.equal(new Set(f.server.matching('GET', '/v2.0/networks').map((r) => r.headers['x-auth-token'])).size, 1);
  });

  it('renews ahead of expiry, measuring the lifetime on the server clock (skew does not matter)', async () => {
    const f = await fakeCloud();
    f.serverNow = () => Date.parse('2001-01-01T00:00:00Z'); // a server clock 25 years behind ours
    const clock = new FakeClock();
    const auth = new KeystoneAuth(passwordCloud(f), { clock, refreshMarginMs: 5 * 60_000 });
    const first = await auth.authenticate();
    clock.step(HOUR - 5 * 60_000 - 1);
    assert.equal((await auth.authenticate()).token, first.token, 'still cached just before the refresh point');
    assert.equal(f.issued.length, 1);
    clock.step(1);
    const second = await auth.authenticate();
    assert.notEqual(second.token, first.token);
    assert.equal(f.issued.length, 2);
  });

  it('caps the refresh margin at half of a short token lifetime', async () => {
    const f = await fakeCloud();
    f.lifetimeMs = 60_000;
    const clock = new FakeClock();
    const auth = new KeystoneAuth(passwordCloud(f), { clock });
    await auth.authenticate();
    clock.step(29_999);
    await auth.authenticate();
    assert.equal(f.issued.length, 1);
    clock.step(1);
    await auth.authenticate();
    assert.equal(f.issued.length, 2);
  });

  it('re-authenticates once when Neutron answers 401, then retries the request', async () => {
    const f = await fakeCloud();
    const client = new NeutronClient({ auth: new KeystoneAuth(passwordCloud(f)) });
    await client.listNetworks();
    f.revoked.add(f.issued[0] ?? '');
    const nets = await client.listNetworks();
    assert.equal(nets.length, 1);
    assert.equal(f.issued.length, 2);
    const tokens = f.server.matching('GET', '/v2.0/networks').map((r) => r.headers['x-auth-token']);
    assert.deepEqual(tokens, [f.issued[0], f.issued[0], f.issued[1]]);
  });

  it('gives up with NeutronAuthError after the second 401 (no loop)', async () => {
    const f = await fakeCloud();
    const client = new NeutronClient({ auth: new KeystoneAuth(passwordCloud(f)) });
    f.server.handler = ((orig) => (req: RecordedRequest, res: ServerResponse) => {
      if (req.path === '/v2.0/networks') reply(res, 401, '<html><h1>401 Unauthorized</h1></html>');
      else return orig(req, res);
    })(f.server.handler);
    await assert.rejects(client.listNetworks(), (e: Error) => e instanceof NeutronAuthError && e.status === 401 && !isRetryable(e));
    assert.equal(f.issued.length, 2);
    assert.equal(f.server.matching('GET', '/v2.0/networks').length, 2);
  });

  it('Keystone 401 → NeutronAuthError; Keystone 503 → retryable NeutronUnavailableError', async () => {
    const f = await fakeCloud();
    f.tokenStatus = 401;
    const auth = new KeystoneAuth(passwordCloud(f));
    await assert.rejects(auth.authenticate(), (e: Error) =>
      e instanceof NeutronAuthError && e.status === 401 && e.type === 'Unauthorized' && e.message.includes('POST /v3/auth/tokens'));
    f.tokenStatus = 503;
    await assert.rejects(auth.authenticate(), (e: Error) => e instanceof NeutronUnavailableError && isRetryable(e));
    f.tokenStatus = 201;
    await auth.authenticate();
    assert.equal(f.issued.length, 1, 'a failed authentication is not cached');
  });

  it('a missing X-Subject-Token is an auth error', async () => {
    const f = await fakeCloud();
    f.server.handler = (_req, res) => reply(res, 201, { token: { catalog: [] } });
    await assert.rejects(new KeystoneAuth(passwordCloud(f)).authenticate(), (e: Error) => e instanceof NeutronAuthError && e.type === 'NoToken');
  });

  it('a caller abort abandons only its own wait', async () => {
    const f = await fakeCloud();
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const orig = f.server.handler;
    f.server.handler = async (req, res) => {
      await gate;
      return orig(req, res);
    };
    const auth = new KeystoneAuth(passwordCloud(f));
    const ac = new AbortController();
    const aborted = auth.authenticate(ac.signal);
    const other = auth.authenticate();
    ac.abort(new Error('caller gave up'));
    await assert.rejects(aborted, /caller gave up/);
    release();
    assert.ok((await other).token);
    assert.equal(f.issued.length, 1);
  });

  it('never logs the password or the token', async () => {
    const f = await fakeCloud();
    const out = new PassThrough();
    let logged = '';
    out.on('data', (c: Buffer) => {
      logged += c.toString();
    });
    const logger = newLogger({ level: 'trace', destination: out });
    const cloud = passwordCloud(f);
    const client = NeutronClient.fromCloud(cloud, { logger });
    await client.listNetworks();
    f.revoked.add(f.issued[0] ?? '');
    await client.listNetworks();
    logger.info({ cloud }, 'config');
    assert.ok(logged.includes('keystone token issued'), logged);
    assert.ok(logged.includes('neutron request'), logged);
    for (const secret of ['pw-secret-123', ...f.issued]) assert.ok(!logged.includes(secret), `log leaks ${secret}: ${logged}`);
  });

  it('a Keystone 404 while re-authenticating (e.g. a deleted application credential) is an auth error, never "not found"', async () => {
    const f = await fakeCloud();
    const client = new NeutronClient({ auth: new KeystoneAuth(passwordCloud(f)) });
    await client.listNetworks();
    f.revoked.add(f.issued[0] ?? '');
    f.tokenStatus = 404;
    const err = await client.deleteNetwork('n1').then(() => undefined, (e: unknown) => e);
    assert.equal(isNotFound(err), false, 'not Neutron\'s "not found": the deletion path must not think the network is gone');
    assert.ok(err instanceof NeutronAuthError && err.name === 'NeutronAuthError' && err.status === 404 && err.message.includes('POST /v3/auth/tokens'), String(err));
    f.tokenStatus = 400;
    await assert.rejects(client.deleteNetwork('n1'), (e: Error) => e instanceof NeutronAuthError && e.name === 'NeutronAuthError' && e.status === 400);
  });

  it('knows the project of its token (for project-scoped lookups)', async () => {
    const f = await fakeCloud();
    const client = new NeutronClient({ auth: new KeystoneAuth(passwordCloud(f)) });
    assert.equal(await client.projectId(), 'proj-demo-id');
  });
});
