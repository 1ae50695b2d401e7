/**
 * The checked-in generated types equal what `npm run generate` would write now: changing a CRD under
 * config/crd/bases without regenerating fails this test (and so `make test`). The generator is run in memory with
 * exactly the arguments of package.json's "generate" script.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
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

describe('generated API types are up to date with config/crd/bases', () => {
  const files = planTypes(parseGenTypesArgs(generateScriptArgs()), root);

  it('covers Foo and Network', () => {
    assert.deepEqual(files.map((f) => f.path), [
      'pkg/apis/samplecontroller/v1alpha1/zz_generated.types.ts',
      'pkg/apis/samplecrd/v1/zz_generated.types.ts',
    ]);
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
