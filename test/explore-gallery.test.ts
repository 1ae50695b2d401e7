/**
 * Proof that `explore` finds bugs (issue 40): every deliberately buggy controller of test/explore/gallery.ts is
 * reported in its class, and the same controller with the bug fixed gets no finding at all — so what is reported is
 * the bug, not the tester. In-memory API server only (fast); the real-server mode is proven in test/explore.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { explore, formatFindings } from '../pkg/testing/index.ts';
import { Cloud, gallery, gizmoCRD } from './explore/gallery.ts';

describe('explore finds each bug of the gallery in its class, and nothing once it is fixed', () => {
  for (const entry of gallery) {
    const run = (fixed: boolean) => explore<Cloud>({
      name: `${entry.name}${fixed ? ' (fixed)' : ''}`, crdPaths: [gizmoCRD], world: () => new Cloud(), externalState: (c) => c.inventory(),
      setup: (mgr, cloud) => entry.setup(mgr, cloud, fixed), workload: entry.workload,
    });

    test(`${entry.name}: reported as ${entry.expect.kind} / ${entry.expect.class} (${entry.bug})`, async () => {
      const report = await run(false);
      const hit = report.findings.filter((f) => f.kind === entry.expect.kind && f.class === entry.expect.class && (!entry.expect.summary || entry.expect.summary.test(f.summary)));
      assert.ok(hit.length > 0, `expected a ${entry.expect.kind} finding of class ${entry.expect.class}:\n${formatFindings(report)}`);
      for (const f of hit) {
        assert.match(f.replay, /^EXPLORE_PLAN='[^']+' node --test \S+/, 'every finding has a one-line replay command');
        assert.equal(f.seed, 1);
      }
    });

    test(`${entry.name}, fixed: no finding in any plan`, async () => {
      const report = await run(true);
      assert.deepEqual(report.findings, [], formatFindings(report));
      assert.ok(report.executed > 0 || entry.expect.class === 'reference', 'plans ran');
    });
  }
});
