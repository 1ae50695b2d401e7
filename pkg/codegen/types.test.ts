/**
 * The generator, feature by feature, on CRDs written for the purpose — and the output compiled by the TypeScript
 * compiler (strict, the project's options) together with code that must and must not typecheck against it.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { crdManifest } from '../../test/helpers/crdmanifest.ts';
import { parseCRDs, type CRDVersion } from './crd.ts';
import { literal, pascalCase, singular } from './schema.ts';
import { generateTypes, lowerCamel, type GeneratedFile } from './types.ts';

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          description: A Widget is a thing. Its doc mentions */ to test escaping.
          required: [spec]
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              description: What the user wants.
              required: [size, mode]
              properties:
                size: {type: integer, format: int32, minimum: 1, maximum: 10, description: How big.}
                ratio: {type: number, default: 0.5}
                enabled: {type: boolean}
                mode: {type: string, enum: [Fast, Slow, "It's"]}
                port: {x-kubernetes-int-or-string: true, description: A port number or name.}
                labels: {type: object, additionalProperties: {type: string}}
                anything: {type: object, additionalProperties: true}
                extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
                raw: {x-kubernetes-preserve-unknown-fields: true}
                pruned: {type: object}
                nickname: {type: string, nullable: true, pattern: '^[a-z]+$', maxLength: 20}
                dashed-key: {type: string}
                tags: {type: array, items: {type: string}, maxItems: 5}
                modes: {type: array, items: {type: string, enum: [a, b]}}
                untyped: {type: array, items: {x-kubernetes-preserve-unknown-fields: true}}
                ports:
                  type: array
                  items:
                    type: object
                    required: [name]
                    properties:
                      name: {type: string}
                      number: {type: integer}
                matrix: {type: array, items: {type: array, items: {type: integer}}}
                open:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties:
                    known: {type: string}
                policies:
                  type: object
                  additionalProperties:
                    type: object
                    properties:
                      max: {type: integer}
                template:
                  type: object
                  x-kubernetes-embedded-resource: true
                  properties:
                    apiVersion: {type: string}
                    kind: {type: string}
                    metadata: {type: object}
                    data: {type: object, additionalProperties: {type: string}}
                resource:
                  type: object
                  x-kubernetes-embedded-resource: true
                  x-kubernetes-preserve-unknown-fields: true
            status:
              type: object
              properties:
                conditions:
                  type: array
                  items:
                    type: object
                    required: [type, status]
                    properties:
                      type: {type: string}
                      status: {type: string, enum: ["True", "False", "Unknown"]}
                      lastTransitionTime: {type: string, format: date-time}
                entries:
                  type: array
                  items:
                    type: object
                    properties:
                      key: {type: string}
    - name: v1beta1
      served: true
      storage: false
      deprecated: true
      deprecationWarning: example.com/v1beta1 Widget is deprecated; use example.com/v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
