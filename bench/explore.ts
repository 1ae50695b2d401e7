/**
 * bench/explore.ts — how fast `explore` (issue 40) runs plans: plans per minute for the Foo controller (a controller
 * of sample-controller's size) on the in-memory API server, and on a real API server (startTestEnv: etcd +
 * kube-apiserver) as the anchor measured in the same run, rounds interleaved (fake, real, real, fake, …).
 *
 *   node bench/explore.ts [--rounds 3] [--real-occurrences 1]
 *
 * Each round runs the whole exploration (reference + every plan) of one workload — create a Foo, scale it, delete
 * it, with kube-controller-manager's Deployment controller as a peer — and divides the plans executed by the wall
 * time. Goal (issue 40): >= 200 plans per minute on the fake. Writes bench/results/explore/<run>.json.
 */
import { parseArgs } from 'node:util';
import { loadavg } from 'node:os';
import { BenchResults, ratio, spread } from './results.ts';
import { fooControllerSetup } from '../pkg/controllers/foo/controller.ts';
import { create, explore, expectNoFindings, patch, remove, settle, startTestEnv, type ExploreOptions } from '../pkg/testing/index.ts';
import { deploymentStatusPeer } from '../test/explore/peers.ts';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, 'real-occurrences': { type: 'string', default: '1' } } });
const rounds = Number(args.rounds);
const crdPaths = [new URL('../config/crd/bases', import.meta.url).pathname];
const foo = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { namespace: 'demo', name: 'foo' }, spec: { deploymentName: 'foo-web', replicas: 1 } };
const options: ExploreOptions = {
  name: 'foo', crdPaths, setup: (mgr) => { fooControllerSetup.setup(mgr, {}); }, peers: [deploymentStatusPeer],
  workload: [create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }), create(foo), settle(), patch(foo, { spec: { replicas: 3 } }), settle(), remove(foo)],
};

const results = new BenchResults('explore', {
  name: 'real API server', description: 'the same exploration (crash and write-fault plans, 1 occurrence per write) on startTestEnv\'s etcd + kube-apiserver, rounds interleaved with the fake\'s',
});
const env = await startTestEnv({ crdPaths });
const fake: number[] = [];
const real: number[] = [];
const fakePlans: number[] = [];
const realPlans: number[] = [];
try {
  const once = async (which: 'fake' | 'real'): Promise<void> => {
    const t0 = performance.now();
    const report = await explore(which === 'fake' ? options : { ...options, cluster: env, plans: { maxOccurrences: Number(args['real-occurrences']) } });
    const ms = performance.now() - t0;
    expectNoFindings(report);
    const perMin = (report.executed + 1) / (ms / 60_000); // + the reference execution
    (which === 'fake' ? fake : real).push(perMin);
    (which === 'fake' ? fakePlans : realPlans).push(report.executed);
    results.sampleLoad();
    console.log(`  ${which}: ${report.executed} plans + reference in ${(ms / 1000).toFixed(1)} s = ${perMin.toFixed(0)} executions/min`);
  };
  for (let r = 0; r < rounds; r++) {
    console.log(`round ${r + 1}/${rounds}`);
    const order: ('fake' | 'real')[] = r % 2 === 0 ? ['fake', 'real'] : ['real', 'fake'];
    for (const w of order) await once(w);
  }
} finally {
  await env.stop();
}
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
results.set('fake.perMinute', spread(fake, '/min'));
results.set('fake.plans', spread(fakePlans, 'count'));
results.set('real.perMinute', spread(real, '/min'));
results.set('real.plans', spread(realPlans, 'count'));
results.set('ratio', ratio(med(fake), med(real)));
results.set('goal', med(fake) >= 200 ? 'met: >= 200 plans/min on the fake' : `not met: ${med(fake).toFixed(0)} plans/min on the fake (goal 200)`);
const file = results.write();
console.log('\n| where | plans | executions per minute (median of rounds) |\n|---|---|---|');
console.log(`| in-memory API server | ${med(fakePlans)} | ${med(fake).toFixed(0)} |`);
console.log(`| real API server (anchor, same run) | ${med(realPlans)} | ${med(real).toFixed(0)} |`);
console.log(`fake ÷ real: ${(med(fake) / med(real)).toFixed(1)}×; load now ${loadavg().map((l) => l.toFixed(1)).join(' ')}; results: ${file}`);
