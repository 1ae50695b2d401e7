/**
 * ts-controller-manager/testing: a real control plane for your controllers' test suites (controller-runtime's
 * envtest, in TypeScript). See env.ts for the contract and docs/library.md for a walk-through.
 *
 *   import { startTestEnv } from 'ts-controller-manager/testing';
 *   const env = await startTestEnv({ crdPaths: ['config/crd/bases'] });
 *   after(() => env.stop());
 *
 * and `explore`, which checks controllers against crashes, stale views and missed events (explore/explore.ts).
 */
export { startTestEnv, TestEnv, type TestEnvOptions, type ManagerConnection } from './env.ts';
export { RbacRefusalError } from './refused.ts';
export type { ServiceAccountIdentity } from './rbac.ts';
export type { Refusal } from '../rbac/refusal.ts';
export { findBinaries, cacheDir, type ControlPlaneBinaries } from './binaries.ts';
export { installCRDs, readCRDs, type CustomResourceDefinition } from './crds.ts';
export { FakeClient, FakeInformer, FakeUnsupportedError, type FakeClientOptions, type FakeResource } from './fakeclient.ts';
export { eventually, StopTrying, type EventuallyOptions } from './eventually.ts';
export { testNamespace, type TestNamespace, type TestNamespaceOptions } from './namespace.ts';
export { startManager, reconcileContext, type RunningManager, type StartManagerOptions } from './harness.ts';
export {
  readWebhookConfigurations, localClientConfig, localWebhookConfiguration, localConversion, type WebhookInstallOptions,
  type WebhookServing, type WebhookConfiguration, type WebhookClientConfig,
} from './webhooks.ts';
export {
  explore, expectNoFindings, formatFindings, formatTrace, type ExploreOptions, type ExploreReport, type ExploreEndState, type Finding,
  type Invariant, type Peer, type WorldPoints,
} from './explore/explore.ts';
export { create, patch, remove, settle, run, type Step, type ObjectRef } from './explore/workload.ts';
export { planId, describePlan, type Plan, type PlanKind, type FindingClass, type WriteRef, type ChangeRef, type TraceEntry } from './explore/plans.ts';
export { MemoryApiServer, MemoryConnection, type WriteAction, type WriteRequest, type StoreChange } from './explore/memoryserver.ts';
