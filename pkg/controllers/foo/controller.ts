/**
 * Foo controller: k8s.io/sample-controller's controller. A Foo owns a Deployment named spec.deploymentName in its
 * namespace (shape in desired.ts) and mirrors the Deployment's status.availableReplicas.
 *
 *   Foo informer ───────add/update/delete──────────────▶ queue "ns/foo" ──▶ reconcile (below)
 *   shared Deployment informer ──controller ownerRef (Foo)──┘  and the Foo index by spec.deploymentName
 *
 * Reads come only from the listers; a write happens only when the cache shows a difference. Deviations from upstream
 * (all deliberate; see the README): `Synced` is recorded only when the reconcile changed something; replica drift is
 * fixed with a merge patch of spec.replicas (upstream PUTs the whole desired Deployment); a Foo being deleted is left
 * to the garbage collector; an empty deploymentName gets one Warning Event per Foo generation (upstream only logs).
 */
import type { Foo } from '../../apis/samplecontroller/v1alpha1/types.ts';
import type { RestClient } from '../../client/rest.ts';
import { Controller, TerminalError, type Reconciler } from '../../controller/index.ts';
import { addPriority, PriorityNormal, updatePriority } from '../../controller/priority.ts';
import type { Recorder } from '../../events/recorder.ts';
import type { IndexerReader } from '../../informerfactory/indexer.ts';
import type { Lister } from '../../informerfactory/lister.ts';
import { deletionHandlingKey, keyOf, metaNamespaceKey, objectOfDelete } from '../../informerfactory/object.ts';
import { collectionPath, objectPath } from '../../informerfactory/resource.ts';
import { deploymentResource, type Deployment } from '../deployment/types.ts';
import type { ControllerSetup } from '../setup.ts';
import {
  ErrInvalidSpec, ErrResourceExists, FOO_BY_DEPLOYMENT_INDEX, fooDeploymentIndexFunc, fooRef, fooResource, isControlledBy,
  MessageDeploymentNameRequired, messageResourceExists, MessageResourceSynced, newDeployment, owningFooName, SuccessSynced,
} from './desired.ts';

export const fooControllerName = 'foo';
const mergePatch = 'application/merge-patch+json';

export interface FooReconcilerDeps {
  foos: Lister<Foo>;
  deployments: Lister<Deployment>;
  rest: Pick<RestClient, 'json'>;
  recorder: Recorder;
}

export function fooReconciler({ foos, deployments, rest, recorder }: FooReconcilerDeps): Reconciler {
  /** Foo key → "uid/generation" of the invalid spec already reported (one Warning per generation, not per resync). */
  const reportedInvalid = new Map<string, string>();

  return async ({ namespace, name }, signal, { log }) => {
    const key = keyOf(namespace, name);
    const foo = foos.get(namespace, name);
    if (!foo) {
      reportedInvalid.delete(key);
      log.debug('Foo no longer exists');
      return;
    }
    if (foo.metadata?.deletionTimestamp) return; // the garbage collector removes the Deployment

    const deploymentName = foo.spec?.deploymentName;
    if (!deploymentName) {
      const mark = `${foo.metadata?.uid}/${foo.metadata?.generation}`;
      if (reportedInvalid.get(key) !== mark) recorder.event(fooRef(foo), 'Warning', ErrInvalidSpec, MessageDeploymentNameRequired);
      reportedInvalid.set(key, mark);
      // Retrying cannot help; the next update of the Foo queues it again.
      throw new TerminalError(`${key}: deployment name must be specified`);
    }
    reportedInvalid.delete(key);

    let changed = false;
    let deployment = deployments.get(namespace, deploymentName);
    if (!deployment) {
      deployment = await rest.json<Deployment>('POST', collectionPath(deploymentResource, namespace), { body: newDeployment(foo), signal });
      log.info({ deployment: deploymentName }, 'Created Deployment');
      changed = true;
    }
    if (!isControlledBy(deployment, foo)) {
      const msg = messageResourceExists(deploymentName);
      recorder.event(fooRef(foo), 'Warning', ErrResourceExists, msg);
      throw new Error(msg); // rate-limited retry, as upstream
    }

    const replicas = foo.spec?.replicas;
    if (replicas !== undefined && replicas !== deployment.spec?.replicas) {
      log.info({ deployment: deploymentName, from: deployment.spec?.replicas, to: replicas }, 'Correcting Deployment replicas');
      deployment = await rest.json<Deployment>('PATCH', objectPath(deploymentResource, namespace, deploymentName), {
        body: { metadata: { uid: deployment.metadata?.uid }, spec: { replicas } }, contentType: mergePatch, signal,
      });
      changed = true;
    }

    const available = deployment.status?.availableReplicas ?? 0;
    if (foo.status?.availableReplicas !== available) {
      await rest.json('PATCH', `${objectPath(fooResource, namespace, name)}/status`, {
        body: { metadata: { uid: foo.metadata?.uid }, status: { availableReplicas: available } }, contentType: mergePatch, signal,
      });
      changed = true;
    }
    if (changed) recorder.event(fooRef(foo), 'Normal', SuccessSynced, MessageResourceSynced);
  };
}

