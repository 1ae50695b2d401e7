import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fromHub, v2SubnetsAnnotation, type NetworkSpecSubnet } from '../../apis/samplecrd/v2/types.ts';
import { validateNetwork, validateNetworkSpec, validateSpec } from './validation.ts';

/** The canonical CIDRs (and gateways) of a valid v2 spec. */
function okV2(subnets: NetworkSpecSubnet[]): string[] {
  const v = validateNetworkSpec('v2', { subnets });
  assert.ok(v.ok, v.ok ? '' : v.message);
  return v.desired.map((d) => (d.gatewayText ? `${d.cidrText} gw ${d.gatewayText}` : d.cidrText));
}

function badV2(subnets: NetworkSpecSubnet[] | undefined, field: string, message: RegExp): string {
  const v = validateNetworkSpec('v2', subnets === undefined ? {} : { subnets });
  assert.equal(v.ok, false, JSON.stringify(subnets));
  if (v.ok) return '';
  assert.equal(v.field, field);
  assert.match(v.message, message);
  assert.ok(v.message.includes(field), `the message names the field: ${v.message}`);
  return v.message;
}

describe('validateNetworkSpec v2: the subnet list', () => {
  test('dual-stack in either order, single-stack of either family; canonical CIDRs in spec order', () => {
    assert.deepEqual(okV2([{ cidr: '10.0.0.7/24', gateway: '10.0.0.1' }, { cidr: '2001:DB8::/64' }]), ['10.0.0.0/24 gw 10.0.0.1', '2001:db8::/64']);
    assert.deepEqual(okV2([{ cidr: '2001:db8::/64', gateway: '2001:db8::1' }, { cidr: '10.0.0.0/24' }]), ['2001:db8::/64 gw 2001:db8::1', '10.0.0.0/24']);
    assert.deepEqual(okV2([{ cidr: '10.0.0.0/24' }]), ['10.0.0.0/24']);
    assert.deepEqual(okV2([{ cidr: '2001:db8::/64' }]), ['2001:db8::/64']);
  });

  test('no subnets, an empty list, more than two', () => {
    badV2(undefined, 'spec.subnets', /^spec\.subnets must list at least one subnet$/);
    assert.equal(validateNetworkSpec('v2', undefined).ok, false);
    badV2([], 'spec.subnets', /at least one subnet/);
    badV2([{ cidr: '10.0.0.0/24' }, { cidr: '2001:db8::/64' }, { cidr: '10.1.0.0/24' }], 'spec.subnets', /has 3 entries; a Network has at most 2 \(one IPv4 and one IPv6\)/);
  });

  test('two subnets of the same IP family', () => {
    badV2([{ cidr: '10.0.0.0/24' }, { cidr: '10.1.0.0/24' }], 'spec.subnets[1].cidr',
      /^spec\.subnets\[0\]\.cidr 10\.0\.0\.0\/24 and spec\.subnets\[1\]\.cidr 10\.1\.0\.0\/24 are both IPv4; a Network has at most one IPv4 and one IPv6 subnet$/);
    badV2([{ cidr: '2001:db8::/64' }, { cidr: '2001:db8:1::/64' }], 'spec.subnets[1].cidr', /are both IPv6/);
  });

  test('duplicates, also when only the host bits differ', () => {
    badV2([{ cidr: '10.0.0.0/24' }, { cidr: '10.0.0.0/24' }], 'spec.subnets[1].cidr', /^spec\.subnets\[1\]\.cidr 10\.0\.0\.0\/24 duplicates spec\.subnets\[0\]\.cidr$/);
    badV2([{ cidr: '10.0.0.0/24' }, { cidr: '10.0.0.9/24', gateway: '10.0.0.1' }], 'spec.subnets[1].cidr', /duplicates/);
    badV2([{ cidr: '2001:db8::/64' }, { cidr: '2001:DB8:0::/64' }], 'spec.subnets[1].cidr', /duplicates/);
  });
});

