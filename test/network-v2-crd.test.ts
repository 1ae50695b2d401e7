/**
 * config/crd/v2 (Network v1 + v2, storage v2, conversion: Webhook) on a real kube-apiserver of its own (startTestEnv:
 * the shared cluster keeps config/crd/bases, which every other test relies on). It installs and becomes Established;
 * v2's schema and CEL rules accept dual-stack and refuse what the CRD promises to refuse; and — why
 * config/crd/bases stays single-version until the conversion webhook runs — a v1 request needs the webhook.
 * docs/network-v2.md's storage section rests on two more: `status.storedVersions` keeps a stored version in the CRD
 * (so a rollback to config/crd/bases is refused, and v1 leaves only after the migration's step 3), and over objects
 * still stored as v1 a v2 LIST needs the webhook (v2 storage alone does not free reconciliation from it).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ApiError } from '../pkg/index.ts';
import { eventually, readCRDs, startTestEnv, type TestEnv } from '../pkg/testing/index.ts';

const repoRoot = join(import.meta.dirname, '..');

describe('config/crd/v2: Network v1 + v2', () => {
  let env: TestEnv;
  before(async () => {
    env = await startTestEnv({ crdPaths: [join(repoRoot, 'config', 'crd', 'v2')] });
  });
  after(() => env.stop());

  const post = async (version: 'v1' | 'v2', spec: unknown): Promise<{ status: number; body: string }> => {
    const res = await env.client.request('POST', `/apis/samplecrd.k8s.io/${version}/namespaces/default/networks`, {
      body: { apiVersion: `samplecrd.k8s.io/${version}`, kind: 'Network', metadata: { generateName: 'n-' }, spec },
    });
    return { status: res.status, body: await res.text() };
  };

  test('installs and is Established with both versions served, v2 stored', async () => {
    assert.deepEqual(env.crds, ['networks.samplecrd.k8s.io']);
    const crd = await env.client.json<{ spec: { versions: { name: string; served: boolean; storage: boolean }[]; conversion: { strategy: string } } }>(
      'GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io');
    assert.deepEqual(crd.spec.versions.map((v) => [v.name, v.served, v.storage]), [['v1', true, false], ['v2', true, true]]);
    assert.equal(crd.spec.conversion.strategy, 'Webhook');
  });

  test('v2 accepts single- and dual-stack; its CEL rules refuse two of a family, a gateway outside, bad CIDRs, 0 or 3 subnets', async () => {
    for (const subnets of [
      [{ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }],
      [{ cidr: '2001:db8::/64' }],
      [{ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }, { cidr: '2001:db8::/64', gateway: '2001:db8::1' }],
      [{ cidr: '2001:db8::/64' }, { cidr: '10.0.0.0/24' }],
    ]) {
      const res = await post('v2', { subnets });
      assert.equal(res.status, 201, `${JSON.stringify(subnets)} → ${res.body}`);
    }
    const cases: [unknown, RegExp][] = [
      [{ subnets: [{ cidr: '10.0.0.0/24' }, { cidr: '10.1.0.0/24' }] }, /subnets may hold at most one IPv4 and one IPv6 CIDR/],
      [{ subnets: [{ cidr: '2001:db8::/64' }, { cidr: '2001:db8:1::/64' }] }, /subnets may hold at most one IPv4 and one IPv6 CIDR/],
      [{ subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.1.1' }] }, /gateway must be an IP inside cidr/],
      [{ subnets: [{ cidr: '10.0.0.0/24', gateway: 'nope' }] }, /gateway must be an IP address/],
      [{ subnets: [{ cidr: '10.0.0.0/33' }] }, /cidr must be an IPv4 or IPv6 CIDR/],
      [{ subnets: [] }, /should have at least 1 items|must have at least 1 items/],
      [{ subnets: [{ cidr: '10.0.0.0/24' }, { cidr: '2001:db8::/64' }, { cidr: '10.1.0.0/24' }] }, /must have at most 2 items|Too many/],
      [{}, /spec.subnets: Required value/],
    ];
    for (const [spec, message] of cases) {
      const res = await post('v2', spec);
      assert.equal(res.status, 422, `${JSON.stringify(spec)} → ${res.body}`);
      assert.match(res.body, message);
    }
  });

  test('a v1 request needs the conversion webhook (none runs here): why config/crd/bases stays single-version for now', async () => {
    const res = await post('v1', { cidr: '10.0.0.0/24' });
    assert.ok(res.status >= 500, `v1 create without a conversion webhook → ${String(res.status)} ${res.body}`);
    assert.match(res.body, /conversion webhook/i);
  });

  test('status.storedVersions guards the migration: config/crd/bases over the v2 CRD is refused; v1 cannot leave the CRD while listed, only after step 3', async () => {
    const path = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io';
    type Version = { name: string; served: boolean; storage: boolean };
    type Crd = { metadata: { resourceVersion?: string }; spec: { versions: Version[] }; status?: { storedVersions?: string[] } };
    const get = (): Promise<Crd> => env.client.json<Crd>('GET', path);
    const put = async (change: (crd: Crd) => Crd): Promise<ApiError | Crd> =>
      env.client.json<Crd>('PUT', path, { body: change(await get()) }).catch((err: unknown) => {
        if (err instanceof ApiError) return err;
        throw err;
      });
    const storedVersions = (versions: string[]): Promise<unknown> =>
      env.client.json('PATCH', `${path}/status`, { body: { status: { storedVersions: versions } }, contentType: 'application/merge-patch+json' });
    assert.deepEqual((await get()).status?.storedVersions, ['v2'], 'a fresh install of config/crd/v2 has stored only v2');

    // A rollback by applying the single-version v1 CRD: refused, v2 is stored (docs/network-v2.md, storage version).
    const [bases] = readCRDs([join(repoRoot, 'config', 'crd', 'bases', 'samplecrd.k8s.io_networks.yaml')]);
    const rollback = await put((crd) => ({ ...bases, metadata: { ...bases?.metadata, resourceVersion: crd.metadata.resourceVersion } } as unknown as Crd));
    assert.ok(rollback instanceof ApiError && rollback.status === 422 && /storedVersions/.test(rollback.message), `rollback: ${JSON.stringify(rollback).slice(0, 300)}`);

    // As after an upgrade from config/crd/bases: v1 objects may be in etcd. v1 cannot be dropped from the CRD…
    await storedVersions(['v1', 'v2']);
    const onlyV2 = (crd: Crd): Crd => ({ ...crd, spec: { ...crd.spec, versions: crd.spec.versions.filter((v) => v.name === 'v2') } });
    const refused = await put(onlyV2);
    assert.ok(refused instanceof ApiError && refused.status === 422 && /storedVersions/.test(refused.message), `v1 dropped while stored: ${JSON.stringify(refused).slice(0, 300)}`);
    // …until status.storedVersions no longer lists it (step 3, after every object was rewritten as v2).
    await storedVersions(['v2']);
    const dropped = await put(onlyV2);
    assert.ok(!(dropped instanceof ApiError), `v1 dropped after step 3: ${JSON.stringify(dropped).slice(0, 300)}`);
    assert.deepEqual(dropped.spec.versions.map((v) => v.name), ['v2']);
  });
});

describe('config/crd/v2 over objects stored as v1 (an upgrade from config/crd/bases), with no conversion webhook', () => {
  let env: TestEnv;
  before(async () => {
    env = await startTestEnv({ crdPaths: [join(repoRoot, 'config', 'crd', 'bases', 'samplecrd.k8s.io_networks.yaml')] });
  });
  after(() => env.stop());
  const networks = (version: string): string => `/apis/samplecrd.k8s.io/${version}/namespaces/default/networks`;

  test('a v2 LIST needs the conversion webhook while any object is still stored as v1 (one stored as v2 reads without it): v2 storage alone does not free reconciliation from the webhook', async () => {
    await env.client.json('POST', networks('v1'), { body: { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'old' }, spec: { cidr: '10.0.0.0/24' } } });
    // The upgrade: config/crd/v2 applied over it (not installCRDs, which would wait for a v2 LIST to answer).
    const [v2] = readCRDs([join(repoRoot, 'config', 'crd', 'v2')]);
    await env.client.json('PATCH', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io',
      { body: v2, contentType: 'application/apply-patch+yaml', query: { fieldManager: 'test', force: 'true' } });
    await eventually(async () => (await env.client.json<{ spec: { versions: unknown[] } }>('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io')).spec.versions.length === 2 &&
      env.client.json('POST', networks('v2'), { query: { dryRun: 'All' }, body: { apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { name: 'probe' }, spec: { subnets: [{ cidr: '10.2.0.0/24' }] } } }).then(() => true),
    { message: 'v2 served' });
    // Written after the switch: stored as v2, no conversion needed.
    await env.client.json('POST', networks('v2'), { body: { apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { name: 'new' }, spec: { subnets: [{ cidr: '10.1.0.0/24' }] } } });
    // The controller's v2 LIST: the v1-stored object must be converted, and no webhook answers.
    const listed = await env.client.json('GET', networks('v2')).then(() => 'listed', (err: unknown) => err instanceof ApiError ? err.message : String(err));
    assert.match(listed, /conversion webhook/i, 'a v2 LIST over a v1-stored object fails without the webhook');
    // The object stored as v2 reads as v2 without the webhook: what needs it is each object still stored as v1.
    assert.deepEqual((await env.client.json<{ spec: unknown }>('GET', `${networks('v2')}/new`)).spec, { subnets: [{ cidr: '10.1.0.0/24' }] });
    await assert.rejects(env.client.json('GET', `${networks('v2')}/old`), /conversion webhook/i);
  });
});
