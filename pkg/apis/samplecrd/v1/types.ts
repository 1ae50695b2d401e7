/**
 * samplecrd.k8s.io/v1 Network (config/crd/bases/samplecrd.k8s.io_networks.yaml): reconciled into an OpenStack
 * Neutron network + subnet. Status records the Neutron ids, a Ready condition and the observed generation.
 *
 * The types and constants are generated from the CRD into zz_generated.types.ts (`npm run generate`; a CRD change
 * without regenerating fails pkg/codegen/generated.test.ts). Hand-written helpers go here.
 */
export * from './zz_generated.types.ts';
