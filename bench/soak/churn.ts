/**
 * The endurance bench's load: a continuous, open-loop stream of creates, updates and deletes of Foos, Networks and
 * Deployments (plain ones, not a Foo's) at `rate` changes per second, spread over the bench's namespaces.
 *
 *  - What exists comes from the bench's own informers (label `soak=churn`): objects being deleted (a Network waiting
 *    for its finalizer) are neither counted nor touched.
 *  - Each change picks a kind by `weights`, then an operation that keeps the kind's population near its target
 *    (`chooseOp`): below 80 % mostly creates, above 120 % mostly deletes, in between 25 % creates, 50 % updates and
 *    25 % deletes.
 *  - Every change is one the API server accepts while it answers: a Foo's replicas stay within its CRD's bounds
 *    (1–3; `minimum: 1` — replicas 0 was refused as Invalid, a third of the Foo writes of the runs before 28 Nov 2026
 *    16:00 UTC); a Network's gateway-only patch carries its CIDR (raced by an in-flight CIDR move it was refused:
 *    gateway outside cidr). Failures are counted by answer (`failures`: "503 ServiceUnavailable", "no answer
 *    (connection)", …).
 *  - Updates are merge patches without a resourceVersion (never refused with 409): a Foo's replicas (1–3) or, one time
 *    in ten, only an annotation (metadata-only: no new generation); a Deployment's replicas (scale only) or its Pod
 *    template's annotation (a rollout); a Network's gateway, or its CIDR moved to a new /24 (the subnet replaced).
 *  - Open loop: changes are due at t0 + i / rate whatever the answers; at most `maxInFlight` are in flight, and a
 *    change that finds none free is skipped and counted (`skipped`): the API server's slowness shows as a lower
 *    achieved rate, never as a backlog that bursts later. A change that fails (API server down) is counted, not retried.
 *
 * `pause()` stops issuing and resolves once nothing is in flight (the checkpoints); `resume()` goes on at the rate
 * from then, without making up for the pause.
 */
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { collectionPath, objectPath } from '../../pkg/apimachinery/paths.ts';
import type { ResourceType } from '../../pkg/apimachinery/resource.ts';
import { ApiError } from '../../pkg/client/errors.ts';
import { isConnectionFailure } from '../../pkg/client/reachability.ts';
import type { RestClient } from '../../pkg/client/rest.ts';
import { deploymentResource } from '../../pkg/controllers/deployment/types.ts';
import { fooResource } from '../../pkg/controllers/foo/desired.ts';
import { networkResource } from '../../pkg/controllers/network/desired.ts';
import type { SharedInformerFactory } from '../../pkg/informerfactory/factory.ts';
import type { SharedIndexInformer } from '../../pkg/informerfactory/sharedinformer.ts';

export type Kind = 'foo' | 'deployment' | 'network';
export type Op = 'create' | 'update' | 'delete';
export const KINDS: readonly Kind[] = ['foo', 'deployment', 'network'];
export const CHURN_LABEL = 'soak';

export const resources: Record<Kind, ResourceType> = { foo: fooResource, deployment: deploymentResource, network: networkResource };

/** The operation that keeps a population of `n` near `target` (`r` uniform in [0, 1)). */
export function chooseOp(n: number, target: number, r: number): Op {
  if (n < 0.8 * target) return r < 0.8 ? 'create' : 'update';
  if (n > 1.2 * target) return r < 0.8 ? 'delete' : 'update';
  if (n === 0) return 'create';
  return r < 0.25 ? 'create' : r < 0.75 ? 'update' : 'delete';
}

/** A Foo's replicas (`r` uniform in [0, 1)): 1–3, within the Foo CRD's `minimum: 1`; an update moves to another value. */
export function fooReplicas(r: number, current?: number): number {
  if (current === undefined || current < 1 || current > 3) return 1 + Math.floor(r * 3);
  return ((current + Math.floor(r * 2)) % 3) + 1;
}

