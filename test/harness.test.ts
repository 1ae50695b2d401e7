/**
 * Tests of the local control plane harness itself, against the real binaries (issue 2 acceptance).
 * Uses the shared full-mode control plane of the test run, plus one private minimal control plane for the
 * stop/start tests so restarting kube-apiserver never disturbs other test files.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ControlPlane, isAlive } from './cluster/controlplane.ts';
import { Registry } from 'prom-client';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { RestClient } from '../pkg/client/rest.ts';
import { SharedInformerFactory } from '../pkg/informerfactory/factory.ts';
import { adminKubeConfig, cluster, expectStatus, suffix, testNamespace, waitFor } from './helpers/cluster.ts';

const run = promisify(execFile);

interface Deployment {
  status?: { availableReplicas?: number };
}

describe('full control plane', () => {
  test('a Deployment with 3 replicas reaches availableReplicas == 3 (controller-manager, scheduler, kwok)', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'deploy');
    const labels = { app: 'web' };
    expectStatus(await cp.request('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' },
      spec: {
        replicas: 3, selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] } },
      },
    }), 201, 'create Deployment');
    const available = await waitFor('3 available replicas', async () => {
      const d = expectStatus<Deployment>(await cp.get(`/apis/apps/v1/namespaces/${ns}/deployments/web`), 200, 'get');
      return d.status?.availableReplicas === 3 ? 3 : undefined;
    }, { timeoutMs: 90_000, intervalMs: 250 });
    assert.equal(available, 3);
  });

  test('deleting an owner garbage-collects the object it owns', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'gc');
    const owner = expectStatus<{ metadata: { uid: string } }>(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner' },
    }), 201, 'create owner');
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1', kind: 'ConfigMap',
      metadata: {
        name: 'owned',
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata.uid }],
      },
    }), 201, 'create owned');
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/owner`), 200, 'delete owner');
    const status = await waitFor('owned ConfigMap to be garbage-collected', async () => {
      const res = await cp.get(`/api/v1/namespaces/${ns}/configmaps/owned`);
      return res.status === 404 ? res.status : undefined;
    }, { timeoutMs: 90_000, intervalMs: 250 });
    assert.equal(status, 404);
  });

  test('a namespace deletion completes (namespace controller)', async () => {
    const cp = cluster();
    const name = `nsdel-${suffix()}`;
    expectStatus(await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }), 201, 'create ns');
    expectStatus(await cp.request('POST', `/api/v1/namespaces/${name}/configmaps`, {
      apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'content' },
    }), 201, 'create content');
    expectStatus(await cp.request('DELETE', `/api/v1/namespaces/${name}`), 200, 'delete ns');
    const gone = await waitFor('namespace to finish deleting', async () => {
      const res = await cp.get(`/api/v1/namespaces/${name}`);
      return res.status === 404 ? true : undefined;
    }, { timeoutMs: 90_000, intervalMs: 250 });
    assert.equal(gone, true);
  });

  test('kubectl from the same release sees the Ready kwok node', async () => {
    const cp = cluster();
    const { stdout } = await run(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'get', 'nodes', '--no-headers']);
    assert.match(stdout, /^kwok-node-0\s+Ready\s/m);
    const { stdout: version } = await run(join(cp.k8sBinDir, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'version', '-o', 'json']);
    const v = JSON.parse(version) as { clientVersion: { gitVersion: string }; serverVersion: { gitVersion: string } };
    assert.equal(v.clientVersion.gitVersion, v.serverVersion.gitVersion);
    assert.match(v.serverVersion.gitVersion, /^v1\.\d+\.\d+$/);
  });
});

describe('RBAC and TokenRequest', () => {
  test('a ServiceAccount token is refused (403) until a RoleBinding grants the action', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'rbac');
    const token = await cp.mintServiceAccountToken(ns, 'reader', 600);
    const list = (): Promise<{ status: number; body: string }> =>
      cp.request('GET', `/api/v1/namespaces/${ns}/configmaps`, undefined, { token });
    const denied = await list();
    assert.equal(denied.status, 403, denied.body);
    assert.match(denied.body, new RegExp(`system:serviceaccount:${ns}:reader`));
    expectStatus(await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'cm-reader' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
    }), 201, 'create Role');
    expectStatus(await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'cm-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
    }), 201, 'create RoleBinding');
    // The authorizer's RBAC cache follows its own informer: poll until the grant is visible.
    const allowed = await waitFor('RoleBinding to take effect', async () => ((await list()).status === 200 ? 200 : undefined));
    assert.equal(allowed, 200);
    // The grant is exactly what the Role says: other verbs stay forbidden.
    const create = await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' },
    }, { token });
    assert.equal(create.status, 403);
  });
});

describe('CustomResourceDefinitions', () => {
  test('a CRD with a status subresource becomes Established and /status updates work', async (t) => {
    const cp = cluster();
    const group = `harness${suffix()}.example.com`;
    const crdName = `widgets.${group}`;
    expectStatus(await cp.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: crdName },
      spec: {
        group, scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [{
          name: 'v1', served: true, storage: true, subresources: { status: {} },
          schema: { openAPIV3Schema: { type: 'object', properties: {
            spec: { type: 'object', properties: { size: { type: 'integer' } } },
            status: { type: 'object', properties: { ready: { type: 'boolean' } } },
          } } },
        }],
      },
    }), 201, 'create CRD');
    t.after(async () => {
      await cp.request('DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
    });
    await waitFor('CRD Established', async () => {
      const crd = expectStatus<{ status?: { conditions?: { type: string; status: string }[] } }>(
        await cp.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`), 200, 'get CRD');
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
    const ns = await testNamespace(t, 'crd');
    const base = `/apis/${group}/v1/namespaces/${ns}/widgets`;
    type Widget = { metadata: { resourceVersion: string; generation: number }; spec: { size: number }; status?: { ready?: boolean } };
    // Creating an object right after Established can still race discovery in the API server: poll the create.
    const created = await waitFor('create Widget', async () => {
      const res = await cp.request('POST', base, { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'w' }, spec: { size: 1 }, status: { ready: true } });
      return res.status === 201 ? (JSON.parse(res.body) as Widget) : undefined;
    });
    assert.equal(created.status, undefined, 'status is dropped on create when the status subresource is on');
    const updated = expectStatus<Widget>(await cp.request('PUT', `${base}/w/status`, { ...created, status: { ready: true } }), 200, 'PUT /status');
    assert.equal(updated.status?.ready, true);
    assert.equal(updated.metadata.generation, created.metadata.generation, 'status writes do not bump generation');
    // The main resource ignores status changes; spec changes bump generation.
    const main = expectStatus<Widget>(await cp.request('PUT', `${base}/w`, { ...updated, spec: { size: 2 }, status: { ready: false } }), 200, 'PUT main');
    assert.equal(main.status?.ready, true);
    assert.equal(main.metadata.generation, created.metadata.generation + 1);
  });
});

describe('component stop/start (private minimal control plane)', () => {
  let cp: ControlPlane;
  before(async () => {
    cp = await ControlPlane.start({ mode: 'minimal', dir: mkdtempSync(join(tmpdir(), 'tscm-harness-')), log: () => {} });
  });
  after(async () => {
    await cp?.stop();
  });

  test('minimal mode runs exactly etcd and kube-apiserver', () => {
    assert.deepEqual(Object.keys(cp.state.components).sort(), ['etcd', 'kube-apiserver']);
    assert.equal(cp.running().length, 2);
  });

  test('kube-apiserver stopped and started again keeps its data', async () => {
    const name = `survivor-${suffix()}`;
    expectStatus(await cp.request('POST', '/api/v1/namespaces/default/configmaps', {
      apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { k: 'v' },
    }), 201, 'create');
    const pid = cp.state.components['kube-apiserver']?.pid;
    await cp.stopComponent('kube-apiserver');
    assert.ok(pid && !isAlive(pid), 'the old kube-apiserver process is gone');
    await assert.rejects(cp.get('/readyz'), 'the API server is unreachable while stopped');
    await cp.startComponent('kube-apiserver');
    const got = expectStatus<{ data: { k: string } }>(await cp.get(`/api/v1/namespaces/default/configmaps/${name}`), 200, 'get after restart');
    assert.equal(got.data.k, 'v');
  });

  test('an informer started while kube-apiserver is down is woken by the next answer, not its 10-minute backoff (issue 43)', async () => {
    // Every backoff is 10 minutes, the test's deadlines 60 s: the informer can only sync in time if the answer to
    // another request on its client ends the wait (ServerReachability). No timing is asserted; the structure is:
    // refused LIST → backoff; kube-apiserver back; one answered GET on the same client → the informer lists and
    // watches (a ConfigMap created after the restart reaches its cache).
    const client = new RestClient({ kubeConfig: adminKubeConfig(cp), registry: new Registry() });
    const factory = new SharedInformerFactory({
      client, namespaces: ['default'], reflector: { config: { backoffInitialMs: 600_000, backoffMaxMs: 600_000 } },
    });
    const informer = factory.informerFor(coreResources.configMaps);
    const ac = new AbortController();
    const status = (): string => JSON.stringify(informer.reflectorStatus());
    try {
      await cp.stopComponent('kube-apiserver');
      factory.start(ac.signal);
      await waitFor('the reflector backing off after a refused LIST', () => {
        const s = informer.reflectorStatus()[0];
        return s?.phase === 'Backoff' && s.lastError?.connection === true ? s : undefined;
      });
      await cp.startComponent('kube-apiserver');
      // One answer on the same client (in the manager: the leader's renew, or another informer's retry).
      await waitFor('an answer on the informer\'s client', async () => (await client.json('GET', '/api/v1/namespaces/default')) !== undefined);
      const name = `woken-${suffix()}`;
      expectStatus(await cp.request('POST', '/api/v1/namespaces/default/configmaps', {
        apiVersion: 'v1', kind: 'ConfigMap', metadata: { name },
      }), 201, 'create after restart');
      await waitFor('the informer to see the ConfigMap created after the restart', () => informer.lister().get('default', name) !== undefined)
        .catch((err: unknown) => {
          throw new Error(`${(err as Error).message}; reflector: ${status()}`);
        });
      assert.ok(informer.hasSynced(), status());
    } finally {
      ac.abort();
      await client.close();
      // The other tests of this suite need kube-apiserver running.
      if (!cp.running().includes(cp.state.components['kube-apiserver']?.pid ?? -1)) await cp.startComponent('kube-apiserver');
    }
  });

  test('etcd stopped and started again keeps its data (API answers errors meanwhile)', async () => {
    const name = `etcd-survivor-${suffix()}`;
    expectStatus(await cp.request('POST', '/api/v1/namespaces/default/configmaps', {
      apiVersion: 'v1', kind: 'ConfigMap', metadata: { name },
    }), 201, 'create');
    await cp.stopComponent('etcd');
    const during = await cp.get('/readyz');
    assert.notEqual(during.status, 200, 'readyz fails while etcd is down');
    await cp.startComponent('etcd');
    const got = await waitFor('object readable after etcd restart', async () => {
      const res = await cp.get(`/api/v1/namespaces/default/configmaps/${name}`);
      return res.status === 200 ? res.status : undefined;
    });
    assert.equal(got, 200);
  });

  test('a failed start names the component and shows the tail of its log', async () => {
    // A kube-apiserver that dies at once, as a real one does on a bad flag.
    const fakeBins = mkdtempSync(join(tmpdir(), 'tscm-harness-fakebin-'));
    writeFileSync(join(fakeBins, 'kube-apiserver'), '#!/bin/sh\necho "Error: unknown flag: --made-up" >&2\nexit 1\n', { mode: 0o755 });
    const dir = mkdtempSync(join(tmpdir(), 'tscm-harness-bad-'));
    const etcdDir = dirname(cp.state.components.etcd?.bin ?? '');
    const bad = ControlPlane.start({ mode: 'minimal', dir, log: () => {}, bins: { etcd: etcdDir, k8s: fakeBins, kwok: fakeBins } });
    await assert.rejects(bad, /kube-apiserver exited during startup; last lines of .*kube-apiserver\.log:\nError: unknown flag: --made-up/);
    // The etcd it had started is stopped again.
    const state = ControlPlane.attach(dir, () => {});
    assert.deepEqual(state.running(), []);
    await state.stop();
  });
});

describe('make cluster-up / cluster-down CLI', () => {
  test('up prints export KUBECONFIG, down leaves no process running', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tscm-cli-'));
    const cli = join(import.meta.dirname, 'cluster', 'cli.ts');
    const up = await run(process.execPath, [cli, 'up', '--mode', 'minimal', '--dir', dir]);
    assert.equal(up.stdout, `export KUBECONFIG=${join(dir, 'kubeconfig')}\n`);
    const cp = ControlPlane.attach(dir, () => {});
    const pids = cp.running();
    assert.equal(pids.length, 2);
    assert.equal((await cp.get('/readyz')).status, 200);
    await run(process.execPath, [cli, 'down', '--dir', dir]);
    for (const pid of pids) assert.equal(isAlive(pid), false, `pid ${pid} still running`);
  });
});
