/**
 * SelfManagedCertificates against an in-memory API (FAKE, for deterministic fault injection: hand-edited Secrets and
 * a 403 on a target; the real API server path, races and rotation under load are test/webhook-certs.test.ts). The fake
 * keeps kube-apiserver's write semantics this driver relies on: POST of an existing name → 409 AlreadyExists, PUT
 * with a stale resourceVersion → 409 Conflict.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { ApiError } from '../../client/errors.ts';
import type { JsonClient, RequestOptions, Verb } from '../../client/request.ts';
import { newLogger } from '../../log/logger.ts';
import { certificateAuthority, signedCertificate } from '../../manager/selfsigned.ts';
import { FakeClock } from '../../util/clock.ts';
import { SelfManagedCertificates, type SelfManagedCertificatesOptions } from './selfmanaged.ts';

type Obj = { metadata: { name: string; resourceVersion?: string } } & Record<string, unknown>;

/** FAKE API server: objects by path; `forbidden` paths answer 403. */
class FakeApi implements JsonClient {
  readonly objects = new Map<string, Obj>();
  readonly forbidden = new Set<string>();
  private rv = 0;

  json<T>(method: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const fail = (status: number, reason: string): Promise<T> => Promise.reject(new ApiError(status, reason, `${method} ${path}: HTTP ${status} ${reason}`, {}));
    if ([...this.forbidden].some((p) => path.startsWith(p))) return fail(403, 'Forbidden');
    const body = structuredClone(opts.body) as Obj | undefined;
    switch (method) {
      case 'GET': {
        const o = this.objects.get(path);
        return o ? Promise.resolve(structuredClone(o) as T) : fail(404, 'NotFound');
      }
      case 'POST': {
        if (!body) return fail(400, 'BadRequest');
        const p = `${path}/${body.metadata.name}`;
        if (this.objects.has(p)) return fail(409, 'AlreadyExists');
        body.metadata.resourceVersion = String(++this.rv);
        this.objects.set(p, body);
        return Promise.resolve(structuredClone(body) as T);
      }
      case 'PUT': {
        const cur = this.objects.get(path);
        if (!cur || !body) return fail(404, 'NotFound');
        if (body.metadata.resourceVersion !== cur.metadata.resourceVersion) return fail(409, 'Conflict');
        body.metadata.resourceVersion = String(++this.rv);
        this.objects.set(path, body);
        return Promise.resolve(structuredClone(body) as T);
      }
      default:
        return fail(405, 'MethodNotAllowed');
    }
  }
}

const secretPath = '/api/v1/namespaces/sys/secrets/webhook-server-cert';
const vwcPath = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vwc';

function driver(api: FakeApi, extra: Partial<SelfManagedCertificatesOptions> = {}): { certs: SelfManagedCertificates; logs: string[] } {
  const logs: string[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => { logs.push(chunk.toString()); cb(); } });
  const certs = new SelfManagedCertificates({
    client: api, namespace: 'sys', secretName: 'webhook-server-cert', serviceName: 'webhook-service',
    validatingWebhookConfigurations: ['vwc'], logger: newLogger({ level: 'debug', destination: sink }), ...extra,
  });
  return { certs, logs };
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');

/**
 * Lets the driver run until `done()` (the fake clock only drives its timers; key generation runs on libuv's thread
 * pool, so a round takes real time — on a loaded machine, many event-loop turns). Fails after `ms` of real time.
 */
