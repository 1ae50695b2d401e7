import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { Agent, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { Registry } from 'prom-client';
import { FakeClock } from '../util/clock.ts';
import { CertDirWatcher, GeneratedCertificate } from './certwatcher.ts';
import { newMetricsServer, type AccessReviewer, type UserInfo } from './metricsserver.ts';
import { selfSignedCertificate, type SelfSigned } from './selfsigned.ts';

/** Every token is user "scraper", who may GET /metrics. */
const allowAll: AccessReviewer = {
  authenticate: (): Promise<UserInfo> => Promise.resolve({ username: 'scraper' }),
  authorize: () => Promise.resolve({ allowed: true }),
};

/** Polls `probe` every 20 ms until it returns a value other than undefined/false (or fails after `timeoutMs`). */
async function poll<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;

/**
 * One scrape, on a new connection unless a keep-alive `agent` is given: status and the fingerprint of the certificate
 * the server presented on that connection.
 */
function scrape(port: number, agent: Agent | false = false): Promise<{ status: number; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port, path: '/metrics', agent, rejectUnauthorized: false, headers: { authorization: 'Bearer t' } },
      (res) => {
        const fp = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint: fp }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function writePair(dir: string, pair: { cert: string; key: string }): Promise<void> {
  await writeFile(join(dir, 'tls.crt'), pair.cert);
  await writeFile(join(dir, 'tls.key'), pair.key);
}

const newPair = (cn: string): Promise<SelfSigned> => selfSignedCertificate({ commonName: cn, ips: ['127.0.0.1'] });

test('--metrics-cert-dir: files rewritten while a client scrapes are served from the next handshake on; no scrape fails', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tscm-certs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const [a, b] = await Promise.all([newPair('a'), newPair('b')]);
  await writePair(dir, a);
  const server = newMetricsServer({
    bindAddress: '127.0.0.1:0', registry: new Registry(), processMetrics: false, secure: true, certDir: dir, reviewer: allowAll,
    certPollIntervalMs: 200,
  });
  assert.ok(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  t.after(async () => {
    ac.abort();
    await done;
  });
  const { port } = await server.listening;

  const seen: { status: number; fingerprint: string }[] = [];
  const errors: unknown[] = [];
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      try {
        seen.push(await scrape(port));
      } catch (err) {
        errors.push(err);
      }
    }
  })();
  try {
    await poll('a scrape with certificate a', () => seen.some((s) => s.fingerprint === fingerprint(a.cert)));
    // Not atomic, as a careless writer does it: for a moment tls.crt is b's and tls.key still a's.
    await writePair(dir, b);
    await poll('a scrape with certificate b', () => seen.some((s) => s.fingerprint === fingerprint(b.cert)));
  } finally {
    stop = true;
    await loop;
  }
  assert.deepEqual(errors, [], 'no scrape failed');
  assert.ok(seen.every((s) => s.status === 200), `statuses: ${[...new Set(seen.map((s) => s.status))].join(',')}`);
  const firstB = seen.findIndex((s) => s.fingerprint === fingerprint(b.cert));
  assert.ok(seen.slice(0, firstB).every((s) => s.fingerprint === fingerprint(a.cert)), 'only a before b');
  assert.ok(seen.slice(firstB).every((s) => s.fingerprint === fingerprint(b.cert)), 'only b from the first b on');
});

test('--metrics-cert-dir: a keep-alive scraper gets the new certificate too (idle connections are closed on a change)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tscm-certs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const [a, b] = await Promise.all([newPair('a'), newPair('b')]);
  await writePair(dir, a);
  const server = newMetricsServer({
    bindAddress: '127.0.0.1:0', registry: new Registry(), processMetrics: false, secure: true, certDir: dir, reviewer: allowAll,
    certPollIntervalMs: 200,
  });
  assert.ok(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  t.after(async () => {
    ac.abort();
    await done;
  });
  const { port } = await server.listening;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  assert.equal((await scrape(port, agent)).fingerprint, fingerprint(a.cert));
  await writePair(dir, b);
  const errors: unknown[] = [];
  await poll('the keep-alive client sees certificate b', async () => {
    const s = await scrape(port, agent).catch((err: unknown) => {
      errors.push(err);
      return undefined;
    });
    return s?.fingerprint === fingerprint(b.cert);
  });
  assert.deepEqual(errors, [], 'no scrape failed');
});

