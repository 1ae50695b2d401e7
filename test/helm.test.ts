/**
 * The Helm chart (dist/chart, docs/helm.md) is config/ in another form (issue 34):
 *  - it is exactly what hack/gen-chart.ts makes of today's config/ (a change to config/ without regenerating fails);
 *  - `helm template` with each variant's values (hack/chart.ts: default, namespaced, sharded, certmanager, prometheus,
 *    prometheus+certmanager, prometheus-rules, network-policy, neutron, no-webhooks, webhooks-certmanager) gives the
 *    same objects, field by field, as `kubectl kustomize` of that overlay or section — after removing only the
 *    documented differences (Helm's labels, the Namespace object, the keep annotation of the templated Network CRD); a
 *    failure lists every differing field;
 *  - under another release name and namespace, every webhook reference names the rendered object: the webhook
 *    configuration's and the CRD conversion's Service, the self-managed flags (as the binary parses them) and the RBAC's
 *    resourceNames, cert-manager's DNS names and inject-ca-from; webhooks off renders no webhook object or flag and the
 *    Network CRD of config/crd/bases; Foo's CRD is in crds/, the Network's templated with the keep policy;
 *  - `helm lint` is clean; values.schema.json rejects a wrong type, an unknown key and a value out of its enum with
 *    Helm's message naming the field;
 *  - the chart-only values (more watched namespaces, image, log level, controllers, metrics off, leader election off,
 *    Grafana dashboards, another release name) render what docs/helm.md says;
 *  - everything rendered with every switch on, the chart's CRDs included, is accepted by a real kube-apiserver
 *    (startTestEnv) in a server-side dry run with strict field validation, with cert-manager's CRDs installed (the
 *    Prometheus Operator's kinds are not: no CRDs for them here; their fields are held to config/prometheus's by the
 *    comparison).
 * No cluster is needed but for the dry run. helm is built by hack/build-tools.sh (`make tools`).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { load, loadAll } from 'js-yaml';
import {
  chartDir, diffFields, identity, keepAnnotation, kustomizeBuild, normalise, releaseName, releaseNamespace, repoRoot, toolDirs, variants, type K8sObject,
} from '../hack/chart.ts';
import { staleFiles } from '../hack/gen-chart.ts';
import { startTestEnv } from '../pkg/testing/index.ts';
import { parseOptions } from '../cmd/manager/options.ts';

const run = promisify(execFile);
let helmBin = '';
let kubectlBin = '';
let certManagerCrds = '';
const scratch = mkdtempSync(join(tmpdir(), 'tscm-helm-'));

/** Runs helm (its caches and config in the scratch directory, never the user's). */
async function helm(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(helmBin, args, {
    cwd: repoRoot, maxBuffer: 64 << 20,
    env: { ...process.env, HELM_CACHE_HOME: join(scratch, 'cache'), HELM_CONFIG_HOME: join(scratch, 'config'), HELM_DATA_HOME: join(scratch, 'data') },
  });
}

let valuesFiles = 0;
/** `helm template` of the chart with `values` (as a values file), CRDs included, as plain objects. */
async function template(values: Record<string, unknown>, opts: { release?: string; namespace?: string } = {}): Promise<K8sObject[]> {
  const file = join(scratch, `values-${valuesFiles++}.json`);
  writeFileSync(file, JSON.stringify(values));
  const { stdout } = await helm('template', opts.release ?? releaseName, chartDir, '--namespace', opts.namespace ?? releaseNamespace, '--include-crds', '-f', file);
  return (loadAll(stdout) as (K8sObject | null)[]).filter((o): o is K8sObject => o !== null);
}

