import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { RestClient } from '../client/rest.ts';
import { FakeRecorder } from '../events/fake.ts';
import type { ResourceEventHandler } from '../informerfactory/listener.ts';
import type { SharedInformerFactory } from '../informerfactory/factory.ts';
import { silentLogger } from '../log/logger.ts';
import { controllerSetups } from './index.ts';
import type { ControllerContext } from './setup.ts';

/** A factory whose informers only record the handlers a setup registers (no API server). */
function fakeFactory(): { factory: SharedInformerFactory; handlers: Map<string, ResourceEventHandler<unknown>[]> } {
  const handlers = new Map<string, ResourceEventHandler<unknown>[]>();
  const factory = {
    informerFor: (r: { resource: string }) => ({
      lister: () => ({ get: () => undefined, list: () => [] }),
      getIndexer: () => ({ byIndex: () => [] }),
      addIndexers: () => undefined,
      addEventHandler: (h: ResourceEventHandler<unknown>) => {
        handlers.set(r.resource, [...(handlers.get(r.resource) ?? []), h]);
        return { hasSynced: () => true };
      },
    }),
  } as unknown as SharedInformerFactory;
  return { factory, handlers };
}

const cloudsYaml = (): string => {
  const file = join(mkdtempSync(join(tmpdir(), 'setup-test-')), 'clouds.yaml');
  writeFileSync(file, 'clouds:\n  local:\n    auth_type: none\n    auth:\n      endpoint: http://127.0.0.1:1\n');
  return file;
};

/** workqueue_depth of the controller's queue by priority label. */
async function depthByPriority(registry: Registry, controller: string): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('workqueue_depth')?.get();
  const out: Record<string, number> = {};
  for (const v of metric?.values ?? []) {
    if (v.labels['controller'] === controller && v.value > 0) out[String(v.labels['priority'])] = v.value;
  }
  return out;
}

const resourceOf = { foo: 'foos', network: 'networks', deployment: 'deployments' } as const;

describe('ControllerContext.queue reaches every controller', () => {
  for (const name of ['foo', 'network', 'deployment'] as const) {
    for (const priorityQueue of [undefined, true, false]) {
      test(`${name}: queue ${JSON.stringify({ priorityQueue })} → an initial-list add is queued at ${priorityQueue === false ? 'normal (FIFO)' : 'low'} priority`, async () => {
        const { factory, handlers } = fakeFactory();
        const registry = new Registry();
        const ctx: ControllerContext = {
          factory, rest: {} as RestClient, recorder: new FakeRecorder(), logger: silentLogger, registry,
          concurrency: 1, gracefulShutdownTimeoutMs: 1000, namespaces: [],
          neutron: { cloudConfig: cloudsYaml(), cloud: 'local' },
          ...(priorityQueue === undefined ? {} : { queue: { priorityQueue } }),
        };
        const res = await controllerSetups[name].setup(ctx);
        assert.ok(res, 'set up');
        const handler = handlers.get(resourceOf[name])?.[0];
        assert.ok(handler, `a handler on ${resourceOf[name]}`);
        await handler.onAdd?.({ metadata: { namespace: 'ns', name: 'a', resourceVersion: '1' } }, true);
        assert.deepEqual(await depthByPriority(registry, name), priorityQueue === false ? { '0': 1 } : { '-100': 1 });
      });
    }
  }
});
