/**
 * RBAC from declarations (permission.ts, role.ts, ../codegen/rbac.ts) and refusals (refusal.ts), without a cluster: what the
 * builder's sources, `.rbac()` and Event recorders record, how it merges and renders, the `gen rbac` command (write,
 * --check, exit codes), and the message a 403 turns into.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { crdManifest } from '../../test/helpers/crdmanifest.ts';
import { coreResources, type ResourceType } from '../apimachinery/resource.ts';
import { genMain } from '../codegen/cli.ts';
import type { ControllerManager } from '../runtime/manager.ts';
import { declaredRules, genRbacMain, parseGenRbacArgs, type GenRbacIO } from '../codegen/rbac.ts';
import { contributionOf } from './permission.ts';
import { parseRefusal, refusalHint, refusalMessage } from './refusal.ts';
import { mergeContributions, renderRules, replaceRules } from './role.ts';

const guestbooks: ResourceType = { group: 'webapp.example.com', version: 'v1', resource: 'guestbooks', kind: 'Guestbook', namespaced: true };
const noop = (): Promise<void> => Promise.resolve();

/** Two controllers sharing ConfigMaps, one recorder, one informer made outside a builder. */
function setup(mgr: ControllerManager): void {
  mgr.controller('guestbook')
    .for(guestbooks)
    .owns(coreResources.configMaps)
    .watches(coreResources.secrets, () => [])
    .rbac(
      { resource: guestbooks, verbs: ['patch', 'get'], why: 'finalizer add/remove' },
      { resource: guestbooks, subresource: 'status', verbs: ['patch'], why: 'the Ready condition' },
      { resource: coreResources.configMaps, verbs: ['get', 'create', 'patch', 'delete'], why: 'createOrPatch, cleanup' },
    )
    .complete(noop);
  mgr.recorderFor('guestbook-controller');
  mgr.controller('copier').for(coreResources.configMaps).rbac({ resource: coreResources.configMaps, verbs: ['update'], why: 'copies data' }).complete(noop);
  mgr.informer(coreResources.nodes);
}

