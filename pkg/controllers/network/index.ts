/** Network controller: Network CRs reconciled into OpenStack Neutron networks and subnets. */
export {
  classifyNeutronError, networkControllerName, networkControllerSetup, networkReconciler, PAUSE_AFTER_CREATE_ENV,
  type NetworkReconcilerDeps, type NeutronNetworkAPI,
} from './controller.ts';
export * from './desired.ts';
export * from './ipnet.ts';
