/**
 * Leadership chaos that DELAYS instead of drops (issue 23, Deliver 2): a write an old leader sent before it lost the
 * Lease can land after the next leader acted — a request stuck in a congested path, a proxy or a kernel buffer. No
 * Kubernetes client can stop that (there are no fencing tokens); what must hold is that such a write is harmless.
 *
 * Two manager replicas with leader election (lease 3 s / renew 2 s / retry 0.5 s) on a private minimal control plane
 * whose kube-apiserver writes a RequestResponse-level audit log of every write to Foos, Deployments and the Lease.
 * Each round, while the leader works:
 *  1. its traffic to the API server is HELD: kind `delay` — a TCP proxy keeps every byte the leader sends (answers
 *     still flow, so it keeps seeing changes); kind `reorder` — a TLS-terminating proxy keeps every write request
 *     (reads pass). Its Lease renewals are held too, so it loses the Lease and exits;
 *  2. meanwhile the test changes the world twice: a Foo's spec.replicas (v1, then v2 once the leader has logged that
 *     it is correcting its Deployment to v1), a Deployment's status (what the Foo status mirrors: s1, then s2), and a
 *     new Foo — so the leader has a Deployment replica patch to v1, a Foo status patch to s1 and a Deployment create in
 *     flight when it is cut off;
 *  3. the standby takes over and converges (v2, s2, the new Foo's Deployment);
 *  4. then, longer than the lease duration after the hold began, the held bytes are DELIVERED (`delay`: in the order
 *     sent; `reorder`: newest write first, each to its answer before the next) and land at the API server.
 * From the audit log alone: no write of an old leader that was received after the next leader's term began (its
 * first successful Lease write) changed an object — each was refused (409/412 or another error) or was a no-op
 * (answered with the resourceVersion the object already had; `changedObject` in helpers/audit.ts); Events are
 * append-only and cannot be fenced, so late Event writes are counted and reported, not judged. The two fenced writes
 * the rounds are built around are judged by name, per fault kind: every late Deployment replica patch and every late
 * Foo status patch of an old leader was refused with 409 Conflict (its resourceVersion precondition; a 200, even a
 * no-op, fails), and each fault kind delivered at least CHAOS_DELAY_ROUNDS of each (default 10): a round counts only
 * when both a late replica patch and a late status patch of its old leader landed. Every Foo's Deployment saw exactly
 * one create attempt that succeeded (the 409 attempts are reported). With CI set, CHAOS_DELAY_ROUNDS below the default
 * is refused; without CI it may be scaled down (not below 1), and the test says so.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { expectStatus, waitFor } from './helpers/cluster.ts';
import { auditedControlPlane, leaderElectionArgs, writeManagerLog } from './helpers/auditedcluster.ts';
import { prepareControlPlane } from './helpers/crds.ts';
import { changedObject, identityOf, leadershipTerms, micros, objectKey, readAuditLog, succeeded, type AuditEvent } from './helpers/audit.ts';
import { ManagerProcess } from './helpers/managerprocess.ts';
import { HoldingApiProxy } from './helpers/proxies.ts';
import { proxiedServer, TcpProxy } from './helpers/tcpproxy.ts';

const leaseMs = 3_000;
const renewMs = 2_000;
const retryMs = 500;
/** Rounds per fault kind in which late writes landed (`make test`: 10 + 10; more with CHAOS_DELAY_ROUNDS). */
const defaultPerKind = 10;
const perKind = Number(process.env['CHAOS_DELAY_ROUNDS'] ?? defaultPerKind);
const scaledDown = perKind < defaultPerKind ? ` — SCALED DOWN from ${defaultPerKind} by CHAOS_DELAY_ROUNDS` : '';

/** The two fenced writes the rounds put in flight, as the audit log shows them. */
type WriteKind = 'Deployment replica patch' | 'Foo status patch';
const writeKinds: readonly WriteKind[] = ['Deployment replica patch', 'Foo status patch'];
function writeKindOf(e: AuditEvent): WriteKind | undefined {
  if (e.verb !== 'patch') return undefined;
  const ref = e.objectRef;
  const body = e.requestObject as { spec?: { replicas?: unknown } } | undefined;
  if (ref?.resource === 'deployments' && !ref.subresource && body?.spec?.replicas !== undefined) return 'Deployment replica patch';
  if (ref?.resource === 'foos' && ref.subresource === 'status') return 'Foo status patch';
  return undefined;
}
const ns = 'delay';
const leaseName = 'delay-leader';
const initialFoos = 4;
const foosPath = `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos`;
const depsPath = `/apis/apps/v1/namespaces/${ns}/deployments`;
const merge = { 'content-type': 'application/merge-patch+json' };

