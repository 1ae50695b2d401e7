/**
 * README.md: "`make test` must run as root … as another user it stops at once with one line saying so". Runs
 * `make test` as the unprivileged user 65534 (setpriv) with this checkout's Makefile: its first prerequisite,
 * require-root, must stop it with exit 2 before any other recipe runs (no `npm ci`, no tool build, no test), and the
 * only lines are that one and make's own error line. No cluster needed; the test itself runs as root (as `make test`
 * does). The Makefile is copied into a directory user 65534 can enter: a clone may be one it cannot (`git clone .
 * $(mktemp -d)` is 0700), and make would then fail on reading the Makefile, not on the rule.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const repo = join(import.meta.dirname, '..');

test('make test as a non-root user stops at once with one line saying why, before any other recipe runs', () => {
  assert.equal(process.getuid?.(), 0, 'this test switches to another user, so it runs as root (as make test does)');
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/tmp' };
  const dir = mkdtempSync(join(tmpdir(), 'tscm-make-root-'));
  chmodSync(dir, 0o755);
  copyFileSync(join(repo, 'Makefile'), join(dir, 'Makefile'));
  const res = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'make', '--no-print-directory', 'test'],
    // stdin not a socket (Node's pipes are socketpairs): bash takes a socket on stdin for rshd and reads bash.bashrc.
    { cwd: dir, env, encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });
  rmSync(dir, { recursive: true, force: true });
  assert.equal(res.error, undefined, String(res.error));
  const lines = `${res.stdout}${res.stderr}`.split('\n').filter((l) => l.trim() !== '');
  assert.equal(res.status, 2, lines.join('\n'));
  const own = lines.filter((l) => !l.startsWith('make: '));
  assert.equal(own.length, 1, `one line of its own, no recipe output:\n${lines.join('\n')}`);
  assert.match(own[0] ?? '', /^make test: must run as root: the real-node suite \(.*\) creates a network namespace, cgroups and mounts/);
  assert.deepEqual(lines.filter((l) => l.startsWith('make: ')).map((l) => l.replace(/\d+/g, 'N')), ['make: *** [Makefile:N: require-root] Error N']);
});
