/**
 * config/crd/v2 (Network v1 + v2, storage v2, conversion: Webhook) on a real kube-apiserver of its own (startTestEnv:
 * the shared cluster keeps config/crd/bases, which every other test relies on). It installs and becomes Established;
 * v2's schema and CEL rules accept dual-stack and refuse what the CRD promises to refuse; and — why
 * config/crd/bases stays single-version until the conversion webhook runs — a v1 request needs the webhook.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';

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
});
