/**
 * rotation.ts, exhaustively on a simulated world driven by a fake clock: a Secret with a resourceVersion, targets
 * whose caBundle an API server may use up to propagationMs after it changed, replicas that may serve the previous
 * serving certificate up to reloadGraceMs after it changed, and drivers that read, inject, decide and write with a
 * resourceVersion fence, their steps interleaved at random (seeded). The invariant of rotation.ts is checked at every
 * simulated instant: every certificate a replica may serve is unexpired and signed by an unexpired CA present in
 * every caBundle an API server may use.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from '../../util/clock.ts';
import {
  type Action, bundleId, type CaView, decide, defaultRotationOptions, mergeBundle, type RotationOptions, type SecretView,
  type ServingView, validateRotationOptions,
} from './rotation.ts';

const s = 1_000;
/** Scaled-down lifetimes (the ratios of the defaults' constraints) so a simulation covers many rotations. */
const opts: RotationOptions = { caValidityMs: 9_000 * s, servingValidityMs: 3_000 * s, propagationMs: 60 * s, reloadGraceMs: 60 * s };

/** A deterministic PRNG (mulberry32). */
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

interface History<T> { at: number; value: T }

/** The simulated cluster: one Secret, N targets, and what API servers / replicas may still be using. */
class World {
  secret: SecretView = { kind: 'absent' };
  version = 0;
  targets: CaView[][];
  readonly targetHistory: History<CaView[]>[][];
  readonly servingHistory: History<ServingView | undefined>[] = [];
  readonly actions: { at: number; action: Action }[] = [];
  private nextCa = 0;
  readonly clock: FakeClock;

  constructor(targets: number, clock: FakeClock) {
    this.clock = clock;
    this.targets = Array.from({ length: targets }, () => []);
    this.targetHistory = this.targets.map(() => [{ at: clock.now(), value: [] }]);
  }

  newCa(now: number): CaView {
    return { id: `ca${this.nextCa++}`, notBefore: now - 3_600 * s, notAfter: now + opts.caValidityMs };
  }

  serving(signer: CaView, now: number): ServingView {
    return { signer: signer.id, notAfter: Math.min(signer.notAfter, now + opts.servingValidityMs), issuedAt: now, namesMatch: true };
  }

  setTarget(i: number, bundle: CaView[]): void {
    if (bundleId(bundle) === bundleId(this.targets[i] ?? [])) return;
    this.targets[i] = bundle;
    this.targetHistory[i]?.push({ at: this.clock.now(), value: bundle });
  }

  write(next: SecretView): void {
    this.secret = next;
    this.version++;
    const serving = next.kind === 'valid' ? next.serving : undefined;
    if (this.servingHistory.at(-1)?.value !== serving) this.servingHistory.push({ at: this.clock.now(), value: serving });
  }

  /** Applies `a` to the Secret as the driver would (the write's fence was checked by the caller). */
  apply(a: Action): void {
    const now = this.clock.now();
    this.actions.push({ at: now, action: a });
    const cur = this.secret;
    switch (a.kind) {
      case 'create':
      case 'regenerate': {
        const ca = this.newCa(now);
        this.write({ kind: 'valid', cas: [ca], serving: this.serving(ca, now), injected: undefined });
        return;
      }
      case 'none':
        return;
    }
    assert.equal(cur.kind, 'valid', `${a.kind} on a ${cur.kind} Secret`);
    if (cur.kind !== 'valid') return;
    switch (a.kind) {
      case 'add-ca':
        this.write({ ...cur, cas: [...cur.cas, this.newCa(now)] });
        return;
      case 'record-injected':
        this.write({ ...cur, injected: { bundle: a.bundle, at: now } });
        return;
      case 'renew-serving': {
        const signer = cur.cas.find((c) => c.id === a.signer);
        assert.ok(signer, 'renew-serving names a CA of the bundle');
        this.write({ ...cur, serving: this.serving(signer, now) });
        return;
      }
      case 'drop-cas':
        this.write({ ...cur, cas: cur.cas.filter((c) => !a.ids.includes(c.id)) });
        return;
    }
  }

  /** Values of `h` that may still be in use at `now`: the current one and every one replaced within `windowMs`. */
  static live<T>(h: History<T>[], now: number, windowMs: number): T[] {
    const out: T[] = [];
    for (let i = h.length - 1; i >= 0; i--) {
      const e = h[i];
      if (!e) continue;
      out.push(e.value);
      if (e.at <= now - windowMs) break; // this one was already in place before the window: older ones are gone
    }
    return out;
  }

