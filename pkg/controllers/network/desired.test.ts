import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Network } from '../../apis/samplecrd/v1/types.ts';
import {
  computeStatus, FINALIZER, needsReconcile, neutronName, rejectedThisGeneration, statusEqual, statusPatch, uidTag, validateSpec,
} from './desired.ts';

const net = (over: Partial<Network> = {}, meta: Network['metadata'] = {}): Network => ({
  metadata: { name: 'n', namespace: 'ns', uid: 'u-1', generation: 2, resourceVersion: '10', ...meta },
  spec: { cidr: '10.0.0.0/24' },
  ...over,
});

describe('validateSpec', () => {
  const ok = (spec: Network['spec']): { cidrText: string; gatewayText: string | undefined } => {
    const v = validateSpec(spec);
    assert.ok(v.ok, v.ok ? '' : v.message);
    return { cidrText: v.desired.cidrText, gatewayText: v.desired.gatewayText };
  };
  const bad = (spec: Parameters<typeof validateSpec>[0], re: RegExp): void => {
    const v = validateSpec(spec);
    assert.equal(v.ok, false, JSON.stringify(spec));
    if (!v.ok) assert.match(v.message, re);
  };

  test('valid IPv4/IPv6 specs, canonicalised', () => {
    assert.deepEqual(ok({ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }), { cidrText: '10.0.0.0/24', gatewayText: '10.0.0.1' });
    assert.deepEqual(ok({ cidr: '10.0.0.7/24' }), { cidrText: '10.0.0.0/24', gatewayText: undefined }, 'host bits cleared as Neutron does');
    assert.deepEqual(ok({ cidr: '2001:DB8:0:0::/64', gateway: '2001:db8::FE' }), { cidrText: '2001:db8::/64', gatewayText: '2001:db8::fe' });
    assert.deepEqual(ok({ cidr: '10.0.0.0/24', gateway: '' }), { cidrText: '10.0.0.0/24', gatewayText: undefined });
    ok({ cidr: '10.0.0.4/30' });
    ok({ cidr: '169.254.1.0/24' }); // link-local: accepted by Neutron (checked on neutron-server 21)
    ok({ cidr: '2001:db8::/64', gateway: '2001:db8::' }); // IPv6 has no broadcast: Neutron accepts the first address
  });

  test('what Neutron refuses is refused here, before any Neutron call (issue 12)', () => {
    bad({ cidr: '10.0.0.0/24', gateway: '10.0.0.0' }, /network address of 10\.0\.0\.0\/24; Neutron refuses it/);
    bad({ cidr: '10.0.0.0/24', gateway: '10.0.0.255' }, /broadcast address/);
    bad({ cidr: '10.0.0.4/31' }, /longer than \/30/);
    bad({ cidr: '10.0.0.5/32' }, /longer than \/30/);
    bad({ cidr: '2001:db8::/127' }, /longer than \/126/);
    bad({ cidr: '0.0.0.0/8' }, /starting at 0\.0\.0\.0/);
    bad({ cidr: '0.0.0.0/0' }, /prefix length 0/);
    bad({ cidr: '::/0' }, /prefix length 0/);
    bad({ cidr: '224.1.0.0/16' }, /multicast/);
    bad({ cidr: '127.0.0.0/24' }, /loopback/);
  });

  test('invalid: missing or malformed cidr, bad gateway, gateway outside, wrong family', () => {
    bad(undefined, /spec.cidr must be set/);
    bad({}, /spec.cidr must be set/);
    bad({ cidr: '10.0.0.0' }, /not an IPv4 or IPv6 CIDR/);
    bad({ cidr: '10.0.0.0/33' }, /not an IPv4 or IPv6 CIDR/);
    bad({ cidr: '2001:db8::/129' }, /not an IPv4 or IPv6 CIDR/);
    bad({ cidr: '10.0.0.0/24', gateway: '10.0.0.010' }, /spec.gateway "10.0.0.010" is not an IP address/);
    bad({ cidr: '10.0.0.0/24', gateway: '10.0.1.1' }, /spec.gateway 10.0.1.1 is not inside spec.cidr 10.0.0.0\/24/);
    bad({ cidr: '2001:db8::/64', gateway: '2001:db8:0:1::1' }, /not inside/);
    bad({ cidr: '2001:db8::/64', gateway: '10.0.0.1' }, /not inside/);
    bad({ cidr: '10.0.0.0/24', gateway: '::ffff:10.0.0.1' }, /not inside/);
  });
});

describe('identity', () => {
  test('tag by UID; name ns/name capped at 255 characters', () => {
    assert.equal(uidTag('abc'), 'k8s-uid:abc');
    assert.equal(neutronName(net()), 'ns/n');
    assert.equal(neutronName({ metadata: { namespace: 'a'.repeat(63), name: 'b'.repeat(253) } }).length, 255);
  });
});

