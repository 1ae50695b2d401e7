/**
 * Bundles the compiled manager (dist/cmd/manager/main.js, from `tsc -p tsconfig.build.json`) into dist/bundle/ with
 * esbuild: a handful of ES module files instead of ~150 project modules and the dependencies' ~100, which the image
 * runs (Dockerfile ENTRYPOINT). Start-up is module resolution, loading and compilation first of all (bench/README.md,
 * "Fixed cost"): the bundle cuts the manager's CPU to ready and its idle heap (measured A/B there).
 *
 *   node hack/bundle.ts            (after tsc; `npm run build` and `make build` run both)
 *
 * What stays outside the bundle, loaded from node_modules at run time as before:
 *  - `@kubernetes/client-node` and `undici`: imported lazily, only for legacy auth providers / the Neutron client;
 *  - `js-yaml`: loaded by `createRequire` on the first kubeconfig or clouds.yaml parsed (not at start in a Pod).
 * Dynamic imports (cli.ts → kubeconfig.ts, run.ts; main.ts → codegen) become chunks, loaded when they were before.
 * CommonJS dependencies (pino, prom-client) call `require` for Node built-ins: the banner gives the ES module a real
 * `require`. `keepNames` keeps class and function names as written (esbuild renames clashing top-level names
 * otherwise; pino logs an error's constructor name as its `type`). package.json is still found two directories up
 * (pkg/runtime/manager.ts packageVersion()). The npm package leaves dist/bundle/ out (package.json `files`): library
 * users import dist/pkg, and its bin is the unbundled dist/cmd/manager/main.js.
 */
import { build, type Plugin } from 'esbuild';
import { rmSync } from 'node:fs';
import { join, relative } from 'node:path';

const repo = join(import.meta.dirname, '..');
const outdir = join(repo, process.argv[2] ?? 'dist/bundle');

/**
 * pkg/testing (loaded only by the `dev` command) finds its reaper script next to itself (`import.meta.url`): bundled,
 * that file would be looked for in dist/bundle/. Its imports therefore stay external and point at the unbundled
 * dist/pkg/testing/, which ships beside the bundle (the image copies all of dist/).
 */
const unbundledTesting: Plugin = {
  name: 'unbundled-testing',
  setup(b) {
    b.onResolve({ filter: /\/pkg\/testing\/[^/]+\.js$/ }, (a) => {
      const path = relative(outdir, join(a.resolveDir, a.path));
      return { path: path.startsWith('.') ? path : `./${path}`, external: true };
    });
  },
};
rmSync(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: repo,
  entryPoints: ['dist/cmd/manager/main.js'],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  keepNames: true,
  entryNames: '[name]',
  chunkNames: '[name]-[hash]',
  external: ['@kubernetes/client-node', 'undici', 'js-yaml'],
  plugins: [unbundledTesting],
  banner: { js: "import { createRequire as __tscmCreateRequire } from 'node:module'; const require = __tscmCreateRequire(import.meta.url);" },
  logLevel: 'warning',
  metafile: true,
});
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
// stderr: `npm pack --json` (prepack runs the build) must print only its JSON on stdout.
process.stderr.write(`bundle: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB in ${outdir}\n`);
