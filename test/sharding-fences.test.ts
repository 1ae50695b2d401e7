/**
 * The sharder's three fences (docs/safety.md "Every write, what fences it"), on the REAL API server
 * (TEST_CLUSTER_MODE=minimal is enough):
 *  1. its shard-label merge patch carries the object's resourceVersion: the real Sharder's patch, held by a proxy
 *     while the object changes, lands late and is refused (409); the object keeps the change, and the sharder assigns
 *     it again from the newer version;
 *  2. its delete of a departed shard's Lease carries `preconditions.resourceVersion`: the real Sharder's DELETE of a
 *     released Lease, held while the Lease is renewed, is refused (409) and the renewed Lease stays;
 *  3. a shard's drain acknowledgement (pkg/runtime/builder.ts sends `acknowledgeJsonPatch`) tests the shard label:
 *     the same patch that removes the labels while the object is still on that shard is refused (422, nothing
 *     changed) once the object was assigned elsewhere. (The patch body is the code's; it is sent here by the test,
 *     not held from a running shard.)
 * The holding proxy (test/helpers/proxies.ts HoldingApiProxy) is fault injection at request level: it re-sends the
 * client's own request, late.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { KubeConfig } from '../pkg/client/kubeconfig.ts';
import { ApiError, RestClient } from '../pkg/client/rest.ts';
import { fooResource } from '../pkg/controllers/foo/desired.ts';
import { LeaderElector, RestLeaseClient } from '../pkg/manager/leaderelection.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { acknowledgeJsonPatch, drainLabel, shardLabel } from '../pkg/sharding/assignment.ts';
import { Sharder } from '../pkg/sharding/sharder.ts';
import { leaseOfLabel } from '../pkg/sharding/shard.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace, waitFor } from './helpers/cluster.ts';
import { installCRDs } from './helpers/crds.ts';
import { HoldingApiProxy } from './helpers/proxies.ts';

const foos = (ns: string): string => `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`;
const leases = (ns: string): string => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
const mergePatch = { headers: { 'content-type': 'application/merge-patch+json' } };
const group = 'fence-sharder';
const now = (): string => new Date().toISOString().replace(/Z$/, '000Z');

/** A shard Lease of `group` held by `holder` ('' = released), valid for an hour. */
function shardLease(name: string, holder: string): unknown {
  return {
    apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, labels: { [leaseOfLabel]: group } },
    spec: { holderIdentity: holder, leaseDurationSeconds: 3600, renewTime: now(), acquireTime: now() },
  };
}