describe('validateNetworkSpec: per-subnet rules, the same for v1 and each v2 subnet', () => {
  // [cidr, gateway, field suffix, message pattern]: what neutron-server 21 refuses (validation.ts cites where) and the
  // syntax rules. The v1 message is asserted as the controller has always written it (test/network.test.ts and the
  // InvalidSpec condition rely on it); each v2 message is the same text with the v2 field path.
  const refused: [string | undefined, string | undefined, 'cidr' | 'gateway', RegExp][] = [
    [undefined, undefined, 'cidr', /^spec\.cidr must be set$/],
    ['10.0.0.0', undefined, 'cidr', /^spec\.cidr "10\.0\.0\.0" is not an IPv4 or IPv6 CIDR such as 192\.168\.0\.0\/24$/],
    ['10.0.0.0/33', undefined, 'cidr', /is not an IPv4 or IPv6 CIDR/],
    ['0.0.0.0/0', undefined, 'cidr', /^spec\.cidr 0\.0\.0\.0\/0: Neutron does not allow prefix length 0$/],
    ['::/0', undefined, 'cidr', /prefix length 0/],
    ['10.0.0.4/31', undefined, 'cidr', /^spec\.cidr 10\.0\.0\.4\/31: Neutron refuses prefixes longer than \/30 on subnets with DHCP$/],
    ['10.0.0.5/32', undefined, 'cidr', /longer than \/30/],
    ['2001:db8::/127', undefined, 'cidr', /longer than \/126/],
    ['0.0.0.0/8', undefined, 'cidr', /^spec\.cidr 0\.0\.0\.0\/8: Neutron refuses subnets starting at 0\.0\.0\.0 with DHCP$/],
    ['224.1.0.0/16', undefined, 'cidr', /^spec\.cidr 224\.1\.0\.0\/16 is a multicast range \(224\.0\.0\.0\/4\); Neutron refuses such subnets with DHCP enabled$/],
    ['ff02::/16', undefined, 'cidr', /multicast range \(ff00::\/8\)/],
    ['127.0.0.0/24', undefined, 'cidr', /loopback range \(127\.0\.0\.0\/8\)/],
    ['10.0.0.0/24', '10.0.0.0', 'gateway', /^spec\.gateway 10\.0\.0\.0 is the network address of 10\.0\.0\.0\/24; Neutron refuses it \("Gateway is not valid on subnet"\)$/],
    ['10.0.0.0/24', '10.0.0.255', 'gateway', /is the broadcast address of 10\.0\.0\.0\/24/],
    ['10.0.0.0/24', '10.0.0.010', 'gateway', /^spec\.gateway "10\.0\.0\.010" is not an IP address$/],
    ['10.0.0.0/24', '10.0.1.1', 'gateway', /^spec\.gateway 10\.0\.1\.1 is not inside spec\.cidr 10\.0\.0\.0\/24$/],
    ['2001:db8::/64', '10.0.0.1', 'gateway', /is not inside/],
  ];

  for (const [cidr, gateway, which, re] of refused) {
    test(`${cidr ?? '(no cidr)'}${gateway ? ` gateway ${gateway}` : ''}: refused, ${which}`, () => {
      const v1 = validateNetworkSpec('v1', { ...(cidr !== undefined && { cidr }), ...(gateway !== undefined && { gateway }) });
      assert.equal(v1.ok, false);
      if (v1.ok) return;
      assert.equal(v1.field, `spec.${which}`);
      assert.match(v1.message, re);
      const legacy = validateSpec({ ...(cidr !== undefined && { cidr }), ...(gateway !== undefined && { gateway }) });
      assert.deepEqual(legacy, v1, 'validateSpec (the v1 controller path) says the same');
      // The same subnet as the second of a v2 spec (after a valid one of the other family, so only this rule fires).
      const family6 = (cidr ?? '').includes(':');
      const other = family6 ? { cidr: '10.9.0.0/24' } : { cidr: '2001:db8:9::/64' };
      const sub = { cidr: cidr ?? '', ...(gateway !== undefined && { gateway }) };
      const msg = badV2([other, sub], `spec.subnets[1].${which}`, /./);
      assert.equal(msg, v1.message.replaceAll('spec.', 'spec.subnets[1].'));
    });
  }

  test('accepted neighbours: /30, /126, link-local (both families), IPv6 prefixes other than /64, IPv6 gateway on the first address', () => {
    for (const s of [
      { cidr: '10.0.0.4/30' }, { cidr: '2001:db8::/126' }, { cidr: '169.254.1.0/24' }, { cidr: 'fe80::/64' },
      { cidr: '2001:db8::/48' }, { cidr: '2001:db8::/120' }, { cidr: '2001:db8::/64', gateway: '2001:db8::' },
    ]) {
      assert.ok(validateNetworkSpec('v1', s).ok, JSON.stringify(s));
      const other = s.cidr.includes(':') ? { cidr: '10.9.0.0/24' } : { cidr: '2001:db8:9::/64' };
      assert.ok(validateNetworkSpec('v2', { subnets: [s, other] }).ok, JSON.stringify(s));
    }
  });

  test('the first invalid subnet is reported, with its index', () => {
    badV2([{ cidr: '127.0.0.0/24' }, { cidr: '2001:db8::/127' }], 'spec.subnets[0].cidr', /^spec\.subnets\[0\]\.cidr 127\.0\.0\.0\/24 is a loopback range/);
    badV2([{ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }, { cidr: '2001:db8::/64', gateway: '2001:db8:1::1' }], 'spec.subnets[1].gateway',
      /^spec\.subnets\[1\]\.gateway 2001:db8:1::1 is not inside spec\.subnets\[1\]\.cidr 2001:db8::\/64$/);
  });
});

describe('validateNetwork: a whole object, by apiVersion (what a validating webhook calls)', () => {
  test('v1 and v2 objects; a dual-stack v1 (annotated) is checked in its v2 form; the annotation is refused on v2; other versions refused', () => {
    assert.deepEqual(validateNetwork({ apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', spec: { cidr: '10.0.0.0/24' } }),
      validateNetworkSpec('v1', { cidr: '10.0.0.0/24' }));
    const bad1 = validateNetwork({ apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', spec: { cidr: '127.0.0.0/24' } });
    assert.equal(bad1.ok ? '' : bad1.field, 'spec.cidr');
    const dual = fromHub({ apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', spec: { subnets: [{ cidr: '10.0.0.0/24' }, { cidr: '2001:db8::/64' }] } });
    const ok = validateNetwork(dual);
    assert.ok(ok.ok);
    assert.equal(ok.desired.length, 2, 'both subnets checked');
    // A v1 client moves the first subnet to IPv6: now two IPv6 subnets.
    const edited = validateNetwork({ ...dual, spec: { cidr: '2001:db8:1::/64' } });
    assert.equal(edited.ok, false);
    if (!edited.ok) assert.match(edited.message, /are both IPv6/);
    const v2 = validateNetwork({ apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { annotations: { [v2SubnetsAnnotation]: '{}' } }, spec: { subnets: [{ cidr: '10.0.0.0/24' }] } });
    assert.equal(v2.ok ? '' : v2.field, `metadata.annotations[${v2SubnetsAnnotation}]`);
    assert.ok(validateNetwork({ apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', spec: { subnets: [{ cidr: '10.0.0.0/24' }] } }).ok);
    const other = validateNetwork({ apiVersion: 'samplecrd.k8s.io/v3', spec: { cidr: '10.0.0.0/24' } });
    assert.equal(other.ok ? '' : other.field, 'apiVersion');
  });
});
