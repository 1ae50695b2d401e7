/**
 * explore: reliability testing of controllers by perturbation (Sieve, OSDI 2022) — the controllers' own setup code,
 * run as a whole ControllerManager against an in-memory API server, once unperturbed (the reference) and then once per
 * perturbation plan derived from the reference's trace (plans.ts: crashes between writes, stale views, unobserved
 * states, write faults). Every execution ends at a fixpoint and its end state is compared with the reference's
 * (state.ts); a difference is a safety finding, no fixpoint a liveness one.
 *
 *   const report = await explore({
 *     crdPaths: ['config/crd/bases'],
 *     setup: (mgr) => { fooControllerSetup.setup(mgr, {}); },           // what main.ts runs
 *     workload: [create(namespace), create(foo), settle(), patch(foo, { spec: { replicas: 3 } }), remove(foo)],
 *   });
 *   expectNoFindings(report);                                             // throws with every finding and its replay line
 *
 * Contracts
 *  - Every execution runs on a fresh store and a fresh `world()` (external systems: e.g. a cloud double); managers are
 *    started and stopped in this process. A crash kills the manager's connection at once (nothing it sends reaches
 *    the store any more), aborts it (its reconciles' signals abort, so a world that honours signals sees no call
 *    after the crash either), and a new manager is started on the same store and world.
 *  - At rest (a fixpoint): every controller's queue is empty, nothing reconciles, nothing is due within `horizonMs`
 *    (a later requeueAfter counts as scheduled, not pending), no watch event is unread and nothing happened on the
 *    server for several turns of the event loop. A step that reaches no rest within `maxWritesPerStep` writes of the
 *    managers or `stepTimeoutMs` is a liveness finding: a hot loop when most of those writes changed nothing.
 *  - Findings are compared against the reference: a plan finds something only where its execution differs from the
 *    unperturbed one, so a workload that leaves objects unconverged on purpose is not a finding.
 *  - Deterministic where it can be: identities (uids, generated names) come from `seed`; timers are real, so an
 *    interleaving can differ between runs. `EXPLORE_PLAN='<plan id>'` (printed with every finding) runs the
 *    reference and that plan only, and prints both traces.
 */
import { Registry } from 'prom-client';
import type { KubeObject } from '../../apimachinery/meta.ts';
import { resourceId, coreResources, type ResourceType } from '../../apimachinery/resource.ts';
import { objectPath, collectionPath } from '../../apimachinery/paths.ts';
import { silentLogger, type Logger } from '../../log/logger.ts';
import type { ReconcileObservation } from '../../runtime/builder.ts';
import { ControllerManager, type ControllerManagerOptions } from '../../runtime/manager.ts';
import type { ApiClient } from '../../client/typed.ts';
import type { FakeResource } from '../fakeclient.ts';
import { FakeClient } from '../fakeclient.ts';
import { MemoryApiServer, type MemoryConnection, type StoreChange, type WriteAction, type WriteRequest } from './memoryserver.ts';
import { RealApiServer, type InterceptingTransport, type RealCluster } from './realserver.ts';
import { derivePlans, describePlan, lagEndsAtRest, maxLagRests, planClass, planId, writeSignature, type FindingClass, type Plan, type PlanKind, type TraceEntry } from './plans.ts';
import { compare, describeDifference, normalize, type EndState } from './state.ts';
import { describeStep, type Step } from './workload.ts';

/** What an invariant sees of an end state. */
export interface ExploreEndState<W> {
  /** Every stored object of `type` (copies), in key order. */
  objects<T extends KubeObject>(type: ResourceType): T[];
  /** The world of the execution (external systems). */
  world: W;
}

/** A predicate on the end state: false or a message = broken. Checked on the reference and on every plan. */
export interface Invariant<W> {
  /** Names the invariant in findings. */
  name: string;
  /** false or a message: broken (a throw counts as broken too). */
  check(state: ExploreEndState<W>): boolean | string | undefined | void;
}

/**
 * What explore gives a world (ExploreOptions.world): `write` makes one of its writes a plan point. The world calls it
 * with a signature that names the write across executions (e.g. `createNetwork demo-a`: no ids that differ between
 * runs) and the function that applies it; explore applies it, or crashes the manager right before or after it
 * (`apply` not called / called, then an Error is thrown at the caller, whose manager is already aborted), or applies it
 * and throws the world's own error for a lost answer (`faults.error()` — a 5xx — or `faults.timeout()`).
 */
export interface WorldPoints {
  /** Applies (or, under a plan, crashes around or faults) the world's write named `signature`; returns `apply`'s value. */
  write<T>(signature: string, apply: () => T, faults?: { error?: () => Error; timeout?: () => Error }): T;
}

/** A simulated controller of the cluster (ExploreOptions.peers): `act` reads and writes the store through `client`. */
export interface Peer {
  /** Names the peer in traces. */
  name: string;
  /** Reads and writes the store through `client` (its writes are attributed to `peer:<name>`); may be async. */
  act(client: ApiClient): unknown;
}

