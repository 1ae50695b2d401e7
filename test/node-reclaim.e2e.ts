/**
 * hack/node/node.sh's ownership of the one real node per machine (docs/real-node.md), system side only — no
 * control plane. A run killed before `node.sh down` (CI's time limit, a session that ended) leaves the network
 * namespace `tscm-node`, its cgroups, mounts and the processes that were in it; the next run must reclaim that node,
 * not fail on it (a fresh-clone CI failed so: "network namespace tscm-node exists"). A node whose owner still runs
 * must be refused, never taken over. Runs first in the node suite (`make test-node`, `make test`); needs root; ~2 s.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { NODE_NETNS, nodeScript } from './cluster/node.ts';
import { waitFor } from './helpers/cluster.ts';

const OWNER_FILE = '/run/tscm-node.owner';

function netnsExists(): boolean {
  return spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout.split('\n').some((l) => l.split(' ')[0] === NODE_NETNS);
}

/** `node.sh <action> <dir>` run by a Node process of its own, which exits when it returns: the node's owner. */
function nodeShFromShortLivedOwner(action: 'up' | 'down', dir: string, env: NodeJS.ProcessEnv = process.env): { status: number | null; stderr: string } {
  const code = `const r = require('node:child_process').spawnSync('bash', ${JSON.stringify([nodeScript, action, dir])}, { encoding: 'utf8' });
process.stderr.write(r.stderr); process.exit(r.status ?? 1);`;
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env });
  return { status: r.status, stderr: r.stderr };
}

describe('hack/node/node.sh: a node left by a killed run', () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  const mkdir = (): string => { const d = mkdtempSync(join(tmpdir(), 'tscm-node-reclaim-')); dirs.push(d); return d; };
  after(() => {
    for (const c of children) c.kill('SIGKILL');
    for (const d of dirs) spawnSync('bash', [nodeScript, 'down', d]);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('is reclaimed (its processes killed, its namespace made again) when its owner is gone; a live owner\'s node is refused', async () => {
    assert.equal(netnsExists(), false, `network namespace ${NODE_NETNS} exists before the node suite: a node is running on this machine`);

    // A run that brought its node up and died without `down`: its owner exits, a process stays in the namespace
    // (as containerd and the kubelet do when their runner is SIGKILLed).
    const dead = mkdir();
    const up1 = nodeShFromShortLivedOwner('up', dead);
    assert.equal(up1.status, 0, up1.stderr);
    const ownerPid = Number(readFileSync(OWNER_FILE, 'utf8').split(' ')[0]);
    const orphan = spawn('ip', ['netns', 'exec', NODE_NETNS, 'sleep', '600'], { stdio: 'ignore' });
    // Its control plane (spawned detached, so alive too), recorded in <dir>/state.json as ControlPlane does; and a
    // pid there that now names another process (reused): that one must live.
    const idle = ['-e', 'setTimeout(() => {}, 600_000)'];
    const component = spawn(process.execPath, [...idle, join(dead, 'etcd')], { stdio: 'ignore' });
    const bystander = spawn(process.execPath, idle, { stdio: 'ignore' });
    children.push(orphan, component, bystander);
    writeFileSync(join(dead, 'state.json'), JSON.stringify({
      dir: dead, components: { etcd: { pid: component.pid }, 'kube-apiserver': { pid: bystander.pid } },
    }, null, 2));
    await waitFor('the orphan in the namespace',
      () => spawnSync('ip', ['netns', 'pids', NODE_NETNS], { encoding: 'utf8' }).stdout.trim() !== '', { timeoutMs: 10_000 });

    // The next run (this process) reclaims it.
    const live = mkdir();
    const up2 = spawnSync('bash', [nodeScript, 'up', live], { encoding: 'utf8' });
    assert.equal(up2.status, 0, `node.sh up over a dead owner's node failed: ${up2.stderr}`);
    assert.match(up2.stderr, new RegExp(`reclaiming the node left by a run that ended without 'down' \\(owner pid ${ownerPid}, ${dead}\\)`));
    await waitFor('the orphan killed', () => orphan.exitCode !== null || orphan.signalCode !== null, { timeoutMs: 10_000 });
    assert.equal(orphan.signalCode, 'SIGKILL');
    await waitFor('its control plane killed', () => component.signalCode === 'SIGKILL', { timeoutMs: 10_000 });
    assert.equal(bystander.exitCode ?? bystander.signalCode, null, 'a recorded pid whose command line does not name the directory is left alone');
    assert.equal(netnsExists(), true);
    assert.equal(readFileSync(OWNER_FILE, 'utf8').split(' ')[0], String(process.pid), 'the owner recorded is the process that ran node.sh up');

    // Its owner (this process) lives: another run is refused and the node is untouched.
    const up3 = nodeShFromShortLivedOwner('up', mkdir());
    assert.equal(up3.status, 1);
    assert.match(up3.stderr, new RegExp(`network namespace ${NODE_NETNS} exists: the node of pid ${process.pid} \\(${live}\\) is running`));
    assert.equal(readFileSync(OWNER_FILE, 'utf8').split(' ')[0], String(process.pid));

    const down = spawnSync('bash', [nodeScript, 'down', live], { encoding: 'utf8' });
    assert.equal(down.status, 0, down.stderr);
    assert.equal(netnsExists(), false);
    assert.throws(() => readFileSync(OWNER_FILE), /ENOENT/, 'down removes the owner record');
  });

  test('a node made to outlive its process (make cluster-up: TSCM_NODE_OWNER_PID=0) is never reclaimed', () => {
    const kept = mkdir();
    const up1 = nodeShFromShortLivedOwner('up', kept, { ...process.env, TSCM_NODE_OWNER_PID: '0' });
    assert.equal(up1.status, 0, up1.stderr);
    const up2 = spawnSync('bash', [nodeScript, 'up', mkdir()], { encoding: 'utf8' });
    assert.equal(up2.status, 1);
    assert.match(up2.stderr, new RegExp(`the node of ${kept} runs until it is stopped \\(make cluster-down CLUSTER_DIR=${kept}\\)`));
    assert.equal(netnsExists(), true);
    const down = spawnSync('bash', [nodeScript, 'down', kept], { encoding: 'utf8' });
    assert.equal(down.status, 0, down.stderr);
    assert.equal(netnsExists(), false);
  });

  test('down after a partial clean-up (the node\'s cgroups already gone) still removes the namespace and the owner record', () => {
    const dir = mkdir();
    const up = spawnSync('bash', [nodeScript, 'up', dir], { encoding: 'utf8' });
    assert.equal(up.status, 0, up.stderr);
    // What a hand clean-up after a killed run leaves (seen 28 Nov: `down` then exited 1 at its first step, the
    // namespace and the host's veth stayed, and the next run's `up` failed with "RTNETLINK answers: File exists").
    spawnSync('bash', ['-c', 'for h in /sys/fs/cgroup/*/tscm-node; do [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \\; ; done; true']);
    assert.equal(spawnSync('bash', ['-c', 'ls -d /sys/fs/cgroup/*/tscm-node 2>/dev/null']).stdout.length, 0, 'the node\'s cgroups are gone');
    const down = spawnSync('bash', [nodeScript, 'down', dir], { encoding: 'utf8' });
    assert.equal(down.status, 0, down.stderr);
    assert.equal(netnsExists(), false, 'the namespace is gone');
    assert.throws(() => readFileSync(OWNER_FILE), /ENOENT/, 'down removes the owner record');
  });
});
