import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { RestClient } from '../../client/rest.ts';
import { FakeRecorder } from '../../events/fake.ts';
import type { SharedInformerFactory } from '../../informerfactory/factory.ts';
import { newLogger } from '../../log/logger.ts';
import type { ControllerContext } from '../setup.ts';
import { networkControllerSetup } from './controller.ts';

interface Line { level: string; msg: string; [k: string]: unknown }

function context(neutron: ControllerContext['neutron']): { ctx: ControllerContext; lines: Line[]; informers: string[] } {
  const lines: Line[] = [];
  const informers: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Line);
      cb();
    },
  });
  // Only what setup touches: informerFor → lister/addEventHandler.
  const factory = {
    informerFor: (r: { resource: string }) => {
      informers.push(r.resource);
      return { lister: () => ({ get: () => undefined }), addEventHandler: () => ({ hasSynced: () => true }) };
    },
  } as unknown as SharedInformerFactory;
  const ctx: ControllerContext = {
    factory, rest: {} as RestClient, recorder: new FakeRecorder(), logger: newLogger({ level: 'info', destination }),
    registry: new Registry(), concurrency: 1, gracefulShutdownTimeoutMs: 1000, namespaces: [], neutron,
  };
  return { ctx, lines, informers };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('networkControllerSetup', () => {
  test('no Neutron configuration: not started, exactly one warning saying why, no informer', async () => {
    const { ctx, lines, informers } = context({ cloudConfig: undefined, cloud: undefined });
    assert.equal(await networkControllerSetup.setup(ctx), undefined);
    await flush();
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.level, 'warn');
    assert.match(lines[0]?.msg ?? '', /Network controller not started: no Neutron configuration \(set --neutron-cloud-config or NEUTRON_CLOUD_CONFIG/);
    assert.deepEqual(informers, []);
  });

  test('an unusable configuration fails the start with a clear message (and an error log)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'net-setup-'));
    const missing = join(dir, 'absent.yaml');
    const { ctx, lines } = context({ cloudConfig: missing, cloud: undefined });
    await assert.rejects(networkControllerSetup.setup(ctx), new RegExp(`Network controller: unusable Neutron configuration: clouds.yaml not found: ${missing}`));
    await flush();
    assert.equal(lines.at(-1)?.level, 'error');

    const yaml = join(dir, 'clouds.yaml');
    writeFileSync(yaml, 'clouds:\n  a:\n    auth_type: password\n    auth:\n      auth_url: https://keystone.example:5000\n      username: u\n');
    await assert.rejects(networkControllerSetup.setup(context({ cloudConfig: yaml, cloud: 'a' }).ctx), /auth.password is required/);
    await assert.rejects(networkControllerSetup.setup(context({ cloudConfig: yaml, cloud: 'b' }).ctx), /cloud "b" not found/);
  });

  test('a usable clouds.yaml: the controller is set up on the Network informer; secrets never logged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'net-setup-'));
    const yaml = join(dir, 'clouds.yaml');
    writeFileSync(yaml, [
      'clouds:',
      '  local:',
      '    auth_type: none',
      '    auth:',
      '      endpoint: http://127.0.0.1:1',
      '  keystone:',
      '    auth:',
      '      auth_url: https://keystone.example:5000/v3',
      '      username: u',
      '      password: s3cr3t-value',
      '      project_name: p',
      '',
    ].join('\n'));
    const { ctx, lines, informers } = context({ cloudConfig: yaml, cloud: 'local' });
    const res = await networkControllerSetup.setup(ctx);
    assert.ok(res);
    assert.equal(res.runnable.needLeaderElection, true);
    assert.equal(res.syncedChecks.length, 1);
    assert.deepEqual(informers, ['networks']);
    const k = context({ cloudConfig: yaml, cloud: 'keystone' });
    assert.ok(await networkControllerSetup.setup(k.ctx));
    await flush();
    assert.match(JSON.stringify(lines), /cloud local from .*auth none, endpoint http:\/\/127.0.0.1:1/);
    assert.doesNotMatch(JSON.stringify(k.lines), /s3cr3t/);
  });
});
