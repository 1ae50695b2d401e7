/**
 * memcached: kubebuilder's deploy-image sample (operator-sdk's Go tutorial) on ts-controller-manager. Each Memcached
 * (crd.yaml) owns a Deployment of `spec.size` memcached Pods, applied with server-side apply; `status.conditions`
 * says whether it is Ready (reason, message, observedGeneration); a finalizer deletes the Deployment before the
 * Memcached goes (so it is cleaned up even where no garbage collector runs). Built only on the public entry point.
 *   ts-controller-manager gen types --out api crd.yaml    # writes api/example/v1alpha1/zz_generated.types.ts
 *   ts-controller-manager gen rbac --out rbac --setup setupMemcached main.ts   # rbac/: the RBAC it declares
 *   kubectl apply -f crd.yaml && KUBECONFIG=… node main.ts  (env: WATCH_NAMESPACE, PROBE_ADDRESS, LEADER_ELECTION_NAMESPACE)
 */
import {
  ControllerManager, controllerOf, coreResources, finalizer, findStatusCondition, ignoreNotFound, keyOf, newControllerRef,
  parseWatchNamespace, setStatusCondition, type Reconciler, type ReconcilerHost,
} from 'ts-controller-manager';
import type { Deployment } from 'ts-controller-manager/api/apps/v1';
import { apiVersion, memcachedKind, memcachedResource, type Memcached } from './api/example/v1alpha1/zz_generated.types.ts';

const fieldManager = 'memcached-controller'; // owns the fields it applies: the Deployment's spec, the Memcached's status
const finalizerName = 'example.ts-controller-manager.io/finalizer';

/** The reconciler on any ReconcilerHost: a ControllerManager, or a FakeClient's host() in a unit test (reconcile.test.ts). */
export function memcachedReconciler(mgr: ReconcilerHost): Reconciler {
  const memcacheds = mgr.informer<Memcached>(memcachedResource).lister();
  const deployments = mgr.informer<Deployment>(coreResources.deployments).lister();
  const memcachedApi = mgr.client.resource<Memcached>(memcachedResource);
  const deploymentApi = mgr.client.resource<Deployment>(coreResources.deployments);
  return async ({ namespace, name }, signal, { log }) => {
    const m = memcacheds.get(namespace, name);
    if (!m) return; // gone: its finalizer already deleted the Deployment
    const api = memcachedApi.namespace(namespace);
    const deploys = deploymentApi.namespace(namespace);
    // finalizer(): added (fenced by resourceVersion) before apply runs; the Deployment's controller ownerReference
    // lets the garbage collector delete it even if a DELETE under way ignored the finalizer (kubernetes#77988);
    // on deletion cleanup runs, then the finalizer is removed. A stale cache re-reads instead of failing.
    return finalizer(api, m, finalizerName, { apply, cleanup }, { signal });

    async function cleanup(m: Memcached): Promise<void> {
      // Read the API, not the cache: a Deployment applied a moment ago may not be cached yet. Delete only ours.
      const d = await ignoreNotFound(deploys.get(name, { signal }));
      if (d && controllerOf(d)?.uid === m.metadata?.uid) {
        await ignoreNotFound(deploys.delete(name, { preconditions: { uid: d.metadata?.uid }, signal }));
        log.info({ deployment: name }, 'Deleted the Deployment');
      }
    }

    async function apply(m: Memcached): Promise<void> {
      // Never take over someone else's Deployment of that name (a forced apply would): say so and wait for it to change.
      const existing = deployments.get(namespace, name);
      if (existing && controllerOf(existing)?.uid !== m.metadata?.uid) {
        return setReady(m, false, 'ResourceExists', `Deployment ${name} exists and is not managed by this Memcached`, 0);
      }
      // Server-side apply: states exactly the fields this controller owns; idempotent (no write when nothing changed),
      // and `force` takes back any of them someone changed by hand. Fields others set (annotations, …) are left alone.
      const labels = { 'app.kubernetes.io/name': 'memcached', 'app.kubernetes.io/instance': name };
      const size = m.spec?.size ?? 1;
      await deploys.apply({
        metadata: { name, labels, ownerReferences: [newControllerRef({ ...m, apiVersion, kind: memcachedKind })] },
        spec: {
          replicas: size,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              containers: [{
                name: 'memcached', image: m.spec?.image, command: ['memcached', '--memory-limit=64', '-o', 'modern', '-v'],
                ports: [{ name: 'memcached', containerPort: 11211 }],
              }],
            },
          },
        },
      }, { fieldManager, force: true, signal });
      // Ready once the Deployment controller has seen this spec and every replica is available. The Deployment's status
      // changes come back here through `.owns`.
      const d = deployments.get(namespace, name);
      const available = d?.status?.availableReplicas ?? 0;
      const ready = d?.status?.observedGeneration === d?.metadata?.generation && d?.spec?.replicas === size && available >= size;
      return setReady(m, ready, ready ? 'Available' : 'Progressing', `${available}/${size} replicas available`, available);
    }

    async function setReady(m: Memcached, isReady: boolean, reason: string, message: string, available: number): Promise<void> {
      // setStatusCondition moves lastTransitionTime only when the status changes; nothing new → no write.
      const conditions = structuredClone(m.status?.conditions ?? []);
      const old = findStatusCondition(m.status?.conditions, 'Ready');
      const status = isReady ? 'True' : 'False';
      const changed = setStatusCondition(conditions, { type: 'Ready', status, reason, message, observedGeneration: m.metadata?.generation });
      if (!changed && m.status?.availableReplicas === available) return;
      const ready = conditions.filter((c) => c.type === 'Ready'); // apply only the condition this controller owns
      await api.status().apply({ metadata: { name }, status: { availableReplicas: available, conditions: ready } }, { fieldManager, force: true, signal });
      if (old?.status !== status || old.reason !== reason) log.info({ memcached: name, ready: status, reason, message }, 'Ready changed');
    }
  };
}

/** Declares the memcached controller on `mgr`. */
export function setupMemcached(mgr: ControllerManager): void {
  mgr.controller('memcached')
    .for<Memcached>(memcachedResource)
    .owns(coreResources.deployments) // a change to an owned Deployment (drift, status) requeues its Memcached
    .watches<Deployment>(coreResources.deployments, (d) => [keyOf(d.metadata?.namespace, d.metadata?.name ?? '')]) // and a foreign one of its name
    .rbac( // what the reconciler calls beyond its informers: gen rbac writes rbac/role.yaml from it
      { resource: memcachedResource, verbs: ['get', 'patch'], why: 'finalizer add/remove (re-read when stale)' },
      { resource: memcachedResource, subresource: 'status', verbs: ['patch'], why: 'status applied' },
      { resource: coreResources.deployments, verbs: ['get', 'create', 'patch', 'delete'], why: 'server-side apply (create when absent), cleanup' },
    )
    .complete(memcachedReconciler(mgr));
}

if (import.meta.main) { // `node main.ts`; importing this file (the tests) runs nothing
  const env = process.env;
  const mgr = new ControllerManager({
    namespaces: parseWatchNamespace(env['WATCH_NAMESPACE']),
    healthProbeBindAddress: env['PROBE_ADDRESS'] ?? ':8081',
    ...(env['LEADER_ELECTION_NAMESPACE'] ? { leaderElection: { id: 'memcached', namespace: env['LEADER_ELECTION_NAMESPACE'] } } : {}),
  });
  setupMemcached(mgr);
  process.exitCode = await mgr.run();
}
