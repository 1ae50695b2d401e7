/**
 * Issue 25 point 2, measured before deciding: what the Foo controller's Deployment writes cost the API server with
 * server-side apply instead of today's POST (create) and merge patch (replica drift). The rest of the reconcile (cache
 * reads, the status patch, Events) is the same either way, so this isolates the one difference.
 *
 *   ./node_modules/.bin/node bench/ssa-deployments.ts [--n 1000] [--pairs 2]
 *
 * A private minimal control plane (etcd + kube-apiserver; no kube-controller-manager, so nothing else writes the
 * Deployments). Rounds in ABBA order (A = today, B = SSA), `--pairs` ABBA blocks, each round in a fresh namespace:
 *  - create: N Deployments exactly as the Foo controller builds them (newDeployment of a Foo), 16 in flight, one
 *    HTTP/2 connection — A: POST; B: apply with field manager `ts-controller-manager`, force.
 *  - drift: the same N Deployments' replicas 1 → 2 — A: merge patch `{metadata:{uid}, spec:{replicas}}` (today's);
 *    B: the full desired Deployment applied again with the new replicas (an SSA controller must apply everything it
 *    owns: a partial apply would give up the other fields).
 * Per round: wall time, and the CPU seconds kube-apiserver, etcd and this process used. Medians per variant.
 */
import { mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import type { Foo } from '../pkg/apis/samplecontroller/v1alpha1/types.ts';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { newDeployment } from '../pkg/controllers/foo/desired.ts';
import { deploymentResource, type Deployment } from '../pkg/controllers/deployment/types.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { ControlPlane } from '../test/cluster/controlplane.ts';
import { log, runAll } from './common.ts';
import { procCpuMs } from './informer/stats.ts';
import { BenchResults, ratio as ratioOf, spread } from './results.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '1000' }, pairs: { type: 'string', default: '2' } } });
const n = Number(values.n);
const pairs = Number(values.pairs);
const inFlight = 16;
const fieldManager = 'ts-controller-manager';

interface Sample { wallS: number; apiserverS: number; etcdS: number; clientS: number }
type Variant = 'A' | 'B';

const cp = await ControlPlane.start({ mode: 'minimal', dir: mkdtempSync(join(tmpdir(), 'tscm-ssa-bench-')), log: () => {} });
process.once('SIGINT', () => void cp.stop().then(() => process.exit(130)));
const kc = new KubeConfig();
kc.loadFromFile(cp.kubeconfig);
const rest = new RestClient({ kubeConfig: kc, registry: new Registry() });
const pid = (name: 'kube-apiserver' | 'etcd'): number => cp.state.components[name]?.pid ?? -1;

async function measure(call: () => Promise<unknown>): Promise<Sample> {
  const a0 = procCpuMs(pid('kube-apiserver'));
  const e0 = procCpuMs(pid('etcd'));
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await call();
  const c = process.cpuUsage(c0);
  return {
    wallS: (performance.now() - t0) / 1000,
    apiserverS: (procCpuMs(pid('kube-apiserver')) - a0) / 1000,
    etcdS: (procCpuMs(pid('etcd')) - e0) / 1000,
    clientS: (c.user + c.system) / 1e6,
  };
}

const foosOf = (ns: string, replicas: number): Foo[] => Array.from({ length: n }, (_, i) => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo',
  metadata: { name: `foo-${i}`, namespace: ns, uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}` },
  spec: { deploymentName: `foo-${i}`, replicas },
}));

async function round(v: Variant, r: number): Promise<{ create: Sample; drift: Sample }> {
  const ns = `ssa-${r}-${v.toLowerCase()}`;
  await rest.resource(coreResources.namespaces).create({ metadata: { name: ns } });
  const deployments = rest.resource<Deployment>(deploymentResource).namespace(ns);
  const uids = new Map<string, string>();
  const apply = (d: Deployment): Promise<Deployment> =>
    deployments.apply({ ...d, metadata: { ...d.metadata, name: d.metadata?.name ?? '' } }, { fieldManager, force: true });
  const one = foosOf(ns, 1);
  const create = await measure(() => runAll(n, inFlight, async (i) => {
    const d = newDeployment(one[i] as Foo);
    const stored = v === 'A' ? await deployments.create(d) : await apply(d);
    uids.set(stored.metadata?.name ?? '', stored.metadata?.uid ?? '');
  }));
  const two = foosOf(ns, 2);
  const drift = await measure(() => runAll(n, inFlight, async (i) => {
    const d = newDeployment(two[i] as Foo);
    const name = d.metadata?.name ?? '';
    if (v === 'A') await deployments.patch(name, { merge: { metadata: { uid: uids.get(name) }, spec: { replicas: 2 } } });
    else await apply(d);
  }));
  return { create, drift };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const benchResults = new BenchResults('ssa-deployments', {
  name: 'POST and merge patch',
  description: 'the Foo controller\'s writes as it makes them today (POST create, merge patch of spec.replicas), ABBA with server-side apply in the same run',
});
try {
  const order: Variant[] = Array.from({ length: pairs }, () => ['A', 'B', 'B', 'A'] as Variant[]).flat();
  const results: Record<Variant, { create: Sample[]; drift: Sample[] }> = { A: { create: [], drift: [] }, B: { create: [], drift: [] } };
  // One unmeasured warm-up round of each variant (first requests, apiserver caches).
  await round('A', -1);
  await round('B', -1);
  for (const [r, v] of order.entries()) {
    const res = await round(v, r);
    results[v].create.push(res.create);
    results[v].drift.push(res.drift);
    benchResults.sampleLoad();
    log(`round ${r} ${v}: create ${res.create.wallS.toFixed(2)} s (apiserver ${res.create.apiserverS.toFixed(2)} s CPU), ` +
      `drift ${res.drift.wallS.toFixed(2)} s (apiserver ${res.drift.apiserverS.toFixed(2)} s CPU)`);
  }
  const lines = ['| phase | variant | wall s | kube-apiserver CPU s | etcd CPU s | client CPU s |', '|---|---|---|---|---|---|'];
  for (const phase of ['create', 'drift'] as const) {
    const med = (v: Variant, k: keyof Sample): number => median(results[v][phase].map((s) => s[k]));
    for (const v of ['A', 'B'] as const) {
      const label = v === 'A' ? (phase === 'create' ? 'POST (today)' : 'merge patch (today)') : 'server-side apply';
      lines.push(`| ${phase} | ${label} | ${med(v, 'wallS').toFixed(2)} | ${med(v, 'apiserverS').toFixed(2)} | ${med(v, 'etcdS').toFixed(2)} | ${med(v, 'clientS').toFixed(2)} |`);
    }
    const ratio = (k: keyof Sample): string => (med('B', k) / med('A', k)).toFixed(2);
    lines.push(`| ${phase} | SSA ÷ today | ${ratio('wallS')} | ${ratio('apiserverS')} | ${ratio('etcdS')} | ${ratio('clientS')} |`);
    for (const k of ['wallS', 'apiserverS', 'etcdS', 'clientS'] as const) {
      const unit = k === 'wallS' ? 's' : 'CPU-s';
      benchResults.set(`${phase}.${k}.today`, spread(results.A[phase].map((s) => s[k]), unit));
      benchResults.set(`${phase}.${k}.ssa`, spread(results.B[phase].map((s) => s[k]), unit));
      benchResults.set(`${phase}.${k}.ratio`, ratioOf(med('B', k), med('A', k)));
    }
  }
  benchResults.set('deployments', { value: n, unit: 'count' });
  benchResults.write();
  process.stdout.write(`\n${n} Deployments per round, ${inFlight} in flight, ${order.join('')} (medians of ${pairs * 2} rounds per variant)\n\n` +
    `${lines.join('\n')}\n\n(load average ${loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
} finally {
  await rest.close();
  await cp.stop();
}
