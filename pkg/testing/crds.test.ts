import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { readCRDs } from './crds.ts';

const root = mkdtempSync(join(tmpdir(), 'tscm-crds-'));
after(() => rmSync(root, { recursive: true, force: true }));
const crd = (name: string): string => `apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: ${name}\n`;

describe('readCRDs', () => {
  test('reads every CRD of a directory (multi-document files, .yml and .json too) and skips other objects and files', () => {
    const dir = join(root, 'bases');
    mkdirSync(join(dir, 'nested'), { recursive: true });
    writeFileSync(join(dir, 'a.yaml'), `${crd('as.example.com')}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n${crd('bs.example.com')}`);
    writeFileSync(join(dir, 'c.yml'), crd('cs.example.com'));
    writeFileSync(join(dir, 'd.json'), JSON.stringify({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'ds.example.com' } }));
    writeFileSync(join(dir, 'kustomization.yaml'), 'resources: [a.yaml]\n');
    writeFileSync(join(dir, 'README.md'), crd('not-read.example.com'));
    writeFileSync(join(dir, 'nested', 'e.yaml'), crd('es.example.com')); // not recursive, as envtest
    assert.deepEqual(readCRDs([dir]).map((c) => c.metadata?.name), ['as.example.com', 'bs.example.com', 'cs.example.com', 'ds.example.com']);
  });

  test('a file path is read as given; this repository\'s config/crd/bases holds Foo and Network', () => {
    writeFileSync(join(root, 'one.yaml'), crd('ones.example.com'));
    assert.deepEqual(readCRDs([join(root, 'one.yaml')]).map((c) => c.metadata?.name), ['ones.example.com']);
    const bases = join(import.meta.dirname, '..', '..', 'config', 'crd', 'bases');
    assert.deepEqual(readCRDs([bases]).map((c) => c.metadata?.name), ['foos.samplecontroller.k8s.io', 'networks.samplecrd.k8s.io']);
  });

  test('a missing path, or one without a CRD, is an error naming it', () => {
    assert.throws(() => readCRDs([join(root, 'nope')]), /^Error: CRD path \/.*nope does not exist$/);
    assert.throws(() => readCRDs(['config/crd/base']), /^Error: CRD path config\/crd\/base \(relative to the working directory: \/.*\/config\/crd\/base\) does not exist$/);
    writeFileSync(join(root, 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n');
    assert.throws(() => readCRDs([join(root, 'cm.yaml')]), /CRD path .*cm.yaml holds no apiextensions.k8s.io\/v1 CustomResourceDefinition/);
  });
});