/** Every field in which two sets of objects differ, by identity (an object missing on one side is one line). */
function compare(helmObjects: K8sObject[], kustomizeObjects: K8sObject[]): string[] {
  const h = new Map(normalise(helmObjects).map((o) => [identity(o), o]));
  const k = new Map(normalise(kustomizeObjects).map((o) => [identity(o), o]));
  const out: string[] = [];
  for (const id of new Set([...h.keys(), ...k.keys()])) {
    const a = h.get(id);
    const b = k.get(id);
    if (!a) out.push(`${id}: only in kustomize`);
    else if (!b) out.push(`${id}: only in helm`);
    else out.push(...diffFields(a, b).map((d) => `${id} ${d}`));
  }
  return out;
}

const find = (objects: K8sObject[], kind: string, name?: string): K8sObject | undefined =>
  objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
interface Container {
  args: string[]; env: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string } } }[]; image: string; imagePullPolicy?: string; resources: unknown;
  ports: { name: string; containerPort: number }[]; volumeMounts: { name: string; mountPath: string }[];
}
interface Volume { name: string; secret?: { secretName: string } }
const volumes = (objects: K8sObject[]): Volume[] =>
  (find(objects, 'Deployment') as unknown as { spec: { template: { spec: { volumes: Volume[] } } } }).spec.template.spec.volumes;
interface ServiceRef { name: string; namespace: string; path: string; port?: number }
interface Webhooks { webhooks: { name: string; clientConfig: { service: ServiceRef } }[] }
interface Crd { spec: { conversion?: { strategy: string; webhook?: { clientConfig: { service: ServiceRef } } }; versions: { name: string; storage: boolean }[] } }
interface Rules { rules: { resources: string[]; resourceNames?: string[]; verbs: string[] }[] }
const managerContainer = (objects: K8sObject[]): Container => {
  const d = find(objects, 'Deployment') as unknown as { spec: { template: { spec: { containers: Container[] } } } } | undefined;
  const c = d?.spec.template.spec.containers[0];
  assert.ok(c, 'the manager container');
  return c;
};

