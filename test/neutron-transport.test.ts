/**
 * How the Neutron client reaches Keystone and neutron-server (issue 12): clouds.yaml `cacert`, `cert`/`key` and
 * `verify: false`, and HTTP_PROXY / HTTPS_PROXY / NO_PROXY — for the Keystone endpoint and Neutron alike — against the
 * REAL servers (hack/neutron/up.sh with NEUTRON_AUTH=keystone). TLS comes from a TLS-terminating forwarder in front
 * of each server (a test CA; client certificates required), the proxy is a real forward proxy (absolute-URI for
 * http://, CONNECT for https://) that counts what passed through it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CloudConfigError, NeutronClient } from '../pkg/neutron/index.ts';
import { cluster } from './helpers/cluster.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';
import { keystoneToken, neutronApi, startNeutron, type NeutronApi, type NeutronInstance } from './helpers/neutron.ts';
import { createCA } from './helpers/pki.ts';
import { ForwardProxy, TlsForwarder } from './helpers/proxies.ts';

const START_TIMEOUT = 20 * 60_000; // first use installs keystone + mariadb-server
const CLIENT_CN = 'tscm-neutron-client';

describe('Neutron client transport: TLS settings of clouds.yaml and the proxy environment (real Keystone + neutron-server)', () => {
  let neutron: NeutronInstance;
  let keystone: URL;
  /** Raw view as Keystone's admin, for checking Neutron's real state. */
  let admin: NeutronApi;
  let dir: string;
  let ksTls: TlsForwarder;
  let nTls: TlsForwarder;
  let proxy: ForwardProxy;
  let cloudsYaml: string;

  before(async () => {
    neutron = await startNeutron({ auth: 'keystone', timeoutMs: START_TIMEOUT });
    keystone = new URL(neutron.keystoneUrl ?? '');
    admin = neutronApi(neutron.endpoint, { 'x-auth-token': (await keystoneToken(keystone.href, 'admin')).token });
    dir = mkdtempSync(join(tmpdir(), 'tscm-neutron-transport-'));
    const ca = await createCA('tscm neutron test CA');
    const other = await createCA('some other CA');
    const server = await ca.issue(['localhost'], '127.0.0.1', { ips: ['127.0.0.1'] });
    const client = await ca.issue([], CLIENT_CN, { client: true });
    writeFileSync(join(dir, 'ca.pem'), ca.cert);
    writeFileSync(join(dir, 'other-ca.pem'), other.cert);
    writeFileSync(join(dir, 'client.crt'), client.cert);
    writeFileSync(join(dir, 'client.key'), client.key, { mode: 0o600 });
    writeFileSync(join(dir, 'client-both.pem'), client.cert + client.key, { mode: 0o600 });
    ksTls = await TlsForwarder.start(keystone.origin, { ...server, clientCA: ca.cert });
    nTls = await TlsForwarder.start(neutron.endpoint, { ...server, clientCA: ca.cert });
    proxy = await ForwardProxy.start();

    const password = (authUrl: string): string =>
      `    auth_type: password\n    auth:\n      auth_url: ${authUrl}\n      username: k8s\n      password: k8s-pw\n` +
      `      project_name: k8s\n      user_domain_id: default\n      project_domain_id: default\n    region_name: RegionOne\n`;
    const tls = `${password(`${ksTls.url}/v3`)}    network_endpoint_override: ${nTls.url}\n`;
    cloudsYaml = join(dir, 'clouds.yaml');
    writeFileSync(cloudsYaml, 'clouds:\n' +
      // Plain HTTP: Keystone's catalog names neutron-server's http://127.0.0.1 endpoint.
      `  plain:\n${password(keystone.href)}` +
      `  plain-localhost:\n${password(keystone.href.replace('127.0.0.1', 'localhost'))}` +
      `  tls:\n${tls}    cacert: ca.pem\n    cert: client.crt\n    key: client.key\n` +
      `  tls-combined:\n${tls}    cacert: ca.pem\n    cert: client-both.pem\n` +
      `  tls-nocert:\n${tls}    cacert: ca.pem\n` +
      `  tls-wrong-ca:\n${tls}    cacert: other-ca.pem\n    cert: client.crt\n    key: client.key\n` +
      `  tls-noverify:\n${tls}    verify: false\n    cert: client.crt\n    key: client.key\n` +
      `  tls-missing-ca:\n${tls}    cacert: no-such-ca.pem\n`);
  }, { timeout: START_TIMEOUT });

  after(async () => {
    await proxy?.close();
    await ksTls?.close();
    await nTls?.close();
    await neutron?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const clientFor = (cloud: string, env: NodeJS.ProcessEnv = {}): NeutronClient =>
    NeutronClient.fromCloudsYaml({ path: cloudsYaml, cloud, env: {} }, { env, timeoutMs: 30_000 });

  /** Creates and deletes a network through `client`; checks both in Neutron itself (in project k8s). */
  async function roundTrip(client: NeutronClient, name: string): Promise<void> {
    const net = await client.createNetwork({ name });
    const seen = await admin.network(net.id);
    assert.equal(seen?.['name'], name);
    assert.equal(seen?.['project_id'], await client.projectId());
    await client.deleteNetwork(net.id);
    assert.equal(await admin.network(net.id), undefined, 'deleted in Neutron');
  }

  test('cacert + cert/key: Keystone and Neutron behind TLS that requires a client certificate', async () => {
    const ks0 = ksTls.seen.length;
    const n0 = nTls.seen.length;
    await roundTrip(clientFor('tls'), 'tls-cert-key');
    const ks = ksTls.seen.slice(ks0);
    const n = nTls.seen.slice(n0);
    assert.ok(ks.some((r) => r.path === '/v3/auth/tokens'), 'the token came from Keystone over TLS');
    assert.ok(n.filter((r) => r.path.startsWith('/v2.0/networks')).length >= 2, 'create and delete went to Neutron over TLS');
    assert.deepEqual([...new Set([...ks, ...n].map((r) => r.clientCN))], [CLIENT_CN], 'every request carried the client certificate');

    // Certificate and key in one PEM file (`cert` alone), as openstacksdk allows.
    await roundTrip(clientFor('tls-combined'), 'tls-combined-pem');
  });

  test('without a client certificate the servers refuse the handshake; a CA that did not sign them is refused by the client', async () => {
    const before = { ks: ksTls.seen.length, fails: ksTls.handshakeFailures };
    await assert.rejects(clientFor('tls-nocert').createNetwork({ name: 'tls-nocert' }));
    assert.equal(ksTls.seen.length, before.ks, 'no request reached Keystone without a client certificate');
    assert.ok(ksTls.handshakeFailures > before.fails, 'Keystone\'s forwarder refused the handshake');

    await assert.rejects(clientFor('tls-wrong-ca').createNetwork({ name: 'tls-wrong-ca' }), /certificate/);
    assert.equal(ksTls.seen.length, before.ks, 'nothing sent to a server the CA does not vouch for');
  });

  test('verify: false accepts a certificate no configured CA signed (client certificate still sent)', async () => {
    const n0 = nTls.seen.length;
    await roundTrip(clientFor('tls-noverify'), 'tls-noverify');
    assert.ok(nTls.seen.slice(n0).every((r) => r.clientCN === CLIENT_CN));
  });

  test('HTTP_PROXY: Keystone and the catalog\'s Neutron endpoint through the proxy (absolute-URI); NO_PROXY bypasses per host', async () => {
    const neutronHost = new URL(neutron.endpoint).host;
    const ksLocalhost = `localhost:${keystone.port}`;
    const p0 = proxy.seen.length;
    await roundTrip(clientFor('plain', { HTTP_PROXY: proxy.url }), 'via-http-proxy');
    const seen = proxy.seen.slice(p0);
    assert.ok(seen.some((r) => r.kind === 'absolute' && r.target === keystone.host && r.path === '/v3/auth/tokens'), 'Keystone through the proxy');
    assert.ok(seen.filter((r) => r.kind === 'absolute' && r.target === neutronHost && r.path?.startsWith('/v2.0/networks')).length >= 2,
      'Neutron (from the catalog) through the proxy');

    // NO_PROXY names Keystone's host (localhost) only: Keystone direct, Neutron (127.0.0.1) still proxied.
    const p1 = proxy.seen.length;
    await roundTrip(clientFor('plain-localhost', { http_proxy: proxy.url, no_proxy: 'localhost' }), 'no-proxy-keystone');
    const seen1 = proxy.seen.slice(p1);
    assert.equal(seen1.filter((r) => r.target === ksLocalhost).length, 0, 'Keystone not proxied');
    assert.ok(seen1.filter((r) => r.target === neutronHost).length >= 2, 'Neutron proxied');

    // Both hosts in NO_PROXY: nothing through the proxy.
    const p2 = proxy.seen.length;
    await roundTrip(clientFor('plain-localhost', { HTTP_PROXY: proxy.url, NO_PROXY: 'localhost, 127.0.0.1' }), 'no-proxy-both');
    assert.equal(proxy.seen.length, p2, 'nothing proxied');
  });

  test('HTTPS_PROXY: CONNECT tunnels to the TLS Keystone and Neutron, TLS and client certificate end to end; NO_PROXY bypasses', async () => {
    const p0 = proxy.seen.length;
    const ks0 = ksTls.seen.length;
    const n0 = nTls.seen.length;
    await roundTrip(clientFor('tls', { HTTPS_PROXY: proxy.url }), 'via-https-proxy');
    const seen = proxy.seen.slice(p0);
    assert.ok(seen.some((r) => r.kind === 'connect' && r.target === ksTls.hostPort), 'tunnel to Keystone');
    assert.ok(seen.some((r) => r.kind === 'connect' && r.target === nTls.hostPort), 'tunnel to Neutron');
    assert.ok(seen.every((r) => r.kind === 'connect'), 'https never sent as plaintext to the proxy');
    assert.ok(ksTls.seen.length > ks0 && nTls.seen.length > n0);
    assert.ok([...ksTls.seen.slice(ks0), ...nTls.seen.slice(n0)].every((r) => r.clientCN === CLIENT_CN));

    const p1 = proxy.seen.length;
    await roundTrip(clientFor('tls', { HTTPS_PROXY: proxy.url, NO_PROXY: '127.0.0.1' }), 'https-no-proxy');
    assert.equal(proxy.seen.length, p1, 'nothing proxied');
  });

  test('an unreadable cacert: a CloudConfigError naming it; the manager exits 2 with one line at startup', async (t) => {
    const missing = join(dir, 'no-such-ca.pem');
    assert.throws(() => clientFor('tls-missing-ca'), (err: unknown) =>
      err instanceof CloudConfigError && err.message === `cannot read cacert file ${missing}: ENOENT`);

    const mgr = await ManagerProcess.start({
      args: [`--kubeconfig=${cluster().kubeconfig}`, '--controllers=network', `--neutron-cloud-config=${cloudsYaml}`, '--neutron-cloud=tls-missing-ca'],
    });
    t.after(() => mgr.stop('SIGKILL'));
    const { code } = await mgr.exited;
    assert.equal(code, 2);
    const stderr = mgr.stderr.join('');
    assert.match(stderr, new RegExp(`^error: Network controller: unusable Neutron configuration: cannot read cacert file ${missing}: ENOENT\\n`));
    assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
  });
});
