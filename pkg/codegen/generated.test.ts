/**
 * The checked-in generated types equal what `npm run generate` would write now: changing a CRD under
 * config/crd/bases or config/crd/v2, or an OpenAPI document under pkg/api/openapi (`npm run refresh-openapi`), without
 * regenerating fails this test (and so `make test`). The generator is run in memory with exactly the arguments of each
 * `gen types` command of package.json's "generate" script — no cluster involved.
 *
 * Network's types come from config/crd/v2 (v1 and v2), while config/crd/bases still holds the single-version v1 CRD
 * (docs/network-v2.md): the v1 version in both files must be the same, or the v1 types would describe a schema nobody
 * installs.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import ts from 'typescript';
import { parseGenTypesArgs, planTypes, staleFiles } from './cli.ts';
import type { GeneratedFile } from './types.ts';

const root = resolve(import.meta.dirname, '../..');

/** The arguments after `gen types` of each command in package.json's "generate" script. */
function generateScriptArgs(): string[][] {
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  const script = pkg.scripts?.['generate'] ?? '';
  // (its `gen rbac` command is pkg/rbac/generated.test.ts's)
  const commands = script.split('&&').filter((c) => !/\bgen rbac /.test(c)).map((c) => /\bgen types (.*)$/.exec(c.trim())?.[1]);
  assert.ok(commands.length > 0 && commands.every((c) => c), `package.json "generate" runs "gen types …" and "gen rbac …" commands only (got ${JSON.stringify(script)})`);
  return commands.map((c) => (c ?? '').split(/\s+/));
}

function assertFresh(f: GeneratedFile): void {
  if (staleFiles([f], root).length === 0) return;
  let onDisk = '(missing)';
  try {
    onDisk = readFileSync(resolve(root, f.path), 'utf8');
  } catch { /* reported as missing */ }
  assert.equal(onDisk, f.content, `${f.path} is stale: run \`npm run generate\``);
}

const files = generateScriptArgs().flatMap((args) => planTypes(parseGenTypesArgs(args), root));

describe('generated API types are up to date with config/crd/bases and config/crd/v2', () => {
  const crdFiles = files.filter((f) => f.path.startsWith('pkg/apis/'));

  it('covers Foo and Network v1 and v2', () => {
    assert.deepEqual(crdFiles.map((f) => f.path), [
      'pkg/apis/samplecontroller/v1alpha1/zz_generated.types.ts',
      'pkg/apis/samplecrd/v1/zz_generated.types.ts',
      'pkg/apis/samplecrd/v2/zz_generated.types.ts',
    ]);
  });

  it('Network v1 in config/crd/v2 is the v1 of config/crd/bases (apart from storage), and v2 is the one storage version', () => {
    type CRD = { spec: { names: unknown; scope: string; versions: ({ name: string; storage: boolean } & Record<string, unknown>)[] } };
    const read = (p: string): CRD => load(readFileSync(resolve(root, p), 'utf8')) as CRD;
    const bases = read('config/crd/bases/samplecrd.k8s.io_networks.yaml');
    const two = read('config/crd/v2/samplecrd.k8s.io_networks.yaml');
    assert.deepEqual(two.spec.names, bases.spec.names);
    assert.equal(two.spec.scope, bases.spec.scope);
    assert.deepEqual(two.spec.versions.map((v) => [v.name, v.storage]), [['v1', false], ['v2', true]]);
    const strip = (v: Record<string, unknown>): Record<string, unknown> => ({ ...v, storage: null });
    assert.deepEqual(strip(two.spec.versions[0]!), strip(bases.spec.versions[0]!));
  });

  for (const f of crdFiles) it(`${f.path} equals a fresh generation (run \`npm run generate\` after changing a CRD)`, () => assertFresh(f));
});

describe('built-in API types are up to date with the OpenAPI documents in pkg/api/openapi', () => {
  const builtin = files.filter((f) => f.path.startsWith('pkg/api/'));

  it('one file per Go API package the documents define, and no other file under pkg/api', () => {
    assert.deepEqual(builtin.map((f) => f.path.split('/').slice(2, 4).join('/')), [
      'admissionregistration/v1', 'apiextensions/v1', 'apps/v1', 'authentication/v1', 'autoscaling/v1', 'autoscaling/v2',
      'batch/v1', 'coordination/v1', 'core/v1', 'events/v1', 'meta/v1', 'networking/v1', 'policy/v1', 'rbac/v1',
    ]);
    const onDisk = readdirSync(resolve(root, 'pkg/api'), { recursive: true, encoding: 'utf8' })
      .filter((p) => p.endsWith('.ts')).map((p) => `pkg/api/${p}`).sort();
    assert.deepEqual(onDisk, builtin.map((f) => f.path), 'a leftover generated file (a package no document defines any more)');
  });

  for (const f of builtin) it(`${f.path} equals a fresh generation (run \`npm run generate\` after \`npm run refresh-openapi\`)`, () => assertFresh(f));

  it('the files are type-only: they compile to an empty module', () => {
    for (const f of builtin) {
      const js = ts.transpileModule(f.content, { compilerOptions: { module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true } }).outputText;
      assert.equal(js.replace(/\/\/.*\n|\/\*[\s\S]*?\*\//g, '').trim(), 'export {};', `${f.path} has runtime code`);
    }
  });
});
