/**
 * samplecrd.k8s.io/v2 Network (config/crd/v2/samplecrd.k8s.io_networks.yaml): a dual-stack Network — one Neutron
 * network with `spec.subnets` (at most one IPv4 and one IPv6); status has the Neutron id of each subnet by CIDR.
 * v2 is the conversion hub and the storage version of that CRD; v1 converts to and from it losslessly (conversion.ts,
 * docs/network-v2.md).
 *
 * The types and constants are generated from the CRD into zz_generated.types.ts (`npm run generate`; a CRD change
 * without regenerating fails pkg/codegen/generated.test.ts). Hand-written helpers go here.
 */
export * from './zz_generated.types.ts';
export { convertNetwork, fromHub, toHub, v2SubnetsAnnotation, type NetworkV1Object, type NetworkV2Object } from './conversion.ts';
