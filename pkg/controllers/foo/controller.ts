/**
 * Foo controller: k8s.io/sample-controller's controller. A Foo owns a Deployment named spec.deploymentName in its
 * namespace (shape in desired.ts) and mirrors the Deployment's status.availableReplicas.
 *
 *   Foo informer ───────add/update/delete──────────────▶ queue "ns/foo" ──▶ reconcile (below)
 *   shared Deployment informer ──controller ownerRef (Foo)──┘  and the Foo index by spec.deploymentName
 *
 * Reads come only from the listers; a write happens only when the cache shows a difference. Deviations from upstream
 * (all deliberate; see docs/controllers.md): `Synced` is recorded only when the reconcile changed something; replica drift is
 * fixed with a merge patch of spec.replicas (upstream PUTs the whole desired Deployment); a Foo being deleted is left
 * to the garbage collector; an empty deploymentName gets one Warning Event per Foo generation (upstream only logs).
 *
 * Fencing (docs/safety.md): the replica patch and the status patch carry the resourceVersion of the cached object they
 * were derived from; a 409 (the object changed since: a late write, or a cache behind our own last write) requeues
 * quietly. The create is fenced by name (AlreadyExists); Events are append-only and not fenced.
 */
import type { Foo } from '../../apis/samplecontroller/v1alpha1/types.ts';
import { isAlreadyExists, isConflict, type RestClient } from '../../client/rest.ts';
import { inheritedShardLabels } from '../../sharding/shard.ts';
import { TerminalError, type Reconciler, type Result } from '../../controller/index.ts';
import type { Recorder } from '../../events/recorder.ts';
import type { IndexerReader } from '../../informerfactory/indexer.ts';
import type { Lister } from '../../informerfactory/lister.ts';
import type { Logger } from '../../log/logger.ts';
import { keyOf, metaNamespaceKey } from '../../apimachinery/keys.ts';
import { collectionPath, objectPath } from '../../apimachinery/paths.ts';
import { deploymentResource, type Deployment } from '../deployment/types.ts';
import type { ControllerSetup } from '../setup.ts';
import {
  ErrInvalidSpec, ErrResourceExists, FOO_BY_DEPLOYMENT_INDEX, fooDeploymentIndexFunc, fooRef, fooResource, isControlledBy,
  MessageDeploymentNameRequired, messageResourceExists, MessageResourceSynced, newDeployment, SuccessSynced,
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
  /**
   * Foo key → "uid/resourceVersion/availableReplicas": the status this reconciler last wrote successfully, and the
   * cached version it was derived from (an expectation, as client-go's ControllerExpectations). While the cache still
   * shows exactly that version, the server already holds the value (our fenced patch was applied on top of it) and
   * the watch event of our own write is on its way and will queue the Foo again: writing again would only be refused
   * with 409 (~6 % of the writes while N Foos converge: the Deployment's ADDED event reconciles the Foo before the
   * Foo's own update arrived). Any other cached version — newer, or the same name re-created — writes as before.
   * Only ever skips a write, never makes one; an entry lives until the cache shows the status or the Foo is gone.
   */
  const statusWritten = new Map<string, string>();

  return async ({ namespace, name }, signal, { log }) => {
    const key = keyOf(namespace, name);
    const foo = foos.get(namespace, name);
    if (!foo) {
      reportedInvalid.delete(key);
      statusWritten.delete(key);
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
      // With sharding the Deployment carries the Foo's shard label, so it is in this shard's cache at once.
      const body = newDeployment(foo);
      const shardLabels = inheritedShardLabels(foo);
      if (Object.keys(shardLabels).length > 0) body.metadata = { ...body.metadata, labels: shardLabels };
      try {
        deployment = await rest.json<Deployment>('POST', collectionPath(deploymentResource, namespace), { body, signal });
        log.info({ deployment: deploymentName }, 'Created Deployment');
        changed = true;
      } catch (err) {
        // Not in the cache but there: our own Deployment the cache has not caught up with (with sharding: a Foo that
        // just moved here, whose relabelled Deployment is on its way in another watch) — look again shortly — or
        // someone else's (with sharding the cache holds only this shard's Deployments): upstream's Warning below.
        if (!isAlreadyExists(err)) throw err;
        deployment = await rest.json<Deployment>('GET', objectPath(deploymentResource, namespace, deploymentName), { signal });
        if (isControlledBy(deployment, foo)) {
          log.debug({ deployment: deploymentName }, 'Deployment exists but is not in the cache yet; looking again');
          return { requeue: true };
        }
      }
    }
    if (!isControlledBy(deployment, foo)) {
      const msg = messageResourceExists(deploymentName);
      recorder.event(fooRef(foo), 'Warning', ErrResourceExists, msg);
      throw new Error(msg); // rate-limited retry, as upstream
    }

    // Fencing (docs/safety.md): both patches carry the resourceVersion of the cached object they were derived from, so
    // a write built from a cache that is behind (a late write of an old leader, or the cache lagging our own last
    // write) fails with 409 instead of overwriting a newer one. That is expected, not an error: requeue quietly; the
    // newer version reaches the cache (and queues this Foo) anyway.
    const replicas = foo.spec?.replicas;
    if (replicas !== undefined && replicas !== deployment.spec?.replicas) {
      log.info({ deployment: deploymentName, from: deployment.spec?.replicas, to: replicas }, 'Correcting Deployment replicas');
      try {
        deployment = await rest.json<Deployment>('PATCH', objectPath(deploymentResource, namespace, deploymentName), {
          body: { metadata: { uid: deployment.metadata?.uid, resourceVersion: deployment.metadata?.resourceVersion }, spec: { replicas } }, contentType: mergePatch, signal,
        });
      } catch (err) {
        return staleWrite(err, log, 'Deployment');
      }
      changed = true;
    }

    const available = deployment.status?.availableReplicas ?? 0;
    if (foo.status?.availableReplicas !== available) {
      const mark = `${foo.metadata?.uid}/${foo.metadata?.resourceVersion}/${available}`;
      if (statusWritten.get(key) === mark) {
        log.debug('status already written on top of the cached version; waiting for the cache to show it');
      } else {
        try {
          await rest.json('PATCH', `${objectPath(fooResource, namespace, name)}/status`, {
            body: fooStatusPatch(foo, available), contentType: mergePatch, signal,
          });
        } catch (err) {
          statusWritten.delete(key);
          return staleWrite(err, log, 'Foo');
        }
        statusWritten.set(key, mark);
        changed = true;
      }
    } else statusWritten.delete(key);
    if (changed) recorder.event(fooRef(foo), 'Normal', SuccessSynced, MessageResourceSynced);
    return undefined;
  };
}

