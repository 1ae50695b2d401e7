/**
 * A leader hand-over judged from the API server's audit log (blocking mode, microsecond timestamps; the Lease written
 * at level Request so a release is recognisable, every write attributed to a manager process by the identity in its
 * User-Agent): used by the rollouts of test/node.e2e.ts (kubectl patch) and test/helm.e2e.ts (helm upgrade).
 */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { identityOf, micros, readAuditLog, succeeded, type AuditEvent } from './audit.ts';

/**
 * Asserts zero leader overlap between the process `oldHolder` and its successor `next` on the Lease `lease`: every
 * successful write of the old process (Lease, Foo, Deployment) completed before the new process's first successful
 * Lease write (its acquisition), the new process wrote nothing before that, the old process's last Lease write was a
 * release, and the acquisition came ≤ 3 s after it. Returns the acquisition time (µs since the epoch) and the
 * hand-over in seconds.
 */
export function assertHandOver(t: TestContext, auditLog: string, lease: string, oldHolder: string, next: string): { acquiredAt: number; handOverS: number } {
  const events = readAuditLog(auditLog).filter(succeeded);
  const byId = (id: string): AuditEvent[] => events.filter((e) => identityOf(e) === id);
  const isLease = (e: AuditEvent): boolean => e.objectRef?.resource === 'leases' && e.objectRef.name === lease;
  const oldWrites = byId(oldHolder);
  const newWrites = byId(next);
  const acquire = newWrites.filter(isLease).sort((a, b) => micros(a.requestReceivedTimestamp) - micros(b.requestReceivedTimestamp))[0];
  assert.ok(acquire, `the new leader's Lease acquisition is in the audit log (${newWrites.length} writes by ${next})`);
  assert.ok(oldWrites.length > 0, `the old leader's writes are in the audit log (identity ${oldHolder})`);
  const oldLast = oldWrites.reduce((a, b) => (micros(a.stageTimestamp) >= micros(b.stageTimestamp) ? a : b));
  const acquiredAt = micros(acquire.requestReceivedTimestamp);
  assert.ok(micros(oldLast.stageTimestamp) < acquiredAt,
    `the old leader's last write (${oldLast.verb} ${oldLast.objectRef?.resource}/${oldLast.objectRef?.name}, completed ${oldLast.stageTimestamp}) precedes the new leader's acquisition (${acquire.requestReceivedTimestamp})`);
  const early = newWrites.filter((e) => micros(e.requestReceivedTimestamp) < acquiredAt);
  assert.deepEqual(early.map((e) => `${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name}`), [], 'the new process wrote nothing before it acquired the Lease');
  // The old leader's last Lease write was its release (the request body: holderIdentity "", leaseDurationSeconds 1, as
  // pkg/manager/leaderelection.ts `release` writes it), and the new leader acquired within 3 s of it (asserted; a
  // poll only by chance when the caller gave the new process a slow retry period).
  const oldLease = oldWrites.filter(isLease).reduce((a, b) => (micros(a.stageTimestamp) >= micros(b.stageTimestamp) ? a : b));
  const body = (oldLease.requestObject as { spec?: { holderIdentity?: string; leaseDurationSeconds?: number } } | undefined)?.spec;
  const released = (body?.holderIdentity ?? '') === '' && body?.leaseDurationSeconds === 1;
  const handOverS = (acquiredAt - micros(oldLease.stageTimestamp)) / 1e6;
  t.diagnostic(`audit: old leader's last Lease write (${oldLease.verb}, ${released ? 'a release' : 'NOT a release'}) at ${oldLease.stageTimestamp}; ` +
    `new leader's acquisition (${acquire.verb}) at ${acquire.requestReceivedTimestamp}: hand-over ${handOverS.toFixed(6)} s`);
  assert.ok(released, `the old leader's last Lease write was a release (holderIdentity "", leaseDurationSeconds 1): ${oldLease.verb} ${JSON.stringify(body)}`);
  assert.ok(handOverS <= 3, `hand-over ${handOverS.toFixed(3)} s from the release to the acquisition (bound 3 s; the new Pod polls every 20 s)`);
  t.diagnostic(`old leader's last write of any kind: ${oldLast.verb} ${oldLast.objectRef?.resource}/${oldLast.objectRef?.name} completed ${oldLast.stageTimestamp}`);
  return { acquiredAt, handOverS };
}