test('cert dir watcher: a mismatched or broken pair is not installed; the old one stays until a valid pair appears', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tscm-certs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const [a, b] = await Promise.all([newPair('a'), newPair('b')]);
  await writePair(dir, a);
  const watcher = new CertDirWatcher({ dir, pollIntervalMs: 50 });
  const updates: string[] = [];
  const ac = new AbortController();
  t.after(() => ac.abort());
  const first = await watcher.start(ac.signal, (p) => updates.push(p.cert.toString()));
  assert.equal(first.cert.toString(), a.cert);

  await writeFile(join(dir, 'tls.crt'), b.cert); // key still a's
  await poll('the mismatch seen', () => watcher.errors > 0);
  await writeFile(join(dir, 'tls.crt'), '-----BEGIN CERTIFICATE-----\ngarbage\n');
  await poll('the broken file seen', () => watcher.errors > 1);
  assert.deepEqual(updates, []);
  await writeFile(join(dir, 'tls.crt'), b.cert);
  await writeFile(join(dir, 'tls.key'), b.key);
  await poll('b installed', () => updates.length > 0);
  assert.deepEqual(updates, [b.cert]);
});

test('cert dir watcher: a Kubernetes Secret volume update (..data symlink swapped) is picked up', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tscm-secret-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const [a, b] = await Promise.all([newPair('a'), newPair('b')]);
  // The kubelet's AtomicWriter layout: ..<timestamp>/ holds the files, ..data → it, tls.crt → ..data/tls.crt.
  const version = async (name: string, pair: SelfSigned): Promise<void> => {
    await mkdir(join(dir, name));
    await writePair(join(dir, name), pair);
    await symlink(name, join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  await version('..2026_11_23_10_00_00.1', a);
  await symlink('..data/tls.crt', join(dir, 'tls.crt'));
  await symlink('..data/tls.key', join(dir, 'tls.key'));
  // Polling only every hour (the real clock): the change must be noticed by watching the directory.
  const watcher = new CertDirWatcher({ dir, pollIntervalMs: 3_600_000 });
  const updates: string[] = [];
  const ac = new AbortController();
  t.after(() => ac.abort());
  assert.equal((await watcher.start(ac.signal, (p) => updates.push(p.cert.toString()))).cert.toString(), a.cert);
  await version('..2026_11_23_11_00_00.2', b);
  await rm(join(dir, '..2026_11_23_10_00_00.1'), { recursive: true });
  await poll('b installed', () => updates.length > 0);
  assert.deepEqual(updates, [b.cert]);
});

test('generated certificate: renewed at two thirds of its lifetime, before it expires, and served from then on', async (t) => {
  const clock = new FakeClock();
  const hour = 3_600_000;
  const server = newMetricsServer({
    bindAddress: '127.0.0.1:0', registry: new Registry(), processMetrics: false, secure: true, reviewer: allowAll,
    clock, generatedCertValidityMs: 3 * hour,
  });
  assert.ok(server);
  const ac = new AbortController();
  const done = server.start(ac.signal);
  t.after(async () => {
    ac.abort();
    await done;
  });
  const { port } = await server.listening;
  const first = await scrape(port);
  assert.equal(first.status, 200);
  clock.step(2 * hour - 1000);
  assert.equal((await scrape(port)).fingerprint, first.fingerprint, 'not renewed before two thirds of the lifetime');
  clock.step(1000);
  const renewed = await poll('a renewed certificate served', async () => {
    const s = await scrape(port);
    return s.fingerprint !== first.fingerprint && s;
  });
  assert.equal(renewed.status, 200);
});

test('generated certificate source: renewal times, and a failed renewal is retried while the old one is still valid', async () => {
  const clock = new FakeClock();
  const hour = 3_600_000;
  let calls = 0;
  let fail = false;
  const src = new GeneratedCertificate({
    clock,
    validityMs: 3 * hour,
    retryMs: 60_000,
    generate: async (validityMs) => {
      calls++;
      if (fail) throw new Error('no entropy today');
      return selfSignedCertificate({ commonName: `c${calls}`, validityMs });
    },
  });
  const updates: string[] = [];
  const ac = new AbortController();
  await src.start(ac.signal, (p) => updates.push(new X509Certificate(p.cert).subject));
  assert.equal(calls, 1);
  clock.step(2 * hour - 1);
  assert.equal(calls, 1, 'no renewal before 2/3 of the lifetime');
  fail = true;
  clock.step(1);
  assert.equal(calls, 2, 'renewal attempted at 2/3');
  await poll('the failure handled', () => clock.pendingTimers() > 0);
  clock.step(59_999);
  assert.equal(calls, 2);
  fail = false;
  clock.step(1);
  assert.equal(calls, 3, 'retried a minute later');
  await poll('the renewed certificate delivered', () => updates.length > 0);
  assert.deepEqual(updates, ['CN=c3']);
  ac.abort();
  assert.equal(clock.pendingTimers(), 0, 'no timer left after stop');
});