/**
 * The Foo status merge patch, fenced: the uid (not a re-created Foo of the same name) and the resourceVersion of the
 * cached Foo the value was derived from (409 Conflict if the Foo changed since).
 */
export function fooStatusPatch(foo: Foo, availableReplicas: number): unknown {
  return { metadata: { uid: foo.metadata?.uid, resourceVersion: foo.metadata?.resourceVersion }, status: { availableReplicas } };
}

/** A fenced write refused with 409 (the object moved on since the cached version): requeue quietly; else rethrow. */
function staleWrite(err: unknown, log: Logger, kind: string): Result {
  if (!isConflict(err)) throw err;
  log.debug({ kind }, 'the object changed since the cached version this write was derived from (409); requeueing');
  return { requeue: true };
}

/**
 * The Foo controller's declaration: Foos are the primary type, their Deployments are owned (mapped back through the
 * controller ownerReference), and a Deployment event also reaches every Foo that wants a Deployment of that name (so
 * a Foo blocked by an unowned Deployment retries at once when it goes away or changes).
 */
export const fooControllerSetup: ControllerSetup = {
  name: fooControllerName,
  setup(mgr, { concurrency }) {
    const builder = mgr.controller(fooControllerName).for<Foo>(fooResource).owns(deploymentResource);
    const foos = builder.informer();
    foos.addIndexers({ [FOO_BY_DEPLOYMENT_INDEX]: fooDeploymentIndexFunc });
    const deployments = builder.informerOf<Deployment>(deploymentResource);
    return builder
      .watches<Deployment>(deploymentResource, (d) => foosWanting(foos.getIndexer(), d))
      // What the reconcile writes (gen rbac → config/rbac/role.yaml). Not declared: the GET of a Deployment after
      // its create answered AlreadyExists (a cache lag, or with sharding another shard's) — config/rbac never granted
      // it and test/deploy.test.ts cannot reach it unsharded, so without `get` that path retries with backoff.
      .rbac(
        { resource: deploymentResource, verbs: ['create', 'patch'], why: 'creates its Deployment, corrects its replicas' },
        { resource: fooResource, subresource: 'status', verbs: ['patch'], why: 'status.availableReplicas' },
      )
      .withOptions({ ...(concurrency !== undefined ? { concurrency } : {}) })
      .complete(fooReconciler({
        foos: foos.lister(), deployments: deployments.lister(), rest: mgr.client, recorder: mgr.recorderFor(`${fooControllerName}-controller`),
      }));
  },
};

/** Keys of the Foos whose spec.deploymentName names `d` (the FOO_BY_DEPLOYMENT_INDEX lookup). */
export function foosWanting(fooIndex: IndexerReader<Foo>, d: Deployment): string[] {
  return fooIndex.byIndex(FOO_BY_DEPLOYMENT_INDEX, `${d.metadata?.namespace ?? ''}/${d.metadata?.name ?? ''}`).map(metaNamespaceKey);
}
