/**
 * The Neutron calls the Network controller makes — NeutronClient's, or a double's in tests (explore's, the unit
 * tests'). Its own file so that pkg/controllers/setup.ts can name it (`ControllerSettings.neutron.client`) without
 * importing the controller, which imports setup.ts.
 */
import type { NeutronClient } from '../../neutron/index.ts';

/** The Neutron calls the controller makes (NeutronClient; a double in tests). */
export type NeutronNetworkAPI = Pick<NeutronClient,
  'projectId' | 'getNetwork' | 'listNetworks' | 'createNetwork' | 'deleteNetwork' | 'addTag' | 'listSubnets' | 'createSubnet'
  | 'updateSubnet' | 'deleteSubnet'>;
