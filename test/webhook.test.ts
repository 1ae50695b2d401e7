/**
 * Webhooks through a real kube-apiserver (startTestEnv: a private etcd + kube-apiserver): an in-process
 * ControllerManager serves a defaulter, a validator and a v1 ↔ v2 conversion of the test CRD
 * (test/testdata/widgets-crd.yaml) over HTTPS on 127.0.0.1 with a certificate generated for that IP; a
 * MutatingWebhookConfiguration, a ValidatingWebhookConfiguration and the CRD's `conversion` point at it by `url` with
 * the certificate as caBundle. Shown: a denied create carries the webhook's message in the API error; a defaulted
 * field (and an annotation whose key holds a '/') is persisted; objects written as v1 are stored as v2 and read back
 * as either version, all converted by the webhook server; the webhook metrics count what the API server sent.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { ApiError } from '../pkg/client/errors.ts';
import { captureLogs, type LogLine } from '../pkg/log/capture.ts';
import { selfSignedCertificate } from '../pkg/manager/selfsigned.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { startTestEnv, type TestEnv } from '../pkg/testing/index.ts';
import { applyCRDs, readCRDs } from '../pkg/testing/crds.ts';
import { denied } from '../pkg/webhook/admission.ts';
import { waitFor } from './helpers/cluster.ts';
import { repoRoot } from './helpers/crds.ts';

const group = 'webhooktest.example.com';
interface WidgetV1 extends KubeObject {
  spec: { count?: number; tier?: string };
}
interface WidgetV2 extends KubeObject {
  spec: { replicas?: number; tier?: string };
}

const ns = 'default';
const collection = (version: string): string => `/apis/${group}/${version}/namespaces/${ns}/widgets`;

let env: TestEnv;
let mgr: ControllerManager;
let stopManager: () => Promise<void>;
let registry: Registry;
let lines: LogLine[];
let activeAfterMs = 0;

before(async () => {
  env = await startTestEnv();
  const { cert, key } = await selfSignedCertificate({ commonName: 'webhook-test', ips: ['127.0.0.1'] });
  const caBundle = Buffer.from(cert).toString('base64');
  registry = new Registry();
  const logs = captureLogs('info');
  lines = logs.lines;
  mgr = new ControllerManager({
    kubeConfig: env.kubeConfig, registry, logger: logs.logger,
    webhook: { bindAddress: '127.0.0.1:0', tls: { start: () => Promise.resolve({ cert: Buffer.from(cert), key: Buffer.from(key) }) } },
  });
  mgr.webhook<WidgetV2>({ group, version: 'v2', kind: 'Widget' })
    .withDefaulter((w) => {
      w.spec.tier ??= 'standard';
      w.metadata = { ...w.metadata, annotations: { ...w.metadata?.annotations, [`${group}/defaulted`]: 'true' } };
    })
    .withValidator({
      validateCreate: (w) => {
        if (w.spec.replicas === 7) throw new TypeError('a bug in the validator');
        return (w.spec.replicas ?? 0) > 10 ? denied('replicas must be at most 10') : undefined;
      },
      validateUpdate: (_old, w) => ((w.spec.replicas ?? 0) > 10 ? denied('replicas must be at most 10') : undefined),
    })
    .withConversion({
      hub: 'v2',
      spokes: {
        v1: {
          toHub: (o) => {
            const { count, ...rest } = (o as WidgetV1).spec;
            return { ...o, spec: { ...rest, ...(count !== undefined ? { replicas: count } : {}) } };
          },
          fromHub: (h) => {
            const { replicas, ...rest } = (h as WidgetV2).spec;
            return { ...h, spec: { ...rest, ...(replicas !== undefined ? { count: replicas } : {}) } };
          },
        },
      },
    })
    .complete();
  const ac = new AbortController();
  const running = mgr.start(ac.signal);
  stopManager = async () => {
    ac.abort();
    assert.equal(await running, 0);
  };
  const { port } = await mgr.webhookServer!.listening;
  const base = `https://127.0.0.1:${port}`;

  const [crd] = readCRDs([join(repoRoot, 'test', 'testdata', 'widgets-crd.yaml')]);
  const spec = crd!.spec as { conversion: { webhook: { clientConfig: { url: string; caBundle?: string } } } };
  spec.conversion.webhook.clientConfig = { url: `${base}/convert`, caBundle };
  await applyCRDs(env.client, [crd!], ['test/testdata/widgets-crd.yaml']);

  const rules = [{ apiGroups: [group], apiVersions: ['v2'], operations: ['CREATE', 'UPDATE'], resources: ['widgets'], scope: 'Namespaced' }];
  const hook = (name: string, path: string): Record<string, unknown> => ({
    name, clientConfig: { url: `${base}${path}`, caBundle }, rules, admissionReviewVersions: ['v1'], sideEffects: 'None',
    failurePolicy: 'Fail', matchPolicy: 'Equivalent', timeoutSeconds: 10,
  });
  await env.client.json('POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
    body: {
      apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: 'widgets' },
      webhooks: [hook(`mwidget.${group}`, `/mutate-webhooktest-example-com-v2-widget`)],
    },
  });
  await env.client.json('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
    body: {
      apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: 'widgets' },
      webhooks: [hook(`vwidget.${group}`, `/validate-webhooktest-example-com-v2-widget`)],
    },
  });
  // The API server picks webhook configurations up asynchronously: probe with dry-run creates (they pass admission,
  // sideEffects None, and store nothing) until both webhooks answer.
  const t0 = Date.now();
  await waitFor('both webhooks active in the API server', async () => {
    const probe = await env.client.json<WidgetV2>('POST', collection('v2'), {
      query: { dryRun: 'All' }, body: { apiVersion: `${group}/v2`, kind: 'Widget', metadata: { generateName: 'probe-' }, spec: { replicas: 1 } },
    });
    if (probe.spec.tier !== 'standard') return false;
    try {
      await env.client.json('POST', collection('v2'), {
        query: { dryRun: 'All' }, body: { apiVersion: `${group}/v2`, kind: 'Widget', metadata: { generateName: 'probe-' }, spec: { replicas: 99 } },
      });
      return false;
    } catch (err) {
      return err instanceof ApiError && /replicas must be at most 10/.test(err.message);
    }
  }, { timeoutMs: 30_000 });
  activeAfterMs = Date.now() - t0;
});

after(async () => {
  await stopManager?.();
  await env?.stop();
});

async function counted(webhook: string, code: string): Promise<number> {
  const { values } = await registry.getSingleMetric('controller_runtime_webhook_requests_total')!.get();
  return values.find((v) => v.labels['webhook'] === webhook && v.labels['code'] === code)?.value ?? 0;
}

describe('webhooks through a real kube-apiserver', () => {
  test('a denied create fails with the webhook\'s message in the API error; nothing is stored', async () => {
    await assert.rejects(
      env.client.json('POST', collection('v2'), {
        body: { apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'too-big' }, spec: { replicas: 11 } },
      }),
      (err: unknown) => {
        assert.ok(err instanceof ApiError, String(err));
        assert.equal(err.status, 403);
        assert.match(err.message, new RegExp(`admission webhook "vwidget\\.${group.replaceAll('.', '\\.')}" denied the request: replicas must be at most 10`));
        return true;
      },
    );
    await assert.rejects(env.client.json('GET', `${collection('v2')}/too-big`), (err: unknown) => err instanceof ApiError && err.status === 404);
    assert.ok(await counted('/validate-webhooktest-example-com-v2-widget', '200') >= 1);
  });

  test('the defaulted field and annotation are persisted (JSON patch applied by the API server)', async () => {
    await env.client.json('POST', collection('v2'), {
      body: { apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'defaulted' }, spec: { replicas: 2 } },
    });
    const stored = await env.client.json<WidgetV2>('GET', `${collection('v2')}/defaulted`);
    assert.deepEqual(stored.spec, { replicas: 2, tier: 'standard' });
    assert.equal(stored.metadata?.annotations?.[`${group}/defaulted`], 'true');
    // An explicit value is kept.
    const gold = await env.client.json<WidgetV2>('POST', collection('v2'), {
      body: { apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'gold' }, spec: { replicas: 1, tier: 'gold' } },
    });
    assert.equal(gold.spec.tier, 'gold');
    // An update is defaulted and validated as well.
    await assert.rejects(
      env.client.json('PATCH', `${collection('v2')}/gold`, { body: { spec: { replicas: 12 } }, contentType: 'application/merge-patch+json' }),
      /replicas must be at most 10/,
    );
  });

  test('v1 ↔ v2 through the conversion webhook: written as v1, stored and read as v2, read back as v1; v1 writes are validated', async () => {
    const before = await counted('/convert', '200');
    const created = await env.client.json<WidgetV1>('POST', collection('v1'), {
      body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'from-v1' }, spec: { count: 3 } },
    });
    // The answer is in the version asked for, defaulted by the v2 mutating webhook (matchPolicy Equivalent).
    assert.equal(created.apiVersion, `${group}/v1`);
    assert.deepEqual(created.spec, { count: 3, tier: 'standard' });
    const asV2 = await env.client.json<WidgetV2>('GET', `${collection('v2')}/from-v1`);
    assert.equal(asV2.apiVersion, `${group}/v2`);
    assert.deepEqual(asV2.spec, { replicas: 3, tier: 'standard' });
    const asV1 = await env.client.json<WidgetV1>('GET', `${collection('v1')}/from-v1`);
    assert.deepEqual(asV1.spec, { count: 3, tier: 'standard' });
    assert.equal(asV1.metadata?.uid, asV2.metadata?.uid);
    // A v2 object listed as v1.
    const list = await env.client.json<{ items: WidgetV1[] }>('GET', collection('v1'));
    assert.deepEqual(list.items.find((w) => w.metadata?.name === 'defaulted')?.spec, { count: 2, tier: 'standard' });
    // The v2 validator sees a v1 create converted.
    await assert.rejects(
      env.client.json('POST', collection('v1'), {
        body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'big-v1' }, spec: { count: 50 } },
      }),
      /denied the request: replicas must be at most 10/,
    );
    assert.ok(await counted('/convert', '200') > before, 'the API server called /convert');
  });

  test('a validator that throws: HTTP 500, so failurePolicy Fail rejects the create as "failed calling webhook"; logged once with the uid', async (t) => {
    const err = await env.client.json('POST', collection('v2'), {
      body: { apiVersion: `${group}/v2`, kind: 'Widget', metadata: { name: 'seven' }, spec: { replicas: 7 } },
    }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 500);
    t.diagnostic(`API error: ${err.message}`);
    assert.match(err.message, /failed calling webhook "vwidget\.webhooktest\.example\.com"/);
    const uid = /request uid ([0-9a-f-]+)/.exec(err.message)?.[1];
    assert.ok(uid, `the API error quotes the server's answer with the uid: ${err.message}`);
    const logged = lines.filter((l) => l.uid === uid);
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.match(JSON.stringify(logged[0]), /a bug in the validator/);
    assert.equal(await counted('/validate-webhooktest-example-com-v2-widget', '500'), 1);
  });

  test('/readyz: the webhook-server check passes while serving; latency histogram filled', async (t) => {
    const [ready] = await mgr.health.run('readyz', { only: 'webhook-server' });
    assert.deepEqual(ready, { name: 'webhook-server', ok: true });
    t.diagnostic(`env start ${env.startMs} ms; webhook configurations active ${activeAfterMs} ms after creation`);
    const { values } = await registry.getSingleMetric('controller_runtime_webhook_latency_seconds')!.get();
    const sample = values as Array<{ metricName?: string; labels: Record<string, string | number>; value: number }>;
    for (const webhook of ['/convert', '/mutate-webhooktest-example-com-v2-widget', '/validate-webhooktest-example-com-v2-widget']) {
      const of = (suffix: string): number => sample.find((v) => v.metricName === `controller_runtime_webhook_latency_seconds_${suffix}` && v.labels['webhook'] === webhook)?.value ?? 0;
      assert.ok(of('count') > 0, `${webhook} observed`);
      t.diagnostic(`${webhook}: ${of('count')} requests, mean ${(1000 * of('sum') / of('count')).toFixed(2)} ms in the server`);
    }
  });
});
