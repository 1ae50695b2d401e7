/**
 * rotation.ts, exhaustively on a simulated world driven by a fake clock: a Secret with a resourceVersion, targets
 * whose caBundle an API server may use up to propagationMs after it changed (each target with its record of when an
 * injector last added a CA to it), replicas that may serve the previous serving certificate up to reloadGraceMs after
 * it changed, and drivers that read, inject, decide and write with a resourceVersion fence, their steps interleaved
 * at random (seeded). Faults on top: failed injections, targets reset by someone else (a `kubectl apply`) to the
 * bundle of the CAs in service, the Secret's issued-at record edited away, and a start over with shorter lifetimes.
 * The invariant of rotation.ts is checked at every simulated instant: every certificate a replica may serve is
 * unexpired and signed by an unexpired CA present in every caBundle an API server may use.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from '../../util/clock.ts';
import {
  type Action, bundleId, type CaView, decide, defaultRotationOptions, mergeBundle, type RotationOptions, type SecretView,
  type ServingView, type TargetsView, validateRotationOptions,
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
  /** Per target: when an injector last added a CA to it (the record selfmanaged.ts keeps in the target). */
  readonly addedAt: number[];
  readonly targetHistory: History<CaView[]>[][];
  /** Faults injected (target resets that removed a CA, issued-at records stripped). */
  readonly faults = { resets: 0, stripped: 0 };
  /** CA lifetime of the CAs made from now on (a start over may shorten it). */
  caValidityMs = opts.caValidityMs;
  servingValidityMs = opts.servingValidityMs;
  readonly servingHistory: History<ServingView | undefined>[] = [];
  readonly actions: { at: number; action: Action }[] = [];
  private nextCa = 0;
  readonly clock: FakeClock;

  constructor(targets: number, clock: FakeClock) {
    this.clock = clock;
    this.targets = Array.from({ length: targets }, () => []);
    this.addedAt = this.targets.map(() => -Infinity);
    this.targetHistory = this.targets.map(() => [{ at: clock.now(), value: [] }]);
  }

  /** Every CA ever made, by id. */
  readonly cas = new Map<string, CaView>();

  newCa(now: number): CaView {
    const ca = { id: `ca${this.nextCa++}`, notBefore: now - 3_600 * s, notAfter: now + this.caValidityMs };
    this.cas.set(ca.id, ca);
    return ca;
  }

  serving(signer: CaView, now: number): ServingView {
    return { signer: signer.id, notAfter: Math.min(signer.notAfter, now + this.servingValidityMs), issuedAt: now, namesMatch: true };
  }

  /**
   * Someone else (a `kubectl apply`, a GitOps sync) resets target `i` to the bundle of the CAs that sign every
   * certificate a replica may serve right now — calls keep passing, but a CA the Secret holds for the next switch is
   * gone. Its added-at record stays (the reset does not touch it). Returns whether it removed a CA.
   */
  resetTarget(i: number): boolean {
    const inService = new Set(World.live(this.servingHistory, this.clock.now(), opts.reloadGraceMs).flatMap((sv) => (sv ? [sv.signer] : [])));
    const bundle = [...inService].flatMap((id) => this.cas.get(id) ?? []).sort((a, b) => a.notBefore - b.notBefore);
    const cur = this.targets[i] ?? [];
    if (bundle.length === 0 || bundleId(bundle) === bundleId(cur) || !cur.some((c) => !inService.has(c.id))) return false;
    this.setTarget(i, bundle);
    this.faults.resets++;
    return true;
  }

  /** Someone edits the Secret's issued-at record away (an edit by hand, a tool that rewrites the annotations). */
  stripIssued(): void {
    if (this.secret.kind !== 'valid' || this.secret.serving.issuedAt === undefined) return;
    this.secret = { ...this.secret, serving: { ...this.secret.serving, issuedAt: undefined } };
    this.version++;
    this.faults.stripped++;
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
    const last = this.servingHistory.at(-1)?.value;
    // The same certificate (only its issued-at record written): no new serving pair.
    if (last && serving && last.signer === serving.signer && last.notAfter === serving.notAfter) return;
    if (last !== serving) this.servingHistory.push({ at: this.clock.now(), value: serving });
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
      case 'record-issued':
        this.write({ ...cur, serving: { ...cur.serving, issuedAt: now } });
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
  phase: 'read' | 'inject' | 'decide' = 'read';
  private snapshot: SecretView = { kind: 'absent' };
  private version = -1;
  private targetsView: TargetsView = { held: false, addedAt: -Infinity };
  conflicts = 0;
  private readonly w: World;
  private readonly failInjection: () => boolean;
  private readonly o: RotationOptions;
  /** A weakened driver for the proof that a test has teeth: it does not report the targets' added-at records. */
  private readonly ignoreAddedAt: boolean;
  constructor(w: World, failInjection: () => boolean = () => false, o: RotationOptions = opts, ignoreAddedAt = false) {
    this.w = w;
    this.failInjection = failInjection;
    this.o = o;
    this.ignoreAddedAt = ignoreAddedAt;
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
        // As selfmanaged.ts: a write that adds a CA to a target records the time in that target (the same write).
        this.targetsView = { held: false, addedAt: -Infinity };
        if (this.snapshot.kind === 'valid') {
          const wanted = this.snapshot.cas;
          let all = true;
          for (let i = 0; i < w.targets.length; i++) {
            const cur = w.targets[i] ?? [];
            const merged = mergeBundle(wanted, cur);
            if (!this.failInjection() && bundleId(merged) !== bundleId(cur)) {
              w.setTarget(i, merged);
              if (merged.some((c) => !cur.some((x) => x.id === c.id))) w.addedAt[i] = w.clock.now();
            }
            const ids = new Set((w.targets[i] ?? []).map((c) => c.id));
            all &&= wanted.every((c) => ids.has(c.id));
          }
          this.targetsView = { held: all, addedAt: this.ignoreAddedAt ? -Infinity : Math.max(...w.addedAt) };
        }
        this.phase = 'decide';
        return undefined;
      }
      case 'decide': {
        this.phase = 'read';
        const a = decide(this.snapshot, w.clock.now(), this.targetsView, this.o);
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

function simulate(opts2: {
  seed: number; replicas: number; targets: number; durationMs: number; maxTickMs: number; injectionFailure?: number;
  /** Per step: the probability that a target is reset (World.resetTarget), and that the issued-at record is stripped. */
  resets?: number; stripIssued?: number;
  /** Drivers that ignore the targets' added-at records (a weakened rotation.ts: see the test that uses it). */
  ignoreAddedAt?: boolean;
  /** Collect violations here instead of failing at the first. */
  violations?: string[];
}): World {
  const clock = new FakeClock(1_700_000_000_000);
  const r = rng(opts2.seed);
  const w = new World(opts2.targets, clock);
  const replicas = Array.from({ length: opts2.replicas }, () => new Replica(w, () => r() < (opts2.injectionFailure ?? 0), opts, opts2.ignoreAddedAt));
  const end = clock.now() + opts2.durationMs;
  let injectedOnce = false;
  while (clock.now() < end) {
    const rep = replicas[Math.floor(r() * replicas.length)];
    rep?.step();
    // A reset between a replica's look at the targets and its Secret write is the race rotation.ts does not cover.
    if (r() < (opts2.resets ?? 0) && replicas.every((x) => x.phase !== 'decide')) w.resetTarget(Math.floor(r() * w.targets.length));
    if (r() < (opts2.stripIssued ?? 0)) w.stripIssued();
    if (r() < 0.3) clock.step(Math.floor(r() * opts2.maxTickMs));
    injectedOnce ||= w.targets.every((t) => t.length > 0) && w.servingHistory.length > 0;
    // From the first complete injection on (before it no call could succeed: nothing was trusted yet).
    if (injectedOnce && clock.now() - (w.targetHistory.map((h) => h[1]?.at ?? Infinity).reduce((a, b) => Math.max(a, b))) > opts.propagationMs) {
      const v = w.violations();
      if (opts2.violations) opts2.violations.push(...v);
      else assert.deepEqual(v, [], `seed ${opts2.seed}`);
    }
  }
  return w;
}

/** Every target carries the bundle; no target recorded an addition after the Secret's record. */
const held: TargetsView = { held: true, addedAt: -Infinity };
const notHeld: TargetsView = { held: false, addedAt: -Infinity };

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
    let a = decide(valid([A, B], { signer: 'A', notAfter: t0 + 1_000 * s }, { bundle, at: now - 1 * s }), now, held, opts);
    assert.deepEqual(a, { kind: 'renew-serving', signer: 'A', reason: 'expired' });
    // Propagated long ago: straight to B (the switch that was due anyway).
    a = decide(valid([A, B], { signer: 'A', notAfter: t0 + 1_000 * s }, { bundle, at: t0 }), now, held, opts);
    assert.deepEqual(a, { kind: 'renew-serving', signer: 'B', reason: 'expired' });
    // The signing CA expired meanwhile too, B never propagated: B anyway (A can sign nothing valid).
    a = decide(valid([A, B], { signer: 'A', notAfter: t0 + 1_000 * s }), t0 + 2_500 * s, notHeld, opts);
    assert.deepEqual(a, { kind: 'renew-serving', signer: 'B', reason: 'expired' });
  });

  test('every CA expired while the process was down: regenerate, saying so', () => {
    const A = ca('A', t0 + 100 * s);
    const a = decide(valid([A], { signer: 'A', notAfter: t0 + 100 * s }, { bundle: 'A', at: t0 }), t0 + 200 * s, held, opts);
    assert.equal(a.kind, 'regenerate');
    assert.match(a.kind === 'regenerate' ? a.reason : '', /every CA in the Secret has expired/);
  });

  test('a Secret edited into garbage: regenerate with the parser\'s reason; absent: create', () => {
    assert.deepEqual(decide({ kind: 'invalid', reason: 'tls.key is not a private key' }, t0, notHeld, opts),
      { kind: 'regenerate', reason: 'tls.key is not a private key' });
    assert.deepEqual(decide({ kind: 'absent' }, t0, notHeld, opts), { kind: 'create' });
    assert.equal(decide(valid([ca('A', t0 + 9_000 * s)], { signer: 'Z' }), t0, held, opts).kind, 'regenerate');
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
    assert.deepEqual(decide(steady, t0 + 1 * s, held, opts), { kind: 'none', why: 'up-to-date', recheckAt: t0 + opts.servingValidityMs * 2 / 3 });
  });
  test('a target lost its caBundle (re-applied YAML): no step before it is injected again', () => {
    assert.deepEqual(decide(steady, t0 + 1 * s, notHeld, opts), { kind: 'none', why: 'awaiting-injection', recheckAt: t0 + 1 * s });
  });
  test('new Service names: re-issued by the same CA', () => {
    assert.deepEqual(decide({ ...steady, serving: { ...serving, namesMatch: false } }, t0 + 1 * s, held, opts),
      { kind: 'renew-serving', signer: 'A', reason: 'names' });
  });
  test('the bundle recorded differs from the Secret\'s (a CA was added): record first', () => {
    const B: CaView = { id: 'B', notBefore: t0, notAfter: t0 + 2 * opts.caValidityMs };
    assert.deepEqual(decide({ ...steady, cas: [A, B] }, t0 + 1 * s, held, opts), { kind: 'record-injected', bundle: 'A,B' });
    assert.deepEqual(decide({ ...steady, cas: [A, B], injected: { bundle: 'A,B', at: t0 } }, t0 + 1 * s, held, opts),
      { kind: 'none', why: 'propagating', recheckAt: t0 + opts.propagationMs });
  });
  test('mergeBundle: adds the wanted CAs, keeps newer unknown ones, drops older unknown ones', () => {
    const c = (id: string, notBefore: number): { id: string; notBefore: number; notAfter: number } => ({ id, notBefore, notAfter: notBefore + 100 });
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

describe('rotation: a target reset and re-injected, an issued-at record edited away, a start over', () => {
  const t0 = 1_700_000_000_000;
  const A: CaView = { id: 'A', notBefore: t0 - 3_600 * s, notAfter: t0 + opts.caValidityMs };
  const B: CaView = { id: 'B', notBefore: t0 + 3_000 * s, notAfter: t0 + 3_000 * s + opts.caValidityMs };
  const rotating = (serving: Partial<ServingView> = {}): SecretView => ({
    kind: 'valid', cas: [A, B], injected: { bundle: 'A,B', at: t0 + 3_010 * s },
    serving: { signer: 'A', notAfter: t0 + 3_500 * s, issuedAt: t0 + 2_500 * s, namesMatch: true, ...serving },
  });

  test('re-injection restarts the propagation wait: a CA added to a target after the Secret\'s record holds the switch for propagationMs from that write', () => {
    const now = t0 + 3_200 * s; // the record is 190 s old: propagated by the Secret's record alone
    assert.deepEqual(decide(rotating(), now, held, opts), { kind: 'renew-serving', signer: 'B', reason: 'switch-ca' });
    // A target was reset to {A} and B re-added to it 10 s ago: its API servers may still use {A}.
    const readded: TargetsView = { held: true, addedAt: now - 10 * s };
    assert.deepEqual(decide(rotating(), now, readded, opts), { kind: 'none', why: 'propagating', recheckAt: now - 10 * s + opts.propagationMs });
    assert.deepEqual(decide(rotating(), now - 10 * s + opts.propagationMs, readded, opts), { kind: 'renew-serving', signer: 'B', reason: 'switch-ca' });
    // While the reset target still lacks B: no step.
    assert.deepEqual(decide(rotating(), now, { held: false, addedAt: now - 100 * s }, opts), { kind: 'none', why: 'awaiting-injection', recheckAt: now });
  });

  for (const seed of [11, 12, 13, 14]) {
    test(`targets reset to the bundle of the CAs in service at random (3 replicas, 3 targets, 20% failed injections, seed ${seed}): the invariant holds`, () => {
      const w = simulate({ seed, replicas: 3, targets: 3, durationMs: 3 * opts.caValidityMs, maxTickMs: 30 * s, injectionFailure: 0.2, resets: 0.3 });
      assert.ok(w.faults.resets >= 5, `${w.faults.resets} resets that removed a CA`);
      assert.ok(count(w, 'add-ca') >= 3);
      assert.equal(count(w, 'regenerate') + count(w, 'renew-serving', 'expired'), 0);
    });
  }

  test('the same simulation with drivers that ignore the targets\' added-at records breaks the invariant (the record is what keeps it)', () => {
    const violations: string[] = [];
    for (const seed of [11, 12, 13, 14]) {
      simulate({ seed, replicas: 3, targets: 3, durationMs: 3 * opts.caValidityMs, maxTickMs: 30 * s, injectionFailure: 0.2, resets: 0.3, ignoreAddedAt: true, violations });
    }
    assert.ok(violations.length > 0, 'no violation without the records: the reset test above would prove nothing');
    assert.match(violations[0] ?? '', /a replica may serve a certificate of ca\d+, target \d may use \[ca\d+\]/);
  });

  test('an issued-at record edited away: written first (record-issued, the time it is written), so the old CA is dropped only a whole reload grace later', () => {
    const switched = (issuedAt: number | undefined): SecretView => ({ ...rotating({ signer: 'B', issuedAt, notAfter: t0 + 3_300 * s + opts.servingValidityMs }) });
    const now = t0 + 3_300 * s;
    // With its record, a switch 1 s ago keeps A for the reload grace; without one, nothing is guessed: record it.
    assert.deepEqual(decide(switched(now - 1 * s), now, held, opts), { kind: 'none', why: 'reload-grace', recheckAt: now - 1 * s + opts.reloadGraceMs });
    assert.deepEqual(decide(switched(undefined), now, held, opts), { kind: 'record-issued' });
    assert.deepEqual(decide(switched(now), now + opts.reloadGraceMs - 1, held, opts), { kind: 'none', why: 'reload-grace', recheckAt: now + opts.reloadGraceMs });
    assert.deepEqual(decide(switched(now), now + opts.reloadGraceMs, held, opts), { kind: 'drop-cas', ids: ['A'] });
    // Also outside a rotation (nothing waits on it, but the Secret is made whole) and while targets lack the bundle.
    assert.deepEqual(decide({ kind: 'valid', cas: [B], injected: { bundle: 'B', at: now }, serving: { signer: 'B', notAfter: now + opts.servingValidityMs, issuedAt: undefined, namesMatch: true } },
      now, notHeld, opts), { kind: 'record-issued' });
  });

  for (const seed of [21, 22, 23]) {
    test(`issued-at records edited away at random (3 replicas, 3 targets, seed ${seed}): the invariant holds`, () => {
      const w = simulate({ seed, replicas: 3, targets: 3, durationMs: 3 * opts.caValidityMs, maxTickMs: 30 * s, injectionFailure: 0.2, stripIssued: 0.02 });
      assert.ok(w.faults.stripped >= 20, `${w.faults.stripped} records stripped`);
      assert.ok(count(w, 'record-issued') >= 1);
      assert.ok(count(w, 'add-ca') >= 3 && count(w, 'drop-cas') >= 2);
    });
  }

  test('mergeBundle keeps exactly the wanted CAs and those issued after the newest wanted one (a stale Secret view); a start over drops the old CAs whatever their lifetime', () => {
    const c = (id: string, notBefore: number, notAfter: number): { id: string; notBefore: number; notAfter: number } => ({ id, notBefore, notAfter });
    const ids = (l: { id: string }[]): string[] => l.map((x) => x.id);
    // A stale replica (its Secret {A}) does not remove B, added to the Secret after its read.
    assert.deepEqual(ids(mergeBundle([c('A', 0, 1_000)], [c('A', 0, 1_000), c('B', 600, 1_600)])), ['A', 'B']);
    // Started over with shorter lifetimes: the old one-year CA expires after the new one but was issued before it.
    assert.deepEqual(ids(mergeBundle([c('C', 2_000, 2_048)], [c('A', 0, 100_000), c('B', 600, 100_600)])), ['C']);
    // A CA issued in the same second as the newest wanted one cannot be an add-ca of a newer Secret: removed.
    assert.deepEqual(ids(mergeBundle([c('C', 2_000, 2_048)], [c('X', 2_000, 9_000)])), ['C']);
    // A CA put in by hand before the Secret's newest: removed; the order is the issue order.
    assert.deepEqual(ids(mergeBundle([c('B', 600, 500), c('A', 0, 1_000)], [c('H', 100, 50_000)])), ['A', 'B']);
  });

  test('a CA lifetime shortened at the next CA renewal: the CA issued last is the newest even though it expires first (switched to; the older one dropped)', () => {
    const long: CaView = { id: 'L', notBefore: t0 - 3_600 * s, notAfter: t0 + 100 * opts.caValidityMs };
    const short: CaView = { id: 'S', notBefore: t0 + 10 * s, notAfter: t0 + 10 * s + opts.caValidityMs };
    const v: SecretView = { kind: 'valid', cas: [long, short], injected: { bundle: 'L,S', at: t0 + 20 * s }, serving: { signer: 'L', notAfter: t0 + opts.servingValidityMs, issuedAt: t0, namesMatch: true } };
    assert.deepEqual(decide(v, t0 + 20 * s + opts.propagationMs, held, opts), { kind: 'renew-serving', signer: 'S', reason: 'switch-ca' });
    const after: SecretView = { ...v, serving: { signer: 'S', notAfter: t0 + 200 * s + opts.servingValidityMs, issuedAt: t0 + 200 * s, namesMatch: true } };
    assert.deepEqual(decide(after, t0 + 200 * s + opts.reloadGraceMs, held, opts), { kind: 'drop-cas', ids: ['L'] });
  });

  test('a start over with shorter lifetimes (Secret deleted, replicas restarted): the first injection leaves exactly the new CA in every target', () => {
    const clock = new FakeClock(t0);
    const w = new World(2, clock);
    const round = (rep: Replica): void => {
      for (let i = 0; i < 40; i++) {
        if (rep.step()?.kind === 'none') return;
      }
      assert.fail('a round did not settle');
    };
    round(new Replica(w));
    const old = w.targets.map(bundleId);
    assert.deepEqual(old, ['ca0', 'ca0']);
    clock.step(10 * s);
    // Start over: the Secret deleted, the next replica makes CAs of a third of the lifetime.
    const short: RotationOptions = { ...opts, caValidityMs: opts.caValidityMs / 3, servingValidityMs: opts.servingValidityMs / 3, propagationMs: 10 * s, reloadGraceMs: 10 * s };
    validateRotationOptions(short);
    w.caValidityMs = short.caValidityMs;
    w.servingValidityMs = short.servingValidityMs;
    w.write({ kind: 'absent' });
    round(new Replica(w, () => false, short));
    assert.deepEqual(w.targets.map(bundleId), ['ca1', 'ca1'], 'the old CA (expiring later than the new one) is gone from every target');
  });
});
