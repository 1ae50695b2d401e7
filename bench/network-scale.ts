/**
 * Network scale measurement (not a test; not part of `make test`): creates N Networks at once in a fresh namespace,
 * with the real manager (`node cmd/manager/main.ts --controllers=network`, WATCH_NAMESPACE=<ns>) running as its own
 * process against a real neutron-server (hack/neutron/up.sh in a private state dir), and measures how long until every
 * Network is Ready=True — then how long until all of them are deleted again (Neutron networks gone, finalizers
 * removed). As the reference, the same run first measures Neutron's raw rate with the same number of requests in
 * flight: N network creates (POST /v2.0/networks), then N network + subnet creates (the least Neutron work one
 * Network needs), then N network deletes. Neutron's per-project quota (100 networks, 100 subnets by default) is lifted
 * first.
 *
 *   node bench/network-scale.ts [--networks 200] [--network-concurrency 8] [--clients 50] [--cluster-dir DIR] [--auth noauth|keystone]
 *                               [--db sqlite|mariadb] [--neutron-api-workers N]
 *
 * --auth keystone: neutron-server behind a real Keystone (hack/neutron/up.sh NEUTRON_AUTH=keystone); the manager uses
 * the password cloud `local` (project k8s), the raw reference sends a token of the same user, and the k8s project's
 * quota is lifted with an admin token. keystonemiddleware caches validated tokens for 300 s (its default, as clouds run
 * it: NEUTRON_TOKEN_CACHE_TIME=300); without the cache every Neutron request waited for a Keystone validation, which
 * took 35-40 s on this 2-core machine under load (see bench/README.md).
 *
 * --db: neutron-server's database (hack/neutron/up.sh NEUTRON_DB). Default: mariadb with --auth keystone — real clouds
 * run Neutron on MySQL/MariaDB, never on SQLite, and SQLite takes one writer at a time, answering concurrent writes
 * with 500/409 "database is locked" — and sqlite otherwise (the fast default of the tests).
 * --neutron-api-workers: neutron-server's api_workers (NEUTRON_API_WORKERS); default up.sh's (0: the API in the parent process).
 *
 * Cluster: --cluster-dir, else $TSCM_CLUSTER_DIR / $CLUSTER_DIR when they hold a running control plane, else a fresh
 * full-mode control plane in a temporary directory (stopped at the end). Each --network-concurrency value (comma list)
 * gets its own namespace and manager. Times are measured from the first create request; progress is observed through
 * an informer in this process. Counted through Neutron's API (every page, `project_id` = the manager's project, a
 * fresh token per look): after Ready, duplicates (a UID with more than one network, a second network of a Network's
 * name — e.g. an untagged create that committed late —, a second subnet) and UIDs without a network; after the
 * deletes, leaks (every network and subnet of the project that was not there before the Networks were created).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BenchResults, val } from './results.ts';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { Registry } from 'prom-client';
import type { Network } from '../pkg/apis/samplecrd/v1/types.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { networkResource } from '../pkg/controllers/network/desired.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import type { ControlPlane } from '../test/cluster/controlplane.ts';
import { benchControlPlane, log, runAll } from './common.ts';
import { ManagerProcess, metricValue } from '../test/helpers/managerprocess.ts';
import { keystoneToken, neutronApi, startNeutron } from '../test/helpers/neutron.ts';

const { values: args } = parseArgs({
  options: {
    networks: { type: 'string', default: '200' },
    'network-concurrency': { type: 'string', default: '8' },
    clients: { type: 'string', default: '50' },
    'cluster-dir': { type: 'string' },
    'timeout-seconds': { type: 'string', default: '1800' },
    auth: { type: 'string', default: 'noauth' },
    db: { type: 'string' },
    'neutron-api-workers': { type: 'string' },
  },
});
/** Malformed flags: one line, exit 2. */
function usage(message: string): never {
  process.stderr.write(`network-scale: ${message}\n`);
  process.exit(2);
}
if (args.auth !== 'noauth' && args.auth !== 'keystone') usage(`--auth must be noauth or keystone, not '${args.auth}'`);
const N = Number(args.networks);
const clients = Number(args.clients);
const workerCounts = (args['network-concurrency'] ?? '8').split(',').map(Number);
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const auth = args.auth === 'keystone' ? 'keystone' : 'noauth';
const dbFlag = args.db ?? (auth === 'keystone' ? 'mariadb' : 'sqlite');
if (dbFlag !== 'sqlite' && dbFlag !== 'mariadb') usage(`--db must be sqlite or mariadb, not '${dbFlag}'`);
const db: 'sqlite' | 'mariadb' = dbFlag;
const apiWorkers = args['neutron-api-workers'] === undefined ? undefined : Number(args['neutron-api-workers']);
if (apiWorkers !== undefined && !(Number.isInteger(apiWorkers) && apiWorkers >= 0)) usage(`--neutron-api-workers must be a number, not '${args['neutron-api-workers']}'`);
/** Headers of every raw request (a Keystone token with --auth keystone). */
let rawHeaders: Record<string, string> = {};

