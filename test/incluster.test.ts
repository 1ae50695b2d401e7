/**
 * The manager started exactly as the kubelet would start it in a Pod — no kubeconfig; a ServiceAccount token, CA and
 * namespace under /var/run/secrets/kubernetes.io/serviceaccount (relocated through test/helpers/incluster-main.ts so
 * nothing touches the machine's real paths); KUBERNETES_SERVICE_HOST/PORT — with only namespaced Roles written here.
 * RBAC is enforced (ServiceAccounts are not system:masters).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test, type TestContext } from 'node:test';
import type { ControlPlane } from './cluster/controlplane.ts';
import { cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { ManagerProcess, metricValue } from './helpers/managerprocess.ts';

/** What the Foo controller needs in one namespace (the namespaced variant of config/rbac). */
const fooRules = [
  { apiGroups: ['samplecontroller.k8s.io'], resources: ['foos'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['samplecontroller.k8s.io'], resources: ['foos/status'], verbs: ['update', 'patch'] },
  // blockOwnerDeletion on the Deployment's ownerReference (OwnerReferencesPermissionEnforcement).
  { apiGroups: ['samplecontroller.k8s.io'], resources: ['foos/finalizers'], verbs: ['update'] },
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
  { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
];

async function grant(cp: ControlPlane, ns: string, saNamespace: string, sa: string): Promise<void> {
  expectStatus(await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'tscm-manager' }, rules: fooRules,
  }), 201, `Role in ${ns}`);
  expectStatus(await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'tscm-manager' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tscm-manager' },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: saNamespace }],
  }), 201, `RoleBinding in ${ns}`);
}

/** A token bound to a fresh Secret: deleting the Secret revokes exactly this token. */
async function boundToken(cp: ControlPlane, ns: string, sa: string, secret: string): Promise<string> {
  const s = expectStatus<{ metadata: { uid: string } }>(await cp.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1', kind: 'Secret', metadata: { name: secret },
  }), 201, 'Secret');
  const res = expectStatus<{ status: { token: string } }>(await cp.request('POST',
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
      apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest',
      spec: { expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: secret, uid: s.metadata.uid } },
    }), 201, 'TokenRequest');
  return res.status.token;
}

interface Pod {
  root: string;
  tokenFile: string;
}

/** Lays out the ServiceAccount volume the kubelet would mount. */
function podFiles(cp: ControlPlane, ns: string, token: string): Pod {
  const root = mkdtempSync(join(tmpdir(), 'tscm-pod-'));
  const dir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
  mkdirSync(dir, { recursive: true });
  copyFileSync(cp.state.pki.caCert, join(dir, 'ca.crt'));
  writeFileSync(join(dir, 'namespace'), ns);
  writeFileSync(join(dir, 'token'), token);
  return { root, tokenFile: join(dir, 'token') };
}

/** Rewrites the token file atomically, as the kubelet does. */
function rotate(pod: Pod, token: string): void {
  writeFileSync(`${pod.tokenFile}.new`, token);
  renameSync(`${pod.tokenFile}.new`, pod.tokenFile);
}

async function startInCluster(t: TestContext, cp: ControlPlane, pod: Pod, watchNamespace: string): Promise<ManagerProcess> {
  const mgr = await ManagerProcess.start({
    args: ['--controllers=foo'],
    env: {
      KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: new URL(cp.server).port,
      WATCH_NAMESPACE: watchNamespace,
    },
    inClusterRoot: pod.root,
  });
  t.after(() => mgr.stop('SIGKILL'));
  return mgr;
}

async function createFoo(cp: ControlPlane, ns: string, name: string): Promise<void> {
  expectStatus(await cp.request('POST', `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`, {
    apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name }, spec: { deploymentName: name, replicas: 1 },
  }), 201, `Foo ${ns}/${name}`);
}

async function deploymentExists(cp: ControlPlane, ns: string, name: string): Promise<boolean> {
  return (await cp.get(`/apis/apps/v1/namespaces/${ns}/deployments/${name}`)).status === 200;
}

describe('in-cluster ServiceAccount auth with RBAC enforced', () => {
  before(installCRDs);

  test('syncs and serves ready; a rotated token keeps it working after the old one is revoked', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'incluster');
    await cp.mintServiceAccountToken(ns, 'manager', 600); // creates the ServiceAccount
    await grant(cp, ns, ns, 'manager');
    const first = await boundToken(cp, ns, 'manager', 'token-1');
    const pod = podFiles(cp, ns, first);
    const mgr = await startInCluster(t, cp, pod, ns);
    await mgr.waitReady();
    assert.ok(mgr.logs.some((l) => String(l['credentials']).startsWith('in-cluster ServiceAccount')), 'used in-cluster credentials');

    await createFoo(cp, ns, 'before-rotation');
    await waitFor('Deployment created with the first token', () => deploymentExists(cp, ns, 'before-rotation'));

    rotate(pod, await boundToken(cp, ns, 'manager', 'token-2'));
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/secrets/token-1`), 200, 'revoke the first token');
    await waitFor('first token rejected', async () => (await cp.request('GET', `/api/v1/namespaces/${ns}/configmaps`, undefined, { token: first })).status === 401);

    await createFoo(cp, ns, 'after-rotation');
    await waitFor('Deployment created with the rotated token', () => deploymentExists(cp, ns, 'after-rotation'), { timeoutMs: 30_000 });
    const metrics = await mgr.metrics();
    assert.equal(metricValue(metrics, 'rest_client_requests_total', { code: '403' }), undefined, 'no request was forbidden');
    assert.equal(await mgr.stop('SIGTERM'), 0);
  });

  test('WATCH_NAMESPACE=a,b with only namespaced Roles in a and b: works, namespace c untouched', async (t) => {
    const cp = cluster();
    const [home, a, b, c] = [await testNamespace(t, 'home'), await testNamespace(t, 'wa'), await testNamespace(t, 'wb'), await testNamespace(t, 'wc')];
    await cp.mintServiceAccountToken(home, 'manager', 600);
    await grant(cp, a, home, 'manager');
    await grant(cp, b, home, 'manager');
    const pod = podFiles(cp, home, await boundToken(cp, home, 'manager', 'token'));
    const mgr = await startInCluster(t, cp, pod, `${a},${b}`);
    await mgr.waitReady();
    for (const ns of [c, a, b]) await createFoo(cp, ns, 'foo');
    await waitFor('Deployments in a and b', async () => (await deploymentExists(cp, a, 'foo')) && deploymentExists(cp, b, 'foo'));
    // c's Foo was created first: had the manager acted on it, its Deployment would exist by now.
    assert.equal(await deploymentExists(cp, c, 'foo'), false, 'nothing created in c');
    const fooInC = expectStatus<{ status?: unknown }>(await cp.get(`/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${c}/foos/foo`), 200, 'Foo in c');
    assert.equal(fooInC.status, undefined, 'Foo in c has no status written');
    const metrics = await mgr.metrics();
    assert.equal(metricValue(metrics, 'rest_client_requests_total', { code: '403' }), undefined, 'no request was forbidden');
    assert.equal(await mgr.stop('SIGTERM'), 0);
  });
});
