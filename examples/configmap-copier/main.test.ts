/**
 * The copier's own test, written as its author would: a real etcd + kube-apiserver from
 * `ts-controller-manager/testing`, the controller run as its own process (`node main.ts`, as in production), and its
 * behaviour observed through the API only.
 *   node --test main.test.ts
 * (From a clone of ts-controller-manager: NODE_OPTIONS=--conditions=ts-controller-manager-source node --test examples/configmap-copier/main.test.ts)
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { coreResources, ignoreNotFound } from 'ts-controller-manager';
import type { ConfigMap, Namespace } from 'ts-controller-manager/api/core/v1';
import { eventually, startTestEnv, type TestEnv } from 'ts-controller-manager/testing';

let env: TestEnv;
let controller: ChildProcess;
let logs = '';

before(async () => {
  // The controller runs as a ServiceAccount bound to rbac/ (what gen rbac derived from its declarations): a call it
  // did not declare is refused as in a cluster, and every wait below stops there, naming the rule.
  env = await startTestEnv({ rbacPaths: [join(import.meta.dirname, 'rbac')] });
  console.log(`control plane ready in ${(env.startMs / 1000).toFixed(1)} s`);
  controller = spawn(process.execPath, ['main.ts'], {
    cwd: import.meta.dirname, env: { ...process.env, KUBECONFIG: env.serviceAccount?.kubeconfigPath, PROBE_ADDRESS: '0' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  controller.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
  controller.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
});
after(async () => {
  if (controller.exitCode === null) controller.kill('SIGKILL');
  await env.stop();
});

const namespaces = () => env.client.resource<Namespace>(coreResources.namespaces);
const configMaps = (ns: string) => env.client.resource<ConfigMap>(coreResources.configMaps).namespace(ns);
const receive = (on: boolean): Record<string, string> => (on ? { 'copier.example.com/receive': 'true' } : {});
const namespace = (name: string, on: boolean): Promise<unknown> => namespaces().create({ metadata: { name, labels: receive(on) } });
const setReceive = (name: string, on: boolean): Promise<unknown> =>
  namespaces().patch(name, { merge: { metadata: { labels: { 'copier.example.com/receive': on ? 'true' : null } } } });
const get = (ns: string, name: string): Promise<ConfigMap | undefined> => ignoreNotFound(configMaps(ns).get(name));
const waitFor = (what: string, check: () => Promise<boolean>): Promise<unknown> =>
  eventually(check, { message: () => `${what}; controller logs:\n${logs.slice(-2000)}` });

test('a copy whose source is gone is deleted when the copier next looks at that name; a ConfigMap that is no copy stays', async () => {
  // What a new leader with a stale cache can leave (it copied a source already deleted, after the finalizer went): a
  // copy whose source does not exist. Its create event maps to the source's name; the copier deletes it (level-based).
  await namespace('left', false);
  const annotations = { 'copier.example.com/source': 'gone/settings' };
  await configMaps('left').create({ metadata: { name: 'mine', annotations }, data: { kept: 'yes' } }); // not a copy: no copy-of label
  await configMaps('left').create({ metadata: { name: 'settings', labels: { 'copier.example.com/copy-of': 'uid-of-a-source-long-gone' }, annotations }, data: { greeting: 'old' } });
  await waitFor('the copy of the gone source deleted', async () => (await get('left', 'settings')) === undefined);
  assert.equal((await get('left', 'mine'))?.data?.['kept'], 'yes', 'a ConfigMap that is not a copy is left alone');
});

test('a labelled ConfigMap is copied into labelled namespaces, kept in sync, and its copies go with it', async () => {
  await namespace('src', false);
  await namespace('a', true);
  await namespace('b', true);
  await namespace('c', false);
  await configMaps('src').create({ metadata: { name: 'settings', labels: { 'copier.example.com/source': 'true' } }, data: { greeting: 'hello' } });
  await waitFor('copies in a and b', async () => (await get('a', 'settings'))?.data?.['greeting'] === 'hello' &&
    (await get('b', 'settings'))?.data?.['greeting'] === 'hello');
  assert.equal(await get('c', 'settings'), undefined, 'no copy in an unlabelled namespace');

  await configMaps('src').patch('settings', { merge: { data: { greeting: 'bonjour' } } });
  await waitFor('copies follow the source', async () => (await get('a', 'settings'))?.data?.['greeting'] === 'bonjour' &&
    (await get('b', 'settings'))?.data?.['greeting'] === 'bonjour');

  await setReceive('b', false);
  await setReceive('c', true);
  await waitFor('the copy leaves b and arrives in c', async () => (await get('b', 'settings')) === undefined &&
    (await get('c', 'settings'))?.data?.['greeting'] === 'bonjour');

  await configMaps('src').delete('settings');
  await waitFor('source and copies gone', async () => (await get('src', 'settings')) === undefined &&
    (await get('a', 'settings')) === undefined && (await get('c', 'settings')) === undefined);

  const exited = new Promise((resolve) => controller.once('exit', resolve));
  controller.kill('SIGTERM');
  assert.equal(await exited, 0, `graceful exit on SIGTERM; logs:\n${logs.slice(-2000)}`);
  assert.deepEqual(env.refusals, [], 'nothing refused');
});
