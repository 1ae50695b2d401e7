/**
 * Every webhook configuration we ship gives the API server a `timeoutSeconds` ABOVE the webhook server's handler
 * timeout (docs/webhooks.md "Configuring the API server side"): a slow handler is then answered 504 and logged by the
 * server, with the request's uid, before the API server gives up on the call with a bare timeout. Checked for
 * config/webhook (what `make deploy` and `make run` install), the Helm chart generated from it (dist/chart, both
 * certificate modes), the example project's config, and what the scaffold writes (`create webhook`'s manifests.yaml
 * entry and its generated test's configuration). No cluster.
 *
 * The handler timeout is not copied here: it is read from the server itself — a WebhookServer as the binary builds it
 * (no handlerTimeoutMs), a handler that never answers, its clock (a FakeClock: no wall time is measured) stepped far
 * past any timeout; the 504 names the timeout that fired.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadAll } from 'js-yaml';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { silentLogger } from '../pkg/log/logger.ts';
import { selfSignedCertificate } from '../pkg/manager/selfsigned.ts';
import { apiNames } from '../pkg/scaffold/api.ts';
import { webhookEntry } from '../pkg/scaffold/webhook.ts';
import { FakeClock } from '../pkg/util/clock.ts';
import { WebhookBuilder } from '../pkg/webhook/builder.ts';
import { WebhookServer } from '../pkg/webhook/server.ts';

const repo = join(import.meta.dirname, '..');

/** The handler timeout of a WebhookServer built without handlerTimeoutMs (as cmd/manager builds it), in ms. */
async function defaultHandlerTimeoutMs(): Promise<number> {
  const pair = await selfSignedCertificate({ commonName: 'timeouts', ips: ['127.0.0.1'] });
  const clock = new FakeClock();
  const server = new WebhookServer({
    bindAddress: '127.0.0.1:0', registry: new Registry(), logger: silentLogger, clock,
    tls: { start: () => Promise.resolve({ cert: Buffer.from(pair.cert), key: Buffer.from(pair.key) }) },
  });
  const gvk = { group: 'example.com', version: 'v1', kind: 'Widget' };
  let called!: () => void;
  const handlerCalled = new Promise<void>((r) => (called = r));
  new WebhookBuilder<KubeObject>(server, gvk).withValidator({
    validateCreate: (_o, ctx) => new Promise((_resolve, reject) => {
      called();
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), { once: true });
    }),
  }).complete();
  const ac = new AbortController();
  const done = server.start(ac.signal);
  try {
    const { port } = await server.listening;
    const body = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
      request: { uid: 'u', operation: 'CREATE', object: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } } },
    });
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpsRequest({
        host: '127.0.0.1', port, path: '/validate-example-com-v1-widget', method: 'POST', ca: pair.cert, agent: false,
        headers: { 'content-type': 'application/json' },
      }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
    await handlerCalled;
    clock.step(3_600_000);
    const { status, text } = await answer;
    assert.equal(status, 504, text);
    const ms = /timed out after (\d+) ms/.exec(text)?.[1];
    assert.ok(ms, text);
    return Number(ms);
  } finally {
    ac.abort();
    await done;
  }
}

interface Webhook { name: string; timeoutSeconds?: number }

/** The webhooks of the Validating/MutatingWebhookConfigurations in a YAML file. */
function webhooksIn(file: string): Webhook[] {
  return loadAll(readFileSync(join(repo, file), 'utf8'))
    .filter((d): d is { kind: string; webhooks: Webhook[] } => typeof d === 'object' && d !== null && /WebhookConfiguration$/.test((d as { kind?: string }).kind ?? ''))
    .flatMap((d) => d.webhooks);
}

test('every shipped webhook configuration sets timeoutSeconds above the webhook server\'s handler timeout', async () => {
  const handlerMs = await defaultHandlerTimeoutMs();
  const found: [string, string, number | undefined][] = [];
  for (const file of ['config/webhook/manifests.yaml', 'examples/webhook/config/webhook/manifests.yaml']) {
    const hooks = webhooksIn(file);
    assert.ok(hooks.length > 0, `${file}: no webhook`);
    for (const w of hooks) found.push([file, w.name, w.timeoutSeconds]);
  }
  // The chart's templates are Go templates (not YAML): every webhook entry is a `- admissionReviewVersions:` item.
  const chartDir = join('dist', 'chart', 'templates', 'generated');
  for (const f of readdirSync(join(repo, chartDir)).filter((n) => /webhookconfiguration/.test(n))) {
    const text = readFileSync(join(repo, chartDir, f), 'utf8');
    const entries = text.split(/^\s*- admissionReviewVersions:/m).slice(1);
    assert.ok(entries.length > 0, `${f}: no webhook`);
    for (const [i, e] of entries.entries()) {
      const t = /^\s*timeoutSeconds: (\d+)\s*$/m.exec(e)?.[1];
      found.push([join(chartDir, f), `entry ${i}`, t === undefined ? undefined : Number(t)]);
    }
  }
  // What `create webhook` writes into a project, and its generated test's configuration.
  const names = apiNames({ group: 'webapp', domain: 'example.com', version: 'v1', kind: 'Guestbook', plural: 'guestbooks' });
  for (const kind of ['mutating', 'validating'] as const) {
    const [w] = loadAll(webhookEntry(names, kind)) as Webhook[][];
    found.push([`pkg/scaffold webhookEntry(${kind})`, w?.[0]?.name ?? '?', w?.[0]?.timeoutSeconds]);
  }
  const scaffoldTest = readFileSync(join(repo, 'pkg', 'scaffold', 'webhook.ts'), 'utf8');
  for (const m of scaffoldTest.matchAll(/failurePolicy: 'Fail', timeoutSeconds: (\d+)/g)) found.push(['pkg/scaffold generated test', 'hook()', Number(m[1])]);

  assert.ok(found.length >= 10, JSON.stringify(found));
  const below = found.filter(([, , t]) => t === undefined || t * 1000 <= handlerMs);
  assert.deepEqual(below, [], `timeoutSeconds must be set and above the handler timeout (${handlerMs} ms); the API server's default is 10 s`);
});
