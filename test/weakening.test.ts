/**
 * Test-weakening switches (test/helpers/weakening.ts) cannot weaken a CI run and are announced otherwise (issue 31):
 * the real test files are loaded by a child `node --test` with each switch set, with and without CI. No cluster: with
 * CI set the file fails at load, before any test needs one; without CI only the image test's skip is run (it skips).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { inCI, weakeningSwitch } from './helpers/weakening.ts';

const repo = join(import.meta.dirname, '..');

/** Runs `node --test file` with `env` added (and the parent's test-runner variables removed). */
function runFile(file: string, env: Record<string, string>): { code: number | null; out: string } {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('NODE_TEST') && k !== 'CI'));
  const res = spawnSync(process.execPath, ['--test', '--test-reporter=spec', file], {
    cwd: repo, env: { ...base, ...env }, encoding: 'utf8', timeout: 120_000,
  });
  return { code: res.status, out: `${res.stdout}${res.stderr}` };
}

describe('test-weakening switches', () => {
  test('inCI: set and not "", "0" or "false"', () => {
    assert.deepEqual(['true', '1', 'yes', '', '0', 'false', 'FALSE'].map((v) => inCI({ CI: v })), [true, true, true, false, false, false, false]);
    assert.equal(inCI({}), false);
  });

  test('weakeningSwitch: refused under CI with the switch named, announced without, ignored when it does not weaken', () => {
    const lines: string[] = [];
    const write = (l: string): void => void lines.push(l);
    assert.throws(() => weakeningSwitch('X_FOOS', 'scales X down', { env: { CI: 'true', X_FOOS: '10' }, write }), /X_FOOS=10 scales X down; refused because CI=true is set/);
    assert.equal(weakeningSwitch('X_FOOS', 'scales X down', { env: { X_FOOS: '10' }, write }), '10');
    assert.deepEqual(lines, ['[weakened] X_FOOS=10: scales X down\n']);
    assert.equal(weakeningSwitch('X_FOOS', 'scales X down', { env: { CI: 'true', X_FOOS: '5000' }, write, weakens: (v) => Number(v) < 3000 }), undefined);
    assert.equal(weakeningSwitch('X_FOOS', 'scales X down', { env: { CI: 'true' }, write }), undefined);
  });

  for (const [file, name, value] of [
    ['test/image.test.ts', 'TSCM_SKIP_IMAGE_TEST', '1'],
    ['test/sharding.test.ts', 'TSCM_SHARDING_FOOS', '300'],
    ['test/sharding.test.ts', 'TSCM_SHARDING_NETWORKS', '30'],
    ['test/node-sizing.e2e.ts', 'SIZING_OBJECTS', '2001'],
  ] as const) {
    test(`${name}=${value} with CI set: ${file} fails, naming the switch`, () => {
      const r = runFile(file, { CI: 'true', [name]: value });
      assert.notEqual(r.code, 0, r.out);
      assert.match(r.out, new RegExp(`${name}=${value} .*refused because CI=true is set`));
    });
  }

  test('TSCM_SKIP_IMAGE_TEST=1 without CI: the run says it skipped, and why', () => {
    const r = runFile('test/image.test.ts', { TSCM_SKIP_IMAGE_TEST: '1' });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /\[weakened\] TSCM_SKIP_IMAGE_TEST=1: skips the container image test/);
    assert.match(r.out, /container image .*# weakened: TSCM_SKIP_IMAGE_TEST=1 skips the container image test/, 'the skip reason');
  });
});