/** Options of `explore`. */
export interface ExploreOptions<W = undefined> {
  /** Names the exploration in reports (default 'explore'). */
  name?: string;
  /** CRDs the store serves (files or directories), as FakeClient's. */
  crdPaths?: string[];
  /** Further resource types the store serves, as FakeClient's. */
  resources?: (ResourceType | FakeResource)[];
  /** Declares the controllers on a fresh manager — the code main.ts runs; `world` is the execution's external systems. */
  setup(mgr: ControllerManager, world: W): unknown;
  /**
   * Makes a fresh world (external systems, e.g. a cloud double) for every execution. A world that routes its writes
   * through `points.write` makes them plan points too: crashes right before and after each, and a failure answered
   * after it was applied (WorldPoints).
   */
  world?: (points: WorldPoints) => W;
  /** The world's state to compare (JSON; normalized like objects). */
  externalState?: (world: W) => unknown;
  /** The steps (workload.ts); an execution always ends with a settle. */
  workload: readonly Step[];
  /**
   * Other controllers of the cluster, simulated: each runs whenever the managers are at rest, until none changes
   * anything (e.g. kube-controller-manager's Deployment controller setting status.availableReplicas). Level-triggered,
   * as real ones: they act on what is stored, whatever the managers did before.
   */
  peers?: readonly Peer[];
  /**
   * The garbage collector as a peer (default on): an object whose every ownerReference names an object that no
   * longer exists is deleted (background propagation), as kube-controller-manager's garbage collector does.
   */
  garbageCollector?: boolean;
  /** Predicates on every end state. */
  invariants?: readonly Invariant<W>[];
  /** Types not compared (Events and Leases never are), and dotted paths dropped before comparing (state.ts). */
  compare?: { exclude?: readonly ResourceType[]; ignore?: readonly string[] };
  /**
   * Which plans (plans.ts; default every kind, 3 occurrences of a write). `events`: Event writes are plan points too
   * (for a controller whose only output is Events; they are never compared).
   */
  plans?: { kinds?: readonly PlanKind[]; maxOccurrences?: number; maxChangesPerObject?: number; max?: number; events?: boolean };
  /** Seed of the store's identities (default 1). */
  seed?: number;
  /** A requeue later than this counts as scheduled, not pending, at rest (default 1 000 ms). */
  horizonMs?: number;
  /** A step whose managers write more than this before resting is a liveness finding (default 300). */
  maxWritesPerStep?: number;
  /** … as is one that takes longer than this (default 15 000 ms). */
  stepTimeoutMs?: number;
  /**
   * Run on this real API server instead of the in-memory one (e.g. a TestEnv: `{ cluster: env }`; its CRDs installed):
   * the reference and the crash and write-fault plans, each execution in namespaces of its own (realserver.ts).
   */
  cluster?: RealCluster;
  /** Extra options of every manager (namespaces, concurrency defaults…); transport, registry and logger are explore's. */
  managerOptions?: Omit<ControllerManagerOptions, 'transport' | 'registry' | 'kubeConfig' | 'observeReconciles'>;
  /** The managers' logger (default silent). */
  logger?: Logger;
  /** Progress lines (default none). */
  log?: (line: string) => void;
}

/** One thing explore found. */
export interface Finding {
  /** safety: the end state differs from the reference's, or an invariant broke; liveness: no rest. */
  kind: 'safety' | 'liveness';
  /** The perturbation that exposed it (plans.ts), or 'reference' for the unperturbed execution. */
  class: FindingClass;
  /** The plan's id ('reference' for the unperturbed execution). */
  plan: string;
  /** What the plan did. */
  perturbation: string;
  /** The seed of the store's identities (ExploreOptions.seed). */
  seed: number;
  /** One line. */
  summary: string;
  /** The differences, invariants or liveness details. */
  details: string[];
  /** One command that runs the reference and this plan again, with traces. */
  replay: string;
}

/** What explore did and found. */
export interface ExploreReport {
  /** ExploreOptions.name. */
  name: string;
  /** Plans derived from the reference trace. */
  plans: number;
  /** Plans executed (all, or the one EXPLORE_PLAN names). */
  executed: number;
  /** Executed plans whose perturbation never happened (the execution took another path before it). */
  notTriggered: number;
  /**
   * Unobserved plans whose workload could not go on (a step failed while the manager was blind: the workload relied
   * on its reaction to what it could not see), with the step's error: no verdict either way.
   */
  inconclusive: string[];
  /** What was found; [] for a controller that passes. */
  findings: Finding[];
  /** The reference execution's trace. */
  reference: readonly TraceEntry[];
  /** Wall time of the whole exploration (ms). */
  durationMs: number;
}

const excludedAlways = [resourceId(coreResources.events), resourceId(coreResources.leases)];

/** Runs the reference and every plan; resolves with the report (it never throws for a finding). */
export async function explore<W = undefined>(opts: ExploreOptions<W>): Promise<ExploreReport> {
  const t0 = performance.now();
  const name = opts.name ?? 'explore';
  const seed = opts.seed ?? 1;
  const only = process.env['EXPLORE_PLAN'];
  const findings: Finding[] = [];
  // The runtime's own timers are unref'd (they never keep a process alive); while explore waits for a manager to stop
  // or rest, one of them may be all that is left: keep the event loop alive until the report is done.
  const keepAlive = setInterval(() => {}, 60_000);
  try {
    return await exploreAll(opts, name, seed, only, findings, t0);
  } finally {
    clearInterval(keepAlive);
  }
}

