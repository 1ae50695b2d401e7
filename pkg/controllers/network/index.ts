/** Network controller: Network CRs reconciled into OpenStack Neutron networks and subnets. */
export {
  classifyNeutronError, networkControllerName, networkControllerSetup, networkReconciler, isOverlapError, DEFAULT_CREATE_SETTLE_MS, DEFAULT_DRIFT_CHECK_MS,
  type NetworkReconcilerDeps, type NeutronNetworkAPI,
} from './controller.ts';
export * from './desired.ts';
export * from './ipnet.ts';
