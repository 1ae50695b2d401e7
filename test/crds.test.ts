/**
 * The CRDs in config/crd install on the real API server, their schemas and CEL rules reject invalid objects, and the
 * samples in config/samples are valid.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs, kubectl } from './helpers/crds.ts';

describe('config/crd', () => {
  before(installCRDs);

  test('the sample Foo and Network are accepted', async (t) => {
    const ns = await testNamespace(t, 'samples');
    const out = await waitFor('samples applied', async () => kubectl('apply', '-n', ns, '-k', 'config/samples'));
    assert.match(out, /foo.samplecontroller.k8s.io\/example-foo created/);
    assert.match(out, /network.samplecrd.k8s.io\/example-network created/);
    const table = await kubectl('get', '-n', ns, 'fo', 'example-foo');
    assert.match(table, /DEPLOYMENT\s+DESIRED\s+AVAILABLE\s+AGE/);
    assert.match(table, /example-foo\s+example-foo\s+1\s/);
  });

  test('schema-invalid Foos are rejected by the API server', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'foo-invalid');
    const create = (spec: unknown): Promise<{ status: number; body: string }> => cp.request('POST',
      `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`,
      { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { generateName: 'f-' }, spec });
    for (const spec of [{ deploymentName: 'd', replicas: 0 }, { deploymentName: 'd', replicas: 11 }, { deploymentName: 'd', replicas: 'two' }]) {
      const res = await create(spec);
      assert.equal(res.status, 422, `${JSON.stringify(spec)} → ${res.body}`);
    }
    // An empty deploymentName passes the schema (as upstream); the controller must cope with it.
    expectStatus(await create({ replicas: 1 }), 201, 'Foo without deploymentName');
  });

  test('Network CEL rules reject a bad CIDR and a gateway outside the CIDR', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'net-invalid');
    const create = (spec: unknown): Promise<{ status: number; body: string }> => cp.request('POST',
      `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks`,
      { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { generateName: 'n-' }, spec });
    const cases: [unknown, RegExp][] = [
      [{ cidr: '10.0.0.0/33' }, /cidr must be an IPv4 or IPv6 CIDR/],
      [{ cidr: 'not-a-cidr' }, /cidr must be an IPv4 or IPv6 CIDR/],
      [{ cidr: '10.0.0.0/24', gateway: '10.0.1.1' }, /gateway must be an IP inside cidr/],
      [{ cidr: '10.0.0.0/24', gateway: 'nope' }, /gateway must be an IP address/],
      [{ gateway: '10.0.0.1' }, /spec.cidr: Required value/],
    ];
    for (const [spec, message] of cases) {
      const res = await create(spec);
      assert.equal(res.status, 422, `${JSON.stringify(spec)} → ${res.body}`);
      assert.match(res.body, message);
    }
    expectStatus(await create({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }), 201, 'valid IPv4 Network');
    expectStatus(await create({ cidr: 'fd00:1::/64', gateway: 'fd00:1::1' }), 201, 'valid IPv6 Network');
  });
});
