/** Foo controller (k8s.io/sample-controller semantics) on the shared Deployment informer. */
export { enqueueFoosOf, fooControllerName, fooControllerSetup, fooReconciler, type FooReconcilerDeps } from './controller.ts';
export * from './desired.ts';
