/**
 * The manager under test as its ServiceAccount (startTestEnv's `rbacPaths`; issue 42): the project's RBAC manifests
 * (config/rbac: its ServiceAccount, the generated roles, their bindings) are installed as they are, and the manager
 * connects with a TokenRequest token of that ServiceAccount through a transport that turns every RBAC refusal into
 * the rule to add — so a test sees exactly what RBAC refuses in production, at once, instead of passing as
 * cluster-admin (system:masters bypasses RBAC) and failing only when the Pod is deployed.
 *
 *  - What is read: every ServiceAccount, Role, ClusterRole, RoleBinding and ClusterRoleBinding in the paths (files,
 *    or directories of manifests, not recursive — crds.ts's readManifests; other kinds, e.g. a kustomization.yaml,
 *    are skipped). A namespaced object without a namespace goes to "default"; its namespace is created.
 *  - Whose identity: the one ServiceAccount the paths hold, bound as they bind it. With none, a ServiceAccount
 *    `default/controller-manager` is created and every role is bound to it (a directory of roles only, e.g. an
 *    example's generated role.yaml). Two or more is an error (which would the manager be?).
 *  - Ready: the environment resolves once the authorizer grants the ServiceAccount the first verb of every rule
 *    (SubjectAccessReview), as RBAC's caches follow new roles asynchronously.
 *  - Refusals: a 403 whose message is the authorizer's (refusal.ts; a webhook's denial is not one) is recorded once per
 *    (verb, group, resource, namespace), and `eventually`/`startManager` stop at it (refused.ts). Two sources: the
 *    manager's connection in this process (its Status message also gets the missing rule appended, so the reconcile
 *    error a controller logs names it), and the API server's audit log of the ServiceAccount's requests — so a manager
 *    run as a process (KUBECONFIG=serviceAccount.kubeconfigPath) is caught too. The log is read when `refusals` is.
 */
import { closeSync, fstatSync, openSync, readSync, writeFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import type { KubeObject } from '../apimachinery/meta.ts';
import { readBody, type SendOptions, type WireResponse } from '../client/connection.ts';
import { ApiError } from '../client/errors.ts';
import { KubeConfig } from '../client/kubeconfig.ts';
import type { RestClient } from '../client/rest.ts';
import { Transport, type RequestTransport } from '../client/transport.ts';
import { parseRefusal, refusalHint, type Refusal } from '../rbac/refusal.ts';
import { readManifests } from './crds.ts';
import { delay } from './process.ts';
import type { RefusalSource } from './refused.ts';

/** A rule of a Role or ClusterRole (the fields read here). */
interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  nonResourceURLs?: string[];
  verbs?: string[];
}

/** An RBAC manifest: ServiceAccount, (Cluster)Role or (Cluster)RoleBinding. */
export interface RbacObject extends KubeObject {
  rules?: PolicyRule[];
  subjects?: { kind: string; name: string; namespace?: string }[];
  roleRef?: { kind: string; name: string; apiGroup?: string };
}

const kinds: Record<string, { path: string; namespaced: boolean }> = {
  ServiceAccount: { path: '/api/v1', namespaced: true },
  Role: { path: '/apis/rbac.authorization.k8s.io/v1', namespaced: true },
  RoleBinding: { path: '/apis/rbac.authorization.k8s.io/v1', namespaced: true },
  ClusterRole: { path: '/apis/rbac.authorization.k8s.io/v1', namespaced: false },
  ClusterRoleBinding: { path: '/apis/rbac.authorization.k8s.io/v1', namespaced: false },
};