---
${crdManifest({ kind: 'Gadget', plural: 'gadgets', scope: 'Cluster', properties: ['apiVersion: {type: string}', 'kind: {type: string}', 'metadata: {type: object}'] })}`;

const pkgDir = resolve(import.meta.dirname, '..');

function generate(text = widgetCRD, opts: Parameters<typeof generateTypes>[1] = { outDir: 'apis' }): GeneratedFile[] {
  return generateTypes(parseCRDs(text, 'widgets.yaml'), opts);
}

function fileOf(files: GeneratedFile[], path: string): string {
  const f = files.find((x) => x.path === path);
  assert.ok(f, `${path} generated (got ${files.map((x) => x.path).join(', ')})`);
  return f.content;
}

/** Compiles `files` (name → text, in `dir`, an ES module package) with the project's strict options; the diagnostics. */
function compile(dir: string, files: Record<string, string>): string[] {
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const program = ts.createProgram(Object.keys(files).map((n) => join(dir, n)), {
    target: ts.ScriptTarget.ES2024, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true, noUncheckedIndexedAccess: true, exactOptionalPropertyTypes: false, allowImportingTsExtensions: true,
    verbatimModuleSyntax: true, noEmit: true, skipLibCheck: true, types: ['node'],
    typeRoots: [resolve(pkgDir, '../node_modules/@types')],
  });
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? `${d.file.fileName.slice(dir.length + 1)}:` : ''} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

describe('gen types: schema features', () => {
  const files = generate();
  const v1 = fileOf(files, 'apis/example/v1/zz_generated.types.ts');

  it('one file per group/version, named <first group label>/<version>, kinds of a group/version together', () => {
    assert.deepEqual(files.map((f) => f.path), ['apis/example/v1/zz_generated.types.ts', 'apis/example/v1beta1/zz_generated.types.ts']);
    assert.ok(v1.indexOf('export interface Gadget') < v1.indexOf('export interface Widget'), 'kinds sorted');
  });

  it('header: "Code generated … DO NOT EDIT." and the sources', () => {
    assert.match(v1, /^\/\/ Code generated by `ts-controller-manager gen types`\. DO NOT EDIT\.\n\/\/ Source: widgets\.yaml\n/);
  });

  it('constants: group, version, apiVersion, <kind>Kind/Plural/Resource (scope from the CRD)', () => {
    assert.match(v1, /export const group = 'example\.com';\nexport const version = 'v1';\nexport const apiVersion = 'example\.com\/v1';/);
    assert.match(v1, /export const widgetKind = 'Widget';\nexport const widgetPlural = 'widgets';/);
    assert.match(v1, /export const widgetResource: ResourceType = \{ group, version, resource: widgetPlural, kind: widgetKind, namespaced: true \};/);
    assert.match(v1, /export const gadgetResource: ResourceType = \{ .*namespaced: false \};/);
  });

  it('the kind extends KubeObject (apiVersion/kind/metadata not repeated), required root fields are required', () => {
    assert.match(v1, /export interface Widget extends KubeObject \{\n {2}\/\*\* What the user wants\. \*\/\n {2}spec: WidgetSpec;\n {2}status\?: WidgetStatus;\n\}/);
    assert.match(v1, /export type Gadget = KubeObject;/, 'a kind without fields of its own is a KubeObject');
    assert.doesNotMatch(v1, /^ {2}metadata\?/m);
  });

  it('the List type, with listKind (default <Kind>List)', () => {
    assert.match(v1, /export interface WidgetList \{\n {2}apiVersion\?: string;\n {2}kind\?: string;\n {2}metadata: \{ resourceVersion\?: string; continue\?: string; remainingItemCount\?: number \};\n {2}items: Widget\[\];\n\}/);
    assert.match(v1, /export interface GadgetList \{/);
  });

  it('scalars, required vs optional, and formats/limits/defaults in doc comments', () => {
    assert.match(v1, / {2}\/\*\*\n {3}\* How big\.\n {3}\*\n {3}\* @format int32\n {3}\* @minimum 1\n {3}\* @maximum 10\n {3}\*\/\n {2}size: number;/);
    assert.match(v1, / {2}\/\*\* @default 0\.5 \*\/\n {2}ratio\?: number;/);
    assert.match(v1, / {2}enabled\?: boolean;/);
  });

  it('enums → string-literal unions (quotes escaped)', () => {
    assert.match(v1, / {2}mode: 'Fast' \| 'Slow' \| 'It\\'s';/);
    assert.match(v1, / {2}status: 'True' \| 'False' \| 'Unknown';/);
    assert.match(v1, / {2}modes\?: Array<'a' \| 'b'>;/);
  });

  it('x-kubernetes-int-or-string → number | string', () => {
    assert.match(v1, / {2}port\?: number \| string;/);
  });

  it('additionalProperties → Record; preserve-unknown-fields → Record<string, unknown> / unknown; no fields → Record<string, never>', () => {
    assert.match(v1, / {2}labels\?: Record<string, string>;/);
    assert.match(v1, / {2}anything\?: Record<string, unknown>;/);
    assert.match(v1, / {2}extra\?: Record<string, unknown>;/);
    assert.match(v1, / {2}raw\?: unknown;/);
    assert.match(v1, / {2}pruned\?: Record<string, never>;/);
    assert.match(v1, / {2}policies\?: Record<string, WidgetSpecPoliciesValue>;/);
    assert.match(v1, /export interface WidgetSpecPoliciesValue \{\n {2}max\?: number;\n\}/);
  });

  it('properties plus preserve-unknown-fields → an interface with an index signature', () => {
    assert.match(v1, /export interface WidgetSpecOpen \{\n {2}known\?: string;\n {2}\/\*\* Fields the schema does not list \(kept by the API server\)\. \*\/\n {2}\[key: string\]: unknown;\n\}/);
  });

  it('nullable → | null; non-identifier keys quoted', () => {
    assert.match(v1, / {3}\* @maxLength 20\n {3}\* @pattern \^\[a-z\]\+\$\n {3}\*\/\n {2}nickname\?: string \| null;/);
    assert.match(v1, / {2}'dashed-key'\?: string;/);
  });

  it('arrays: of scalars, of objects (named after the singular), of arrays, of anything (items that keep unknown fields)', () => {
    assert.match(v1, /tags\?: string\[\];/);
    assert.match(v1, /ports\?: WidgetSpecPort\[\];/);
    assert.match(v1, /export interface WidgetSpecPort \{\n {2}name: string;\n {2}number\?: number;\n\}/);
    assert.match(v1, /matrix\?: number\[\]\[\];/);
    assert.match(v1, /untyped\?: unknown\[\];/);
    assert.match(v1, /conditions\?: WidgetStatusCondition\[\];/);
    assert.match(v1, /entries\?: WidgetStatusEntry\[\];/);
  });

  it('x-kubernetes-embedded-resource → extends KubeObject', () => {
    assert.match(v1, /template\?: WidgetSpecTemplate;/);
    assert.match(v1, /export interface WidgetSpecTemplate extends KubeObject \{\n {2}data\?: Record<string, string>;\n\}/);
    assert.match(v1, /resource\?: KubeObject & Record<string, unknown>;/);
  });

  it('descriptions → doc comments (with */ escaped); deprecated versions → @deprecated', () => {
    assert.match(v1, /\/\*\* A Widget is a thing\. Its doc mentions \*\\\/ to test escaping\. \*\/\nexport interface Widget /);
    assert.match(v1, /\/\*\* What the user wants\. \*\/\n {2}spec: WidgetSpec;/);
    assert.match(v1, /\/\*\* What the user wants\. \*\/\nexport interface WidgetSpec \{/);
    const beta = fileOf(files, 'apis/example/v1beta1/zz_generated.types.ts');
    assert.match(beta, /\/\*\*\n \* Widget \(example\.com\/v1beta1\)\.\n \*\n \* @deprecated example\.com\/v1beta1 Widget is deprecated; use example\.com\/v1\n \*\/\nexport interface Widget extends KubeObject/);
  });

  it('imports KubeObject/ResourceType from the package by default, or relatively from a pkg/ directory', () => {
    assert.match(v1, /^import type \{ KubeObject, ResourceType \} from 'ts-controller-manager';$/m);
    const rel = fileOf(generate(widgetCRD, { outDir: 'pkg/apis', runtime: { pkgDir: 'pkg' } }), 'pkg/apis/example/v1/zz_generated.types.ts');
    assert.match(rel, /^import type \{ KubeObject \} from '\.\.\/\.\.\/\.\.\/apimachinery\/meta\.ts';\nimport type \{ ResourceType \} from '\.\.\/\.\.\/\.\.\/apimachinery\/resource\.ts';$/m);
  });

  it('compiles under strict TypeScript, and the types accept valid objects and reject invalid ones', () => {
    const dir = mkdtempSync(join(tmpdir(), 'codegen-test-'));
    const out = generate(widgetCRD, { outDir: dir, runtime: { pkgDir } });
    const gen = fileOf(out, `${dir}/example/v1/zz_generated.types.ts`);
    const usage = `
