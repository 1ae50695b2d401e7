/**
 * The Neutron client and the Network controller against neutron-server behind a REAL Keystone (issue 12):
 * hack/neutron/up.sh with NEUTRON_AUTH=keystone (Debian's keystone under uwsgi, MariaDB; projects k8s and other;
 * keystonemiddleware in neutron-server without a token cache, so a revoked token is refused at once).
 * Tokens live 30 s here, so expiry and renewal happen within the test.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import { neutronDescription } from '../pkg/controllers/network/index.ts';
import { KeystoneAuth, loadCloudConfig, NeutronClient, NeutronForbiddenError } from '../pkg/neutron/index.ts';
import { cluster, expectStatus, waitFor } from './helpers/cluster.ts';
import { CONVERGE, getNetwork, NetworkTestBed, networksPath, readyOf } from './helpers/network.ts';
import { keystoneToken, NeutronProxy, neutronApi, type NeutronApi, type NeutronInstance } from './helpers/neutron.ts';

const START_TIMEOUT = 20 * 60_000; // first use installs keystone + mariadb-server
type Json = Record<string, unknown>;

describe('real Keystone in front of neutron-server (NEUTRON_AUTH=keystone)', () => {
  let bed: NetworkTestBed;
  let neutron: NeutronInstance;
  let keystone: string;
  /** Raw view as Keystone's admin (every project). */
  let admin: NeutronApi;
  let adminToken: string;

  before(async () => {
    bed = await NetworkTestBed.start({ auth: 'keystone', tokenExpirationSeconds: 30, timeoutMs: START_TIMEOUT });
    neutron = bed.neutron;
    keystone = neutron.keystoneUrl ?? '';
    adminToken = (await keystoneToken(keystone, 'admin')).token;
    admin = neutronApi(neutron.endpoint, { 'x-auth-token': adminToken });
  }, { timeout: START_TIMEOUT });

  after(() => bed?.stop());

  /** The CRDs are installed on first use, not in before(): the client tests below need no cluster. */
  const namespace = (t: TestContext, prefix: string): Promise<string> => bed.namespace(t, prefix);

  /** Fresh admin token (tokens live 30 s here). */
  async function adminApi(): Promise<NeutronApi> {
    adminToken = (await keystoneToken(keystone, 'admin')).token;
    admin = neutronApi(neutron.endpoint, { 'x-auth-token': adminToken });
    return admin;
  }

  test('catalog, token renewal before expiry, and one re-authentication after a revoked token', async () => {
    // keystonemiddleware validates every token with Keystone (no cache): on this loaded 2-core machine a request can
    // take seconds, so allow 30 s per request. Token requests are counted by why they were made
    // (openstack_keystone_token_requests_total{reason}): the test asserts reasons, not totals — on a loaded machine a
    // token can arrive already half-aged and be renewed at once, which is right and must not fail the test.
    const registry = new Registry();
    const auth = new KeystoneAuth(loadCloudConfig({ path: neutron.cloudsYaml, cloud: 'local' }), { timeoutMs: 30_000, registry });
    const requests = async (): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const v of (await registry.getSingleMetric('openstack_keystone_token_requests_total')?.get())?.values ?? []) {
        if (v.labels['result'] === 'success') out[String(v.labels['reason'])] = v.value;
      }
      return out;
    };
    const client = new NeutronClient({ auth, timeoutMs: 30_000 });
    assert.equal(await client.endpoint(), neutron.endpoint, 'Neutron found through the Keystone catalog');
    const k8sProject = (((await keystoneToken(keystone, 'k8s')).body['token'] as Json)['project'] as Json)['id'];
    assert.equal(await client.projectId(), k8sProject);
    await client.listNetworks();
    assert.deepEqual(await requests(), { initial: 1, renewal: auth.tokenRequests - 1, reauth: 0 }, 'one initial authentication, then renewals only');

    // 30 s tokens are renewed at half-life: calls spanning more than a lifetime never see an expired token (a 401
    // would show as a reauth).
    const started = Date.now();
    await waitFor('tokens renewed ahead of expiry over more than one token lifetime', async () => {
      await client.listNetworks();
      return (await requests())['renewal']! >= 2 && Date.now() - started > 30_000 ? true : undefined;
    }, { timeoutMs: 120_000, intervalMs: 1_000 });
    assert.equal((await requests())['reauth'], 0, 'no token expired under the calls');

    // Revoke the token the next call will use: Neutron (keystonemiddleware) answers 401, the client re-authenticates
    // once and retries. The revoking admin token is fetched first, and the revoked token is a fresh one (15 s before
    // its renewal), so the next call uses it rather than renewing it first.
    const revoker = (await keystoneToken(keystone, 'admin')).token;
    auth.invalidate((await auth.authenticate()).token);
    const current = (await auth.authenticate()).token?.reveal() ?? '';
    const before = await requests();
    const revoke = await fetch(`${keystone}/auth/tokens`, { method: 'DELETE', headers: { 'x-auth-token': revoker, 'x-subject-token': current } });
    assert.equal(revoke.status, 204);
    await client.listNetworks();
    assert.equal((await requests())['reauth'], (before['reauth'] ?? 0) + 1, 'exactly one re-authentication, after the 401');
  });

  test('403 from Neutron\'s policy is reported as such, with the policy message', async () => {
    const client = NeutronClient.fromCloudsYaml({ path: neutron.cloudsYaml, cloud: 'local' }, { timeoutMs: 30_000 });
    await assert.rejects(client.createNetwork({ name: 'shared-by-a-member', shared: true }), (e: Error) =>
      e instanceof NeutronForbiddenError && e.status === 403 && /disallowed by policy/.test(e.serverMessage));
  });

  test('project scoping: with admin credentials, another project\'s look-alike network (same name, description and tag) is not adopted', async (t) => {
    const ns = await namespace(t, 'net-scope');
    const created = expectStatus<Network>(await cluster().request('POST', networksPath(ns), {
      apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 's' }, spec: { cidr: '10.80.0.0/24' },
    }), 201, 'create Network');
    const uid = created.metadata?.uid ?? '';
    const other = neutronApi(neutron.endpoint, { 'x-auth-token': (await keystoneToken(keystone, 'other')).token });
    const theirs = await other.request<{ network: Json }>('POST', '/v2.0/networks', { network: { name: `${ns}/s`, description: neutronDescription(uid) } });
    assert.equal(theirs.status, 201);
    const theirsId = String(theirs.body.network['id']);
    const other2 = neutronApi(neutron.endpoint, { 'x-auth-token': (await keystoneToken(keystone, 'other')).token }); // tokens live 30 s
    assert.equal((await other2.request('PUT', `/v2.0/networks/${theirsId}/tags/k8s-uid:${uid}`)).status, 201);

    await bed.startController(t, ns, { cloud: 'admin' });
    const ready = await waitFor('Network s Ready', async () => {
      const n = await getNetwork(ns, 's');
      return readyOf(n)?.status === 'True' ? n : undefined;
    }, CONVERGE);
    assert.notEqual(ready.status?.networkID, theirsId, 'not the other project\'s network');
    // A fresh admin token for each look: tokens live 30 s here, and on a loaded machine Keystone's validation of each
    // request can take long enough for three requests to outlive one token (seen: GET network → 401).
    const adminProject = (((await keystoneToken(keystone, 'admin')).body['token'] as Json)['project'] as Json)['id'];
    assert.equal((await (await adminApi()).network(ready.status?.networkID ?? ''))?.['project_id'], adminProject, 'ours is in the credentials\' project');
    assert.deepEqual(await (await adminApi()).subnets({ network_id: theirsId }), [], 'their network got no subnet of ours');
    assert.deepEqual((await (await adminApi()).network(theirsId))?.['tags'], [`k8s-uid:${uid}`], 'and is otherwise untouched');
  });

  test('a deleted application credential (Keystone 404 on re-auth) while deleting: the finalizer stays, nothing leaks', async (t) => {
    const ns = await namespace(t, 'net-appcred');
    // An application credential of user k8s, used by the controller.
    const k8s = await keystoneToken(keystone, 'k8s');
    const userId = ((k8s.body['token'] as Json)['user'] as Json)['id'] as string;
    const acRes = await fetch(`${keystone}/users/${userId}/application_credentials`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-auth-token': k8s.token },
      body: JSON.stringify({ application_credential: { name: `tscm-${ns}`, secret: 'app-cred-secret' } }),
    });
    assert.equal(acRes.status, 201);
    const acId = ((await acRes.json()) as { application_credential: { id: string } }).application_credential.id;
    // Neutron through a proxy that can make the token look expired at exactly the DELETE of the network: the
    // re-authentication then happens between the lookup and the delete, where a "not found" would mean "gone".
    const proxy = await NeutronProxy.start(neutron.endpoint);
    t.after(() => proxy.close());
    const cloudsYaml = join(mkdtempSync(join(tmpdir(), 'tscm-appcred-')), 'clouds.yaml');
    writeFileSync(cloudsYaml, `clouds:\n  ac:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: ${keystone}\n      application_credential_id: ${acId}\n      application_credential_secret: app-cred-secret\n    region_name: RegionOne\n    network_endpoint_override: ${proxy.endpoint}\n`);

    const m = await bed.startController(t, ns, { cloudsYaml, cloud: 'ac' });
    expectStatus(await cluster().request('POST', networksPath(ns), {
      apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'a' }, spec: { cidr: '10.81.0.0/24' },
    }), 201, 'create Network');
    const ready = await waitFor('Network a Ready', async () => {
      const n = await getNetwork(ns, 'a');
      return readyOf(n)?.status === 'True' ? n : undefined;
    }, CONVERGE);
    const networkID = ready.status?.networkID ?? '';

    // The credential is deleted (rotated away); Keystone now answers 404 for it. The controller's cached token stays
    // usable for the lookup; its network DELETE is answered 401 (token expired right then), so it re-authenticates.
    proxy.refuse = (r) => (r.method === 'DELETE' && r.path === `/v2.0/networks/${networkID}` ? 401 : undefined);
    const del = await fetch(`${keystone}/users/${userId}/application_credentials/${acId}`, { method: 'DELETE', headers: { 'x-auth-token': (await keystoneToken(keystone, 'k8s')).token } });
    assert.equal(del.status, 204);
    const errorsBefore = await m.metric('controller_runtime_reconcile_errors_total', { controller: 'network' });
    expectStatus(await cluster().request('DELETE', `${networksPath(ns)}/a`), 200, 'delete Network');
    await waitFor('two failed deletion attempts', async () =>
      (await m.metric('controller_runtime_reconcile_errors_total', { controller: 'network' })) >= errorsBefore + 2 ? true : undefined, CONVERGE);
    const held = await getNetwork(ns, 'a');
    assert.ok(held?.metadata?.deletionTimestamp, 'still being deleted');
    assert.deepEqual(held.metadata.finalizers, ['samplecrd.k8s.io/neutron'], 'the finalizer stays: Neutron was never asked');
    const api = await adminApi();
    assert.ok(await api.network(networkID), 'the Neutron network still exists (not leaked by a premature finalizer removal)');
    await m.stop();
    // Housekeeping, not the claim (this file's neutron-server goes with it): once answered 500 in CI under load
    // (28 Nov 2026, cause not found; its log went with it) — said, not asserted.
    const cleanup = (await (await adminApi()).request('DELETE', `/v2.0/networks/${networkID}`)).status;
    if (cleanup !== 204) t.diagnostic(`cleanup: neutron-server answered ${cleanup} to the admin DELETE of ${networkID}`);
  });
});
