/**
 * Options, patch kinds and API shapes of the typed client (typed.ts): what each call sends as query parameters and
 * body, named as the API server (and controller-runtime's `client.*Option`, kube-rs's `*Params`) name them.
 *
 * Every call takes `signal` and `timeoutMs` as RestClient does: a GET is cut when the signal aborts; a write is
 * refused if the signal (or the manager's write gate) aborted before it was sent, and otherwise runs to its answer.
 */
import type { KubeObject, ObjectMeta } from '../apimachinery/meta.ts';
import type { Selector } from '../apimachinery/labelselector.ts';
import type { Query } from './request.ts';

/** What every call accepts. */
export interface CallOptions {
  /** Aborting it cuts a GET at once; a write is refused if it aborted before the write was sent (then runs to its answer). */
  signal?: AbortSignal;
  /** Whole-request timeout (RestClient's default 30 s). */
  timeoutMs?: number;
}

/** How the server treats fields it does not know (`fieldValidation`; the server's default is Warn). */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

/** Options shared by create, update and the non-apply patches. */
export interface WriteOptions extends CallOptions {
  /**
   * `dryRun=All`: the server runs admission, validation and defaulting and answers with the object it WOULD have
   * stored; nothing is persisted, no resourceVersion changes, no watch event is sent.
   */
  dryRun?: boolean;
  /** Recorded in `metadata.managedFields` as the manager of the fields this write sets (optional outside apply). */
  fieldManager?: string;
  /** `Strict`: an unknown or duplicate field fails the write (400); `Warn` (the server's default): a warning; `Ignore`. */
  fieldValidation?: FieldValidation;
}

/** Options of a create (dryRun, fieldManager, fieldValidation). */
export type CreateOptions = WriteOptions;
/** Options of an update (dryRun, fieldManager, fieldValidation). */
export type UpdateOptions = WriteOptions;
/** Options of a merge or JSON patch (dryRun, fieldManager, fieldValidation). */
export type PatchOptions = WriteOptions;

/** Server-side apply options (kube-rs `PatchParams::apply(manager)`, controller-runtime `client.FieldOwner`/`ForceOwnership`). */
export interface ApplyOptions extends CallOptions {
  /**
   * Required: the field manager that owns every field of the applied configuration afterwards. Fields it applied
   * before and leaves out now are removed (unless another manager also owns them).
   */
  fieldManager: string;
  /**
   * Take ownership of fields another manager set to a different value. Without it such an apply fails with
   * 409 Conflict (reason `Conflict`, the conflicting managers in the message) and changes nothing. Controllers
   * usually force: they are the authority for the fields they apply.
   */
  force?: boolean;
  /** `dryRun=All`: see WriteOptions.dryRun. */
  dryRun?: boolean;
  /** See WriteOptions.fieldValidation. */
  fieldValidation?: FieldValidation;
}

/** Options of a get. */
export interface GetOptions extends CallOptions {
  /** '' or absent: the latest (a quorum read from etcd); '0': any version the API server's cache holds. */
  resourceVersion?: string;
}

/** Options of a list: selectors, paging, resourceVersion semantics. */
export interface ListOptions extends CallOptions {
  /** A label selector: `app=web,tier!=db`, or a Selector (selectorFromSet, parseSelector, …). */
  labelSelector?: string | Selector;
  /** A field selector, e.g. `metadata.name=foo` or `status.phase=Running` (only the fields the resource supports). */
  fieldSelector?: string;
  /** Page size; the answer carries `metadata.continue` when more remain (see ResourceClient.listAll). */
  limit?: number;
  /** The `metadata.continue` token of the previous page. */
  continue?: string;
  /** Absent: the latest (a quorum read); '0': whatever the API server's cache holds; else see resourceVersionMatch. */
  resourceVersion?: string;
  /** With a resourceVersion: `Exact` that version (410 Gone once compacted), `NotOlderThan` it or newer. */
  resourceVersionMatch?: 'Exact' | 'NotOlderThan';
}

/** metav1.Preconditions: the delete happens only if the object still has this uid / resourceVersion (else 409). */
export interface Preconditions {
  /** Delete only the object with this uid (not a later one of the same name). */
  uid?: string;
  /** Delete only if nothing changed it since this resourceVersion was read. */
  resourceVersion?: string;
}

/**
 * metav1.DeleteOptions. `propagationPolicy` decides the dependents (objects whose ownerReferences name this one):
 * `Background` (the default for most types) deletes the object now and its dependents afterwards; `Foreground` keeps
 * the object (deletionTimestamp set, finalizer `foregroundDeletion`) until the garbage collector deleted every
 * dependent with blockOwnerDeletion; `Orphan` (finalizer `orphan`) removes this object from the dependents'
 * ownerReferences and leaves them.
 */
export interface DeleteOptions extends CallOptions {
  /** Delete only if the object still has this uid / resourceVersion (else 409 Conflict). */
  preconditions?: Preconditions;
  /** What happens to the dependents (see above); absent: the resource's default (Background for most). */
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
  /** Seconds before the object is deleted (Pods: the termination grace period); 0 = at once. */
  gracePeriodSeconds?: number;
  /** `dryRun: ["All"]`: validated and answered, nothing deleted. */
  dryRun?: boolean;
}

/** metav1.ListMeta. */
export interface ListMeta {
  /** The version the list was read at: a watch started from it misses nothing. */
  resourceVersion?: string;
  /** Present when more pages remain: pass it as ListOptions.continue. */
  continue?: string;
  /** An estimate of the items after this page (absent when unknown, e.g. with a label selector). */
  remainingItemCount?: number;
}

