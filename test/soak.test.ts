/**
 * The endurance bench's short version (issue 43): bench/soak's runSoak for ONE cycle on its own private full control
 * plane (it kills and restarts kube-apiserver, so never the shared one) and a private neutron-server — two manager
 * replicas with leader election and every controller, the churn of Foos, Deployments and Networks, every fault once
 * (kube-apiserver crashed and restarted gracefully, etcd compacted under cut-off watches, neutron-server answering 503
 * and slowly, the leader killed), then the checkpoint. It asserts the mechanism and the checkpoint, never a timing:
 * each fault ran and was recovered from (every replica's caches caught up with a write made after it, the leader
 * reconciled a change made after it), the compaction made the watches relist, the churn made every kind of change,
 * the checkpoint found every object converged, Neutron holding exactly the networks it should and every cache equal
 * to the API server's state, and no replica was OOM-killed in its 256 MiB cgroup. The figures are `make soak`'s.
 *
 * Also the bench's arithmetic (bench/soak/stats.ts, promtext.ts, churn.ts's chooseOp), which needs no cluster.
 *
 * Shortened for CI: a lower churn rate and smaller populations than the bench, Neutron faults on every request of a
 * short window, and kube-apiserver's `--request-timeout=15s` (its graceful shutdown waits that long for open watches
 * instead of 60 s).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { chooseOp, fooReplicas, KINDS } from '../bench/soak/churn.ts';
import { histogram, parseSamples, sum } from '../bench/soak/promtext.ts';
import { report } from '../bench/soak/report.ts';
import { defaultSchedule, runSoak, type ScheduledFault } from '../bench/soak/run.ts';
import { bucketDelta, bucketQuantile, RestartingCounter, slope, windowFloors } from '../bench/soak/stats.ts';

const repo = join(import.meta.dirname, '..');

describe('soak arithmetic (bench/soak)', () => {
  test('slope of a line, of noise around a level, and undefined without two distinct x', () => {
    assert.equal(slope([[0, 1], [1, 3], [2, 5]]), 2);
    assert.equal(slope([[0, 5], [1, 4], [2, 6], [3, 5]]), 0.2);
    assert.equal(slope([[1, 1]]), undefined);
    assert.equal(slope([[1, 1], [1, 2]]), undefined);
  });

  test('windowFloors: the minimum of each window, at its middle; a sawtooth over a level has a flat floor', () => {
    const saw = Array.from({ length: 40 }, (_, i): [number, number] => [i * 1000, 100 + (i % 5) * 10]);
    const floors = windowFloors(saw, 10_000);
    assert.deepEqual(floors, [[5000, 100], [15_000, 100], [25_000, 100], [35_000, 100]]);
    assert.equal(slope(floors), 0);
    const leak = Array.from({ length: 40 }, (_, i): [number, number] => [i * 1000, 100 + i + (i % 5) * 10]);
    assert.equal(slope(windowFloors(leak, 10_000)), 0.001, 'a leak of 1 per second raises the floors by 1 per 1000 ms');
  });

  test('bucketQuantile interpolates inside the bucket (histogram_quantile); +Inf gives the highest finite bound', () => {
    const b = new Map([[0.1, 50], [0.5, 90], [1, 100], [Infinity, 100]]);
    assert.equal(bucketQuantile(0.5, b), 0.1);
    assert.ok(Math.abs((bucketQuantile(0.7, b) ?? 0) - 0.3) < 1e-9);
    assert.equal(bucketQuantile(0.99, b), 0.95);
    assert.equal(bucketQuantile(0.99, new Map([[1, 0], [Infinity, 10]])), 1);
    assert.equal(bucketQuantile(0.99, new Map([[1, 0], [Infinity, 0]])), undefined);
    assert.deepEqual([...bucketDelta(b, new Map([[0.1, 40], [0.5, 80], [1, 85], [Infinity, 85]]))], [[0.1, 10], [0.5, 10], [1, 15], [Infinity, 15]]);
  });

  test('RestartingCounter sums what each process counted, across restarts', () => {
    const c = new RestartingCounter();
    c.observe('a#1', 5);
    c.observe('a#1', 8);
    c.observe('a#2', 2); // a new process starts from zero
    c.observe('a#2', 3);
    assert.equal(c.total, 11);
  });

  test('chooseOp keeps a population near its target', () => {
    assert.equal(chooseOp(0, 10, 0.9), 'update', 'below 80 %: mostly creates (an update picks nothing and creates)');
    assert.equal(chooseOp(2, 10, 0.5), 'create');
    assert.equal(chooseOp(20, 10, 0.5), 'delete');
    assert.deepEqual([0.1, 0.5, 0.9].map((r) => chooseOp(10, 10, r)), ['create', 'update', 'delete']);
  });

  test("the churn's Foo replicas stay within the Foo CRD's bounds, and an update changes them", () => {
    // The CRD the bench installs (config/crd): replicas 0 was refused as Invalid, a third of the Foo writes.
    const crd = readFileSync(join(repo, 'config', 'crd', 'bases', 'samplecontroller.k8s.io_foos.yaml'), 'utf8');
    const bounds = /replicas:\n\s+type: integer\n\s+format: int32\n\s+minimum: (\d+)\n\s+maximum: (\d+)/.exec(crd);
    assert.ok(bounds, 'the Foo CRD bounds spec.replicas');
    const [min, max] = [Number(bounds[1]), Number(bounds[2])];
    const rs = [0, 0.2, 0.4, 0.6, 0.8, 0.99];
    for (const r of rs) {
      const created = fooReplicas(r);
      assert.ok(created >= min && created <= max, `created with ${created}`);
      for (const current of [1, 2, 3]) {
        const next = fooReplicas(r, current);
        assert.ok(next >= min && next <= max && next !== current, `${current} → ${next}`);
      }
    }
    assert.deepEqual(new Set(rs.map((r) => fooReplicas(r))), new Set([1, 2, 3]));
  });

  test('parseSamples reads labels with escapes and +Inf; histogram sums the buckets over the other labels', () => {
    const s = parseSamples([
      '# HELP x y',
      'reconcile_time_seconds_bucket{controller="foo",le="0.1"} 3',
      'reconcile_time_seconds_bucket{controller="foo",le="+Inf"} 4',
      'reconcile_time_seconds_bucket{controller="bar",le="0.1"} 1',
      'reconcile_time_seconds_bucket{controller="bar",le="+Inf"} 1',
      'msg_total{msg="a \\"quoted\\" one"} 2',
      'plain 7',
    ].join('\n'));
    assert.deepEqual([...histogram(s, 'reconcile_time_seconds')], [[0.1, 4], [Infinity, 5]]);
    assert.deepEqual([...histogram(s, 'reconcile_time_seconds', { controller: 'foo' })], [[0.1, 3], [Infinity, 4]]);
    assert.equal(sum(s, 'msg_total', { msg: 'a "quoted" one' }), 2);
    assert.equal(sum(s, 'plain'), 7);
  });
});

describe('soak (one cycle of bench/soak on a private control plane and neutron-server)', () => {
  test('every fault is recovered from; the checkpoint finds every object converged, Neutron exact and every cache equal to the API server', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tscm-soak-test-'));
    const lines: string[] = [];
    const log = (m: string): void => void lines.push(`${new Date().toISOString().slice(11, 19)} ${m}`);
    // The bench's faults, in its order, one right after the other.
    const schedule: ScheduledFault[] = defaultSchedule.map((f, i) => ({ kind: f.kind, at: i * 0.1 }));
    assert.equal(new Set(schedule.map((f) => f.kind)).size, 6, 'every kind of fault');
    let ok = false;
    try {
      const out = await runSoak({
        minutes: 20, maxCycles: 1, dir, script: join(repo, 'cmd', 'manager', 'main.ts'), rate: 8,
        targets: { foo: 20, deployment: 10, network: 8 }, weights: { foo: 0.45, deployment: 0.3, network: 0.25 },
        cycleMs: 60_000, schedule, neutronWindow: 0.1, neutronShare: 1, warmupMs: 0, sampleIntervalMs: 5000,
        memoryLimitMiB: 256, convergeTimeoutMs: 240_000, cacheTimeoutMs: 60_000, cutMs: 5000, restartDelayMs: 1000,
        apiserverArgs: ['--request-timeout=15s'], log,
      });

      assert.deepEqual(out.errors, [], 'every scheduled fault ran');
      assert.deepEqual(out.faults.map((f) => f.kind), schedule.map((f) => f.kind));
      for (const f of out.faults) {
        if (f.kind === 'neutron-errors' || f.kind === 'neutron-slow') {
          assert.ok((f.affected ?? 0) > 0, `${f.kind}: some of the managers' Neutron requests were refused or delayed`);
          continue;
        }
        const r = f.recovery;
        assert.ok(r, `${f.kind}: recovery measured`);
        assert.ok(r.reconcileMs !== undefined, `${f.kind}: the leader reconciled a change made after it`);
        for (const [replica, ms] of Object.entries(r.cachesMs)) {
          assert.ok(ms !== undefined, `${f.kind}: replica ${replica}'s caches hold a write made after it`);
        }
      }
      const compaction = out.faults.find((f) => f.kind === 'compaction');
      assert.ok((compaction?.recovery?.lists ?? 0) > 0, 'the compaction made watches relist (410 Gone)');
      const killed = out.replicas.flatMap((r) => r.exits).filter((e) => e.killedByBench);
      assert.equal(killed.length, 1, 'the leader was killed once');
      const victim = out.replicas.find((r) => r.exits.some((e) => e.killedByBench));
      assert.notEqual(victim?.incarnation, killed[0]?.incarnation, 'the killed replica was started again');

      assert.equal(out.churn.failures.get('422 Invalid') ?? 0, 0, `no change of the churn was refused as invalid (${[...out.churn.failures].map(([w, n]) => `${n} ${w}`).join(', ')})`);
      for (const k of KINDS) {
        for (const op of ['create', 'update', 'delete']) {
          assert.ok((out.churn.counts.get(`${k} ${op}`)?.ok ?? 0) > 0, `the churn made a ${k} ${op}`);
        }
      }

      assert.equal(out.checkpoints.length, 1);
      const cp = out.checkpoints[0];
      assert.ok(cp);
      assert.deepEqual(cp.report.problems, [], 'every object converged');
      assert.equal(cp.converged, true);
      assert.deepEqual({ leaked: cp.report.counts.leaked, duplicated: cp.report.counts.duplicated, untagged: cp.report.counts.untagged },
        { leaked: 0, duplicated: 0, untagged: 0 }, 'Neutron holds exactly the networks it should');
      assert.ok(cp.report.counts.networks > 0 && cp.report.counts.foos > 0 && cp.report.counts.deployments > 0);
      assert.deepEqual(cp.mismatches, [], 'every cache equals the API server');
      assert.ok(cp.cachesCompared >= 6, `both replicas' informers compared (${cp.cachesCompared})`);

      assert.ok(out.sampler.samples.length > 0, 'the replicas were sampled');
      assert.ok(out.sampler.samples.every((s) => s.rss > 0 && s.heapUsed > 0));
      // The event loop's longest stall per sample is read too (a p99 cannot show one stall of seconds).
      assert.ok(out.sampler.samples.every((s) => s.loopMax !== undefined && s.loopMax > 0 && s.loopMax >= s.loopP99),
        `loopMax sampled: ${out.sampler.samples.slice(0, 3).map((s) => `${s.loopMax}/${s.loopP99}`).join(' ')}`);
      for (const s of out.sampler.samples) {
        // The split by layout (bench/soak/memparts.ts) finds V8's pages and malloc's main arena in a real manager, and
        // accounts for nearly all of its anonymous memory (the rest: copy-on-write pages of mapped files).
        const a = s.anon;
        assert.ok(a && a.v8Pages > 0 && a.mallocMain > 0, `${s.incarnation}: anonymous memory split (${JSON.stringify(a)})`);
        const total = a.v8Pages + a.v8Code + a.mallocMain + a.mallocThreads + a.other;
        assert.ok(total > 0.8 * s.rssAnon && total < 1.05 * s.rssAnon, `${s.incarnation}: parts ${total} of RssAnon ${s.rssAnon}`);
      }
      const rep = report({
        startedAt: out.startedAt, endedAt: out.endedAt, warmupMs: 0, minGrowthSpanMs: 60_000, samples: out.sampler.samples,
        faults: out.faults, checkpoints: out.checkpoints, churn: out.churn, churnMs: out.churnMs, logs: out.logs, replicas: out.replicas,
      });
      const verdict = (name: string): string | undefined => rep.goals.find((g) => g.name.startsWith(name))?.verdict;
      assert.equal(verdict('0 checkpoint mismatches'), 'met');
      assert.equal(verdict('0 leaked or duplicated'), 'met');
      assert.ok(out.logs.total > 0, 'the replicas\' log lines were counted');
      for (const r of out.replicas) assert.equal(r.cgroupStats()?.oomKills, 0, `replica ${r.name} not OOM-killed at 256 MiB`);
      ok = true;
    } finally {
      if (!ok) process.stderr.write(`soak test log (working directory ${dir} kept):\n${lines.join('\n')}\n`);
      else rmSync(dir, { recursive: true, force: true });
    }
  });
});
