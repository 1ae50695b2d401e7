/**
 * samplecrd.k8s.io/v1 Network (config/crd/bases/samplecrd.k8s.io_networks.yaml): reconciled into an OpenStack
 * Neutron network + subnet. Status records the Neutron ids, a Ready condition and the observed generation.
 */
import type { Condition, KubeObject } from '../../meta/types.ts';

export const group = 'samplecrd.k8s.io';
export const version = 'v1';
export const apiVersion = `${group}/${version}`;

export interface NetworkSpec {
  cidr?: string;
  gateway?: string;
}

export interface NetworkStatus {
  networkID?: string;
  subnetID?: string;
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface Network extends KubeObject {
  spec?: NetworkSpec;
  status?: NetworkStatus;
}

export const networkKind = 'Network';
export const networkPlural = 'networks';
