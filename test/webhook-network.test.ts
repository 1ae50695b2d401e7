/**
 * The manager binary serves the Network webhooks (issue 32 items 4, 5): a private kube-apiserver (startTestEnv) with
 * the two-version Network CRD of config/crd/v2 and the ValidatingWebhookConfiguration of config/webhook, both pointed
 * by url at the spawned `cmd/manager/main.ts` on 127.0.0.1 instead of the Service; the manager runs in the
 * self-managed certificate mode (a serving certificate with the IP SAN 127.0.0.1, its CA injected by the manager into
 * the webhook configuration and the CRD). Shown: the manager picks the served version (v2) for its Network
 * controller; an invalid v1 Network is refused at create with validateNetwork's message (the controller's InvalidSpec
 * message); a v1 and a v2 read of one object agree; a dual-stack v2 object read as v1 keeps its second subnet in the
 * annotation and written back as v1 loses nothing; a metadata-only update of a Network the webhook would refuse passes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { load } from 'js-yaml';
import { v2SubnetsAnnotation } from '../pkg/apis/samplecrd/v2/conversion.ts';
import { validateNetwork } from '../pkg/controllers/network/validation.ts';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import { freePort } from '../pkg/testing/process.ts';
import { waitFor } from './helpers/cluster.ts';
import { ManagerProcess, metricValue } from './helpers/managerprocess.ts';

const repoRoot = join(import.meta.dirname, '..');
const vwcName = 'tscm-test-network-validation';
/** validateNetwork of a test object (the cast: the test's loose object type; validateNetwork reads apiVersion, metadata, spec). */
const validate = (n: Net): ReturnType<typeof validateNetwork> => validateNetwork(n as unknown as Parameters<typeof validateNetwork>[0]);

interface ClientConfig { url?: string; service?: { path?: string }; caBundle?: string }
interface Crd { metadata: { name: string }; spec: { conversion: { webhook: { clientConfig: ClientConfig } } }; status?: { conditions?: { type: string; status: string }[] } }
interface Vwc { metadata: { name: string }; webhooks: { name: string; clientConfig: ClientConfig }[] }
interface Net { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string>; labels?: Record<string, string> }; spec: Record<string, unknown> }

