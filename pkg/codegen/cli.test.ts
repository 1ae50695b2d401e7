/** `ts-controller-manager gen types`: flags, writing, --check, exit codes — and the dispatch in cmd/manager/main.ts. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { crdManifest } from '../../test/helpers/crdmanifest.ts';
import { genMain, GenUsageError, parseGenTypesArgs, type GenIO } from './cli.ts';

const crd = (description: string): string => crdManifest({
  kind: 'Thing', plural: 'things', properties: [`spec: {type: object, properties: {size: {type: integer, description: ${description}}}}`],
});

function project(): { dir: string; io: GenIO; out: string[]; err: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'codegen-cli-'));
  mkdirSync(join(dir, 'crds'));
  writeFileSync(join(dir, 'crds', 'things.yaml'), crd('How many.'));
  writeFileSync(join(dir, 'crds', 'README.md'), 'not a CRD, not read');
  const out: string[] = [];
  const err: string[] = [];
  return { dir, out, err, io: { cwd: dir, stdout: (s) => out.push(s), stderr: (s) => err.push(s) } };
}

describe('gen types CLI', () => {
  it('parses --out/--runtime in both forms, --check, and the inputs', () => {
    assert.deepEqual(parseGenTypesArgs(['--out=api', '--runtime', 'my-lib', '--check', 'a.yaml', 'dir']), {
      help: false, outDir: 'api', runtime: 'my-lib', check: true, inputs: ['a.yaml', 'dir'],
    });
    assert.deepEqual(parseGenTypesArgs(['x.yaml']), { help: false, outDir: 'pkg/apis', runtime: 'ts-controller-manager', check: false, inputs: ['x.yaml'] });
    assert.equal(parseGenTypesArgs(['-h']).help, true);
    assert.equal(parseGenTypesArgs(['--check', '--check=false', 'a.yaml']).check, false);
  });

  for (const [argv, message] of [
    [[], /^no CRD file or directory given$/],
    [['--out'], /^flag --out needs a non-empty value$/],
    [['--runtime=', 'a.yaml'], /^flag --runtime needs a non-empty value$/],
    [['--verbose', 'a.yaml'], /^unknown flag "--verbose"$/],
  ] as const) {
    it(`usage error: ${JSON.stringify(argv)}`, () => {
      assert.throws(() => parseGenTypesArgs(argv), (e: unknown) => e instanceof GenUsageError && message.test(e.message));
    });
  }

  it('writes <out>/<group>/<version>/zz_generated.types.ts from a directory of CRDs; --check passes, then names a stale file', () => {
    const p = project();
    assert.equal(genMain(['types', '--out', 'api', 'crds'], p.io), 0);
    const file = join(p.dir, 'api/example/v1/zz_generated.types.ts');
    assert.match(readFileSync(file, 'utf8'), /\/\/ Source: crds\/things\.yaml\n[\s\S]*\/\*\* How many\. \*\/\n {2}size\?: number;/);
    assert.deepEqual(p.out, ['wrote api/example/v1/zz_generated.types.ts\n']);

    assert.equal(genMain(['types', '--check', '--out', 'api', 'crds/things.yaml'], p.io), 0, 'up to date');
    writeFileSync(join(p.dir, 'crds', 'things.yaml'), crd('How many things.'));
    assert.equal(genMain(['types', '--check', '--out', 'api', 'crds'], p.io), 1, 'a CRD changed without regenerating');
    assert.match(p.err.join(''), /^stale: api\/example\/v1\/zz_generated\.types\.ts /m);
    assert.match(readFileSync(file, 'utf8'), /How many\. \*\//, '--check wrote nothing');
  });

  it('exit 2 with one line for a bad invocation or a missing input, 1 for a file that is not a CRD, 2 for an unknown command', () => {
    const p = project();
    assert.equal(genMain(['types', 'nope.yaml'], p.io), 2);
    assert.equal(genMain(['types', 'crds/README.md'], p.io), 1);
    assert.equal(genMain(['types', '--frobnicate', 'crds'], p.io), 2);
    assert.deepEqual(p.err, [
      'error: cannot read nope.yaml: ENOENT\n',
      'error: crds/README.md: no apiextensions.k8s.io/v1 CustomResourceDefinition found\n',
      'error: unknown flag "--frobnicate"\n',
    ]);
    assert.equal(genMain(['schemas'], p.io), 2);
    assert.match(p.err.at(-1) ?? '', /^error: unknown gen command "schemas" \(known: types, rbac\)\n/);
  });

  it('the binary dispatches `gen` before parsing manager flags', () => {
    const main = resolve(import.meta.dirname, '../../cmd/manager/main.ts');
    const r = spawnSync(process.execPath, [main, 'gen', 'types', '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^Usage: ts-controller-manager gen types \[flags\] CRD\.yaml\|DIR\.\.\./);
  });
});
