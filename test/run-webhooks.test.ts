/**
 * `make run` on its own local control plane (hack/run.ts): the API server calls the local process for the Network
 * webhooks — a v1 read of the sample Network goes through the conversion, an invalid Network is refused with the
 * controller's message — and on exit (SIGTERM, as Ctrl-C) the manager stops, the webhook configuration is removed
 * and the control plane is stopped. The Network controller is off (NEUTRON_CLOUD_CONFIG=none): only the webhooks
 * are under test. Uses the repository's .cluster/ (what `make run` uses) and 127.0.0.1:9443 / :8080.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { validateNetwork } from '../pkg/controllers/network/validation.ts';
import { eventually } from '../pkg/testing/eventually.ts';
import { ControlPlane } from './cluster/controlplane.ts';

const repo = join(import.meta.dirname, '..');

test('make run on the local control plane serves the Network webhooks from the local process, and removes them on exit', { timeout: 300_000 }, async (t) => {
  assert.ok(!existsSync(join(repo, '.cluster', 'state.json')), 'no local control plane of make cluster-up is running here (this test starts and stops make run\'s own)');
  const home = mkdtempSync(join(tmpdir(), 'tscm-run-home-'));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  // A HOME without ~/.kube/config (so no configured cluster), keeping the tool cache and npm's of the real one.
  const realHome = process.env['HOME'] ?? '';
  const env: NodeJS.ProcessEnv = {
    ...process.env, HOME: home, NEUTRON_CLOUD_CONFIG: 'none',
    TSCM_CACHE_DIR: process.env['TSCM_CACHE_DIR'] ?? join(process.env['XDG_CACHE_HOME'] ?? join(realHome, '.cache'), 'ts-controller-manager'),
    GOPATH: process.env['GOPATH'] ?? join(realHome, 'go'),
    GOCACHE: process.env['GOCACHE'] ?? join(process.env['XDG_CACHE_HOME'] ?? join(realHome, '.cache'), 'go-build'),
  };
  delete env['KUBECONFIG'];
  delete env['TSCM_CLUSTER_DIR'];
  const child = spawn(process.execPath, [join(repo, 'hack/run.ts')], { cwd: repo, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (log += c));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // On a failure: make run's own Ctrl-C path (SIGTERM; it stops what it started), else kill it and stop its control plane.
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const done = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 60_000).unref())]);
      if (!done) child.kill('SIGKILL');
    }
    if (existsSync(join(repo, '.cluster', 'state.json'))) await ControlPlane.attach(join(repo, '.cluster')).stop();
  });

  const samplesApplied = /applying config\/samples in namespace default[\s\S]*network\.samplecrd\.k8s\.io\/example-network (created|serverside-applied|configured|unchanged)/;
  await eventually(() => samplesApplied.test(log), { timeoutMs: 240_000, intervalMs: 200, message: () => `make run's log:\n${log.slice(-3000)}` });
  const cp = ControlPlane.attach(join(repo, '.cluster'));
  const v1 = await cp.get('/apis/samplecrd.k8s.io/v1/namespaces/default/networks/example-network');
  assert.equal(v1.status, 200, `v1 read through the conversion webhook: ${v1.body}`);
  const v2 = await cp.get('/apis/samplecrd.k8s.io/v2/namespaces/default/networks/example-network');
  assert.equal(v2.status, 200, v2.body);
  const spec1 = (JSON.parse(v1.body) as { spec: { cidr: string } }).spec;
  const spec2 = (JSON.parse(v2.body) as { spec: { subnets: { cidr: string }[] } }).spec;
  assert.equal(spec2.subnets[0]?.cidr, spec1.cidr, 'v1 and v2 reads of the sample agree');

  const invalid = { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'run-invalid', namespace: 'default' }, spec: { cidr: '224.1.0.0/16' } };
  const expected = validateNetwork(invalid);
  assert.ok(!expected.ok);
  const refused = await cp.request('POST', '/apis/samplecrd.k8s.io/v1/namespaces/default/networks', invalid);
  assert.equal(refused.status, 403, refused.body);
  assert.equal((JSON.parse(refused.body) as { message: string }).message,
    `admission webhook "vnetwork-v1.samplecrd.k8s.io" denied the request: ${expected.message}`);

  child.kill('SIGTERM');
  assert.equal(await exited, 0, log.slice(-2000));
  assert.match(log, /manager exited with code 0/);
  assert.match(log, /validatingwebhookconfiguration\.admissionregistration\.k8s\.io "ts-controller-manager-validating-webhook-configuration" deleted/);
  assert.ok(!existsSync(join(repo, '.cluster', 'state.json')), 'the control plane make run started is stopped');
});