async function waitUntil(what: string, probe: () => boolean | Promise<boolean>, deadline: number): Promise<number | undefined> {
  while (!(await probe())) {
    if (performance.now() > deadline) {
      log(`gave up waiting for ${what}`);
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 50)); // polling a benchmark's progress
  }
  return performance.now();
}

interface Row { what: string; objects: number; ms: number | undefined }

type Json = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * Neutron as the manager's project sees it, listed through Neutron's API (every page) with a fresh token per look
 * (a 1 000-Network run can outlive a token) and an explicit `project_id` filter: what duplicates and leaks are
 * counted in.
 */
interface ProjectScope {
  readonly project: string;
  inProject(): Promise<{ networks: Json[]; subnets: Json[] }>;
}

function projectScope(endpoint: string, project: string, headers: () => Promise<Record<string, string>>): ProjectScope {
  return {
    project,
    async inProject() {
      const api = neutronApi(endpoint, await headers());
      return { networks: await api.networks({ project_id: project }), subnets: await api.subnets({ project_id: project }) };
    },
  };
}

/** One raw Neutron request with a generous timeout (a loaded neutron-server can take well over 10 s). */
async function raw<T>(endpoint: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(endpoint + path, {
    method, headers: { accept: 'application/json', ...rawHeaders, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON (an HTML error page): keep the text
  }
  return { status: res.status, body: parsed as T };
}

/** Retryable answers of the raw reference, counted per status. */
interface Failures { total: number; byStatus: Map<number, number> }

function describeFailures(f: Failures): string {
  if (f.total === 0) return '0 requests answered 500/409/503';
  return `${f.total} requests answered ${[...f.byStatus].map(([s, c]) => `${s}: ${c}`).join(', ')} and were retried after 20-50 ms`;
}

/**
 * Neutron's raw rate: N network creates, N network+subnet creates, N deletes; `inFlight` requests at a time. A busy
 * neutron-server answers some writes with 500/409/503 (on SQLite: "database is locked"; on MariaDB: a deadlock it did
 * not retry itself): like any client, the reference retries those after a short randomised pause (20-50 ms, so a
 * locked database cannot burn the failure budget in a busy loop) and counts them. More than 10 N of them fail the run.
 */
async function neutronReference(endpoint: string, inFlight: number): Promise<{ rows: Row[]; failures: Failures }> {
  const failures: Failures = { total: 0, byStatus: new Map() };
  const until = async <T>(want: number, what: string, call: () => Promise<{ status: number; body: T }>): Promise<T> => {
    for (;;) {
      const r = await call();
      if (r.status === want) return r.body;
      if (r.status !== 500 && r.status !== 409 && r.status !== 503) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
      // Out of VXLAN ids (ml2 vni_ranges): no retry can help.
      if (JSON.stringify(r.body).includes('NoNetworkAvailable')) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
      failures.byStatus.set(r.status, (failures.byStatus.get(r.status) ?? 0) + 1);
      if (++failures.total > 10 * N) throw new Error(`${what}: too many failures (${describeFailures(failures)})`);
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 30)); // a client's backoff before a retry
    }
  };
  const ids: string[] = [];
  const createNet = async (name: string): Promise<string> => {
    const b = await until<{ network: { id: string } }>(201, 'POST network', () => raw(endpoint, 'POST', '/v2.0/networks', { network: { name } }));
    ids.push(b.network.id);
    return b.network.id;
  };
  log(`reference: ${N} raw Neutron network creates (${inFlight} in flight)`);
  const netMs = await runAll(N, inFlight, (i) => createNet(`bench-raw-${i}`));
  log(`reference: ${N} raw Neutron network + subnet creates (${inFlight} in flight)`);
  const bothMs = await runAll(N, inFlight, async (i) => {
    const id = await createNet(`bench-raw2-${i}`);
    await until(201, 'POST subnet', () => raw(endpoint, 'POST', '/v2.0/subnets', {
      subnet: { network_id: id, cidr: `10.${200 + Math.floor(i / 256)}.${i % 256}.0/24`, ip_version: 4 },
    }));
  });
  log(`reference: ${ids.length} raw Neutron network deletes (${inFlight} in flight)`);
  const delMs = await runAll(ids.length, inFlight, (i) => until(204, 'DELETE network', async () => {
    const r = await raw(endpoint, 'DELETE', `/v2.0/networks/${ids[i]}`);
    return r.status === 404 ? { ...r, status: 204 } : r; // a retried delete whose first attempt did happen
  }));
  return {
    failures,
    rows: [
      { what: `Neutron raw: network creates (${inFlight} in flight)`, objects: N, ms: netMs },
      { what: `Neutron raw: network + subnet creates (${inFlight} in flight)`, objects: N, ms: bothMs },
      { what: `Neutron raw: network deletes, half with a subnet (${inFlight} in flight)`, objects: ids.length, ms: delMs },
    ],
  };
}

