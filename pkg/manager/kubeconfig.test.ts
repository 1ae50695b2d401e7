/**
 * Where the manager's credentials come from (loadKubeConfig): controller-runtime's order --kubeconfig → $KUBECONFIG →
 * in-cluster ServiceAccount → ~/.kube/config, and a clear error for each way it can go wrong. Real files in a
 * temporary directory; the in-cluster ServiceAccount directory is laid out under a temporary root.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, it } from 'node:test';
import { loadKubeConfig, serviceAccountDir, type LoadKubeConfigOptions } from './kubeconfig.ts';

function kubeconfig(server: string, opts: { context?: string; current?: boolean; user?: string } = {}): string {
  const ctx = opts.context ?? 'ctx';
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Config',
    clusters: [{ name: `${ctx}-cluster`, cluster: { server } }],
    users: [{ name: `${ctx}-user`, user: { token: opts.user ?? 'secret-token' } }],
    contexts: [{ name: ctx, context: { cluster: `${ctx}-cluster`, user: `${ctx}-user` } }],
    ...(opts.current === false ? {} : { 'current-context': ctx }),
  });
}

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'tscm-mgr-kc-'));
}

function file(dir: string, name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

/** A Pod's ServiceAccount volume under `root` (what the kubelet mounts). */
function inClusterRoot(withToken = true): string {
  const root = tempDir();
  const sa = join(root, serviceAccountDir);
  mkdirSync(sa, { recursive: true });
  if (withToken) writeFileSync(join(sa, 'token'), 'pod-token');
  writeFileSync(join(sa, 'ca.crt'), 'not read at load time');
  writeFileSync(join(sa, 'namespace'), 'team-a\n');
  return root;
}

/** What the bundled manager (cmd/manager/cli.ts) passes. */
const manager: LoadKubeConfigOptions = { explicit: '--kubeconfig' };
const inCluster = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };

function load(flag: string | undefined, env: NodeJS.ProcessEnv, opts: LoadKubeConfigOptions = {}): { server: string | undefined; source: string } {
  const { kubeConfig, source } = loadKubeConfig(flag, env, opts);
  return { server: kubeConfig.getCurrentCluster()?.server, source };
}

describe('loadKubeConfig: precedence', () => {
  it('--kubeconfig wins over $KUBECONFIG, in-cluster and ~/.kube/config', () => {
    const dir = tempDir();
    const flag = file(dir, 'flag', kubeconfig('https://flag:6443'));
    const env = file(dir, 'env', kubeconfig('https://env:6443'));
    const home = tempDir();
    mkdirSync(join(home, '.kube'));
    file(join(home, '.kube'), 'config', kubeconfig('https://home:6443'));
    assert.deepEqual(load(flag, { KUBECONFIG: env, HOME: home, ...inCluster }, { ...manager, inClusterRoot: inClusterRoot() }), {
      server: 'https://flag:6443', source: `--kubeconfig ${flag}`,
    });
  });

  it('$KUBECONFIG (one path) wins over in-cluster and ~/.kube/config', () => {
    const dir = tempDir();
    const env = file(dir, 'env', kubeconfig('https://env:6443'));
    assert.deepEqual(load(undefined, { KUBECONFIG: env, ...inCluster }, { inClusterRoot: inClusterRoot() }), {
      server: 'https://env:6443', source: `$KUBECONFIG ${env}`,
    });
  });

  it('$KUBECONFIG as a path list: merged (missing files skipped, the first current-context wins), source names the files used', () => {
    const dir = tempDir();
    const noCurrent = file(dir, 'a', kubeconfig('https://a:6443', { context: 'a', current: false }));
    const second = file(dir, 'b', kubeconfig('https://b:6443', { context: 'b' }));
    const third = file(dir, 'c', kubeconfig('https://c:6443', { context: 'c' }));
    const missing = join(dir, 'missing');
    const { server, source } = load(undefined, { KUBECONFIG: [missing, noCurrent, '', second, third].join(delimiter) });
    assert.equal(server, 'https://b:6443');
    assert.equal(source, `$KUBECONFIG ${[noCurrent, second, third].join(delimiter)}`);
  });

  it('in a Pod (KUBERNETES_SERVICE_HOST and _PORT set): the ServiceAccount token file and CA, read under the root', () => {
    const root = inClusterRoot();
    const { kubeConfig, source } = loadKubeConfig(undefined, { ...inCluster, HOME: tempDir() }, { inClusterRoot: root });
    assert.equal(kubeConfig.getCurrentCluster()?.server, 'https://10.96.0.1:443');
    assert.equal(kubeConfig.getCurrentCluster()?.caFile, `${root}${serviceAccountDir}/ca.crt`);
    assert.equal(kubeConfig.getCurrentUser()?.tokenFile, `${root}${serviceAccountDir}/token`);
    assert.equal(source, `in-cluster ServiceAccount (${root}${serviceAccountDir})`);
    assert.ok(!source.includes('pod-token'), 'the source never carries credentials');
  });

  it('only one of KUBERNETES_SERVICE_HOST/_PORT is not in-cluster: ~/.kube/config is used', () => {
    const home = tempDir();
    mkdirSync(join(home, '.kube'));
    const cfg = file(join(home, '.kube'), 'config', kubeconfig('https://home:6443'));
    assert.deepEqual(load(undefined, { KUBERNETES_SERVICE_HOST: '10.96.0.1', HOME: home }, { inClusterRoot: inClusterRoot() }), {
      server: 'https://home:6443', source: `default ${cfg}`,
    });
  });

  it('an empty $KUBECONFIG counts as unset', () => {
    const home = tempDir();
    mkdirSync(join(home, '.kube'));
    file(join(home, '.kube'), 'config', kubeconfig('https://home:6443'));
    assert.equal(load(undefined, { KUBECONFIG: '', HOME: home }).server, 'https://home:6443');
  });
});

