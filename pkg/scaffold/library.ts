/**
 * Which ts-controller-manager a project made by `init` depends on when no `--library` is given: the package `init`
 * itself runs from, so a project starts without a registry release.
 *
 *  - A directory that is not an installed copy (a clone of the repository, an unpacked package, `npm link`):
 *    `file:<its absolute path>` — npm links it. It must hold its build (dist/pkg/index.js: the package's entry point
 *    for consumers); without one `init` refuses, saying how to build it.
 *  - An installed copy (under a node_modules directory) whose install recorded a tarball — npm's hidden lockfile
 *    `<install root>/node_modules/.package-lock.json` has `resolved: "file:….tgz"` for it (npx of a tarball, a
 *    project that vendored one) — and that tarball still exists: the tarball, copied into the project's vendor/.
 *  - Otherwise (an installed copy from a registry, or nothing recorded): its version, from the npm registry.
 *
 * Only the file system is read.
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve, sep } from 'node:path';

/** Where the dependency comes from; see the file comment. */
export type LibrarySource =
  | { kind: 'directory'; path: string; built: boolean }
  | { kind: 'tarball'; path: string }
  | { kind: 'registry'; version: string };

/** The source of the package whose root is `root` (the directory of its package.json), at `version`. */
export function librarySource(root: string, version: string): LibrarySource {
  const real = realpathSync(root);
  const parts = real.split(sep);
  const nm = parts.lastIndexOf('node_modules');
  if (nm < 0) return { kind: 'directory', path: real, built: existsSync(join(real, 'dist', 'pkg', 'index.js')) };
  // The install root holds node_modules/; the lockfile names packages by their path from it (scoped or not).
  const installRoot = parts.slice(0, nm).join(sep) || sep;
  const key = parts.slice(nm).join('/');
  let resolved: unknown;
  try {
    const lock = JSON.parse(readFileSync(join(installRoot, 'node_modules', '.package-lock.json'), 'utf8')) as { packages?: Record<string, { resolved?: unknown }> };
    resolved = lock.packages?.[key]?.resolved;
  } catch {
    resolved = undefined;
  }
  if (typeof resolved === 'string' && /\.tgz$/.test(resolved) && !/^[a-z+]+:\/\//.test(resolved)) {
    const path = resolved.replace(/^file:/, '');
    const tarball = isAbsolute(path) ? path : resolve(installRoot, path);
    if (existsSync(tarball) && statSync(tarball).isFile()) return { kind: 'tarball', path: tarball };
  }
  return { kind: 'registry', version };
}