  /** The invariant at `now`; returns the violations (empty = holds). Before the first injection nothing is checked. */
  violations(): string[] {
    const now = this.clock.now();
    const out: string[] = [];
    const servings = World.live(this.servingHistory, now, opts.reloadGraceMs);
    for (const [i, h] of this.targetHistory.entries()) {
      for (const bundle of World.live(h, now, opts.propagationMs)) {
        for (const sv of servings) {
          if (!sv) continue;
          const ca = bundle.find((c) => c.id === sv.signer);
          if (!ca) out.push(`t=${now / s}s: a replica may serve a certificate of ${sv.signer}, target ${i} may use [${bundleId(bundle)}]`);
          else if (ca.notAfter <= now) out.push(`t=${now / s}s: CA ${ca.id} expired`);
          if (sv.notAfter <= now) out.push(`t=${now / s}s: a served certificate (of ${sv.signer}) expired`);
        }
      }
    }
    return out;
  }
}

/** One driver replica: read Secret → inject (and read back) → decide → write if the Secret is still at the version read. */
class Replica {
  private phase: 'read' | 'inject' | 'decide' = 'read';
  private snapshot: SecretView = { kind: 'absent' };
  private version = -1;
  private injectedNow = false;
  conflicts = 0;
  private readonly w: World;
  private readonly failInjection: () => boolean;
  constructor(w: World, failInjection: () => boolean = () => false) {
    this.w = w;
    this.failInjection = failInjection;
  }

  /** Runs one phase; returns true when a round ended with `none` (the driver would sleep). */
  step(): Action | undefined {
    const w = this.w;
    switch (this.phase) {
      case 'read':
        this.snapshot = w.secret;
        this.version = w.version;
        this.phase = 'inject';
        return undefined;
      case 'inject': {
        this.injectedNow = false;
        if (this.snapshot.kind === 'valid') {
          const wanted = this.snapshot.cas;
          let all = true;
          for (let i = 0; i < w.targets.length; i++) {
            if (!this.failInjection()) w.setTarget(i, mergeBundle(wanted, w.targets[i] ?? []));
            const ids = new Set((w.targets[i] ?? []).map((c) => c.id));
            all &&= wanted.every((c) => ids.has(c.id));
          }
          this.injectedNow = all;
        }
        this.phase = 'decide';
        return undefined;
      }
      case 'decide': {
        this.phase = 'read';
        const a = decide(this.snapshot, w.clock.now(), this.injectedNow, opts);
        if (a.kind === 'none') return a;
        if (w.version !== this.version) {
          this.conflicts++; // 409: another replica wrote first; read again
          return undefined;
        }
        w.apply(a);
        return undefined;
      }
    }
  }
}

function simulate(opts2: { seed: number; replicas: number; targets: number; durationMs: number; maxTickMs: number; injectionFailure?: number }): World {
  const clock = new FakeClock(1_700_000_000_000);
  const r = rng(opts2.seed);
  const w = new World(opts2.targets, clock);
  const replicas = Array.from({ length: opts2.replicas }, () => new Replica(w, () => r() < (opts2.injectionFailure ?? 0)));
  const end = clock.now() + opts2.durationMs;
  let injectedOnce = false;
  while (clock.now() < end) {
    const rep = replicas[Math.floor(r() * replicas.length)];
    rep?.step();
    if (r() < 0.3) clock.step(Math.floor(r() * opts2.maxTickMs));
    injectedOnce ||= w.targets.every((t) => t.length > 0) && w.servingHistory.length > 0;
    // From the first complete injection on (before it no call could succeed: nothing was trusted yet).
    if (injectedOnce && clock.now() - (w.targetHistory.map((h) => h[1]?.at ?? Infinity).reduce((a, b) => Math.max(a, b))) > opts.propagationMs) {
      const v = w.violations();
      assert.deepEqual(v, [], `seed ${opts2.seed}`);
    }
  }
  return w;
}

function count(w: World, kind: Action['kind'], reason?: string): number {
  return w.actions.filter((a) => a.action.kind === kind && (reason === undefined || ('reason' in a.action && a.action.reason === reason))).length;
}

