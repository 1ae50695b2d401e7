import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Condition } from '../../../apimachinery/meta.ts';
import type { Network as NetworkV1 } from '../v1/types.ts';
import { convertNetwork, fromHub, toHub, v2SubnetsAnnotation } from './conversion.ts';
import type { Network as NetworkV2, NetworkSpecSubnet, NetworkStatusSubnet } from './zz_generated.types.ts';

/** mulberry32: a small seeded PRNG, so a failing case is reproducible from its seed and index. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Gen {
  readonly r: () => number;
  constructor(r: () => number) {
    this.r = r;
  }
  int(n: number): number {
    return Math.floor(this.r() * n);
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  id(): string {
    return Array.from({ length: 8 }, () => this.int(16).toString(16)).join('') + '-' + String(this.int(1e6));
  }
  /** An IPv4 subnet (prefix 8–30, inside 10/8 or 192.168/16) and maybe a host address inside it as gateway. */
  v4(): NetworkSpecSubnet {
    const prefix = 8 + this.int(23);
    const net = ((10 << 24) | this.int(1 << 24)) >>> 0;
    const masked = prefix === 0 ? 0 : (net & ~((1 << (32 - prefix)) - 1)) >>> 0;
    const fmt = (v: number): string => [24, 16, 8, 0].map((s) => String((v >>> s) & 255)).join('.');
    const host = (masked + 1 + this.int(2 ** (32 - prefix) - 2)) >>> 0;
    return { cidr: `${fmt(masked)}/${String(prefix)}`, ...(this.chance(0.6) && { gateway: fmt(host) }) };
  }
  v6(): NetworkSpecSubnet {
    const g = (): string => this.int(0x10000).toString(16);
    const prefix = this.pick([48, 56, 64, 64, 64, 96, 120]);
    const base = `2001:db8:${g()}`;
    return { cidr: `${base}::/${String(prefix)}`, ...(this.chance(0.6) && { gateway: `${base}::${g() === '0' ? '1' : g()}` }) };
  }
  conditions(): Condition[] {
    return Array.from({ length: this.int(3) }, (_, i) => ({
      type: i === 0 ? 'Ready' : `Other${String(i)}`, status: this.pick(['True', 'False', 'Unknown'] as const),
      ...(this.chance(0.8) && { reason: this.pick(['Synced', 'InvalidSpec', 'NeutronUnavailable']) }),
      ...(this.chance(0.8) && { message: `m ${this.id()}` }),
      ...(this.chance(0.8) && { observedGeneration: this.int(9) }),
      ...(this.chance(0.8) && { lastTransitionTime: '2026-11-26T16:00:00Z' }),
    }));
  }
  metadata(): NetworkV1['metadata'] {
    if (this.chance(0.03)) return undefined;
    return {
      name: `n${String(this.int(1000))}`, namespace: 'ns', uid: this.id(), generation: 1 + this.int(9), resourceVersion: String(this.int(1e6)),
      ...(this.chance(0.3) && { labels: { app: this.id() } }),
      ...(this.chance(0.3) && { annotations: { 'example.com/note': this.id(), ...(this.chance(0.5) && { other: 'x' }) } }),
      ...(this.chance(0.5) && { finalizers: ['samplecrd.k8s.io/neutron'] }),
    };
  }
  /** A valid v2 Network: 1–2 subnets of different families in either order; status about them (or stale CIDRs). */
  v2(): NetworkV2 {
    const meta = this.metadata();
    const subnets = this.pick([[this.v4()], [this.v6()], [this.v4(), this.v6()], [this.v6(), this.v4()]]);
    const net: NetworkV2 = { ...(this.chance(0.5) && { apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network' }), ...(meta && { metadata: meta }) };
    if (this.chance(0.95)) net.spec = { subnets };
    if (this.chance(0.8)) {
      const cidrs = [...subnets.map((s) => s.cidr), ...(this.chance(0.2) ? [this.v4().cidr] : []), ...(this.chance(0.1) ? [''] : [])];
      const entries: NetworkStatusSubnet[] = [];
      for (const c of cidrs) if (this.chance(0.7) && !entries.some((e) => e.cidr === c)) entries.push({ cidr: c, subnetID: this.id() });
      if (this.chance(0.5)) entries.reverse();
      net.status = {
        ...(this.chance(0.8) && { networkID: this.id() }),
        ...(this.chance(0.85) && { subnets: entries }),
        ...(this.chance(0.8) && { observedGeneration: this.int(9) }),
        ...(this.chance(0.8) && { conditions: this.conditions() }),
      };
    }
    return net;
  }
  /** A valid v1 Network as a v1 client writes it (no annotation). */
  v1(): NetworkV1 {
    const meta = this.metadata();
    const s = this.chance(0.5) ? this.v4() : this.v6();
    const net: NetworkV1 = { ...(this.chance(0.5) && { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network' }), ...(meta && { metadata: meta }) };
    if (this.chance(0.95)) net.spec = { cidr: s.cidr, ...(s.gateway !== undefined && { gateway: s.gateway }) };
    if (this.chance(0.8)) {
      net.status = {
        ...(this.chance(0.8) && { networkID: this.id() }),
        ...(this.chance(0.8) && { subnetID: this.id() }),
        ...(this.chance(0.8) && { observedGeneration: this.int(9) }),
        ...(this.chance(0.8) && { conditions: this.conditions() }),
      };
    }
    return net;
  }
  /** A v1 Network as a v1 client may edit it: a new CIDR of the same family (and gateway), a new or no subnetID. */
  v1Edited(v1: NetworkV1): NetworkV1 {
    const net: NetworkV1 = structuredClone(v1);
    if (net.spec && this.chance(0.5)) {
      const fresh = net.spec.cidr.includes(':') ? this.v6() : this.v4();
      const taken = toHub(net).spec?.subnets.some((s) => s.cidr === fresh.cidr) ?? false;
      if (!taken) net.spec = fresh;
    }
    if (net.status && this.chance(0.3)) net.status.subnetID = this.id();
    if (net.status && this.chance(0.1)) delete net.status.subnetID;
    return net;
  }
}

const withTypeMeta = <T extends { apiVersion?: string; kind?: string }>(o: T, apiVersion: string): T => ({ ...o, apiVersion, kind: 'Network' });

describe('Network v1 ↔ v2 conversion (hub v2)', () => {
  test('a dual-stack v2 object read as v1 shows the first subnet and keeps the rest in the annotation', () => {
    const v2: NetworkV2 = {
      apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { name: 'n', namespace: 'ns', annotations: { a: 'b' } },
      spec: { subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.0.1' }, { cidr: '2001:db8::/64' }] },
      status: { networkID: 'net', subnets: [{ cidr: '2001:db8::/64', subnetID: 's6' }, { cidr: '10.0.0.0/24', subnetID: 's4' }], observedGeneration: 3 },
    };
    const before = structuredClone(v2);
    const v1 = fromHub(v2);
    assert.deepEqual(v2, before, 'the input is not modified');
    assert.equal(v1.apiVersion, 'samplecrd.k8s.io/v1');
    assert.deepEqual(v1.spec, { cidr: '10.0.0.0/24', gateway: '10.0.0.1' });
    assert.deepEqual(v1.status, { networkID: 'net', subnetID: 's4', observedGeneration: 3 });
    assert.equal(v1.metadata?.annotations?.['a'], 'b');
    assert.deepEqual(JSON.parse(v1.metadata?.annotations?.[v2SubnetsAnnotation] ?? 'null'), {
      subnets: [{ cidr: '2001:db8::/64' }], status: [{ cidr: '2001:db8::/64', subnetID: 's6' }], statusPrimaryAt: 1,
    });
    assert.deepEqual(toHub(v1), v2);
  });

  test('a single-stack object converts without any annotation, both ways', () => {
    const v1: NetworkV1 = { metadata: { name: 'n' }, spec: { cidr: '10.0.0.0/24' }, status: { networkID: 'net', subnetID: 's' } };
    const v2 = toHub(v1);
    assert.deepEqual(v2, {
      apiVersion: 'samplecrd.k8s.io/v2', kind: 'Network', metadata: { name: 'n' },
      spec: { subnets: [{ cidr: '10.0.0.0/24' }] }, status: { networkID: 'net', subnets: [{ cidr: '10.0.0.0/24', subnetID: 's' }] },
    });
    assert.deepEqual(fromHub(v2), withTypeMeta(v1, 'samplecrd.k8s.io/v1'));
  });

  test('a v1 client\'s edit of cidr/subnetID wins; the second subnet stays', () => {
    const v1 = fromHub({
      metadata: { name: 'n' }, spec: { subnets: [{ cidr: '10.0.0.0/24' }, { cidr: '2001:db8::/64' }] },
      status: { subnets: [{ cidr: '10.0.0.0/24', subnetID: 's4' }, { cidr: '2001:db8::/64', subnetID: 's6' }] },
    });
    v1.spec = { cidr: '10.1.0.0/24' };
    v1.status = { subnetID: 'new4' };
    assert.deepEqual(toHub(v1).spec?.subnets, [{ cidr: '10.1.0.0/24' }, { cidr: '2001:db8::/64' }]);
    assert.deepEqual(toHub(v1).status?.subnets, [{ cidr: '10.1.0.0/24', subnetID: 'new4' }, { cidr: '2001:db8::/64', subnetID: 's6' }]);
  });

  test('a malformed annotation on v1 is dropped; convertNetwork dispatches by apiVersion and refuses others', () => {
    for (const bad of ['{', '[]', '{"subnets":[{"cidr":1}]}', '{"statusPrimaryAt":-1}']) {
      const v2 = toHub({ metadata: { annotations: { [v2SubnetsAnnotation]: bad } }, spec: { cidr: '10.0.0.0/24' } });
      assert.equal(v2.metadata, undefined, bad); // metadata that held only the annotation is dropped
      assert.deepEqual(v2.spec, { subnets: [{ cidr: '10.0.0.0/24' }] }, bad);
    }
    const v1: NetworkV1 = { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', spec: { cidr: '10.0.0.0/24' } };
    assert.deepEqual(convertNetwork(v1, 'samplecrd.k8s.io/v2'), toHub(v1));
    assert.deepEqual(convertNetwork(v1, 'samplecrd.k8s.io/v1'), v1);
    assert.deepEqual(convertNetwork(toHub(v1), 'samplecrd.k8s.io/v1'), v1);
    assert.throws(() => convertNetwork(v1, 'samplecrd.k8s.io/v3'), /cannot convert Network to samplecrd.k8s.io\/v3/);
    assert.throws(() => convertNetwork({ ...v1, apiVersion: 'x/v1' }, 'samplecrd.k8s.io/v2'), /from x\/v1/);
  });

  test('property: 0 of 20 000 generated objects change on a round trip (v2→v1→v2, v1→v2→v1; edited v1: fields kept, v2 form stable)', () => {
    const seed = 20261126;
    const g = new Gen(rng(seed));
    const counts = { v2: 0, v1: 0, v1FromV2: 0, edited: 0, dualStack: 0, annotated: 0 };
    const failures: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const kind = i % 3;
      if (kind === 0) {
        const x = g.v2();
        counts.v2++;
        if ((x.spec?.subnets.length ?? 0) === 2) counts.dualStack++;
        const back = toHub(fromHub(x));
        try {
          assert.deepStrictEqual(back, withTypeMeta(x, 'samplecrd.k8s.io/v2'));
        } catch {
          failures.push(`v2 #${String(i)}: ${JSON.stringify(x)} → ${JSON.stringify(back)}`);
        }
      } else {
        const y = kind === 1 ? g.v1() : fromHub(g.v2());
        if (kind === 1) counts.v1++;
        else counts.v1FromV2++;
        if (y.metadata?.annotations?.[v2SubnetsAnnotation] !== undefined) counts.annotated++;
        const back = fromHub(toHub(y));
        try {
          assert.deepStrictEqual(back, withTypeMeta(y, 'samplecrd.k8s.io/v1'));
        } catch {
          failures.push(`v1 #${String(i)}: ${JSON.stringify(y)} → ${JSON.stringify(back)}`);
        }
        // The same object after a v1 client's edit: its v1 fields come back as edited, its v2 form is stable.
        const e = g.v1Edited(y);
        const hub = toHub(e);
        const eBack = fromHub(hub);
        try {
          const strip = (o: NetworkV1): NetworkV1 => fromHub(toHub({ ...o, metadata: { ...o.metadata, annotations: {} } }));
          assert.deepStrictEqual(strip(eBack), strip(withTypeMeta(e, 'samplecrd.k8s.io/v1')));
          assert.deepStrictEqual(toHub(eBack), hub);
          counts.edited++;
        } catch {
          failures.push(`edited v1 #${String(i)}: ${JSON.stringify(e)} → ${JSON.stringify(eBack)}`);
        }
      }
    }
    assert.deepEqual(failures.slice(0, 3), [], `${String(failures.length)} round trips changed the object (seed ${String(seed)})`);
    assert.ok(counts.dualStack > 3000 && counts.annotated > 2000, `the generator reaches dual-stack and annotated objects: ${JSON.stringify(counts)}`);
  });
});
