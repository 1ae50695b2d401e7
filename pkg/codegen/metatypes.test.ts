/**
 * One definition of each core meta type (issue 42 item 6): the built-in API types (pkg/api, `ts-controller-manager/api/*`)
 * use the runtime's ObjectMeta, OwnerReference, LabelSelector, LabelSelectorRequirement and Condition
 * (pkg/apimachinery/meta.ts), which the runtime's functions take — the generator re-exports them from meta/v1 instead
 * of declaring a second set — and the runtime's have every field the API server's schema has, so nothing is lost.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import type { Condition, LabelSelector, ObjectMeta, OwnerReference } from '../apimachinery/meta.ts';
import type { Deployment } from '../api/apps/v1/zz_generated.types.ts';
import type { Pod } from '../api/core/v1/zz_generated.types.ts';
import type * as metav1 from '../api/meta/v1/zz_generated.types.ts';
import { generateBuiltinTypes, runtimeMetaTypes, type OpenAPIDocument } from './openapi.ts';

const root = resolve(import.meta.dirname, '../..');

/** True only when A and B are the same type (each assignable to the other). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
// Checked by tsc (make typecheck): a second definition, even an identical copy, would still pass these, so the
// generated file itself is read below; these keep the built-in kinds usable where the runtime's types are taken.
const sameMeta: Same<NonNullable<Deployment['metadata']>, ObjectMeta> = true;
const sameSelector: Same<NonNullable<NonNullable<Deployment['spec']>['selector']>, LabelSelector> = true;
const sameOwner: Same<NonNullable<NonNullable<Pod['metadata']>['ownerReferences']>[number], OwnerReference> = true;
const sameCondition: Same<metav1.Condition, Condition> = true;

/** The members of `name` in a TypeScript source, by the compiler's parse. */
function interfaceMembers(file: string, name: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const decl = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name);
  assert.ok(decl, `${name} in ${file}`);
  return decl.members.map((m) => (m.name && ts.isIdentifier(m.name) ? m.name.text : '?')).sort();
}

describe('one definition of each core meta type', () => {
  it('the generated meta/v1 declares none of them: it re-exports the runtime\'s (pkg/apimachinery/meta.ts)', () => {
    assert.ok(sameMeta && sameSelector && sameOwner && sameCondition);
    const generated = readFileSync(resolve(root, 'pkg/api/meta/v1/zz_generated.types.ts'), 'utf8');
    for (const name of Object.values(runtimeMetaTypes)) {
      assert.doesNotMatch(generated, new RegExp(`^export (interface|type) ${name}\\b`, 'm'), `${name} is declared in meta/v1 again`);
    }
    const names = Object.values(runtimeMetaTypes).sort().join(', ');
    assert.match(generated, new RegExp(`^import type \\{ ${names} \\} from '\\.\\./\\.\\./\\.\\./apimachinery/meta\\.ts';\\nexport type \\{ ${names} \\};$`, 'm'));
  });

  it("the runtime's types have every field of the API server's schema (pkg/api/openapi)", () => {
    const doc = JSON.parse(readFileSync(resolve(root, 'pkg/api/openapi/api__v1_openapi.json'), 'utf8')) as { components: { schemas: Record<string, { properties?: object }> } };
    for (const [schema, name] of Object.entries(runtimeMetaTypes)) {
      const fields = Object.keys(doc.components.schemas[schema]?.properties ?? {}).sort();
      assert.ok(fields.length > 0, schema);
      assert.deepEqual(interfaceMembers(resolve(root, 'pkg/apimachinery/meta.ts'), name).filter((f) => fields.includes(f)), fields, `${name}: the runtime's lacks a field of ${schema}`);
    }
  });

  it('the generator: meta/v1 imports and re-exports them from the runtime; other packages import them from meta/v1 as before', () => {
    const meta = 'io.k8s.apimachinery.pkg.apis.meta.v1';
    const doc: OpenAPIDocument = {
      source: 'test.json',
      schemas: {
        [`${meta}.ObjectMeta`]: { type: 'object', properties: { name: { type: 'string' }, ownerReferences: { type: 'array', items: { $ref: `#/components/schemas/${meta}.OwnerReference` } } } },
        [`${meta}.OwnerReference`]: { type: 'object', properties: { uid: { type: 'string' } } },
        [`${meta}.ListMeta`]: { type: 'object', properties: { continue: { type: 'string' } } },
        'io.k8s.api.apps.v1.Thing': { type: 'object', properties: { metadata: { $ref: `#/components/schemas/${meta}.ObjectMeta` } } },
      },
    };
    const files = generateBuiltinTypes([doc], { outDir: 'out', runtime: { pkgDir: 'pkg' } });
    const metaFile = files.find((f) => f.path === 'out/meta/v1/zz_generated.types.ts')?.content ?? '';
    assert.match(metaFile, /^import type \{ ObjectMeta, OwnerReference \} from '\.\.\/\.\.\/\.\.\/pkg\/apimachinery\/meta\.ts';\nexport type \{ ObjectMeta, OwnerReference \};$/m);
    assert.doesNotMatch(metaFile, /^export interface (ObjectMeta|OwnerReference)\b/m);
    assert.match(metaFile, /^export interface ListMeta \{/m);
    assert.match(files.find((f) => f.path === 'out/apps/v1/zz_generated.types.ts')?.content ?? '', /^import type \{ ObjectMeta \} from '\.\.\/\.\.\/meta\/v1\/zz_generated\.types\.ts';$/m);
    const byModule = generateBuiltinTypes([doc], { outDir: 'out' }).find((f) => f.path === 'out/meta/v1/zz_generated.types.ts')?.content ?? '';
    assert.match(byModule, /^import type \{ ObjectMeta, OwnerReference \} from 'ts-controller-manager';$/m, 'a user\'s project imports them from the package');
  });
});
