/**
 * The slice of apps/v1 Deployment the controllers read and write (plain JSON as the informer caches it).
 * Both the Foo and the Deployment controller ask the factory for `deploymentResource`, so they share ONE informer.
 */
import { coreResources } from '../../apimachinery/resource.ts';
import type { KubeObject, LabelSelector } from '../../apimachinery/meta.ts';

export const deploymentResource = coreResources.deployments;

/** Set by kube-controller-manager's deployment controller: the revision of the Deployment's newest ReplicaSet. */
export const revisionAnnotation = 'deployment.kubernetes.io/revision';

export type { LabelSelector };

export interface Container {
  name: string;
  image?: string;
  [field: string]: unknown;
}

export interface PodTemplateSpec {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { containers: Container[]; nodeSelector?: Record<string, string>; [field: string]: unknown };
}

export interface DeploymentSpec {
  replicas?: number;
  selector?: LabelSelector;
  template?: PodTemplateSpec;
  paused?: boolean;
  progressDeadlineSeconds?: number;
  minReadySeconds?: number;
  [field: string]: unknown;
}

export interface DeploymentCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastUpdateTime?: string;
  lastTransitionTime?: string;
}

export interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  unavailableReplicas?: number;
  conditions?: DeploymentCondition[];
}

export interface Deployment extends KubeObject {
  spec?: DeploymentSpec;
  status?: DeploymentStatus;
}