async function exploreAll<W>(given: ExploreOptions<W>, name: string, seed: number, only: string | undefined, findings: Finding[], t0: number): Promise<ExploreReport> {
  // A replay (EXPLORE_PLAN) prints both traces: on stderr unless the caller has its own log.
  const opts = only !== undefined && !given.log ? { ...given, log: (l: string) => process.stderr.write(`${l}\n`) } : given;
  const ref = await new Execution(opts, undefined, seed).run();
  const replayOf = (id: string): string => `EXPLORE_PLAN='${id}' node --test ${process.argv[1] ?? '<test file>'}`;
  if (only !== undefined) opts.log?.(`[${name}] reference trace:\n${formatTrace(ref.trace)}`);
  if (ref.liveness || ref.broken.length > 0) {
    findings.push({
      kind: ref.liveness ? 'liveness' : 'safety', class: 'reference', plan: 'reference', perturbation: 'none (the unperturbed execution)', seed,
      summary: ref.liveness ?? `invariants broken: ${ref.broken.join('; ')}`, details: ref.broken, replay: replayOf('reference'),
    });
    return { name, plans: 0, executed: 0, notTriggered: 0, inconclusive: [], findings, reference: ref.trace, durationMs: performance.now() - t0 };
  }
  // A real API server's watch cache cannot be steered: crash and write-fault plans only there.
  const kinds = opts.cluster ? (opts.plans?.kinds ?? ['crash', 'fault']).filter((k) => k === 'crash' || k === 'fault') : opts.plans?.kinds;
  let plans = derivePlans(ref.trace, { ...opts.plans, ...(kinds ? { kinds } : {}) });
  const derived = plans.length;
  if (only !== undefined) plans = plans.filter((p) => planId(p) === only);
  else if (opts.plans?.max !== undefined) plans = plans.slice(0, opts.plans.max);
  let notTriggered = 0;
  const inconclusive: string[] = [];
  for (const [i, plan] of plans.entries()) {
    const id = planId(plan);
    const r = await new Execution(opts, plan, seed).run();
    if (only !== undefined) opts.log?.(`[${name}] trace of ${id}:\n${formatTrace(r.trace)}`);
    if (!r.triggered) {
      notTriggered++;
      continue;
    }
    if (r.inconclusive) {
      inconclusive.push(`${id}: ${r.inconclusive}`);
      continue;
    }
    const base = { class: planClass(plan), plan: id, perturbation: describePlan(plan), seed, replay: replayOf(id) };
    if (r.liveness) {
      findings.push({ ...base, kind: 'liveness', summary: r.liveness, details: r.broken });
    } else {
      const diffs = r.end ? compare(ref.end ?? emptyEnd, r.end).map(describeDifference) : [];
      if (diffs.length > 0 || r.broken.length > 0) {
        findings.push({
          ...base, kind: 'safety',
          summary: diffs.length > 0 ? `end state differs from the reference: ${diffs[0] ?? ''}${diffs.length > 1 ? ` (+${diffs.length - 1} more)` : ''}` : `invariants broken: ${r.broken.join('; ')}`,
          details: [...diffs, ...r.broken.map((b) => `invariant ${b}`)],
        });
      }
    }
    if ((i + 1) % 25 === 0) opts.log?.(`[${name}] ${i + 1}/${plans.length} plans, ${findings.length} findings`);
  }
  return { name, plans: derived, executed: plans.length, notTriggered, inconclusive, findings, reference: ref.trace, durationMs: performance.now() - t0 };
}

/** A readable report: one paragraph per finding with its replay line. */
export function formatFindings(report: ExploreReport): string {
  const head = `${report.name}: ${report.findings.length} finding(s) in ${report.executed} plan(s) (${report.notTriggered} not triggered, ${report.inconclusive.length} inconclusive)`;
  return [head, ...report.findings.map((f) => [
    `- ${f.kind} / ${f.class} — ${f.summary}`,
    `  plan: ${f.plan} (seed ${f.seed}): ${f.perturbation}`,
    ...f.details.slice(0, 8).map((d) => `    ${d}`),
    `  replay: ${f.replay}`,
  ].join('\n'))].join('\n');
}

/** Throws an Error listing every finding (formatFindings) unless the report has none. */
export function expectNoFindings(report: ExploreReport): void {
  if (report.findings.length > 0) throw new Error(formatFindings(report));
}