async function networkRun(cp: ControlPlane, rest: RestClient, scope: ProjectScope, cloudsYaml: string, workers: number): Promise<{ rows: Row[]; notes: string; counts: Record<string, number> }> {
  const ns = `bench-net-w${workers}-${Date.now().toString(36)}`;
  const start = await scope.inProject();
  const before = { networkIds: new Set(start.networks.map((n) => str(n['id']))), subnetIds: new Set(start.subnets.map((n) => str(n['id']))) };
  await rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
  const manager = await ManagerProcess.start({
    args: ['--controllers=network', `--network-concurrency=${workers}`, `--neutron-cloud-config=${cloudsYaml}`, '--neutron-cloud=local', '--log-level=warn'],
    env: { KUBECONFIG: cp.kubeconfig, WATCH_NAMESPACE: ns },
  });
  const factory = new SharedInformerFactory({ client: rest, namespaces: [ns] });
  const networks = factory.informerFor<Network>(networkResource);
  const ac = new AbortController();
  const informers = factory.run(ac.signal);
  try {
    await manager.waitReady({ timeoutMs: 60_000 });
    await factory.waitForCacheSync({ timeoutMs: 60_000 });
    const ready = (): number => networks.lister().list(ns).filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;

    log(`creating ${N} Networks in ${ns} (${clients} in flight; manager --network-concurrency=${workers})`);
    const t0 = performance.now();
    const deadline = t0 + timeoutMs;
    const createMs = await runAll(N, clients, (i) => rest.json('POST', `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks`, {
      body: { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: `net-${i}` }, spec: { cidr: `10.${100 + Math.floor(i / 256)}.${i % 256}.0/24`, gateway: `10.${100 + Math.floor(i / 256)}.${i % 256}.1` } },
    }));
    const tReady = await waitUntil(`all ${N} Networks Ready`, () => ready() >= N, deadline);
    log(tReady === undefined ? `only ${ready()} Ready` : `all Ready after ${((tReady - t0) / 1000).toFixed(1)} s`);

    // No duplicates: exactly one Neutron network per Network UID (tag), one per name (an untagged network of the same
    // name would be a create that committed late), one subnet per network — all in the manager's project.
    const uids = networks.lister().list(ns).map((n) => `k8s-uid:${n.metadata?.uid ?? ''}`);
    const ours = (n: Json): boolean => str(n['name']).startsWith(`${ns}/`) || ((n['tags'] ?? []) as string[]).some((t) => uids.includes(t));
    const afterReady = await scope.inProject();
    const mine = afterReady.networks.filter(ours);
    const byTag = new Map<string, number>();
    const byName = new Map<string, number>();
    for (const n of mine) {
      for (const tag of (n['tags'] ?? []) as string[]) byTag.set(tag, (byTag.get(tag) ?? 0) + 1);
      byName.set(str(n['name']), (byName.get(str(n['name'])) ?? 0) + 1);
    }
    const mineIds = new Set(mine.map((n) => str(n['id'])));
    const subnetsPer = new Map<string, number>();
    for (const s of afterReady.subnets) if (mineIds.has(str(s['network_id']))) subnetsPer.set(str(s['network_id']), (subnetsPer.get(str(s['network_id'])) ?? 0) + 1);
    const duplicates = uids.filter((t) => (byTag.get(t) ?? 0) > 1).length;
    const sameName = [...byName.values()].reduce((sum, c) => sum + c - 1, 0);
    const extraSubnets = [...subnetsPer.values()].reduce((sum, c) => sum + Math.max(0, c - 1), 0);
    const missing = uids.filter((t) => (byTag.get(t) ?? 0) === 0).length;

    const metrics = await manager.metrics();
    const value = (name: string, labels: Record<string, string> = {}): number => metricValue(metrics, name, labels) ?? 0;
    const reconciles = value('controller_runtime_reconcile_time_seconds_count', { controller: 'network' });
    const meanMs = reconciles > 0 ? (1000 * value('controller_runtime_reconcile_time_seconds_sum', { controller: 'network' })) / reconciles : 0;
    const errors = value('controller_runtime_reconcile_errors_total', { controller: 'network' });

    log(`deleting the ${N} Networks`);
    const d0 = performance.now();
    await rest.json('DELETE', `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks`);
    const tGone = await waitUntil('all Networks deleted', () => networks.lister().list(ns).length === 0, d0 + timeoutMs);
    // Leaks: every network and subnet of the project that was not there before the Networks were created.
    const afterDelete = await scope.inProject();
    const leakedNetworks = afterDelete.networks.filter((n) => !before.networkIds.has(str(n['id']))).length;
    const leakedSubnets = afterDelete.subnets.filter((n) => !before.subnetIds.has(str(n['id']))).length;

    const label = `Network controller (${workers} worker${workers > 1 ? 's' : ''})`;
    return {
      counts: { duplicates, sameName, extraSubnets, missing, leakedNetworks, leakedSubnets, reconciles, errors },
      rows: [
        { what: `API server: Network creates (${clients} in flight)`, objects: N, ms: createMs },
        { what: `${label}: all Ready=True`, objects: N, ms: tReady === undefined ? undefined : tReady - t0 },
        { what: `${label}: all deleted (Neutron network gone, finalizer removed)`, objects: N, ms: tGone === undefined ? undefined : tGone - d0 },
      ],
      notes: `--network-concurrency=${workers}: ${reconciles} reconciles until Ready (mean ${meanMs.toFixed(0)} ms, ${errors} errors); ` +
        `Neutron (listed in project ${scope.project}): ${duplicates} UIDs with more than one network, ${sameName} extra networks of a Network's name, ` +
        `${extraSubnets} extra subnets, ${missing} UIDs without a network after Ready; ` +
        `after the deletes ${leakedNetworks} networks and ${leakedSubnets} subnets left (leaks); ` +
        `manager ${value('process_cpu_seconds_total').toFixed(1)} CPU seconds`,
    };
  } finally {
    ac.abort();
    await informers;
    await manager.stop('SIGTERM', 30_000);
    await rest.json('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
  }
}

