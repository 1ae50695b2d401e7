/**
 * Every controller the manager knows, by the name used in --controllers (cmd/manager/main.ts calls their setup).
 */
import type { ControllerName } from '../../cmd/manager/options.ts';
import { deploymentControllerSetup } from './deployment/index.ts';
import { fooControllerSetup } from './foo/index.ts';
import { networkControllerSetup } from './network/index.ts';
import type { ControllerSetup } from './setup.ts';

export const controllerSetups: Record<ControllerName, ControllerSetup> = {
  foo: fooControllerSetup,
  network: networkControllerSetup,
  deployment: deploymentControllerSetup,
};
