/**
 * The profiling endpoint, started the way users start it: a ControllerManager with `pprofBindAddress` on a free
 * loopback port (its API server is unreachable and unused: no controllers, so nothing is listed). The non-loopback
 * path's 403/200 decisions use a fake AccessReviewer (deterministic answers; the TokenReview/SubjectAccessReview
 * client itself is metricsserver.ts's, tested there and against a real API server in test/metrics*.test.ts).
 */
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, it, test } from 'node:test';
import { Registry } from 'prom-client';
import { KubeConfig } from '../client/kubeconfig.ts';
import { silentLogger } from '../log/logger.ts';
import { ControllerManager, type ControllerManagerOptions } from '../runtime/manager.ts';
import { freePort } from '../testing/process.ts';
import type { AccessReviewer, AuthorizationAttributes, UserInfo } from './metricsserver.ts';
import { isLoopback, newPprofServer, PprofServer } from './pprof.ts';
import { parseBindAddress } from './httpserver.ts';

function manager(extra: Partial<ControllerManagerOptions>): ControllerManager {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
  });
  return new ControllerManager({ kubeConfig, registry: new Registry(), logger: silentLogger, gracefulShutdownTimeoutMs: 10_000, ...extra });
}

/** Polls `fn` every 20 ms until it returns a value other than undefined (or throws after `timeoutMs`). */
async function poll<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function listeningServers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

interface HeapNode { callFrame: { functionName: string }; selfSize: number; children: HeapNode[] }

