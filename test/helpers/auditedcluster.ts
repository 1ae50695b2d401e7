/**
 * Set-up shared by the tests that judge managers from the kube-apiserver's audit log (chaos, chaos-delay, sharding,
 * watchlist): a private minimal control plane that writes an audit log by a given policy, the leader-election flags
 * of a manager replica, and the post-mortem dump of a replica's logs. Reading the log: ./audit.ts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../cluster/controlplane.ts';
import type { ManagerProcess } from './managerprocess.ts';

export interface AuditedControlPlane {
  cp: ControlPlane;
  /** The test's scratch directory (cluster state, audit policy and log; tests put post-mortem material here). */
  dir: string;
  /** The audit log the kube-apiserver writes (one JSON event per line; readAuditLog). */
  auditLog: string;
}

export interface AuditedControlPlaneOptions {
  /** Prefix of the scratch directory under the system temp directory, e.g. `tscm-chaos-`. */
  prefix: string;
  /** The audit policy (YAML text of an audit.k8s.io/v1 Policy). */
  policy: string;
  /**
   * `blocking` (default): every event is in the log before the request is answered, so a test may read the log as
   * soon as its requests returned. `batch`: flushed at least every second — for many writes, where blocking would
   * slow the API server down; a test then polls the log.
   */
  mode?: 'blocking' | 'batch';
  /** More kube-apiserver flags. */
  extraApiserverArgs?: string[];
  /** `minimal` (default): etcd + kube-apiserver. `full`: with the controllers, scheduler and kwok (Deployments roll out). */
  clusterMode?: 'minimal' | 'full';
}

/** Starts a private control plane (minimal unless `clusterMode` says) with an audit log; stopped when the test ends. */
export async function auditedControlPlane(
  t: { after(fn: () => Promise<void>): void }, opts: AuditedControlPlaneOptions,
): Promise<AuditedControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), opts.prefix));
  const policy = join(dir, 'audit-policy.yaml');
  const auditLog = join(dir, 'audit.log');
  writeFileSync(policy, opts.policy);
  const mode = opts.mode === 'batch' ? ['--audit-log-mode=batch', '--audit-log-batch-max-wait=1s'] : ['--audit-log-mode=blocking'];
  const cp = await ControlPlane.start({
    mode: opts.clusterMode ?? 'minimal', dir: join(dir, 'cluster'), log: () => {},
    extraArgs: { 'kube-apiserver': [`--audit-policy-file=${policy}`, `--audit-log-path=${auditLog}`, ...mode, ...(opts.extraApiserverArgs ?? [])] },
  });
  t.after(() => cp.stop());
  return { cp, dir, auditLog };
}

/** The manager flags of a leader-electing replica on the Lease `namespace/id` (durations in milliseconds). */
export function leaderElectionArgs(o: { namespace: string; id: string; leaseMs: number; renewMs: number; retryMs: number }): string[] {
  return ['--leader-elect', `--leader-election-namespace=${o.namespace}`, `--leader-election-id=${o.id}`,
    `--leader-elect-lease-duration=${o.leaseMs}ms`, `--leader-elect-renew-deadline=${o.renewMs}ms`,
    `--leader-elect-retry-period=${o.retryMs}ms`];
}

/** Post-mortem material: writes a manager's JSON log lines, then its stderr, to `file`. */
export function writeManagerLog(file: string, mgr: ManagerProcess): void {
  writeFileSync(file, mgr.logs.map((l) => JSON.stringify(l)).join('\n') + '\n' + mgr.stderr.join(''));
}