async function until(what: string, done: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) assert.fail(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

describe('SelfManagedCertificates (fake API)', () => {
  test('a Secret edited into garbage is regenerated once, and the log says why', async () => {
    const other = await certificateAuthority({ commonName: 'other' });
    const foreignLeaf = await signedCertificate({ ca: other, commonName: 'x', dnsNames: ['x'] });
    const cases: [string, (d: Record<string, string>) => void, RegExp][] = [
      ['ca.key removed', (d) => delete d['ca.key'], /the Secret has no ca\.key/],
      ['tls.key garbage', (d) => { d['tls.key'] = b64('garbage'); }, /tls\.key is not a private key/],
      ['tls.key of another certificate', (d) => { d['tls.key'] = b64(foreignLeaf.key); }, /tls\.key is not the key of tls\.crt/],
      ['tls.crt from an unrelated CA', (d) => { d['tls.crt'] = b64(foreignLeaf.cert); d['tls.key'] = b64(foreignLeaf.key); }, /tls\.crt is not signed by a CA of ca\.crt/],
      ['ca.crt is a leaf', (d) => { d['ca.crt'] = b64(foreignLeaf.cert); }, /is not a CA certificate/],
      ['ca.key of another CA', (d) => { d['ca.key'] = b64(other.key); }, /ca\.key has no key for the CA/],
    ];
    for (const [name, edit, reason] of cases) {
      const api = new FakeApi();
      const { certs, logs } = driver(api);
      await certs.round();
      assert.equal(certs.stats.won.create, 1, name);
      const secret = api.objects.get(secretPath) as Obj & { data: Record<string, string> };
      edit(secret.data);
      await certs.round();
      assert.equal(certs.stats.won.regenerate, 1, `${name}: regenerated once`);
      assert.ok(logs.some((l) => l.includes('Secret unusable') && reason.test(l)), `${name}: the log names the reason ${reason}`);
      await certs.round();
      assert.equal(certs.stats.won.regenerate, 1, `${name}: the regenerated Secret is usable`);
    }
  });

  test('two drivers on one Secret: the second create loses (409 AlreadyExists) and adopts the first one\'s pair', async () => {
    const api = new FakeApi();
    const a = driver(api).certs;
    const b = driver(api).certs;
    await Promise.all([a.round(), b.round()]);
    assert.equal((a.stats.won.create ?? 0) + (b.stats.won.create ?? 0), 1);
    assert.ok(a.stats.lost + b.stats.lost >= 1);
    assert.equal(a.caBundle, b.caBundle);
  });

  test('injection forbidden (403): the pair is served anyway, errors are counted, and injection happens once allowed', async () => {
    const api = new FakeApi();
    api.objects.set(vwcPath, { metadata: { name: 'vwc', resourceVersion: '1' }, webhooks: [{ name: 'w', clientConfig: { url: 'https://x' } }] });
    api.forbidden.add(vwcPath);
    const clock = new FakeClock();
    const { certs } = driver(api, { clock, pollIntervalMs: 1_000, retryMs: 500, reloadGraceMs: 2_000, propagationMs: 1_000 });
    const stop = new AbortController();
    const updates: unknown[] = [];
    const pair = await certs.start(stop.signal, (p) => updates.push(p));
    assert.match(pair.cert.toString(), /BEGIN CERTIFICATE/);
    assert.equal(certs.stats.errors, 1);
    api.forbidden.clear();
    const rounds = certs.stats.rounds;
    clock.step(1_000);
    await until('the injection once allowed', () => certs.stats.injections > 0);
    assert.ok(certs.stats.rounds > rounds);
    assert.equal(certs.stats.injections, 1);
    const vwc = api.objects.get(vwcPath) as Obj & { webhooks: { clientConfig: { caBundle: string } }[] };
    assert.equal(Buffer.from(vwc.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString(), certs.caBundle);
    assert.deepEqual(updates, [], 'the same pair: no update');
    stop.abort();
  });

  test('a round that reads a new pair and then fails (403 injecting) still hands the new pair to the server', async () => {
    const api = new FakeApi();
    api.objects.set(vwcPath, { metadata: { name: 'vwc', resourceVersion: '1' }, webhooks: [{ name: 'w', clientConfig: { url: 'https://x' } }] });
    const clock = new FakeClock();
    const { certs } = driver(api, { clock, pollIntervalMs: 1_000, retryMs: 500, reloadGraceMs: 2_000, propagationMs: 1_000 });
    const stop = new AbortController();
    const updates: { cert: Buffer }[] = [];
    const first = await certs.start(stop.signal, (p) => updates.push(p));
    // By hand into garbage, and the target forbidden: the next round regenerates, reads the new pair, then fails.
    (api.objects.get(secretPath) as Obj & { data: Record<string, string> }).data['tls.key'] = b64('garbage');
    api.forbidden.add(vwcPath);
    const errors = certs.stats.errors;
    clock.step(1_000);
    await until('the round failing', () => certs.stats.errors !== errors);
    assert.equal(certs.stats.won.regenerate, 1);
    assert.equal(certs.stats.errors, errors + 1, 'the round failed');
    assert.equal(updates.length, 1, 'the new pair was delivered');
    assert.ok(!updates[0]?.cert.equals(first.cert));
    stop.abort();
  });

  test('options: a reload grace shorter than two polls is refused', () => {
    assert.throws(() => driver(new FakeApi(), { pollIntervalMs: 10_000, reloadGraceMs: 15_000 }), /at least 2 × pollIntervalMs/);
  });
});
