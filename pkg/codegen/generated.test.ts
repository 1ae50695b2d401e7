/**
 * The checked-in generated types equal what `npm run generate` would write now: changing a CRD under
 * config/crd/bases or config/crd/v2 without regenerating fails this test (and so `make test`). The generator is run in
 * memory with exactly the arguments of package.json's "generate" script.
 *
 * Network's types come from config/crd/v2 (v1 and v2), while config/crd/bases still installs the single-version v1 CRD
 * (no conversion webhook needed; docs/network-v2.md): the v1 version in both files must be the same, or the v1 types
 * would describe a schema nobody installs.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { parseGenTypesArgs, planTypes, staleFiles } from './cli.ts';

const root = resolve(import.meta.dirname, '../..');

/** The arguments after `gen types` in package.json's "generate" script. */
function generateScriptArgs(): string[] {
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  const script = pkg.scripts?.['generate'] ?? '';
  const m = /\bgen types (.*)$/.exec(script);
  assert.ok(m?.[1], `package.json "generate" runs "gen types …" (got ${JSON.stringify(script)})`);
  return m[1].split(/\s+/);
}

describe('generated API types are up to date with config/crd/bases and config/crd/v2', () => {
  const files = planTypes(parseGenTypesArgs(generateScriptArgs()), root);

  it('covers Foo and Network v1 and v2', () => {
    assert.deepEqual(files.map((f) => f.path), [
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

  for (const f of files) {
    it(`${f.path} equals a fresh generation (run \`npm run generate\` after changing a CRD)`, () => {
      if (staleFiles([f], root).length === 0) return;
      let onDisk = '(missing)';
      try {
        onDisk = readFileSync(resolve(root, f.path), 'utf8');
      } catch { /* reported as missing */ }
      assert.equal(onDisk, f.content, `${f.path} is stale: run \`npm run generate\``);
    });
  }
});
