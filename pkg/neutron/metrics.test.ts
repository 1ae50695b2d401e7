/**
 * openstack_* metrics (metrics.ts) against a UNIT-TEST FAKE Keystone + Neutron (fakeserver.ts, canned responses) —
 * the fake makes each status and each failure deterministic; test/observability.test.ts scrapes the same metrics from
 * the manager talking to a real neutron-server.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../util/clock.ts';
import { NeutronClient } from './client.ts';
import { cloudFromSettings } from './clouds.ts';
import { NeutronAuthError, NeutronUnavailableError } from './errors.ts';
import { FakeServer, reply, type FakeHandler } from './fakeserver.ts';
import { KeystoneAuth, StaticAuth } from './keystone.ts';

let servers: FakeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function fake(handler: FakeHandler): Promise<FakeServer> {
  const s = await FakeServer.start(handler);
  servers.push(s);
  return s;
}

/** The value of one series (labels match exactly; `<histogram>_count` too), or undefined. */
async function value(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const family = name.endsWith('_count') ? name.slice(0, -'_count'.length) : name;
  const m = await registry.getSingleMetric(family)?.get();
  const want = JSON.stringify(Object.entries(labels).sort());
  return m?.values.filter((v) => ((v as { metricName?: string }).metricName ?? name) === name).find((v) => JSON.stringify(Object.entries(v.labels).map(([k, x]) => [k, String(x)]).sort()) === want)?.value;
}

/** A loopback port nobody listens on (bound, then closed). */
async function deadPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('openstack_* metrics', () => {
  it('counts Neutron requests by method and code, "<error>" without a response, and times them', async () => {
    let status = 200;
    const server = await fake((req, res) => {
      if (req.method === 'DELETE') return reply(res, status === 200 ? 204 : status, status === 200 ? undefined : { NeutronError: { type: 'X', message: 'm', detail: '' } });
      reply(res, status, status === 200 ? { networks: [] } : { NeutronError: { type: 'X', message: 'm', detail: '' } });
    });
    const registry = new Registry();
    const client = new NeutronClient({ auth: new StaticAuth(server.url), registry });
    assert.equal(await value(registry, 'openstack_last_success_timestamp_seconds', { api: 'neutron' }), 0, 'series exist at 0 from the start');
    assert.equal(await value(registry, 'openstack_last_failure_timestamp_seconds', { api: 'neutron' }), 0);

    await client.listNetworks();
    await client.deleteNetwork('n1');
    status = 503;
    await assert.rejects(client.listNetworks(), NeutronUnavailableError);
    status = 404;
    await assert.rejects(client.deleteNetwork('n2'));
    const dead = new NeutronClient({ auth: new StaticAuth(`http://127.0.0.1:${await deadPort()}`), registry });
    await assert.rejects(dead.listNetworks(), NeutronUnavailableError);

    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'GET', code: '200' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'DELETE', code: '204' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'GET', code: '503' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'DELETE', code: '404' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'GET', code: '<error>' }), 1);
    assert.equal(await value(registry, 'openstack_request_duration_seconds_count', { api: 'neutron', method: 'GET' }), 3);
    assert.equal(await value(registry, 'openstack_request_duration_seconds_count', { api: 'neutron', method: 'DELETE' }), 2);
    // The latest request got no response: failure is newer than the latest success (the 404 — a response).
    const ok = await value(registry, 'openstack_last_success_timestamp_seconds', { api: 'neutron' });
    const failed = await value(registry, 'openstack_last_failure_timestamp_seconds', { api: 'neutron' });
    assert.ok(ok !== undefined && failed !== undefined && failed >= ok && ok > 0, `success ${ok}, failure ${failed}`);
    status = 200;
    await client.listNetworks();
    const ok2 = await value(registry, 'openstack_last_success_timestamp_seconds', { api: 'neutron' });
    assert.ok(ok2 !== undefined && ok2 >= failed, 'a success after the failure is newer again');
  });

  it('does not count a request the caller cancelled', async () => {
    const server = await fake(() => {}); // never answers
    const registry = new Registry();
    const client = new NeutronClient({ auth: new StaticAuth(server.url), registry });
    const ac = new AbortController();
    const p = client.listNetworks({}, { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 50)).then(() => ac.abort(new Error('caller gave up')));
    await assert.rejects(p, /caller gave up/);
    const m = await registry.getSingleMetric('openstack_requests_total')?.get();
    assert.deepEqual(m?.values ?? [], []);
    assert.equal(await value(registry, 'openstack_last_failure_timestamp_seconds', { api: 'neutron' }), 0);
  });

  it('counts Keystone token requests by reason (initial, renewal, reauth) and result (success, auth_failure, unavailable)', async () => {
    let tokenStatus = 201;
    let n = 0;
    const revoked = new Set<string>();
    const server = await fake((req, res) => {
      if (req.path === '/v3/auth/tokens') {
        if (tokenStatus !== 201) return reply(res, tokenStatus, { error: { code: tokenStatus, title: 'x', message: 'refused' } });
        const now = Date.now();
        const token = `tok-${++n}`;
        return reply(res, 201, {
          token: { issued_at: new Date(now).toISOString(), expires_at: new Date(now + 3600_000).toISOString(), project: { id: 'p' }, catalog: [] },
        }, { 'x-subject-token': token });
      }
      const token = String(req.headers['x-auth-token']);
      if (revoked.has(token)) return reply(res, 401, 'Unauthorized');
      reply(res, 200, { networks: [] });
    });
    const cloud = cloudFromSettings('t', {
      auth_type: 'password', network_endpoint_override: server.url,
      auth: { auth_url: server.url, username: 'u', password: 'pw', project_name: 'p' },
    }, '/fake/clouds.yaml');
    const registry = new Registry();
    const clock = new FakeClock();
    const auth = new KeystoneAuth(cloud, { registry, clock });
    const client = new NeutronClient({ auth, registry });
    const tokens = (reason: string, result: string): Promise<number | undefined> =>
      value(registry, 'openstack_keystone_token_requests_total', { reason, result });
    for (const reason of ['initial', 'renewal', 'reauth']) {
      for (const result of ['success', 'auth_failure', 'unavailable']) assert.equal(await tokens(reason, result), 0, `${reason}/${result} at 0`);
    }

    tokenStatus = 503;
    await assert.rejects(client.listNetworks(), NeutronUnavailableError);
    tokenStatus = 401;
    await assert.rejects(client.listNetworks(), NeutronAuthError);
    tokenStatus = 201;
    await client.listNetworks(); // initial, success
    clock.step(3600_000); // due for renewal
    await client.listNetworks(); // renewal, success
    revoked.add(`tok-${n}`);
    await client.listNetworks(); // 401 from Neutron → reauth, success, resend

    assert.equal(await tokens('initial', 'unavailable'), 1);
    assert.equal(await tokens('initial', 'auth_failure'), 1);
    assert.equal(await tokens('initial', 'success'), 1);
    assert.equal(await tokens('renewal', 'success'), 1);
    assert.equal(await tokens('reauth', 'success'), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'keystone', method: 'POST', code: '201' }), 3);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'keystone', method: 'POST', code: '401' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'keystone', method: 'POST', code: '503' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'GET', code: '401' }), 1);
    assert.equal(await value(registry, 'openstack_requests_total', { api: 'neutron', method: 'GET', code: '200' }), 3);
    assert.ok((await value(registry, 'openstack_last_failure_timestamp_seconds', { api: 'keystone' }) ?? 0) > 0, 'the 503 is a Keystone failure');
  });
});