/** The trace as lines (what EXPLORE_PLAN prints). */
export function formatTrace(trace: readonly TraceEntry[]): string {
  return trace.map((e) => {
    switch (e.kind) {
      case 'step': return `step ${e.index}: ${e.step}`;
      case 'start': return `  manager-${e.incarnation} started`;
      case 'crash': return `  manager-${e.incarnation} CRASHED ${e.at}`;
      case 'write': return `  manager-${e.incarnation} ${e.signature} #${e.occurrence} → ${e.status}${e.changed ? '' : ' (no change)'}${e.action !== 'apply' ? ` [${e.action}]` : ''}`;
      case 'change': return `    store rv ${e.rv} ${e.type} ${e.resource} ${e.key} (change ${e.change}${e.envChange !== undefined ? `, the environment's ${e.envChange}` : ''}, by ${e.by})`;
      case 'deliver': return `    manager-${e.incarnation} saw ${e.type} ${e.resource} ${e.key} rv ${e.rv}`;
      case 'perturb': return `  ** ${e.what}`;
      case 'rest': return `  at rest after step ${e.step}: ${e.outcome}`;
      case 'peer': return `  peer ${e.name} wrote ${e.wrote} change(s)`;
      case 'reconcile': return `  manager-${e.incarnation} reconciled ${e.controller} ${e.key}: ${e.outcome}`;
    }
  }).join('\n');
}

const emptyEnd: EndState = { objects: new Map(), external: undefined };

interface Incarnation {
  n: number;
  mgr: ControllerManager;
  conn: MemoryConnection | InterceptingTransport;
  ac: AbortController;
  exited: Promise<number>;
}

interface ExecutionResult {
  trace: TraceEntry[];
  end: EndState | undefined;
  /** Why no rest was reached; undefined when every step rested. */
  liveness: string | undefined;
  /** Broken invariants (or liveness details). */
  broken: string[];
  /** Whether the plan's perturbation happened. */
  triggered: boolean;
  /** Why the execution cannot be compared (a workload step failed while the manager was blind). */
  inconclusive?: string;
}

/** One execution of the workload: the reference (no plan) or one plan. */
class Execution<W> {
  private readonly opts: ExploreOptions<W>;
  private readonly plan: Plan | undefined;
  private readonly server: MemoryApiServer | RealApiServer;
  /** The workload's namespaces (a real server's executions watch only theirs). */
  private readonly namespaces: string[];
  private readonly world: W;
  private readonly trace: TraceEntry[] = [];
  private readonly occurrences = new Map<string, number>();
  private readonly writeRefs = new WeakMap<WriteRequest, { signature: string; occurrence: number }>();
  private readonly changes = new Map<string, number>();
  /** Per object, how many of its changes the environment (workload, peers) made. */
  private readonly envChanges = new Map<string, number>();
  private readonly excluded: Set<string>;
  private current: Incarnation | undefined;
  private incarnations = 0;
  private triggered = false;
  /** A stale-restart plan: the lag the next incarnation starts with. */
  private restartLag: { rid: string; atRv: number; standby: boolean } | undefined;
  /** An unobserved plan: the gap is open (its resource held on the current connection). */
  private gapOpen = false;
  /** The resourceVersion of each object's k-th change ("<rid> <key>#<k>"): where a stale view's past is. */
  private readonly changeRvs = new Map<string, number>();
  private readonly peers: Peer[];
  /** Manager writes since the current step began, and how many changed nothing. */
  private stepWrites = 0;
  private stepNoops = 0;

  constructor(opts: ExploreOptions<W>, plan: Plan | undefined, seed: number) {
    this.opts = opts;
    this.plan = plan;
    this.excluded = new Set([...excludedAlways, ...(opts.compare?.exclude ?? []).map(resourceId)]);
    if (opts.cluster) {
      const types = new FakeClient({ ...(opts.crdPaths ? { crdPaths: opts.crdPaths } : {}), ...(opts.resources ? { resources: opts.resources } : {}) }).resourceTypes();
      this.server = new RealApiServer(opts.cluster, types);
    } else {
      this.server = new MemoryApiServer({
        ...(opts.crdPaths ? { crdPaths: opts.crdPaths } : {}), ...(opts.resources ? { resources: opts.resources } : {}), random: mulberry32(seed),
      });
      this.server.beforeDispatch = (c) => this.onChange(c, 'before');
      this.server.afterDispatch = (c) => this.onChange(c, 'after');
    }
    this.namespaces = workloadNamespaces(opts.workload);
    this.server.interceptWrite = (w) => this.onWrite(w);
    this.server.observe = (r) => {
      if (r.kind === 'request' && r.write) {
        const wr = this.writeRefs.get(r.write);
        if (!wr) return;
        this.stepWrites++;
        if (!r.changed) this.stepNoops++;
        this.trace.push({
          kind: 'write', incarnation: incarnationOf(r.connection), signature: wr.signature, occurrence: wr.occurrence, status: r.status,
          changed: r.changed ?? false, method: r.method, resource: r.write.rid, subresource: r.write.subresource, action: r.action ?? 'apply',
        });
      } else if (r.kind === 'deliver') {
        this.trace.push({ kind: 'deliver', incarnation: incarnationOf(r.connection), resource: r.rid, type: r.type, key: r.key, rv: r.rv });
      } else if (r.kind === 'relist-forced') {
        this.trace.push({ kind: 'perturb', what: `manager-${incarnationOf(r.connection)}'s watches of ${r.rid} end with 410 Gone: it relists` });
      }
    };
    this.world = (opts.world?.({ write: (signature, apply, faults) => this.worldWrite(signature, apply, faults) }) ?? undefined) as W;
    this.peers = [...(opts.garbageCollector === false ? [] : [garbageCollector(this.server)]), ...(opts.peers ?? [])];
  }