/** A list answer (`<Kind>List`). */
export interface ObjectList<T> {
  /** The list's `group/version`. */
  apiVersion?: string;
  /** `<Kind>List`. */
  kind?: string;
  /** The list's resourceVersion and paging. */
  metadata: ListMeta;
  /** The objects (the server may leave out their apiVersion and kind). */
  items: T[];
}

/** metav1.Status: what some calls (a DELETE that removed the object at once) answer instead of an object. */
export interface Status {
  /** `v1`. */
  apiVersion?: string;
  /** Always `Status`. */
  kind: 'Status';
  /** `Success` or `Failure`. */
  status?: 'Success' | 'Failure';
  /** For humans. */
  message?: string;
  /** A CamelCase word for programs (e.g. `NotFound`, `Conflict`). */
  reason?: string;
  /** The HTTP status code. */
  code?: number;
  /** The object the answer is about. */
  details?: { name?: string; group?: string; kind?: string; uid?: string };
}

/** autoscaling/v1 Scale: the `/scale` subresource of Deployments, ReplicaSets, StatefulSets and CRDs that enable it. */
export interface Scale {
  /** `autoscaling/v1`. */
  apiVersion?: 'autoscaling/v1';
  /** `Scale`. */
  kind?: 'Scale';
  /** The scaled object's name, namespace and resourceVersion (an update with a stale one is 409). */
  metadata?: ObjectMeta;
  /** The desired replicas: what an update of /scale changes. */
  spec?: { replicas?: number };
  /** The observed replicas and the label selector of the Pods they count. */
  status?: { replicas: number; selector?: string };
}

/** Every field optional, recursively (arrays of partial items): the shape of an apply configuration. */
export type DeepPartial<T> = T extends readonly (infer U)[]
  ? DeepPartial<U>[]
  : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;

/**
 * A JSON merge patch (RFC 7386) of T: any subset of fields; `null` deletes a field or map key; an array replaces the
 * whole array. Set `metadata.resourceVersion` in it to make the patch conditional (409 Conflict if it changed).
 */
export type MergePatch<T> = T extends readonly unknown[]
  ? T
  : T extends object ? { [K in keyof T]?: MergePatch<T[K]> | null } : T;

/** One RFC 6902 JSON patch operation; `path` is a JSON pointer (`/metadata/labels/app`, `~1` escapes a `/`). */
export type JsonPatchOperation =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; from: string; path: string };

/**
 * A patch, by kind (kube-rs's `Patch::{Merge, Json, Strategic}`):
 * - `{ merge }`: JSON merge patch (`application/merge-patch+json`), any resource, CRDs included.
 * - `{ json }`: JSON patch (`application/json-patch+json`); a `test` operation makes it conditional.
 * - `{ strategic }`: strategic merge patch (`application/strategic-merge-patch+json`), built-in types only (the
 *   server answers 415 for custom resources): lists with a merge key (containers by name, …) are merged by key.
 * Server-side apply is not a patch kind here: use `apply()`.
 */
export type Patch<T> =
  | { merge: MergePatch<T> }
  | { json: JsonPatchOperation[] }
  | { strategic: DeepPartial<T> };

/** The content type a patch is sent with. */
export function patchContentType(patch: Patch<unknown>): { contentType: string; body: unknown } {
  if ('merge' in patch) return { contentType: 'application/merge-patch+json', body: patch.merge };
  if ('json' in patch) return { contentType: 'application/json-patch+json', body: patch.json };
  return { contentType: 'application/strategic-merge-patch+json', body: patch.strategic };
}

/** Server-side apply content type: the body is YAML, and JSON is YAML. */
export const applyPatchContentType = 'application/apply-patch+yaml';

/**
 * An apply configuration of T: the fields the field manager owns, nothing else (a field left out is NOT reset; it
 * is given up if this manager owned it). `apiVersion` and `kind` are filled from the resource type when absent;
 * `metadata.name` is required; `metadata.namespace` defaults to the client's namespace.
 */
export type ApplyConfiguration<T extends KubeObject> = DeepPartial<Omit<T, 'metadata'>> & {
  metadata: DeepPartial<ObjectMeta> & { name: string };
};

/** Query parameters of a write. */
export function writeQuery(opts: WriteOptions | ApplyOptions): Query {
  return {
    dryRun: opts.dryRun ? 'All' : undefined,
    fieldManager: opts.fieldManager || undefined,
    fieldValidation: opts.fieldValidation,
    force: 'force' in opts && opts.force ? true : undefined,
  };
}

/** Query parameters of a list. */
export function listQuery(opts: ListOptions): Query {
  const labelSelector = opts.labelSelector === undefined ? undefined : String(opts.labelSelector);
  return {
    labelSelector: labelSelector || undefined,
    fieldSelector: opts.fieldSelector || undefined,
    limit: opts.limit,
    continue: opts.continue || undefined,
    resourceVersion: opts.resourceVersion,
    resourceVersionMatch: opts.resourceVersionMatch,
  };
}

/** The DeleteOptions body of a DELETE (undefined when no option is set: the server's defaults). */
export function deleteBody(opts: DeleteOptions): Record<string, unknown> | undefined {
  const body: Record<string, unknown> = {};
  if (opts.preconditions) body['preconditions'] = opts.preconditions;
  if (opts.propagationPolicy) body['propagationPolicy'] = opts.propagationPolicy;
  if (opts.gracePeriodSeconds !== undefined) body['gracePeriodSeconds'] = opts.gracePeriodSeconds;
  if (opts.dryRun) body['dryRun'] = ['All'];
  return Object.keys(body).length ? { apiVersion: 'v1', kind: 'DeleteOptions', ...body } : undefined;
}
