/**
 * The built-in type generator (openapi.ts) on OpenAPI v3 documents written for the purpose: the wire-format mapping,
 * $ref resolution across packages, name clashes, deterministic output, the merge rules — and the output compiled by
 * the TypeScript compiler (strict) with code that must and must not typecheck against it. The real documents are
 * checked in generated.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { generateBuiltinTypes, packageOf, parseOpenAPI, type OpenAPIDocument, type OpenAPISchema } from './openapi.ts';

const ref = (name: string): OpenAPISchema => ({ $ref: `#/components/schemas/${name}` });
const meta = 'io.k8s.apimachinery.pkg.apis.meta.v1';
const core = 'io.k8s.api.core.v1';
const apps = 'io.k8s.api.apps.v1';

const metaSchemas: Record<string, OpenAPISchema> = {
  [`${meta}.Time`]: { type: 'string', format: 'date-time', description: 'Time.' },
  [`${meta}.ObjectMeta`]: {
    type: 'object',
    properties: {
      name: { type: 'string' },
      creationTimestamp: { description: 'When.', default: {}, allOf: [ref(`${meta}.Time`)] },
      labels: { type: 'object', additionalProperties: { type: 'string', default: '' } },
    },
  },
  [`${meta}.Status`]: { type: 'object', properties: { message: { type: 'string' } } },
  [`${meta}.ManagedFieldsEntry`]: { type: 'object', properties: { time: { description: 'When.', default: {}, allOf: [ref(`${meta}.Time`)] } } },
  [`${meta}.DeleteOptions`]: {
    type: 'object', properties: { dryRun: { type: 'array', items: { type: 'string', default: '' } } },
    'x-kubernetes-group-version-kind': [{ group: '', version: 'v1', kind: 'DeleteOptions' }],
  },
};

const coreDoc: OpenAPIDocument = {
  source: 'api__v1_openapi.json',
  schemas: {
    ...metaSchemas,
    'io.k8s.apimachinery.pkg.util.intstr.IntOrString': { format: 'int-or-string', oneOf: [{ type: 'integer' }, { type: 'string' }] },
    'io.k8s.apimachinery.pkg.api.resource.Quantity': { oneOf: [{ type: 'string' }, { type: 'number' }] },
    'io.k8s.apimachinery.pkg.runtime.RawExtension': { type: 'object', description: 'Raw.' },
    [`${core}.Status`]: { type: 'object', properties: { phase: { type: 'string', enum: ['Running', 'Pending'] } } },
    [`${core}.Pod`]: {
      type: 'object', description: 'A Pod.', required: ['spec'],
      properties: {
        apiVersion: { type: 'string' }, kind: { type: 'string' },
        metadata: { default: {}, allOf: [ref(`${meta}.ObjectMeta`)] },
        spec: { default: {}, allOf: [ref(`${core}.PodSpec`)] },
        status: { allOf: [ref(`${core}.Status`)] },
        failure: { allOf: [ref(`${meta}.Status`)] },
      },
      'x-kubernetes-group-version-kind': [{ group: '', version: 'v1', kind: 'Pod' }],
    },
    [`${core}.PodSpec`]: {
      type: 'object', required: ['containers'],
      properties: {
        containers: { type: 'array', items: { default: {}, allOf: [ref(`${core}.Container`)] } },
        limits: { type: 'object', additionalProperties: ref('io.k8s.apimachinery.pkg.api.resource.Quantity') },
        port: { allOf: [ref('io.k8s.apimachinery.pkg.util.intstr.IntOrString')] },
        raw: { allOf: [ref('io.k8s.apimachinery.pkg.runtime.RawExtension')] },
        anything: { description: 'No type at all.' },
        priority: { type: 'integer', format: 'int32', default: 7 },
      },
    },
    [`${core}.Container`]: { type: 'object', required: ['name'], properties: { name: { type: 'string', default: '' }, image: { type: 'string' } } },
  },
};

const appsDoc: OpenAPIDocument = {
  source: 'apis__apps__v1_openapi.json',
  schemas: {
    ...metaSchemas,
    // The same schema, listing other group/version/kinds (as DeleteOptions does in every document): not a conflict.
    [`${meta}.DeleteOptions`]: { ...metaSchemas[`${meta}.DeleteOptions`], 'x-kubernetes-group-version-kind': [{ group: 'apps', version: 'v1', kind: 'DeleteOptions' }] },
    [`${core}.PodTemplateSpec`]: { type: 'object', properties: { spec: { allOf: [ref(`${core}.PodSpec`)] } } },
    [`${core}.PodSpec`]: coreDoc.schemas[`${core}.PodSpec`] ?? {},
    [`${core}.Container`]: coreDoc.schemas[`${core}.Container`] ?? {},
    'io.k8s.apimachinery.pkg.api.resource.Quantity': coreDoc.schemas['io.k8s.apimachinery.pkg.api.resource.Quantity'] ?? {},
    'io.k8s.apimachinery.pkg.util.intstr.IntOrString': coreDoc.schemas['io.k8s.apimachinery.pkg.util.intstr.IntOrString'] ?? {},
    'io.k8s.apimachinery.pkg.runtime.RawExtension': coreDoc.schemas['io.k8s.apimachinery.pkg.runtime.RawExtension'] ?? {},
    [`${apps}.Deployment`]: {
      type: 'object',
      properties: {
        metadata: { allOf: [ref(`${meta}.ObjectMeta`)] },
        template: { allOf: [ref(`${core}.PodTemplateSpec`)] },
      },
      'x-kubernetes-group-version-kind': [{ group: 'apps', version: 'v1', kind: 'Deployment' }],
    },
  },
};

const fileOf = (files: { path: string; content: string }[], path: string): string => {
  const f = files.find((x) => x.path === path);
  assert.ok(f, `${path} generated (got ${files.map((x) => x.path).join(', ')})`);
  return f.content;
};

describe('gen types: built-in types from OpenAPI v3', () => {
  // meta/v1's ObjectMeta comes from the runtime's sources (pkg/apimachinery/meta.ts, copied beside them to compile).
  const files = generateBuiltinTypes([appsDoc, coreDoc], { outDir: 'api', runtime: { pkgDir: 'pkg' } });
  const corev1 = fileOf(files, 'api/core/v1/zz_generated.types.ts');
  const appsv1 = fileOf(files, 'api/apps/v1/zz_generated.types.ts');
  const metav1 = fileOf(files, 'api/meta/v1/zz_generated.types.ts');

  it('one file per Go package; packageOf maps k8s.io/api, apimachinery meta, apiextensions and aggregator names', () => {
    assert.deepEqual(files.map((f) => f.path), ['api/apps/v1/zz_generated.types.ts', 'api/core/v1/zz_generated.types.ts', 'api/meta/v1/zz_generated.types.ts']);
    assert.equal(packageOf('io.k8s.api.rbac.v1.Role'), 'rbac/v1');
    assert.equal(packageOf('io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition'), 'apiextensions/v1');
    assert.equal(packageOf('io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService'), 'apiregistration/v1');
    assert.equal(packageOf('io.k8s.apimachinery.pkg.api.resource.Quantity'), undefined);
  });

  it('wire format: Time → string, IntOrString → number | string, Quantity → string, RawExtension → Record<string, unknown>, no type → unknown', () => {
    assert.match(metav1, /\/\*\*\n {3}\* When\.\n {3}\*\n {3}\* @format date-time\n {3}\*\/\n {2}time\?: string;/);
    assert.match(corev1, / {2}port\?: number \| string;/);
    assert.match(corev1, / {2}limits\?: Record<string, string>;/);
    assert.match(corev1, / {2}raw\?: Record<string, unknown>;/);
    assert.match(corev1, /No type at all\. \*\/\n {2}anything\?: unknown;/);
  });

  it('$refs name interfaces, imported type-only from the other package; a clashing name gets its package prefix', () => {
    assert.match(appsv1, /^import type \{ PodTemplateSpec \} from '\.\.\/\.\.\/core\/v1\/zz_generated\.types\.ts';$/m);
    assert.match(appsv1, /^import type \{ ObjectMeta \} from '\.\.\/\.\.\/meta\/v1\/zz_generated\.types\.ts';$/m);
    assert.match(corev1, /^import type \{ ObjectMeta, Status as MetaV1Status \} from '\.\.\/\.\.\/meta\/v1\/zz_generated\.types\.ts';$/m);
    assert.match(corev1, / {2}failure\?: MetaV1Status;\n/);
    assert.match(corev1, / {2}status\?: Status;\n/);
    assert.match(corev1, / {2}containers: Container\[\];/);
  });

  it('required members, enums as literal unions, a kind\'s apiVersion and kind in its doc; Go zero-value defaults dropped', () => {
    assert.match(corev1, /\/\*\*\n \* A Pod\.\n \*\n \* apiVersion: v1, kind: Pod\n \*\/\nexport interface Pod \{/);
    assert.match(corev1, / {2}spec: PodSpec;/);
    assert.match(corev1, / {2}phase\?: 'Pending' \| 'Running';/);
    assert.match(corev1, /@default 7\n {3}\*\/\n {2}priority\?: number;/);
    assert.doesNotMatch(corev1 + metav1, /@default (\{\}|"")/);
  });

  it('type-only, and deterministic: the same documents in another order give the same files', () => {
    for (const f of files) assert.doesNotMatch(f.content, /^export (const|function|class|enum)/m, f.path);
    assert.deepEqual(generateBuiltinTypes([coreDoc, appsDoc], { outDir: 'api', runtime: { pkgDir: 'pkg' } }), files);
    assert.match(metav1, /^\/\/ Source: api__v1_openapi\.json\n\/\/ Source: apis__apps__v1_openapi\.json\n/m);
    // DeleteOptions lists each document's own group/version/kind: the union is documented (core group first).
    assert.match(metav1, /\/\*\*\n \* apiVersion: v1, kind: DeleteOptions\n \* apiVersion: apps\/v1, kind: DeleteOptions\n \*\/\nexport interface DeleteOptions/);
  });

  it('a schema with different content in two documents is an error; a $ref to no schema is an error', () => {
    const changed: OpenAPIDocument = { source: 'b.json', schemas: { [`${meta}.Status`]: { type: 'object', properties: { code: { type: 'integer' } } } } };
    assert.throws(() => generateBuiltinTypes([coreDoc, changed], { outDir: 'api' }), /schema io\.k8s\.apimachinery\.pkg\.apis\.meta\.v1\.Status differs between api__v1_openapi\.json and b\.json/);
    const dangling: OpenAPIDocument = { source: 'c.json', schemas: { [`${core}.X`]: { type: 'object', properties: { y: ref(`${core}.Missing`) } } } };
    assert.throws(() => generateBuiltinTypes([dangling], { outDir: 'api' }), /\$ref to io\.k8s\.api\.core\.v1\.Missing, which no document defines/);
  });

  it('parseOpenAPI reads components.schemas and names a file that is not an OpenAPI document', () => {
    assert.deepEqual(parseOpenAPI(JSON.stringify({ openapi: '3.0.0', components: { schemas: { a: { type: 'string' } } } }), 'x.json'), { source: 'x.json', schemas: { a: { type: 'string' } } });
    assert.throws(() => parseOpenAPI('{"swagger":"2.0"}', 'y.json'), /^Error: y\.json: not an OpenAPI v3 document with components\.schemas$/);
  });

  it('compiles (strict), and a wrong value is rejected', () => {
    const dir = mkdtempSync(join(tmpdir(), 'codegen-openapi-'));
    const sources: Record<string, string> = Object.fromEntries(files.map((f) => [f.path, f.content]));
    sources['pkg/apimachinery/meta.ts'] = readFileSync(resolve(import.meta.dirname, '../apimachinery/meta.ts'), 'utf8');
    sources['use.ts'] = [
      "import type { Deployment } from './api/apps/v1/zz_generated.types.ts';",
      "import type { Pod } from './api/core/v1/zz_generated.types.ts';",
      "export const d: Deployment = { metadata: { name: 'a', creationTimestamp: '2026-01-01T00:00:00Z', labels: { x: 'y' } }, template: { spec: { containers: [{ name: 'c' }], port: 'http', limits: { cpu: '1' } } } };",
      "export const p: Pod = { spec: { containers: [], port: 8080, raw: { any: 1 } }, status: { phase: 'Running' } };",
    ].join('\n');
    sources['bad.ts'] = [
      "import type { Pod } from './api/core/v1/zz_generated.types.ts';",
      "export const noName: Pod = { spec: { containers: [{ image: 'x' }] } };",
      "export const badPhase: Pod = { spec: { containers: [] }, status: { phase: 'Gone' } };",
      "export const numericTime: Pod = { metadata: { creationTimestamp: 5 }, spec: { containers: [] } };",
    ].join('\n');
    for (const [name, text] of Object.entries(sources)) {
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), text);
    }
    writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
    const program = ts.createProgram(Object.keys(sources).map((n) => join(dir, n)), {
      target: ts.ScriptTarget.ES2024, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true, allowImportingTsExtensions: true, verbatimModuleSyntax: true, noEmit: true, skipLibCheck: true, types: [],
      typeRoots: [resolve(import.meta.dirname, '../../node_modules/@types')],
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName.slice(dir.length + 1) ?? ''}:${d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0}`);
    assert.deepEqual(errors.sort(), ['bad.ts:2', 'bad.ts:3', 'bad.ts:4']);
  });
});