describe('the manager serves the Network webhooks (validation v1 + v2, conversion) from its own certificate', () => {
  let env: TestEnv;
  let mgr: ManagerProcess;
  let port: number;

  before(async () => {
    env = await startTestEnv();
    port = await freePort();
    const url = (path: string): string => `https://127.0.0.1:${String(port)}${path}`;
    // The shipped manifests, with clientConfig.service replaced by the manager's loopback url.
    const crd = load(readFileSync(join(repoRoot, 'config/crd/v2/samplecrd.k8s.io_networks.yaml'), 'utf8')) as Crd;
    crd.spec.conversion.webhook.clientConfig = { url: url('/convert') };
    await env.client.json('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: crd });
    const vwc = load(readFileSync(join(repoRoot, 'config/webhook/manifests.yaml'), 'utf8')) as Vwc;
    vwc.metadata.name = vwcName;
    for (const w of vwc.webhooks) w.clientConfig = { url: url(w.clientConfig.service?.path ?? '') };
    await env.client.json('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', { body: vwc });
    await waitFor('Network CRD Established', async () => {
      const c = await env.client.json<Crd>('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io');
      return c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True');
    });

    mgr = await ManagerProcess.start({
      args: [
        '--controllers=network', '--webhook-cert-mode=self-managed', `--webhook-bind-address=127.0.0.1:${String(port)}`, '--webhook-cert-ips=127.0.0.1',
        '--webhook-cert-secret=webhook-server-cert', '--webhook-service-name=webhook-service', `--webhook-validating-configurations=${vwcName}`,
      ],
      env: { KUBECONFIG: env.kubeconfigPath, POD_NAMESPACE: 'default' },
    });
    try {
      await mgr.waitReady({ timeoutMs: 60_000 });
    } catch (err) {
      const readyz = await mgr.probe('/readyz?verbose');
      throw new Error(`${(err as Error).message}\n/readyz: ${readyz.body}\nlast log lines:\n${mgr.logs.slice(-15).map((l) => JSON.stringify(l)).join('\n')}`, { cause: err });
    }
    // The manager injected its CA into both targets (what the API server needs to call it).
    await waitFor('CA bundle injected into the CRD and the webhook configuration', async () => {
      const c = await env.client.json<Crd>('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io');
      const v = await env.client.json<Vwc>('GET', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${vwcName}`);
      return Boolean(c.spec.conversion.webhook.clientConfig.caBundle) && v.webhooks.every((w) => Boolean(w.clientConfig.caBundle));
    });
  });
  after(async () => {
    if (mgr) assert.equal(await mgr.stop(), 0, mgr.stderr.join(''));
    await env?.stop();
  });

  const path = (version: 'v1' | 'v2', name = ''): string => `/apis/samplecrd.k8s.io/${version}/namespaces/default/networks${name ? `/${name}` : ''}`;
  const send = async (method: 'POST' | 'PUT', version: 'v1' | 'v2', body: unknown, name = ''): Promise<{ status: number; text: string }> => {
    const res = await env.client.request(method, path(version, name), { body });
    return { status: res.status, text: await res.text() };
  };
  /** The `message` of a Status answer. */
  const messageOf = (text: string): string => (JSON.parse(text) as { message?: string }).message ?? '';
  const get = (version: 'v1' | 'v2', name: string): Promise<Net> => env.client.json<Net>('GET', path(version, name));
  const net = (version: 'v1' | 'v2', name: string, spec: Record<string, unknown>): Net =>
    ({ apiVersion: `samplecrd.k8s.io/${version}`, kind: 'Network', metadata: { name, namespace: 'default' }, spec });

  test('the controller follows the served API: v2; the webhook paths are served by the binary', async () => {
    await mgr.waitForLog('network version chosen', (l) => l.networkVersion !== undefined);
    assert.equal(mgr.logs.find((l) => l.networkVersion !== undefined)?.networkVersion, 'v2');
    const serving = mgr.logs.find((l) => l.msg === 'serving the Network webhooks');
    assert.deepEqual(serving?.paths, ['/convert', '/validate-samplecrd-k8s-io-v1-network', '/validate-samplecrd-k8s-io-v2-network']);
  });

  test('an invalid v1 Network is refused at create with the controller\'s InvalidSpec message; a valid one is created', async () => {
    const bad = net('v1', 'bad-multicast', { cidr: '224.1.0.0/16' });
    const expected = validate(bad);
    assert.ok(!expected.ok);
    const res = await send('POST', 'v1', bad);
    assert.equal(res.status, 403, res.text);
    assert.equal(messageOf(res.text), `admission webhook "vnetwork-v1.samplecrd.k8s.io" denied the request: ${expected.message}`);
    assert.match(expected.message, /^spec\.cidr 224\.1\.0\.0\/16 is a multicast range/, 'the v1 field path');

    const badV2 = net('v2', 'bad-v2', { subnets: [{ cidr: '10.0.0.0/24' }, { cidr: 'ff05::/64' }] });
    const expectedV2 = validate(badV2);
    assert.ok(!expectedV2.ok);
    const resV2 = await send('POST', 'v2', badV2);
    assert.equal(resV2.status, 403, resV2.text);
    assert.equal(messageOf(resV2.text), `admission webhook "vnetwork-v2.samplecrd.k8s.io" denied the request: ${expectedV2.message}`);

    assert.equal((await send('POST', 'v1', net('v1', 'good', { cidr: '10.1.0.0/24', gateway: '10.1.0.1' }))).status, 201);
    // Written as v1, stored as v2 (converted by the manager), read back in both versions.
    assert.deepEqual((await get('v2', 'good')).spec, { subnets: [{ cidr: '10.1.0.0/24', gateway: '10.1.0.1' }] });
    assert.deepEqual((await get('v1', 'good')).spec, { cidr: '10.1.0.0/24', gateway: '10.1.0.1' });
  });

  test('v1 and v2 reads of a dual-stack Network agree; written back as v1 it loses nothing; a v1 edit keeps the other subnet', async () => {
    const subnets = [{ cidr: '10.2.0.0/24', gateway: '10.2.0.1' }, { cidr: '2001:db8:2::/64', gateway: '2001:db8:2::1' }];
    assert.equal((await send('POST', 'v2', net('v2', 'dual', { subnets }))).status, 201);
    const asV1 = await get('v1', 'dual');
    assert.deepEqual(asV1.spec, { cidr: '10.2.0.0/24', gateway: '10.2.0.1' });
    const carried = JSON.parse(asV1.metadata.annotations?.[v2SubnetsAnnotation] ?? '{}') as { subnets?: unknown[] };
    assert.deepEqual(carried.subnets, [subnets[1]], 'the second subnet travels in the annotation');
    // The same object listed in both versions: same uid, resourceVersion, generation.
    const asV2 = await get('v2', 'dual');
    assert.equal(asV1.metadata.resourceVersion, asV2.metadata.resourceVersion);
    assert.deepEqual(asV2.spec, { subnets });
    assert.equal(asV2.metadata.annotations?.[v2SubnetsAnnotation], undefined, 'v2 never shows the annotation');

    // Written back unchanged as v1 (a v1 client's read-modify-write with no change): v2 is unchanged.
    const put = await send('PUT', 'v1', asV1, 'dual');
    assert.equal(put.status, 200, put.text);
    assert.deepEqual((await get('v2', 'dual')).spec, { subnets });

    // A v1 edit of the first subnet's gateway: v2 gets it and keeps the IPv6 subnet.
    const edited = await get('v1', 'dual');
    edited.spec['gateway'] = '10.2.0.254';
    assert.equal((await send('PUT', 'v1', edited, 'dual')).status, 200);
    assert.deepEqual((await get('v2', 'dual')).spec, { subnets: [{ cidr: '10.2.0.0/24', gateway: '10.2.0.254' }, subnets[1]] });

    // A v1 edit that makes the carried IPv6 subnet's family clash is refused (checked in its v2 form).
    const clash = await get('v1', 'dual');
    clash.spec = { cidr: '2001:db8:9::/64' };
    const refused = await send('PUT', 'v1', clash, 'dual');
    assert.equal(refused.status, 403, refused.text);
    const why = validate(clash);
    assert.ok(!why.ok);
    assert.equal(messageOf(refused.text), `admission webhook "vnetwork-v1.samplecrd.k8s.io" denied the request: ${why.message}`);
  });

  test('an update that leaves the spec alone passes even if the spec is invalid (finalizers and deletion are never blocked)', async () => {
    // Made invalid behind the webhook's back: the configuration is deleted for one create, as if the Network predated it.
    const saved = await env.client.json<Vwc & { metadata: { resourceVersion?: string; uid?: string; creationTimestamp?: string; managedFields?: unknown } }>(
      'GET', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${vwcName}`);
    await env.client.json('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${vwcName}`);
    await waitFor('the invalid Network is admitted without the webhook', async () =>
      (await send('POST', 'v1', net('v1', 'predates', { cidr: '224.2.0.0/16' }))).status === 201);
    const { resourceVersion: _rv, uid: _uid, creationTimestamp: _ct, managedFields: _mf, ...meta } = saved.metadata;
    await env.client.json('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', { body: { ...saved, metadata: meta } });
    // The webhook is back (its caBundle kept from the copy): a spec change to another invalid value is refused…
    await waitFor('the webhook refuses a spec change again', async () => {
      const cur = await get('v1', 'predates');
      cur.spec = { cidr: '224.3.0.0/16' };
      return (await send('PUT', 'v1', cur, 'predates')).status === 403;
    });
    // …while a label change (spec untouched) passes, and so does the delete.
    const cur = await get('v1', 'predates');
    cur.metadata.labels = { touched: 'yes' };
    const res = await send('PUT', 'v1', cur, 'predates');
    assert.equal(res.status, 200, res.text);
    const del = await env.client.request('DELETE', path('v1', 'predates'));
    assert.equal(del.status, 200, await del.text());
  });

  test('without a certificate source (the default) the binary registers no webhook and opens no webhook port', async () => {
    const quietPort = await freePort();
    const quiet = await ManagerProcess.start({
      args: ['--controllers=network', `--webhook-bind-address=127.0.0.1:${String(quietPort)}`],
      env: { KUBECONFIG: env.kubeconfigPath, POD_NAMESPACE: 'default' },
    });
    try {
      await quiet.waitReady({ timeoutMs: 60_000 });
      const readyz = await quiet.probe('/readyz?verbose');
      assert.doesNotMatch(readyz.body, /webhook-server/, 'no webhook-server readiness check');
      const refused = await new Promise<boolean>((resolve) => {
        const sock = connect({ host: '127.0.0.1', port: quietPort }, () => { sock.destroy(); resolve(false); });
        sock.on('error', () => resolve(true));
      });
      assert.ok(refused, `nothing listens on ${String(quietPort)}`);
      assert.equal(quiet.logs.find((l) => l.msg === 'serving the Network webhooks'), undefined);
      // Discovery does not depend on the webhooks: it still follows the served API.
      assert.equal(quiet.logs.find((l) => l.networkVersion !== undefined)?.networkVersion, 'v2');
    } finally {
      assert.equal(await quiet.stop(), 0, quiet.stderr.join(''));
    }
  });

  test('the webhook requests are counted by the binary (controller_runtime_webhook_requests_total)', async () => {
    const text = await mgr.metrics();
    for (const p of ['/convert', '/validate-samplecrd-k8s-io-v1-network', '/validate-samplecrd-k8s-io-v2-network']) {
      assert.ok((metricValue(text, 'controller_runtime_webhook_requests_total', { webhook: p, code: '200' }) ?? 0) > 0, p);
    }
  });
});
