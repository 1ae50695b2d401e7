import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { Counter, Registry } from 'prom-client';
import { ApiError } from '../client/rest.ts';
import { FakeClock } from '../util/clock.ts';
import {
  AuthFilter,
  KubeAccessReviewer,
  newMetricsServer,
  registerProcessMetrics,
  type AccessReviewer,
  type AuthorizationAttributes,
  type UserInfo,
} from './metricsserver.ts';

/** Unit-test fake: tokens map to users; `allowed` lists usernames allowed to GET /metrics. Counts calls. */
class FakeReviewer implements AccessReviewer {
  readonly users = new Map<string, UserInfo>([
    ['prom-token', { username: 'system:serviceaccount:monitoring:prometheus', uid: 'u1', groups: ['system:serviceaccounts'] }],
    ['dev-token', { username: 'dev', groups: ['devs'], extra: { scopes: ['b', 'a'] } }],
  ]);
  readonly allowed = new Set(['system:serviceaccount:monitoring:prometheus']);
  authnCalls = 0;
  authzCalls: { user: UserInfo; attrs: AuthorizationAttributes }[] = [];
  failing = false;

  authenticate(token: string): Promise<UserInfo | undefined> {
    this.authnCalls++;
    if (this.failing) return Promise.reject(new Error('apiserver down'));
    return Promise.resolve(this.users.get(token));
  }

  authorize(user: UserInfo, attrs: AuthorizationAttributes): Promise<{ allowed: boolean; reason?: string }> {
    this.authzCalls.push({ user, attrs });
    if (this.failing) return Promise.reject(new Error('apiserver down'));
    return Promise.resolve({ allowed: this.allowed.has(user.username) && attrs.path === '/metrics' && attrs.verb === 'get' });
  }
}

test('auth filter: 401 without/with bad token, 403 when not allowed, 200 when allowed', async () => {
  const reviewer = new FakeReviewer();
  const filter = new AuthFilter({ reviewer, clock: new FakeClock() });
  assert.equal((await filter.check(undefined, '/metrics', 'GET')).status, 401);
  assert.equal((await filter.check('Basic abc', '/metrics', 'GET')).status, 401);
  assert.equal((await filter.check('Bearer ', '/metrics', 'GET')).status, 401);
  assert.equal(reviewer.authnCalls, 0, 'no review without a token');
  assert.equal((await filter.check('Bearer nope', '/metrics', 'GET')).status, 401);
  const dev = await filter.check('Bearer dev-token', '/metrics', 'GET');
  assert.equal(dev.status, 403);
  assert.match(dev.message, /user "dev" cannot get path "\/metrics"/);
  const prom = await filter.check('bearer prom-token', '/metrics', 'GET');
  assert.deepEqual(prom, { status: 200, message: 'ok', user: 'system:serviceaccount:monitoring:prometheus' });
  // The SubjectAccessReview carries what the TokenReview returned.
  assert.deepEqual(reviewer.authzCalls.at(-1), {
    user: { username: 'system:serviceaccount:monitoring:prometheus', uid: 'u1', groups: ['system:serviceaccounts'] },
    attrs: { path: '/metrics', verb: 'get' },
  });
});

test('auth filter caches answers for the TTL, then asks again', async () => {
  const clock = new FakeClock();
  const reviewer = new FakeReviewer();
  const filter = new AuthFilter({ reviewer, clock, ttlMs: 10_000 });
  for (let i = 0; i < 5; i++) assert.equal((await filter.check('Bearer prom-token', '/metrics', 'GET')).status, 200);
  for (let i = 0; i < 5; i++) assert.equal((await filter.check('Bearer nope', '/metrics', 'GET')).status, 401);
  assert.equal(reviewer.authnCalls, 2);
  assert.equal(reviewer.authzCalls.length, 1);
  // Revocation takes effect after the TTL.
  reviewer.allowed.clear();
  clock.step(9_999);
  assert.equal((await filter.check('Bearer prom-token', '/metrics', 'GET')).status, 200);
  clock.step(2);
  assert.equal((await filter.check('Bearer prom-token', '/metrics', 'GET')).status, 403);
  assert.equal(reviewer.authnCalls, 3);
  assert.equal(reviewer.authzCalls.length, 2);
});

test('auth filter caches are bounded (LRU)', async () => {
  const reviewer = new FakeReviewer();
  for (let i = 0; i < 5; i++) reviewer.users.set(`t${i}`, { username: `u${i}` });
  const filter = new AuthFilter({ reviewer, clock: new FakeClock(), max: 2 });
  for (let i = 0; i < 5; i++) await filter.check(`Bearer t${i}`, '/metrics', 'GET');
  assert.equal(reviewer.authnCalls, 5);
  await filter.check('Bearer t4', '/metrics', 'GET');
  await filter.check('Bearer t3', '/metrics', 'GET');
  assert.equal(reviewer.authnCalls, 5, 'two most recent still cached');
  await filter.check('Bearer t0', '/metrics', 'GET');
  assert.equal(reviewer.authnCalls, 6, 'oldest was evicted');
});

