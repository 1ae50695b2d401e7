/**
 * Webhook certificate rotation without cert-manager, as one pure decision (`decide`): what the Secret holding the CA
 * bundle and the serving pair should become next. The driver (selfmanaged.ts) reads the Secret and the injection
 * targets, calls `decide`, carries out the action with an optimistic-concurrency write, and asks again; nothing here
 * does I/O or reads a clock.
 *
 * The Secret holds: the CA bundle (one CA, or two during a CA rotation, oldest first: in the order they were issued)
 * with each CA's key, the serving certificate + key signed by one of those CAs, and two records: when the serving
 * certificate was issued, and the bundle last seen injected into EVERY target (every webhook's clientConfig.caBundle
 * of the named Validating/MutatingWebhookConfigurations and the named CRDs' conversion webhook) with the time it was
 * first seen so. Each target records in itself when an injector last ADDED a CA to it (`TargetsView.addedAt`): a
 * target whose bundle was reset (a `kubectl apply`) and re-injected restarts the propagation wait from that write.
 *
 * Two delays bound what the driver cannot observe directly:
 *  - `propagationMs`: after a caBundle is written, how long an API server may still call the webhook with the
 *    previous bundle (its informer of webhook configurations / CRDs lags; every API server of an HA control plane).
 *  - `reloadGraceMs`: after the Secret's serving pair changed, how long a replica may still serve the previous pair
 *    (it polls the Secret; selfmanaged.ts sets this from its poll interval).
 *
 * INVARIANT (no admission or conversion call fails during a rotation): at every instant, every certificate some
 * replica may serve (the Secret's serving pair, or the one before it within reloadGraceMs of the change) is signed
 * by a CA contained in every caBundle an API server may use (each target's bundle, or the one before it within
 * propagationMs of the change). The decisions keep it because:
 *  1. A new CA is only ever ADDED to the bundle (`add-ca`); the serving certificate is re-signed by it (`renew-serving`
 *     with reason `switch-ca`) only once the bundle containing it has been seen in every target for propagationMs —
 *     counted from the later of the Secret's record and the last time a CA was added to any target, so a target
 *     that was reset and re-injected meanwhile (its API servers may still use the reset bundle) restarts the wait.
 *  2. A CA is removed from the bundle (`drop-cas`) only when it was issued before the CA that signs the serving
 *     certificate and that certificate was issued at least reloadGraceMs ago (no replica serves the old one). When
 *     the Secret has no usable record of that issue time (edited away), the record is written first
 *     (`record-issued`, the time it is written): the grace then starts, never in the past.
 *  3. A serving renewal with the same CA (`renew`) changes nothing any bundle must contain.
 *  4. The injector never removes a CA issued after the Secret's newest one it knows (a replica with a stale view of
 *     the Secret cannot undo an `add-ca` it has not seen yet), and removes every other CA the Secret does not hold;
 *     see `mergeBundle`.
 * Exceptions, where calls fail anyway and the machine repairs as fast as it can: no Secret yet (`create`: nothing
 * was trusted before; a Secret deleted to start over is the same, and the first injection removes every CA of the
 * previous Secret from the targets), a Secret edited into garbage (`regenerate`), every CA expired (`regenerate`,
 * e.g. the process was down past the CA's lifetime), a serving certificate already expired (`renew-serving` with
 * reason `expired`, without waiting for propagation). Not covered: a target reset between a replica's look at the
 * targets and its Secret write of the same round (milliseconds; the switch may land while the reset bundle is in
 * use), and a target's bundle changed and restored by someone else between two polls (never seen).
 *
 * Renewal points (cert-manager's default renewBefore is a third of the duration): the serving certificate when less
 * than servingValidityMs/3 of it remains; the CA when less than caValidityMs/3 remains. Options require
 * caValidityMs >= 3 × servingValidityMs, so a CA still has a full serving lifetime left when its successor is added
 * and a serving certificate is never clamped by its CA's expiry in normal operation.
 *
 * Steps of a CA rotation (each a separate write of the Secret, by whichever replica wins it):
 *   {A} serving←A  --add-ca-->  {A,B} serving←A  --record-injected (all targets carry {A,B})-->
 *   (propagationMs)  --renew-serving switch-ca-->  {A,B} serving←B  (reloadGraceMs)  --drop-cas [A]-->  {B} serving←B
 */

