import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { containsIP, formatCIDR, formatIP, generatePools, parseCIDR, parseIP, poolsForGatewayMove, samePools, sameIP, type CIDR, type IP } from './ipnet.ts';

const cidr = (s: string): CIDR => {
  const c = parseCIDR(s);
  assert.ok(c, s);
  return c;
};

describe('parseIP / formatIP', () => {
  test('IPv4: strict dotted decimal', () => {
    assert.deepEqual(parseIP('192.168.0.1'), { version: 4, value: 0xc0a80001n });
    assert.deepEqual(parseIP('0.0.0.0'), { version: 4, value: 0n });
    for (const bad of ['10.1.0.010', '256.0.0.1', '1.2.3', '1.2.3.4.5', '1.2.3.-4', ' 1.2.3.4', '1.2.3.4/24', '', 'a.b.c.d', '01.2.3.4']) {
      assert.equal(parseIP(bad), undefined, bad);
    }
  });

  test('IPv6: compressed, full, embedded IPv4, upper case; no zones', () => {
    assert.deepEqual(parseIP('::'), { version: 6, value: 0n });
    assert.deepEqual(parseIP('::1'), { version: 6, value: 1n });
    assert.equal(parseIP('2001:DB8::1')?.value, 0x20010db8000000000000000000000001n);
    assert.equal(parseIP('2001:db8:0:0:0:0:0:1')?.value, parseIP('2001:db8::1')?.value);
    assert.equal(parseIP('::ffff:10.0.0.1')?.value, 0xffff0a000001n);
    for (const bad of ['fe80::1%eth0', '1::2::3', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7', '12345::', 'g::1', ':::', '1:2:3:4:5:6:7:8::', '::1.2.3']) {
      assert.equal(parseIP(bad), undefined, bad);
    }
  });

  test('formats canonically (RFC 5952 for IPv6)', () => {
    const f = (s: string): string => {
      const ip = parseIP(s);
      assert.ok(ip, s);
      return formatIP(ip);
    };
    assert.equal(f('10.0.0.1'), '10.0.0.1');
    assert.equal(f('2001:DB8:0:0:0:0:0:1'), '2001:db8::1');
    assert.equal(f('2001:db8:0:1:0:0:0:0'), '2001:db8:0:1::');
    assert.equal(f('2001:db8:0:1:1:1:1:1'), '2001:db8:0:1:1:1:1:1', 'a single zero group is not compressed');
    assert.equal(f('1:0:0:2:0:0:0:3'), '1:0:0:2::3', 'the longest run');
    assert.equal(f('1:0:0:2:0:0:3:4'), '1::2:0:0:3:4', 'the first of equal runs');
    assert.equal(f('0:0:0:0:0:0:0:0'), '::');
    assert.equal(f('::ffff:10.0.0.1'), '::ffff:a00:1');
  });

  test('sameIP compares values, not text', () => {
    assert.equal(sameIP('2001:DB8::FE', '2001:db8:0:0:0:0:0:fe'), true);
    assert.equal(sameIP('10.0.0.1', '10.0.0.2'), false);
    assert.equal(sameIP('10.0.0.1', null), false);
    assert.equal(sameIP('::a00:1', '10.0.0.1'), false, 'different families');
  });
});

describe('parseCIDR', () => {
  test('IPv4 and IPv6; host bits cleared and reported', () => {
    assert.deepEqual(parseCIDR('10.1.0.0/24'), { version: 4, network: 0x0a010000n, prefix: 24, hostBits: false });
    assert.deepEqual(parseCIDR('10.1.0.1/24'), { version: 4, network: 0x0a010000n, prefix: 24, hostBits: true });
    assert.equal(formatCIDR(cidr('2001:DB8:0:0:1::/48')), '2001:db8::/48');
    assert.equal(formatCIDR(cidr('0.0.0.0/0')), '0.0.0.0/0');
    assert.equal(formatCIDR(cidr('::/0')), '::/0');
    assert.equal(formatCIDR(cidr('10.0.0.5/32')), '10.0.0.5/32');
    assert.equal(formatCIDR(cidr('2001:db8::1/128')), '2001:db8::1/128');
  });

  test('rejects what is not a CIDR', () => {
    for (const bad of ['10.0.0.0', '10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/024', '10.0.0.0/-1', '/24', '10.0.0.0/24/1', 'fe80::%1/64', 'x/8']) {
      assert.equal(parseCIDR(bad), undefined, bad);
    }
  });

  test('containsIP: inclusive bounds, same family only', () => {
    const c = cidr('192.168.4.0/22');
    const ip = (s: string): NonNullable<ReturnType<typeof parseIP>> => parseIP(s) ?? assert.fail(s);
    assert.equal(containsIP(c, ip('192.168.4.0')), true);
    assert.equal(containsIP(c, ip('192.168.7.255')), true);
    assert.equal(containsIP(c, ip('192.168.8.0')), false);
    assert.equal(containsIP(c, ip('192.168.3.255')), false);
    assert.equal(containsIP(cidr('2001:db8::/64'), ip('2001:db8::ffff:ffff:ffff:ffff')), true);
    assert.equal(containsIP(cidr('2001:db8::/64'), ip('2001:db8:0:1::')), false);
    assert.equal(containsIP(cidr('::/0'), ip('10.0.0.1')), false);
  });
});

describe('generatePools (Neutron\'s default allocation pools)', () => {
  const ip = (s: string): NonNullable<ReturnType<typeof parseIP>> => parseIP(s) ?? assert.fail(s);
  test('IPv4: network and broadcast excluded, the gateway cut out', () => {
    // Observed on neutron-server Zed: 10.2.0.0/24 with gateway .1 → pool .2-.254.
    assert.deepEqual(generatePools(cidr('10.2.0.0/24'), ip('10.2.0.1')), [{ start: '10.2.0.2', end: '10.2.0.254' }]);
    assert.deepEqual(generatePools(cidr('10.2.0.0/24'), ip('10.2.0.254')), [{ start: '10.2.0.1', end: '10.2.0.253' }]);
    assert.deepEqual(generatePools(cidr('10.2.0.0/24'), ip('10.2.0.100')), [
      { start: '10.2.0.1', end: '10.2.0.99' }, { start: '10.2.0.101', end: '10.2.0.254' },
    ]);
    assert.deepEqual(generatePools(cidr('10.2.0.0/24'), undefined), [{ start: '10.2.0.1', end: '10.2.0.254' }]);
    assert.deepEqual(generatePools(cidr('10.2.0.0/24'), ip('10.2.0.0')), [{ start: '10.2.0.1', end: '10.2.0.254' }]);
    assert.deepEqual(generatePools(cidr('10.2.0.0/30'), ip('10.2.0.1')), [{ start: '10.2.0.2', end: '10.2.0.2' }]);
    assert.deepEqual(generatePools(cidr('10.2.0.4/31'), undefined), []);
    assert.deepEqual(generatePools(cidr('10.2.0.5/32'), undefined), [{ start: '10.2.0.5', end: '10.2.0.5' }]);
  });

  test('IPv6: no broadcast; the network address (Neutron\'s default gateway) stays out of the pool', () => {
    // Observed: 2001:db8:5::/64 with the default gateway 2001:db8:5:: → pool ::1 - ::ffff:ffff:ffff:ffff.
    assert.deepEqual(generatePools(cidr('2001:db8:5::/64'), ip('2001:db8:5::')), [{ start: '2001:db8:5::1', end: '2001:db8:5:0:ffff:ffff:ffff:ffff' }]);
    assert.deepEqual(generatePools(cidr('2001:db8:5::/64'), ip('2001:db8:5::1')), [{ start: '2001:db8:5::2', end: '2001:db8:5:0:ffff:ffff:ffff:ffff' }]);
    assert.deepEqual(generatePools(cidr('2001:db8:5::/120'), ip('2001:db8:5::ff')), [{ start: '2001:db8:5::1', end: '2001:db8:5::fe' }]);
    assert.deepEqual(generatePools(cidr('2001:db8::/127'), undefined), []);
  });
});

describe('poolsForGatewayMove (the pools sent with a gateway change)', () => {
  const ip = (s: string): IP => {
    const x = parseIP(s);
    assert.ok(x, s);
    return x;
  };
  const c24 = cidr('10.0.0.0/24');

  test('default pools (nobody narrowed them) move with the gateway; unchanged defaults are not sent', () => {
    assert.deepEqual(poolsForGatewayMove(c24, '10.0.0.1', ip('10.0.0.254'), [{ start: '10.0.0.2', end: '10.0.0.254' }]), [{ start: '10.0.0.1', end: '10.0.0.253' }]);
    // Moving from the network address (IPv6 default) to ::1: the default for ::1.
    assert.deepEqual(poolsForGatewayMove(cidr('2001:db8::/64'), '2001:db8::', ip('2001:db8::1'), [{ start: '2001:db8::1', end: '2001:db8::ffff:ffff:ffff:ffff' }]),
      [{ start: '2001:db8::2', end: '2001:db8::ffff:ffff:ffff:ffff' }]);
    // Gateway moves outside the range the defaults cover (none → none): the default for the new gateway is the same.
    assert.equal(poolsForGatewayMove(c24, null, ip('10.0.0.1'), [{ start: '10.0.0.2', end: '10.0.0.254' }]), undefined, 'gateway was none: defaults are .1-.254, not these');
  });

  test('a narrowed pool survives a gateway change that does not fall inside it (not sent at all)', () => {
    assert.equal(poolsForGatewayMove(c24, '10.0.0.1', ip('10.0.0.254'), [{ start: '10.0.0.100', end: '10.0.0.200' }]), undefined);
  });

  test('a gateway inside a narrowed pool: only that pool is split around it; other pools kept as they are', () => {
    assert.deepEqual(poolsForGatewayMove(c24, '10.0.0.1', ip('10.0.0.150'), [{ start: '10.0.0.10', end: '10.0.0.20' }, { start: '10.0.0.100', end: '10.0.0.200' }]), [
      { start: '10.0.0.10', end: '10.0.0.20' }, { start: '10.0.0.100', end: '10.0.0.149' }, { start: '10.0.0.151', end: '10.0.0.200' },
    ]);
    assert.deepEqual(poolsForGatewayMove(c24, '10.0.0.1', ip('10.0.0.100'), [{ start: '10.0.0.100', end: '10.0.0.200' }]), [{ start: '10.0.0.101', end: '10.0.0.200' }], 'trimmed at the start');
    assert.deepEqual(poolsForGatewayMove(c24, '10.0.0.1', ip('10.0.0.200'), [{ start: '10.0.0.100', end: '10.0.0.200' }]), [{ start: '10.0.0.100', end: '10.0.0.199' }], 'trimmed at the end');
    assert.deepEqual(poolsForGatewayMove(c24, '10.0.0.1', ip('10.0.0.5'), [{ start: '10.0.0.5', end: '10.0.0.5' }, { start: '10.0.0.9', end: '10.0.0.9' }]), [{ start: '10.0.0.9', end: '10.0.0.9' }], 'a one-address pool disappears');
  });

  test('samePools ignores order and address spelling', () => {
    assert.ok(samePools([{ start: '2001:DB8::1', end: '2001:db8::5' }, { start: '2001:db8::9', end: '2001:db8::a' }], [{ start: '2001:db8::9', end: '2001:db8:0::A' }, { start: '2001:db8::1', end: '2001:db8::5' }]));
    assert.ok(!samePools([{ start: '10.0.0.1', end: '10.0.0.5' }], [{ start: '10.0.0.1', end: '10.0.0.6' }]));
  });
});
