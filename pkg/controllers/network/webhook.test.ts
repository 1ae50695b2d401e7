/**
 * The Network webhooks' functions (webhook.ts), without a server: create refuses an invalid Network with exactly
 * validateNetwork's message; an update is checked only when it changes the spec (or v1's conversion annotation);
 * the conversion is toHub/fromHub. Through a real API server: test/webhook-network.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { v2SubnetsAnnotation } from '../../apis/samplecrd/v2/conversion.ts';
import { isDenied } from '../../webhook/admission.ts';
import type { AdmissionContext } from '../../webhook/admission.ts';
import { networkConversion, networkValidator } from './webhook.ts';
import { validateNetwork } from './validation.ts';

type Arg = Parameters<NonNullable<typeof networkValidator.validateCreate>>[0];
const ctx = {} as AdmissionContext<Arg>; // the validator reads no context
const v1 = (spec: Record<string, unknown>, annotations?: Record<string, string>): Arg =>
  ({ apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata: { name: 'n', namespace: 'd', ...(annotations ? { annotations } : {}) }, spec }) as unknown as Arg; // the cast: test objects with loose specs
const v2 = (subnets: Record<string, unknown>[]): Arg =>
  ({ apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { name: 'n', namespace: 'd' }, spec: { subnets } }) as unknown as Arg;

const message = (r: unknown): string | undefined => (isDenied(r) ? r.message : undefined);

test('create: a valid Network passes, an invalid one is denied with validateNetwork\'s message (v1 and v2)', async () => {
  assert.equal(await networkValidator.validateCreate?.(v1({ cidr: '10.0.0.0/24' }), ctx), undefined);
  assert.equal(await networkValidator.validateCreate?.(v2([{ cidr: '10.0.0.0/24' }, { cidr: '2001:db8::/64' }]), ctx), undefined);
  for (const bad of [v1({ cidr: '224.1.0.0/16' }), v1({ cidr: '10.0.0.0/24', gateway: '10.0.1.1' }), v2([{ cidr: '10.0.0.0/24' }, { cidr: '10.1.0.0/24' }])]) {
    const want = validateNetwork(bad);
    assert.ok(!want.ok);
    assert.equal(message(await networkValidator.validateCreate?.(bad, ctx)), want.message);
  }
});

test('update: checked only when the spec or the v1 conversion annotation changes', async () => {
  const invalid = v1({ cidr: '224.1.0.0/16' });
  const relabelled = { ...invalid, metadata: { ...invalid.metadata, labels: { a: 'b' }, finalizers: [] } } as Arg;
  assert.equal(await networkValidator.validateUpdate?.(invalid, relabelled, ctx), undefined, 'metadata only: allowed');
  assert.ok(isDenied(await networkValidator.validateUpdate?.(invalid, v1({ cidr: '224.2.0.0/16' }), ctx)), 'spec changed to invalid: denied');
  assert.equal(await networkValidator.validateUpdate?.(invalid, v1({ cidr: '10.0.0.0/24' }), ctx), undefined, 'fixed: allowed');
  // The annotation carries v2's other subnet: changing it to a clash is a spec change.
  const dual = v1({ cidr: '10.0.0.0/24' }, { [v2SubnetsAnnotation]: JSON.stringify({ subnets: [{ cidr: '2001:db8::/64' }] }) });
  const clash = v1({ cidr: '10.0.0.0/24' }, { [v2SubnetsAnnotation]: JSON.stringify({ subnets: [{ cidr: '10.1.0.0/24' }] }) });
  assert.ok(isDenied(await networkValidator.validateUpdate?.(dual, clash, ctx)));
  assert.ok(!('validateDelete' in networkValidator), 'deletes are never refused');
});

test('conversion: hub v2, spoke v1 (toHub/fromHub)', async () => {
  assert.equal(networkConversion.hub, 'v2');
  const spoke = networkConversion.spokes['v1'];
  assert.ok(spoke);
  const hub = await spoke.toHub(v1({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }), {} as never);
  assert.deepEqual((hub as { spec: unknown }).spec, { subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }] });
  const back = await spoke.fromHub(hub, {} as never);
  assert.deepEqual((back as { spec: unknown }).spec, { cidr: '10.0.0.0/24', gateway: '10.0.0.1' });
});
