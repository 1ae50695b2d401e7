/**
 * ts-controller-manager/testing: a real control plane for your controllers' test suites (controller-runtime's
 * envtest, in TypeScript). See env.ts for the contract and docs/library.md for a walk-through.
 *
 *   import { startTestEnv } from 'ts-controller-manager/testing';
 *   const env = await startTestEnv({ crdPaths: ['config/crd/bases'] });
 *   after(() => env.stop());
 */
export { startTestEnv, TestEnv, type TestEnvOptions } from './env.ts';
export { findBinaries, cacheDir, type ControlPlaneBinaries } from './binaries.ts';
export { installCRDs, readCRDs, type CustomResourceDefinition } from './crds.ts';
export { FakeClient, FakeInformer, FakeUnsupportedError, type FakeClientOptions, type FakeResource } from './fakeclient.ts';
export { eventually, type EventuallyOptions } from './eventually.ts';
export { testNamespace, type TestNamespace, type TestNamespaceOptions } from './namespace.ts';
export { startManager, reconcileContext, type RunningManager, type StartManagerOptions } from './harness.ts';
export {
  readWebhookConfigurations, localClientConfig, localWebhookConfiguration, localConversion, type WebhookInstallOptions,
  type WebhookServing, type WebhookConfiguration, type WebhookClientConfig,
} from './webhooks.ts';