function table(rows: Row[]): string {
  const head = ['measurement', 'objects', 'seconds', 'objects/s'];
  const body = rows.map((r) => [
    r.what, String(r.objects), r.ms === undefined ? 'timeout' : (r.ms / 1000).toFixed(2),
    r.ms === undefined ? '–' : (r.objects / (r.ms / 1000)).toFixed(1),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  return [line(head), `|${widths.map((w, i) => (i === 0 ? ` ${'-'.repeat(w)} ` : ` ${'-'.repeat(w - 1)}: `)).join('|')}|`, ...body.map(line)].join('\n');
}

async function main(): Promise<void> {
  const results = new BenchResults('network-scale', {
    name: 'raw Neutron',
    description: 'the same number of network (+ subnet) creates and network deletes sent straight to the same neutron-server, ' +
      'as the manager\'s user, with as many requests in flight as the manager has workers, in the same run',
  });
  results.set('config', { auth, db, networks: val(N, 'count') });
  const { cp, owned } = await benchControlPlane(args['cluster-dir']);
  log(`starting a private neutron-server (auth: ${auth}, db: ${db})`);
  const neutron = await startNeutron({
    auth, db, timeoutMs: 20 * 60_000, ...(apiWorkers !== undefined && { apiWorkers }), ...(auth === 'keystone' && { tokenCacheSeconds: 300 }),
  });
  const neutronWorkers = /^api_workers = (\d+)$/m.exec(readFileSync(join(neutron.dir, 'neutron.conf'), 'utf8'))?.[1] ?? '?';
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'network-scale-bench' });
  try {
    // Neutron's default quota is 100 networks and 100 subnets per project (noauth: every request is fake_project_id).
    let project = 'fake_project_id';
    let scope = projectScope(neutron.endpoint, project, () => Promise.resolve({}));
    if (auth === 'keystone') {
      const k8s = await keystoneToken(neutron.keystoneUrl ?? '', 'k8s');
      project = String(((k8s.body['token'] as Record<string, unknown>)['project'] as Record<string, unknown>)['id']);
      rawHeaders = { 'x-auth-token': (await keystoneToken(neutron.keystoneUrl ?? '', 'admin')).token };
      const quota = await raw(neutron.endpoint, 'PUT', `/v2.0/quotas/${project}`, { quota: { network: -1, subnet: -1 } });
      if (quota.status !== 200) throw new Error(`raising the Neutron quota: HTTP ${quota.status} ${JSON.stringify(quota.body)}`);
      rawHeaders = { 'x-auth-token': k8s.token }; // the reference acts as the manager's user, in its project
      const keystoneUrl = neutron.keystoneUrl ?? '';
      scope = projectScope(neutron.endpoint, project, async () => ({ 'x-auth-token': (await keystoneToken(keystoneUrl, 'k8s')).token }));
    } else {
      const quota = await raw(neutron.endpoint, 'PUT', `/v2.0/quotas/${project}`, { quota: { network: -1, subnet: -1 } });
      if (quota.status !== 200) throw new Error(`raising the Neutron quota: HTTP ${quota.status} ${JSON.stringify(quota.body)}`);
    }
    execFileSync(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '--force-conflicts', '-k', 'config/crd'],
      { cwd: join(import.meta.dirname, '..'), stdio: 'ignore' });
    execFileSync(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/networks.samplecrd.k8s.io'],
      { stdio: 'ignore' });
    const rows: Row[] = [];
    const notes: string[] = [];
    for (const workers of workerCounts) {
      const ref = await neutronReference(neutron.endpoint, workers);
      rows.push(...ref.rows);
      notes.push(`Neutron auth: ${auth}, database: ${db}, api_workers = ${neutronWorkers}. Neutron raw reference (${workers} in flight): ${describeFailures(ref.failures)}`);
      const run = await networkRun(cp, rest, scope, neutron.cloudsYaml, workers);
      rows.push(...run.rows);
      notes.push(run.notes);
      results.sampleLoad();
      const secs = (r: Row | undefined): number | undefined => (r?.ms === undefined ? undefined : r.ms / 1000);
      const [rawNet, rawBoth, rawDel] = ref.rows.map(secs);
      const [creates, ready, deleted] = run.rows.map(secs);
      const put = (k: string, v: number | undefined, unit: string): void => { if (v !== undefined) results.set(`workers${workers}.${k}`, val(v, unit)); };
      put('raw.networkCreates', rawNet, 's');
      put('raw.networkSubnetCreates', rawBoth, 's');
      put('raw.deletes', rawDel, 's');
      put('raw.deletePerNetwork', rawDel === undefined ? undefined : rawDel / (ref.rows[2]?.objects ?? 1), 's');
      put('networkCreates', creates, 's');
      put('ready', ready, 's');
      put('deleted', deleted, 's');
      put('deletePerNetwork', deleted === undefined ? undefined : deleted / N, 's');
      if (ready !== undefined && rawBoth !== undefined) results.set(`workers${workers}.readyOverRaw`, val(ready / rawBoth, '×'));
      for (const [k, v] of Object.entries(run.counts)) results.set(`workers${workers}.counts.${k}`, val(v, 'count'));
    }
    results.write();
    process.stdout.write(`\n${table(rows)}\n\n${notes.join('\n')}\n` +
      `(times from the first request; Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
  } finally {
    await neutron.stop();
    if (owned) await cp.stop();
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`network-scale bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