describe('pprof endpoint on loopback (ControllerManager pprofBindAddress)', () => {
  let base = '';
  const ac = new AbortController();
  let mgr: ControllerManager;
  let running: Promise<number>;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}/debug/pprof`;
    mgr = manager({ pprofBindAddress: `127.0.0.1:${port}` });
    running = mgr.start(ac.signal);
    await poll('pprof index', async () => ((await fetch(`${base}/`)).status === 200 ? true : undefined));
  });

  after(async () => {
    ac.abort();
    assert.equal(await running, 0);
  });

  it('serves an index naming every endpoint (also at /debug/pprof without the slash)', async () => {
    for (const url of [`${base}/`, base]) {
      const res = await fetch(url);
      assert.equal(res.status, 200);
      const body = await res.text();
      for (const p of ['profile?seconds=N', 'heap?seconds=N', 'heapstats', 'heapsnapshot']) assert.ok(body.includes(`/debug/pprof/${p}`), p);
      assert.match(body, /Loopback only: no authentication/);
    }
  });

  it('a 1 s CPU profile is a V8 CPU profile DevTools reads (nodes, samples, timeDeltas, startTime < endTime)', async () => {
    const t0 = performance.now();
    // Keep the CPU busy in this process so the profile has samples of a named function.
    const res = fetch(`${base}/profile?seconds=1`);
    let settled = false;
    void res.then(() => { settled = true; }, () => { settled = true; });
    let x = 0;
    // Bursts of 20 ms until the answer arrives, the event loop free between them (the server answering the profile
    // request runs in this process): whenever the profiler starts, however late under load, it samples this function.
    const busyLoopForProfile = (): void => {
      const until = performance.now() + 20;
      while (performance.now() < until) x += Math.sqrt(x + 1);
    };
    while (!settled) {
      busyLoopForProfile();
      await new Promise((r) => setImmediate(r));
    }
    const r = await res;
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-disposition') ?? '', /filename="profile-.*\.cpuprofile"/);
    const p = (await r.json()) as CpuProfile;
    assert.ok(performance.now() - t0 >= 1000, 'took the whole window');
    assert.ok(Array.isArray(p.nodes) && p.nodes.length > 1);
    assert.equal(p.nodes[0]?.callFrame.functionName, '(root)');
    assert.ok(p.samples.length > 100, `samples: ${p.samples.length}`);
    assert.equal(p.samples.length, p.timeDeltas.length);
    assert.ok(p.endTime - p.startTime >= 900_000, `µs: ${p.endTime - p.startTime}`);
    const ids = new Set(p.nodes.map((n) => n.id));
    assert.ok(p.samples.every((s) => ids.has(s)), 'every sample names a node');
    assert.ok(p.nodes.some((n) => n.callFrame.functionName === 'busyLoopForProfile'), 'the busy function was sampled');
  });

  it('a second CPU profile while one runs gets 409; the first completes', async () => {
    const first = fetch(`${base}/profile?seconds=1`);
    const second = await poll('409 for a concurrent profile', async () => {
      const r = await fetch(`${base}/profile?seconds=1`);
      return r.status === 409 ? r : (await r.body?.cancel(), undefined);
    }, 900);
    assert.match(await second.text(), /a CPU profile is already being taken/);
    assert.equal((await first).status, 200);
  });

  it('a 1 s sampling heap profile parses (head with children, samples); allocated=1 also samples collected objects', async () => {
    const names = (n: HeapNode): string[] => [n.callFrame.functionName, ...n.children.flatMap(names)];
    for (const allocated of [false, true]) {
      const res = fetch(`${base}/heap?seconds=1${allocated ? '&allocated=1' : ''}`);
      let kept: { i: number; s: string }[] = [];
      const allocateForHeapProfile = (): void => {
        for (let i = 0; i < 50_000; i++) kept.push({ i, s: `x${i}` });
      };
      await new Promise((r) => setTimeout(r, 200));
      allocateForHeapProfile();
      if (allocated) kept = []; // garbage by the end: only an allocation profile still shows it
      const r = await res;
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-disposition') ?? '', /\.heapprofile"/);
      const p = (await r.json()) as { head: HeapNode; samples: { size: number; nodeId: number }[] };
      assert.equal(p.head.callFrame.functionName, '(root)');
      assert.ok(p.head.children.length > 0);
      assert.ok(p.samples.length > 0 && p.samples.every((s) => s.size > 0));
      assert.ok(names(p.head).includes('allocateForHeapProfile'), `allocated=${allocated}: the allocating function is in the tree`);
      assert.ok(kept.length >= 0);
    }
    assert.equal((await fetch(`${base}/heap?seconds=1&allocated=maybe`)).status, 400);
  });

  it('heapstats has V8 heap, space and process memory fields', async () => {
    const r = await fetch(`${base}/heapstats`);
    assert.equal(r.status, 200);
    const s = (await r.json()) as {
      heap: Record<string, number>; spaces: { space_name: string; space_used_size: number }[]; memory: Record<string, number>; code: Record<string, number>;
    };
    for (const k of ['total_heap_size', 'used_heap_size', 'heap_size_limit', 'external_memory']) assert.equal(typeof s.heap[k], 'number', k);
    assert.ok(s.spaces.some((sp) => sp.space_name === 'old_space' && sp.space_used_size > 0));
    for (const k of ['rss', 'heapTotal', 'heapUsed', 'external', 'arrayBuffers']) assert.ok((s.memory[k] ?? 0) > 0 || k === 'arrayBuffers', k);
    assert.equal(typeof s.code['code_and_metadata_size'], 'number');
  });

  it('a heap snapshot streams as JSON with snapshot.meta', async () => {
    const r = await fetch(`${base}/heapsnapshot`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-disposition') ?? '', /\.heapsnapshot"/);
    const snap = (await r.json()) as { snapshot: { meta: { node_fields: string[] }; node_count: number }; nodes: number[] };
    assert.ok(snap.snapshot.meta.node_fields.includes('self_size'));
    assert.ok(snap.snapshot.node_count > 1000);
    assert.equal(snap.nodes.length, snap.snapshot.node_count * snap.snapshot.meta.node_fields.length);
  });

  it('a bad seconds is 400; other methods 405; unknown paths 404', async () => {
    for (const q of ['0', '301', 'abc', '1.5', '-1', '', '1e2']) {
      for (const ep of ['profile', 'heap']) {
        const r = await fetch(`${base}/${ep}?seconds=${q}`);
        assert.equal(r.status, 400, `${ep}?seconds=${q}`);
        assert.match(await r.text(), /invalid seconds .*: want an integer 1\.\.300/);
      }
    }
    assert.equal((await fetch(`${base}/heapstats`, { method: 'POST' })).status, 405);
    assert.equal((await fetch(`${base}/goroutine`)).status, 404);
    assert.equal((await fetch(`http://${new URL(base).host}/metrics`)).status, 404);
  });

  it('a client that goes away stops the profiler: the next profile is admitted at once', async () => {
    const client = new AbortController();
    const long = fetch(`${base}/profile?seconds=300`, { signal: client.signal });
    // Wait until the long profile holds the CPU-profile slot (a probe gets 409), then hang up.
    await poll('the long profile running', async () => {
      const r = await fetch(`${base}/profile?seconds=1`);
      await r.body?.cancel();
      return r.status === 409 ? true : undefined;
    });
    client.abort();
    await assert.rejects(long);
    const t0 = performance.now();
    const next = await poll('a new profile admitted', async () => {
      const r = await fetch(`${base}/profile?seconds=1`);
      return r.status === 200 ? r : (await r.body?.cancel(), undefined);
    }, 5_000);
    assert.ok(((await next.json()) as CpuProfile).samples.length > 0);
    assert.ok(performance.now() - t0 < 3_000, 'the 300 s profile did not hold the slot');
  });
});

