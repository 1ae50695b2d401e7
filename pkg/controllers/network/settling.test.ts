import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SettleWindows } from './settling.ts';

test('settle windows: open, end, close; an ended window is dropped when another opens (a Network that left without its window closed)', () => {
  let now = 1_000;
  const w = new SettleWindows(() => now);
  w.open('a', 60_000);
  assert.equal(w.end('a'), 61_000);
  now = 2_000;
  w.open('b', 60_000);
  assert.equal(w.size, 2, 'both open');
  now = 61_000; // a's window ended; a's Network left (another replica finalized it): nobody closes it
  w.open('c', 60_000);
  assert.equal(w.end('a'), undefined, 'the ended window is gone');
  assert.deepEqual([w.end('b'), w.end('c'), w.size], [62_000, 121_000, 2]);
  w.open('b', 60_000); // reopened before it ended: moved
  assert.equal(w.end('b'), 121_000);
  w.close('b');
  assert.deepEqual([w.end('b'), w.size], [undefined, 1]);
});

test("settle windows: Networks created and gone without finalize, one a second for an hour, leave at most a window's worth", () => {
  let now = 0;
  const w = new SettleWindows(() => now);
  for (let i = 0; i < 3_600; i++, now += 1_000) w.open(`uid-${i}`, 60_000);
  assert.ok(w.size <= 61, `${w.size} windows held`);
});
