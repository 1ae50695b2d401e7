/**
 * One endurance run (issue 43): the world of env.ts, two manager replicas (replicas.ts), the churn (churn.ts), the
 * sampler (sampler.ts), and the faults (faults.ts) on a schedule of CYCLES, each closed by a checkpoint
 * (checkpoint.ts). bench/soak.ts runs it for SOAK_MINUTES and writes the results file; test/soak.test.ts runs a short
 * one and asserts the mechanism and the checkpoints (never a timing).
 *
 * A cycle of `cycleMs`: each fault at its fraction of the cycle (`schedule`, in order; a fault that is still running
 * delays the next), then the checkpoint at 0.9: the churn pauses, the checkpoint runs (converge, then caches), the
 * churn resumes. The next cycle starts at the end of this one or after the checkpoint, whichever is later. A fault
 * with `every: n` runs in every n-th cycle (the first cycle included). The run ends after `minutes` with a last
 * checkpoint (unless one just ended).
 *
 * Cancellation: `signal` ends the run at the next step (a fault in progress finishes; no last checkpoint); everything
 * started is stopped in every case.
 */
import { mkdirSync } from 'node:fs';
import { SharedInformerFactory } from '../../pkg/informerfactory/factory.ts';
import { checkpoint, type CheckpointResult } from './checkpoint.ts';
import { Churn, type Kind } from './churn.ts';
import { SoakEnv } from './env.ts';
import { Faults, type FaultRecord } from './faults.ts';
import { LogCounts, Replica } from './replicas.ts';
import { Sampler } from './sampler.ts';

export type FaultKind = FaultRecord['kind'];

export interface ScheduledFault { kind: FaultKind; at: number; every?: number }

/** The default cycle: every fault once, spread over the cycle, the checkpoint at 0.9. */
export const defaultSchedule: readonly ScheduledFault[] = [
  { kind: 'apiserver-crash', at: 0.08 },
  { kind: 'compaction', at: 0.22 },
  { kind: 'neutron-errors', at: 0.34 },
  { kind: 'neutron-slow', at: 0.48 },
  { kind: 'leader-kill', at: 0.64 },
  { kind: 'apiserver-graceful', at: 0.76 },
];
export const CHECKPOINT_AT = 0.9;

export interface SoakOptions {
  minutes: number;
  /** Working directory (logs, samples, cluster and neutron state). */
  dir: string;
  /** The manager's entry point (a frozen bundle, or cmd/manager/main.ts). */
  script: string;
  /** Churn: changes per second, populations and kind weights. */
  rate: number;
  targets: Record<Kind, number>;
  weights: Record<Kind, number>;
  cycleMs: number;
  schedule: readonly ScheduledFault[];
  /** Neutron fault windows, as a fraction of the cycle. */
  neutronWindow: number;
  /** Share of the managers' Neutron requests answered 503 / delayed in those windows (default 0.3). */
  neutronShare?: number;
  /** Ends the run after this many cycles even before `minutes` (the test: one cycle, every fault in it). */
  maxCycles?: number;
  /** Extra kube-apiserver flags. */
  apiserverArgs?: readonly string[];
  warmupMs: number;
  sampleIntervalMs: number;
  /** Each replica's cgroup memory limit (MiB); undefined = none. */
  memoryLimitMiB: number | undefined;
  convergeTimeoutMs: number;
  cacheTimeoutMs: number;
  /** How long the managers are cut off around the compaction. */
  cutMs: number;
  /** A replica that exited is started again after this. */
  restartDelayMs: number;
  /** Extra manager flags. */
  managerArgs?: readonly string[];
  /** Extra environment variables of the managers. */
  managerEnv?: Readonly<Record<string, string>>;
  log: (msg: string) => void;
  signal?: AbortSignal;
}

export interface SoakOutcome {
  startedAt: number;
  endedAt: number;
  /** ms the churn ran (pauses excluded). */
  churnMs: number;
  churn: Churn;
  faults: FaultRecord[];
  checkpoints: CheckpointResult[];
  sampler: Sampler;
  logs: LogCounts;
  replicas: Replica[];
  /** Scheduled faults that failed to run (the run goes on), one line each. */
  errors: string[];
}

const sleepUntil = async (t: number, signal?: AbortSignal): Promise<void> => {
  while (Date.now() < t && !signal?.aborted) await new Promise((r) => setTimeout(r, Math.min(1000, t - Date.now())));
};

