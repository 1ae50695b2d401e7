/**
 * samplecontroller.k8s.io/v1alpha1 Foo (config/crd/bases/samplecontroller.k8s.io_foos.yaml), as in
 * k8s.io/sample-controller: a Foo owns a Deployment named spec.deploymentName with spec.replicas replicas.
 *
 * The types and constants are generated from the CRD into zz_generated.types.ts (`npm run generate`; a CRD change
 * without regenerating fails pkg/codegen/generated.test.ts). Hand-written helpers go here.
 */
export * from './zz_generated.types.ts';