type Kind = 'delay' | 'reorder';

interface Replica {
  mgr: ManagerProcess;
  kind: Kind;
  tcp?: TcpProxy;
  http?: HoldingApiProxy;
  identity: string;
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - {group: "apps", resources: ["deployments", "deployments/status"]}
  - {group: "samplecontroller.k8s.io", resources: ["foos", "foos/status"]}
  - {group: "coordination.k8s.io", resources: ["leases"]}
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`;

interface FooObj { metadata: { name: string }; spec: { deploymentName: string; replicas: number }; status?: { availableReplicas?: number } }
interface DepObj { metadata: { name: string }; spec: { replicas: number }; status?: { availableReplicas?: number } }

describe('leadership chaos: delayed and reordered delivery', () => {
  test(`old leaders' writes delivered after the next leader acted change nothing (${perKind} delay + ${perKind} reorder rounds${scaledDown})`, { timeout: 900_000 }, async (t) => {
    assert.ok(Number.isInteger(perKind) && perKind >= 1, `CHAOS_DELAY_ROUNDS must be an integer ≥ 1, got ${JSON.stringify(process.env['CHAOS_DELAY_ROUNDS'])}`);
    assert.ok(!process.env['CI'] || perKind >= defaultPerKind,
      `CHAOS_DELAY_ROUNDS=${perKind} is below the default ${defaultPerKind}: refused with CI set (a scaled-down run does not back the documented numbers)`);
    if (scaledDown) t.diagnostic(`CHAOS_DELAY_ROUNDS=${perKind}: scaled down from ${defaultPerKind} rounds per fault kind`);
    const { cp, dir, auditLog } = await auditedControlPlane(t, { prefix: 'tscm-chaos-delay-', policy: auditPolicy });
    await prepareControlPlane(cp, ns);
    const createFoo = async (name: string): Promise<void> => {
      expectStatus(await cp.request('POST', foosPath, {
        apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name }, spec: { deploymentName: `d-${name}`, replicas: 1 },
      }), 201, `Foo ${name}`);
    };
    for (let i = 0; i < initialFoos; i++) await createFoo(`foo-${i}`);

    const replicas: Replica[] = [];
    t.after(async () => {
      await Promise.all(replicas.map((r) => r.mgr.stop('SIGKILL')));
      await Promise.all(replicas.map(async (r) => { await r.tcp?.close(); await r.http?.close(); }));
      replicas.forEach((r, i) => writeManagerLog(join(dir, `replica-${i}-${r.kind}.log`), r.mgr));
    });
    t.diagnostic(`logs and audit log: ${dir}`);
    const api = new URL(cp.server);
    const kubeconfigText = readFileSync(cp.kubeconfig, 'utf8');
    const { pki } = cp.state;
    let started = 0;
    /** Replicas alternate kinds in start order; leaders follow start order, so round kinds alternate too. */
    const startReplica = async (): Promise<Replica> => {
      const kind: Kind = started++ % 2 === 0 ? 'delay' : 'reorder';
      const kc = JSON.parse(kubeconfigText) as { clusters: { cluster: { server: string } }[] };
      let tcp: TcpProxy | undefined;
      let http: HoldingApiProxy | undefined;
      if (kind === 'delay') {
        tcp = await TcpProxy.start(api.hostname, Number(api.port));
        for (const c of kc.clusters) c.cluster.server = proxiedServer(c.cluster.server, tcp);
      } else {
        // The proxy serves the API server's own certificate (SAN 127.0.0.1, the cluster CA): the kubeconfig keeps its CA.
        http = await HoldingApiProxy.start(cp.server, {
          cert: readFileSync(pki.servingCert, 'utf8'), key: readFileSync(pki.servingKey, 'utf8'),
          upstreamCA: readFileSync(pki.caCert, 'utf8'), upstreamCert: readFileSync(pki.adminCert, 'utf8'), upstreamKey: readFileSync(pki.adminKey, 'utf8'),
        });
        for (const c of kc.clusters) c.cluster.server = http.url;
      }
      const file = join(mkdtempSync(join(dir, 'kc-')), 'kubeconfig');
      writeFileSync(file, JSON.stringify(kc));
      const mgr = await ManagerProcess.start({
        args: [`--kubeconfig=${file}`, '--controllers=foo', '--foo-concurrency=4',
          ...leaderElectionArgs({ namespace: ns, id: leaseName, leaseMs, renewMs, retryMs }), '--graceful-shutdown-timeout=10s'],
        env: { WATCH_NAMESPACE: ns }, metrics: false,
      });
      // Listed at once, so that teardown closes its proxy even when it fails to start.
      const r: Replica = { mgr, kind, identity: '', ...(tcp ? { tcp } : {}), ...(http ? { http } : {}) };
      replicas.push(r);
      r.identity = String((await mgr.waitForLog('startup line', (l) => l.msg === 'starting ts-controller-manager'))['identity']);
      return r;
    };
    const leads = (r: Replica): boolean => r.mgr.running && r.mgr.logs.some((l) => l.msg === 'successfully acquired lease');
    const leaderOf = (): Promise<Replica> => waitFor('exactly one replica leading', () => {
      const leaders = replicas.filter(leads);
      return leaders.length === 1 ? leaders[0] : undefined;
    }, { timeoutMs: 30_000, intervalMs: 50 });

    /** Every Foo has its Deployment with spec.replicas, and mirrors its availableReplicas (checks added per round). */
    const converged = (what: string, extra: (foos: FooObj[], deps: Map<string, DepObj>) => boolean = () => true): Promise<true> =>
      waitFor(what, async () => {
        const foos = expectStatus<{ items: FooObj[] }>(await cp.get(foosPath), 200, 'foos').items;
        const deps = new Map(expectStatus<{ items: DepObj[] }>(await cp.get(depsPath), 200, 'deployments').items.map((d) => [d.metadata.name, d]));
        const ok = foos.every((f) => {
          const d = deps.get(f.spec.deploymentName);
          return d !== undefined && d.spec.replicas === f.spec.replicas && f.status?.availableReplicas === (d.status?.availableReplicas ?? 0);
        });
        return ok && extra(foos, deps) ? true : undefined;
      }, { timeoutMs: 60_000, intervalMs: 100 });
    const setAvailable = async (deployment: string, n: number): Promise<void> => {
      expectStatus(await cp.request('PATCH', `${depsPath}/${deployment}/status`,
        { status: { replicas: n, updatedReplicas: n, readyReplicas: n, availableReplicas: n } }, { headers: merge }), 200, `status of ${deployment}`);
    };

    // The first replica leads the first round: start the second only once it leads.
    await startReplica();
    await leaderOf();
    await startReplica();

    const effective: Record<Kind, number> = { delay: 0, reorder: 0 };
    const summary: string[] = [];
    /** Each delivered round: whose writes were held, when the hold began, when they were delivered. */
    const delivered: { identity: string; kind: Kind; heldAt: number; deliveredAt: number; round: number }[] = [];
    let made = initialFoos;
    for (let round = 0; (effective.delay < perKind || effective.reorder < perKind) && round < 3 * perKind + 10; round++) {
      const leader = await leaderOf();
      const standby = replicas.find((r) => r !== leader && r.mgr.running);
      if (!standby) {
        // A harness precondition, not the property under test: on 2 loaded cores a leader can lose its Lease on its
        // own (renew deadline 2 s) before the round holds it, and the replacement then leads with no standby behind
        // it (seen in a CI run: replica 11 acquired, missed its renew deadline 1.8 s later, replica 12 led alone).
        summary.push(`${round}: no standby (a spontaneous loss before the round): starting one`);
        await startReplica();
        continue;
      }
      await converged(`round ${round}: converged before the fault`);
      if (!leader.mgr.running) {
        summary.push(`${round}: spontaneous loss`);
        await startReplica();
        continue;
      }
      const a = `foo-${round % initialFoos}`;
      const b = `foo-${(round + 1) % initialFoos}`;
      const c = `foo-${made++}`;
      // spec.replicas is at most 10 (the CRD's schema); v1 ≠ v2 always, and v1 differs from the round before on this Foo.
      const v1 = 2 + ((round * 3) % 8);
      const [v2, s1, s2] = [v1 + 1, 50 + 2 * round, 51 + 2 * round];
      const heldAt = Date.now();
      if (leader.kind === 'delay') leader.tcp?.hold();
      else leader.http?.hold();
      // The world changes while the leader is cut off: it derives writes from what it sees and sends them (held).
      expectStatus(await cp.request('PATCH', `${foosPath}/${a}`, { spec: { replicas: v1 } }, { headers: merge }), 200, `Foo ${a}`);
      await setAvailable(`d-${b}`, s1);
      await createFoo(c);
      const inFlight = await waitFor(`round ${round}: the leader corrects d-${a} to ${v1}`, () => {
        if (leader.mgr.logs.some((l) => l.msg === 'Correcting Deployment replicas' && l['deployment'] === `d-${a}` && l['to'] === v1)) return 'sent';
        return leader.mgr.running ? undefined : 'exited';
      }, { timeoutMs: 10_000, intervalMs: 20 });
      // …and changes again: what the leader sent is now stale.
      expectStatus(await cp.request('PATCH', `${foosPath}/${a}`, { spec: { replicas: v2 } }, { headers: merge }), 200, `Foo ${a}`);
      await setAvailable(`d-${b}`, s2);
      const exit = await leader.mgr.exited;
      const replacement = startReplica();
      const next = await leaderOf();
      assert.equal(next, standby, `round ${round}: the standby took over`);
      await converged(`round ${round}: the new leader converged (d-${a} at ${v2}, ${b} at ${s2}, d-${c} created)`, (foos, deps) =>
        deps.get(`d-${a}`)?.spec.replicas === v2 && foos.find((f) => f.metadata.name === b)?.status?.availableReplicas === s2 && deps.has(`d-${c}`));
      // The adversary's definition: held for longer than a lease duration (the standby may take over a little sooner,
      // counted from the renewal it last saw, so convergence alone does not guarantee it).
      await waitFor(`round ${round}: held longer than the lease duration`, () => Date.now() - heldAt > leaseMs, { timeoutMs: leaseMs + 1_000, intervalMs: 20 });
      const deliveredAt = Date.now();
      let what: string;
      if (leader.kind === 'delay') {
        const d = leader.tcp?.deliver() ?? { bytes: 0, connections: 0 };
        what = `${d.bytes} bytes on ${d.connections} connections`;
      } else {
        const d = (await leader.http?.deliver('reverse')) ?? [];
        what = d.map((w) => `${w.method} ${w.path.split('?')[0]?.replace(/^.*\/namespaces\/[^/]+\//, '')} → ${w.code}`).join(', ');
      }
      delivered.push({ identity: leader.identity, kind: leader.kind, heldAt, deliveredAt, round });
      // The round counts when a held Deployment replica patch and a held Foo status patch both landed: the audit log
      // shows them (waited for until both are there, or 15 s; then whatever else landed is reported).
      const landedNow = (): AuditEvent[] => readAuditLog(auditLog).filter((e) => e.stage === 'ResponseComplete' && identityOf(e) === leader.identity
        && e.objectRef?.resource !== 'leases' && micros(e.requestReceivedTimestamp) >= deliveredAt * 1000);
      const both = (late: AuditEvent[]): boolean => writeKinds.every((k) => late.some((e) => writeKindOf(e) === k));
      await waitFor(`round ${round}: the held writes land`, () => both(landedNow()), { timeoutMs: 15_000, intervalMs: 100 }).catch(() => false);
      const landed = landedNow();
      if (both(landed) && inFlight === 'sent') effective[leader.kind]++;
      summary.push(`${round} ${leader.kind}: exit ${JSON.stringify(exit)}, held ${deliveredAt - heldAt} ms, delivered ${what}; landed: ${landed.map((e) => `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''} ${e.objectRef?.name} ${e.responseStatus?.code}`).join(', ') || 'nothing'}`);
      await replacement;
    }
    t.diagnostic(`rounds:\n${summary.join('\n')}`);
    await converged('converged at the end');
    await Promise.all(replicas.filter((r) => r.mgr.running).map((r) => r.mgr.stop('SIGTERM')));

    // --- what the API server saw ---
    const all = readAuditLog(auditLog).filter((e) => e.stage === 'ResponseComplete');
    const ours = all.filter((e) => e.userAgent?.startsWith('ts-controller-manager/'));
    const terms = leadershipTerms(ours, leaseName);
    const late: { e: AuditEvent; lateBy: number }[] = [];
    for (const e of ours) {
      const i = terms.findIndex((x) => x.identity === identityOf(e));
      assert.ok(i >= 0, `a write by ${identityOf(e)}, which never held the Lease: ${JSON.stringify(e)}`);
      const next = terms[i + 1];
      const at = micros(e.requestReceivedTimestamp);
      if (next && at >= next.start) late.push({ e, lateBy: Math.round((at - next.start) / 1000) });
    }
    const explain = ({ e, lateBy }: { e: AuditEvent; lateBy: number }): string =>
      `${identityOf(e)} ${e.verb} ${objectKey(e)}${e.objectRef?.subresource ? ` (${e.objectRef.subresource})` : ''} → ${e.responseStatus?.code}, `
      + `${lateBy} ms into the next term, rv ${e.responseObject?.metadata?.resourceVersion ?? '-'}, request ${JSON.stringify(e.requestObject)}`;
    const lateEvents = late.filter(({ e }) => e.objectRef?.resource === 'events');
    const judged = late.filter(({ e }) => e.objectRef?.resource !== 'events');
    const violations = judged.filter(({ e }) => changedObject(e, all));
    const byCode = new Map<string, number>();
    for (const { e } of judged) {
      const k = `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''} ${e.responseStatus?.code}${succeeded(e) ? (changedObject(e, all) ? ' CHANGED' : ' no-op') : ''}`;
      byCode.set(k, (byCode.get(k) ?? 0) + 1);
    }
    t.diagnostic(`late writes (received after the writer's term ended): ${judged.length} judged — ${[...byCode].map(([k, n]) => `${n}× ${k}`).join('; ')}; ${lateEvents.length} Event writes (append-only, not fenced)`);
    // The fenced writes by name, per fault kind (the replica that wrote them was cut off by that kind).
    const kindOf = new Map(replicas.map((r) => [r.identity, r.kind]));
    const refusals = new Map<string, { codes: Map<number, number>; total: number }>();
    for (const kind of ['delay', 'reorder'] as const) {
      for (const w of writeKinds) refusals.set(`${kind} ${w}`, { codes: new Map(), total: 0 });
    }
    for (const { e } of judged) {
      const w = writeKindOf(e);
      const r = w && refusals.get(`${kindOf.get(identityOf(e))} ${w}`);
      if (!r) continue;
      const code = e.responseStatus?.code ?? 0;
      r.codes.set(code, (r.codes.get(code) ?? 0) + 1);
      r.total++;
    }
    const describeCodes = (r: { codes: Map<number, number>; total: number }): string =>
      `${r.total} late, answered ${[...r.codes].map(([c, n]) => `${c}×${n}`).join(' ') || 'nothing'}`;
    t.diagnostic(`fenced late writes by fault kind${scaledDown}:\n${[...refusals].map(([k, r]) => `  ${k}: ${describeCodes(r)}`).join('\n')}`);

    // Creates: every attempt counts (a 409 is a second actor's attempt); at most one may succeed.
    const attempts = new Map<string, { ok: number; conflict: number; other: number }>();
    for (const e of ours) {
      if (e.objectRef?.resource !== 'deployments' || e.verb !== 'create') continue;
      const name = e.objectRef.name ?? '';
      const c = attempts.get(name) ?? { ok: 0, conflict: 0, other: 0 };
      if (e.responseStatus?.code === 201) c.ok++;
      else if (e.responseStatus?.code === 409) c.conflict++;
      else c.other++;
      attempts.set(name, c);
    }
    const conflicts = [...attempts.values()].reduce((n, c) => n + c.conflict, 0);
    t.diagnostic(`${made} Foos; ${terms.length} terms; effective rounds ${JSON.stringify(effective)}; Deployment create attempts ${[...attempts.values()].reduce((n, c) => n + c.ok + c.conflict + c.other, 0)}, of which 409: ${conflicts}`);
    for (let i = 0; i < made; i++) assert.equal(attempts.get(`d-foo-${i}`)?.ok, 1, `Deployment d-foo-${i}: exactly one create attempt succeeded (${JSON.stringify(attempts.get(`d-foo-${i}`))})`);

    assert.deepEqual(violations.map(explain), [], `old leaders' writes that landed after their term and changed an object (${violations.length} of ${judged.length} late writes)`);
    assert.ok(effective.delay >= perKind && effective.reorder >= perKind,
      `each fault kind ran at least ${perKind} rounds in which held writes landed late: ${JSON.stringify(effective)}`);
    for (const [k, r] of refusals) {
      assert.ok(r.total >= perKind, `${k}: at least ${perKind} late ones judged (${describeCodes(r)})`);
      assert.equal(r.codes.get(409), r.total, `${k}: every late one refused with 409 Conflict (${describeCodes(r)})`);
    }
  });
});
