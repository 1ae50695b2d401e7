/**
 * ControllerBuilder on the real control plane: which events become which reconcile requests (pkg/runtime/builder.ts).
 * Primary: ConfigMaps; owned: Secrets (controller ownerReference to a ConfigMap); watched: Services mapped by a label.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { TerminalError } from '../pkg/controller/errors.ts';
import { coreResources } from '../pkg/apimachinery/resource.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { annotationsChanged, labelsChanged } from '../pkg/runtime/predicate.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';

const { configMaps, secrets, services } = coreResources;

describe('ControllerBuilder', () => {
  test('for/owns/watches map events to requests; filters, terminal errors and requeueAfter', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'builder');
    const seen: string[] = [];
    const count = (key: string): number => seen.filter((k) => k === key).length;
    const mgr = new ControllerManager({ kubeConfig: adminKubeConfig(), namespaces: [ns], syncPeriodMs: 0, registry: new Registry(), logger: silentLogger });
    const controller = mgr.controller('builder-test')
      .for<KubeObject & { data?: Record<string, string> }>(configMaps, { update: (_old, cm) => cm.data?.['ignore'] !== 'yes' })
      .owns(secrets)
      .watches<KubeObject>(services, (svc) => (svc.metadata?.labels?.['target'] ? [{ namespace: ns, name: svc.metadata.labels['target'] }] : []))
      .withOptions({ concurrency: 2 })
      .complete(({ namespace, name }) => {
        const key = `${namespace}/${name}`;
        seen.push(key);
        if (name === 'terminal') throw new TerminalError('no retry');
        if (name === 'again' && count(key) === 1) return Promise.resolve({ requeueAfter: 50 });
        return Promise.resolve();
      });
    assert.equal(controller.name, 'builder-test');
    const ac = new AbortController();
    const exited = mgr.start(ac.signal);
    t.after(async () => { ac.abort(); assert.equal(await exited, 0); });
    await waitFor('controller started', () => mgr.controllersStarted());

    const create = async (path: string, body: object): Promise<KubeObject> =>
      expectStatus<KubeObject>(await cp.request('POST', `/api/v1/namespaces/${ns}/${path}`, body), 201, `create ${path}`);
    const owner = await create('configmaps', { metadata: { name: 'owner' } });
    const other = await create('configmaps', { metadata: { name: 'other' } });
    await waitFor('primary adds reconciled', () => count(`${ns}/owner`) === 1 && count(`${ns}/other`) === 1);

    // An owned Secret → its controller owner. One whose controller is another kind (same name, same UID) → nothing.
    const ref = (o: KubeObject, kind: string, apiVersion: string): object =>
      ({ apiVersion, kind, name: o.metadata?.name, uid: o.metadata?.uid, controller: true });
    await create('secrets', { metadata: { name: 's-foreign', ownerReferences: [ref(other, 'Deployment', 'apps/v1')] } });
    await create('secrets', { metadata: { name: 's-owned', ownerReferences: [ref(owner, 'ConfigMap', 'v1')] } });
    await waitFor('owned Secret mapped to its owner', () => count(`${ns}/owner`) === 2);
    // Secrets arrive in order on one watch: the foreign one was handled before the owned one.
    assert.equal(count(`${ns}/other`), 1, 'a controller ref of another kind maps to nothing');

    // Watched Service → the label's target; a filtered primary update → nothing; a passing one → reconciled.
    await create('services', { metadata: { name: 'svc', labels: { target: 'other' } }, spec: { ports: [{ port: 80 }] } });
    await waitFor('watched Service mapped', () => count(`${ns}/other`) === 2);
    await cp.request('PUT', `/api/v1/namespaces/${ns}/configmaps/owner`, { metadata: { name: 'owner' }, data: { ignore: 'yes' } });
    await cp.request('PUT', `/api/v1/namespaces/${ns}/configmaps/owner`, { metadata: { name: 'owner' }, data: { ignore: 'no' } });
    await waitFor('unfiltered update reconciled', () => count(`${ns}/owner`) === 3);
    assert.equal(count(`${ns}/owner`), 3, 'the filtered update was dropped');

    // requeueAfter → once more; TerminalError → not retried (checked after a later event on the same watch).
    await create('configmaps', { metadata: { name: 'again' } });
    await create('configmaps', { metadata: { name: 'terminal' } });
    await waitFor('requeueAfter honoured', () => count(`${ns}/again`) === 2);
    await create('configmaps', { metadata: { name: 'last' } });
    await waitFor('later event', () => count(`${ns}/last`) === 1 && count(`${ns}/terminal`) === 1);
    assert.equal(count(`${ns}/terminal`), 1, 'a terminal error is not retried');
    assert.equal(await metric(mgr.registry, 'controller_runtime_terminal_reconcile_errors_total'), 1);
  });

  test('predicates on for, owns and watches: each source filters its own updates; creates pass', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'predicates');
    const seen: string[] = [];
    const count = (name: string): number => seen.filter((k) => k === `${ns}/${name}`).length;
    const mgr = new ControllerManager({ kubeConfig: adminKubeConfig(), namespaces: [ns], syncPeriodMs: 0, registry: new Registry(), logger: silentLogger });
    // concurrency 1: keys are reconciled in the order their events arrived, so "b reconciled" means every event
    // handled before b's was reconciled too — how a dropped event is told from a slow one without sleeping.
    mgr.controller('predicates-test')
      .for<KubeObject>(configMaps, { predicates: [labelsChanged] })
      .owns(secrets, { predicates: [annotationsChanged] })
      .watches<KubeObject>(services, (svc) => (svc.metadata?.labels?.['target'] ? [{ namespace: ns, name: svc.metadata.labels['target'] }] : []),
        { predicates: [labelsChanged] })
      .complete(({ namespace, name }) => {
        seen.push(`${namespace}/${name}`);
        return Promise.resolve();
      });
    const ac = new AbortController();
    const exited = mgr.start(ac.signal);
    t.after(async () => { ac.abort(); assert.equal(await exited, 0); });
    await waitFor('controller started', () => mgr.controllersStarted());
    const path = (kind: string, name = ''): string => `/api/v1/namespaces/${ns}/${kind}${name ? `/${name}` : ''}`;
    const create = async (kind: string, body: object): Promise<KubeObject> => expectStatus<KubeObject>(await cp.request('POST', path(kind), body), 201, `create ${kind}`);
    const merge = async (kind: string, name: string, patch: object): Promise<void> => {
      expectStatus(await cp.request('PATCH', path(kind, name), patch, { headers: { 'content-type': 'application/merge-patch+json' } }), 200, `patch ${kind}/${name}`);
    };

    const a = await create('configmaps', { metadata: { name: 'a' } });
    const b = await create('configmaps', { metadata: { name: 'b' } });
    await waitFor('creates pass the predicates', () => count('a') === 1 && count('b') === 1);
    // for: a data change is dropped (labelsChanged), a label change passes. b's change is the barrier (same watch).
    await merge('configmaps', 'a', { data: { x: '1' } });
    await merge('configmaps', 'b', { metadata: { labels: { l: '1' } } });
    await waitFor('label change on b reconciled', () => count('b') === 2);
    assert.equal(count('a'), 1, 'the data-only update of a primary was dropped');

    // owns: a Secret's data change is dropped (annotationsChanged), an annotation change maps to its owner.
    const ownedBy = (o: KubeObject): object => ({ apiVersion: 'v1', kind: 'ConfigMap', name: o.metadata?.name, uid: o.metadata?.uid, controller: true });
    await create('secrets', { metadata: { name: 'sa', ownerReferences: [ownedBy(a)] } });
    await create('secrets', { metadata: { name: 'sb', ownerReferences: [ownedBy(b)] } });
    await waitFor('owned creates map to their owners', () => count('a') === 2 && count('b') === 3);
    await merge('secrets', 'sa', { stringData: { k: 'v' } });
    await merge('secrets', 'sb', { metadata: { annotations: { n: '1' } } });
    await waitFor('barrier: sb annotated', () => count('b') === 4);
    assert.equal(count('a'), 2, 'the owned Secret\'s data-only update was dropped');
    await merge('secrets', 'sa', { metadata: { annotations: { n: '1' } } });
    await waitFor('owned annotation change maps to a', () => count('a') === 3);

    // watches: a Service's annotation-only update is dropped (labelsChanged), a label change maps.
    const svc = (name: string, target: string): object => ({ metadata: { name, labels: { target } }, spec: { ports: [{ port: 80 }] } });
    await create('services', svc('svc-a', 'a'));
    await create('services', svc('svc-b', 'b'));
    await waitFor('watched creates map', () => count('a') === 4 && count('b') === 5);
    await merge('services', 'svc-a', { metadata: { annotations: { n: '1' } } });
    await merge('services', 'svc-b', { metadata: { labels: { more: 'x' } } });
    await waitFor('barrier: svc-b relabelled', () => count('b') === 6);
    assert.equal(count('a'), 4, 'the watched Service\'s annotation-only update was dropped');
    await merge('services', 'svc-a', { metadata: { labels: { more: 'x' } } });
    await waitFor('watched label change maps to a', () => count('a') === 5);
  });

  test('metadataOnly owns and watches: one metadata-only list+watch per type, mapped like any source; the reconcile reads metadata only', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'metaonly');
    const seen: string[] = [];
    const count = (name: string): number => seen.filter((k) => k === `${ns}/${name}`).length;
    const mgr = new ControllerManager({ kubeConfig: adminKubeConfig(), namespaces: [ns], syncPeriodMs: 0, registry: new Registry(), logger: silentLogger });
    const secretSeen: KubeObject[] = [];
    const builder = mgr.controller('metadata-test').for<KubeObject>(configMaps)
      .owns(secrets, { metadataOnly: true })
      .watches<KubeObject>(services, (svc) => (svc.metadata?.labels?.['target'] ? [{ namespace: ns, name: svc.metadata.labels['target'] }] : []), { metadataOnly: true });
    const ownedSecrets = builder.informerOf(secrets, { metadataOnly: true });
    builder.complete(({ namespace, name }) => {
      seen.push(`${namespace}/${name}`);
      const s = ownedSecrets.lister().get(namespace ?? '', `s-${name}`);
      if (s) secretSeen.push(s);
      return Promise.resolve();
    });
    // The type's informers: ConfigMaps in full; Secrets and Services metadata only, and no full informer of either.
    assert.deepEqual(mgr.factory.informers().map((i) => `${i.resource.resource}${i.metadataOnly ? ' metadata' : ''}`).sort(),
      ['configmaps', 'secrets metadata', 'services metadata']);
    const ac = new AbortController();
    const exited = mgr.start(ac.signal);
    t.after(async () => { ac.abort(); assert.equal(await exited, 0); });
    await waitFor('controller started', () => mgr.controllersStarted());
    const create = async (kind: string, body: object): Promise<KubeObject> =>
      expectStatus<KubeObject>(await cp.request('POST', `/api/v1/namespaces/${ns}/${kind}`, body), 201, `create ${kind}`);

    const owner = await create('configmaps', { metadata: { name: 'owner' } });
    await waitFor('primary reconciled', () => count('owner') === 1);
    await create('secrets', { metadata: { name: 's-owner', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata?.uid, controller: true }] },
      stringData: { password: 'not in the cache' } });
    await waitFor('owned Secret (metadata) mapped to its owner', () => count('owner') === 2);
    const s = secretSeen.at(-1);
    assert.deepEqual(Object.keys(s ?? {}).sort(), ['apiVersion', 'kind', 'metadata'], 'the reconcile sees metadata only: no Secret data in the cache');
    assert.equal(s?.kind, 'Secret');
    await create('services', { metadata: { name: 'svc', labels: { target: 'owner' } }, spec: { ports: [{ port: 80 }] } });
    await waitFor('watched Service (metadata) mapped by its label', () => count('owner') === 3);
  });

  test('declaration errors are reported at once', () => {
    const mgr = new ControllerManager({ kubeConfig: adminKubeConfig(), registry: new Registry(), logger: silentLogger });
    assert.throws(() => mgr.controller('x').owns(secrets), /call for\(\) before owns\(\)/);
    assert.throws(() => mgr.controller('x'), /controller "x" already declared/);
    const b = mgr.controller('y').for(configMaps);
    b.complete(() => Promise.resolve());
    assert.throws(() => b.complete(() => Promise.resolve()), /complete\(\) called twice/);
  });
});

async function metric(registry: Registry, name: string): Promise<number> {
  const m = registry.getSingleMetric(name);
  return m ? (await m.get()).values.reduce((s, v) => s + v.value, 0) : 0;
}
