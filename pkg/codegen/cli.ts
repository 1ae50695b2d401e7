/**
 * `ts-controller-manager gen types [--out DIR] [--runtime MODULE|PATH] [--check] CRD.yaml|DIR…` — the thin command
 * around crd.ts + types.ts: read the CRD files (a directory means its *.yaml/*.yml files), generate, then write the
 * files, or with `--check` compare them with what is on disk and fail naming the stale ones.
 *
 * Exit codes: 0 done (or up to date), 1 a CRD could not be turned into types or `--check` found stale files,
 * 2 bad invocation (unknown flag, no input, unreadable path) — one line on stderr.
 */
import { readdirSync, readFileSync, statSync, mkdirSync, writeFileSync } from 'node:fs';
import { posix, relative, resolve, sep } from 'node:path';
import { parseCRDs, type CRDVersion } from './crd.ts';
import { generateBuiltinTypes, isOpenAPIDocument, parseOpenAPI, type OpenAPIDocument } from './openapi.ts';
import { defaultRuntime, generateTypes, type GeneratedFile } from './types.ts';

export const defaultOutDir = 'pkg/apis';

export class GenUsageError extends Error {}

export interface GenTypesArgs {
  help: boolean;
  outDir: string;
  runtime: string;
  check: boolean;
  inputs: string[];
}

export const genUsage = `Usage: ts-controller-manager gen types [flags] CRD.yaml|DIR...
       ts-controller-manager gen rbac [flags] MODULE   (--help: the RBAC generator; docs/library.md#rbac)
       ts-controller-manager gen types … + rbac …      (both in turn; --check in either checks both)

Writes TypeScript types from the openAPIV3Schema of every version of the given CustomResourceDefinitions
(apiextensions.k8s.io/v1; a directory means its *.yaml and *.yml files) into
DIR/<first label of the group>/<version>/zz_generated.types.ts. OpenAPI v3 documents of the API server (*.json;
in a directory *_openapi.json) give the built-in types, one type-only file per Go API package
(DIR/core/v1/..., DIR/apps/v1/..., DIR/meta/v1/...). See docs/codegen.md.

Flags:
  --out=DIR          Output root (default "${defaultOutDir}").
  --runtime=SPEC     Where KubeObject and ResourceType are imported from: a package name (default "${defaultRuntime}"),
                     or a path starting with "." or "/" to this project's pkg/ directory (relative imports).
  --check            Write nothing; exit 1 naming every generated file that is missing or differs.
  -h, --help         This text.
`;

/** Parses the arguments after `gen types`. Throws GenUsageError (one line) on a bad invocation. */
export function parseGenTypesArgs(argv: readonly string[]): GenTypesArgs {
  const args: GenTypesArgs = { help: false, outDir: defaultOutDir, runtime: defaultRuntime, check: false, inputs: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-h' || a === '--help') return { ...args, help: true };
    if (a === '--check' || a === '--check=true') {
      args.check = true;
      continue;
    }
    if (a === '--check=false') {
      args.check = false;
      continue;
    }
    const m = /^--(out|runtime)(?:=(.*))?$/.exec(a);
    if (m) {
      const value = m[2] ?? argv[++i];
      if (value === undefined || value.trim() === '') throw new GenUsageError(`flag --${m[1]} needs a non-empty value`);
      if (m[1] === 'out') args.outDir = value;
      else args.runtime = value;
      continue;
    }
    if (a.startsWith('-')) throw new GenUsageError(`unknown flag ${JSON.stringify(a)}`);
    args.inputs.push(a);
  }
  if (args.inputs.length === 0) throw new GenUsageError('no CRD file or directory given');
  return args;
}

/** A path relative to `cwd` with '/' separators (how sources and output paths are recorded). */
function toPosix(cwd: string, p: string): string {
  const r = relative(cwd, resolve(cwd, p));
  return (r === '' ? '.' : r).split(sep).join('/');
}

/**
 * The input files named by `inputs` (directories expanded to their sorted *.yaml, *.yml and *_openapi.json), posix
 * and relative to `cwd`.
 */
