/**
 * bench/profile-summary.ts --diff, the leak hunt's tool (issue 43: memory growth of the endurance bench): objects
 * retained between two heap snapshots of the same process show as growth of their constructor, by count and size,
 * and garbage does not (V8 collects before a snapshot).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeHeapSnapshot } from 'node:v8';
import { diffSnapshots, type HeapSnapshot } from '../bench/profile-summary.ts';

class RetainedProbe {
  readonly payload: number[];
  constructor(i: number) {
    this.payload = [i, i + 1, i + 2];
  }
}
class GarbageProbe {
  readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
}

test('diffSnapshots: 5000 retained objects show as growth of their constructor; 5000 dropped ones do not', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tscm-snapdiff-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const read = (f: string): HeapSnapshot => JSON.parse(readFileSync(f, 'utf8')) as HeapSnapshot;
  const before = read(writeHeapSnapshot(join(dir, 'a.heapsnapshot')));
  const kept: RetainedProbe[] = [];
  for (let i = 0; i < 5000; i++) kept.push(new RetainedProbe(i));
  let dropped: GarbageProbe[] | undefined = [];
  for (let i = 0; i < 5000; i++) dropped.push(new GarbageProbe(i));
  dropped = undefined;
  const after = read(writeHeapSnapshot(join(dir, 'b.heapsnapshot')));
  const d = diffSnapshots(before, after, 1_000_000);
  const retained = d.rows.find((r) => r.name === 'RetainedProbe');
  assert.equal(retained?.deltaCount, 5000, d.markdown);
  assert.ok(retained.deltaBytes > 0);
  assert.equal(d.rows.find((r) => r.name === 'GarbageProbe')?.deltaCount ?? 0, 0, d.markdown);
  assert.ok(d.deltaBytes > 0);
  assert.match(d.markdown, /\| `RetainedProbe` \| [\d.]+ \| 5000 \|/);
  assert.equal(kept.length, 5000);
  assert.equal(dropped, undefined);
});