test('auth filter: review errors answer 500 and are not cached', async () => {
  const reviewer = new FakeReviewer();
  const filter = new AuthFilter({ reviewer, clock: new FakeClock() });
  reviewer.failing = true;
  assert.equal((await filter.check('Bearer prom-token', '/metrics', 'GET')).status, 500);
  reviewer.failing = false;
  assert.equal((await filter.check('Bearer prom-token', '/metrics', 'GET')).status, 200);
  assert.equal(reviewer.authnCalls, 2);
});

test('KubeAccessReviewer sends TokenReview and SubjectAccessReview', async () => {
  const calls: { method: string; path: string; body: unknown }[] = [];
  let answer: unknown = {};
  const rest = {
    json: <T>(method: string, path: string, opts: { body?: unknown } = {}): Promise<T> => {
      calls.push({ method, path, body: opts.body });
      return Promise.resolve(answer as T);
    },
  };
  const r = new KubeAccessReviewer(rest);
  answer = { status: { authenticated: true, user: { username: 'alice', uid: '7', groups: ['g'], extra: { k: ['v'] } } } };
  assert.deepEqual(await r.authenticate('tok'), { username: 'alice', uid: '7', groups: ['g'], extra: { k: ['v'] } });
  assert.deepEqual(calls[0], {
    method: 'POST',
    path: '/apis/authentication.k8s.io/v1/tokenreviews',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'tok' } },
  });
  answer = { status: { authenticated: false, error: 'invalid bearer token' } };
  assert.equal(await r.authenticate('bad'), undefined);
  answer = { status: { allowed: true } };
  assert.deepEqual(await r.authorize({ username: 'alice', uid: '7', groups: ['g'], extra: { k: ['v'] } }, { path: '/metrics', verb: 'get' }), {
    allowed: true,
    reason: undefined,
  });
  assert.deepEqual(calls[2], {
    method: 'POST',
    path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: 'alice', uid: '7', groups: ['g'], extra: { k: ['v'] }, nonResourceAttributes: { path: '/metrics', verb: 'get' } },
    },
  });
  answer = { status: { allowed: true, denied: true, reason: 'explicit deny' } };
  assert.deepEqual(await r.authorize({ username: 'x' }, { path: '/metrics', verb: 'get' }), { allowed: false, reason: 'explicit deny' });
  rest.json = () => Promise.reject(new ApiError(403, 'Forbidden', 'cannot create tokenreviews', undefined));
  await assert.rejects(r.authenticate('tok'), /cannot create tokenreviews/);
});

test('process metrics are registered once per registry', () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const n = registry.getMetricsAsArray().length;
  assert.ok(n > 5);
  registerProcessMetrics(registry);
  assert.equal(registry.getMetricsAsArray().length, n);
  assert.ok(registry.getSingleMetric('process_cpu_user_seconds_total'));
  assert.ok(registry.getSingleMetric('nodejs_eventloop_lag_seconds'));
});

