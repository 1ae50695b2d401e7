/**
 * config/default's optional sections, kubebuilder v4 style (issue 14): as shipped they are off; enabled as a user does
 * (the first '#' removed from each line under a '# [NAME]' marker) they render a cert-manager Issuer and Certificate
 * for the metrics Service's DNS name, the manager serving the mounted Secret with --metrics-cert-dir, a ServiceMonitor
 * that verifies the certificate (CA + serverName), and NetworkPolicies for the metrics port (labelled namespaces only) and
 * the webhook port (every source: the API server must still reach the webhooks). The built-in kinds
 * (Deployment, NetworkPolicy) are dry-run against the real API server (schema and field validation).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cluster, expectStatus } from './helpers/cluster.ts';
import { kubectl, repoRoot } from './helpers/crds.ts';
import { enabledConfigCopy, find, render, type Doc } from './helpers/kustomize.ts';
import {
  defaultConversionCrds, defaultValidatingWebhookConfigurations, defaultWebhookCertSecret, defaultWebhookServiceName, parseOptions,
} from '../cmd/manager/options.ts';

interface Container {
  args: string[];
  env: { name: string; value?: string; valueFrom?: unknown }[];
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
  ports: { name: string; containerPort: number }[];
}

interface DeploymentSpec {
  template: { metadata: { labels: Record<string, string> }; spec: { containers: Container[]; volumes: { name: string; secret?: { secretName: string; optional?: boolean; items?: unknown[] } }[] } };
}

const run = promisify(execFile);
const ns = 'ts-controller-manager-system';
const service = 'ts-controller-manager-controller-manager-metrics-service';
const webhookService = 'ts-controller-manager-webhook-service';

interface Webhook {
  name: string; admissionReviewVersions: string[]; failurePolicy: string; matchPolicy: string; sideEffects: string; timeoutSeconds: number;
  clientConfig: { service: { name: string; namespace: string; path: string; port?: number } };
  rules: { apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[] }[];
}
type AnyDoc = Doc & { metadata: { annotations?: Record<string, string> }; webhooks?: Webhook[]; rules?: { resources: string[]; resourceNames?: string[]; verbs: string[] }[] };
const byName = (docs: Doc[], kind: string, name: string): AnyDoc | undefined => docs.find((d) => d.kind === kind && d.metadata.name === name);

/** The fields of a NetworkPolicy the manager's policies use (matchLabels selectors, ports, namespace sources). */
interface NetworkPolicy {
  metadata: { name: string; namespace: string };
  spec: {
    podSelector: { matchLabels?: Record<string, string> }; policyTypes: string[];
    ingress?: { from?: { namespaceSelector?: { matchLabels?: Record<string, string> } }[]; ports?: { port: number; protocol: string }[] }[];
  };
}
const labelsMatch = (sel: Record<string, string> | undefined, labels: Record<string, string>): boolean =>
  Object.entries(sel ?? {}).every(([k, v]) => labels[k] === v);
const policySelects = (p: NetworkPolicy, podLabels: Record<string, string>): boolean => labelsMatch(p.spec.podSelector.matchLabels, podLabels);
/**
 * NetworkPolicy ingress semantics for TCP to `port` of a Pod in the policies' namespace: not isolated (no Ingress
 * policy selects it) → allowed; else allowed when some selecting policy has a rule whose ports include `port` (or
 * list none) and whose `from` is empty (every source) or has a namespaceSelector matching the source's namespace —
 * a source outside the Pod network matches only an empty `from` (the manifests use no ipBlock).
 */
