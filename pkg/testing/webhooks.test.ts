/**
 * The pure parts of the test environment's webhook support: reading manifests, making client configs local (service
 * → url with the caBundle; url kept; inputs never mutated), and classifying what the API server said to a probe.
 * The whole flow against a real kube-apiserver is in test/testing-webhooks.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ApiError } from '../client/errors.ts';
import type { CustomResourceDefinition } from './crds.ts';
import {
  localClientConfig, localConversion, localWebhookConfiguration, probeOutcome, readWebhookConfigurations, type WebhookConfiguration,
} from './webhooks.ts';

test('localClientConfig: service → url (path with or without a leading slash, none) and caBundle; a url config is kept', () => {
  const svc = { service: { namespace: 'system', name: 'webhook-service', path: '/mutate-x' } };
  assert.deepEqual(localClientConfig(svc, '127.0.0.1:1234', 'Q0E='), { url: 'https://127.0.0.1:1234/mutate-x', caBundle: 'Q0E=' });
  assert.deepEqual(localClientConfig({ service: { path: 'convert' } }, 'h:1', 'x'), { url: 'https://h:1/convert', caBundle: 'x' });
  assert.deepEqual(localClientConfig({ service: {}, caBundle: 'old' }, 'h:1', 'x'), { url: 'https://h:1', caBundle: 'x' });
  const byUrl = { url: 'https://elsewhere/x', caBundle: 'theirs' };
  assert.equal(localClientConfig(byUrl, 'h:1', 'x'), byUrl);
  assert.equal(localClientConfig(undefined, 'h:1', 'x'), undefined);
});

test('localWebhookConfiguration and localConversion work on copies; a CRD without a webhook conversion by service is returned as is', () => {
  const config: WebhookConfiguration = {
    apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: 'm' },
    webhooks: [{ name: 'a', clientConfig: { service: { path: '/a' } }, sideEffects: 'None' }, { name: 'b', clientConfig: { url: 'https://b/' } }],
  };
  const before = structuredClone(config);
  const local = localWebhookConfiguration(config, 'h:9', 'x');
  assert.deepEqual(config, before, 'input not mutated');
  assert.deepEqual(local.webhooks, [{ name: 'a', clientConfig: { url: 'https://h:9/a', caBundle: 'x' }, sideEffects: 'None' }, { name: 'b', clientConfig: { url: 'https://b/' } }]);

  const crd: CustomResourceDefinition = { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'c' },
    spec: { group: 'g', conversion: { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { service: { name: 's', namespace: 'n', path: '/convert' } } } } } as CustomResourceDefinition['spec'] };
  const crdBefore = structuredClone(crd);
  const localCrd = localConversion(crd, 'h:9', 'x');
  assert.deepEqual(crd, crdBefore);
  assert.deepEqual((localCrd.spec as { conversion: unknown }).conversion, { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: 'https://h:9/convert', caBundle: 'x' } } });
  const none: CustomResourceDefinition = { metadata: { name: 'n' }, spec: { group: 'g', conversion: { strategy: 'None' } } as CustomResourceDefinition['spec'] };
  assert.equal(localConversion(none, 'h:9', 'x'), none);
});

test('readWebhookConfigurations: files and directories (other kinds skipped); a missing path or one without configurations fails, naming it', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tscm-webhooks-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'manifests.yaml'), [
    'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: m}\nwebhooks: []',
    'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}',
  ].join('\n---\n'));
  writeFileSync(join(dir, 'service.yaml'), 'apiVersion: v1\nkind: Service\nmetadata: {name: webhook-service}\n');
  writeFileSync(join(dir, 'notes.txt'), 'not a manifest');
  assert.deepEqual(readWebhookConfigurations([dir]).map((c) => `${c.kind}/${c.metadata?.name}`), ['MutatingWebhookConfiguration/m', 'ValidatingWebhookConfiguration/v']);
  assert.throws(() => readWebhookConfigurations([join(dir, 'service.yaml')]), /webhook path .*service\.yaml holds no admissionregistration\.k8s\.io\/v1/);
  assert.throws(() => readWebhookConfigurations(['no/such/dir']), /webhook path no\/such\/dir \(relative to the working directory: .*\) does not exist/);
});

test('probeOutcome: an HTTP answer from the server, a transport failure, no call, and a refusal that is not the probe\'s', () => {
  const name = 'mutating.webhook-probe.testenv.ts-controller-manager.io';
  const apiErr = (message: string): ApiError => new ApiError(500, 'InternalError', `POST /api/v1/namespaces/default/configmaps: HTTP 500 InternalError: ${message}`, {});
  assert.equal(probeOutcome(apiErr(`Internal error occurred: failed calling webhook "${name}": failed to call webhook: the server could not find the requested resource`), name).outcome, 'answered');
  assert.equal(probeOutcome(apiErr(`Internal error occurred: failed calling webhook "${name}": failed to call webhook: Post "https://127.0.0.1:1/p?timeout=5s": dial tcp 127.0.0.1:1: connect: connection refused`), name).outcome, 'unreachable');
  assert.equal(probeOutcome(apiErr(`failed calling webhook "${name}": failed to call webhook: Post "https://127.0.0.1:1/p": tls: failed to verify certificate: x509: certificate signed by unknown authority`), name).outcome, 'unreachable');
  assert.equal(probeOutcome(undefined, name).outcome, 'not-called');
  const other = apiErr('admission webhook "someone-else.example.com" denied the request: no');
  assert.throws(() => probeOutcome(other, name), (e: unknown) => e === other);
  assert.throws(() => probeOutcome(new TypeError('fetch failed'), name), TypeError);
});