export async function runSoak(o: SoakOptions): Promise<SoakOutcome> {
  mkdirSync(o.dir, { recursive: true });
  const env = await SoakEnv.start({
    dir: o.dir, namespaces: ['soak-0', 'soak-1'], leaseNamespace: 'soak-system', log: o.log, ...(o.apiserverArgs ? { apiserverArgs: o.apiserverArgs } : {}),
  });
  const logs = new LogCounts();
  const replicas = ['a', 'b'].map((name) => new Replica({
    name, script: o.script, kubeconfig: env.managerKubeconfig, cloudsYaml: env.cloudsYaml, leaseNamespace: env.leaseNamespace,
    dir: o.dir, memoryLimitBytes: o.memoryLimitMiB ? o.memoryLimitMiB * 1024 * 1024 : undefined, restartDelayMs: o.restartDelayMs,
    ...(o.managerArgs ? { args: o.managerArgs } : {}), ...(o.managerEnv ? { env: o.managerEnv } : {}), log: o.log,
  }, logs));
  const factory = new SharedInformerFactory({ client: env.rest, namespaces: [] });
  const churn = new Churn({ rest: env.rest, factory, namespaces: env.namespaces, rate: o.rate, targets: o.targets, weights: o.weights });
  const faults = new Faults(env, replicas, o.log);
  const sampler = new Sampler(replicas, o.dir);
  const checkpoints: CheckpointResult[] = [];
  const errors: string[] = [];
  const stop = new AbortController();
  const background: Promise<void>[] = [];
  let churnMs = 0;
  try {
    await faults.createProbes();
    background.push(factory.run(stop.signal));
    if (!(await factory.waitForCacheSync({ timeoutMs: 120_000 }))) throw new Error('the bench\'s own informers did not sync');
    for (const r of replicas) await r.start();
    o.log('both replicas ready; churn, sampling and faults begin');
    const startedAt = Date.now();
    const deadline = startedAt + o.minutes * 60_000;
    background.push(sampler.run(o.sampleIntervalMs, stop.signal));
    let churnSince: number | undefined = performance.now();
    const pauseChurn = async (): Promise<void> => {
      await churn.pause();
      if (churnSince !== undefined) churnMs += performance.now() - churnSince;
      churnSince = undefined;
    };
    background.push(churn.run(stop.signal));
    const leader = async (): Promise<Replica | undefined> => {
      for (const r of replicas) if (await r.isLeader()) return r;
      return undefined;
    };
    const takeCheckpoint = async (): Promise<void> => {
      await pauseChurn();
      o.log(`checkpoint ${checkpoints.length + 1}: churn paused`);
      const cp = await checkpoint(env.rest, env.neutron.endpoint, replicas, leader, {
        convergeTimeoutMs: o.convergeTimeoutMs, cacheTimeoutMs: o.cacheTimeoutMs, ...(o.signal ? { signal: o.signal } : {}),
      });
      checkpoints.push(cp);
      const c = cp.report.counts;
      o.log(`checkpoint ${checkpoints.length}: ${cp.converged ? 'converged' : 'NOT converged'} in ${(cp.convergeMs / 1000).toFixed(1)} s ` +
        `(${c.foos} Foos, ${c.deployments} Deployments, ${c.networks} Networks, ${c.neutronNetworks} Neutron networks; leaked ${c.leaked}, duplicated ${c.duplicated}, untagged ${c.untagged}); ` +
        `caches ${cp.cachesEqual ? 'equal' : 'DIFFER'} (${cp.cachesCompared} compared, ${(cp.cacheMs / 1000).toFixed(1)} s)` +
        `${cp.report.problems.length ? `; first problems: ${cp.report.problems.slice(0, 5).join(' | ')}` : ''}` +
        `${cp.mismatches.length ? `; mismatches: ${JSON.stringify(cp.mismatches.slice(0, 3))}` : ''}`);
      if (Date.now() < deadline) {
        churn.resume();
        churnSince = performance.now();
      }
    };
    for (let cycle = 0; Date.now() < deadline && !o.signal?.aborted && cycle < (o.maxCycles ?? Infinity); cycle++) {
      const cs = Date.now();
      for (const f of o.schedule) {
        if (f.every && cycle % f.every !== 0) continue;
        await sleepUntil(cs + f.at * o.cycleMs, o.signal);
        if (Date.now() >= deadline || o.signal?.aborted) break;
        o.log(`cycle ${cycle + 1}: ${f.kind}`);
        try {
          const windowMs = o.neutronWindow * o.cycleMs;
          if (f.kind === 'apiserver-crash') await faults.restartApiserver(false);
          else if (f.kind === 'apiserver-graceful') await faults.restartApiserver(true);
          else if (f.kind === 'compaction') await faults.compaction(o.cutMs);
          else if (f.kind === 'neutron-errors') await faults.neutronErrors(windowMs, o.neutronShare ?? 0.3);
          else if (f.kind === 'neutron-slow') await faults.neutronSlow(windowMs, o.neutronShare ?? 0.3, 15_000);
          else await faults.killLeader();
        } catch (err) {
          errors.push(`${f.kind} in cycle ${cycle + 1}: ${String(err)}`);
          o.log(`fault ${f.kind} failed: ${String(err)}`);
        }
      }
      if (Date.now() >= deadline || o.signal?.aborted) break;
      await sleepUntil(cs + CHECKPOINT_AT * o.cycleMs, o.signal);
      if (o.signal?.aborted) break;
      await takeCheckpoint();
      await sleepUntil(Math.min(deadline, cs + o.cycleMs), o.signal);
    }
    if (!o.signal?.aborted && !(o.maxCycles !== undefined && checkpoints.length >= o.maxCycles) && (checkpoints.length === 0 || Date.now() - (checkpoints[checkpoints.length - 1]?.at ?? 0) > o.cycleMs * (1 - CHECKPOINT_AT))) {
      await takeCheckpoint();
    } else {
      await pauseChurn();
    }
    await sampler.sampleAll();
    return { startedAt, endedAt: Date.now(), churnMs, churn, faults: faults.records, checkpoints, sampler, logs, replicas, errors };
  } finally {
    stop.abort();
    await Promise.allSettled(background);
    await Promise.allSettled(replicas.map((r) => r.stop()));
    // A checkpoint that found something keeps the control plane's logs (kube-controller-manager, kwok …) to look at.
    await env.stop(checkpoints.some((c) => !c.converged || !c.cachesEqual)).catch((err: unknown) => o.log(`stopping the environment: ${String(err)}`));
  }
}