  async run(): Promise<ExecutionResult> {
    let liveness: string | undefined;
    let stepError: string | undefined;
    let inconclusive: string | undefined;
    const broken: string[] = [];
    try {
      if (this.server instanceof RealApiServer) await this.server.prepare(this.namespaces);
      this.current = await this.start();
      const steps = [...this.opts.workload];
      if (steps.at(-1)?.op !== 'settle') steps.push({ op: 'settle' });
      for (const [index, step] of steps.entries()) {
        this.trace.push({ kind: 'step', index, step: describeStep(step) });
        if (step.op === 'settle') {
          const outcome = await this.settle(index === steps.length - 1);
          if (this.server.unsupported) throw new Error(`explore: a request the in-memory API server cannot model: ${this.server.unsupported.message}`, { cause: this.server.unsupported });
          this.trace.push({ kind: 'rest', step: index, outcome: outcome ?? 'fixpoint' });
          if (outcome) {
            liveness = `step ${index} (after "${describeStep(steps[index - 1] ?? step)}"): ${outcome}`;
            break;
          }
        } else {
          if (step.op === 'run' && this.gapOpen) {
            // A `run` step may touch what the controllers made (a user writing into a volume): it must not see the
            // world of a blind manager. The gap ends here, and the manager rests again, first.
            this.closeGap('a run step follows');
            const outcome = await this.settle(false);
            if (outcome) {
              liveness = `step ${index} (before "${describeStep(step)}"): ${outcome}`;
              break;
            }
          }
          try {
            await this.apply(step);
          } catch (err) {
            // The reference ran this step; here the state it needs is not there (e.g. an object the controller should
            // have made by the last rest): a difference from the reference at that rest — unless the manager was
            // blind to the resource then (an unobserved plan's gap spans rests): the workload itself relied on the
            // manager's reaction to what it could not see, and the execution says nothing.
            stepError = `step ${index} "${describeStep(step)}" failed: ${err instanceof Error ? err.message : String(err)}`;
            if (this.gapOpen) inconclusive = stepError;
            this.trace.push({ kind: 'perturb', what: stepError });
            break;
          }
        }
      }
    } finally {
      await this.stop(this.current);
    }
    try {
      return await this.conclude(liveness, stepError, inconclusive, broken);
    } finally {
      await this.server.close();
    }
  }

  private async conclude(liveness: string | undefined, stepError: string | undefined, inconclusive: string | undefined, broken: string[]): Promise<ExecutionResult> {
    if (stepError && this.plan === undefined) throw new Error(`explore: the workload fails without any perturbation: ${stepError}`);
    const triggered = this.plan === undefined || this.triggered;
    if (inconclusive) return { trace: this.trace, end: undefined, liveness: undefined, broken, triggered, inconclusive };
    if (stepError) broken.push(stepError);
    if (liveness) return { trace: this.trace, end: undefined, liveness, broken, triggered };
    const objects: KubeObject[] = [];
    const byType = new Map<string, KubeObject[]>();
    for (const t of this.server.resourceTypes()) {
      const os = await this.server.objects(t);
      byType.set(resourceId(t), os);
      if (!this.excluded.has(resourceId(t))) objects.push(...os);
    }
    const end = normalize(objects, this.opts.externalState?.(this.world), this.opts.compare?.ignore ?? []);
    const view: ExploreEndState<W> = { objects: <T extends KubeObject>(t: ResourceType) => structuredClone(byType.get(resourceId(t)) ?? []) as T[], world: this.world };
    for (const inv of this.opts.invariants ?? []) {
      let verdict: boolean | string | undefined | void;
      try {
        verdict = inv.check(view);
      } catch (err) {
        verdict = `threw ${err instanceof Error ? err.message : String(err)}`;
      }
      if (verdict === false) broken.push(inv.name);
      else if (typeof verdict === 'string') broken.push(`${inv.name}: ${verdict}`);
    }
    return { trace: this.trace, end, liveness: undefined, broken, triggered };
  }

  /** A workload step against the store (never intercepted). */
  private async apply(step: Exclude<Step, { op: 'settle' }>): Promise<void> {
    const store = this.server.clientAs('workload');
    const pathOf = (o: { apiVersion?: string | undefined; kind?: string | undefined; metadata?: { namespace?: string | undefined; name?: string | undefined } | undefined }): string => {
      const t = this.server.typeOf({ apiVersion: o.apiVersion, kind: o.kind });
      return objectPath(t, t.namespaced ? (o.metadata?.namespace ?? '') : undefined, o.metadata?.name ?? '');
    };
    switch (step.op) {
      case 'create': {
        const t = this.server.typeOf(step.object);
        await store.json('POST', collectionPath(t, t.namespaced ? (step.object.metadata?.namespace ?? '') : undefined), { body: step.object });
        return;
      }
      case 'patch':
        await store.json('PATCH', `${pathOf(step.target)}${step.status ? '/status' : ''}`, { body: step.patch, contentType: 'application/merge-patch+json' });
        return;
      case 'delete':
        await store.json('DELETE', pathOf(step.target));
        return;
      case 'run':
        await step.fn(store, this.world);
        return;
    }
  }

