/**
 * The pure parts of the Foo controller: the Foo resource, the Deployment a Foo wants (k8s.io/sample-controller's
 * newDeployment), ownership, the Foo index by wanted Deployment name and the Event texts.
 */
import { apiVersion as fooApiVersion, fooKind, group as fooGroup, type Foo } from '../../apis/samplecontroller/v1alpha1/types.ts';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { controllerNameOf, controllerOf, newControllerRef } from '../../apimachinery/ownerref.ts';
import type { Deployment } from '../deployment/types.ts';

export { fooResource } from '../../apis/samplecontroller/v1alpha1/types.ts';

// Event reasons and messages (upstream's constants).
export const SuccessSynced = 'Synced';
export const MessageResourceSynced = 'Foo synced successfully';
export const ErrResourceExists = 'ErrResourceExists';
export const messageResourceExists = (name: string): string => `Resource "${name}" already exists and is not managed by Foo`;
export const ErrInvalidSpec = 'InvalidSpec';
export const MessageDeploymentNameRequired = 'spec.deploymentName must be specified';

/** Foo index: `namespace/spec.deploymentName` → the Foos that want that Deployment. */
export const FOO_BY_DEPLOYMENT_INDEX = 'fooByDeploymentName';

export function fooDeploymentIndexFunc(foo: Foo): string[] {
  const name = foo.spec?.deploymentName;
  return name ? [`${foo.metadata?.namespace ?? ''}/${name}`] : [];
}

/** The object with its apiVersion/kind filled in (list items come without them); for Events and owner refs. */
export function fooRef(foo: Foo): Foo & { apiVersion: string; kind: string } {
  return { ...foo, apiVersion: fooApiVersion, kind: fooKind };
}

export function deploymentLabels(foo: Foo): Record<string, string> {
  return { app: 'nginx', controller: foo.metadata?.name ?? '' };
}

/** The Deployment a Foo wants: exactly upstream's newDeployment(foo). */
export function newDeployment(foo: Foo): Deployment {
  const labels = deploymentLabels(foo);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: foo.spec?.deploymentName ?? '',
      namespace: foo.metadata?.namespace ?? '',
      ownerReferences: [newControllerRef(fooRef(foo))],
    },
    spec: {
      ...(foo.spec?.replicas !== undefined ? { replicas: foo.spec.replicas } : {}),
      selector: { matchLabels: labels },
      template: {
        metadata: { labels: { ...labels } },
        spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] },
      },
    },
  };
}

/** metav1.IsControlledBy: the object's controller ownerReference points at `owner` (by UID). */
export function isControlledBy(obj: KubeObject, owner: KubeObject): boolean {
  const uid = owner.metadata?.uid;
  return uid !== undefined && controllerOf(obj)?.uid === uid;
}

/** The name of the Foo that controls `obj`, if its controller ownerReference is a Foo of this group. */
export function owningFooName(obj: KubeObject): string | undefined {
  return controllerNameOf(obj, fooKind, fooGroup);
}