describe('computeStatus', () => {
  const t1 = new Date('2024-05-01T10:00:00.123Z');
  const t2 = new Date('2024-05-01T11:00:00Z');
  const readyObs = { networkID: 'net', subnetID: 'sub', ready: true, reason: 'Synced', message: 'm' };

  test('first status: ids, observedGeneration, Ready with lastTransitionTime (seconds)', () => {
    assert.deepEqual(computeStatus(net(), readyObs, t1), {
      networkID: 'net', subnetID: 'sub', observedGeneration: 2,
      conditions: [{ type: 'Ready', status: 'True', reason: 'Synced', message: 'm', observedGeneration: 2, lastTransitionTime: '2024-05-01T10:00:00Z' }],
    });
  });

  test('lastTransitionTime changes only with the condition status; other conditions kept', () => {
    const first = computeStatus(net(), readyObs, t1);
    const other = { type: 'Other', status: 'True' as const };
    const withOther = net({ status: { ...first, conditions: [other, ...(first.conditions ?? [])] } });
    const same = computeStatus(withOther, { ...readyObs, message: 'm2' }, t2);
    assert.equal(same.conditions?.[1]?.lastTransitionTime, '2024-05-01T10:00:00Z');
    assert.deepEqual(same.conditions?.[0], other);
    const flipped = computeStatus(withOther, { ...readyObs, ready: false, reason: 'NeutronUnavailable' }, t2);
    assert.equal(flipped.conditions?.[1]?.lastTransitionTime, '2024-05-01T11:00:00Z');
    assert.equal(flipped.conditions?.[1]?.status, 'False');
  });

  test('statusEqual: converged status is not rewritten; any difference is', () => {
    const s = computeStatus(net(), readyObs, t1);
    const converged = net({ status: s });
    assert.equal(statusEqual(converged.status, computeStatus(converged, readyObs, t2)), true);
    assert.equal(statusEqual(converged.status, computeStatus(converged, { ...readyObs, subnetID: 'other' }, t2)), false);
    assert.equal(statusEqual(converged.status, computeStatus(net({ status: s }, { generation: 3 }), readyObs, t2)), false);
    assert.equal(statusEqual(undefined, s), false);
  });

  test('statusPatch clears vanished ids and is fenced by uid and the resourceVersion it was derived from', () => {
    const s = computeStatus(net(), { ...readyObs, subnetID: undefined, ready: false, reason: 'NeutronRejected' }, t1);
    assert.deepEqual(statusPatch(net(), s), {
      metadata: { uid: 'u-1', resourceVersion: '10' },
      status: { networkID: 'net', subnetID: null, observedGeneration: 2, conditions: s.conditions },
    });
  });

  test('rejectedThisGeneration: only InvalidSpec/NeutronRejected for the current generation', () => {
    const st = (reason: string, gen: number): Network => net({ status: computeStatus(net({}, { generation: gen }), { ...readyObs, ready: false, reason }, t1) });
    assert.ok(rejectedThisGeneration(st('NeutronRejected', 2)));
    assert.ok(rejectedThisGeneration(st('InvalidSpec', 2)));
    assert.equal(rejectedThisGeneration(st('NeutronRejected', 1)), undefined, 'the spec changed since');
    assert.equal(rejectedThisGeneration(st('NeutronUnavailable', 2)), undefined, 'transient failures are retried');
    assert.equal(rejectedThisGeneration(net()), undefined);
  });
});

describe('needsReconcile (informer update filter)', () => {
  const base = net({}, { finalizers: [FINALIZER] });
  const changed = (meta: Network['metadata'], status?: Network['status']): Network => ({
    ...base, metadata: { ...base.metadata, resourceVersion: '11', ...meta }, ...(status && { status }),
  });
  test('resync, spec change, deletion, recreation, finalizer removed → yes', () => {
    assert.equal(needsReconcile(base, base), true, 'resync (same resourceVersion)');
    assert.equal(needsReconcile(base, changed({ generation: 3 })), true);
    assert.equal(needsReconcile(base, changed({ deletionTimestamp: '2024-01-01T00:00:00Z' })), true);
    assert.equal(needsReconcile(base, changed({ uid: 'u-2' })), true);
    assert.equal(needsReconcile(base, changed({ finalizers: [] })), true);
  });
  test('status-only updates and our own finalizer addition → no', () => {
    assert.equal(needsReconcile(base, changed({}, { networkID: 'x' })), false);
    assert.equal(needsReconcile(net(), changed({ finalizers: [FINALIZER] })), false);
    assert.equal(needsReconcile(base, changed({ labels: { a: 'b' } })), false);
  });
});