  private onWrite(w: WriteRequest): WriteAction {
    if (this.excluded.has(w.rid) && !(this.opts.plans?.events && w.rid === resourceId(coreResources.events))) return 'apply';
    // An Event's name is its object's plus a time-based suffix: by its object (the k-th Event write about it).
    const name = w.rid === resourceId(coreResources.events) ? w.name.replace(/\.[0-9a-z]+$/, '.*') : w.name;
    const signature = writeSignature(w.method, w.rid, w.subresource, w.namespace, name);
    const occurrence = (this.occurrences.get(signature) ?? 0) + 1;
    this.occurrences.set(signature, occurrence);
    this.writeRefs.set(w, { signature, occurrence });
    const p = this.plan;
    if (!p || p.kind === 'unobserved' || this.triggered || p.write.signature !== signature || p.write.occurrence !== occurrence) return 'apply';
    this.triggered = true;
    const conn = this.current?.conn;
    switch (p.kind) {
      case 'crash':
        this.trace.push({ kind: 'perturb', what: `crash ${p.when} ${signature} #${occurrence}` });
        return p.when === 'before' ? 'crash-before' : 'crash-after';
      case 'fault':
        this.trace.push({ kind: 'perturb', what: `${p.fault} on ${signature} #${occurrence}` });
        return p.fault;
      case 'stale':
        this.trace.push({ kind: 'perturb', what: `${p.resource} lags from ${signature} #${occurrence}${p.standby ? ' (after a restart, as a standby that listed it in the past)' : p.restart ? ' (after a restart)' : ''}` });
        if (p.restart) {
          const past = p.viewAt && this.changeRvs.get(`${p.viewAt.resource} ${p.viewAt.key}#${p.viewAt.change}`);
          this.restartLag = { rid: p.resource, atRv: past ? past - 1 : this.server.rv, standby: p.standby === true };
          return 'crash-after';
        }
        conn?.lag(p.resource, this.server.rv);
        return 'apply';
    }
  }

  /** A world's write (WorldPoints.write): counted, traced and perturbed like the managers' writes. */
  private worldWrite<T>(name: string, apply: () => T, faults: { error?: () => Error; timeout?: () => Error } = {}): T {
    const signature = `EXTERNAL ${name}`;
    const occurrence = (this.occurrences.get(signature) ?? 0) + 1;
    this.occurrences.set(signature, occurrence);
    const inc = this.current;
    const p = this.plan;
    const hit = p && (p.kind === 'crash' || p.kind === 'fault') && !this.triggered && p.write.signature === signature && p.write.occurrence === occurrence;
    const action: WriteAction = !hit ? 'apply' : p.kind === 'crash' ? (p.when === 'before' ? 'crash-before' : 'crash-after') : p.fault;
    if (hit) {
      this.triggered = true;
      this.trace.push({ kind: 'perturb', what: `${action} on ${signature} #${occurrence}` });
    }
    const record = (status: number | 'reset' | 'timeout', changed: boolean): void => {
      this.stepWrites++;
      this.trace.push({
        kind: 'write', incarnation: inc?.n ?? 0, signature, occurrence, status, changed, method: 'EXTERNAL', resource: 'external', subresource: undefined, action,
      });
    };
    const crash = (): Error => {
      inc?.conn.kill();
      return new Error(`explore: the manager crashed ${action === 'crash-before' ? 'before' : 'after'} ${signature}`);
    };
    if (action === 'crash-before') {
      record('reset', false);
      throw crash();
    }
    let result: T;
    try {
      result = apply();
    } catch (err) {
      record(500, false);
      throw err;
    }
    if (action === 'crash-after') {
      record('reset', true);
      throw crash();
    }
    if (action === 'error-after') {
      record(500, true);
      throw faults.error?.() ?? new Error(`explore: ${signature} failed after it was applied (injected)`);
    }
    if (action === 'timeout-after') {
      record('timeout', true);
      throw faults.timeout?.() ?? new DOMException(`explore: ${signature} timed out after it was applied (injected)`, 'TimeoutError');
    }
    record(200, true);
    return result;
  }

  private onChange(c: StoreChange, phase: 'before' | 'after'): void {
    const id = `${c.rid} ${c.key}`;
    const env = !c.by.startsWith('manager-');
    if (phase === 'before') {
      const n = (this.changes.get(id) ?? 0) + 1;
      this.changes.set(id, n);
      this.changeRvs.set(`${id}#${n}`, c.rv);
      const e = env ? (this.envChanges.get(id) ?? 0) + 1 : undefined;
      if (e !== undefined) this.envChanges.set(id, e);
      this.trace.push({ kind: 'change', rv: c.rv, type: c.type, resource: c.rid, key: c.key, change: n, by: c.by, ...(e !== undefined ? { envChange: e } : {}) });
    }
    const p = this.plan;
    if (p?.kind !== 'unobserved' || p.resource !== c.rid || p.key !== c.key || !env) return;
    const n = this.envChanges.get(id) ?? 0;
    if (phase === 'before' && n === p.from && !this.triggered) {
      this.triggered = true;
      this.gapOpen = true;
      this.trace.push({ kind: 'perturb', what: `${c.rid} held from ${c.key}'s change ${n}` });
      this.current?.conn.lag(c.rid);
    } else if (phase === 'after' && n === p.to && this.gapOpen) {
      this.gapOpen = false;
      this.trace.push({ kind: 'perturb', what: `${c.key}'s change ${n} made: the held watches of ${c.rid} end with 410` });
      this.current?.conn.expire(c.rid);
    }
  }

