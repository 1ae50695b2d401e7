/**
 * config/default's optional sections, kubebuilder v4 style (issue 14): as shipped they are off; enabled as a user does
 * (the first '#' removed from each line under a '# [NAME]' marker) they render a cert-manager Issuer and Certificate
 * for the metrics Service's DNS name, the manager serving the mounted Secret with --metrics-cert-dir, a ServiceMonitor
 * that verifies the certificate (CA + serverName), and a NetworkPolicy for the metrics port. The built-in kinds
 * (Deployment, NetworkPolicy) are dry-run against the real API server (schema and field validation).
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cluster, expectStatus } from './helpers/cluster.ts';
import { kubectl } from './helpers/crds.ts';
import { enabledConfigCopy, find, render } from './helpers/kustomize.ts';

interface Container {
  args: string[];
  env: { name: string; value?: string; valueFrom?: unknown }[];
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
  ports: { name: string; containerPort: number }[];
}

interface DeploymentSpec {
  template: { metadata: { labels: Record<string, string> }; spec: { containers: Container[]; volumes: { name: string; secret?: { secretName: string; optional?: boolean; items?: unknown[] } }[] } };
}

const ns = 'ts-controller-manager-system';
const service = 'ts-controller-manager-controller-manager-metrics-service';

describe('config/default optional sections (cert-manager, Prometheus, network policy)', () => {
  test('as shipped: none of them; the manager generates its own certificate', async () => {
    const docs = await render('config/default');
    for (const kind of ['Certificate', 'Issuer', 'ServiceMonitor', 'NetworkPolicy']) assert.equal(find(docs, kind), undefined, kind);
    const dep = find(docs, 'Deployment')?.spec as unknown as DeploymentSpec;
    assert.ok(!dep.template.spec.containers[0]?.args.some((a) => a.startsWith('--metrics-cert-dir')));
    assert.deepEqual(dep.template.spec.volumes.map((v) => v.name), ['tmp'], 'no Neutron credentials mounted');
    assert.ok(!dep.template.spec.containers[0]?.env.some((e) => /^(NEUTRON_CLOUD_CONFIG|OS_CLOUD)$/.test(e.name)), 'no Neutron settings');
    for (const dir of ['config/certmanager', 'config/network-policy', 'config/prometheus']) {
      assert.match(await kubectl('kustomize', dir), /kind: /, `${dir} renders on its own`);
    }
  });

  test('enabled: Certificate for the Service name, mounted for --metrics-cert-dir, verified by the ServiceMonitor, NetworkPolicy', async (t) => {
    const dir = enabledConfigCopy();
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const docs = await render(join(dir, 'default'));

    const issuer = find(docs, 'Issuer');
    assert.deepEqual([issuer?.metadata.name, issuer?.metadata.namespace, issuer?.spec], ['ts-controller-manager-selfsigned-issuer', ns, { selfSigned: {} }]);
    const cert = find(docs, 'Certificate');
    assert.equal(cert?.metadata.namespace, ns);
    assert.deepEqual(cert?.spec?.['dnsNames'], [`${service}.${ns}.svc`, `${service}.${ns}.svc.cluster.local`]);
    assert.deepEqual(cert?.spec?.['issuerRef'], { kind: 'Issuer', name: 'ts-controller-manager-selfsigned-issuer' });
    assert.equal(cert?.spec?.['secretName'], 'metrics-server-cert');

    const deployment = find(docs, 'Deployment');
    assert.ok(deployment);
    const dep = deployment.spec as unknown as DeploymentSpec;
    const container = dep.template.spec.containers[0];
    assert.ok(container);
    assert.ok(container.args.includes('--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs'), container.args.join(' '));
    assert.ok(container.args.includes('--metrics-bind-address=:8443'));
    assert.deepEqual(container.volumeMounts.find((m) => m.name === 'metrics-certs'),
      { name: 'metrics-certs', mountPath: '/tmp/k8s-metrics-server/metrics-certs', readOnly: true });
    assert.equal(dep.template.spec.volumes.find((v) => v.name === 'metrics-certs')?.secret?.secretName, 'metrics-server-cert');

    const monitor = find(docs, 'ServiceMonitor');
    const endpoint = (monitor?.spec?.['endpoints'] as { tlsConfig: Record<string, unknown> }[] | undefined)?.[0];
    assert.deepEqual(endpoint?.tlsConfig, {
      serverName: `${service}.${ns}.svc`, insecureSkipVerify: false, ca: { secret: { name: 'metrics-server-cert', key: 'ca.crt' } },
    });

    const policy = find(docs, 'NetworkPolicy');
    assert.ok(policy);
    assert.equal(policy.metadata.namespace, ns);
    const spec = policy.spec as { podSelector: { matchLabels: Record<string, string> }; ingress: { from: unknown[]; ports: { port: number }[] }[] };
    for (const [k, v] of Object.entries(spec.podSelector.matchLabels)) assert.equal(dep.template.metadata.labels[k], v, `selects the manager Pod (${k})`);
    assert.deepEqual(spec.ingress, [{ from: [{ namespaceSelector: { matchLabels: { metrics: 'enabled' } } }], ports: [{ port: 8443, protocol: 'TCP' }] }]);
    assert.ok(container.ports.some((p) => p.containerPort === 8443), 'the policy opens the metrics port');

    // The API server accepts the built-in kinds as rendered (server-side dry run in a namespace that exists).
    const cp = cluster();
    for (const [doc, path] of [[deployment, '/apis/apps/v1/namespaces/default/deployments'], [policy, '/apis/networking.k8s.io/v1/namespaces/default/networkpolicies']] as const) {
      const body = { ...doc, metadata: { ...doc.metadata, namespace: 'default' } };
      expectStatus(await cp.request('POST', `${path}?dryRun=All&fieldValidation=Strict`, body), 201, `dry-run ${doc.kind}`);
    }
  });

  test('NEUTRON alone: clouds.yaml from the Secret neutron-cloud-config mounted read-only and named by NEUTRON_CLOUD_CONFIG; OS_CLOUD from its optional key', async (t) => {
    const dir = enabledConfigCopy(['NEUTRON']);
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const docs = await render(join(dir, 'default'));
    for (const kind of ['Certificate', 'ServiceMonitor', 'NetworkPolicy']) assert.equal(find(docs, kind), undefined, `only NEUTRON enabled: no ${kind}`);
    const deployment = find(docs, 'Deployment');
    assert.ok(deployment);
    const dep = deployment.spec as unknown as DeploymentSpec;
    const container = dep.template.spec.containers[0];
    assert.ok(container);
    assert.deepEqual(dep.template.spec.volumes.find((v) => v.name === 'neutron-cloud-config')?.secret,
      { secretName: 'neutron-cloud-config', optional: false, items: [{ key: 'clouds.yaml', path: 'clouds.yaml' }] }, 'the Secret, not renamed by the prefix');
    assert.deepEqual(container.volumeMounts.find((m) => m.name === 'neutron-cloud-config'), { name: 'neutron-cloud-config', mountPath: '/etc/openstack', readOnly: true });
    assert.deepEqual(container.env.filter((e) => /^(NEUTRON_CLOUD_CONFIG|OS_CLOUD)$/.test(e.name)), [
      { name: 'NEUTRON_CLOUD_CONFIG', value: '/etc/openstack/clouds.yaml' },
      { name: 'OS_CLOUD', valueFrom: { secretKeyRef: { name: 'neutron-cloud-config', key: 'cloud', optional: true } } },
    ]);
    const body = { ...deployment, metadata: { ...deployment.metadata, namespace: 'default' } };
    expectStatus(await cluster().request('POST', '/apis/apps/v1/namespaces/default/deployments?dryRun=All&fieldValidation=Strict', body), 201, 'dry-run Deployment');
  });
});