function ingressAllowed(policies: NetworkPolicy[], podLabels: Record<string, string>, port: number,
  source: { namespaceLabels: Record<string, string> } | 'outside the Pod network'): boolean {
  const selecting = policies.filter((p) => policySelects(p, podLabels) && p.spec.policyTypes.includes('Ingress'));
  if (selecting.length === 0) return true;
  return selecting.some((p) => (p.spec.ingress ?? []).some((rule) =>
    (rule.ports === undefined || rule.ports.some((rp) => rp.port === port && rp.protocol === 'TCP'))
    && (rule.from === undefined || rule.from.length === 0
      || (source !== 'outside the Pod network' && rule.from.some((f) => f.namespaceSelector !== undefined && labelsMatch(f.namespaceSelector.matchLabels, source.namespaceLabels))))));
}
const crdConversion = (docs: Doc[]): { strategy: string; webhook: { clientConfig: { service: Record<string, unknown>; caBundle?: string }; conversionReviewVersions: string[] } } | undefined =>
  byName(docs, 'CustomResourceDefinition', 'networks.samplecrd.k8s.io')?.spec?.['conversion'] as never;

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

  test('as shipped: the Network webhooks are on — Service 443→9443, validation of v1 and v2, conversion through the Service, self-managed certificate with its RBAC', async () => {
    const docs = await render('config/default');
    const svc = byName(docs, 'Service', webhookService);
    assert.ok(svc, 'the webhook Service');
    assert.equal(svc.metadata.namespace, ns);
    // The targetPort names the container port: only a Pod that serves the webhooks is an endpoint (a Pod without it,
    // e.g. the one an upgrade turning the webhooks on replaces, is not; docs/helm.md).
    assert.deepEqual(svc.spec?.['ports'], [{ name: 'webhook', port: 443, protocol: 'TCP', targetPort: 'webhook-server' }]);
    const dep = find(docs, 'Deployment');
    assert.ok(dep);
    const spec = dep.spec as unknown as DeploymentSpec;
    for (const [k, v] of Object.entries(svc.spec?.['selector'] as Record<string, string>)) assert.equal(spec.template.metadata.labels[k], v, `the Service selects the manager Pod (${k})`);
    const container = spec.template.spec.containers[0];
    assert.ok(container);
    assert.ok(container.ports.some((p) => p.name === 'webhook-server' && p.containerPort === 9443));
    assert.ok(container.args.includes('--webhook-cert-mode=self-managed'), container.args.join(' '));
    assert.ok(!container.args.some((a) => a.startsWith('--webhook-cert-path')));

    // Both versions validated, each by its own path, as the webhook docs and the API server require.
    const vwc = byName(docs, 'ValidatingWebhookConfiguration', defaultValidatingWebhookConfigurations);
    assert.ok(vwc?.webhooks, 'the ValidatingWebhookConfiguration has the name the manager injects into by default');
    assert.deepEqual(vwc.webhooks.map((w) => [w.name, w.clientConfig.service, w.rules[0]?.apiVersions, w.rules[0]?.operations, w.rules[0]?.resources]), [
      ['vnetwork-v1.samplecrd.k8s.io', { name: webhookService, namespace: ns, path: '/validate-samplecrd-k8s-io-v1-network' }, ['v1'], ['CREATE', 'UPDATE'], ['networks']],
      ['vnetwork-v2.samplecrd.k8s.io', { name: webhookService, namespace: ns, path: '/validate-samplecrd-k8s-io-v2-network' }, ['v2'], ['CREATE', 'UPDATE'], ['networks']],
    ]);
    for (const w of vwc.webhooks) {
      assert.deepEqual([w.failurePolicy, w.sideEffects, w.admissionReviewVersions, w.timeoutSeconds, w.matchPolicy], ['Fail', 'None', ['v1'], 15, 'Exact'], w.name);
    }
    // The Network CRD: both versions, stored as v2, converted by the manager behind the Service.
    const crd = byName(docs, 'CustomResourceDefinition', 'networks.samplecrd.k8s.io');
    assert.deepEqual((crd?.spec?.['versions'] as { name: string; storage: boolean }[]).map((v) => [v.name, v.storage]), [['v1', false], ['v2', true]]);
    assert.deepEqual(crdConversion(docs), {
      strategy: 'Webhook',
      webhook: { clientConfig: { service: { name: webhookService, namespace: ns, path: '/convert', port: 443 } }, conversionReviewVersions: ['v1'] },
    });
    assert.deepEqual([defaultConversionCrds, defaultWebhookServiceName], ['networks.samplecrd.k8s.io', webhookService], 'the flags\' defaults are the rendered names');

    // The self-managed mode's RBAC names exactly what the flags' defaults name (resourceNames are not prefixed).
    const secretRole = byName(docs, 'Role', 'ts-controller-manager-webhook-cert-role');
    assert.equal(secretRole?.metadata.namespace, ns);
    assert.deepEqual(secretRole?.rules?.map((r) => [r.resources, r.resourceNames, r.verbs]), [
      [['secrets'], [defaultWebhookCertSecret], ['get', 'update']], [['secrets'], undefined, ['create']],
    ]);
    const injector = byName(docs, 'ClusterRole', 'ts-controller-manager-webhook-cert-injector-role');
    assert.deepEqual(injector?.rules?.map((r) => [r.resources, r.resourceNames, r.verbs]), [
      [['validatingwebhookconfigurations'], [defaultValidatingWebhookConfigurations], ['get', 'update']],
      [['customresourcedefinitions'], [defaultConversionCrds], ['get', 'update']],
    ]);
    for (const kind of ['RoleBinding', 'ClusterRoleBinding']) {
      const b = docs.find((d) => d.kind === kind && d.metadata.name.startsWith('ts-controller-manager-webhook-cert')) as unknown as { subjects: { name: string; namespace: string }[] } | undefined;
      assert.deepEqual(b?.subjects, [{ kind: 'ServiceAccount', name: 'ts-controller-manager-controller-manager', namespace: ns }], kind);
    }

    // The API server accepts the webhook configuration and the Service as rendered (server-side dry run).
    const cp = cluster();
    expectStatus(await cp.request('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?dryRun=All&fieldValidation=Strict', vwc), 201, 'dry-run VWC');
    expectStatus(await cp.request('POST', '/api/v1/namespaces/default/services?dryRun=All&fieldValidation=Strict', { ...svc, metadata: { ...svc.metadata, namespace: 'default' } }), 201, 'dry-run Service');
  });

  test('[WEBHOOK-CERTMANAGER] instead of the self-managed certificate: Certificate serving-cert for the webhook Service, mounted for --webhook-cert-path, CA injected by cert-manager', async (t) => {
    const dir = enabledConfigCopy(['CERTMANAGER', 'WEBHOOK-CERTMANAGER']);
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    // As the header says: comment out the line under [WEBHOOK-SELFMANAGED].
    const kfile = join(dir, 'default', 'kustomization.yaml');
    writeFileSync(kfile, readFileSync(kfile, 'utf8').replace(/^(# \[WEBHOOK-SELFMANAGED\].*\n)- \.\.\/webhook-selfmanaged$/m, '$1#- ../webhook-selfmanaged'));
    const docs = await render(join(dir, 'default'));
    assert.equal(docs.find((d) => d.metadata.name.startsWith('ts-controller-manager-webhook-cert')), undefined, 'no self-managed RBAC');
    const cert = byName(docs, 'Certificate', 'ts-controller-manager-serving-cert');
    assert.equal(cert?.metadata.namespace, ns);
    assert.deepEqual(cert?.spec?.['dnsNames'], [`${webhookService}.${ns}.svc`, `${webhookService}.${ns}.svc.cluster.local`]);
    assert.equal(cert?.spec?.['secretName'], 'webhook-server-cert');
    const inject = `${ns}/ts-controller-manager-serving-cert`;
    const vwc = byName(docs, 'ValidatingWebhookConfiguration', defaultValidatingWebhookConfigurations);
    assert.equal(vwc?.metadata.annotations?.['cert-manager.io/inject-ca-from'], inject);
    const crd = byName(docs, 'CustomResourceDefinition', 'networks.samplecrd.k8s.io');
    assert.equal(crd?.metadata.annotations?.['cert-manager.io/inject-ca-from'], inject);
    assert.equal(byName(docs, 'CustomResourceDefinition', 'foos.samplecontroller.k8s.io')?.metadata.annotations?.['cert-manager.io/inject-ca-from'], undefined);
    const dep = find(docs, 'Deployment')?.spec as unknown as DeploymentSpec;
    const container = dep.template.spec.containers[0];
    assert.ok(container);
    // The cert-manager flags come last: they win over the self-managed mode (the last occurrence of a flag does).
    assert.deepEqual(container.args.slice(-2), ['--webhook-cert-mode=dir', '--webhook-cert-path=/tmp/k8s-webhook-server/serving-certs']);
    assert.deepEqual(container.volumeMounts.find((m) => m.name === 'webhook-certs'), { name: 'webhook-certs', mountPath: '/tmp/k8s-webhook-server/serving-certs', readOnly: true });
    assert.deepEqual(dep.template.spec.volumes.find((v) => v.name === 'webhook-certs')?.secret, { secretName: 'webhook-server-cert', optional: false });
    const o = parseOptions(container.args, { POD_NAMESPACE: ns });
    assert.deepEqual([o.webhookCertMode, o.webhookCertPath], ['dir', '/tmp/k8s-webhook-server/serving-certs'], 'the binary parses the rendered flags as the cert-manager mode');
  });

  test('enabled: Certificate for the Service name, mounted for --metrics-cert-dir, verified by the ServiceMonitor; NetworkPolicies: metrics only from labelled namespaces, the webhook port from the API server', async (t) => {
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

    const policies = docs.filter((d) => d.kind === 'NetworkPolicy') as unknown as NetworkPolicy[];
    assert.deepEqual(policies.map((p) => [p.metadata.name, p.metadata.namespace]),
      [['ts-controller-manager-allow-metrics-traffic', ns], ['ts-controller-manager-allow-webhook-traffic', ns]]);
    const podLabels = dep.template.metadata.labels;
    assert.ok(policies.every((p) => policySelects(p, podLabels)), 'both select the manager Pod');
    assert.ok(container.ports.some((p) => p.containerPort === 8443), 'the metrics port is the container\'s');
    // What an enforcing CNI lets through to the manager Pod once the policies select it.
    assert.equal(ingressAllowed(policies, podLabels, 8443, { namespaceLabels: { metrics: 'enabled' } }), true, 'a scraper in a namespace labelled metrics=enabled');
    assert.equal(ingressAllowed(policies, podLabels, 8443, { namespaceLabels: {} }), false, 'a Pod of any other namespace');
    assert.equal(ingressAllowed(policies, podLabels, 8443, 'outside the Pod network'), false, 'anything outside the Pod network');
    // The API server calls the webhooks through the webhook Service (→ its targetPort) from outside the Pod network
    // on most clusters: no namespace or Pod selector can name it. Without allow-webhook-traffic every Network write
    // failed once the metrics policy isolated the Pod (failurePolicy: Fail).
    const targetPort = (byName(docs, 'Service', webhookService)?.spec?.['ports'] as { targetPort: string }[] | undefined)?.[0]?.targetPort;
    const webhookPort = container.ports.find((p) => p.name === targetPort)?.containerPort;
    assert.equal(webhookPort, 9443, `the Service's targetPort ${targetPort ?? '?'} is the container's port 9443`);
    assert.equal(ingressAllowed(policies, podLabels, webhookPort, 'outside the Pod network'), true, 'the API server reaches the webhook port');

    // The API server accepts the built-in kinds as rendered (server-side dry run in a namespace that exists).
    const cp = cluster();
    const networkPolicies = '/apis/networking.k8s.io/v1/namespaces/default/networkpolicies';
    for (const [doc, path] of [[deployment, '/apis/apps/v1/namespaces/default/deployments'], ...policies.map((p) => [p as unknown as Doc, networkPolicies] as const)] as const) {
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

describe('make build-installer (kubebuilder\'s one-file install)', () => {
  test('writes exactly what config/default renders, with the image IMG, and fails without writing when kustomize fails', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tscm-installer-'));
    try {
      const out = join(dir, 'dist', 'install.yaml');
      const kubectlBin = join(cluster().k8sBinDir, 'kubectl');
      const img = 'registry.example.com/tscm:v1.2.3';
      await run('make', ['-s', 'build-installer', `IMG=${img}`, `INSTALLER=${out}`, `KUBECTL=${kubectlBin}`], { cwd: repoRoot });
      const installed = loadAll(readFileSync(out, 'utf8')) as Doc[];
      const rendered = await render('config/default');
      assert.deepEqual(installed.map((d) => `${d.kind}/${d.metadata.name}`), rendered.map((d) => `${d.kind}/${d.metadata.name}`));
      const podSpec = (find(installed, 'Deployment')?.spec as { template: { spec: { containers: { image: string }[] } } } | undefined)?.template.spec;
      const images = podSpec?.containers.map((c) => c.image);
      assert.deepEqual(images, [img]);
      assert.ok(installed.some((d) => d.kind === 'CustomResourceDefinition' && d.metadata.name === 'networks.samplecrd.k8s.io'), 'the CRDs are in the file');
      // A broken kustomize build (pipefail) must fail the target and leave no half-written file behind.
      const broken = join(dir, 'broken.yaml');
      await assert.rejects(run('make', ['-s', 'build-installer', `INSTALLER=${broken}`, 'KUBECTL=false'], { cwd: repoRoot }));
      assert.deepEqual(readdirSync(dir), ['dist'], 'no file (nor a temporary one) written when the render fails');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
