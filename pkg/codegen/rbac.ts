/**
 * `ts-controller-manager gen rbac [--out DIR] [--setup NAME] [--check] MODULE` — the least-privilege RBAC of a
 * manager, derived from what its setup declares (permission.ts):
 *
 *   1. MODULE (e.g. the project's main.ts) is imported; it exports `setup(mgr)` (or the function `--setup` names, or a
 *      default function) that declares the controllers, as main.ts does before `mgr.run()` — its own start-up code must
 *      not run on import (guard it with `if (import.meta.main)`).
 *   2. setup runs on a ControllerManager that is never started and whose transport refuses every request (a setup
 *      only declares: an API call in it is an error naming the request) — no cluster, no credentials.
 *   3. What it recorded (the builder's sources, `.rbac()`, Event recorders) and every informer it created become the
 *      rules of DIR/role.yaml (the manager's ClusterRole, or Role); leader election's become those of
 *      DIR/leader_election_role.yaml. Only the `rules:` are written (pkg/rbac/role.ts): what is above them stays.
 *
 * `--check` writes nothing and exits 1 naming each file that is missing or differs (`npm run generate` fixes it).
 * Exit codes: 0 done (or up to date), 1 stale files, a setup that failed or made a request, a file whose rules cannot
 * be replaced; 2 bad invocation (unknown flag, no or unreadable MODULE, a module without a setup function).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Registry } from 'prom-client';
import type { RequestTransport } from '../client/transport.ts';
import type { GeneratedFile } from './types.ts';
import { silentLogger } from '../log/logger.ts';
import { ControllerManager } from '../runtime/manager.ts';
import { informerVerbs, leaderElectionContributions, recordedPermissions } from '../rbac/permission.ts';
import { mergeContributions, replaceRules, type RoleRule } from '../rbac/role.ts';

/** Bad invocation (exit 2). */
export class GenRbacUsageError extends Error {}

export interface GenRbacArgs {
  help: boolean;
  outDir: string;
  check: boolean;
  /** The module exporting setup(mgr). */
  module: string;
  /** The name of the exported setup function; undefined: `setup`, else the default export. */
  setup: string | undefined;
}

export const defaultRbacDir = 'config/rbac';

export const genRbacUsage = `Usage: ts-controller-manager gen rbac [flags] MODULE

Writes the manager's least-privilege RBAC from what the controllers declare: MODULE (e.g. main.ts) exports
setup(mgr) — the function main.ts calls to declare the controllers — which runs on a manager that is never started.
Each informer (the builder's for, owns and watches) needs list and watch; owns, update on the primary's finalizers
(blockOwnerDeletion); an Event recorder, create and patch on events; the builder's .rbac(...) adds what the code calls
beyond them. The rules go into DIR/role.yaml, leader election's into DIR/leader_election_role.yaml; what is above
"rules:" in a file is kept. See docs/library.md#rbac.

Flags:
  --out=DIR     Where role.yaml and leader_election_role.yaml are (default "${defaultRbacDir}").
  --setup=NAME  The exported function that declares the controllers (default: setup, else the default export).
  --check       Write nothing; exit 1 naming every file that is missing or differs.
  -h, --help    This text.
`;

/** Parses the arguments after `gen rbac`. Throws GenRbacUsageError (one line) on a bad invocation. */
export function parseGenRbacArgs(argv: readonly string[]): GenRbacArgs {
  const args: GenRbacArgs = { help: false, outDir: defaultRbacDir, check: false, module: '', setup: undefined };
  const modules: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-h' || a === '--help') return { ...args, help: true };
    if (a === '--check' || a === '--check=true') args.check = true;
    else if (a === '--check=false') args.check = false;
    else if (/^--(out|setup)(=|$)/.test(a)) {
      const flag = a.slice(2).split('=')[0] ?? '';
      const value = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (value === undefined || value.trim() === '') throw new GenRbacUsageError(`flag --${flag} needs a non-empty value`);
      if (flag === 'out') args.outDir = value;
      else args.setup = value;
    } else if (a.startsWith('-')) throw new GenRbacUsageError(`unknown flag ${JSON.stringify(a)}`);
    else modules.push(a);
  }
  if (modules.length !== 1) throw new GenRbacUsageError(modules.length === 0 ? 'no MODULE given (the module exporting setup(mgr), e.g. main.ts)' : `one MODULE, not ${modules.length}`);
  args.module = modules[0] ?? '';
  return args;
}

/** A transport that sends nothing: a setup that makes a request fails, naming it. */
const noRequests: RequestTransport = {
  cluster: { server: 'https://gen-rbac.invalid' },
  headers: () => Promise.resolve({}),
  send: (o) => Promise.reject(new Error(`gen rbac: the setup sent ${o.method} ${o.path.split('?')[0] ?? o.path}; a setup only declares (it runs on a manager that is never started)`)),
  invalidate: () => {},
};

/**
 * The rules `setup` declares: runs it on a recording ControllerManager (never started, no requests) and merges
 * what it recorded with the informers it created.
 */