import type { Widget, WidgetList } from './example/v1/zz_generated.types.ts';
import { widgetResource } from './example/v1/zz_generated.types.ts';
const ok: Widget = {
  apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' },
  spec: { size: 3, mode: 'Fast', port: 'http', labels: { a: 'b' }, nickname: null, 'dashed-key': 'x', matrix: [[1]],
    open: { known: 'k', other: 1 }, template: { apiVersion: 'v1', kind: 'ConfigMap', data: { k: 'v' } }, raw: 42 },
  status: { conditions: [{ type: 'Ready', status: 'True' }] },
};
const list: WidgetList = { metadata: {}, items: [ok] };
// @ts-expect-error mode is required
const noMode: Widget = { spec: { size: 1 } };
// @ts-expect-error not one of the enum's literals
const badMode: Widget = { spec: { size: 1, mode: 'Medium' } };
// @ts-expect-error int-or-string is not boolean
const badPort: Widget = { spec: { size: 1, mode: 'Slow', port: true } };
// @ts-expect-error a pruned object has no fields
const pruned: Widget = { spec: { size: 1, mode: 'Slow', pruned: { x: 1 } } };
export const all = [ok, list, noMode, badMode, badPort, pruned, widgetResource.namespaced];
`;
    assert.deepEqual(compile(dir, { 'example/v1/zz_generated.types.ts': gen, 'usage.ts': usage }), []);
  });
});

describe('gen types: determinism and errors', () => {
  it('same output whatever the order of the inputs and of the YAML keys', () => {
    const crds = parseCRDs(widgetCRD, 'widgets.yaml');
    const reorder = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(reorder);
      if (typeof v !== 'object' || v === null) return v;
      return Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reorder(x)]));
    };
    const shuffled = [...crds].reverse().map((c) => reorder(c) as CRDVersion);
    assert.deepEqual(generateTypes(shuffled, { outDir: 'apis' }), generateTypes(crds, { outDir: 'apis' }));
  });

  it('rejects a file without a CRD, a v1beta1 CRD, a version without a schema, invalid YAML; names the file', () => {
    assert.throws(() => parseCRDs('apiVersion: v1\nkind: ConfigMap\n', 'cm.yaml'), /^Error: cm\.yaml: no apiextensions\.k8s\.io\/v1 CustomResourceDefinition found$/);
    assert.throws(() => parseCRDs('apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\n', 'old.yaml'),
      /old\.yaml: document 1: apiVersion apiextensions\.k8s\.io\/v1beta1 is not supported/);
    assert.throws(() => parseCRDs(widgetCRD.replace(/ {6}schema:\n {8}openAPIV3Schema:\n {10}type: object\n {10}properties:\n {12}spec: \{type: object, properties: \{size: \{type: integer\}\}\}\n/, ''), 'w.yaml'),
      /w\.yaml: document 1: kube-apiserver would refuse this CRD: CustomResourceDefinition\.apiextensions\.k8s\.io "widgets\.example\.com" is invalid: spec\.versions\[1\]\.schema\.openAPIV3Schema: Required value$/);
    assert.throws(() => parseCRDs('a: [', 'bad.yaml'), /^Error: bad\.yaml: not valid YAML/);
  });

  it('refuses a CRD kube-apiserver would refuse, in the server\'s words: an unsupported type (int), an array without items, a default that breaks its own maximum', () => {
    const bad = widgetCRD.replace('spec: {type: object, properties: {size: {type: integer}}}', 'spec: {type: object, properties: {size: {type: int}, list: {type: array}, replicas: {type: integer, maximum: 10, default: 50}}}');
    assert.notEqual(bad, widgetCRD);
    const err = (() => { try { parseCRDs(bad, 'bad.yaml'); } catch (e) { return (e as Error).message; } return ''; })();
    const prefix = 'bad.yaml: document 1: kube-apiserver would refuse this CRD: CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: ';
    assert.ok(err.startsWith(prefix), err);
    // What kube-apiserver 1.36 answers for this schema (structural errors first, sorted; the default is checked only
    // once the schema is structural).
    assert.equal(err.slice(prefix.length), '[spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified, '
      + 'spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[size].type: Unsupported value: "int": supported values: "array", "boolean", "integer", "number", "object", "string"]');
    const fixed = bad.replace('list: {type: array}', 'list: {type: array, items: {type: string}}').replace('size: {type: int}', 'size: {type: integer}');
    assert.throws(() => parseCRDs(fixed, 'bad.yaml'), /properties\[replicas\]\.default: Invalid value: 50: {2}in body should be less than or equal to 10$/);
  });

  it('refuses two groups that would share a directory, and a kind defined twice', () => {
    const other = widgetCRD.replaceAll('example.com', 'example.org');
    assert.throws(() => generateTypes([...parseCRDs(widgetCRD, 'a.yaml'), ...parseCRDs(other, 'b.yaml')], { outDir: 'apis' }),
      /groups example\.com and example\.org would both be generated into apis\/example\/v1/);
    assert.throws(() => generateTypes([...parseCRDs(widgetCRD, 'a.yaml'), ...parseCRDs(widgetCRD, 'c.yaml')], { outDir: 'apis' }),
      /Widget example\.com\/v1 is defined twice \(c\.yaml\)/);
  });

  it('names: Pascal case, singulars, lowerCamel kind constants, literals', () => {
    assert.deepEqual(['deploymentName', 'x-foo.bar', '9lives'].map(pascalCase), ['DeploymentName', 'XFooBar', '_9lives']);
    assert.deepEqual(['Conditions', 'Policies', 'Addresses', 'Boxes', 'Status', 'Data'].map(singular),
      ['Condition', 'Policy', 'Address', 'Box', 'StatusItem', 'DataItem']);
    assert.deepEqual(['Foo', 'DNSRecord', 'URL', 'fooBar'].map(lowerCamel), ['foo', 'dnsRecord', 'url', 'fooBar']);
    assert.deepEqual(['a\'b\\c\n', 3, true, null].map(literal), ["'a\\'b\\\\c\\n'", '3', 'true', 'null']);
  });
});
