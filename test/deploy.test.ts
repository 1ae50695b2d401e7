/**
 * Deploying with kustomize, and least privilege proven (issue 7):
 *  - every overlay renders; `kubectl apply -k config/default` creates everything on the full control plane;
 *  - the manager, run in-cluster style with the ServiceAccount config/rbac creates (its token from TokenRequest,
 *    the Deployment's own flags: --leader-elect, --metrics-secure, POD_NAMESPACE), reconciles config/samples with
 *    zero 403s — Foo, Deployment rollout events, Network (real neutron-server), the Lease (first as a standby that
 *    watches it while a departed leader holds it; created once that Lease is deleted; renewed), a secure scrape;
 *  - for every VERB of every RBAC rule config/rbac grants, the same run with that one verb removed fails, and the
 *    API server answered the manager 403 Forbidden for that very verb on that rule's resource (from the API server's
 *    audit log of the manager's ServiceAccount): so every verb is needed, and the scenario exercises each — e.g. a
 *    drifted Deployment for `deployments patch`, a repeated Event for `events patch`. A run that fails some other way
 *    (a timeout, the manager exiting, a 403 for something else only) fails the test, naming the verb and what happened;
 *  - the same for config/sharded (issue 13): with the sharding Role and ClusterRole it adds, the manager run with
 *    `--sharding` (one replica: both the only shard and the sharder) labels and reconciles the samples with zero 403s,
 *    and removing any one verb of the rules the sharding adds makes that run fail with a 403 for that verb.
 *
 *  - the webhooks config/default ships are on: the manager runs with the Deployment's --webhook-cert-mode=self-managed
 *    (served on loopback; the suite points the Network CRD's conversion and the ValidatingWebhookConfiguration there by
 *    url), so the sample Network (v1, stored as v2) goes through its conversion and validation, and the self-managed
 *    certificate's RBAC (config/webhook-selfmanaged) is proven minimal verb by verb like the rest;
 *
 * The suite runs on its own full control plane (not the shared one) because it needs the audit log.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadAllYaml } from '@kubernetes/client-node';
import { Agent, fetch } from 'undici';
import type { ControlPlane } from './cluster/controlplane.ts';
import { expectStatus, suffix, waitFor } from './helpers/cluster.ts';
import { freePort } from './cluster/controlplane.ts';
import { readAuditLog, type AuditEvent } from './helpers/audit.ts';
import { auditedControlPlane } from './helpers/auditedcluster.ts';
import { kubectl, kubectlOn } from './helpers/crds.ts';
import { ManagerProcess, metricValue } from './helpers/managerprocess.ts';
import { startNeutron, type NeutronInstance } from './helpers/neutron.ts';
import { shardLabelPrefix } from '../pkg/sharding/assignment.ts';

const systemNs = 'ts-controller-manager-system';
/** The manager's metrics certificate is self-signed: these checks are about authorization, not the chain. */
const selfSigned = new Agent({ connect: { rejectUnauthorized: false } });
const sa = 'ts-controller-manager-controller-manager';
/** config/default's self-managed webhook certificate: the Secret and the objects the manager injects its CA into. */
const webhookSecret = 'ts-controller-manager-webhook-server-cert';
const webhookConfiguration = 'ts-controller-manager-validating-webhook-configuration';
/** The loopback port of the manager's webhook server (the test runs it as a process, not behind the Service). */
let webhookPort = 0;
const saUser = `system:serviceaccount:${systemNs}:${sa}`;