/** `10.<a>.<b>.0/24` for the i-th CIDR the churn hands out (65 536 distinct, then they repeat). */
export function nthCidr(i: number): { cidr: string; gateway: string; alt: string } {
  const a = (i >> 8) & 255;
  const b = i & 255;
  return { cidr: `10.${a}.${b}.0/24`, gateway: `10.${a}.${b}.1`, alt: `10.${a}.${b}.254` };
}

export interface ChurnOptions {
  rest: RestClient;
  factory: SharedInformerFactory;
  namespaces: readonly string[];
  /** Changes per second. */
  rate: number;
  targets: Record<Kind, number>;
  weights: Record<Kind, number>;
  maxInFlight?: number;
  random?: () => number;
}

/** Counts per `kind op`: answered 2xx, failed (any error), skipped (no request slot free). */
export interface ChurnCounts { ok: number; failed: number }

export class Churn {
  readonly counts = new Map<string, ChurnCounts>();
  /** Failed changes by answer: "<HTTP status> <reason>", or "no answer (connection)"; all kinds and ops. */
  readonly failures = new Map<string, number>();
  skipped = 0;
  private readonly opts: ChurnOptions;
  private readonly informers: Record<Kind, SharedIndexInformer<KubeObject>>;
  private readonly random: () => number;
  private readonly maxInFlight: number;
  private inFlight = 0;
  private seq = 0;
  private cidrSeq = 0;
  private paused = false;
  private idle: (() => void) | undefined;
  /** Issuing-time accounting (open loop): changes due since `t0`. */
  private t0 = 0;
  private due = 0;

  constructor(opts: ChurnOptions) {
    this.opts = opts;
    this.random = opts.random ?? Math.random;
    this.maxInFlight = opts.maxInFlight ?? 32;
    const selector = `${CHURN_LABEL}=churn`;
    this.informers = {
      foo: opts.factory.informerFor(fooResource, { labelSelector: selector }),
      deployment: opts.factory.informerFor(deploymentResource, { labelSelector: selector }),
      network: opts.factory.informerFor(networkResource, { labelSelector: selector }),
    };
  }

  /** Live objects of a kind (being-deleted ones left out). */
  live(kind: Kind): KubeObject[] {
    return this.informers[kind].lister().list().filter((o) => !o.metadata?.deletionTimestamp);
  }

  /** Changes answered so far (2xx), all kinds and ops. */
  get done(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c.ok;
    return n;
  }

  /** Issues changes at the rate until `signal` aborts (the informers must run and have synced). */
  async run(signal: AbortSignal): Promise<void> {
    this.t0 = performance.now();
    this.due = 0;
    while (!signal.aborted) {
      await new Promise((r) => setTimeout(r, 20));
      if (this.paused) continue;
      const want = Math.floor(((performance.now() - this.t0) / 1000) * this.opts.rate);
      for (; this.due < want; this.due++) {
        if (this.inFlight >= this.maxInFlight) {
          this.skipped++;
          continue;
        }
        this.inFlight++;
        void this.change().finally(() => {
          this.inFlight--;
          if (this.inFlight === 0) this.idle?.();
        });
      }
    }
    await this.pause();
  }

  /** Stops issuing; resolves once no change is in flight. */
  async pause(): Promise<void> {
    this.paused = true;
    if (this.inFlight > 0) await new Promise<void>((r) => (this.idle = r));
    this.idle = undefined;
  }

  /** Issues again from now on, at the rate (the pause is not made up for). */
  resume(): void {
    this.t0 = performance.now();
    this.due = 0;
    this.paused = false;
  }

  private pick<T>(xs: readonly T[]): T | undefined {
    return xs[Math.floor(this.random() * xs.length)];
  }

  private kind(): Kind {
    const total = KINDS.reduce((s, k) => s + this.opts.weights[k], 0);
    let r = this.random() * total;
    for (const k of KINDS) {
      r -= this.opts.weights[k];
      if (r < 0) return k;
    }
    return 'foo';
  }