test('manager shutdown ends a running profile (503) and the manager stops promptly', async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}/debug/pprof`;
  const ac = new AbortController();
  const mgr = manager({ pprofBindAddress: `127.0.0.1:${port}` });
  const running = mgr.start(ac.signal);
  await poll('pprof index', async () => ((await fetch(`${base}/`)).status === 200 ? true : undefined));
  const long = fetch(`${base}/heap?seconds=300`);
  await poll('the heap profile running', async () => {
    const r = await fetch(`${base}/heap?seconds=1`);
    await r.body?.cancel();
    return r.status === 409 ? true : undefined;
  });
  const t0 = performance.now();
  ac.abort();
  const r = await long;
  assert.equal(r.status, 503);
  assert.equal(await running, 0);
  assert.ok(performance.now() - t0 < 5_000, `stopped in ${performance.now() - t0} ms`);
});

test('off by default: no listener without pprofBindAddress, one with it; "0" and "" build nothing', async () => {
  assert.equal(newPprofServer({ bindAddress: '0' }), undefined);
  assert.equal(newPprofServer({ bindAddress: '' }), undefined);
  for (const [extra, want] of [[{}, 0], [{ pprofBindAddress: '0' }, 0], [{ pprofBindAddress: '' }, 0], [{ pprofBindAddress: '127.0.0.1:0' }, 1]] as const) {
    const before = listeningServers();
    const ac = new AbortController();
    const mgr = manager(extra);
    const running = mgr.start(ac.signal);
    await poll('controllers started', () => Promise.resolve(mgr.controllersStarted() ? true : undefined));
    // A listener, when there is one, is up once the runnable started; give a bound server a moment to appear.
    if (want === 1) await poll('a listener', () => Promise.resolve(listeningServers() > before ? true : undefined));
    assert.equal(listeningServers() - before, want, JSON.stringify(extra));
    ac.abort();
    assert.equal(await running, 0);
  }
});

test('isLoopback: 127.0.0.0/8, ::1 and localhost only; all interfaces is not loopback', () => {
  const lo = (a: string): boolean => isLoopback(parseBindAddress(a) ?? assert.fail('disabled'));
  for (const a of ['127.0.0.1:6060', '127.1.2.3:1', '[::1]:6060', 'localhost:6060', 'LOCALHOST:1']) assert.equal(lo(a), true, a);
  for (const a of [':6060', '0.0.0.0:6060', '[::]:6060', '10.0.0.1:6060', '192.0.2.2:1', 'example.com:1']) assert.equal(lo(a), false, a);
});

/** Deterministic fake of the API server's reviews: "good" may get /debug/pprof/*, "dev" is a user with no access. */
class FakeReviewer implements AccessReviewer {
  readonly authz: AuthorizationAttributes[] = [];
  authenticate(token: string): Promise<UserInfo | undefined> {
    return Promise.resolve(token === 'good' ? { username: 'ops' } : token === 'dev' ? { username: 'dev' } : undefined);
  }
  authorize(user: UserInfo, attrs: AuthorizationAttributes): Promise<{ allowed: boolean }> {
    this.authz.push(attrs);
    return Promise.resolve({ allowed: user.username === 'ops' && attrs.path.startsWith('/debug/pprof/') && attrs.verb === 'get' });
  }
}

function httpsGet(port: number, path: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port, path, rejectUnauthorized: false, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

test('non-loopback address: HTTPS, 401 without a token, 403 without RBAC, 200 when allowed (path + verb reviewed)', async () => {
  const reviewer = new FakeReviewer();
  const server = new PprofServer({ bindAddress: '0.0.0.0:0', reviewer, logger: silentLogger });
  assert.equal(server.secure, true);
  const ac = new AbortController();
  const running = server.start(ac.signal);
  try {
    const { port } = await server.listening;
    const noToken = await httpsGet(port, '/debug/pprof/heapstats');
    assert.equal(noToken.status, 401);
    assert.equal((await httpsGet(port, '/debug/pprof/heapstats', 'unknown')).status, 401);
    const forbidden = await httpsGet(port, '/debug/pprof/heapsnapshot', 'dev');
    assert.equal(forbidden.status, 403);
    assert.match(forbidden.body, /user "dev" cannot get path "\/debug\/pprof\/heapsnapshot"/);
    const ok = await httpsGet(port, '/debug/pprof/heapstats', 'good');
    assert.equal(ok.status, 200);
    assert.ok((JSON.parse(ok.body) as { memory: { rss: number } }).memory.rss > 0);
    assert.deepEqual(reviewer.authz.at(-1), { path: '/debug/pprof/heapstats', verb: 'get' });
    // Plain HTTP is not served.
    await assert.rejects(fetch(`http://127.0.0.1:${port}/debug/pprof/heapstats`));
  } finally {
    ac.abort();
    await running;
  }
});