/** Reads the RBAC manifests of `paths` (see the file comment); throws naming a path that does not exist or holds none. */
export function readRbac(paths: string[]): RbacObject[] {
  const objects = readManifests(paths, 'RBAC path', 'ServiceAccount, Role, ClusterRole or binding',
    (o): o is RbacObject => typeof o?.kind === 'string' && o.kind in kinds && (o.apiVersion === 'v1' || o.apiVersion === 'rbac.authorization.k8s.io/v1'));
  const accounts = objects.filter((o) => o.kind === 'ServiceAccount');
  if (accounts.length > 1) {
    throw new Error(`the RBAC paths ${paths.join(', ')} hold ${accounts.length} ServiceAccounts (${accounts.map((a) => `${nsOf(a)}/${a.metadata?.name}`).join(', ')}): which one runs the manager is ambiguous`);
  }
  return objects;
}

/** The namespace of a namespaced manifest ("default" when it names none). */
const nsOf = (o: KubeObject): string => o.metadata?.namespace || 'default';

/** The ServiceAccount `objects` make the manager run as: the one they hold, else default/controller-manager. */
export function serviceAccountOf(objects: readonly RbacObject[]): { namespace: string; name: string; user: string } {
  const account = objects.find((o) => o.kind === 'ServiceAccount');
  const namespace = account ? nsOf(account) : 'default';
  const name = account?.metadata?.name ?? 'controller-manager';
  return { namespace, name, user: `system:serviceaccount:${namespace}:${name}` };
}

/** The kube-apiserver flags and the audit policy (file content) that log every request of `user` with its answer. */
export function auditOf(user: string, dir: string): { flags: string[]; policy: string; log: string; policyFile: string } {
  const log = `${dir}/audit.log`;
  const policyFile = `${dir}/audit-policy.yaml`;
  return {
    log, policyFile,
    policy: `apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n  users: [${JSON.stringify(user)}]\n- level: None\n`,
    flags: [`--audit-policy-file=${policyFile}`, `--audit-log-path=${log}`, '--audit-log-format=json', '--audit-log-mode=blocking'],
  };
}

/** The ServiceAccount the environment's manager runs as. */
export interface ServiceAccountIdentity {
  /** Its namespace. */
  namespace: string;
  /** Its name. */
  name: string;
  /** `system:serviceaccount:<namespace>:<name>`: the user RBAC sees. */
  user: string;
  /** A kubeconfig file with its token (for a manager run as a process: KUBECONFIG). */
  kubeconfigPath: string;
  /** The same, loaded. */
  kubeConfig: KubeConfig;
}

/**
 * Installs `objects` (read by readRbac) with the admin `client`, mints a token of the ServiceAccount and writes its
 * kubeconfig to `kubeconfigPath` (cluster and CA from `admin`); resolves once RBAC grants what the roles say.
 */