async function runServer(opts: Parameters<typeof newMetricsServer>[0]): Promise<{ port: number; stop: () => Promise<void> }> {
  const server = newMetricsServer(opts);
  assert.ok(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  const { port } = await server.listening;
  return {
    port,
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}

test('insecure server serves the registry with process metrics; "0" disables', async () => {
  assert.equal(newMetricsServer({ bindAddress: '0' }), undefined);
  const registry = new Registry();
  new Counter({ name: 'test_things_total', help: 'things', registers: [registry] }).inc(3);
  const s = await runServer({ bindAddress: '127.0.0.1:0', registry });
  try {
    const res = await fetch(`http://127.0.0.1:${s.port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const body = await res.text();
    assert.match(body, /^test_things_total 3$/m);
    assert.match(body, /^process_cpu_user_seconds_total /m);
    assert.equal((await fetch(`http://127.0.0.1:${s.port}/other`)).status, 404);
  } finally {
    await s.stop();
  }
});

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

test('secure server: HTTPS with a generated certificate and token-based authorization', async () => {
  const registry = new Registry();
  new Counter({ name: 'secret_total', help: 'secret', registers: [registry] }).inc();
  const reviewer = new FakeReviewer();
  const s = await runServer({ bindAddress: '127.0.0.1:0', registry, processMetrics: false, secure: true, reviewer });
  try {
    assert.equal((await httpsGet(s.port, '/metrics')).status, 401);
    assert.equal((await httpsGet(s.port, '/metrics', 'nope')).status, 401);
    const forbidden = await httpsGet(s.port, '/metrics', 'dev-token');
    assert.equal(forbidden.status, 403);
    assert.doesNotMatch(forbidden.body, /secret_total/);
    const ok = await httpsGet(s.port, '/metrics', 'prom-token');
    assert.equal(ok.status, 200);
    assert.match(ok.body, /^secret_total 1$/m);
    // Plain HTTP is not served on the secure port.
    await assert.rejects(fetch(`http://127.0.0.1:${s.port}/metrics`));
  } finally {
    await s.stop();
  }
});

test('secure mode without a reviewer is a programming error', () => {
  assert.throws(() => newMetricsServer({ bindAddress: '127.0.0.1:0', secure: true, processMetrics: false }), /needs an AccessReviewer/);
});

/** Authenticates "good" as a user allowed to scrape; every other token is unknown. Reviews wait until released. */
class SlowReviewer implements AccessReviewer {
  authnCalls = 0;
  private waiting: (() => void)[] = [];
  hold = true;

  async authenticate(token: string): Promise<UserInfo | undefined> {
    this.authnCalls++;
    if (this.hold) await new Promise<void>((r) => this.waiting.push(r));
    return token === 'good' ? { username: 'prom' } : undefined;
  }

  authorize(): Promise<{ allowed: boolean }> {
    return Promise.resolve({ allowed: true });
  }

  get pending(): number {
    return this.waiting.length;
  }

  release(): void {
    for (const r of this.waiting.splice(0)) r();
  }
}

test('auth filter: TokenReviews in flight are bounded; past the bound 429 without asking the API', { timeout: 10_000 }, async () => {
  const reviewer = new SlowReviewer();
  const filter = new AuthFilter({ reviewer, clock: new FakeClock(), maxReviewsInFlight: 2 });
  const a = filter.check('Bearer random-1', '/metrics', 'GET');
  const b = filter.check('Bearer random-2', '/metrics', 'GET');
  const sameAsA = filter.check('Bearer random-1', '/metrics', 'GET'); // joins a's review
  const over = await filter.check('Bearer random-3', '/metrics', 'GET');
  assert.equal(over.status, 429);
  assert.match(over.message, /Too Many Requests/);
  assert.equal(reviewer.authnCalls, 2, 'the API saw two reviews only');
  reviewer.release();
  assert.deepEqual([(await a).status, (await b).status, (await sameAsA).status], [401, 401, 401]);
  reviewer.hold = false;
  assert.equal((await filter.check('Bearer good', '/metrics', 'GET')).status, 200, 'a slot is free again');
});

test('auth filter: uncached TokenReviews are rate limited (token bucket on the clock); cached tokens are not', { timeout: 10_000 }, async () => {
  const reviewer = new SlowReviewer();
  reviewer.hold = false;
  const clock = new FakeClock();
  const filter = new AuthFilter({ reviewer, clock, reviewsPerSecond: 10, reviewBurst: 5 });
  assert.equal((await filter.check('Bearer good', '/metrics', 'GET')).status, 200);
  for (let i = 0; i < 4; i++) assert.equal((await filter.check(`Bearer random-${i}`, '/metrics', 'GET')).status, 401);
  assert.equal((await filter.check('Bearer random-x', '/metrics', 'GET')).status, 429, 'burst of 5 used up');
  assert.equal((await filter.check('Bearer good', '/metrics', 'GET')).status, 200, 'a cached token still scrapes');
  assert.equal(reviewer.authnCalls, 5);
  clock.step(99);
  assert.equal((await filter.check('Bearer random-y', '/metrics', 'GET')).status, 429);
  clock.step(1);
  assert.equal((await filter.check('Bearer random-y', '/metrics', 'GET')).status, 401, 'one review per 100 ms at 10/s');
  assert.equal((await filter.check('Bearer random-z', '/metrics', 'GET')).status, 429);
});

test('secure server: 429 with Retry-After when reviews are throttled', { timeout: 10_000 }, async () => {
  const reviewer = new SlowReviewer();
  const filter = new AuthFilter({ reviewer, clock: new FakeClock(), maxReviewsInFlight: 1 });
  const s = await runServer({ bindAddress: '127.0.0.1:0', registry: new Registry(), processMetrics: false, secure: true, authFilter: filter });
  try {
    const first = httpsGet(s.port, '/metrics', 'random-1');
    while (reviewer.pending === 0) await new Promise((r) => setTimeout(r, 5));
    const res = await new Promise<{ status: number; retryAfter: string | undefined }>((resolve, reject) => {
      httpsRequest({ host: '127.0.0.1', port: s.port, path: '/metrics', rejectUnauthorized: false, headers: { authorization: 'Bearer random-2' } }, (r) => {
        r.resume();
        r.on('end', () => resolve({ status: r.statusCode ?? 0, retryAfter: r.headers['retry-after'] }));
      }).on('error', reject).end();
    });
    assert.deepEqual(res, { status: 429, retryAfter: '1' });
    reviewer.release();
    assert.equal((await first).status, 401);
  } finally {
    await s.stop();
  }
});
