/**
 * The Helm chart (dist/chart, docs/helm.md) is config/ in another form (issue 34):
 *  - it is exactly what hack/gen-chart.ts makes of today's config/ (a change to config/ without regenerating fails);
 *  - `helm template` with each variant's values (hack/chart.ts: default, namespaced, sharded, certmanager, prometheus,
 *    prometheus+certmanager, prometheus-rules, network-policy, neutron) gives the same objects, field by field, as
 *    `kubectl kustomize` of that overlay or section — after removing only the documented differences (Helm's labels,
 *    the Namespace object); a failure lists every differing field;
 *  - `helm lint` is clean; values.schema.json rejects a wrong type, an unknown key and a value out of its enum with
 *    Helm's message naming the field;
 *  - the chart-only values (more watched namespaces, image, log level, controllers, metrics off, leader election off,
 *    Grafana dashboards, another release name) render what docs/helm.md says;
 *  - everything rendered with every switch on is accepted by a real kube-apiserver (startTestEnv) in a server-side
 *    dry run with strict field validation, with the project's and cert-manager's CRDs installed (the Prometheus
 *    Operator's kinds are not: no CRDs for them here; their fields are held to config/prometheus's by the comparison).
 * No cluster is needed but for the dry run. helm is built by hack/build-tools.sh (`make tools`).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { loadAll } from 'js-yaml';
import {
  chartDir, diffFields, identity, kustomizeBuild, normalise, releaseName, releaseNamespace, repoRoot, toolDirs, variants, type K8sObject,
} from '../hack/chart.ts';
import { staleFiles } from '../hack/gen-chart.ts';
import { startTestEnv } from '../pkg/testing/index.ts';

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
interface Container { args: string[]; env: { name: string; value?: string; valueFrom?: unknown }[]; image: string; imagePullPolicy?: string; resources: unknown }
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

  test('every switch on: the API server accepts all of it (server-side dry run, strict field validation)', async (t) => {
    const env = await startTestEnv({ crdPaths: [join(repoRoot, 'config', 'crd', 'bases'), certManagerCrds] });
    t.after(() => env.stop());
    const objects = await template(allOn);
    const kubectl = (args: string[], input?: string): Promise<string> => new Promise((resolve, reject) => {
      const child = execFile(kubectlBin, ['--kubeconfig', env.kubeconfigPath, ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
      child.stdin?.end(input ?? '');
    });
    await kubectl(['create', 'namespace', releaseNamespace]);
    for (const ns of allOn.watch.namespaces) await kubectl(['create', 'namespace', ns]);
    const operatorKinds = new Set(['ServiceMonitor', 'PrometheusRule']);
    const checked = objects.filter((o) => o.kind !== 'CustomResourceDefinition' && !operatorKinds.has(o.kind));
    const out = await kubectl(['apply', '--server-side', '--dry-run=server', '--validate=strict', '-f', '-'], checked.map((o) => JSON.stringify(o)).join('\n'));
    const lines = out.trim().split('\n');
    t.diagnostic(`${lines.length} objects accepted in a server-side dry run: ${[...new Set(checked.map((o) => o.kind))].join(', ')}`);
    assert.equal(lines.length, checked.length, out);
    assert.ok(checked.some((o) => o.kind === 'Certificate') && checked.some((o) => o.kind === 'NetworkPolicy') && checked.some((o) => o.kind === 'Deployment'));
  });
});

/** Every switch of the chart on (the dry run's and lint's values). */
const allOn = {
  replicas: 3, sharding: { enabled: true }, watch: { scope: 'namespaced', namespaces: ['team-a'] }, certManager: { enabled: true },
  prometheus: { serviceMonitor: { enabled: true }, rules: { enabled: true } }, networkPolicy: { enabled: true }, neutron: { enabled: true },
  grafana: { dashboards: { enabled: true } }, logLevel: 'debug', image: { repository: 'ts-controller-manager', tag: 'v1', pullPolicy: 'IfNotPresent' },
};
