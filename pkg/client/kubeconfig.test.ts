import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { KubeConfig } from './kubeconfig.ts';

function file(dir: string, name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const cfg = (current: string | undefined, cluster: string, server: string, user: string, extra = ''): string => `
apiVersion: v1
kind: Config
${current ? `current-context: ${current}` : ''}
clusters:
- name: ${cluster}
  cluster:
    server: ${server}
    certificate-authority: ca.crt
users:
- name: ${user}
  user:
    token: tok-${user}
${extra}
contexts:
- name: ctx-${cluster}
  context: {cluster: ${cluster}, user: ${user}, namespace: ns-${cluster}}
`;

test('loadFromFile resolves relative file references against the file directory', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kc-'));
  const kc = new KubeConfig();
  kc.loadFromFile(file(dir, 'config', cfg('ctx-a', 'a', 'https://a:6443', 'ua')));
  assert.equal(kc.getCurrentCluster()?.server, 'https://a:6443');
  assert.equal(kc.getCurrentCluster()?.caFile, join(dir, 'ca.crt'));
  assert.equal(kc.getCurrentUser()?.token, 'tok-ua');
  assert.equal(kc.getContextObject('ctx-a')?.namespace, 'ns-a');
});

test('loadFromFiles merges a path list as kubectl: missing files skipped, first current-context wins, first definition wins', () => {
  const d1 = mkdtempSync(join(tmpdir(), 'kc-'));
  const d2 = mkdtempSync(join(tmpdir(), 'kc-'));
  // The first file defines cluster "a" but no current-context; the second sets current-context and redefines "a".
  const first = file(d1, 'one', cfg(undefined, 'a', 'https://first:6443', 'ua'));
  const second = file(d2, 'two', `${cfg('ctx-a', 'a', 'https://second:6443', 'ua')}`);
  const third = file(d2, 'three', cfg('ctx-b', 'b', 'https://b:6443', 'ub'));
  const kc = new KubeConfig();
  const used = kc.loadFromFiles([join(d1, 'missing'), first, second, third]);
  assert.deepEqual(used, [first, second, third]);
  assert.equal(kc.currentContext, 'ctx-a', 'the first file that sets current-context wins');
  assert.equal(kc.getCurrentCluster()?.server, 'https://first:6443', 'the first definition of a cluster wins');
  assert.equal(kc.getCurrentCluster()?.caFile, join(d1, 'ca.crt'), 'paths relative to the file that defined the entry');
  assert.deepEqual(kc.clusters.map((c) => c.name), ['a', 'b']);
  assert.throws(() => new KubeConfig().loadFromFiles([join(d1, 'nope')]), /none of the kubeconfig files exists/);
});

test('user credentials: token file, client certificate data, exec plugin, impersonation', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kc-'));
  const kc = new KubeConfig();
  kc.loadFromFile(file(dir, 'config', `
current-context: c
clusters: [{name: k, cluster: {server: 'https://k', insecure-skip-tls-verify: true, tls-server-name: api, proxy-url: 'http://proxy:3128'}}]
users:
- name: u
  user:
    tokenFile: token
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
    as: alice
    as-groups: [g1, g2]
    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin, args: [get], env: [{name: A, value: b}]}
contexts: [{name: c, context: {cluster: k, user: u}}]
`));
  const u = kc.getCurrentUser();
  assert.equal(u?.tokenFile, join(dir, 'token'));
  assert.equal(u?.certData, 'Y2VydA==');
  assert.equal(u?.impersonateUser, 'alice');
  assert.deepEqual(u?.impersonateGroups, ['g1', 'g2']);
  assert.equal(u?.exec?.command, join(dir, 'plugin'), 'a relative command path is resolved; a bare name is left to PATH');
  assert.deepEqual(u?.exec?.env, [{ name: 'A', value: 'b' }]);
  const c = kc.getCurrentCluster();
  assert.equal(c?.skipTLSVerify, true);
  assert.equal(c?.tlsServerName, 'api');
  assert.equal(c?.proxyUrl, 'http://proxy:3128');
  // exportConfig round-trips through loadFromString.
  const again = new KubeConfig();
  again.loadFromString(kc.exportConfig());
  assert.deepEqual(again.getCurrentUser(), u);
  assert.deepEqual(again.getCurrentCluster(), c);
});

test('malformed kubeconfigs fail with a message naming what is wrong', () => {
  const kc = new KubeConfig();
  assert.throws(() => kc.loadFromString('clusters: [{cluster: {server: x}}]'), /clusters\[0\]\.name is missing/);
  assert.throws(() => kc.loadFromString('clusters: [{name: a, cluster: {}}]'), /cluster "a" has no server/);
  assert.throws(() => kc.loadFromString('clusters: {a: 1}'), /clusters is not a list/);
  assert.throws(() => kc.loadFromString('{'), /not valid YAML/);
  kc.loadFromString('current-context: nope\nclusters: []');
  assert.equal(kc.getCurrentCluster(), null);
});

test('loadFromCluster: the Pod ServiceAccount (token file, CA, namespace; IPv6 hosts bracketed)', () => {
  const prefix = mkdtempSync(join(tmpdir(), 'kc-sa-'));
  const kc = new KubeConfig();
  kc.loadFromCluster(prefix, { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' });
  assert.equal(kc.getCurrentCluster()?.server, 'https://[fd00::1]:443');
  assert.equal(kc.getCurrentCluster()?.caFile, `${prefix}/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`);
  assert.equal(kc.getCurrentUser()?.tokenFile, `${prefix}/var/run/secrets/kubernetes.io/serviceaccount/token`);
});
