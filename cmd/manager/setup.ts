/**
 * Every controller the binary can run, declared on `mgr` as run.ts declares them — what `gen rbac` derives
 * config/rbac/role.yaml from (package.json's "generate"; pkg/rbac/generated.test.ts fails when config/rbac differs).
 *
 * The Network controller declares itself only with a Neutron API: it gets one that is never called (gen rbac's manager
 * never starts), so its declarations need no credentials. Its Network version does not change its RBAC (v1 and v2 are
 * one resource, networks.samplecrd.k8s.io).
 */
import { controllerSetups, knownControllers } from '../../pkg/controllers/index.ts';
import type { NeutronNetworkAPI } from '../../pkg/controllers/network/controller.ts';
import type { ControllerManager } from '../../pkg/runtime/manager.ts';

/** A Neutron API for declaring only: any call throws. */
const declarationOnly = new Proxy({}, {
  get: (_target, method) => () => {
    throw new Error(`Neutron ${String(method)}: called on the declaration-only Neutron API of cmd/manager/setup.ts`);
  },
}) as unknown as NeutronNetworkAPI;

/** Declares every known controller on `mgr` (gen rbac's recording manager). */
export function setup(mgr: ControllerManager): void {
  for (const name of knownControllers) {
    controllerSetups[name].setup(mgr, { neutron: { cloudConfig: undefined, cloud: undefined, client: declarationOnly } });
  }
}