/** The real Sharder for the Foos of `ns`, its writes through a HoldingApiProxy; one live shard "a". */
async function startSharder(t: TestContext, ns: string): Promise<{ proxy: HoldingApiProxy }> {
  const cp = cluster();
  const { pki } = cp.state;
  const proxy = await HoldingApiProxy.start(cp.server, {
    cert: readFileSync(pki.servingCert, 'utf8'), key: readFileSync(pki.servingKey, 'utf8'),
    upstreamCA: readFileSync(pki.caCert, 'utf8'), upstreamCert: readFileSync(pki.adminCert, 'utf8'), upstreamKey: readFileSync(pki.adminKey, 'utf8'),
  });
  t.after(() => proxy.close());
  const registry = new Registry();
  const reader = new RestClient({ kubeConfig: adminKubeConfig(), registry, userAgent: 'fence-sharder-reader' });
  // The same kubeconfig with the proxy as server (it serves the API server's own certificate: the CA stays).
  const kc = JSON.parse(readFileSync(cp.kubeconfig, 'utf8')) as { clusters: { cluster: { server: string } }[] };
  for (const c of kc.clusters) c.cluster.server = proxy.url;
  const dir = mkdtempSync(join(tmpdir(), 'tscm-fence-sharder-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'kubeconfig'), JSON.stringify(kc));
  const viaProxy = new KubeConfig();
  viaProxy.loadFromFile(join(dir, 'kubeconfig'));
  const elector = new LeaderElector({
    lock: new RestLeaseClient(reader, ns, group), name: group, identity: 'fence-sharder', leaseDurationMs: 15_000, renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000, logger: silentLogger, registry,
  });
  const writer = new RestClient({ kubeConfig: viaProxy, registry, userAgent: 'fence-sharder-writer', writeGate: elector.leadership });
  expectStatus(await cp.request('POST', leases(ns), shardLease('shard-a', 'a')), 201, 'shard Lease a');
  const sharder = new Sharder({
    elector, group, leaseNamespace: ns, reader, writer, namespaces: [ns], leaseGcAfterMs: 0, logger: silentLogger, registry,
  });
  sharder.register({ name: 'foo', primary: fooResource, owned: [] });
  const stop = new AbortController();
  const running = sharder.start(stop.signal);
  t.after(async () => {
    stop.abort();
    await proxy.deliver('sent').catch(() => undefined);
    await running.catch(() => undefined);
    await Promise.all([reader.close(), writer.close()]);
  });
  return { proxy };
}

describe('the sharder\'s fences on the real API server', () => {
  before(installCRDs);

  test('a shard-label patch from a stale view lands late → 409; the object keeps the change and is assigned from the newer version', async (t) => {
    const ns = await testNamespace(t, 'fence-shard');
    const { proxy } = await startSharder(t, ns);
    proxy.hold();
    expectStatus(await cluster().request('POST', foos(ns), {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'f' }, spec: { deploymentName: 'f', replicas: 1 },
    }), 201, 'Foo');
    await waitFor('the sharder\'s label patch held', () => proxy.held.some((w) => w.method === 'PATCH' && w.path.startsWith(`${foos(ns)}/f`)), { timeoutMs: 60_000, intervalMs: 50 });
    // Meanwhile someone else writes the Foo: its resourceVersion moves on.
    expectStatus(await cluster().request('PATCH', `${foos(ns)}/f`, { metadata: { labels: { touched: 'yes' } } }, mergePatch), 200, 'the other write');
    const delivered = await proxy.deliver('sent');
    const late = delivered.filter((w) => w.method === 'PATCH' && w.path.startsWith(`${foos(ns)}/f`));
    assert.deepEqual(late.map((w) => w.code), [409], 'the late label patch is refused');
    const foo = await waitFor('the Foo assigned to shard a from the newer version', async () => {
      const f = expectStatus<KubeObject>(await cluster().get(`${foos(ns)}/f`), 200, 'get Foo');
      return f.metadata?.labels?.[shardLabel('foo')] === 'a' ? f : undefined;
    }, { timeoutMs: 60_000, intervalMs: 100 });
    assert.equal(foo.metadata?.labels?.['touched'], 'yes', 'the other write was kept');
  });

  test('the delete of a departed shard\'s Lease, landing after the Lease was renewed → 409; the Lease stays', async (t) => {
    const ns = await testNamespace(t, 'fence-lease');
    const { proxy } = await startSharder(t, ns);
    // The sharder is up once it assigns a Foo (writes pass: not holding yet).
    expectStatus(await cluster().request('POST', foos(ns), {
      apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'ready' }, spec: { deploymentName: 'ready', replicas: 1 },
    }), 201, 'Foo');
    await waitFor('the sharder working', async () =>
      expectStatus<KubeObject>(await cluster().get(`${foos(ns)}/ready`), 200, 'get').metadata?.labels?.[shardLabel('foo')] === 'a', { timeoutMs: 60_000, intervalMs: 100 });
    proxy.hold();
    // A released shard Lease: the sharder deletes it at once, preconditioned on the version it saw.
    expectStatus(await cluster().request('POST', leases(ns), shardLease('shard-b', '')), 201, 'released Lease b');
    await waitFor('the sharder\'s DELETE held', () => proxy.held.some((w) => w.method === 'DELETE' && w.path.startsWith(`${leases(ns)}/shard-b`)), { timeoutMs: 60_000, intervalMs: 50 });
    // Meanwhile shard b renews it (holds it again).
    const renewed = expectStatus<KubeObject>(await cluster().request('PATCH', `${leases(ns)}/shard-b`, { spec: { holderIdentity: 'b', renewTime: now() } }, mergePatch), 200, 'renewal');
    const delivered = await proxy.deliver('sent');
    assert.deepEqual(delivered.filter((w) => w.method === 'DELETE').map((w) => w.code), [409], 'the late delete is refused');
    const lease = expectStatus<KubeObject & { spec: { holderIdentity: string } }>(await cluster().get(`${leases(ns)}/shard-b`), 200, 'the Lease is still there');
    assert.equal(lease.spec.holderIdentity, 'b');
    assert.equal(lease.metadata?.resourceVersion, renewed.metadata?.resourceVersion);
  });

  test('a drain acknowledgement (acknowledgeJsonPatch) from the old shard → 422 once the object was assigned elsewhere; 200 while it is still its own', async (t) => {
    const ns = await testNamespace(t, 'fence-drain');
    const rest = new RestClient({ kubeConfig: adminKubeConfig(), userAgent: 'fence-drain' });
    t.after(() => rest.close());
    for (const name of ['moved', 'mine']) {
      expectStatus(await cluster().request('POST', foos(ns), {
        apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', spec: { deploymentName: name, replicas: 1 },
        metadata: { name, labels: { [shardLabel('foo')]: 'a', [drainLabel('foo')]: 'true' } },
      }), 201, `Foo ${name}`);
    }
    // "moved": assigned to shard c after a's view was taken (a was judged dead meanwhile), and c is draining it in
    // turn — so only the `test` op tells a's late acknowledgement from c's (both labels are present either way).
    expectStatus(await cluster().request('PATCH', `${foos(ns)}/moved`, { metadata: { labels: { [shardLabel('foo')]: 'c', [drainLabel('foo')]: 'true' } } }, mergePatch), 200, 'reassigned');
    const ack = (name: string): Promise<unknown> => rest.json('PATCH', `${foos(ns)}/${name}`, { body: acknowledgeJsonPatch('foo', 'a'), contentType: 'application/json-patch+json' });
    await assert.rejects(ack('moved'), (e: unknown) => e instanceof ApiError && e.status === 422);
    const moved = expectStatus<KubeObject>(await cluster().get(`${foos(ns)}/moved`), 200, 'get');
    assert.deepEqual([moved.metadata?.labels?.[shardLabel('foo')], moved.metadata?.labels?.[drainLabel('foo')]], ['c', 'true'], 'the new assignment stays');
    await ack('mine');
    const mine = expectStatus<KubeObject>(await cluster().get(`${foos(ns)}/mine`), 200, 'get');
    assert.deepEqual([mine.metadata?.labels?.[shardLabel('foo')], mine.metadata?.labels?.[drainLabel('foo')]], [undefined, undefined], 'acknowledged: both labels removed');
  });
});