describe('Helm chart dist/chart = config/', () => {
  before(async () => {
    const tools = await toolDirs();
    helmBin = join(tools['HELM_BIN_DIR'] ?? '', 'helm');
    kubectlBin = join(tools['K8S_BIN_DIR'] ?? '', 'kubectl');
    certManagerCrds = join(tools['CERT_MANAGER_BIN_DIR'] ?? '', 'crds.yaml');
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  test('the chart is what hack/gen-chart.ts makes of config/ today', async () => {
    assert.deepEqual(await staleFiles(), [], 'dist/chart differs from config/: run `node hack/gen-chart.ts`');
  });

  for (const variant of variants) {
    test(`${variant.name}: helm template with ${JSON.stringify(variant.values)} = kubectl kustomize ${variant.overlay ? `config/${variant.overlay}` : 'config/default'}${variant.sections?.length ? ` [${variant.sections.join(', ')}]` : ''}`, async (t) => {
      const [h, k] = await Promise.all([template(variant.values), kustomizeBuild(variant, kubectlBin)]);
      const diff = compare(h, k);
      assert.deepEqual(diff, [], `differing fields (helm → kustomize):\n${diff.join('\n')}`);
      // Not vacuous: the same objects, and Helm's labels are there before normalisation.
      assert.equal(normalise(h).length, normalise(k).length);
      const deployment = find(h, 'Deployment');
      assert.equal(deployment?.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
      assert.equal(deployment?.metadata.labels?.['app.kubernetes.io/instance'], releaseName);
      t.diagnostic(`${h.length} objects from helm, ${k.length} from kustomize (its Namespace not in the chart)`);
    });
  }

  test('the comparison sees a difference: an image tag, an extra watched namespace', async () => {
    const k = await kustomizeBuild(variants[0]!, kubectlBin);
    const diff = compare(await template({ image: { repository: 'ts-controller-manager', tag: 'v9' } }), k);
    assert.deepEqual(diff.filter((d) => d.includes('image')), [
      `Deployment/${releaseNamespace}/ts-controller-manager-controller-manager spec.template.spec.containers[0].image: "ts-controller-manager:v9" → "ts-controller-manager:latest"`,
    ]);
  });

  test('helm lint: no warnings or errors, with the defaults and with every switch on', async () => {
    const file = join(scratch, 'all.json');
    writeFileSync(file, JSON.stringify(allOn));
    for (const args of [[], ['-f', file]]) {
      const { stdout } = await helm('lint', '--strict', chartDir, ...args);
      assert.match(stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, stdout);
      assert.doesNotMatch(stdout, /\[(WARNING|ERROR)\]/, stdout);
    }
  });

  test('values.schema.json: a wrong type, an unknown key, a value outside its enum fail helm template naming the field', async () => {
    const cases: [string[], RegExp][] = [
      [['--set', 'replicas=two'], /replicas.*(integer|number)/s],
      [['--set', 'replica=2'], /additional propert(y|ies) 'replica' not allowed/],
      [['--set', 'watch.scope=everywhere'], /watch\/scope|watch\.scope/],
      [['--set', 'neutron.enabled=yes'], /neutron.*boolean/s],
      [['--set', 'metrics.port=8080'], /additional propert(y|ies) 'port' not allowed/],
      [['--set', 'webhooks.certificate=vault'], /webhooks\/certificate.*self-managed/s],
      [['--set', 'webhooks.certificate=cert-manager'], /certManager\/enabled.*must be true/s],
      [['--set', 'neutron.secretName=Bad_Name'], /neutron\/secretName/],
    ];
    for (const [args, message] of cases) {
      await assert.rejects(helm('template', releaseName, chartDir, ...args), (err: Error & { stderr?: string }) => {
        assert.match(err.stderr ?? '', /values don't meet the specifications of the schema/, err.stderr);
        assert.match(err.stderr ?? '', message, err.stderr);
        return true;
      }, args.join(' '));
    }
  });

  test('chart-only values: more watched namespaces, image, log level, controllers, extra args', async () => {
    const objects = await template({
      watch: { scope: 'namespaced', namespaces: ['team-a', 'team-b'] },
      image: { repository: 'registry.example/tscm', tag: 'v1.2.3', pullPolicy: 'IfNotPresent' },
      logLevel: 'debug', controllers: '*,-network', extraArgs: ['--sync-period=1h'],
    });
    const roles = objects.filter((o) => o.kind === 'Role' && o.metadata.name === 'ts-controller-manager-manager-role').map((o) => o.metadata.namespace);
    const bindings = objects.filter((o) => o.kind === 'RoleBinding' && o.metadata.name === 'ts-controller-manager-manager-rolebinding').map((o) => o.metadata.namespace);
    assert.deepEqual(roles, [releaseNamespace, 'team-a', 'team-b']);
    assert.deepEqual(bindings, [releaseNamespace, 'team-a', 'team-b']);
    assert.equal(find(objects, 'ClusterRole', 'ts-controller-manager-manager-role'), undefined, 'no cluster-wide controller role');
    const c = managerContainer(objects);
    assert.deepEqual(c.env.find((e) => e.name === 'WATCH_NAMESPACE'), { name: 'WATCH_NAMESPACE', value: `${releaseNamespace},team-a,team-b` });
    assert.equal(c.image, 'registry.example/tscm:v1.2.3');
    assert.equal(c.imagePullPolicy, 'IfNotPresent');
    assert.deepEqual(c.args.slice(-3), ['--log-level=debug', '--controllers=*,-network', '--sync-period=1h']);
  });

  test('chart-only values: metrics disabled, leader election off, another release name, Grafana dashboards', async () => {
    const objects = await template({ metrics: { mode: 'disabled' }, leaderElection: { enabled: false }, grafana: { dashboards: { enabled: true } } }, { release: 'ops', namespace: 'ops-system' });
    const c = managerContainer(objects);
    assert.ok(c.args.includes('--metrics-bind-address=0') && !c.args.includes('--metrics-secure') && !c.args.includes('--leader-elect'), c.args.join(' '));
    assert.deepEqual(objects.filter((o) => o.kind === 'Service').map((o) => o.metadata.name), ['ops-webhook-service'], 'no metrics Service (the webhook Service only)');
    assert.ok(find(objects, 'Deployment', 'ops-controller-manager'), 'names prefixed by the release');
    const binding = find(objects, 'ClusterRoleBinding', 'ops-manager-rolebinding') as unknown as { subjects: { name: string; namespace: string }[]; roleRef: { name: string } };
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'ops-controller-manager', namespace: 'ops-system' }]);
    assert.equal(binding.roleRef.name, 'ops-manager-role');
    const dashboards = objects.filter((o) => o.kind === 'ConfigMap');
    assert.deepEqual(dashboards.map((o) => o.metadata.name).sort(), ['ops-dashboard-networks', 'ops-dashboard-runtime']);
    for (const cm of dashboards) {
      assert.equal(cm.metadata.labels?.['grafana_dashboard'], '1');
      const [file, json] = Object.entries(cm['data'] as Record<string, string>)[0]!;
      assert.equal(json, readFileSync(join(repoRoot, 'config', 'grafana', file), 'utf8').replace(/\n$/, ''), `${file} as in config/grafana`);
    }
  });

  test('another release name and namespace, self-managed certificate: every webhook reference names the rendered objects', async () => {
    const objects = await template({}, { release: 'ops', namespace: 'ops-system' });
    const service = find(objects, 'Service', 'ops-webhook-service');
    assert.equal(service?.metadata.namespace, 'ops-system');
    const vwc = find(objects, 'ValidatingWebhookConfiguration') as unknown as K8sObject & Webhooks;
    assert.equal(vwc.metadata.name, 'ops-validating-webhook-configuration');
    assert.deepEqual(vwc.webhooks.map((w) => [w.clientConfig.service.name, w.clientConfig.service.namespace]),
      [['ops-webhook-service', 'ops-system'], ['ops-webhook-service', 'ops-system']], 'the webhook configuration calls the release\'s Service');
    const crd = find(objects, 'CustomResourceDefinition', 'networks.samplecrd.k8s.io') as unknown as K8sObject & Crd;
    assert.deepEqual(crd.spec.conversion?.webhook?.clientConfig.service, { name: 'ops-webhook-service', namespace: 'ops-system', path: '/convert', port: 443 });
    assert.equal(crd.metadata.annotations?.[keepAnnotation[0]], keepAnnotation[1], 'the templated CRD is kept by helm uninstall');
    // The flags as the binary reads them name the rendered Secret (granted by the Role), Service, configuration, CRD.
    const c = managerContainer(objects);
    const o = parseOptions(c.args, { POD_NAMESPACE: 'ops-system' });
    assert.equal(o.webhookCertMode, 'self-managed');
    // The names (the rotation timing flags are not templated: their defaults, whatever they are).
    const { secretName, namespace, serviceName, ips, validatingWebhookConfigurations, mutatingWebhookConfigurations, crds } = o.webhookSelfManaged ?? {};
    assert.deepEqual({ secretName, namespace, serviceName, ips, validatingWebhookConfigurations, mutatingWebhookConfigurations, crds }, {
      secretName: 'ops-webhook-server-cert', namespace: 'ops-system', serviceName: 'ops-webhook-service', ips: [],
      validatingWebhookConfigurations: ['ops-validating-webhook-configuration'], mutatingWebhookConfigurations: [], crds: ['networks.samplecrd.k8s.io'],
    });
    const role = find(objects, 'Role', 'ops-webhook-cert-role') as unknown as K8sObject & Rules;
    assert.equal(role.metadata.namespace, 'ops-system');
    assert.deepEqual(role.rules[0]?.resourceNames, [o.webhookSelfManaged?.secretName]);
    const injector = find(objects, 'ClusterRole', 'ops-webhook-cert-injector-role') as unknown as K8sObject & Rules;
    assert.deepEqual(injector.rules.map((r) => r.resourceNames), [[vwc.metadata.name], [crd.metadata.name]]);
    for (const [kind, name] of [['RoleBinding', 'ops-webhook-cert-rolebinding'], ['ClusterRoleBinding', 'ops-webhook-cert-injector-rolebinding']] as const) {
      const b = find(objects, kind, name) as unknown as { subjects: unknown[] };
      assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name: 'ops-controller-manager', namespace: 'ops-system' }], kind);
    }
    assert.ok(c.ports.some((p) => p.name === 'webhook-server' && p.containerPort === 9443));
    // With config/'s names (the test's release) the flags are left to their defaults, as config/default does.
    assert.deepEqual(managerContainer(await template({})).args.filter((a) => a.startsWith('--webhook')), ['--webhook-cert-mode=self-managed']);
  });

  test('another release name and namespace, cert-manager certificate: the Certificate names the release\'s Service, inject-ca-from names the Certificate', async () => {
    const objects = await template({ certManager: { enabled: true }, webhooks: { certificate: 'cert-manager' } }, { release: 'ops', namespace: 'ops-system' });
    const cert = find(objects, 'Certificate', 'ops-serving-cert') as unknown as K8sObject & { spec: { dnsNames: string[]; secretName: string; issuerRef: { name: string } } };
    assert.equal(cert.metadata.namespace, 'ops-system');
    assert.deepEqual(cert.spec.dnsNames, ['ops-webhook-service.ops-system.svc', 'ops-webhook-service.ops-system.svc.cluster.local']);
    assert.ok(find(objects, 'Issuer', cert.spec.issuerRef.name), 'its Issuer rendered');
    for (const kind of ['ValidatingWebhookConfiguration', 'CustomResourceDefinition']) {
      const o = objects.find((x) => x.kind === kind && x.metadata.annotations?.['cert-manager.io/inject-ca-from']);
      assert.equal(o?.metadata.annotations?.['cert-manager.io/inject-ca-from'], 'ops-system/ops-serving-cert', kind);
    }
    assert.equal(find(objects, 'CustomResourceDefinition', 'foos.samplecontroller.k8s.io')?.metadata.annotations?.['cert-manager.io/inject-ca-from'], undefined);
    const c = managerContainer(objects);
    const o = parseOptions(c.args, { POD_NAMESPACE: 'ops-system' });
    assert.deepEqual([o.webhookCertMode, o.webhookCertPath], ['dir', '/tmp/k8s-webhook-server/serving-certs'], 'no self-managed flag left to clash with --webhook-cert-mode=dir');
    const mount = c.volumeMounts.find((m) => m.mountPath === o.webhookCertPath);
    assert.equal(volumes(objects).find((v) => v.name === mount?.name)?.secret?.secretName, cert.spec.secretName, 'the mounted Secret is the Certificate\'s');
    assert.equal(objects.filter((x) => x.metadata.name.startsWith('ops-webhook-cert')).length, 0, 'no self-managed RBAC');
  });

  test('webhooks.enabled=false: no webhook object, flag or port; the Network CRD of config/crd/bases (v1 only, no conversion); Foo\'s CRD in crds/', async () => {
    const objects = await template({ webhooks: { enabled: false } }, { release: 'ops', namespace: 'ops-system' });
    assert.deepEqual(objects.filter((o) => /webhook/i.test(`${o.kind}/${o.metadata.name}`)).map(identity), []);
    const c = managerContainer(objects);
    assert.deepEqual(c.args.filter((a) => a.startsWith('--webhook')), []);
    assert.equal(parseOptions(c.args, { POD_NAMESPACE: 'ops-system' }).webhookCertMode, 'none');
    assert.deepEqual(c.ports.map((p) => p.name), ['https-metrics', 'health']);
    const crd = find(objects, 'CustomResourceDefinition', 'networks.samplecrd.k8s.io');
    assert.ok(crd);
    const bases = load(readFileSync(join(repoRoot, 'config', 'crd', 'bases', 'samplecrd.k8s.io_networks.yaml'), 'utf8')) as K8sObject;
    const [normalised] = normalise([crd]);
    delete normalised?.metadata.labels;
    assert.deepEqual(diffFields(normalised, bases), [], 'config/crd/bases\' Network CRD');
    // Where the CRDs live: Foo's in crds/ (Helm never touches it again), the Network's from templates/ (kept).
    const chartOnly = (loadAll((await helm('template', 'ops', chartDir, '--namespace', 'ops-system')).stdout) as (K8sObject | null)[]).filter((o): o is K8sObject => o !== null);
    assert.deepEqual(chartOnly.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name), ['networks.samplecrd.k8s.io'], 'without --include-crds: the templated CRD only');
    assert.equal(find(objects, 'CustomResourceDefinition', 'foos.samplecontroller.k8s.io')?.metadata.annotations?.[keepAnnotation[0]], undefined);
  });

  test('neutron.secretName: the Deployment mounts that Secret and reads OS_CLOUD from it', async () => {
    const objects = await template({ neutron: { enabled: true, secretName: 'my-clouds' } });
    assert.deepEqual(volumes(objects).find((v) => v.name === 'neutron-cloud-config')?.secret?.secretName, 'my-clouds');
    assert.equal(managerContainer(objects).env.find((e) => e.name === 'OS_CLOUD')?.valueFrom?.secretKeyRef?.name, 'my-clouds');
  });

  test('every switch on: the API server accepts all of it (server-side dry run, strict field validation)', async (t) => {
    const env = await startTestEnv({ crdPaths: [certManagerCrds] });
    t.after(() => env.stop());
    const objects = await template(allOn);
    const kubectl = (args: string[], input?: string): Promise<string> => new Promise((resolve, reject) => {
      const child = execFile(kubectlBin, ['--kubeconfig', env.kubeconfigPath, ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
      child.stdin?.end(input ?? '');
    });
    await kubectl(['create', 'namespace', releaseNamespace]);
    for (const ns of allOn.watch.namespaces) await kubectl(['create', 'namespace', ns]);
    const operatorKinds = new Set(['ServiceMonitor', 'PrometheusRule']);
    const checked = objects.filter((o) => !operatorKinds.has(o.kind));
    const out = await kubectl(['apply', '--server-side', '--dry-run=server', '--validate=strict', '-f', '-'], checked.map((o) => JSON.stringify(o)).join('\n'));
    const lines = out.trim().split('\n');
    t.diagnostic(`${lines.length} objects accepted in a server-side dry run: ${[...new Set(checked.map((o) => o.kind))].join(', ')}`);
    assert.equal(lines.length, checked.length, out);
    for (const kind of ['Certificate', 'NetworkPolicy', 'Deployment', 'ValidatingWebhookConfiguration', 'CustomResourceDefinition']) assert.ok(checked.some((o) => o.kind === kind), kind);
  });
});

/** Every switch of the chart on (the dry run's and lint's values). */
const allOn = {
  replicas: 3, sharding: { enabled: true }, watch: { scope: 'namespaced', namespaces: ['team-a'] }, certManager: { enabled: true },
  prometheus: { serviceMonitor: { enabled: true }, rules: { enabled: true } }, networkPolicy: { enabled: true }, neutron: { enabled: true, secretName: 'clouds' },
  webhooks: { enabled: true, certificate: 'cert-manager' },
  grafana: { dashboards: { enabled: true } }, logLevel: 'debug', image: { repository: 'ts-controller-manager', tag: 'v1', pullPolicy: 'IfNotPresent' },
};
