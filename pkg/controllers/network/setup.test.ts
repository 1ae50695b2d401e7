import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from '../../client/kubeconfig.ts';
import { captureLogs, type LogLine as Line } from '../../log/capture.ts';
import { ControllerManager } from '../../runtime/manager.ts';
import type { ControllerSettings } from '../setup.ts';
import { NeutronDouble } from '../../../test/explore/neutron-double.ts';
import { networkControllerSetup } from './controller.ts';

/** A real ControllerManager (nothing is contacted before start) and the log lines it writes. */
function context(neutron: ControllerSettings['neutron']): { mgr: ControllerManager; settings: ControllerSettings; lines: Line[]; informers: () => string[] } {
  const { logger, lines } = captureLogs('info');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  const mgr = new ControllerManager({ kubeConfig, registry: new Registry(), logger });
  const informers = (): string[] => mgr.factory.informers().map((i) => i.resource.resource);
  return { mgr, settings: { concurrency: 1, neutron }, lines, informers };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('networkControllerSetup', () => {
  test('no Neutron configuration: not started, exactly one warning saying why, no informer', async () => {
    const { mgr, settings, lines, informers } = context({ cloudConfig: undefined, cloud: undefined });
    assert.equal(networkControllerSetup.setup(mgr, settings), undefined);
    await flush();
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.level, 'warn');
    assert.match(lines[0]?.msg ?? '', /Network controller not started: no Neutron configuration \(set --neutron-cloud-config or NEUTRON_CLOUD_CONFIG/);
    assert.deepEqual(informers(), []);
  });

  test('an unusable configuration fails the start with a clear message (and an error log)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'net-setup-'));
    const missing = join(dir, 'absent.yaml');
    const { mgr, settings, lines } = context({ cloudConfig: missing, cloud: undefined });
    assert.throws(() => networkControllerSetup.setup(mgr, settings), new RegExp(`Network controller: unusable Neutron configuration: clouds.yaml not found: ${missing}`));
    await flush();
    assert.equal(lines.at(-1)?.level, 'error');

    const yaml = join(dir, 'clouds.yaml');
    writeFileSync(yaml, 'clouds:\n  a:\n    auth_type: password\n    auth:\n      auth_url: https://keystone.example:5000\n      username: u\n');
    const a = context({ cloudConfig: yaml, cloud: 'a' });
    assert.throws(() => networkControllerSetup.setup(a.mgr, a.settings), /auth.password is required/);
    const b = context({ cloudConfig: yaml, cloud: 'b' });
    assert.throws(() => networkControllerSetup.setup(b.mgr, b.settings), /cloud "b" not found/);
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
    const { mgr, settings, lines, informers } = context({ cloudConfig: yaml, cloud: 'local' });
    const controller = networkControllerSetup.setup(mgr, settings);
    assert.ok(controller);
    assert.equal(controller.name, 'network');
    assert.equal(controller.needLeaderElection, true);
    assert.deepEqual(informers(), ['networks']);
    const k = context({ cloudConfig: yaml, cloud: 'keystone' });
    assert.ok(networkControllerSetup.setup(k.mgr, k.settings));
    await flush();
    assert.match(JSON.stringify(lines), /cloud local from .*auth none, endpoint http:\/\/127.0.0.1:1/);
    assert.doesNotMatch(JSON.stringify(k.lines), /s3cr3t/);
  });

  test('a Neutron API handed in (settings.neutron.client, for test doubles): set up on it, no clouds.yaml read', async () => {
    const missing = join(mkdtempSync(join(tmpdir(), 'net-setup-')), 'absent.yaml');
    const { mgr, settings, lines, informers } = context({ cloudConfig: missing, cloud: undefined, client: new NeutronDouble() });
    const controller = networkControllerSetup.setup(mgr, settings);
    assert.equal(controller?.name, 'network');
    assert.deepEqual(informers(), ['networks']);
    await flush();
    assert.deepEqual(lines.map((l) => [l.level, l.msg]), [['info', 'Network controller using the Neutron API it was given (a test double)']]);
  });
});