  /** Starts a manager on a new connection (with the pending restart lag) and waits until its controllers run. */
  private async start(): Promise<Incarnation> {
    const n = ++this.incarnations;
    const conn = this.server.connect(`manager-${n}`);
    if (this.restartLag) {
      conn.lag(this.restartLag.rid, this.restartLag.atRv, this.restartLag.standby);
      this.restartLag = undefined;
    }
    const mgr = new ControllerManager({
      gracefulShutdownTimeoutMs: 2_000, cacheSyncTimeoutMs: 30_000,
      reflector: { config: { backoffInitialMs: 10, backoffMaxMs: 100, backoffJitter: 0 } },
      webhook: { bindAddress: '0' },
      ...this.opts.managerOptions,
      ...(this.server instanceof RealApiServer ? { namespaces: this.namespaces.map((ns) => (this.server as RealApiServer).ns(ns)) } : {}),
      transport: conn, registry: new Registry(), logger: this.opts.logger ?? silentLogger, identity: `explore-${n}`,
      observeReconciles: (e) => this.trace.push({ kind: 'reconcile', incarnation: n, controller: e.controller, key: e.key, outcome: outcomeOf(e) }),
    });
    await this.opts.setup(mgr, this.world);
    const ac = new AbortController();
    // A crash: the process is gone — its queued Events with it (no retrying them against a dead connection).
    conn.onKill = () => {
      const crash = new Error('explore: crash');
      mgr.events.abandon(crash);
      ac.abort(crash);
    };
    let exit: number | undefined;
    const exited = mgr.start(ac.signal).then((code) => (exit = code));
    this.trace.push({ kind: 'start', incarnation: n });
    const deadline = performance.now() + 30_000;
    while (!mgr.controllersStarted()) {
      if (exit !== undefined) throw new Error(`explore: the manager stopped (exit ${exit}) before its controllers started: ${mgr.failure()?.message ?? 'no failure recorded'}`);
      if (performance.now() > deadline) throw new Error('explore: the controllers did not start within 30 s (a CRD missing from crdPaths?)');
      await new Promise((r) => setTimeout(r, 1));
    }
    return { n, mgr, conn, ac, exited };
  }

  /** Ends an open unobserved gap: the held watches end with 410 and the informer relists. */
  private closeGap(why: string): void {
    if (!this.gapOpen || this.plan?.kind !== 'unobserved') return;
    this.gapOpen = false;
    this.trace.push({ kind: 'perturb', what: `${why}: the held watches of ${this.plan.resource} end with 410` });
    this.current?.conn.expire(this.plan.resource);
  }

  /** Runs every peer once; true when one of them changed the store. */
  private async runPeers(): Promise<boolean> {
    let changed = false;
    for (const peer of this.peers) {
      const before = this.server.rv;
      await peer.act(this.server.clientAs(`peer:${peer.name}`));
      const wrote = this.server.rv - before;
      if (wrote > 0) {
        changed = true;
        this.trace.push({ kind: 'peer', name: peer.name, wrote });
      }
    }
    return changed;
  }

  private async stop(inc: Incarnation | undefined): Promise<void> {
    if (!inc) return;
    // Events still queued are not written (they are never compared; a retry of one would hold the stop for seconds).
    inc.mgr.events.abandon(new Error('explore: stop'));
    inc.ac.abort(new Error('explore: stop'));
    await inc.exited;
    inc.conn.kill();
  }