/** One CA of the bundle, as the driver parsed it. */
export interface CaView {
  /** Stable identity (the SHA-256 fingerprint). */
  id: string;
  notBefore: number;
  notAfter: number;
}

/** The serving certificate, as the driver parsed it. */
export interface ServingView {
  /** The id of the bundle CA that signed it (the parser refuses a Secret whose serving certificate no CA signed). */
  signer: string;
  notAfter: number;
  /**
   * When it was written to the Secret (its record), or undefined when that is not known: no record, an unparsable
   * one, or one earlier than the certificate's own notBefore (it belongs to another certificate). Never guessed from
   * the certificate: its notBefore is back-dated (an hour, for slow clocks), which would end the reload grace at once.
   */
  issuedAt: number | undefined;
  /** Whether its SANs are the ones wanted now (a changed Service name or IP option re-issues it). */
  namesMatch: boolean;
}

export type SecretView =
  | { kind: 'absent' }
  /** Present but unusable (missing or unparsable keys, a key that is not its certificate's, no CA signed the serving certificate). */
  | { kind: 'invalid'; reason: string }
  | {
    kind: 'valid';
    /** Oldest first (by notBefore: the order they were issued in). */
    cas: CaView[];
    serving: ServingView;
    /** The bundle (ids in order, see bundleId) last recorded as injected everywhere, and since when. */
    injected: { bundle: string; at: number } | undefined;
  };

export interface RotationOptions {
  caValidityMs: number;
  servingValidityMs: number;
  propagationMs: number;
  reloadGraceMs: number;
}

/** The defaults: CA 1 year, serving 90 days, both delays 2 minutes. */
export const defaultRotationOptions: RotationOptions = {
  caValidityMs: 365 * 86_400_000,
  servingValidityMs: 90 * 86_400_000,
  propagationMs: 120_000,
  reloadGraceMs: 120_000,
};

/** Throws unless the options keep the invariant's timing assumptions (see the file comment). */
export function validateRotationOptions(o: RotationOptions): void {
  for (const [k, v] of Object.entries(o)) {
    if (!(typeof v === 'number' && Number.isFinite(v) && v >= 0)) throw new Error(`${k} must be a finite number >= 0, got ${String(v)}`);
  }
  if (o.servingValidityMs <= 0) throw new Error('servingValidityMs must be > 0');
  if (o.caValidityMs < 3 * o.servingValidityMs) {
    throw new Error(`caValidityMs (${o.caValidityMs}) must be at least 3 × servingValidityMs (${o.servingValidityMs}): ` +
      'a CA is replaced when a third of it remains, which must still cover a whole serving certificate');
  }
  // A rotation step must fit well inside the renewal windows, or renewals would chase each other.
  if (o.propagationMs + o.reloadGraceMs >= o.servingValidityMs / 3) {
    throw new Error('propagationMs + reloadGraceMs must be shorter than a third of servingValidityMs');
  }
}

/** The injection targets as the driver found them in this round, after injecting. */
export interface TargetsView {
  /** Every target carries every CA of the Secret's bundle. */
  held: boolean;
  /**
   * The latest time an injector added a CA to any target (each target records its own, in the same write as the
   * bundle: selfmanaged.ts), or the time of this round for a target without that record; -Infinity without targets.
   */
  addedAt: number;
}

export type Action =
  | { kind: 'create' }
  | { kind: 'regenerate'; reason: string }
  | { kind: 'add-ca' }
  | { kind: 'record-injected'; bundle: string }
  | { kind: 'record-issued' }
  | { kind: 'renew-serving'; signer: string; reason: 'renew' | 'switch-ca' | 'expired' | 'names' }
  | { kind: 'drop-cas'; ids: string[] }
  | { kind: 'none'; why: 'up-to-date' | 'awaiting-injection' | 'propagating' | 'reload-grace'; recheckAt: number };

/** The identity of a bundle: its CA ids in order. */
export function bundleId(cas: readonly CaView[]): string {
  return cas.map((c) => c.id).join(',');
}

/** Issue order (notBefore; a tie by notAfter): oldest first. A CA added later is newer even with a shorter life. */
export function byIssue(a: { notBefore: number; notAfter: number }, b: { notBefore: number; notAfter: number }): number {
  return a.notBefore - b.notBefore || a.notAfter - b.notAfter;
}