/** The suite's audit policy: every request of the manager's ServiceAccount with its answer code; nothing else. */
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["${saUser}"]
- level: None
`;

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
  verbs: string[];
}

interface RbacObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string };
  rules: PolicyRule[];
}

interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}

async function rendered(dir: string): Promise<RenderedObject[]> {
  return loadAllYaml(await kubectl('kustomize', dir)) as RenderedObject[];
}

/** The roles config/default installs, as rendered by kustomize. */
async function renderedRoles(): Promise<RbacObject[]> {
  return (await rendered('config/default')).filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role') as RbacObject[];
}

const identity = (d: RenderedObject): string => `${d.kind}/${d.metadata.namespace ?? ''}/${d.metadata.name}`;

/** The RBAC objects config/sharded adds to config/default (the sharding's roles and their bindings). */
async function shardingRbac(): Promise<RenderedObject[]> {
  const base = new Set((await rendered('config/default')).map(identity));
  return (await rendered('config/sharded')).filter((d) => d.apiVersion.startsWith('rbac.authorization.k8s.io/') && !base.has(identity(d)));
}

function rolePath(r: RbacObject): string {
  return r.kind === 'Role'
    ? `/apis/rbac.authorization.k8s.io/v1/namespaces/${r.metadata.namespace}/roles/${r.metadata.name}`
    : `/apis/rbac.authorization.k8s.io/v1/clusterroles/${r.metadata.name}`;
}

async function putRole(cp: ControlPlane, role: RbacObject, rules: PolicyRule[]): Promise<void> {
  const cur = expectStatus<RbacObject>(await cp.get(rolePath(role)), 200, `get ${role.metadata.name}`);
  expectStatus(await cp.request('PUT', rolePath(role), { ...cur, rules }), 200, `update ${role.metadata.name}`);
}

/** Waits until the authorizer answers `allowed` for the rule's first verb on its first resource (RBAC caches). */
async function waitAuthorized(cp: ControlPlane, role: RbacObject, rule: PolicyRule, allowed: boolean): Promise<void> {
  const verb = rule.verbs[0] ?? 'get';
  const [resource = '', subresource] = (rule.resources?.[0] ?? '').split('/');
  const spec = {
    user: `system:serviceaccount:${systemNs}:${sa}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${systemNs}`, 'system:authenticated'],
    ...(rule.nonResourceURLs
      ? { nonResourceAttributes: { path: rule.nonResourceURLs[0], verb } }
      : {
        resourceAttributes: {
          group: rule.apiGroups?.[0] ?? '', resource, subresource, verb, namespace: role.metadata.namespace ?? systemNs,
          // A rule limited by resourceNames allows nothing for a request without a name.
          ...(rule.resourceNames?.[0] !== undefined ? { name: rule.resourceNames[0] } : {}),
        },
      }),
  };
  await waitFor(`RBAC ${allowed ? 'allows' : 'denies'} ${describeRule(rule)}`, async () => {
    const res = expectStatus<{ status: { allowed: boolean } }>(await cp.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec,
    }), 201, 'SubjectAccessReview');
    return res.status.allowed === allowed;
  });
}

/**
 * Every (role, one verb of one rule, the role's rules without that verb): the rule keeps its other verbs, and goes
 * when that was its only one. The yielded rule carries just the removed verb (what `waitAuthorized` asks about).
 */
function* eachVerbRemoved(roles: readonly RbacObject[]): Generator<[RbacObject, PolicyRule, PolicyRule[]]> {
  for (const role of roles) {
    for (let i = 0; i < role.rules.length; i++) {
      const rule = role.rules[i] as PolicyRule;
      for (const verb of rule.verbs) {
        const without = role.rules.map((r, j) => (j === i ? { ...r, verbs: r.verbs.filter((v) => v !== verb) } : r)).filter((r) => r.verbs.length > 0);
        yield [role, { ...rule, verbs: [verb] }, without];
      }
    }
  }
}

/**
 * Verbs this scenario cannot exercise, each needed on one path only and proven needed by the test named (which runs
 * the manager's controller as the ServiceAccount bound to config/rbac and fails on any refusal). `get` on networks:
 * the Network controller confirms with a GET that a Network which left with our finalizer and no deletionTimestamp is
 * gone — only after a DELETE that raced its finalizer add (kubernetes#77988), which the samples never do.
 */
const provenElsewhere: { role: string; apiGroup: string; resource: string; verb: string; test: string }[] = [
  { role: 'ts-controller-manager-manager-role', apiGroup: 'samplecrd.k8s.io', resource: 'networks', verb: 'get', test: 'test/network-finalizer-race.test.ts' },
];
const elsewhere = (role: RbacObject, rule: PolicyRule): string | undefined => provenElsewhere.find((p) =>
  p.role === role.metadata.name && rule.verbs[0] === p.verb && (rule.apiGroups ?? []).includes(p.apiGroup) && (rule.resources ?? []).includes(p.resource))?.test;

/**
 * The OwnerReferencesPermissionEnforcement admission plugin's refusal: a create or update that sets
 * `blockOwnerDeletion` on an ownerReference needs `update` on the OWNER's `finalizers` subresource; without it the
 * write of the owned object (not a request to the finalizers subresource) is answered 403 with this message.
 */
const blockOwnerDeletionDenied = 'cannot set blockOwnerDeletion if an ownerReference refers to a resource you can\'t set finalizers on';

/**
 * Whether `rule` (one verb) is what would authorize the audited request `e`: its verb on one of the rule's resources;
 * or, for `update` of `<owner>/finalizers`, the admission plugin's refusal of an owned object's write (above).
 */
function ruleCovers(rule: PolicyRule, e: AuditEvent): boolean {
  if (rule.verbs.includes('update') && (rule.resources ?? []).some((r) => r.endsWith('/finalizers'))
    && (e.verb === 'create' || e.verb === 'update') && (e.responseStatus?.message ?? '').includes(blockOwnerDeletionDenied)) return true;
  if (!rule.verbs.includes(e.verb)) return false;
  if (rule.nonResourceURLs) {
    const path = (e.requestURI ?? '').split('?')[0] ?? '';
    return !e.objectRef && rule.nonResourceURLs.some((u) => (u.endsWith('*') ? path.startsWith(u.slice(0, -1)) : path === u));
  }
  const ref = e.objectRef;
  if (!ref?.resource) return false;
  const resource = ref.subresource ? `${ref.resource}/${ref.subresource}` : ref.resource;
  return (rule.apiGroups ?? []).includes(ref.apiGroup ?? '') && (rule.resources ?? []).includes(resource);
}

/** One audited request, short: `patch apps/deployments 403`. */
function describeRequest(e: AuditEvent): string {
  const ref = e.objectRef;
  const what = ref ? `${ref.apiGroup || 'core'}/${ref.resource ?? ''}${ref.subresource ? `/${ref.subresource}` : ''}` : (e.requestURI ?? '');
  return `${e.verb} ${what} ${e.responseStatus?.code ?? '?'}`;
}

/** The distinct requests of `events`, with how many times each was made: `patch apps/deployments 403 ×2`. */
function summarize(events: readonly AuditEvent[]): string {
  const counts = new Map<string, number>();
  for (const e of events) counts.set(describeRequest(e), (counts.get(describeRequest(e)) ?? 0) + 1);
  return [...counts].map(([k, n]) => `${k} ×${n}`).join(', ') || 'none';
}

/** The manager's requests answered 403, from the audit log's events after the first `from`. */
function forbiddenSince(auditLog: string, from: number): AuditEvent[] {
  return readAuditLog(auditLog).slice(from).filter((e) => e.user?.username === saUser && e.responseStatus?.code === 403);
}

/**
 * Runs the scenario with `rule`'s one verb removed from `role` and asserts that the verb was needed: the run failed,
 * and the API server answered 403 Forbidden to the manager for that verb on the rule's resource. Any other failure
 * (the run completing, a timeout, the manager exiting, 403s for other requests only) fails, naming the verb and what
 * happened instead.
 */
async function assertNeeded(t: { diagnostic(msg: string): void }, run: () => Promise<Outcome>, auditLog: string, role: RbacObject, rule: PolicyRule): Promise<void> {
  const from = readAuditLog(auditLog).length;
  const outcome = await run();
  const denied = forbiddenSince(auditLog, from);
  const forRule = denied.filter((e) => ruleCovers(rule, e));
  const name = `${describeRule(rule)} of ${role.kind} ${role.metadata.name}`;
  t.diagnostic(`${role.metadata.name} without ${describeRule(rule)}: ${outcome.ok ? 'STILL WORKS' : outcome.why}; 403s: ${summarize(denied)}`);
  assert.equal(outcome.ok, false, `${name} is not needed: the run completed without it`);
  assert.ok(forRule.length > 0,
    `${name}: the run failed, but the API server answered no 403 for that verb on that resource — instead: ${outcome.why}; 403s answered: ${summarize(denied)}`);
}

function describeRule(r: PolicyRule): string {
  const what = r.nonResourceURLs?.join(',') ?? `${(r.apiGroups ?? []).map((g) => g || 'core').join(',')}/${(r.resources ?? []).join(',')}`;
  return `${what} [${r.verbs.join(',')}]`;
}

/** Lays out the Pod's ServiceAccount volume for the manager's ServiceAccount. */
async function podRoot(cp: ControlPlane): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'tscm-deploy-pod-'));
  const dir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
  mkdirSync(dir, { recursive: true });
  copyFileSync(cp.state.pki.caCert, join(dir, 'ca.crt'));
  writeFileSync(join(dir, 'namespace'), systemNs);
  const res = expectStatus<{ status: { token: string } }>(await cp.request('POST',
    `/api/v1/namespaces/${systemNs}/serviceaccounts/${sa}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } }), 201, 'token');
  writeFileSync(join(dir, 'token'), res.status.token);
  return root;
}

