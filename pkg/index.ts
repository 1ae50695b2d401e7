/**
 * ts-controller-manager as a library: the public entry point (`import … from 'ts-controller-manager'`).
 *
 *   const mgr = new ControllerManager({ leaderElection: { id: 'copier', namespace: 'kube-system' } });
 *   mgr.controller('copier').for(coreResources.configMaps).owns(coreResources.secrets).complete(reconcile);
 *   process.exitCode = await mgr.run();
 *
 * The binary (cmd/manager), the integration-test harness and examples/ are built from exactly these pieces.
 * Everything exported here is API: names follow client-go / controller-runtime where one exists.
 */

// Composition and builder.
export {
  ControllerManager, packageVersion, type ControllerManagerOptions, type LeaderElectionOptions, type ReconcilerHost,
  type WebhookOptions,
} from './runtime/manager.ts';
export { ControllerBuilder, type BuilderOptions, type ForOptions, type MapFunc, type SourceOptions } from './runtime/builder.ts';
// Event predicates for for/owns/watches (controller-runtime pkg/predicate).
export {
  generationChanged, labelsChanged, annotationsChanged, and as predicateAnd, or as predicateOr, not as predicateNot,
  type Predicate,
} from './runtime/predicate.ts';

// Admission and conversion webhooks (controller-runtime pkg/webhook; docs/webhooks.md).
export * from './webhook/index.ts';
// Serving certificates: any TlsSource can feed the webhook (and metrics) server.
export { CertDirWatcher, GeneratedCertificate, type CertDirWatcherOptions, type GeneratedCertificateOptions } from './manager/certwatcher.ts';
export type { TlsPair, TlsSource } from './manager/httpserver.ts';

// Reconcile helpers: a finalizer around apply/cleanup, create-or-patch (controller-runtime controllerutil, kube-rs).
export { finalizer, type FinalizerHandlers } from './runtime/finalizer.ts';
export { BypassedFinalizers } from './runtime/bypassedfinalizer.ts';
export { createOrPatch, type OperationResult } from './runtime/createorpatch.ts';

// Core object types, keys and owner references (one definition for every layer).
export * from './apimachinery/meta.ts';
export * from './apimachinery/keys.ts';
export * from './apimachinery/ownerref.ts';
export { apiGroupOf } from './apimachinery/resource.ts';
// Status conditions (meta.SetStatusCondition …), finalizer lists, JSON merge patch between two objects.
export * from './apimachinery/conditions.ts';
export * from './apimachinery/finalizers.ts';
export * from './apimachinery/mergepatch.ts';

// Reconcile: requests, results, errors, queue priorities.
export {
  Controller, TerminalError, isTerminalError, PriorityError, withPriority, parseRequestKey, requestKey,
  type ControllerOptions, type ReconcileContext, type Reconciler, type Request, type Result, type StopResult,
} from './controller/index.ts';
export { PriorityLow, PriorityNormal, addPriority, updatePriority } from './controller/priority.ts';

// Resource types, API paths, label selectors.
export { coreResources, apiVersionOf, resourceId, type ResourceType } from './apimachinery/resource.ts';
export { collectionPath, objectPath } from './apimachinery/paths.ts';
export {
  parseSelector, selectorFromSet, selectorFromLabelSelector, everything, nothing, type Selector,
} from './apimachinery/labelselector.ts';

// Informers, listers, indexers.
export {
  SharedInformerFactory, SharedIndexInformer, Lister, Indexer, parseWatchNamespace, deletionHandlingKey, objectOfDelete,
  isDeletedFinalStateUnknown, controllerOwnerUIDIndex, CONTROLLER_OWNER_UID_INDEX, type ResourceEventHandler,
  type HandlerRegistration, type IndexerReader, type Indexers, type IndexFunc, type DeletedFinalStateUnknown,
  type InformerForOptions,
} from './informerfactory/index.ts';

// API client.
export { KubeConfig } from './client/kubeconfig.ts';
export {
  RestClient, ApiError, isNotFound, isConflict, isAlreadyExists, type RestClientOptions, type RequestOptions, type Verb,
} from './client/rest.ts';
export { ServerReachability } from './client/reachability.ts';
export { loadKubeConfig, type KubeConfigSource } from './manager/kubeconfig.ts';
export { ResourceClient, StatusClient, ScaleClient, type ApiClient } from './client/typed.ts';
export { ignoreNotFound, ignoreAlreadyExists } from './client/ignore.ts';
export type {
  ApplyConfiguration, ApplyOptions, CallOptions, CreateOptions, DeepPartial, DeleteOptions, FieldValidation, GetOptions,
  JsonPatchOperation, ListMeta, ListOptions, MergePatch, ObjectList, Patch, PatchOptions, Preconditions, Scale, Status,
  UpdateOptions, WriteOptions,
} from './client/options.ts';

// Events.
export { EventBroadcaster, type EventType, type ObjectReference, type Recorder } from './events/recorder.ts';
export { FakeRecorder } from './events/fake.ts';

// Manager runtime pieces (for compositions of your own).
export { Manager, exitOK, exitFailure, type ManagerOptions } from './manager/manager.ts';
export { runnable, type Runnable } from './manager/runnable.ts';
export { HealthChecks } from './manager/healthz.ts';
export { LeaderElector, defaultIdentity } from './manager/leaderelection.ts';
export { installSignalHandlers, type SignalHandlers } from './manager/signals.ts';

// Work queues and rate limiters.
export * from './workqueue/index.ts';

// Logging and metrics.
export { newLogger, silentLogger, type Logger } from './log/logger.ts';
export { globalRegistry } from './metrics/registry.ts';