export async function installRbac(client: RestClient, admin: KubeConfig, objects: readonly RbacObject[], kubeconfigPath: string,
  opts: { timeoutMs: number; signal?: AbortSignal | undefined }): Promise<ServiceAccountIdentity> {
  const sa = serviceAccountOf(objects);
  const account: RbacObject = objects.find((o) => o.kind === 'ServiceAccount') ?? { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa.name, namespace: sa.namespace } };
  const toCreate: RbacObject[] = [...objects];
  if (account !== objects.find((o) => o.kind === 'ServiceAccount')) {
    // Roles only: bind each to the ServiceAccount made here.
    toCreate.unshift(account);
    for (const role of objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole')) {
      const name = `${role.metadata?.name ?? ''}-binding`;
      const namespaced = role.kind === 'Role';
      toCreate.push({
        apiVersion: 'rbac.authorization.k8s.io/v1', kind: namespaced ? 'RoleBinding' : 'ClusterRoleBinding',
        metadata: { name, ...(namespaced ? { namespace: nsOf(role) } : {}) },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: role.kind ?? '', name: role.metadata?.name ?? '' },
        subjects: [{ kind: 'ServiceAccount', name: sa.name, namespace: sa.namespace }],
      });
    }
  }
  const namespaces = new Set(toCreate.filter((o) => kinds[o.kind ?? '']?.namespaced).map(nsOf));
  for (const ns of namespaces) {
    try {
      await client.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, signal: opts.signal });
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409)) throw err;
    }
  }
  for (const o of toCreate) {
    const k = kinds[o.kind ?? ''];
    if (!k) continue;
    const plural = `${(o.kind ?? '').toLowerCase()}s`;
    const path = k.namespaced ? `${k.path}/namespaces/${nsOf(o)}/${plural}` : `${k.path}/${plural}`;
    const body = k.namespaced ? { ...o, metadata: { ...o.metadata, namespace: nsOf(o) } } : o;
    try {
      await client.json('POST', path, { body, signal: opts.signal });
    } catch (err) {
      throw new Error(`installing ${o.kind} ${o.metadata?.name} of the RBAC paths: ${(err as Error).message}`, { cause: err });
    }
  }
  const user = sa.user;
  await waitGranted(client, user, sa.namespace, toCreate, opts);
  const { status } = await client.json<{ status: { token: string } }>('POST', `/api/v1/namespaces/${sa.namespace}/serviceaccounts/${sa.name}/token`, {
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 24 * 3600 } }, signal: opts.signal,
  });
  const cluster = admin.getCurrentCluster();
  writeFileSync(kubeconfigPath, `${JSON.stringify({
    apiVersion: 'v1', kind: 'Config',
    clusters: [{ name: 'tscm-local', cluster: { server: cluster?.server, 'certificate-authority-data': cluster?.caData } }],
    users: [{ name: sa.name, user: { token: status.token } }],
    contexts: [{ name: 'manager', context: { cluster: 'tscm-local', user: sa.name, namespace: sa.namespace } }],
    'current-context': 'manager',
  }, null, 2)}\n`, { mode: 0o600 });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  return { namespace: sa.namespace, name: sa.name, user, kubeconfigPath, kubeConfig };
}

/**
 * Waits until the authorizer grants `user` the first verb of every resource rule of the roles bound to it (a Role's
 * in its namespace, a ClusterRole's anywhere) — RBAC's caches follow new objects asynchronously.
 */
async function waitGranted(client: RestClient, user: string, namespace: string, objects: readonly RbacObject[],
  opts: { timeoutMs: number; signal?: AbortSignal | undefined }): Promise<void> {
  const [saNs, saName] = user.split(':').slice(2);
  const bound = new Set(objects.filter((o) => o.subjects?.some((s) => s.kind === 'ServiceAccount' && s.name === saName && (s.namespace ?? 'default') === saNs))
    .map((b) => `${b.roleRef?.kind}/${b.kind === 'RoleBinding' ? (b.metadata?.namespace || 'default') : ''}/${b.roleRef?.name}`));
  const checks = objects.filter((o) => (o.kind === 'Role' || o.kind === 'ClusterRole') && bound.has(`${o.kind}/${o.kind === 'Role' ? (o.metadata?.namespace || 'default') : ''}/${o.metadata?.name}`))
    .flatMap((role) => (role.rules ?? []).filter((r) => r.resources?.length && r.verbs?.length).map((r) => ({
      group: r.apiGroups?.[0] ?? '', resource: r.resources?.[0] ?? '', verb: r.verbs?.[0] ?? '',
      namespace: role.kind === 'Role' ? (role.metadata?.namespace || 'default') : namespace,
    })));
  const deadline = Date.now() + opts.timeoutMs;
  for (const c of checks) {
    const [resource, subresource] = c.resource.split('/');
    for (;;) {
      opts.signal?.throwIfAborted();
      const review = await client.json<{ status?: { allowed?: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview',
          spec: {
            user, groups: ['system:serviceaccounts', `system:serviceaccounts:${saNs}`, 'system:authenticated'],
            resourceAttributes: { group: c.group, resource, ...(subresource ? { subresource } : {}), verb: c.verb, namespace: c.namespace },
          },
        }, signal: opts.signal,
      });
      if (review.status?.allowed) break;
      if (Date.now() > deadline) throw new Error(`RBAC did not grant ${user} ${c.verb} ${c.resource} (API group "${c.group}") within ${opts.timeoutMs} ms: is the role bound to it?`);
      await delay(50);
    }
  }
}