describe('loadKubeConfig: errors name what is wrong', () => {
  it('a --kubeconfig or $KUBECONFIG file that does not exist', () => {
    assert.throws(() => loadKubeConfig('/nonexistent/kc', {}, manager), /^Error: kubeconfig \/nonexistent\/kc \(--kubeconfig\) does not exist$/);
    assert.throws(() => loadKubeConfig('/nonexistent/kc', {}), /^Error: kubeconfig \/nonexistent\/kc \(kubeconfig path\) does not exist$/, 'library: no flag named');
    assert.throws(() => loadKubeConfig(undefined, { KUBECONFIG: '/nonexistent/kc' }), /kubeconfig \/nonexistent\/kc \(\$KUBECONFIG\) does not exist/);
  });

  it('a $KUBECONFIG list of which no file exists', () => {
    assert.throws(() => loadKubeConfig(undefined, { KUBECONFIG: ['/nope/a', '/nope/b'].join(delimiter) }), /cannot load \$KUBECONFIG: .*\/nope\/a/);
  });

  it('a file that does not parse, and one without a current context', () => {
    const dir = tempDir();
    const broken = file(dir, 'broken', 'clusters: [unclosed');
    assert.throws(() => loadKubeConfig(broken, {}, manager), new RegExp(`cannot load kubeconfig ${broken} \\(--kubeconfig\\): `));
    const noCurrent = file(dir, 'nocurrent', kubeconfig('https://x:6443', { current: false }));
    assert.throws(() => loadKubeConfig(noCurrent, {}), /has no current context\/cluster/);
    const other = file(dir, 'other', kubeconfig('https://y:6443', { context: 'y', current: false }));
    assert.throws(() => loadKubeConfig(undefined, { KUBECONFIG: [noCurrent, other].join(delimiter) }), /\$KUBECONFIG \(.*\) has no current context\/cluster/);
  });

  it('in a Pod without a ServiceAccount token (automountServiceAccountToken: false)', () => {
    const root = inClusterRoot(false);
    assert.throws(() => loadKubeConfig(undefined, inCluster, { inClusterRoot: root }),
      new RegExp(`in-cluster configuration: ServiceAccount token ${root}${serviceAccountDir}/token does not exist`));
  });

  it('nothing at all: the manager names its flag, the library its option (no flag a library user does not have)', () => {
    assert.throws(() => loadKubeConfig(undefined, { HOME: tempDir() }, manager), /^Error: no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, or run in a Pod/);
    const err = (() => {
      try {
        loadKubeConfig(undefined, { HOME: tempDir() });
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    assert.ok(err);
    assert.doesNotMatch(err.message, /--kubeconfig/);
    assert.match(err.message, /set KUBECONFIG .*run in a Pod with a ServiceAccount.*new ControllerManager\(\{ kubeConfig \}\)/);
  });
});