describe('rules from what the controllers declare', () => {
  it('informers list and watch; owns needs the primary\'s finalizers; .rbac adds the rest; Events after the controllers', async () => {
    const rules = await declaredRules(setup);
    assert.deepEqual(rules.map((r) => [r.group, r.resource, r.verbs.join(' ')]), [
      ['webapp.example.com', 'guestbooks', 'get list watch patch'],
      ['webapp.example.com', 'guestbooks/finalizers', 'update'],
      ['webapp.example.com', 'guestbooks/status', 'patch'],
      ['', 'configmaps', 'get list watch create update patch delete'],
      ['', 'secrets', 'list watch'],
      ['', 'nodes', 'list watch'],
      ['', 'events', 'create patch'],
    ]);
  });

  it('renders each rule with who needs which verbs and why', async () => {
    const text = renderRules(await declaredRules(setup));
    assert.equal(text.split('\n').slice(0, 10).join('\n'), `rules:
  # guestbook: for (list, watch); finalizer add/remove (get, patch)
  - apiGroups: [webapp.example.com]
    resources: [guestbooks]
    verbs: [get, list, watch, patch]
  # guestbook: blockOwnerDeletion on what it owns (update)
  - apiGroups: [webapp.example.com]
    resources: [guestbooks/finalizers]
    verbs: [update]
  # guestbook: the Ready condition (patch)`);
    assert.match(text, /\n {2}# guestbook: owns \(list, watch\); createOrPatch, cleanup \(get, create, patch, delete\)\n {2}# copier: for \(list, watch\); copies data \(update\)\n {2}- apiGroups: \[""\]\n {4}resources: \[configmaps\]\n/);
    assert.match(text, /# informers: mgr\.informer\(Node\) \(list, watch\)\n/);
    assert.match(text, /# guestbook-controller: Events \(a repeat is patched\) \(create, patch\)\n {2}- apiGroups: \[""\]\n {4}resources: \[events\]\n {4}verbs: \[create, patch\]\n$/);
  });

  it('a rule with resourceNames is its own rule; names and "*" are quoted when YAML needs it; long comments wrap', () => {
    const rules = mergeContributions([
      contributionOf({ resource: 'leases', group: 'coordination.k8s.io', verbs: ['get'], resourceNames: ['b', 'a:x'] }, 'x'),
      contributionOf({ resource: 'leases', group: 'coordination.k8s.io', verbs: ['*'], why: 'w '.repeat(80).trim() }, 'x'),
    ]);
    const text = renderRules(rules);
    assert.match(text, /resourceNames: \["a:x", b\]\n {4}verbs: \[get\]/);
    assert.match(text, /verbs: \["\*"\]/);
    for (const line of text.split('\n')) assert.ok(line.length <= 120, line);
    assert.equal(renderRules([]), 'rules: []\n');
  });

  it('.rbac refuses what RBAC cannot express', () => {
    assert.throws(() => contributionOf({ resource: 'pods', verbs: [] }, 'c'), /c: \.rbac\(\) on pods lists no verbs/);
    assert.throws(() => contributionOf({ resource: 'pods/status', subresource: 'status', verbs: ['get'] }, 'c'), /names a subresource already/);
    assert.deepEqual(contributionOf({ resource: 'deployments/scale', group: 'apps', verbs: ['update'] }, 'c').resource, 'deployments/scale');
  });

  it('replaceRules keeps everything above rules: and refuses a file it would truncate', () => {
    const rules = mergeContributions([contributionOf({ resource: 'pods', verbs: ['get'] }, 'c')]);
    const head = '# mine\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n  namespace: system\n';
    assert.equal(replaceRules(`${head}rules:\n  - old: rule\n`, rules, 'f'), `${head}${renderRules(rules)}`);
    assert.throws(() => replaceRules(head, rules, 'f.yaml'), /f\.yaml: no top-level "rules:"/);
    assert.throws(() => replaceRules(`${head}rules: []\naggregationRule: {}\n`, rules, 'f.yaml'), /must be the last top-level key/);
  });
});

describe('gen rbac', () => {
  const repo = join(import.meta.dirname, '..', '..');
  function project(declare: string): { dir: string; io: GenRbacIO; out: string[]; err: string[] } {
    const dir = mkdtempSync(join(tmpdir(), 'gen-rbac-'));
    writeFileSync(join(dir, 'main.ts'), `import { coreResources, type ControllerManager } from '${join(repo, 'pkg', 'index.ts')}';
export function setup(mgr: ControllerManager): void {
  mgr.controller('c').for(coreResources.configMaps)${declare}.complete(() => Promise.resolve());
}
if (import.meta.main) throw new Error('main ran on import');
`);
    const out: string[] = [];
    const err: string[] = [];
    return { dir, out, err, io: { cwd: dir, stdout: (s) => out.push(s), stderr: (s) => err.push(s) } };
  }

  it('writes role.yaml and leader_election_role.yaml, keeps what is above rules:, and --check says when they are stale', async () => {
    const p = project(".rbac({ resource: coreResources.configMaps, verbs: ['create'], why: 'makes one' })");
    assert.equal(await genRbacMain(['--out', 'config/rbac', 'main.ts'], p.io), 0, p.err.join(''));
    assert.deepEqual(p.out, ['wrote config/rbac/role.yaml\n', 'wrote config/rbac/leader_election_role.yaml\n']);
    const role = readFileSync(join(p.dir, 'config/rbac/role.yaml'), 'utf8');
    assert.match(role, /^# Generated by `ts-controller-manager gen rbac`/);
    assert.match(role, /kind: ClusterRole\nmetadata:\n {2}name: manager-role\nrules:\n {2}# c: for \(list, watch\); makes one \(create\)\n/);
    assert.match(readFileSync(join(p.dir, 'config/rbac/leader_election_role.yaml'), 'utf8'),
      /kind: Role\n[^]*resources: \[leases\]\n {4}verbs: \[get, watch, create, update\]\n$/);
    assert.equal(await genRbacMain(['--check', '--out=config/rbac', 'main.ts'], p.io), 0, p.err.join(''));

    // Names and labels are the project's: kept. A changed declaration makes --check fail, naming the file.
    writeFileSync(join(p.dir, 'config/rbac/role.yaml'), role.replace('name: manager-role', 'name: manager-role\n  labels: {a: b}'));
    assert.equal(await genRbacMain(['--out', 'config/rbac', 'main.ts'], p.io), 0);
    assert.match(readFileSync(join(p.dir, 'config/rbac/role.yaml'), 'utf8'), /labels: \{a: b\}\nrules:\n/);
    // (another file: this process's module cache holds main.ts as first imported)
    writeFileSync(join(p.dir, 'changed.ts'), readFileSync(join(p.dir, 'main.ts'), 'utf8').replace("'create'", "'create', 'delete'"));
    p.err.length = 0;
    assert.equal(await genRbacMain(['--check', '--out', 'config/rbac', 'changed.ts'], p.io), 1);
    assert.deepEqual(p.err, ['stale: config/rbac/role.yaml (the declarations changed; regenerate: `npm run generate`)\n']);
  });

  it('`gen types … + rbac …` runs both (the scaffold\'s npm run generate), and --check at the end checks both', async () => {
    const p = project(".rbac({ resource: coreResources.configMaps, verbs: ['create'] })");
    mkdirSync(join(p.dir, 'crds'));
    writeFileSync(join(p.dir, 'crds', 'things.yaml'), crdManifest({ kind: 'Thing', plural: 'things', properties: ['spec: {type: object}'] }));
    const generate = ['types', '--out', 'api', 'crds', '+', 'rbac', '--out', 'config/rbac', 'main.ts'];
    assert.equal(await genMain(generate, p.io), 0, p.err.join(''));
    assert.ok(existsSync(join(p.dir, 'config/rbac/role.yaml')));
    assert.equal(await genMain([...generate, '--check'], p.io), 0, p.err.join(''));
    writeFileSync(join(p.dir, 'crds', 'things.yaml'), crdManifest({ kind: 'Thing', plural: 'things', properties: ['spec: {type: object, description: changed}'] }));
    assert.equal(await genMain([...generate, '--check'], p.io), 1, 'the types are checked too');
    assert.match(p.err.join(''), /stale: api\/example\/v1\/zz_generated\.types\.ts/);
    // The binary dispatches gen rbac.
    const r = spawnSync(process.execPath, [join(repo, 'cmd', 'manager', 'main.ts'), 'gen', 'rbac', '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^Usage: ts-controller-manager gen rbac \[flags\] MODULE/);
  });

  it('exit 2 for a bad invocation or a module without setup; exit 1 for a setup that sends a request', async () => {
    assert.throws(() => parseGenRbacArgs([]), /^Error: no MODULE given/);
    assert.throws(() => parseGenRbacArgs(['--verbose', 'main.ts']), /unknown flag "--verbose"/);
    assert.throws(() => parseGenRbacArgs(['--out', 'a.ts']), /no MODULE given/);
    const p = project('');
    assert.equal(await genRbacMain(['nope.ts'], p.io), 2);
    assert.match(p.err.join(''), /^error: cannot read nope\.ts: no such file\n$/);
    writeFileSync(join(p.dir, 'lib.ts'), 'export const x = 1;\nexport function setupMine(mgr: { controller(n: string): unknown }) { mgr.controller("mine"); }\n');
    assert.equal(await genRbacMain(['lib.ts'], p.io), 2);
    assert.match(p.err.at(-1) ?? '', /lib\.ts exports no setup\(mgr\) function/);
    assert.equal(await genRbacMain(['--setup', 'x', 'lib.ts'], p.io), 2);
    assert.match(p.err.at(-1) ?? '', /lib\.ts exports no function x\n$/);
    assert.equal(await genRbacMain(['--setup=setupMine', '--check', 'lib.ts'], p.io), 1, 'found (and, nothing written yet, stale)');
    assert.deepEqual(parseGenRbacArgs(['--setup', 'setupMine', 'lib.ts']).setup, 'setupMine');
    writeFileSync(join(p.dir, 'calls.ts'), 'export async function setup(mgr: { client: { json(m: string, p: string): Promise<unknown> } }) { await mgr.client.json("GET", "/api/v1/pods"); }\n');
    assert.equal(await genRbacMain(['calls.ts'], p.io), 1);
    assert.match(p.err.at(-1) ?? '', /the setup sent GET \/api\/v1\/pods; a setup only declares/);
  });
});

describe('a refusal names the rule to add', () => {
  const sa = 'system:serviceaccount:system:controller-manager';
  it('reads the authorizer\'s message: namespaced, cluster-scoped, a subresource quoted by admission', () => {
    const namespaced = parseRefusal('DELETE', '/api/v1/namespaces/default/configmaps/x?dryRun=All', {
      kind: 'Status', code: 403, reason: 'Forbidden',
      message: `configmaps "x" is forbidden: User "${sa}" cannot delete resource "configmaps" in API group "" in the namespace "default"`,
    });
    assert.deepEqual(namespaced && { ...namespaced, message: '' }, {
      user: sa, verb: 'delete', group: '', resource: 'configmaps', namespace: 'default', request: 'DELETE /api/v1/namespaces/default/configmaps/x', message: '',
    });
    const cluster = parseRefusal('GET', '/apis/apps/v1/deployments?watch=true', {
      message: `deployments.apps is forbidden: User "${sa}" cannot watch resource "deployments" in API group "apps" at the cluster scope`,
    });
    assert.deepEqual([cluster?.verb, cluster?.group, cluster?.resource, cluster?.namespace], ['watch', 'apps', 'deployments', undefined]);
    const admission = parseRefusal('POST', '/apis/apps/v1/namespaces/a/deployments', {
      message: `deployments.apps "d" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: User "${sa}" cannot update resource "foos/finalizers" in API group "samplecontroller.k8s.io" in the namespace "a"`,
    });
    assert.deepEqual([admission?.verb, admission?.resource, admission?.group], ['update', 'foos/finalizers', 'samplecontroller.k8s.io']);
    assert.equal(parseRefusal('POST', '/x', { message: 'admission webhook "v.example.com" denied the request: no' }), undefined, 'a webhook denial is no missing rule');
  });

  it('the message says the verb, resource, group, the rule lines and the declaration', () => {
    const r = parseRefusal('PATCH', '/apis/webapp.example.com/v1/namespaces/n/guestbooks/g/status', {
      message: `guestbooks.webapp.example.com "g" is forbidden: User "${sa}" cannot patch resource "guestbooks/status" in API group "webapp.example.com" in the namespace "n"`,
    });
    assert.ok(r);
    const m = refusalMessage(r);
    assert.match(m, /^RBAC refused the manager \(system:serviceaccount:system:controller-manager\): patch guestbooks\/status \(API group "webapp\.example\.com"\) in namespace "n"/);
    assert.match(m, /\n {2}- apiGroups: \[webapp\.example\.com\]\n {4}resources: \[guestbooks\/status\]\n {4}verbs: \[patch\]\n/);
    assert.match(m, /\.rbac\(\{ group: 'webapp\.example\.com', resource: 'guestbooks', subresource: 'status', verbs: \['patch'\] \}\)/);
    assert.match(m, /npm run generate/);
    assert.match(refusalHint(r), /^missing RBAC rule: apiGroups \["webapp\.example\.com"\], resources \[guestbooks\/status\], verbs \[patch\]; declare it with \.rbac/);
  });
});