test('non-loopback address through the ControllerManager: a request without a token is 401 (no API call needed)', async () => {
  const port = await freePort();
  const ac = new AbortController();
  const mgr = manager({ pprofBindAddress: `:${port}` });
  const running = mgr.start(ac.signal);
  try {
    const r = await poll('pprof listening', () => httpsGet(port, '/debug/pprof/profile?seconds=1'));
    assert.equal(r.status, 401);
    assert.match(r.body, /a bearer token is required/);
  } finally {
    ac.abort();
    assert.equal(await running, 0);
  }
});

test('a non-loopback address without an AccessReviewer is refused at construction', () => {
  assert.throws(() => new PprofServer({ bindAddress: ':6060' }), /non-loopback address \(:6060\) needs an AccessReviewer/);
  assert.ok(new PprofServer({ bindAddress: '127.0.0.1:0' }), 'loopback needs none');
});

test('debug routes (e.g. /debug/informers): JSON from the handler with the query, listed in the index, reviewed like the profiles', async () => {
  const seen: string[] = [];
  const debugRoutes = {
    '/debug/informers': { description: 'what each informer cache holds', handler: (q: URLSearchParams) => (seen.push(q.toString()), [{ objects: 2, keys: q.get('keys') }]) },
  };
  const loopback = new PprofServer({ bindAddress: '127.0.0.1:0', logger: silentLogger, debugRoutes });
  const reviewer = new FakeReviewer();
  const secure = new PprofServer({ bindAddress: '0.0.0.0:0', reviewer, logger: silentLogger, debugRoutes });
  const ac = new AbortController();
  const runs = [loopback.start(ac.signal), secure.start(ac.signal)];
  try {
    const plain = `http://127.0.0.1:${(await loopback.listening).port}`;
    const res = await fetch(`${plain}/debug/informers?keys=1`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.deepEqual(await res.json(), [{ objects: 2, keys: '1' }]);
    assert.deepEqual(seen, ['keys=1']);
    assert.equal((await fetch(`${plain}/debug/informers`, { method: 'POST' })).status, 405);
    assert.equal((await fetch(`${plain}/debug/other`)).status, 404);
    assert.match(await (await fetch(`${plain}/debug/pprof/`)).text(), /\/debug\/informers +what each informer cache holds/);
    // The secure server reviews the path like any other: FakeReviewer allows ops /debug/pprof/* only.
    const { port } = await secure.listening;
    assert.equal((await httpsGet(port, '/debug/informers')).status, 401);
    const forbidden = await httpsGet(port, '/debug/informers', 'good');
    assert.equal(forbidden.status, 403);
    assert.deepEqual(reviewer.authz.at(-1), { path: '/debug/informers', verb: 'get' });
    assert.equal(seen.length, 1, 'the handler never ran for a refused request');
  } finally {
    ac.abort();
    await Promise.all(runs);
  }
  assert.throws(() => new PprofServer({ bindAddress: '127.0.0.1:0', debugRoutes: { '/metrics': debugRoutes['/debug/informers'] } }), /must be under \/debug\//);
  assert.throws(() => new PprofServer({ bindAddress: '127.0.0.1:0', debugRoutes: { '/debug/pprof/x': debugRoutes['/debug/informers'] } }), /outside \/debug\/pprof\//);
});