/**
 * The next step for the Secret, given the targets as the driver just found them (after injecting). Total: every view
 * gets an action.
 */
export function decide(s: SecretView, now: number, targets: TargetsView, o: RotationOptions): Action {
  if (s.kind === 'absent') return { kind: 'create' };
  if (s.kind === 'invalid') return { kind: 'regenerate', reason: s.reason };
  const cas = [...s.cas].sort(byIssue);
  const signer = cas.find((c) => c.id === s.serving.signer);
  if (!signer) return { kind: 'regenerate', reason: 'the serving certificate is not signed by a CA of the bundle' };
  // The newest CA is the last one issued that is still valid (an expired one can sign nothing; it is dropped below).
  const newest = cas.filter((c) => c.notAfter > now).at(-1);
  if (!newest) {
    const last = Math.max(...cas.map((c) => c.notAfter));
    return { kind: 'regenerate', reason: `every CA in the Secret has expired (the last at ${new Date(last).toISOString()})` };
  }

  const bundle = bundleId(cas);
  // Since when every target has carried the bundle: the Secret's record, or a later re-injection into a target.
  const since = s.injected?.bundle === bundle ? Math.max(s.injected.at, targets.addedAt) : undefined;
  const propagated = targets.held && since !== undefined && now - since >= o.propagationMs;

  // Already failing: repair at once. The current signer is trusted where the old serving cert was; else the newest.
  if (s.serving.notAfter <= now || signer.notAfter <= now) {
    const use = signer.notAfter > now && !propagated ? signer : newest;
    return { kind: 'renew-serving', signer: use.id, reason: 'expired' };
  }
  const issuedAt = s.serving.issuedAt;
  if (issuedAt === undefined) return { kind: 'record-issued' };
  if (!targets.held) return { kind: 'none', why: 'awaiting-injection', recheckAt: now };
  if (since === undefined) return { kind: 'record-injected', bundle };

  const servingRenewAt = s.serving.notAfter - o.servingValidityMs / 3;
  if (signer.id !== newest.id) {
    if (propagated) return { kind: 'renew-serving', signer: newest.id, reason: 'switch-ca' };
    // Not yet. A due renewal waits for the switch: propagationMs is far shorter than the renewal window, and an
    // expiry meanwhile is the branch above.
    return { kind: 'none', why: 'propagating', recheckAt: since + o.propagationMs };
  }
  const older = cas.filter((c) => c.id !== newest.id);
  if (older.length > 0) {
    if (now - issuedAt >= o.reloadGraceMs) return { kind: 'drop-cas', ids: older.map((c) => c.id) };
  }
  if (now >= servingRenewAt) return { kind: 'renew-serving', signer: newest.id, reason: 'renew' };
  if (!s.serving.namesMatch) return { kind: 'renew-serving', signer: newest.id, reason: 'names' };
  if (older.length > 0) return { kind: 'none', why: 'reload-grace', recheckAt: issuedAt + o.reloadGraceMs };
  const caRenewAt = newest.notAfter - o.caValidityMs / 3;
  if (now >= caRenewAt) return { kind: 'add-ca' };
  return { kind: 'none', why: 'up-to-date', recheckAt: Math.min(servingRenewAt, caRenewAt) };
}

/**
 * The caBundle to write into a target that holds `current`: the Secret's bundle `wanted`, plus every CA of `current`
 * issued strictly after (later notBefore) the newest of `wanted` — only such a CA can be one another replica has just
 * added to a newer Secret (`add-ca` issues it at that moment), so a replica whose view of the Secret is stale never
 * removes it (invariant point 4). Every other CA not wanted is removed: one dropped from the Secret (drops are final),
 * and any CA that predates the Secret's newest — those of a Secret deleted to start over or regenerated, whatever
 * their lifetime, and CAs put into the target by hand. Ordered oldest first (byIssue).
 */
export function mergeBundle<C extends { id: string; notBefore: number; notAfter: number }>(wanted: readonly C[], current: readonly C[]): C[] {
  const newestWanted = Math.max(...wanted.map((c) => c.notBefore));
  const ids = new Set(wanted.map((c) => c.id));
  const keep = current.filter((c) => !ids.has(c.id) && c.notBefore > newestWanted);
  return [...wanted, ...keep].sort(byIssue);
}
