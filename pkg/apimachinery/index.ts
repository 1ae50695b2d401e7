/**
 * pkg/apimachinery: the shared API machinery every other room builds on, as client-go keeps it in
 * k8s.io/apimachinery — object metadata (meta.ts), object keys (keys.ts), owner references (ownerref.ts),
 * resource types (resource.ts), API paths (paths.ts), label selectors (labelselector.ts), status conditions
 * (conditions.ts), finalizer lists (finalizers.ts) and JSON merge patches between two objects (mergepatch.ts).
 *
 * Invariant: the lowest room of pkg/. Files here import only each other (and no package), never another pkg/ room;
 * pkg/imports.test.ts enforces that no room cycle and no file cycle exists.
 */
export * from './meta.ts';
export * from './keys.ts';
export * from './ownerref.ts';
export * from './resource.ts';
export * from './paths.ts';
export * from './labelselector.ts';
export * from './conditions.ts';
export * from './finalizers.ts';
export * from './mergepatch.ts';
