/**
 * Leader election through a connection cut shorter than the renew deadline, on the real kube-apiserver (the shared
 * cluster) through a TcpProxy (test/helpers/tcpproxy.ts). The endurance bench lost the Lease in 3 of 6 etcd-compaction
 * cuts of ~7 s: the connection was back before the renew deadline, but the retry after the last failed renewal was
 * due after it. Since 34694f2 (pkg/manager/leaderelection.ts "Renew"), after a renewal that got no answer at the
 * connection level, the server's next answer to any request of the process retries at once.
 *
 * Timing (lease 25 s, renew deadline 18 s, retry period 5 s): the cut starts right after a renewal R (seen by polling
 * the Lease directly, not through the proxy) and lasts until R + 15.5 s, so the attempts at R + 5, 10, 15 all fail;
 * without the hint the next one would be due at R + 18 — the deadline: the Lease is lost. With it, the answer to a
 * request of the process (here the test's GET /version through the elector's RestClient, as an informer's reconnect
 * would be in the manager) starts a renewal at once, ~2.5 s before the deadline.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { RestClient } from '../pkg/client/rest.ts';
import { LeaderElector, RestLeaseClient } from '../pkg/manager/leaderelection.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { eventually } from '../pkg/testing/index.ts';
import { adminKubeConfig, cluster, expectStatus, testNamespace } from './helpers/cluster.ts';
import { proxiedServer, TcpProxy } from './helpers/tcpproxy.ts';

interface Lease { spec: { holderIdentity?: string; renewTime?: string } }

const leaseMs = 25_000;
const renewDeadlineMs = 18_000;
const retryPeriodMs = 5_000;
/** The cut ends this long after the renewal it follows: after the third failed attempt (R + 15 s), before R + 18 s. */
const cutUntilMs = 15_500;

describe('leader election through a connection cut shorter than the renew deadline (real API server)', () => {
  test('the leader keeps its Lease: the first answer after the cut renews it at once, before the renew deadline (not at the next retry, which would be past it)', { timeout: 120_000 }, async (t) => {
    const ns = await testNamespace(t, 'lecut');
    const leaseName = 'tscm-le-cut';
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${leaseName}`;
    const api = new URL(cluster().server);
    const proxy = await TcpProxy.start(api.hostname, Number(api.port));
    t.after(() => proxy.close());
    const kc = adminKubeConfig();
    for (const c of kc.clusters) (c as { server: string }).server = proxiedServer(c.server, proxy);
    const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'leaderelection-cut-test' });
    t.after(() => rest.close());

    const elector = new LeaderElector({
      lock: new RestLeaseClient(rest, ns, leaseName), name: leaseName, identity: 'cut-test-leader',
      leaseDurationMs: leaseMs, renewDeadlineMs, retryPeriodMs, logger: silentLogger, registry: new Registry(),
    });
    const ac = new AbortController();
    let lostAt: number | undefined;
    const ran = elector.run(ac.signal, { onStoppedLeading: () => { lostAt ??= Date.now(); } });
    t.after(async () => {
      ac.abort();
      await ran;
    });
    const renewTime = async (): Promise<string | undefined> => expectStatus<Lease>(await cluster().get(leasePath), 200, 'the Lease').spec.renewTime;
    const first = await eventually(async () => (elector.isLeader() ? renewTime() : undefined), { timeoutMs: 30_000 });

    // Right after a renewal R (polled directly, bypassing the proxy), the cut.
    let renewedAt = 0;
    const renewal = await eventually(async () => {
      const rt = await renewTime();
      if (rt === first) return undefined;
      renewedAt = Date.now();
      return rt;
    }, { timeoutMs: 2 * retryPeriodMs, intervalMs: 20 });
    proxy.cut();
    await new Promise((resolve) => setTimeout(resolve, renewedAt + cutUntilMs - Date.now()));
    assert.equal(await renewTime(), renewal, 'no renewal got through the cut');
    assert.equal(elector.isLeader(), true, 'still leading before the deadline');
    proxy.restore();

    // Some request of the process gets an answer (in the manager: an informer reconnecting).
    await rest.json('GET', '/version');
    const answeredAt = Date.now();
    const renewed = await eventually(async () => {
      const rt = await renewTime();
      return rt !== renewal ? rt : undefined;
    }, { timeoutMs: renewDeadlineMs, intervalMs: 20 });
    const renewedAfterMs = Date.now() - renewedAt;
    t.diagnostic(`renewal R → cut → restore at +${cutUntilMs} ms; answer at +${answeredAt - renewedAt} ms; renewed (seen) at +${renewedAfterMs} ms (deadline +${renewDeadlineMs} ms, next retry without the hint +${renewDeadlineMs} ms)`);
    assert.notEqual(renewed, renewal);
    assert.equal(lostAt, undefined, `leadership was lost ${lostAt === undefined ? '' : `at +${lostAt - renewedAt} ms`}`);
    assert.equal(elector.isLeader(), true, 'still the leader after the cut');
    assert.equal(expectStatus<Lease>(await cluster().get(leasePath), 200, 'the Lease').spec.holderIdentity, 'cut-test-leader');
  });
});
