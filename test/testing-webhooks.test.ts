/**
 * startTestEnv({ webhooks }) on the real binaries (envtest's WebhookInstallOptions): kubebuilder-shaped manifests
 * (test/testdata/webhook-env: configurations and a CRD conversion by `service`) are installed pointing at
 * `https://127.0.0.1:<port><path>` with a generated CA; a ControllerManager in this process serves them from
 * `env.webhook` (bindAddress, certDir); `env.waitForWebhooks()` fails, saying why, while nothing serves, and resolves
 * once the API server calls the server — after which the very first write is defaulted, denied or converted.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { KubeObject } from '../pkg/apimachinery/meta.ts';
import { ApiError } from '../pkg/client/errors.ts';
import { ControllerManager } from '../pkg/runtime/manager.ts';
import { startTestEnv } from '../pkg/testing/index.ts';
import type { WebhookConfiguration } from '../pkg/testing/webhooks.ts';
import { denied } from '../pkg/webhook/admission.ts';
import { repoRoot } from './helpers/crds.ts';

const group = 'webhookenv.example.com';
const testdata = join(repoRoot, 'test', 'testdata', 'webhook-env');
interface GadgetV1 extends KubeObject { spec: { count?: number; tier?: string } }
interface GadgetV2 extends KubeObject { spec: { replicas?: number; tier?: string } }
const collection = (version: string): string => `/apis/${group}/${version}/namespaces/default/gadgets`;

describe('startTestEnv({ webhooks })', () => {
  test('manifests by service made local; waitForWebhooks fails while nothing serves, then the first writes are defaulted, denied, converted; stop() removes the certificates', async (t) => {
    const env = await startTestEnv({ crdPaths: [join(testdata, 'crd.yaml')], webhooks: { paths: [testdata] } });
    t.after(() => env.stop());
    const serving = env.webhook;
    assert.ok(serving);
    assert.equal(serving.host, '127.0.0.1');
    assert.equal(serving.bindAddress, `127.0.0.1:${serving.port}`);
    assert.deepEqual(env.webhookConfigurations, ['MutatingWebhookConfiguration/mutating-webhook-configuration', 'ValidatingWebhookConfiguration/validating-webhook-configuration']);

    // The certificate directory: a serving certificate for 127.0.0.1, signed by the CA that is the caBundle.
    const cert = new X509Certificate(readFileSync(join(serving.certDir, 'tls.crt')));
    const ca = new X509Certificate(readFileSync(join(serving.certDir, 'ca.crt')));
    assert.equal(ca.toString(), new X509Certificate(serving.caCert).toString());
    assert.ok(cert.verify(ca.publicKey) && cert.checkIssued(ca), 'tls.crt is signed by ca.crt');
    assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
    assert.equal(cert.checkHost('localhost'), 'localhost');
    assert.ok(existsSync(join(serving.certDir, 'tls.key')));

    // What the API server holds: url instead of service, the CA as caBundle; the CRD's conversion likewise.
    const caBundle = Buffer.from(serving.caCert).toString('base64');
    for (const [kind, name, path] of [['mutatingwebhookconfigurations', 'mutating-webhook-configuration', '/mutate-webhookenv-example-com-v2-gadget'],
      ['validatingwebhookconfigurations', 'validating-webhook-configuration', '/validate-webhookenv-example-com-v2-gadget']] as const) {
      const stored = await env.client.json<WebhookConfiguration>('GET', `/apis/admissionregistration.k8s.io/v1/${kind}/${name}`);
      assert.deepEqual(stored.webhooks?.map((w) => w.clientConfig), [{ url: `https://127.0.0.1:${serving.port}${path}`, caBundle }]);
    }
    const crd = await env.client.json<{ spec: { conversion: { webhook: { clientConfig: unknown } } } }>('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.${group}`);
    assert.deepEqual(crd.spec.conversion.webhook.clientConfig, { url: `https://127.0.0.1:${serving.port}/convert`, caBundle });

    // Nothing serves yet: the wait fails, naming the address and quoting the API server; its probes are removed.
    const t0 = Date.now();
    await assert.rejects(env.waitForWebhooks({ timeoutMs: 5_000 }), (err: Error) => {
      t.diagnostic(`without a server: ${err.message.slice(0, 300)}`);
      assert.match(err.message, new RegExp(`is the webhook server listening on 127\\.0\\.0\\.1:${serving.port} with the certificate in ${serving.certDir.replaceAll('.', '\\.')}\\?`));
      assert.match(err.message, /connection refused/);
      return true;
    });
    assert.ok(Date.now() - t0 < 20_000, 'gives up at about its timeout');
    for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) {
      const list = await env.client.json<{ items: KubeObject[] }>('GET', `/apis/admissionregistration.k8s.io/v1/${kind}`);
      assert.deepEqual(list.items.map((c) => c.metadata?.name), [kind.startsWith('mutating') ? 'mutating-webhook-configuration' : 'validating-webhook-configuration'], 'probes removed');
    }

    // The test's manager serves them where env.webhook says.
    const mgr = new ControllerManager({ kubeConfig: env.kubeConfig, registry: new Registry(), webhook: { bindAddress: serving.bindAddress, certDir: serving.certDir } });
    mgr.webhook<GadgetV2>({ group, version: 'v2', kind: 'Gadget' })
      .withDefaulter((g) => { g.spec.tier ??= 'standard'; })
      .withValidator({ validateCreate: (g) => ((g.spec.replicas ?? 0) > 10 ? denied('replicas must be at most 10') : undefined) })
      .withConversion({
        hub: 'v2',
        spokes: {
          v1: {
            toHub: (o) => { const { count, ...rest } = (o as GadgetV1).spec; return { ...o, spec: { ...rest, replicas: count } }; },
            fromHub: (h) => { const { replicas, ...rest } = (h as GadgetV2).spec; return { ...h, spec: { ...rest, count: replicas } }; },
          },
        },
      })
      .complete();
    const ac = new AbortController();
    const running = mgr.start(ac.signal);
    t.after(async () => { ac.abort(); await running; });
    const t1 = Date.now();
    await env.waitForWebhooks();
    t.diagnostic(`waitForWebhooks resolved ${Date.now() - t1} ms after the manager was started`);

    // No retries from here on: the first writes are intercepted.
    const created = await env.client.json<GadgetV2>('POST', collection('v2'), { body: { apiVersion: `${group}/v2`, kind: 'Gadget', metadata: { name: 'a' }, spec: { replicas: 2 } } });
    assert.deepEqual(created.spec, { replicas: 2, tier: 'standard' });
    await assert.rejects(
      env.client.json('POST', collection('v2'), { body: { apiVersion: `${group}/v2`, kind: 'Gadget', metadata: { name: 'big' }, spec: { replicas: 11 } } }),
      (err: unknown) => err instanceof ApiError && err.status === 403 && /admission webhook "vgadget-v2\.kb\.io" denied the request: replicas must be at most 10/.test(err.message),
    );
    const asV1 = await env.client.json<GadgetV1>('GET', `${collection('v1')}/a`);
    assert.deepEqual([asV1.apiVersion, asV1.spec], [`${group}/v1`, { count: 2, tier: 'standard' }]);

    ac.abort();
    await running;
    await env.stop();
    assert.equal(existsSync(serving.certDir), false, 'the certificate directory goes with the environment');
  });

  test('configurations given as objects; a url client config is kept; CRDs installed later made local too; a path without webhook configurations fails before anything starts', async (t) => {
    await assert.rejects(startTestEnv({ webhooks: { paths: [join(repoRoot, 'test', 'testdata', 'widgets-crd.yaml')] } }),
      /webhook path .*widgets-crd\.yaml holds no admissionregistration\.k8s\.io\/v1 MutatingWebhookConfiguration or ValidatingWebhookConfiguration/);
    const env = await startTestEnv({
      webhooks: {
        validatingWebhooks: [{
          apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: 'mixed' },
          webhooks: [
            { name: 'by-service.example.com', clientConfig: { service: { name: 's', namespace: 'n', path: 'validate-pods' } }, admissionReviewVersions: ['v1'], sideEffects: 'None',
              rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
            { name: 'by-url.example.com', clientConfig: { url: 'https://example.invalid/validate' }, admissionReviewVersions: ['v1'], sideEffects: 'None',
              rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
          ],
        }] as WebhookConfiguration[],
      },
    });
    t.after(() => env.stop());
    const stored = await env.client.json<WebhookConfiguration>('GET', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/mixed');
    assert.deepEqual(stored.webhooks?.map((w) => w.clientConfig), [
      { url: `https://127.0.0.1:${env.webhook!.port}/validate-pods`, caBundle: Buffer.from(env.webhook!.caCert).toString('base64') },
      { url: 'https://example.invalid/validate' },
    ]);
    // CRDs installed later get their conversion webhook made local as well.
    assert.deepEqual(await env.installCRDs([join(testdata, 'crd.yaml')]), [`gadgets.${group}`]);
    const crd = await env.client.json<{ spec: { conversion: { webhook: { clientConfig: unknown } } } }>('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.${group}`);
    assert.deepEqual(crd.spec.conversion.webhook.clientConfig, { url: `https://127.0.0.1:${env.webhook!.port}/convert`, caBundle: Buffer.from(env.webhook!.caCert).toString('base64') });
  });
});
