/** Foo controller (k8s.io/sample-controller semantics) on the shared Deployment informer. */
export { fooControllerName, foosWanting, fooControllerSetup, fooReconciler, type FooReconcilerDeps } from './controller.ts';
export * from './desired.ts';
