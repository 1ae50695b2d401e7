import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { format, inspect } from 'node:util';
import { CloudConfigError, cloudsYamlCandidates, describeCloud, loadCloudConfig, Secret, type CloudConfig } from './clouds.ts';

let root: string;
let n = 0;

/** Writes `text` as a clouds.yaml in a fresh directory and returns its path. */
function file(text: string, name = 'clouds.yaml'): string {
  const dir = join(root, `c${n++}`);
  mkdirSync(dir, { recursive: true });
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

/** Loads `text` with no environment and nothing in the standard locations. */
function load(text: string, cloud?: string): CloudConfig {
  return loadCloudConfig({ path: file(text), cloud, env: {} });
}

function loadErr(text: string, cloud?: string): string {
  try {
    load(text, cloud);
  } catch (err) {
    assert.ok(err instanceof CloudConfigError, `expected CloudConfigError, got ${String(err)}`);
    return err.message;
  }
  assert.fail('expected an error');
}

before(() => {
  root = mkdtempSync(join(tmpdir(), 'tscm-clouds-'));
});
after(() => rmSync(root, { recursive: true, force: true }));

describe('clouds.yaml: auth_type none', () => {
  it('reads the form hack/neutron/up.sh writes (auth.endpoint)', () => {
    const c = load(`
clouds:
  local:
    auth_type: none
    auth:
      endpoint: http://127.0.0.1:9696/
    region_name: RegionOne
    network_api_version: "2"
`, 'local');
    assert.equal(c.name, 'local');
    assert.deepEqual(c.auth, { type: 'none', endpoint: 'http://127.0.0.1:9696' });
    assert.equal(c.networkEndpoint, 'http://127.0.0.1:9696');
    assert.equal(c.regionName, 'RegionOne');
    assert.equal(c.interface, 'public');
    assert.equal(c.verify, true);
  });

  it('accepts network_endpoint_override or endpoint_override, and the noauth alias', () => {
    const a = load('clouds:\n  x:\n    auth_type: noauth\n    network_endpoint_override: http://n:1\n');
    assert.deepEqual(a.auth, { type: 'none', endpoint: 'http://n:1' });
    const b = load('clouds:\n  x:\n    auth_type: none\n    endpoint_override: https://n:2/\n');
    assert.deepEqual(b.auth, { type: 'none', endpoint: 'https://n:2' });
  });

  it('infers none from auth.endpoint without auth_url', () => {
    assert.equal(load('clouds:\n  x:\n    auth: {endpoint: "http://n:3"}\n').auth.type, 'none');
  });

  it('requires an explicit endpoint', () => {
    assert.match(loadErr('clouds:\n  x:\n    auth_type: none\n'), /clouds\.x: auth_type none needs an explicit network endpoint: auth\.endpoint/);
  });

  it('rejects endpoints that are not http(s) URLs', () => {
    assert.match(loadErr('clouds:\n  x:\n    auth_type: none\n    auth: {endpoint: "not a url"}\n'), /auth\.endpoint is not a URL/);
    assert.match(loadErr('clouds:\n  x:\n    auth_type: none\n    auth: {endpoint: "ftp://h/"}\n'), /must be http\(s\)/);
  });
});

describe('clouds.yaml: password', () => {
  const full = `
clouds:
  prod:
    auth_type: password
    auth:
      auth_url: https://keystone.example:5000/v3
      username: alice
      password: s3cr3t-pw
      project_name: demo
      user_domain_name: Users
      project_domain_name: Projects
    region_name: RegionTwo
    interface: internal
`;

  it('reads every field', () => {
    const c = load(full);
    assert.equal(c.auth.type, 'password');
    if (c.auth.type !== 'password') return;
    assert.equal(c.auth.authUrl, 'https://keystone.example:5000/v3');
    assert.equal(c.auth.username, 'alice');
    assert.equal(c.auth.password.reveal(), 's3cr3t-pw');
    assert.equal(c.auth.projectName, 'demo');
    assert.equal(c.auth.userDomainName, 'Users');
    assert.equal(c.auth.projectDomainName, 'Projects');
    assert.equal(c.regionName, 'RegionTwo');
    assert.equal(c.interface, 'internal');
    assert.equal(c.networkEndpoint, undefined);
  });

  it('v3password is an alias; a missing auth_type means password', () => {
    assert.equal(load(full.replace('auth_type: password', 'auth_type: v3password')).auth.type, 'password');
    assert.equal(load(full.replace('    auth_type: password\n', '')).auth.type, 'password');
  });

  it('domains fall back to default_domain_*, then to id "default"', () => {
    const base = 'clouds:\n  x:\n    auth:\n      auth_url: http://k\n      username: u\n      password: p\n      project_name: pr\n';
    const a = load(base);
    assert.ok(a.auth.type === 'password');
    assert.equal(a.auth.userDomainId, 'default');
    assert.equal(a.auth.projectDomainId, 'default');
    const b = load(`${base}      default_domain_name: Corp\n`);
    assert.ok(b.auth.type === 'password');
    assert.equal(b.auth.userDomainName, 'Corp');
    assert.equal(b.auth.projectDomainName, 'Corp');
    assert.equal(b.auth.userDomainId, undefined);
  });

  it('ids need no domain; numbers are read as strings', () => {
    const c = load('clouds:\n  x:\n    auth:\n      auth_url: http://k\n      user_id: 123\n      password: 456\n      project_id: 789\n');
    assert.ok(c.auth.type === 'password');
    assert.equal(c.auth.userId, '123');
    assert.equal(c.auth.password.reveal(), '456');
    assert.equal(c.auth.projectId, '789');
    assert.equal(c.auth.userDomainId, undefined);
    assert.equal(c.auth.projectDomainId, undefined);
  });

  it('names each missing field', () => {
    assert.match(loadErr(full.replace(/ {6}auth_url:.*\n/, '')), /clouds\.prod\.auth\.auth_url is required for auth_type password/);
    assert.match(loadErr(full.replace(/ {6}username:.*\n/, '')), /auth\.username \(or user_id\) is required/);
    assert.match(loadErr(full.replace(/ {6}password:.*\n/, '')), /auth\.password is required/);
    assert.match(loadErr(full.replace(/ {6}project_name:.*\n/, '')), /auth\.project_name \(or project_id\) is required/);
  });

  it('reads legacy endpoint_type and a per-service endpoint override', () => {
    const c = load(`${full.replace('interface: internal', 'endpoint_type: adminURL')}    network_endpoint_override: http://n:9696/v2.0/\n`);
    assert.equal(c.interface, 'admin');
    assert.equal(c.networkEndpoint, 'http://n:9696/v2.0');
  });

  it('rejects an unknown interface', () => {
    assert.match(loadErr(full.replace('interface: internal', 'interface: private')), /interface must be public, internal or admin/);
  });

  it('reads verify and resolves cacert next to the file', () => {
    const p = file(`${full}    verify: false\n    cacert: ca.pem\n`);
    const c = loadCloudConfig({ path: p, env: {} });
    assert.equal(c.verify, false);
    assert.equal(c.cacert, join(p, '..', 'ca.pem'));
    assert.match(loadErr(`${full}    verify: maybe\n`), /verify must be true or false/);
  });

  it('resolves cert and key next to the file; a key needs a cert', () => {
    const p = file(`${full}    cert: tls/client.crt\n    key: /abs/client.key\n`);
    const c = loadCloudConfig({ path: p, env: {} });
    assert.equal(c.cert, join(p, '..', 'tls', 'client.crt'));
    assert.equal(c.key, '/abs/client.key');
    assert.equal(load(`${full}    cert: both.pem\n`).key, undefined);
    assert.match(loadErr(`${full}    key: client.key\n`), /\.key is set without .*\.cert/);
  });
});

describe('clouds.yaml: v3applicationcredential', () => {
  it('reads id and secret', () => {
    const c = load('clouds:\n  x:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k:5000\n      application_credential_id: ac1\n      application_credential_secret: acsecret\n');
    assert.ok(c.auth.type === 'v3applicationcredential');
    assert.equal(c.auth.applicationCredentialId, 'ac1');
    assert.equal(c.auth.applicationCredentialSecret.reveal(), 'acsecret');
  });

  it('is inferred from the credential fields', () => {
    assert.equal(load('clouds:\n  x:\n    auth:\n      auth_url: http://k\n      application_credential_id: a\n      application_credential_secret: b\n').auth.type,
      'v3applicationcredential');
  });

  it('accepts a name with the owning user', () => {
    const c = load('clouds:\n  x:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k\n      application_credential_name: ci\n      application_credential_secret: s\n      username: bob\n      user_domain_name: D\n');
    assert.ok(c.auth.type === 'v3applicationcredential');
    assert.equal(c.auth.applicationCredentialName, 'ci');
    assert.equal(c.auth.username, 'bob');
    assert.equal(c.auth.userDomainName, 'D');
  });

  it('names missing fields', () => {
    const base = 'clouds:\n  x:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k\n';
    assert.match(loadErr(`${base}      application_credential_id: a\n`), /application_credential_secret is required/);
    assert.match(loadErr(`${base}      application_credential_secret: s\n`), /application_credential_id \(or application_credential_name\) is required/);
    assert.match(loadErr(`${base}      application_credential_secret: s\n      application_credential_name: n\n`), /username or user_id/);
  });
});

describe('clouds.yaml: errors', () => {
  it('rejects unsupported auth types', () => {
    assert.match(loadErr('clouds:\n  x:\n    auth_type: v3oidcpassword\n    auth: {auth_url: "http://k"}\n'),
      /auth_type "v3oidcpassword" is not supported \(supported: password, v3password, v3applicationcredential, none\)/);
  });

  it('reports invalid YAML, a non-mapping document and a missing clouds key with the file name', () => {
    const bad = file('clouds: [\n');
    assert.throws(() => loadCloudConfig({ path: bad, env: {} }), (e: Error) => e instanceof CloudConfigError && e.message.includes(bad) && /not valid YAML/.test(e.message));
    assert.match(loadErr('- a\n- b\n'), /expected a mapping at the top level/);
    assert.match(loadErr('other: {}\n'), /has no top-level "clouds:" mapping/);
    assert.match(loadErr('clouds:\n  x: 3\n'), /clouds\.x must be a mapping/);
  });
});

describe('clouds.yaml: selection', () => {
  const two = 'clouds:\n  a:\n    auth: {endpoint: "http://a"}\n  b:\n    auth: {endpoint: "http://b"}\n';

  it('uses the cloud option, else OS_CLOUD', () => {
    const p = file(two);
    assert.equal(loadCloudConfig({ path: p, cloud: 'b', env: { OS_CLOUD: 'a' } }).name, 'b');
    assert.equal(loadCloudConfig({ path: p, env: { OS_CLOUD: 'a' } }).name, 'a');
  });

  it('picks the only cloud when none is named', () => {
    assert.equal(load('clouds:\n  solo:\n    auth: {endpoint: "http://s"}\n').name, 'solo');
  });

  it('lists the clouds when the choice is ambiguous or unknown', () => {
    assert.match(loadErr(two), /defines 2 clouds \(a, b\): choose one with --neutron-cloud or OS_CLOUD/);
    assert.match(loadErr(two, 'c'), /cloud "c" not found in .*clouds\.yaml \(available: a, b\)/);
    assert.match(loadErr('clouds: {}\n', 'x'), /available: none/);
  });

  it('merges secure.yaml from the same directory over clouds.yaml', () => {
    const p = file('clouds:\n  k:\n    auth:\n      auth_url: http://k\n      username: u\n      project_id: p\n');
    writeFileSync(join(p, '..', 'secure.yaml'), 'clouds:\n  k:\n    auth:\n      password: from-secure\n');
    const c = loadCloudConfig({ path: p, env: {} });
    assert.ok(c.auth.type === 'password');
    assert.equal(c.auth.password.reveal(), 'from-secure');
    assert.equal(c.auth.username, 'u');
  });
});

describe('clouds.yaml: lookup order', () => {
  const yaml = (name: string): string => `clouds:\n  ${name}:\n    auth: {endpoint: "http://${name}"}\n`;

  function layout(): { cwd: string; home: string; systemDir: string } {
    const base = join(root, `l${n++}`);
    const cwd = join(base, 'cwd');
    const home = join(base, 'home');
    const systemDir = join(base, 'etc');
    for (const d of [cwd, join(home, '.config', 'openstack'), systemDir]) mkdirSync(d, { recursive: true });
    return { cwd, home, systemDir };
  }

  it('flag, then NEUTRON_CLOUD_CONFIG, then OS_CLIENT_CONFIG_FILE, then ./, ~/.config/openstack, /etc/openstack', () => {
    const l = layout();
    const flag = file(yaml('flag'));
    const envFile = file(yaml('env'));
    const osFile = file(yaml('os'));
    writeFileSync(join(l.systemDir, 'clouds.yaml'), yaml('system'));
    assert.equal(loadCloudConfig({ ...l, env: {} }).name, 'system');
    writeFileSync(join(l.home, '.config', 'openstack', 'clouds.yaml'), yaml('home'));
    assert.equal(loadCloudConfig({ ...l, env: {} }).name, 'home');
    writeFileSync(join(l.cwd, 'clouds.yaml'), yaml('cwd'));
    assert.equal(loadCloudConfig({ ...l, env: {} }).name, 'cwd');
    assert.equal(loadCloudConfig({ ...l, env: { OS_CLIENT_CONFIG_FILE: osFile } }).name, 'os');
    assert.equal(loadCloudConfig({ ...l, env: { NEUTRON_CLOUD_CONFIG: envFile, OS_CLIENT_CONFIG_FILE: osFile } }).name, 'env');
    assert.equal(loadCloudConfig({ ...l, path: flag, env: { NEUTRON_CLOUD_CONFIG: envFile } }).name, 'flag');
  });

  it('an explicitly named file that is missing is an error, not a fallback', () => {
    const l = layout();
    writeFileSync(join(l.cwd, 'clouds.yaml'), yaml('cwd'));
    assert.throws(() => loadCloudConfig({ ...l, path: '/nonexistent/clouds.yaml', env: {} }),
      /clouds\.yaml not found: \/nonexistent\/clouds\.yaml \(from --neutron-cloud-config\) does not exist/);
    assert.throws(() => loadCloudConfig({ ...l, env: { NEUTRON_CLOUD_CONFIG: '/nope.yaml' } }), /\/nope\.yaml \(from \$NEUTRON_CLOUD_CONFIG\)/);
  });

  it('lists every path tried when nothing is found', () => {
    const l = layout();
    const paths = cloudsYamlCandidates({ ...l, env: {} }).map((c) => c.path);
    assert.deepEqual(paths, [join(l.cwd, 'clouds.yaml'), join(l.home, '.config/openstack/clouds.yaml'), join(l.systemDir, 'clouds.yaml')]);
    assert.throws(() => loadCloudConfig({ ...l, env: {} }), (e: Error) =>
      e instanceof CloudConfigError && e.message.startsWith('no clouds.yaml found') && paths.every((p) => e.message.includes(p)));
  });
});

describe('secrets are never revealed by printing', () => {
  it('Secret prints as [redacted] every way but reveal()', () => {
    const s = new Secret('hunter2');
    assert.equal(s.reveal(), 'hunter2');
    // The template literal is the point: printing a Secret by accident must not reveal it.
    // eslint-disable-next-line @typescript-eslint/restrict-template-expressions
    for (const shown of [String(s), `${s}`, JSON.stringify({ s }), inspect(s), inspect({ s }, { depth: null, showHidden: true }), format('%s %o %O %j', s, s, s, s)]) {
      assert.ok(!shown.includes('hunter2'), shown);
      assert.ok(shown.includes('[redacted]'), shown);
    }
  });

  it('configs with passwords and application credential secrets do not leak them', () => {
    const pw = load('clouds:\n  x:\n    auth:\n      auth_url: http://k\n      username: u\n      password: PW-9f8e7d\n      project_id: p\n');
    const ac = load('clouds:\n  y:\n    auth:\n      auth_url: http://k\n      application_credential_id: i\n      application_credential_secret: AC-1a2b3c\n');
    for (const c of [pw, ac]) {
      for (const shown of [JSON.stringify(c), inspect(c, { depth: null, showHidden: true }), format('%o', c), describeCloud(c)]) {
        assert.ok(!shown.includes('PW-9f8e7d') && !shown.includes('AC-1a2b3c'), shown);
      }
    }
  });
});
