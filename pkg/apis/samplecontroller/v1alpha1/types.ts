/**
 * samplecontroller.k8s.io/v1alpha1 Foo (config/crd/bases/samplecontroller.k8s.io_foos.yaml), as in
 * k8s.io/sample-controller: a Foo owns a Deployment named spec.deploymentName with spec.replicas replicas.
 */
import type { KubeObject } from '../../meta/types.ts';

export const group = 'samplecontroller.k8s.io';
export const version = 'v1alpha1';
export const apiVersion = `${group}/${version}`;

export interface FooSpec {
  deploymentName?: string;
  replicas?: number;
}

export interface FooStatus {
  availableReplicas?: number;
}

export interface Foo extends KubeObject {
  spec?: FooSpec;
  status?: FooStatus;
}

export const fooKind = 'Foo';
export const fooPlural = 'foos';
