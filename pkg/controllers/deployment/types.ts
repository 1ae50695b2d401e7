/**
 * apps/v1 Deployment as the controllers read and write it (plain JSON as the informer caches it): the generated
 * built-in types (pkg/api, from the API server's OpenAPI; type-only re-exports, no runtime code).
 * Both the Foo and the Deployment controller ask the factory for `deploymentResource`, so they share ONE informer.
 */
import { coreResources } from '../../apimachinery/resource.ts';
import type { LabelSelector } from '../../apimachinery/meta.ts';

export const deploymentResource = coreResources.deployments;

/** Set by kube-controller-manager's deployment controller: the revision of the Deployment's newest ReplicaSet. */
export const revisionAnnotation = 'deployment.kubernetes.io/revision';

export type { LabelSelector };
export type { Container, PodTemplateSpec } from '../../api/core/v1/zz_generated.types.ts';
export type { Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus } from '../../api/apps/v1/zz_generated.types.ts';