  private async change(): Promise<void> {
    const kind = this.kind();
    const live = this.live(kind);
    const op = chooseOp(live.length, this.opts.targets[kind], this.random());
    const key = `${kind} ${op}`;
    const c = this.counts.get(key) ?? { ok: 0, failed: 0 };
    this.counts.set(key, c);
    try {
      const target = op === 'create' ? undefined : this.pick(live);
      if (!target) await this.create(kind);
      else if (op === 'update') await this.update(kind, target);
      else await this.delete(kind, target);
      c.ok++;
    } catch (err) {
      c.failed++;
      const why = err instanceof ApiError && err.status !== 0 ? `${err.status} ${err.reason}` : isConnectionFailure(err) ? 'no answer (connection)' : `error ${(err as Error).name}`;
      this.failures.set(why, (this.failures.get(why) ?? 0) + 1);
    }
  }

  private async create(kind: Kind): Promise<void> {
    const ns = this.pick(this.opts.namespaces) ?? 'default';
    const name = `${kind[0]}-${(this.seq++).toString(36)}`;
    const metadata = { name, labels: { [CHURN_LABEL]: 'churn' } };
    const replicas = Math.floor(this.random() * 3);
    let body: KubeObject;
    if (kind === 'foo') {
      body = { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata, spec: { deploymentName: name, replicas: fooReplicas(this.random()) } } as KubeObject;
    } else if (kind === 'deployment') {
      body = deployment(name, metadata, replicas);
    } else {
      const { cidr, gateway } = nthCidr(this.cidrSeq++);
      body = { apiVersion: 'samplecrd.k8s.io/v1', kind: 'Network', metadata, spec: { cidr, gateway } } as KubeObject;
    }
    await this.opts.rest.json('POST', collectionPath(resources[kind], ns), { body });
  }

  private async update(kind: Kind, o: KubeObject): Promise<void> {
    const spec = (o as { spec?: Record<string, unknown> }).spec ?? {};
    let patch: unknown;
    if (kind === 'foo') {
      patch = this.random() < 0.1
        ? { metadata: { annotations: { 'soak/touched': String(this.seq++) } } }
        : { spec: { replicas: fooReplicas(this.random(), Number(spec['replicas'])) } };
    } else if (kind === 'deployment') {
      patch = this.random() < 0.6
        ? { spec: { replicas: ((Number(spec['replicas'] ?? 0) + 1 + Math.floor(this.random() * 2)) % 3) } }
        : { spec: { template: { metadata: { annotations: { 'soak/rev': String(this.seq++) } } } } };
    } else if (this.random() < 0.5) {
      const cidr = typeof spec['cidr'] === 'string' ? spec['cidr'] : '';
      const base = cidr.replace(/\.0\/24$/, '');
      // With its CIDR: a gateway-only patch raced by an in-flight CIDR move was refused (gateway outside cidr).
      patch = { spec: { cidr, gateway: spec['gateway'] === `${base}.1` ? `${base}.254` : `${base}.1` } };
    } else {
      const { cidr, gateway } = nthCidr(this.cidrSeq++);
      patch = { spec: { cidr, gateway } };
    }
    await this.opts.rest.json('PATCH', objectPath(resources[kind], o.metadata?.namespace ?? '', o.metadata?.name ?? ''), {
      body: patch, contentType: 'application/merge-patch+json',
    });
  }

  private async delete(kind: Kind, o: KubeObject): Promise<void> {
    await this.opts.rest.json('DELETE', objectPath(resources[kind], o.metadata?.namespace ?? '', o.metadata?.name ?? ''));
  }
}

/** A plain Deployment of `replicas` nginx Pods (kwok runs them). */
export function deployment(name: string, metadata: Record<string, unknown>, replicas: number): KubeObject {
  return {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata,
    spec: {
      replicas, selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] } },
    },
  } as KubeObject;
}
