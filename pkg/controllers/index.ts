/**
 * Every controller the manager knows, by the name used in --controllers (cmd/manager/main.ts calls their setup).
 */
import type { ControllerName } from '../../cmd/manager/options.ts';
import { deploymentControllerSetup } from './deployment/index.ts';
import { fooControllerSetup } from './foo/index.ts';
import type { ControllerSetup } from './setup.ts';

/**
 * PLACEHOLDER — replace with the real Network controller's setup (pkg/controllers/network) when it lands.
 * Until then enabling `network` only logs once that it is not available.
 */
const networkPlaceholderSetup: ControllerSetup = {
  name: 'network',
  setup(ctx) {
    ctx.logger.warn({ controller: 'network' }, 'network controller not available yet');
    return Promise.resolve(undefined);
  },
};

export const controllerSetups: Record<ControllerName, ControllerSetup> = {
  foo: fooControllerSetup,
  network: networkPlaceholderSetup,
  deployment: deploymentControllerSetup,
};
