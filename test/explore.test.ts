/**
 * explore on a real API server (issue 40): the same executions as on the in-memory server, with the manager crashed
 * and restarted in-process and its writes faulted through an intercepting transport, each execution in namespaces of
 * its own (pkg/testing/explore/realserver.ts). The gallery's crash bug is found there too and its fix is clean; Foo,
 * the shipped sample-controller, is clean. Bounded (one occurrence of each write) to keep make test short.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fooControllerSetup } from '../pkg/controllers/foo/controller.ts';
import { create, explore, expectNoFindings, formatFindings, patch, remove, settle, startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import { Cloud, gallery, gizmoCRD } from './explore/gallery.ts';
import { deploymentStatusPeer } from './explore/peers.ts';

const fooCRDs = new URL('../config/crd/bases', import.meta.url).pathname;

describe('explore on a real API server (startTestEnv): crash and write-fault plans, the manager restarted in-process', () => {
  let env: TestEnv;
  before(async () => {
    env = await startTestEnv({ crdPaths: [fooCRDs, gizmoCRD] });
  });
  after(() => env.stop());

  const entry = gallery.find((g) => g.name === 'generate-name-not-idempotent');
  assert.ok(entry);
  const run = (fixed: boolean) => explore<Cloud>({
    name: `${entry.name} (real${fixed ? ', fixed' : ''})`, cluster: env, crdPaths: [gizmoCRD], world: () => new Cloud(),
    externalState: (c) => c.inventory(), setup: (mgr, cloud) => entry.setup(mgr, cloud, fixed), workload: entry.workload,
  });

  test('a non-idempotent generateName create is reported as an intermediate-state finding (a second child after the crash)', async () => {
    const report = await run(false);
    const hit = report.findings.filter((f) => f.kind === 'safety' && f.class === 'intermediate-state');
    assert.ok(hit.length > 0, formatFindings(report));
    assert.ok(hit.some((f) => f.details.some((d) => /ConfigMap gallery\/g-child-\*: extra/.test(d))), formatFindings(report));
  });

  test('the same controller fixed (a deterministic child name): no finding', async () => {
    const report = await run(true);
    expectNoFindings(report);
    assert.ok(report.executed > 0);
  });

  test('Foo: no finding in any crash or write-fault plan', async () => {
    const foo = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { namespace: 'demo', name: 'foo' }, spec: { deploymentName: 'foo-web', replicas: 1 } };
    const report = await explore({
      name: 'foo (real)', cluster: env, crdPaths: [fooCRDs], setup: (mgr) => { fooControllerSetup.setup(mgr, {}); }, peers: [deploymentStatusPeer],
      workload: [create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }), create(foo), settle(), patch(foo, { spec: { replicas: 3 } }), settle(), remove(foo)],
      plans: { maxOccurrences: 1 },
    });
    expectNoFindings(report);
    assert.ok(report.executed >= 8, `${report.executed} plans`);
    assert.ok(report.reference.some((e) => e.kind === 'write' && e.signature.startsWith('POST deployments.apps/v1 demo/foo-web')), 'the reference created the Deployment on the real server');
  });
});