export const fooControllerSetup: ControllerSetup = {
  name: fooControllerName,
  setup(ctx) {
    const foos = ctx.factory.informerFor<Foo>(fooResource);
    const deployments = ctx.factory.informerFor<Deployment>(deploymentResource);
    foos.addIndexers({ [FOO_BY_DEPLOYMENT_INDEX]: fooDeploymentIndexFunc });
    const controller = new Controller({
      name: fooControllerName,
      reconciler: fooReconciler({ foos: foos.lister(), deployments: deployments.lister(), rest: ctx.rest, recorder: ctx.recorder }),
      maxConcurrentReconciles: ctx.concurrency,
      logger: ctx.logger,
      registry: ctx.registry,
      gracefulShutdownTimeoutMs: ctx.gracefulShutdownTimeoutMs,
      ...ctx.queue,
    });
    // Priorities: the initial list and resyncs are low, real changes normal (priority.ts).
    const enqueueFoo = (foo: Foo, priority: number): void => controller.enqueue(metaNamespaceKey(foo), priority);
    const handleDeployment = (d: Deployment, priority: number): void =>
      enqueueFoosOf(foos.lister(), foos.getIndexer(), (key) => controller.enqueue(key, priority))(d);
    const fooReg = foos.addEventHandler({
      onAdd: (foo, initial) => enqueueFoo(foo, addPriority(initial)),
      onUpdate: (old, foo) => enqueueFoo(foo, updatePriority(old, foo)),
      onDelete: (foo) => controller.enqueue(deletionHandlingKey(foo)),
    });
    const deploymentReg = deployments.addEventHandler({
      onAdd: (d, initial) => handleDeployment(d, addPriority(initial)),
      onUpdate: (old, d) => {
        if (old.metadata?.resourceVersion === d.metadata?.resourceVersion) return; // resync: the Foos resync themselves
        handleDeployment(d, PriorityNormal);
        if (owningFooName(old) !== owningFooName(d)) handleDeployment(old, PriorityNormal);
      },
      onDelete: (d) => {
        const obj = objectOfDelete(d);
        if (obj) handleDeployment(obj, PriorityNormal);
      },
    });
    return Promise.resolve({ runnable: controller, syncedChecks: [() => fooReg.hasSynced(), () => deploymentReg.hasSynced()] });
  },
};

/**
 * Maps a Deployment event to Foo keys: the Foo named by its controller ownerReference (if that Foo is cached), and
 * every Foo that wants a Deployment of this name (so a Foo blocked by an unowned Deployment retries at once when
 * that Deployment goes away or changes).
 */
export function enqueueFoosOf(foos: Lister<Foo>, fooIndex: IndexerReader<Foo>, enqueue: (key: string) => void): (d: Deployment) => void {
  return (d) => {
    const namespace = d.metadata?.namespace ?? '';
    const owner = owningFooName(d);
    if (owner !== undefined && foos.get(namespace, owner)) enqueue(keyOf(namespace, owner));
    for (const foo of fooIndex.byIndex(FOO_BY_DEPLOYMENT_INDEX, `${namespace}/${d.metadata?.name ?? ''}`)) {
      enqueue(metaNamespaceKey(foo));
    }
  };
}