describe('rotation: the invariant holds at every instant of simulated years, whatever the interleaving', () => {
  test('one replica, one target: create, then several CA rotations and serving renewals in order', () => {
    const w = simulate({ seed: 1, replicas: 1, targets: 1, durationMs: 4 * opts.caValidityMs, maxTickMs: 20 * s });
    assert.equal(count(w, 'create'), 1);
    assert.ok(count(w, 'add-ca') >= 4, `CA rotations: ${count(w, 'add-ca')}`);
    assert.equal(count(w, 'renew-serving', 'switch-ca'), count(w, 'add-ca'), 'every new CA is switched to');
    assert.ok(count(w, 'drop-cas') >= count(w, 'add-ca') - 1, 'old CAs are dropped');
    assert.ok(count(w, 'renew-serving', 'renew') >= 4);
    assert.equal(count(w, 'regenerate'), 0);
    assert.equal(count(w, 'renew-serving', 'expired'), 0);
    // The order of one CA rotation.
    const kinds = w.actions.map((a) => (a.action.kind === 'renew-serving' ? `renew-serving:${a.action.reason}` : a.action.kind));
    const i = kinds.indexOf('add-ca');
    assert.deepEqual(kinds.slice(i, i + 4), ['add-ca', 'record-injected', 'renew-serving:switch-ca', 'drop-cas']);
    // The switch waited for propagation, the drop for the reload grace.
    const at = (k: number): number => w.actions[i + k]?.at ?? NaN;
    assert.ok(at(2) - at(1) >= opts.propagationMs);
    assert.ok(at(3) - at(2) >= opts.reloadGraceMs);
  });

  for (const seed of [2, 3, 4, 5, 6, 7, 8, 9]) {
    test(`3 replicas, 3 targets, interleaved steps, 20% failed injections (seed ${seed})`, () => {
      const w = simulate({ seed, replicas: 3, targets: 3, durationMs: 3 * opts.caValidityMs, maxTickMs: 30 * s, injectionFailure: 0.2 });
      assert.equal(count(w, 'create'), 1, 'exactly one create wins');
      assert.ok(count(w, 'add-ca') >= 3);
      assert.equal(count(w, 'regenerate') + count(w, 'renew-serving', 'expired'), 0);
    });
  }
});

describe('rotation: faults', () => {
  const t0 = 1_700_000_000_000;
  const ca = (id: string, notAfter: number): CaView => ({ id, notBefore: t0 - 3_600 * s, notAfter });
  const valid = (cas: CaView[], serving: Partial<ServingView> & { signer: string }, injected?: { bundle: string; at: number }): SecretView => ({
    kind: 'valid', cas, serving: { notAfter: t0 + opts.servingValidityMs, issuedAt: t0, namesMatch: true, ...serving }, injected,
  });

  test('a serving certificate that expired mid-rotation (process down after add-ca): re-signed at once, by the CA that is already trusted', () => {
    const A = ca('A', t0 + 2_000 * s);
    const B = ca('B', t0 + 9_000 * s);
    const bundle = bundleId([A, B]);
    const now = t0 + 1_500 * s; // serving (notAfter t0+1000s) expired; A still valid
    // {A,B} injected only just now, not propagated: A re-signs (it is trusted where the old certificate was).
    let a = decide(valid([A, B], { signer: 'A', notAfter: t0 + 1_000 * s }, { bundle, at: now - 1 * s }), now, true, opts);
    assert.deepEqual(a, { kind: 'renew-serving', signer: 'A', reason: 'expired' });
    // Propagated long ago: straight to B (the switch that was due anyway).
    a = decide(valid([A, B], { signer: 'A', notAfter: t0 + 1_000 * s }, { bundle, at: t0 }), now, true, opts);
    assert.deepEqual(a, { kind: 'renew-serving', signer: 'B', reason: 'expired' });
    // The signing CA expired meanwhile too, B never propagated: B anyway (A can sign nothing valid).
    a = decide(valid([A, B], { signer: 'A', notAfter: t0 + 1_000 * s }), t0 + 2_500 * s, false, opts);
    assert.deepEqual(a, { kind: 'renew-serving', signer: 'B', reason: 'expired' });
  });

  test('every CA expired while the process was down: regenerate, saying so', () => {
    const A = ca('A', t0 + 100 * s);
    const a = decide(valid([A], { signer: 'A', notAfter: t0 + 100 * s }, { bundle: 'A', at: t0 }), t0 + 200 * s, true, opts);
    assert.equal(a.kind, 'regenerate');
    assert.match(a.kind === 'regenerate' ? a.reason : '', /every CA in the Secret has expired/);
  });

  test('a Secret edited into garbage: regenerate with the parser\'s reason; absent: create', () => {
    assert.deepEqual(decide({ kind: 'invalid', reason: 'tls.key is not a private key' }, t0, false, opts),
      { kind: 'regenerate', reason: 'tls.key is not a private key' });
    assert.deepEqual(decide({ kind: 'absent' }, t0, false, opts), { kind: 'create' });
    assert.equal(decide(valid([ca('A', t0 + 9_000 * s)], { signer: 'Z' }), t0, true, opts).kind, 'regenerate');
  });

  test('the simulated world recovers from an outage past the serving certificate\'s expiry mid-rotation', () => {
    const clock = new FakeClock(t0);
    const w = new World(2, clock);
    const rep = new Replica(w);
    const round = (): void => {
      for (let i = 0; i < 40; i++) {
        const a = rep.step();
        if (a?.kind === 'none') return;
      }
      assert.fail('a round did not settle');
    };
    // Run until the new CA was added, then go down for longer than the serving certificate's remaining life.
    while (count(w, 'add-ca') === 0) {
      round();
      clock.step(10 * s);
    }
    clock.step(opts.servingValidityMs);
    round();
    assert.equal(w.actions.some((a) => a.action.kind === 'renew-serving' && a.action.reason === 'expired'), true);
    // From one reload grace + propagation later on, the invariant holds again through the next rotation.
    const recovered = clock.now() + opts.reloadGraceMs + opts.propagationMs;
    const end = clock.now() + opts.caValidityMs;
    while (clock.now() < end) {
      round();
      clock.step(10 * s);
      if (clock.now() > recovered) assert.deepEqual(w.violations(), []);
    }
    assert.ok(count(w, 'add-ca') >= 2);
  });
});

