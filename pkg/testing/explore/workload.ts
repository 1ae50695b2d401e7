/**
 * Workloads: what the test does to the cluster while the controllers run — the steps of `explore`'s executions.
 *
 *   workload: [
 *     create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }),
 *     create(foo),
 *     settle(),                                        // wait until the controllers are at rest
 *     patch(foo, { spec: { replicas: 3 } }),
 *     patch(deploymentOf(foo), { status: { availableReplicas: 3 } }, { status: true }),   // another controller's write
 *     remove(foo),
 *   ]
 *
 * Steps run in order against the store as a client of their own (never perturbed; recorded as 'workload'); a step
 * that fails fails the execution with its error. Between two steps without `settle()` the controllers get no chance
 * to act (the steps run back to back); an execution always ends with a settle.
 */
import type { KubeObject } from '../../apimachinery/meta.ts';
import type { ApiClient } from '../../client/typed.ts';

/** An object named by apiVersion, kind, namespace and name. */
export interface ObjectRef {
  /** The object's apiVersion (with kind: its type). */
  apiVersion?: string | undefined;
  /** The object's kind. */
  kind?: string | undefined;
  /** Its namespace (for a namespaced type) and name. */
  metadata?: { namespace?: string | undefined; name?: string | undefined } | undefined;
}

/** One workload step. */
export type Step =
  | { op: 'create'; object: KubeObject }
  | { op: 'patch'; target: ObjectRef; patch: unknown; status: boolean }
  | { op: 'delete'; target: ObjectRef }
  | { op: 'settle' }
  | { op: 'run'; description: string; fn: (client: ApiClient, world: unknown) => unknown };

/** Creates `object` (its apiVersion and kind name the type). */
export function create(object: KubeObject): Step {
  return { op: 'create', object };
}

/** Merge-patches `target` (its `/status` with `{ status: true }`). */
export function patch(target: ObjectRef, body: unknown, opts: { status?: boolean } = {}): Step {
  return { op: 'patch', target, patch: body, status: opts.status ?? false };
}

/** Deletes `target` (finalizers are honoured: it is then only marked for deletion). */
export function remove(target: ObjectRef): Step {
  return { op: 'delete', target };
}

/** Waits until the controllers are at rest (a fixpoint: nothing queued, running or due within the horizon). */
export function settle(): Step {
  return { op: 'settle' };
}

/**
 * Anything else, with the store as the client and the execution's world (e.g. a user writing into a cloud resource;
 * what another controller writes is better a peer: ExploreOptions.peers).
 */
export function run<W = unknown>(description: string, fn: (client: ApiClient, world: W) => unknown): Step {
  return { op: 'run', description, fn: fn as (client: ApiClient, world: unknown) => unknown };
}

/** A step in words (the trace). */
export function describeStep(s: Step): string {
  const ref = (o: ObjectRef): string => `${o.kind ?? '?'} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name ?? '?'}`;
  switch (s.op) {
    case 'create': return `create ${ref(s.object)}`;
    case 'patch': return `patch ${ref(s.target)}${s.status ? '/status' : ''} ${JSON.stringify(s.patch)}`;
    case 'delete': return `delete ${ref(s.target)}`;
    case 'settle': return 'settle';
    case 'run': return s.description;
  }
}
