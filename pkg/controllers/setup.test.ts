import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from '../client/kubeconfig.ts';
import { PriorityLow } from '../controller/priority.ts';
import { silentLogger } from '../log/logger.ts';
import { ControllerManager } from '../runtime/manager.ts';
import { controllerSetups } from './index.ts';

const cloudsYaml = (): string => {
  const file = join(mkdtempSync(join(tmpdir(), 'setup-test-')), 'clouds.yaml');
  writeFileSync(file, 'clouds:\n  local:\n    auth_type: none\n    auth:\n      endpoint: http://127.0.0.1:1\n');
  return file;
};

/** A manager that contacts nothing before start. */
function manager(registry: Registry, priorityQueue: boolean | undefined): ControllerManager {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new ControllerManager({ kubeConfig, registry, logger: silentLogger, ...(priorityQueue === undefined ? {} : { priorityQueue }) });
}

/** workqueue_depth of the controller's queue by priority label. */
async function depthByPriority(registry: Registry, controller: string): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('workqueue_depth')?.get();
  const out: Record<string, number> = {};
  for (const v of metric?.values ?? []) {
    if (v.labels['controller'] === controller && v.value > 0) out[String(v.labels['priority'])] = v.value;
  }
  return out;
}

describe('the manager-wide priorityQueue option (--priority-queue) reaches every controller', () => {
  for (const name of ['foo', 'network', 'deployment'] as const) {
    for (const priorityQueue of [undefined, true, false]) {
      test(`${name}: priorityQueue ${String(priorityQueue)} → a low-priority add is queued at ${priorityQueue === false ? 'normal (FIFO)' : 'low'} priority`, async () => {
        const registry = new Registry();
        const mgr = manager(registry, priorityQueue);
        const controller = controllerSetups[name].setup(mgr, { concurrency: 1, neutron: { cloudConfig: cloudsYaml(), cloud: 'local' } });
        assert.ok(controller, 'set up');
        controller.enqueue('ns/a', PriorityLow);
        assert.deepEqual(await depthByPriority(registry, name), priorityQueue === false ? { '0': 1 } : { '-100': 1 });
      });
    }
  }
});
