/**
 * What an operator sees, end to end (issue 24): a real Prometheus (Debian's package) scrapes the real manager — every
 * controller on, leader election on, inside a 1 GiB memory cgroup like a container — whose Network controller talks
 * to a real neutron-server behind a real Keystone (hack/neutron/up.sh, NEUTRON_AUTH=keystone), and evaluates the
 * shipped alerts (config/prometheus/rules; this test's copy shortens every `for:` to 5 s).
 *
 *  0. A Foo without deploymentName (a user's mistake) logs one warn line without a stack, no error line.
 *  1. Every query of every dashboard in config/grafana returns at least one series — the Networks dashboard's
 *     *Not Ready* stat (no series while every Network is Ready) during step 3's outage, the others on the healthy
 *     manager. No query is `… or vector(0)` (test/observability-counts.test.ts), so data means the metric exists.
 *  2. On the healthy manager no alert expression is true at any rule evaluation from its fifth successful scrape
 *     until the outage (the `ALERTS` series Prometheus records for pending and firing alerts stays empty over that range), so
 *     no alert would fire with any `for:` — over that period (≈ 30 s), not over the real `for:` windows.
 *  3. neutron-server is stopped (its processes, not Keystone): a Network created meanwhile fails to reconcile, and
 *     NeutronUnavailable goes to firing in Prometheus's own /api/v1/alerts while KeystoneUnavailable stays silent
 *     (Keystone still answers); once neutron-server is back, the controller's own retry succeeds and the alert
 *     returns to inactive (/api/v1/rules), the Network becomes Ready and NetworksNotReady is inactive again.
 *     NetworksNotReady (reason NeutronUnavailable) and TsControllerManagerReconcileErrors (network) fire during the
 *     outage too; with the manager stopped at the end, TsControllerManagerDown fires.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { dump } from 'js-yaml';
import { MemoryCgroup } from './helpers/cgroup.ts';
import { cluster, expectStatus, waitFor } from './helpers/cluster.ts';
import { repoRoot } from './helpers/crds.ts';
import { dashboardQueries } from './helpers/dashboards.ts';
import { enabledConfigCopy, find, render } from './helpers/kustomize.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';
import { createNetwork, NetworkTestBed, waitReady } from './helpers/network.ts';
import { neutronProcesses } from './helpers/neutron.ts';
import { Prometheus } from './helpers/prometheus.ts';
import { shippedRuleGroups } from './helpers/rules.ts';

/** The job name the ServiceMonitor gives the scrape (the metrics Service's name), which the alerts select. */
const job = 'ts-controller-manager-controller-manager-metrics-service';
/** Target labels as the Prometheus Operator sets them for the manager's Pod. */
const podNamespace = 'ts-controller-manager-system';
const pod = 'ts-controller-manager-controller-manager-0';

interface Alert { labels: Record<string, string>; state: string }
interface RuleState { name: string; state: string; type: string }

async function alerts(prom: Prometheus): Promise<Alert[]> {
  const body = (await (await fetch(`${prom.url}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } };
  return body.data.alerts;
}

async function ruleState(prom: Prometheus, name: string): Promise<string | undefined> {
  const body = (await (await fetch(`${prom.url}/api/v1/rules?type=alert`)).json()) as { data: { groups: { rules: RuleState[] }[] } };
  return body.data.groups.flatMap((g) => g.rules).find((r) => r.name === name)?.state;
}

function runScript(script: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(repoRoot, script)], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${script} exited ${code}: ${stderr.slice(-2000)}`))));
  });
}

