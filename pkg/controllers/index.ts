/**
 * Every controller the binary knows, by the name used in --controllers (cmd/manager/run.ts calls their setup).
 */
import { deploymentControllerSetup } from './deployment/index.ts';
import { fooControllerSetup } from './foo/index.ts';
import type { ControllerName } from './names.ts';
import { networkControllerSetup } from './network/index.ts';
import type { ControllerSetup } from './setup.ts';

export { knownControllers, type ControllerName } from './names.ts';
export type { ControllerSettings, ControllerSetup } from './setup.ts';

export const controllerSetups: Record<ControllerName, ControllerSetup> = {
  foo: fooControllerSetup,
  network: networkControllerSetup,
  deployment: deploymentControllerSetup,
};