  /**
   * Waits until the current manager is at rest (see the file comment), restarting it after a crash and ending a
   * lag or gap once it rests with one (lagEndsAtRest: within maxLagRests rests even while peers act); resolves
   * undefined at rest, or why not.
   */
  private async settle(final: boolean): Promise<string | undefined> {
    const horizon = this.opts.horizonMs ?? 1_000;
    const maxWrites = this.opts.maxWritesPerStep ?? 300;
    const deadline = performance.now() + (this.opts.stepTimeoutMs ?? 15_000);
    this.stepWrites = 0;
    this.stepNoops = 0;
    let idle = 0;
    /** Rests since the open lag began (lagEndsAtRest). */
    let lagRests = 0;
    let seen = -1;
    let lastActivity = performance.now();
    for (;;) {
      const inc = this.current;
      if (!inc) throw new Error('explore: no manager');
      if (inc.conn.killed) {
        this.trace.push({ kind: 'crash', incarnation: inc.n, at: 'its connection was killed' });
        await this.stop(inc);
        this.current = await this.start();
        idle = 0;
        continue;
      }
      if (this.stepWrites > maxWrites || performance.now() > deadline) {
        const noops = this.stepNoops;
        return this.stepWrites > maxWrites && noops > this.stepWrites * 0.8
          ? `hot loop: ${this.stepWrites} writes without rest, ${noops} of them changed nothing`
          : `no fixpoint: ${this.stepWrites} writes ${this.stepWrites > maxWrites ? `(> ${maxWrites})` : `in ${this.opts.stepTimeoutMs ?? 15_000} ms`} without rest`;
      }
      let busy = this.server.activity !== seen || inc.conn.unread();
      if (this.server.activity !== seen) lastActivity = performance.now();
      seen = this.server.activity;
      if (performance.now() - lastActivity < this.server.quietMs) busy = true;
      // An informer relisting or backing off (after a 410, a reset) will change the cache: not at rest.
      if (inc.mgr.factory.informers().some((i) => i.isStarted() && !i.isWatching())) busy = true;
      let due = Infinity;
      for (const c of inc.mgr.controllers()) {
        if (c.queue.len() > 0 || c.inFlight() > 0) busy = true;
        const next = c.queue.nextReadyInMs();
        if (next !== undefined && next <= horizon) due = Math.min(due, next);
      }
      if (busy) idle = 0;
      else if (due !== Infinity) {
        idle = 0;
        // Only delayed work left (a backoff after a 409 against the lagging cache): the manager has acted on its stale
        // view; a lag ends now instead of after every backoff (an unobserved gap keeps its own end).
        if (inc.conn.lagging().length > 0 && !(this.plan?.kind === 'unobserved' && this.gapOpen)) {
          for (const rid of inc.conn.lagging()) {
            this.trace.push({ kind: 'perturb', what: `only delayed work left with ${rid} lagging: it catches up` });
            inc.conn.release(rid);
          }
          lagRests = 0;
          continue;
        }
        await new Promise((r) => setTimeout(r, due + 1));
        continue;
      } else if (++idle >= 8) {
        // At rest. Peers act on what is stored; a lag still open ends (the manager catches up) and so does an
        // unobserved gap in the last settle (before it, the gap stays open while the workload goes on).
        // A lag ends by lagEndsAtRest: at a rest where no peer acted, or at its maxLagRests-th rest regardless.
        const peersChanged = await this.runPeers();
        const held = this.plan?.kind === 'unobserved' && this.gapOpen && !final;
        const lagged = !held && inc.conn.lagging().length > 0;
        if (lagged ? !lagEndsAtRest(++lagRests, peersChanged) : peersChanged) {
          idle = 0;
          continue;
        }
        if (!lagged) return undefined;
        for (const rid of inc.conn.lagging()) {
          if (this.plan?.kind === 'unobserved' && this.gapOpen) this.closeGap('the last rest');
          else {
            this.trace.push({ kind: 'perturb', what: peersChanged
              ? `at rest ${lagRests} with ${rid} lagging, peers still acting: it catches up (at most ${maxLagRests} rests)`
              : `at rest with ${rid} lagging: it catches up` });
            inc.conn.release(rid);
          }
        }
        lagRests = 0;
        idle = 0;
        continue;
      }
      await new Promise((r) => setImmediate(r));
    }
  }
}

/**
 * The garbage collector of kube-controller-manager, as a peer: deletes every object whose ownerReferences all name
 * objects that no longer exist (background propagation; objects without ownerReferences are never touched).
 */
function garbageCollector(server: MemoryApiServer | RealApiServer): Peer {
  return {
    name: 'garbage-collector',
    act: async (client) => {
      const all: { t: ResourceType; o: KubeObject }[] = [];
      for (const t of server.resourceTypes()) for (const o of await server.objects(t)) all.push({ t, o });
      const uids = new Set(all.map(({ o }) => o.metadata?.uid));
      for (const { t, o } of all) {
        const refs = o.metadata?.ownerReferences ?? [];
        if (refs.length === 0 || refs.some((r) => uids.has(r.uid)) || o.metadata?.deletionTimestamp) continue;
        await client.json('DELETE', objectPath(t, t.namespaced ? (o.metadata?.namespace ?? '') : undefined, o.metadata?.name ?? ''),
          { body: { preconditions: { uid: o.metadata?.uid } } }).catch(() => undefined);
      }
    },
  };
}

/** Every namespace the workload names (Namespaces it creates, and the namespaces of the objects it touches). */
function workloadNamespaces(steps: readonly Step[]): string[] {
  const out = new Set<string>();
  for (const s of steps) {
    const o = s.op === 'create' ? s.object : s.op === 'patch' || s.op === 'delete' ? s.target : undefined;
    if (!o) continue;
    if (o.kind === 'Namespace' && o.metadata?.name) out.add(o.metadata.name);
    else if (o.metadata?.namespace) out.add(o.metadata.namespace);
  }
  return [...out];
}

/** A reconcile's outcome in words (the trace). */
function outcomeOf(e: ReconcileObservation): string {
  if (e.error !== undefined) return `error: ${e.error instanceof Error ? e.error.message : JSON.stringify(e.error)}`.slice(0, 200);
  if (e.result?.requeueAfter) return `requeue after ${e.result.requeueAfter} ms`;
  if (e.result?.requeue) return 'requeue';
  return 'done';
}

function incarnationOf(connection: string): number {
  return Number(connection.replace(/^manager-/, '')) || 0;
}

/** A small seeded PRNG (mulberry32): [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
