/**
 * startTestEnv's `rbacPaths` without a cluster: which manifests are read (readRbac), the mistakes caught before
 * anything starts, and how `eventually` stops at a refusal. The cluster side (installation, the ServiceAccount's token,
 * refusals recorded from real 403s) is test/rbac.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { eventually } from './eventually.ts';
import { readRbac } from './rbac.ts';
import { RbacRefusalError, unwatchRefusals, watchRefusals, type RefusalSource } from './refused.ts';

const role = 'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: manager-role}\nrules: []\n';
const sa = (name: string): string => `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ${name}, namespace: system}\n`;

describe('readRbac', () => {
  it('reads ServiceAccounts, roles and bindings of a directory; skips other kinds and files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rbac-read-'));
    writeFileSync(join(dir, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [role.yaml]\n');
    writeFileSync(join(dir, 'role.yaml'), `${role}---\n${sa('controller-manager')}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n`);
    writeFileSync(join(dir, 'README.md'), 'not read');
    assert.deepEqual(readRbac([dir]).map((o) => `${o.kind}/${o.metadata?.name}`), ['ClusterRole/manager-role', 'ServiceAccount/controller-manager']);
  });

  it('refuses a path that does not exist, one without RBAC, and two ServiceAccounts (which would run the manager?)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rbac-read-'));
    assert.throws(() => readRbac([join(dir, 'nope')]), /^Error: RBAC path .*nope does not exist$/);
    mkdirSync(join(dir, 'empty'));
    writeFileSync(join(dir, 'empty', 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n');
    assert.throws(() => readRbac([join(dir, 'empty')]), /holds no ServiceAccount, Role, ClusterRole or binding$/);
    writeFileSync(join(dir, 'two.yaml'), `${sa('a')}---\n${sa('b')}`);
    assert.throws(() => readRbac([join(dir, 'two.yaml')]), /hold 2 ServiceAccounts \(system\/a, system\/b\): which one runs the manager is ambiguous/);
  });
});

describe('eventually and refusals', () => {
  it('rejects at once with the first refusal of a watched source, names the rule, and waits again once it is cleared', async () => {
    const source: RefusalSource & { refusals: RefusalSource['refusals'][number][] } = { refusals: [], role: 'config/rbac' };
    watchRefusals(source);
    try {
      source.refusals.push({
        user: 'system:serviceaccount:system:controller-manager', verb: 'delete', group: '', resource: 'configmaps', namespace: 'a',
        request: 'DELETE /api/v1/namespaces/a/configmaps/x', message: 'configmaps "x" is forbidden: …',
      });
      let calls = 0;
      await assert.rejects(eventually(() => ++calls > 1_000_000, { timeoutMs: 3_600_000 }), (err: unknown) => {
        assert.ok(err instanceof RbacRefusalError);
        assert.equal(err.refusal.verb, 'delete');
        assert.match(err.message, /delete configmaps \(API group ""\) in namespace "a"[^]*config\/rbac lacks the rule/);
        return true;
      });
      assert.equal(calls, 0, 'nothing was called: the refusal is checked first');
      source.refusals.length = 0;
      assert.equal(await eventually(() => 'ok'), 'ok');
    } finally {
      unwatchRefusals(source);
    }
  });
});
