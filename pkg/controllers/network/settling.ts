/**
 * Settle windows of the Network reconciler: per Network UID, until when its Neutron lookups must be full (name +
 * description and tag) and, while nothing is found, creates must wait — opened after a create with an unknown outcome
 * and after every create (one full lookup later catches a late commit of an earlier attempt).
 *
 * Invariants: a window that ended is the same as no window (every reader compares with now), so ended windows are
 * dropped whenever one is opened — a Network that leaves without the reconciler closing its window (deleted by
 * another replica, moved to another shard, gone within a window of its create) costs nothing for good. In memory
 * only: after a restart, the first reconcile of a Network without status.networkID does a full lookup anyway.
 * Not synchronised: the reconciler's workers share one instance, and a key is processed by one worker at a time.
 */
export class SettleWindows {
  private readonly until = new Map<string, number>();
  private readonly now: () => number;

  /** `now`: the reconciler's clock (ms). */
  constructor(now: () => number) {
    this.now = now;
  }

  /** Opens (or moves) `uid`'s window to end `ms` from now, and drops every window that already ended. */
  open(uid: string, ms: number): void {
    const t = this.now();
    for (const [k, u] of this.until) if (u <= t) this.until.delete(k);
    this.until.set(uid, t + ms);
  }

  /** When `uid`'s window ends (ms), undefined when none was opened or it was closed; may be in the past. */
  end(uid: string): number | undefined {
    return this.until.get(uid);
  }

  /** Closes `uid`'s window (its Network was finalized, or its lookups found the network after the window ended). */
  close(uid: string): void {
    this.until.delete(uid);
  }

  /** Windows held, ended ones not yet dropped included. */
  get size(): number {
    return this.until.size;
  }
}