type Outcome = { ok: true } | { ok: false; why: string };

type Check = [name: string, check: () => Promise<boolean>];

interface Variant {
  /** Flags added to the Deployment's (e.g. `--sharding`). */
  extraArgs?: readonly string[];
  /** Checks added to the scenario's, given its namespace and leader Lease name. */
  extraChecks?: (ns: string, leaseId: string) => Check[];
  /** Runs before the manager starts, given the leader Lease name. */
  prepare?: (leaseId: string) => Promise<void>;
}

/** Whether the object at `path` exists and carries a shard label (`shard.ts-controller-manager.io/<controller>`). */
async function hasShardLabel(cp: ControlPlane, path: string): Promise<boolean> {
  const res = await cp.get(path);
  if (res.status !== 200) return false;
  const labels = (JSON.parse(res.body) as { metadata: { labels?: Record<string, string> } }).metadata.labels ?? {};
  return Object.entries(labels).some(([k, v]) => k.startsWith(shardLabelPrefix) && v !== '');
}

/**
 * `--sharding`, and proof that it is on: the shard Lease is held, the sharder labelled every sample object, and the
 * Lease of a departed shard (released: what a shard leaves behind after a clean shutdown) is deleted.
 */
function sharded(cp: ControlPlane): Variant {
  const leases = `/apis/coordination.k8s.io/v1/namespaces/${systemNs}/leases`;
  return {
    extraArgs: ['--sharding'],
    prepare: async (leaseId) => {
      expectStatus(await cp.request('POST', leases, {
        apiVersion: 'coordination.k8s.io/v1', kind: 'Lease',
        metadata: { name: `${leaseId}-shard-departed`, labels: { 'sharding.ts-controller-manager.io/lease-of': leaseId } },
        spec: { holderIdentity: '', leaseDurationSeconds: 1 },
      }), 201, 'a departed shard\'s Lease');
    },
    extraChecks: (ns, leaseId) => [
      ['the departed shard\'s released Lease deleted by the sharder', async () => (await cp.get(`${leases}/${leaseId}-shard-departed`)).status === 404],
      ['a shard Lease of the group is held', async () => {
        const res = await cp.get(`/apis/coordination.k8s.io/v1/namespaces/${systemNs}/leases?labelSelector=${encodeURIComponent(`sharding.ts-controller-manager.io/lease-of=${leaseId}`)}`);
        const items = (JSON.parse(res.body) as { items?: { metadata: { name: string }; spec: { holderIdentity?: string } }[] }).items ?? [];
        return res.status === 200 && items.some((l) => l.metadata.name.startsWith(`${leaseId}-shard-`) && Boolean(l.spec.holderIdentity));
      }],
      ['Foo, its Deployment and the Network carry a shard label', async () =>
        await hasShardLabel(cp, `/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos/example-foo`)
        && await hasShardLabel(cp, `/apis/apps/v1/namespaces/${ns}/deployments/example-foo`)
        && await hasShardLabel(cp, `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks/example-network`)],
    ],
  };
}