describe('rotation: single decisions', () => {
  const t0 = 1_700_000_000_000;
  const A: CaView = { id: 'A', notBefore: t0, notAfter: t0 + opts.caValidityMs };
  const serving: ServingView = { signer: 'A', notAfter: t0 + opts.servingValidityMs, issuedAt: t0, namesMatch: true };
  const steady: SecretView = { kind: 'valid', cas: [A], serving, injected: { bundle: 'A', at: t0 } };

  test('up to date: none, and the next look is the earlier renewal point', () => {
    assert.deepEqual(decide(steady, t0 + 1 * s, true, opts), { kind: 'none', why: 'up-to-date', recheckAt: t0 + opts.servingValidityMs * 2 / 3 });
  });
  test('a target lost its caBundle (re-applied YAML): no step before it is injected again', () => {
    assert.deepEqual(decide(steady, t0 + 1 * s, false, opts), { kind: 'none', why: 'awaiting-injection', recheckAt: t0 + 1 * s });
  });
  test('new Service names: re-issued by the same CA', () => {
    assert.deepEqual(decide({ ...steady, serving: { ...serving, namesMatch: false } }, t0 + 1 * s, true, opts),
      { kind: 'renew-serving', signer: 'A', reason: 'names' });
  });
  test('the bundle recorded differs from the Secret\'s (a CA was added): record first', () => {
    const B: CaView = { id: 'B', notBefore: t0, notAfter: t0 + 2 * opts.caValidityMs };
    assert.deepEqual(decide({ ...steady, cas: [A, B] }, t0 + 1 * s, true, opts), { kind: 'record-injected', bundle: 'A,B' });
    assert.deepEqual(decide({ ...steady, cas: [A, B], injected: { bundle: 'A,B', at: t0 } }, t0 + 1 * s, true, opts),
      { kind: 'none', why: 'propagating', recheckAt: t0 + opts.propagationMs });
  });
  test('mergeBundle: adds the wanted CAs, keeps newer unknown ones, drops older unknown ones', () => {
    const c = (id: string, notAfter: number): { id: string; notAfter: number } => ({ id, notAfter });
    assert.deepEqual(mergeBundle([c('B', 20)], [c('A', 10), c('C', 30)]).map((x) => x.id), ['B', 'C']);
    assert.deepEqual(mergeBundle([c('A', 10), c('B', 20)], []).map((x) => x.id), ['A', 'B']);
  });
  test('options: the defaults are valid; a CA shorter than 3 serving lifetimes is refused', () => {
    validateRotationOptions(defaultRotationOptions);
    validateRotationOptions(opts);
    assert.throws(() => validateRotationOptions({ ...opts, caValidityMs: 2 * opts.servingValidityMs }), /at least 3/);
    assert.throws(() => validateRotationOptions({ ...opts, propagationMs: opts.servingValidityMs }), /shorter than a third/);
  });
});
