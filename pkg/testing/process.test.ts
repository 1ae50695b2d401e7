import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freePort } from './process.ts';

test('freePort never hands out the same port twice in one process (two servers of one manager collided on it)', async () => {
  // The kernel picks bind(0) ports at random from its range, so a port just closed comes back by chance: a soak
  // replica got 127.0.0.1:43157 for both its probe and its metrics server and exited EADDRINUSE. 1 000 draws from
  // the ~14 000 ports bind(0) uses repeat ~35 times without the process's memory of what it handed out.
  const ports: number[] = [];
  for (let i = 0; i < 1000; i++) ports.push(await freePort());
  const repeated = ports.filter((p, i) => ports.indexOf(p) !== i);
  assert.deepEqual(repeated, [], 'no port handed out twice');
});
