/**
 * SIGTERM hand-over of the leader Lease without waiting for a poll (issue 26: "Lease handed over in ≤ 3 s"), with
 * two real manager processes against the real kube-apiserver.
 *
 * The old leader releases the Lease on SIGTERM (holderIdentity "", pkg/manager/leaderelection.ts). A standby that
 * only polls notices at its next attempt, `retryPeriod × (1 + 1.2·rand)` after its previous one. Here the retry
 * period is 30 s, so a take-over sooner than 30 s after the standby's first poll is impossible by polling: it proves
 * the standby's Lease watch woke it (a causal assertion, not a timing one). The release→acquire gap is reported.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cluster, testNamespace, waitFor } from './helpers/cluster.ts';
import { ManagerProcess, type LogLine } from './helpers/managerprocess.ts';

const retryPeriodMs = 30_000;
const le = ['--leader-elect', '--leader-elect-lease-duration=90s', '--leader-elect-renew-deadline=40s', `--leader-elect-retry-period=${retryPeriodMs / 1000}s`];

const at = (l: LogLine): number => Date.parse(String(l.time));
const acquired = (l: LogLine): boolean => l.msg === 'successfully acquired lease';

describe('leader Lease watch (standby)', () => {
  test('a released Lease is taken over before the standby\'s next poll could have run', async (t) => {
    const cp = cluster();
    const ns = await testNamespace(t, 'lew');
    const lease = 'tscm-le-watch';
    const start = (): Promise<ManagerProcess> => ManagerProcess.start({
      args: [`--kubeconfig=${cp.kubeconfig}`, '--controllers=deployment', `--leader-election-namespace=${ns}`, `--leader-election-id=${lease}`, ...le],
      env: { WATCH_NAMESPACE: ns }, metrics: false,
    });
    const ms: ManagerProcess[] = [];
    t.after(async () => {
      await Promise.all(ms.map((m) => m.stop('SIGKILL')));
    });

    const leader = await start();
    ms.push(leader);
    await leader.waitForLog('first manager leads', acquired, { timeoutMs: 60_000 });
    const standby = await start();
    ms.push(standby);
    // The standby's first poll: it read the Lease and saw the leader (logged before its first retry sleep starts,
    // so its next poll cannot start before this line's time + retryPeriod).
    const firstPoll = await standby.waitForLog('standby polled and saw the leader', (l) => l.msg === 'new leader observed' && l['holder'] !== '', { timeoutMs: 60_000 });
    assert.ok(!standby.logs.some(acquired), 'the standby did not acquire a held Lease');

    assert.equal(await leader.stop('SIGTERM'), 0, 'the old leader exits 0');
    const released = leader.logs.find((l) => l.msg === 'released leader lease');
    assert.ok(released, 'the old leader released the Lease');
    // Waits longer than a poll would take, so that a failure shows when polling (not the watch) took over.
    const took = await standby.waitForLog('standby acquires', acquired, { timeoutMs: 3 * retryPeriodMs });
    const sincePoll = at(took) - at(firstPoll);
    const gap = at(took) - at(released);
    t.diagnostic(`release → acquire: ${gap} ms; first poll → acquire: ${sincePoll} ms (next poll no sooner than ${retryPeriodMs} ms)`);
    assert.ok(sincePoll < retryPeriodMs, `acquired ${sincePoll} ms after the first poll: only a poll (≥ ${retryPeriodMs} ms) explains it, not the watch`);
    await waitFor('the new leader runs the controllers', () => standby.logs.some((l) => l.msg === 'starting leader-election runnables'), { timeoutMs: 30_000 });
  });
});