describe('observability: dashboards and alerts against a real Prometheus, manager and neutron-server', () => {
  let bed: NetworkTestBed;
  before(async () => {
    bed = await NetworkTestBed.start({ auth: 'keystone', timeoutMs: 20 * 60_000 });
  });
  after(async () => {
    await bed.stop();
  });

  test('the PrometheusRule renders with the PROMETHEUS-RULES section enabled, and only then', async () => {
    assert.equal(find(await render('config/default'), 'PrometheusRule'), undefined, 'off as shipped');
    const dir = enabledConfigCopy();
    try {
      const rule = find(await render(join(dir, 'default')), 'PrometheusRule');
      assert.equal(rule?.metadata.namespace, podNamespace);
      assert.equal(rule?.metadata.name, 'ts-controller-manager-controller-manager-alerts');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('every dashboard query returns data; no alert pending or firing when healthy; NeutronUnavailable fires while neutron-server is stopped and resolves after', async (t) => {
    const ns = await bed.namespace(t, 'obs');
    const cgroup = MemoryCgroup.create(`tscm-observability-${process.pid}`, 1024 * 1024 * 1024);
    t.after(() => cgroup.remove());
    const mgr = await ManagerProcess.start({
      args: [
        `--kubeconfig=${cluster().kubeconfig}`, '--leader-elect', `--leader-election-namespace=${ns}`,
        `--neutron-cloud-config=${bed.cloudsYaml}`, '--neutron-cloud=local',
      ],
      env: { WATCH_NAMESPACE: ns },
      cgroup,
    });
    t.after(() => mgr.stop('SIGKILL'));
    await mgr.waitReady({ timeoutMs: 120_000 });

    expectStatus(await cluster().request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'observed' }, spec: { deploymentName: 'observed', replicas: 1 },
    }), 201, 'Foo');
    await createNetwork(ns, 'steady', { cidr: '10.90.0.0/24', gateway: '10.90.0.1' });
    await waitReady(ns, 'steady', 1);
    // A user's spec mistake (issue 24's example): one warn line with the message, no stack, no error line.
    expectStatus(await cluster().request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'empty-dep' }, spec: { deploymentName: '', replicas: 1 },
    }), 201, 'Foo without deploymentName');
    const terminal = await mgr.waitForLog('the terminal error logged', (l) => l['name'] === 'empty-dep' && /^Reconciler error/.test(l.msg ?? ''));
    assert.equal(terminal.level, 'warn');
    assert.equal(terminal['error'], `${ns}/empty-dep: deployment name must be specified`);
    assert.doesNotMatch(JSON.stringify(terminal), /stack|\n\s+at /);
    assert.deepEqual(mgr.logs.filter((l) => l.level === 'error' && l['name'] === 'empty-dep'), []);

    // The test's copy of the alerts: every `for:` 5 s, so a state change shows within seconds.
    const dir = mkdtempSync(join(tmpdir(), 'tscm-observability-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const groups = shippedRuleGroups().map((g) => ({ ...g, rules: g.rules.map((r) => (r.for === undefined ? r : { ...r, for: '5s' })) }));
    writeFileSync(join(dir, 'alerts.yaml'), dump({ groups }));
    const prom = await Prometheus.start(t, dir, {
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: [join(dir, 'alerts.yaml')],
      scrape_configs: [{
        job_name: job,
        static_configs: [{ targets: [`127.0.0.1:${mgr.metricsPort}`], labels: { namespace: podNamespace, pod } }],
      }],
    });
    await prom.waitForSuccessfulScrapes(job, 5);
    // The healthy period starts now: before the first scrape `absent(up == 1)` (TsControllerManagerDown) is true by
    // construction, a fact of Prometheus's start, not of the manager.
    const healthyFrom = Date.now();

    // 1. Every dashboard query returns at least one series.
    const notReadyPanel = (q: { dashboard: string; panel: string }): boolean => q.dashboard === 'networks.json' && q.panel === 'Not Ready';
    const allQueries = dashboardQueries({ namespace: podNamespace, job, rateInterval: '30s' });
    const queries = allQueries.filter((q) => !notReadyPanel(q));
    const notReady = allQueries.filter(notReadyPanel);
    assert.equal(notReady.length, 1, 'the Not Ready stat, checked during the outage');
    let empty: string[] = [];
    await waitFor('every dashboard query returns a series', async () => {
      empty = [];
      for (const q of queries) if ((await prom.query(q.expr)).length === 0) empty.push(`${q.dashboard} / ${q.panel} (${q.refId}): ${q.expr}`);
      return empty.length === 0;
    }, { timeoutMs: 120_000, intervalMs: 2000 }).catch((err: unknown) => prom.withLog(new Error(`${String(err)}\nno data:\n${empty.join('\n')}`)));
    t.diagnostic(`${queries.length} of ${allQueries.length} dashboard queries with data on the healthy manager`);
    assert.equal(await prom.value(`process_memory_limit_bytes{job="${job}"}`), 1024 * 1024 * 1024, 'the cgroup limit is exported');

    // 2. Healthy: at least 30 s (and 10 more scrapes) after healthyFrom, no alert expression was true at any evaluation since then
    // (ALERTS has a sample for every evaluation at which an alert was pending or firing).
    await prom.waitForSuccessfulScrapes(job, Math.max(10, 30 - Math.floor((Date.now() - healthyFrom) / 1000)));
    const healthySeconds = Math.floor((Date.now() - healthyFrom) / 1000);
    const pendingOrFiring = await prom.query(`max_over_time(ALERTS[${healthySeconds}s])`);
    assert.deepEqual(pendingOrFiring.map((x) => `${x.metric['alertname']} ${x.metric['alertstate']}`), [],
      `no alert pending or firing at any evaluation of the ${healthySeconds} s healthy period`);
    t.diagnostic(`healthy: no alert pending or firing over ${healthySeconds} s of 1 s rule evaluations`);
    assert.equal(await ruleState(prom, 'NeutronUnavailable'), 'inactive');

    // 3. neutron-server stopped (Keystone keeps running): the next Neutron requests get no answer.
    for (const pid of neutronProcesses(bed.neutron.dir)) process.kill(pid, 'SIGTERM');
    await waitFor('neutron-server stopped', () => neutronProcesses(bed.neutron.dir).length === 0, { timeoutMs: 60_000 });
    const stoppedAt = Date.now();
    await createNetwork(ns, 'during-outage', { cidr: '10.91.0.0/24' });
    const firing = await waitFor('NeutronUnavailable firing in /api/v1/alerts', async () =>
      (await alerts(prom)).find((a) => a.labels['alertname'] === 'NeutronUnavailable' && a.state === 'firing'), { timeoutMs: 120_000 }).catch(prom.withLog);
    assert.deepEqual([firing.labels['api'], firing.labels['pod'], firing.labels['namespace'], firing.labels['severity']], ['neutron', pod, podNamespace, 'critical']);
    t.diagnostic(`NeutronUnavailable firing ${Date.now() - stoppedAt} ms after neutron-server stopped`);
    assert.equal((await alerts(prom)).find((a) => a.labels['alertname'] === 'KeystoneUnavailable'), undefined, 'Keystone still answers: not blamed');
    // The Not Ready stat has data now that a Network is not Ready (1. above).
    await waitFor('the Not Ready stat returns a series', async () => (await prom.query(notReady[0]?.expr ?? '')).some((x) => Number(x.value[1]) >= 1),
      { timeoutMs: 60_000 }).catch(prom.withLog);
    // Its consequences, as the operator sees them: the new Network NeutronUnavailable, the controller failing.
    for (const name of ['NetworksNotReady', 'TsControllerManagerReconcileErrors']) {
      const a = await waitFor(`${name} firing`, async () => (await alerts(prom)).find((x) => x.labels['alertname'] === name && x.state === 'firing'), { timeoutMs: 60_000 })
        .catch(prom.withLog);
      if (name === 'NetworksNotReady') assert.equal(a.labels['reason'], 'NeutronUnavailable');
      else assert.equal(a.labels['controller'], 'network');
    }

    // neutron-server back (same state dir and port): the controller's retry succeeds and the alert resolves.
    await runScript('hack/neutron/up.sh', { ...process.env, NEUTRON_DIR: bed.neutron.dir, NEUTRON_AUTH: 'keystone' });
    assert.equal(readFileSync(join(bed.neutron.dir, 'port'), 'utf8').trim(), new URL(bed.neutron.endpoint).port, 'same port as before');
    const back = Date.now();
    await waitFor('NeutronUnavailable inactive again', async () => (await ruleState(prom, 'NeutronUnavailable')) === 'inactive', { timeoutMs: 240_000 })
      .catch(prom.withLog);
    t.diagnostic(`NeutronUnavailable inactive ${Date.now() - back} ms after neutron-server returned`);
    await waitReady(ns, 'during-outage', 1);
    // The outage's other consequences clear too once the Network is Ready (the reconcile error ratio keeps its 5 min
    // window, so TsControllerManagerReconcileErrors — also firing in this copy with `for: 5s` — is not waited for).
    await waitFor('NetworksNotReady inactive once the Network is Ready', async () => (await ruleState(prom, 'NetworksNotReady')) === 'inactive', { timeoutMs: 60_000 });
    assert.equal((await alerts(prom)).find((a) => a.labels['alertname'] === 'NeutronUnavailable'), undefined);

    // And the manager gone: TsControllerManagerDown fires.
    assert.equal(await ruleState(prom, 'TsControllerManagerDown'), 'inactive');
    await mgr.stop('SIGTERM');
    await waitFor('TsControllerManagerDown firing', async () => (await alerts(prom)).some((a) => a.labels['alertname'] === 'TsControllerManagerDown' && a.state === 'firing'), { timeoutMs: 60_000 })
      .catch(prom.withLog);
  });
});
