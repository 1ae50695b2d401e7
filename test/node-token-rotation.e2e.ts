/**
 * ServiceAccount token rotation by a REAL kubelet (issue 26, docs/real-node.md): config/default on the node-mode
 * control plane, with the test's copy of the Deployment mounting its token through an explicit projected volume with
 * `expirationSeconds: 600` (the API's minimum; the admission-injected volume asks 3607 s, which the API server
 * extends to a year). The kubelet refreshes the token at ~80 % of its lifetime (~8 min); the test waits until the
 * first token has EXPIRED and then proves the manager still works — it re-read the rotated file (pkg/client).
 *
 * Takes ~11 minutes: run on demand (`node --test test/node-token-rotation.e2e.ts`), never in `make test`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectStatus, waitFor } from './helpers/cluster.ts';
import {
  isReady, MANAGER_DEPLOYMENT as deployment, MANAGER_LEASE as lease, MANAGER_NAMESPACE as ns, startNodeEnv, type NodeEnv,
} from './helpers/nodeenv.ts';

const saDir = '/var/run/secrets/kubernetes.io/serviceaccount';

const claims = (jwt: string): { iat: number; exp: number } =>
  JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iat: number; exp: number };

describe('real node: the kubelet rotates the projected token and the manager keeps working', () => {
  let env: NodeEnv;

  before(async () => {
    env = await startNodeEnv();
  }, { timeout: 30 * 60_000 });

  after(async () => {
    await env?.stop();
  });

  test('token rotated by the kubelet; after the first token expired the manager still reconciles and renews its Lease', async (t) => {
    const cp = env.cp;
    await env.applyKustomize('config/default');
    // The test's copy: the same token, CA and namespace files, but a 600 s token.
    await env.kubectl('-n', ns, 'patch', 'deployment', deployment, '--type', 'strategic', '-p', JSON.stringify({
      spec: { template: { spec: {
        automountServiceAccountToken: false,
        volumes: [{ name: 'short-token', projected: { sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 600 } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
        ] } }],
        containers: [{ name: 'manager', volumeMounts: [{ name: 'short-token', mountPath: saDir, readOnly: true }] }],
      } } },
    }));
    const pods = (): ReturnType<NodeEnv['managerPods']> => env.managerPods();
    const pod = await waitFor('the patched Pod alone and Ready', async () => {
      const all = (await pods()).filter((p) => !p.metadata.deletionTimestamp);
      const [only] = all;
      return all.length === 1 && only?.spec.automountServiceAccountToken === false && isReady(only) ? only : undefined;
    }, { timeoutMs: 120_000, intervalMs: 500 });
    const { cgroup: cg } = await env.container(pod);
    const token = (): string => {
      const pid = readFileSync(join(cg, 'cgroup.procs'), 'utf8').trim().split('\n')[0];
      return readFileSync(`/proc/${pid}/root${saDir}/token`, 'utf8');
    };
    const first = token();
    const c1 = claims(first);
    assert.equal(c1.exp - c1.iat, 600, 'the kubelet requested the 600 s token');
    const holder = await waitFor('the Pod holds the Lease', async () => {
      const res = await cp.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`);
      const h = res.status === 200 ? (JSON.parse(res.body) as { spec: { holderIdentity?: string } }).spec.holderIdentity : '';
      return h?.startsWith(`${pod.metadata.name}_`) ? h : undefined;
    }, { timeoutMs: 60_000 });
    const second = await waitFor('the kubelet rotated the token', () => {
      const now = token();
      return now !== first ? now : undefined;
    }, { timeoutMs: 600_000, intervalMs: 2000 });
    const c2 = claims(second);
    t.diagnostic(`first token iat ${c1.iat} exp ${c1.exp}; rotated at ${c2.iat} (${c2.iat - c1.iat} s after the first was issued)`);
    assert.ok(c2.iat < c1.exp, 'rotated before the first token expired');
    // Past the first token's expiry (plus the API server's 60 s leeway): only the rotated token authenticates now.
    await waitFor('the first token expired', () => Date.now() / 1000 > c1.exp + 65, { timeoutMs: 600_000, intervalMs: 1000 });
    expectStatus(await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'rot' } }), 201, 'ns');
    expectStatus(await cp.request('POST', '/api/v1/namespaces/rot/resourcequotas', {
      apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'no-pods' }, spec: { hard: { pods: '0' } },
    }), 201, 'ResourceQuota');
    expectStatus(await cp.request('POST', '/apis/samplecontroller.k8s.io/v1alpha1/namespaces/rot/foos', {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'after-rotation' }, spec: { deploymentName: 'after-rotation', replicas: 1 },
    }), 201, 'Foo');
    await waitFor('the Foo reconciled after the first token expired', async () =>
      (await cp.get('/apis/apps/v1/namespaces/rot/deployments/after-rotation')).status === 200, { timeoutMs: 60_000 });
    const l = expectStatus<{ spec: { holderIdentity?: string; renewTime?: string } }>(
      await cp.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`), 200, 'Lease');
    assert.equal(l.spec.holderIdentity, holder, 'the same process still leads');
    assert.ok(Date.parse(l.spec.renewTime ?? '') / 1000 > c1.exp, 'the Lease was renewed after the first token expired');
    const [again] = await pods();
    assert.equal(again?.status.containerStatuses?.[0]?.restartCount, 0, 'the manager never restarted');
  });
});