/**
 * The manager's connection as its ServiceAccount: a Transport of the ServiceAccount's kubeconfig that records each
 * RBAC refusal (see the file comment) and appends the missing rule to the refused request's error.
 * Concurrency: single-threaded; `refusals` only grows until `clear()`.
 */
export class RefusalRecorder implements RequestTransport, RefusalSource {
  readonly cluster: RequestTransport['cluster'];
  readonly role: string;
  private readonly inner: Transport;
  private readonly recorded: Refusal[] = [];
  private readonly seen = new Set<string>();
  private readonly auditLog: string | undefined;
  /** How far the audit log was read; a partial last line is read again next time. */
  private auditOffset = 0;

  /** `auditLog`: the API server's audit log of the ServiceAccount's requests (auditOf), read for refusals. */
  constructor(kubeConfig: KubeConfig, role: string, auditLog?: string) {
    this.inner = new Transport(kubeConfig);
    this.cluster = this.inner.cluster;
    this.role = role;
    this.auditLog = auditLog;
  }

  /** Refused requests, first first, one per (verb, group, resource, namespace): this connection's and the audit log's. */
  get refusals(): readonly Refusal[] {
    this.readAuditLog();
    return this.recorded;
  }

  private record(refusal: Refusal): void {
    const key = `${refusal.verb}|${refusal.group}|${refusal.resource}|${refusal.namespace ?? ''}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.recorded.push(refusal);
  }

  /** Records the 403s of the audit log's lines written since the last read. */
  private readAuditLog(): void {
    if (!this.auditLog) return;
    let fd: number;
    try {
      fd = openSync(this.auditLog, 'r');
    } catch {
      return; // nothing logged yet
    }
    try {
      const size = fstatSync(fd).size;
      if (size <= this.auditOffset) return;
      const bytes = Buffer.alloc(size - this.auditOffset);
      const n = readSync(fd, bytes, 0, bytes.length, this.auditOffset);
      const complete = bytes.subarray(0, n).lastIndexOf(0x0a) + 1;
      this.auditOffset += complete;
      const text = bytes.subarray(0, complete).toString('utf8');
      for (const line of text.split('\n')) {
        if (!line) continue;
        const e = JSON.parse(line) as { verb?: string; requestURI?: string; responseStatus?: { code?: number; message?: string } };
        if (e.responseStatus?.code !== 403) continue;
        const refusal = parseRefusal((e.verb ?? '').toUpperCase(), e.requestURI ?? '', { message: e.responseStatus.message ?? '' });
        if (refusal) this.record({ ...refusal, request: `${e.verb ?? ''} ${(e.requestURI ?? '').split('?')[0] ?? ''}` });
      }
    } finally {
      closeSync(fd);
    }
  }

  headers(url: string): Promise<Record<string, string>> {
    return this.inner.headers(url);
  }

  invalidate(): void {
    this.inner.invalidate();
  }

  async send(opts: SendOptions): Promise<WireResponse> {
    const res = await this.inner.send(opts);
    if (res.status !== 403) return res;
    const bytes = res.bytes ?? await readBody(res.body);
    let body: { message?: string } | undefined;
    try {
      body = JSON.parse(bytes.toString('utf8')) as { message?: string };
    } catch {
      body = undefined;
    }
    const refusal = body && parseRefusal(opts.method, opts.path, body);
    if (!body || !refusal) return { ...res, body: Readable.from([]), bytes };
    this.record(refusal);
    const amended = Buffer.from(JSON.stringify({ ...body, message: `${body.message ?? ''} (${refusalHint(refusal)})` }));
    const headers = { ...res.headers };
    delete headers['content-length'];
    return { status: res.status, headers, body: Readable.from([]), bytes: amended };
  }

  /** Forgets the refusals so far (a test that removed a rule on purpose, then restored it). */
  clear(): void {
    this.readAuditLog(); // what was logged so far is cleared too
    this.recorded.length = 0;
    this.seen.clear();
  }

  close(): void {
    this.inner.close();
  }
}
