/**
 * The manager under test runs as the ServiceAccount config/rbac binds (issue 42): `startTestEnv({ rbacPaths })`
 * installs config/rbac as it is (ServiceAccount, the generated roles, their bindings), and the manager connects with
 * `env.managerConnection` — a TokenRequest token of that ServiceAccount — so what RBAC refuses in production is
 * refused here:
 *  - the binary's Foo and Deployment controllers, declared by their setup, reconcile a Foo (its Deployment created
 *    with blockOwnerDeletion, its status, an Event) with no refusal;
 *  - with one verb the Foo controller needs removed from the ClusterRole (`foos/status patch`), the test's
 *    `eventually` stops at the refusal — it does not wait out its timeout — with a message naming the verb, the
 *    resource, its group, the rule's lines and the `.rbac(...)` declaration to add;
 *  - with a verb its informers need removed (`foos list`), `startManager` rejects the same way instead of waiting for
 *    caches that cannot sync;
 *  - a refused request's own error (the reconcile error a controller logs) names the rule too;
 *  - a manager run as a process with the ServiceAccount's kubeconfig is caught too (the API server's audit log).
 * One private control plane for the file.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { fooControllerSetup } from '../pkg/controllers/foo/index.ts';
import { deploymentControllerSetup } from '../pkg/controllers/deployment/index.ts';
import type { ControllerSetup } from '../pkg/controllers/setup.ts';
import { coreResources, type KubeObject } from '../pkg/index.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { ApiError } from '../pkg/client/errors.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { eventually, startManager, startTestEnv, type RunningManager, type TestEnv } from '../pkg/testing/index.ts';
import { repoRoot } from './helpers/crds.ts';

interface Foo extends KubeObject {
  spec?: { deploymentName?: string; replicas?: number };
  status?: { availableReplicas?: number };
}
interface Role extends KubeObject {
  rules: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[];
}

const foos = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', resource: 'foos', kind: 'Foo', namespaced: true };
const clusterRoles = { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles', kind: 'ClusterRole', namespaced: false };

describe('the manager under test runs as the ServiceAccount of config/rbac', () => {
  let env: TestEnv;
  let running: RunningManager | undefined;
  before(async () => {
    env = await startTestEnv({
      crdPaths: [join(repoRoot, 'config', 'crd', 'bases', 'samplecontroller.k8s.io_foos.yaml')],
      rbacPaths: [join(repoRoot, 'config', 'rbac')],
    });
  });
  after(async () => {
    await running?.stop().catch(() => {});
    await env?.stop();
  });

  /** A manager with `controllers` of the binary (their setup), on the ServiceAccount's connection. */
  const manager = (...controllers: ControllerSetup[]) => (): ControllerManager => {
    const mgr = new ControllerManager({ ...env.managerConnection, logger: silentLogger, registry: new Registry() });
    for (const c of controllers) c.setup(mgr, {});
    return mgr;
  };

  /**
   * Changes the verbs of the manager role's rule for `resource` (a samplecontroller.k8s.io resource), then waits until
   * the authorizer answers for the ServiceAccount as the new rule says (SubjectAccessReview).
   */
  async function setVerbs(resource: string, verb: string, allowed: boolean): Promise<void> {
    const api = env.client.resource<Role>(clusterRoles);
    const role = await api.get('manager-role');
    const others = role.rules.filter((r) => r.resources?.[0] !== resource);
    const verbs = [...new Set([...role.rules.filter((r) => r.resources?.[0] === resource).flatMap((r) => r.verbs), verb])].filter((v) => allowed || v !== verb);
    role.rules = verbs.length > 0 ? [...others, { apiGroups: [foos.group], resources: [resource], verbs }] : others;
    await api.update(role);
    const [plural, subresource] = resource.split('/');
    await eventually(async () => {
      const review = await env.client.json<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview',
          spec: { user: env.serviceAccount?.user, groups: ['system:serviceaccounts', 'system:authenticated'], resourceAttributes: { group: foos.group, resource: plural, subresource, verb } },
        },
      });
      return review.status.allowed === allowed;
    }, { message: `${verb} ${resource} ${allowed ? 'allowed' : 'refused'} for the ServiceAccount` });
  }

  test('as config/rbac ships, the Foo and Deployment controllers reconcile a Foo with no refusal', async () => {
    assert.match(env.serviceAccount?.user ?? '', /^system:serviceaccount:default:controller-manager$/);
    running = await startManager(manager(fooControllerSetup, deploymentControllerSetup));
    await env.client.resource(coreResources.namespaces).create({ metadata: { name: 'rbac-ok' } });
    const api = env.client.resource<Foo>(foos).namespace('rbac-ok');
    await api.create({ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'a' }, spec: { deploymentName: 'a-web', replicas: 1 } });
    await eventually(async () => (await api.get('a')).status?.availableReplicas === 0, { message: 'the Foo\'s status written' });
    const d = await env.client.resource<KubeObject>(coreResources.deployments).namespace('rbac-ok').get('a-web');
    assert.equal(d.metadata?.ownerReferences?.[0]?.blockOwnerDeletion, true, 'blockOwnerDeletion set: foos/finalizers update was needed and granted');
    await eventually(async () => (await env.client.resource<KubeObject & { reason?: string }>(coreResources.events).namespace('rbac-ok').list()).items.some((e) => e.reason === 'Synced'), { message: 'the Synced Event' });
    await running.stop();
    running = undefined;
    assert.deepEqual(env.refusals, []);
  });

  test('one verb missing (foos/status patch): eventually stops at the refusal with the rule to add, not at its timeout', async () => {
    await setVerbs('foos/status', 'patch', false);
    running = await startManager(manager(fooControllerSetup));
    await env.client.resource(coreResources.namespaces).create({ metadata: { name: 'rbac-missing' } });
    const api = env.client.resource<Foo>(foos).namespace('rbac-missing');
    await api.create({ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'b' }, spec: { deploymentName: 'b-web', replicas: 1 } });
    const waited = eventually(async () => (await api.get('b')).status?.availableReplicas === 0, { message: 'the Foo\'s status written', timeoutMs: 600_000 });
    await assert.rejects(waited, (err: Error) => {
      assert.doesNotMatch(err.message, /timed out/);
      assert.match(err.message, /^RBAC refused the manager \(system:serviceaccount:default:controller-manager\): patch foos\/status \(API group "samplecontroller\.k8s\.io"\) in namespace "rbac-missing"/);
      assert.match(err.message, /\n {2}- apiGroups: \[samplecontroller\.k8s\.io\]\n {4}resources: \[foos\/status\]\n {4}verbs: \[patch\]\n/);
      assert.match(err.message, /\.rbac\(\{ group: 'samplecontroller\.k8s\.io', resource: 'foos', subresource: 'status', verbs: \['patch'\] \}\)/);
      return true;
    });
    await assert.rejects(running.stop(), /RBAC refused the manager[^]*patch foos\/status/, 'stop() reports the refusal too');
    running = undefined;
  });

  test('a verb its informer needs missing (foos list): startManager rejects with the rule instead of waiting for the caches', async () => {
    env.clearRefusals();
    await setVerbs('foos/status', 'patch', true);
    await setVerbs('foos', 'list', false);
    await assert.rejects(startManager(manager(fooControllerSetup), { startTimeoutMs: 600_000 }), (err: Error) => {
      assert.match(err.message, /^RBAC refused the manager \(system:serviceaccount:default:controller-manager\): list foos \(API group "samplecontroller\.k8s\.io"\) at the cluster scope/);
      return true;
    });
  });

  test('the refused request\'s own error — what a controller logs as its reconcile error — names the missing rule', async () => {
    env.clearRefusals();
    const client = new RestClient({ ...env.managerConnection, registry: new Registry() });
    try {
      await assert.rejects(client.resource(coreResources.secrets).namespace('default').get('x'), (err: Error) => {
        assert.ok(err instanceof ApiError && err.status === 403);
        assert.match(err.message, /cannot get resource "secrets" in API group "" in the namespace "default" \(missing RBAC rule: apiGroups \[""\], resources \[secrets\], verbs \[get\]; declare it with \.rbac\(\{ group: '', resource: 'secrets', verbs: \['get'\] \}\) and run `npm run generate`\)$/);
        return true;
      });
      assert.deepEqual(env.refusals.map((r) => `${r.verb} ${r.resource} ${r.namespace}`), ['get secrets default']);
    } finally {
      env.clearRefusals();
      await client.close();
    }
  });

  test('a process with the ServiceAccount\'s kubeconfig (a manager run as main.ts is): its refusal is found in the audit log and stops eventually', async () => {
    const kubectl = env.binaries.kubectl;
    assert.ok(kubectl && env.serviceAccount);
    const res = spawnSync(kubectl, ['--kubeconfig', env.serviceAccount.kubeconfigPath, 'get', 'secrets', '-n', 'kube-system'], { encoding: 'utf8' });
    assert.notEqual(res.status, 0, 'refused');
    await assert.rejects(eventually(() => false, { timeoutMs: 600_000 }), /^RbacRefusalError: RBAC refused the manager \(system:serviceaccount:default:controller-manager\): list secrets \(API group ""\) in namespace "kube-system", on list \/api\/v1\/namespaces\/kube-system\/secrets\./);
    env.clearRefusals();
    assert.deepEqual(env.refusals, []);
  });
});