export function inputFiles(inputs: readonly string[], cwd: string): string[] {
  const files: string[] = [];
  for (const input of inputs) {
    let isDir: boolean;
    try {
      isDir = statSync(resolve(cwd, input)).isDirectory();
    } catch (err) {
      throw new GenUsageError(`cannot read ${input}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (!isDir) files.push(toPosix(cwd, input));
    else {
      const names = readdirSync(resolve(cwd, input)).filter((n) => /\.ya?ml$|_openapi\.json$/.test(n)).sort();
      files.push(...names.map((n) => toPosix(cwd, posix.join(input, n))));
    }
  }
  return [...new Set(files)];
}

/** Everything `gen types` would write for `args`, in memory (the CI check and the unit test use this). */
export function planTypes(args: GenTypesArgs, cwd: string): GeneratedFile[] {
  const versions: CRDVersion[] = [];
  const documents: OpenAPIDocument[] = [];
  for (const file of inputFiles(args.inputs, cwd)) {
    const text = readFileSync(resolve(cwd, file), 'utf8');
    if (file.endsWith('.json') && isOpenAPIDocument(parseJSON(text))) documents.push(parseOpenAPI(text, file));
    else versions.push(...parseCRDs(text, file));
  }
  const runtime = args.runtime.startsWith('.') || args.runtime.startsWith('/') ? { pkgDir: toPosix(cwd, args.runtime) } : { module: args.runtime };
  const outDir = toPosix(cwd, args.outDir);
  return [
    ...(versions.length > 0 ? generateTypes(versions, { outDir, runtime }) : []),
    ...(documents.length > 0 ? generateBuiltinTypes(documents, { outDir, runtime }) : []),
  ];
}

function parseJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The generated files whose content on disk (under `cwd`) is missing or different. */
export function staleFiles(files: readonly GeneratedFile[], cwd: string): string[] {
  return files.filter((f) => {
    try {
      return readFileSync(resolve(cwd, f.path), 'utf8') !== f.content;
    } catch {
      return true;
    }
  }).map((f) => f.path);
}

export interface GenIO {
  cwd: string;
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

const processIO: GenIO = {
  cwd: process.cwd(),
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
};

/**
 * `ts-controller-manager gen <command> … [+ <command> …]`: resolves the exit code. `types` is here; `rbac` is
 * rbac.ts (imported only then). Several commands joined by a `+` argument run in turn, and `--check` in
 * any of them checks them all — so one npm script (`generate`) regenerates types and RBAC, and
 * `npm run generate -- --check` checks both; the exit code is the worst of theirs.
 */
export function genMain(argv: readonly string[], io: GenIO = processIO): number | Promise<number> {
  if (argv.includes('+')) return genAll(argv, io);
  const [command, ...rest] = argv;
  if (command === 'rbac') return import('./rbac.ts').then(({ genRbacMain }) => genRbacMain(rest, io));
  if (command !== 'types') {
    io.stderr(`error: ${command === undefined ? 'gen needs a command' : `unknown gen command ${JSON.stringify(command)}`} (known: types, rbac)\n${genUsage}`);
    return 2;
  }
  let args: GenTypesArgs;
  let files: GeneratedFile[];
  try {
    args = parseGenTypesArgs(rest);
    if (args.help) {
      io.stdout(genUsage);
      return 0;
    }
    files = planTypes(args, io.cwd);
  } catch (err) {
    io.stderr(`error: ${(err as Error).message}\n`);
    return err instanceof GenUsageError ? 2 : 1;
  }
  if (args.check) {
    const stale = staleFiles(files, io.cwd);
    for (const f of stale) io.stderr(`stale: ${f} (regenerate: ts-controller-manager gen types …, here \`npm run generate\`)\n`);
    if (stale.length > 0) return 1;
    io.stdout(`${files.length} generated file(s) up to date\n`);
    return 0;
  }
  for (const f of files) {
    const path = resolve(io.cwd, f.path);
    mkdirSync(resolve(path, '..'), { recursive: true });
    writeFileSync(path, f.content);
    io.stdout(`wrote ${f.path}\n`);
  }
  return 0;
}

/** The commands of `argv` joined by `+`, each run in turn (all of them checked when one says --check). */
async function genAll(argv: readonly string[], io: GenIO): Promise<number> {
  const commands: string[][] = [[]];
  for (const a of argv) {
    if (a === '+') commands.push([]);
    else commands.at(-1)?.push(a);
  }
  const check = argv.includes('--check') || argv.includes('--check=true');
  let worst = 0;
  for (const c of commands) worst = Math.max(worst, await genMain(check && !c.includes('--check') ? [...c, '--check'] : c, io));
  return worst;
}