/**
 * One full run of the manager as deployed (its Deployment's flags, in-cluster credentials) through every
 * controller's scenario in a fresh namespace. Resolves ok when every scenario completed with no 403; otherwise with
 * the first failure seen (a 403, or a scenario that did not complete in time).
 */
async function scenario(cp: ControlPlane, root: string, neutron: NeutronInstance, reader: string, leaseId: string, variant: Variant = {}): Promise<Outcome> {
  const ns = `rbac-${suffix()}`;
  // Every run starts without the webhook certificate Secret, so it creates it (`secrets create`), records the CA
  // injection in it (`secrets update`) and injects a new CA (the injector's `get` and `update`).
  const secret = await cp.request('DELETE', `/api/v1/namespaces/${systemNs}/secrets/${webhookSecret}`);
  assert.ok(secret.status === 200 || secret.status === 404, `delete the webhook Secret: ${secret.body}`);
  expectStatus(await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }), 201, 'ns');
  // The leader Lease held by a departed leader: the manager is a standby first — it watches the Lease (the Role's
  // `watch`) — until the Lease is deleted below; then it creates it (`create`), and renews it (`update`).
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${systemNs}/leases/${leaseId}`;
  expectStatus(await cp.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${systemNs}/leases`, {
    apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: leaseId },
    spec: { holderIdentity: 'departed-leader', leaseDurationSeconds: 3600 },
  }), 201, 'a departed leader\'s Lease');
  await variant.prepare?.(leaseId);
  const mgr = await ManagerProcess.start({
    // The Deployment's webhook flags (config/default's manager_webhook_patch.yaml), served on loopback: the suite
    // points the CRD's conversion and the webhook configuration there by url (no Pod behind the Service here).
    args: ['--leader-elect', '--metrics-secure', `--leader-election-id=${leaseId}`, '--webhook-cert-mode=self-managed',
      `--webhook-bind-address=127.0.0.1:${String(webhookPort)}`, '--webhook-cert-ips=127.0.0.1',
      `--neutron-cloud-config=${neutron.cloudsYaml}`, '--neutron-cloud=local', ...(variant.extraArgs ?? [])],
    env: {
      KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: new URL(cp.server).port,
      POD_NAMESPACE: systemNs, WATCH_NAMESPACE: ns,
    },
    inClusterRoot: root,
  });
  const scrape = async (): Promise<{ status: number; body: string }> => {
    const res = await fetch(`https://127.0.0.1:${mgr.metricsPort}/metrics`, {
      headers: { authorization: `Bearer ${reader}` }, dispatcher: selfSigned,
    }).catch(() => undefined);
    return { status: res?.status ?? 0, body: (await res?.text()) ?? '' };
  };
  /** A 403 anywhere: counted in the manager's metrics (when scrapable) or in its error logs; or the manager died. */
  const forbidden = async (): Promise<string | undefined> => {
    const n = metricValue((await scrape()).body, 'rest_client_requests_total', { code: '403' });
    if (n) return `${n} API request(s) answered 403`;
    const logged = mgr.logs.find((l) => /HTTP 403|"status":403|Forbidden/.test(JSON.stringify(l)));
    if (logged) return `logged: ${JSON.stringify(logged).slice(0, 300)}`;
    return mgr.running ? undefined : `manager exited: ${mgr.stderr.join('').slice(-500)}`;
  };
  try {
    // The sample Network (v1) needs the manager's conversion and validation webhooks: applied once they serve.
    const applied = await waitFor('config/samples applied (the webhooks serve)', async () => {
      const why = await forbidden();
      if (why) return why;
      return kubectlOn(cp, 'apply', '-n', ns, '-k', 'config/samples').then(() => 'applied', () => undefined);
    }, { timeoutMs: 60_000, intervalMs: 500 }).catch((err: unknown) => String(err));
    if (applied !== 'applied') return { ok: false, why: applied };
    const standby = await waitFor('the manager read the departed leader\'s Lease', async () => {
      const why = await forbidden();
      if (why) return why;
      return mgr.logs.some((l) => l.msg === 'new leader observed' && l['holder'] === 'departed-leader') ? 'standby' : undefined;
    }, { timeoutMs: 60_000 }).catch((err: unknown) => String(err));
    if (standby !== 'standby') return { ok: false, why: standby };
    expectStatus(await cp.request('DELETE', leasePath), 200, 'delete the departed leader\'s Lease');
    const checks: Check[] = [
      // Held, and renewed at least once (an update: renewTime moves past acquireTime, one retry period after).
      ['the Lease is held and renewed', async () => {
        const l = await cp.get(leasePath);
        const spec = (JSON.parse(l.body) as { spec: { holderIdentity?: string; acquireTime?: string; renewTime?: string } }).spec;
        return l.status === 200 && Boolean(spec.holderIdentity) && spec.renewTime !== undefined && spec.renewTime !== spec.acquireTime;
      }],
      ['Foo: Deployment created and status written', async () => {
        const foo = await cp.get(`/apis/samplecontroller.k8s.io/v1alpha1/namespaces/${ns}/foos/example-foo`);
        return foo.status === 200 && (JSON.parse(foo.body) as { status?: { availableReplicas?: number } }).status?.availableReplicas === 1;
      }],
      ['Events recorded (Foo Synced, Deployment rollout)', async () => {
        const ev = JSON.parse((await cp.get(`/api/v1/namespaces/${ns}/events`)).body) as { items: { reason: string }[] };
        const reasons = new Set(ev.items.map((e) => e.reason));
        return reasons.has('Synced') && (reasons.has('RolloutStarted') || reasons.has('RolloutComplete'));
      }],
      ['Network: Ready with Neutron ids', async () => {
        const net = await cp.get(`/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks/example-network`);
        const st = (JSON.parse(net.body) as { status?: { networkID?: string; conditions?: { type: string; status: string }[] } }).status;
        return net.status === 200 && Boolean(st?.networkID) && (st?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
      }],
      ['secure /metrics scrape allowed (TokenReview + SubjectAccessReview)', async () => (await scrape()).status === 200],
      ...(variant.extraChecks?.(ns, leaseId) ?? []),
    ];
    /** Polls the checks until all passed (undefined) or a 403 / the deadline (why not). */
    const until = async (list: Check[]): Promise<string | undefined> => {
      const pending = new Map(list);
      const deadline = Date.now() + 60_000;
      while (pending.size > 0) {
        const why = await forbidden();
        if (why) return why;
        for (const [name, check] of pending) if (await check().catch(() => false)) pending.delete(name);
        if (Date.now() > deadline) {
          const problems = mgr.logs.filter((l) => l.level === 'warn' || l.level === 'error').slice(-5)
            .map((l) => `${String(l.msg)} ${JSON.stringify(l['err'] ?? '')}`.slice(0, 400));
          return `not completed in 60 s: ${[...pending.keys()].join('; ')}; manager said: ${problems.join(' | ')}`;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return undefined;
    };
    const incomplete = await until(checks);
    if (incomplete) return { ok: false, why: incomplete };
    // Drift: the Deployment's replicas changed behind the controller's back are put back with a patch (deployments
    // patch), and the Foo's Synced Event repeats: the recorder patches the count of the Event it already wrote
    // (events patch).
    const deployment = `/apis/apps/v1/namespaces/${ns}/deployments/example-foo`;
    expectStatus(await cp.request('PATCH', deployment, { spec: { replicas: 3 } }, { headers: { 'content-type': 'application/merge-patch+json' } }), 200, 'drift');
    const drift = await until([
      ['drifted Deployment put back to spec.replicas 1', async () => {
        const d = await cp.get(deployment);
        return d.status === 200 && (JSON.parse(d.body) as { spec: { replicas: number } }).spec.replicas === 1;
      }],
      ['the Foo\'s Synced Event repeated (count ≥ 2)', async () => {
        const ev = JSON.parse((await cp.get(`/api/v1/namespaces/${ns}/events`)).body) as { items: { reason: string; count?: number; involvedObject: { kind: string } }[] };
        return ev.items.some((e) => e.reason === 'Synced' && e.involvedObject.kind === 'Foo' && (e.count ?? 0) >= 2);
      }],
    ]);
    if (drift) return { ok: false, why: drift };
    // The Network's deletion path needs the finalizer patch too.
    expectStatus(await cp.request('DELETE', `/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks/example-network`), 200, 'delete Network');
    const gone = await waitFor('Network finalizer removed', async () => {
      const why = await forbidden();
      if (why) return why;
      return (await cp.get(`/apis/samplecrd.k8s.io/v1/namespaces/${ns}/networks/example-network`)).status === 404 ? 'gone' : undefined;
    }, { timeoutMs: 60_000 }).catch((err: unknown) => String(err));
    if (gone !== 'gone') return { ok: false, why: gone };
    const why = await forbidden();
    return why ? { ok: false, why } : { ok: true };
  } finally {
    await mgr.stop('SIGKILL');
    await cp.request('DELETE', `/api/v1/namespaces/${ns}`);
  }
}

describe('kustomize deployment and least-privilege RBAC', () => {
  let neutron: NeutronInstance;
  let root: string;
  let reader: string;
  /** The suite's own full control plane, and its audit log of the manager ServiceAccount's requests. */
  let cp: ControlPlane;
  let auditLog: string;
  const cleanups: (() => Promise<void>)[] = [];
  before(async () => {
    neutron = await startNeutron();
    ({ cp, auditLog } = await auditedControlPlane({ after: (fn) => cleanups.push(fn) }, {
      prefix: 'tscm-deploy-', policy: auditPolicy, clusterMode: 'full',
    }));
  });
  after(async () => {
    await neutron?.stop();
    for (const fn of cleanups.reverse()) await fn();
  });

  test('every overlay renders with kubectl kustomize', async () => {
    for (const dir of ['config/crd', 'config/rbac', 'config/manager', 'config/default', 'config/namespaced', 'config/prometheus',
      'config/certmanager', 'config/network-policy', 'config/samples', 'config/sharded']) {
      const out = await kubectl('kustomize', dir);
      assert.ok(out.includes('kind:'), `${dir} renders`);
    }
    const namespaced = loadAllYaml(await kubectl('kustomize', 'config/namespaced')) as { kind: string; metadata: { name: string } }[];
    assert.ok(namespaced.some((d) => d.kind === 'Role' && d.metadata.name === 'ts-controller-manager-manager-role'));
    assert.ok(!namespaced.some((d) => d.kind === 'ClusterRole' && d.metadata.name === 'ts-controller-manager-manager-role'));
    // config/sharded: config/default with 3 sharding replicas; config/default itself unchanged (1 replica, no sharding).
    type Dep = RenderedObject & { spec: { replicas: number; template: { spec: { containers: { args: string[] }[] } } } };
    const manager = async (dir: string): Promise<Dep> => {
      const dep = (await rendered(dir)).find((d) => d.kind === 'Deployment' && d.metadata.name === 'ts-controller-manager-controller-manager');
      assert.ok(dep, `${dir} has the manager Deployment`);
      return dep as Dep;
    };
    const shardedDep = await manager('config/sharded');
    assert.equal(shardedDep.spec.replicas, 3);
    assert.deepEqual(shardedDep.spec.template.spec.containers[0]?.args.filter((a) => a === '--leader-elect' || a === '--sharding'), ['--leader-elect', '--sharding']);
    const defaultDep = await manager('config/default');
    assert.equal(defaultDep.spec.replicas, 1);
    assert.ok(!defaultDep.spec.template.spec.containers[0]?.args.includes('--sharding'));
    assert.deepEqual((await shardingRbac()).map(identity).sort(), [
      'ClusterRole//ts-controller-manager-sharding-role', 'ClusterRoleBinding//ts-controller-manager-sharding-rolebinding',
      `Role/${systemNs}/ts-controller-manager-sharding-role`, `RoleBinding/${systemNs}/ts-controller-manager-sharding-rolebinding`,
    ]);
  });

  test('kubectl apply -k config/default creates everything without errors', async (t) => {
    const out = await kubectlOn(cp, 'apply', '--server-side', '--force-conflicts', '-k', 'config/default');
    t.diagnostic(out);
    for (const expected of [
      `namespace/${systemNs}`, 'customresourcedefinition.apiextensions.k8s.io/foos.samplecontroller.k8s.io',
      `serviceaccount/${sa}`, 'clusterrole.rbac.authorization.k8s.io/ts-controller-manager-manager-role',
      'role.rbac.authorization.k8s.io/ts-controller-manager-leader-election-role',
      'deployment.apps/ts-controller-manager-controller-manager', 'service/ts-controller-manager-controller-manager-metrics-service',
      'service/ts-controller-manager-webhook-service', `validatingwebhookconfiguration.admissionregistration.k8s.io/${webhookConfiguration}`,
      'role.rbac.authorization.k8s.io/ts-controller-manager-webhook-cert-role',
      'clusterrole.rbac.authorization.k8s.io/ts-controller-manager-webhook-cert-injector-role',
    ]) assert.match(out, new RegExp(expected.replace(/\./g, '\\.')));
    await kubectlOn(cp, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io');
    // No Pod runs behind the webhook Service here (the manager is a process on this host): the CRD's conversion and
    // the webhooks are pointed at its loopback port by url; everything else stays as rendered.
    webhookPort = await freePort();
    const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/networks.samplecrd.k8s.io';
    expectStatus(await cp.request('PATCH', crdPath, { spec: { conversion: { webhook: { clientConfig: { service: null, url: `https://127.0.0.1:${String(webhookPort)}/convert` } } } } },
      { headers: { 'content-type': 'application/merge-patch+json' } }), 200, 'point the conversion at the manager');
    const vwcPath = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${webhookConfiguration}`;
    const vwc = expectStatus<{ webhooks: { clientConfig: { service?: { path?: string }; url?: string } }[] }>(await cp.get(vwcPath), 200, 'webhook configuration');
    for (const w of vwc.webhooks) w.clientConfig = { url: `https://127.0.0.1:${String(webhookPort)}${w.clientConfig.service?.path ?? ''}` };
    expectStatus(await cp.request('PUT', vwcPath, vwc), 200, 'point the webhooks at the manager');
    const dep = expectStatus<{ spec: { template: { spec: { containers: { securityContext: { readOnlyRootFilesystem: boolean } }[]; terminationGracePeriodSeconds: number } } } }>(
      await cp.get(`/apis/apps/v1/namespaces/${systemNs}/deployments/ts-controller-manager-controller-manager`), 200, 'manager Deployment');
    assert.equal(dep.spec.template.spec.containers[0]?.securityContext.readOnlyRootFilesystem, true);
    assert.ok(dep.spec.template.spec.terminationGracePeriodSeconds > 30, 'grace period longer than the 30 s shutdown timeout');
    root = await podRoot(cp);
    // The scraper's identity lives next to the manager (it must outlive this test), bound to metrics-reader.
    reader = await cp.mintServiceAccountToken(systemNs, 'test-scraper', 3600);
    const bind = await cp.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'ts-controller-manager-test-scraper' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'ts-controller-manager-metrics-reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'test-scraper', namespace: systemNs }],
    });
    assert.ok(bind.status === 201 || bind.status === 409, `bind metrics-reader: ${bind.body}`);
  });

  test('with config/rbac as shipped, the manager reconciles the samples with zero 403s', async () => {
    const from = readAuditLog(auditLog).length;
    const outcome = await scenario(cp, root, neutron, reader, `lease-${suffix()}`);
    assert.deepEqual(outcome, { ok: true });
    assert.equal(summarize(forbiddenSince(auditLog, from)), 'none', '403s answered to the manager');
  });

  test('every verb of every rule is needed: removing any one makes the run fail', async (t) => {
    const roles = await renderedRoles();
    const granting = roles.filter((r) => r.metadata.name !== 'ts-controller-manager-metrics-reader');
    let checked = 0;
    for (const [role, rule, without] of eachVerbRemoved(granting)) {
      const provenBy = elsewhere(role, rule);
      if (provenBy) {
        t.diagnostic(`${role.metadata.name} ${describeRule(rule)}: not on this scenario's path; needed, as ${provenBy} proves`);
        checked++;
        continue;
      }
      await putRole(cp, role, without);
      await waitAuthorized(cp, role, rule, false);
      try {
        await assertNeeded(t, () => scenario(cp, root, neutron, reader, `lease-${suffix()}`), auditLog, role, rule);
      } finally {
        await putRole(cp, role, role.rules);
        await waitAuthorized(cp, role, rule, true);
      }
      checked++;
    }
    const verbs = granting.reduce((n, r) => n + r.rules.reduce((m, rule) => m + rule.verbs.length, 0), 0);
    assert.equal(checked, verbs, `checked ${checked} verbs`);
    assert.ok(checked >= 20, `checked ${checked} verbs`);
  });

  test('config/sharded: with the sharding RBAC as shipped, the manager with --sharding labels and reconciles the samples with zero 403s', async () => {
    const objects = await shardingRbac();
    const shardingFile = join(mkdtempSync(join(tmpdir(), 'tscm-deploy-sharded-')), 'sharding-rbac.json');
    writeFileSync(shardingFile, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
    await kubectlOn(cp, 'apply', '--server-side', '--force-conflicts', '-f', shardingFile);
    for (const role of objects.filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole') as RbacObject[]) {
      for (const rule of role.rules) await waitAuthorized(cp, role, rule, true);
    }
    const from = readAuditLog(auditLog).length;
    const outcome = await scenario(cp, root, neutron, reader, `lease-${suffix()}`, sharded(cp));
    assert.deepEqual(outcome, { ok: true });
    assert.equal(summarize(forbiddenSince(auditLog, from)), 'none', '403s answered to the manager');
  });

  test('config/sharded: every verb of every rule the sharding adds is needed: removing any one makes the --sharding run fail', async (t) => {
    const roles = (await shardingRbac()).filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole') as RbacObject[];
    let checked = 0;
    for (const [role, rule, without] of eachVerbRemoved(roles)) {
      await putRole(cp, role, without);
      await waitAuthorized(cp, role, rule, false);
      try {
        await assertNeeded(t, () => scenario(cp, root, neutron, reader, `lease-${suffix()}`, sharded(cp)), auditLog, role, rule);
      } finally {
        await putRole(cp, role, role.rules);
        await waitAuthorized(cp, role, rule, true);
      }
      checked++;
    }
    assert.ok(checked >= 3, `checked ${checked} verbs`);
  });
});
