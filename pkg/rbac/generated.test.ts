/**
 * config/rbac is what `gen rbac` derives from the binary's controllers (cmd/manager/setup.ts), with exactly the
 * arguments of package.json's "generate" script: a controller that declares a new call (`.rbac(...)`, a source)
 * without `npm run generate` fails this test, and so does a hand edit of the generated rules. What the generator
 * replaced — the hand-written role.yaml of before — granted the same rules (the finding is in the report of issue 42:
 * none differ); test/deploy.test.ts proves each of their verbs needed. The examples' rbac/ likewise (their own tests
 * run them as that ServiceAccount; test/example.test.ts checks the same with the packed bin).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { parseGenRbacArgs, planRbac } from '../codegen/rbac.ts';

const root = resolve(import.meta.dirname, '../..');

/** The arguments after `gen rbac` in package.json's "generate" script. */
function generateScriptArgs(): string[] {
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  const m = /\bgen rbac ([^&]*)/.exec(pkg.scripts?.['generate'] ?? '');
  assert.ok(m?.[1], 'package.json "generate" runs gen rbac');
  return m[1].trim().split(/\s+/);
}

describe('config/rbac is generated from what the controllers declare', () => {
  it('role.yaml and leader_election_role.yaml are what `npm run generate` writes', async () => {
    const files = await planRbac(parseGenRbacArgs(generateScriptArgs()), root);
    assert.deepEqual(files.map((f) => f.path), ['config/rbac/role.yaml', 'config/rbac/leader_election_role.yaml']);
    for (const f of files) assert.equal(readFileSync(resolve(root, f.path), 'utf8'), f.content, `${f.path} is stale: run \`npm run generate\``);
  });

  it('the manager role grants exactly the rules config/rbac granted when it was written by hand', async () => {
    const [role] = await planRbac(parseGenRbacArgs(generateScriptArgs()), root);
    const rules = (load(role?.content ?? '') as { rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] }).rules;
    const granted = rules.flatMap((r) => r.verbs.map((v) => `${r.apiGroups.join()}/${r.resources.join()}:${v}`)).sort();
    assert.deepEqual(granted, [
      '/events:create', '/events:patch',
      'apps/deployments:create', 'apps/deployments:list', 'apps/deployments:patch', 'apps/deployments:watch',
      'samplecontroller.k8s.io/foos/finalizers:update', 'samplecontroller.k8s.io/foos/status:patch',
      'samplecontroller.k8s.io/foos:list', 'samplecontroller.k8s.io/foos:watch',
      'samplecrd.k8s.io/networks/status:patch',
      // get: since the Network controller confirms that a Network which left its cache with our finalizer is gone
      // (kubernetes#77988; test/network-finalizer-race.test.ts) — the one grant added since.
      'samplecrd.k8s.io/networks:get', 'samplecrd.k8s.io/networks:list', 'samplecrd.k8s.io/networks:patch', 'samplecrd.k8s.io/networks:watch',
    ]);
  });
});

describe('the examples\' rbac/ is generated from what they declare', () => {
  // They import the package by its name: resolve it to this repository's sources, as test/explore-shipped.test.ts does.
  registerHooks({ resolve: (specifier, context, next) => next(specifier, { ...context, conditions: [...context.conditions, 'ts-controller-manager-source'] }) });
  for (const [example, setup] of [['configmap-copier', 'setupCopier'], ['memcached', 'setupMemcached']] as const) {
    it(`examples/${example}/rbac (gen rbac --out rbac --setup ${setup} main.ts)`, async () => {
      const dir = resolve(root, 'examples', example);
      for (const f of await planRbac(parseGenRbacArgs(['--out', 'rbac', '--setup', setup, 'main.ts']), dir)) {
        assert.equal(readFileSync(resolve(dir, f.path), 'utf8'), f.content, `examples/${example}/${f.path} is stale: run the command of its main.ts`);
      }
    });
  }
});