export async function declaredRules(setup: (mgr: ControllerManager) => unknown): Promise<RoleRule[]> {
  const mgr = new ControllerManager({ transport: noRequests, logger: silentLogger, registry: new Registry(), healthProbeBindAddress: '0' });
  await setup(mgr);
  const recorded = [...recordedPermissions(mgr)];
  const granted = (group: string, resource: string, verb: string): boolean =>
    recorded.some((c) => c.group === group && c.resource === resource && c.resourceNames.length === 0 && c.verbs.includes(verb));
  // An informer made directly (mgr.informer(type)) rather than by a builder source lists and watches too.
  for (const i of mgr.factory.informers()) {
    const { group, resource, kind } = i.resource;
    if (informerVerbs.every((v) => granted(group, resource, v))) continue;
    recorded.push({ who: 'informers', why: `mgr.informer(${kind})`, scope: 'controller', group, resource, resourceNames: [], verbs: informerVerbs });
  }
  return mergeContributions(recorded);
}

/** The role files `gen rbac` writes and the rules of each. */
function roleFiles(outDir: string, manager: readonly RoleRule[]): { path: string; rules: readonly RoleRule[]; header: string }[] {
  const generated = `# Generated by \`ts-controller-manager gen rbac\` (npm run generate) from what the controllers declare: edit the
# declarations (the builder's sources and .rbac(...)), not the rules; what is above "rules:" is kept.
apiVersion: rbac.authorization.k8s.io/v1
`;
  return [
    { path: `${outDir}/role.yaml`, rules: manager, header: `${generated}kind: ClusterRole\nmetadata:\n  name: manager-role\n` },
    {
      path: `${outDir}/leader_election_role.yaml`, rules: mergeContributions(leaderElectionContributions),
      header: `${generated}kind: Role\nmetadata:\n  name: leader-election-role\n`,
    },
  ];
}

/** A path relative to `cwd` with '/' separators. */
function toPosix(cwd: string, p: string): string {
  const r = relative(cwd, resolve(cwd, p));
  return (r === '' ? '.' : r).split(sep).join('/');
}

/** Loads MODULE's setup function (`name`, else `setup`, else the default export). Throws GenRbacUsageError when it cannot be read or exports none. */
async function loadSetup(module: string, name: string | undefined, cwd: string): Promise<(mgr: ControllerManager) => unknown> {
  const path = resolve(cwd, module);
  if (!existsSync(path)) throw new GenRbacUsageError(`cannot read ${module}: no such file`);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(path).href)) as typeof mod;
  } catch (err) {
    throw new Error(`${module} failed to load: ${(err as Error).message}`, { cause: err });
  }
  const setup = name !== undefined ? mod[name] : typeof mod['setup'] === 'function' ? mod['setup'] : mod['default'];
  if (typeof setup !== 'function') {
    throw new GenRbacUsageError(name !== undefined
      ? `${module} exports no function ${name}`
      : `${module} exports no setup(mgr) function (export the function main.ts calls to declare the controllers, or name it with --setup)`);
  }
  return setup as (mgr: ControllerManager) => unknown;
}

/** Everything `gen rbac` would write for `args`, in memory (the unit tests and --check use this). */
export async function planRbac(args: GenRbacArgs, cwd: string): Promise<GeneratedFile[]> {
  const rules = await declaredRules(await loadSetup(args.module, args.setup, cwd));
  return roleFiles(toPosix(cwd, args.outDir), rules).map(({ path, rules: r, header }) => {
    let text: string;
    try {
      text = readFileSync(resolve(cwd, path), 'utf8');
    } catch {
      text = `${header}rules:\n`;
    }
    return { path, content: replaceRules(text, r, path) };
  });
}

export interface GenRbacIO {
  cwd: string;
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

/** `ts-controller-manager gen rbac …`: resolves the exit code (see the file comment). */
export async function genRbacMain(argv: readonly string[], io: GenRbacIO): Promise<number> {
  let args: GenRbacArgs;
  let files: GeneratedFile[];
  try {
    args = parseGenRbacArgs(argv);
    if (args.help) {
      io.stdout(genRbacUsage);
      return 0;
    }
    files = await planRbac(args, io.cwd);
  } catch (err) {
    io.stderr(`error: ${(err as Error).message}\n`);
    return err instanceof GenRbacUsageError ? 2 : 1;
  }
  const differs = (f: GeneratedFile): boolean => {
    try {
      return readFileSync(resolve(io.cwd, f.path), 'utf8') !== f.content;
    } catch {
      return true;
    }
  };
  if (args.check) {
    const stale = files.filter(differs).map((f) => f.path);
    for (const f of stale) io.stderr(`stale: ${f} (the declarations changed; regenerate: \`npm run generate\`)\n`);
    if (stale.length > 0) return 1;
    io.stdout(`${files.length} RBAC file(s) up to date\n`);
    return 0;
  }
  for (const f of files.filter(differs)) {
    const path = resolve(io.cwd, f.path);
    mkdirSync(resolve(path, '..'), { recursive: true });
    writeFileSync(path, f.content);
    io.stdout(`wrote ${f.path}\n`);
  }
  return 0;
}
