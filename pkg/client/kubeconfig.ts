/**
 * KubeConfig: the kubeconfig data model and loaders (files, path lists, in-cluster), without client-node.
 *
 * Why our own: importing `@kubernetes/client-node` costs ~0.7–3 s and ~85 MiB of RSS at start (it loads every
 * generated API model), and its request path builds a new connection pool per request. The manager needs only the
 * data: which server, which CA, which credential. Field names match client-node's `KubeConfig` (`clusters`,
 * `users`, `contexts`, `currentContext`, `getCurrentCluster()`, `getCurrentUser()`, `loadFromFile`,
 * `loadFromString`, `loadFromOptions`, `loadFromCluster`, `exportConfig`), so code written against either works.
 *
 * Semantics (as kubectl / client-go's clientcmd):
 *  - `loadFromFiles(paths)` merges a KUBECONFIG path list: files that do not exist are skipped; the first file that
 *    sets `current-context` wins; clusters, users and contexts are merged by name, first definition wins.
 *  - Relative file references (certificate-authority, client-certificate, client-key, tokenFile, exec command with
 *    a path separator) are resolved against the directory of the file that defined them.
 *  - `loadFromCluster()` is the Pod's ServiceAccount: KUBERNETES_SERVICE_HOST/PORT, the token FILE (re-read when the
 *    kubelet rotates it, see transport.ts) and the CA file.
 * Nothing here performs I/O after loading except `loadFrom*` themselves; credentials are never logged.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import type * as JsYaml from 'js-yaml';

/**
 * js-yaml (130 kB; 15–40 ms to load and evaluate) is loaded on the first kubeconfig file parsed, not at import: the
 * in-cluster configuration (the image's) never needs it. Synchronous (`require` of an ES module) because parsing is.
 */
let jsYaml: typeof JsYaml | undefined;
const loadYaml = (text: string): unknown => (jsYaml ??= createRequire(import.meta.url)('js-yaml') as typeof JsYaml).load(text);

export const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface Cluster {
  name: string;
  server: string;
  caData?: string | undefined;
  caFile?: string | undefined;
  skipTLSVerify?: boolean | undefined;
  tlsServerName?: string | undefined;
  proxyUrl?: string | undefined;
}

/** An exec credential plugin (client.authentication.k8s.io). */
export interface ExecConfig {
  command: string;
  args?: string[] | undefined;
  env?: { name: string; value: string }[] | undefined;
  apiVersion?: string | undefined;
  interactiveMode?: string | undefined;
  provideClusterInfo?: boolean | undefined;
}

export interface User {
  name: string;
  token?: string | undefined;
  /** A file holding the bearer token, re-read when it changes (bound ServiceAccount tokens rotate). */
  tokenFile?: string | undefined;
  certData?: string | undefined;
  certFile?: string | undefined;
  keyData?: string | undefined;
  keyFile?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
  impersonateUser?: string | undefined;
  impersonateGroups?: string[] | undefined;
  exec?: ExecConfig | undefined;
  /** Legacy auth providers (oidc, gcp, azure): handed to client-node, loaded only when used. */
  authProvider?: { name: string; config?: Record<string, string> } | undefined;
}

export interface Context {
  name: string;
  cluster: string;
  user: string;
  namespace?: string | undefined;
}

type Raw = Record<string, unknown>;

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function obj(v: unknown): Raw {
  return typeof v === 'object' && v !== null ? (v as Raw) : {};
}

function named(list: unknown, what: string, source: string): { name: string; body: Raw }[] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw new Error(`${source}: ${what} is not a list`);
  return list.map((e: unknown, i) => {
    const name = str(obj(e)['name']);
    if (!name) throw new Error(`${source}: ${what}[${i}].name is missing`);
    return { name, body: obj(obj(e)[what === 'clusters' ? 'cluster' : what === 'users' ? 'user' : 'context']) };
  });
}

/**
 * The kubeconfig data model and loaders (files, KUBECONFIG path lists, in-cluster), with the field and method names
 * of client-node's KubeConfig; merging follows kubectl (first definition of a name wins).
 */
export class KubeConfig {
  /** The API servers: name, server URL, CA and TLS settings. */
  clusters: Cluster[] = [];
  /** The credentials: client certificates, tokens, exec plugins. */
  users: User[] = [];
  /** Named (cluster, user, namespace) triples. */
  contexts: Context[] = [];
  /** The name of the context in use ('' when none). */
  currentContext = '';

  /** Every context (the array itself, not a copy). */
  getContexts(): Context[] {
    return this.contexts;
  }

  /** The name of the current context ('' when none). */
  getCurrentContext(): string {
    return this.currentContext;
  }

  /** The context called `name`, or null. */
  getContextObject(name: string): Context | null {
    return this.contexts.find((c) => c.name === name) ?? null;
  }

  /** The cluster of the current context, or null when there is no such context or cluster. */
  getCurrentCluster(): Cluster | null {
    const ctx = this.getContextObject(this.currentContext);
    return ctx ? (this.clusters.find((c) => c.name === ctx.cluster) ?? null) : null;
  }

  /** The user of the current context, or null when there is no such context or user. */
  getCurrentUser(): User | null {
    const ctx = this.getContextObject(this.currentContext);
    return ctx ? (this.users.find((u) => u.name === ctx.user) ?? null) : null;
  }

  /** Parses kubeconfig YAML (or JSON). Relative paths are resolved against `baseDir` when given. */
  loadFromString(text: string, baseDir?: string): void {
    const fresh = KubeConfig.parse(text, 'kubeconfig', baseDir);
    this.clusters = fresh.clusters;
    this.users = fresh.users;
    this.contexts = fresh.contexts;
    this.currentContext = fresh.currentContext;
  }

  /** Replaces this configuration with the file at `path` (relative paths in it resolved against its directory). Throws if unreadable. */
  loadFromFile(path: string): void {
    this.loadFromString(readFileSync(path, 'utf8'), dirname(path));
  }

  /** Merges a KUBECONFIG path list as kubectl does (see the module comment). Throws when no file exists. */
  loadFromFiles(paths: readonly string[]): string[] {
    const used: string[] = [];
    const merged = new KubeConfig();
    for (const path of paths) {
      if (!path || !existsSync(path)) continue;
      const part = KubeConfig.parse(readFileSync(path, 'utf8'), path, dirname(path));
      used.push(path);
      if (!merged.currentContext && part.currentContext) merged.currentContext = part.currentContext;
      for (const c of part.clusters) if (!merged.clusters.some((x) => x.name === c.name)) merged.clusters.push(c);
      for (const u of part.users) if (!merged.users.some((x) => x.name === u.name)) merged.users.push(u);
      for (const c of part.contexts) if (!merged.contexts.some((x) => x.name === c.name)) merged.contexts.push(c);
    }
    if (used.length === 0) throw new Error(`none of the kubeconfig files exists: ${paths.join(', ')}`);
    Object.assign(this, { clusters: merged.clusters, users: merged.users, contexts: merged.contexts, currentContext: merged.currentContext });
    return used;
  }

  /** Replaces this configuration with the given objects (kept as given, not copied). */
  loadFromOptions(opts: { clusters: Cluster[]; users: User[]; contexts: Context[]; currentContext: string }): void {
    this.clusters = opts.clusters;
    this.users = opts.users;
    this.contexts = opts.contexts;
    this.currentContext = opts.currentContext;
  }

  /** The Pod's ServiceAccount (`pathPrefix` prefixes /var/run/secrets/… for tests). */
  loadFromCluster(pathPrefix = '', env: NodeJS.ProcessEnv = process.env): void {
    const host = env['KUBERNETES_SERVICE_HOST'] ?? '';
    const port = env['KUBERNETES_SERVICE_PORT'] ?? '';
    const dir = `${pathPrefix}${serviceAccountDir}`;
    const namespaceFile = `${dir}/namespace`;
    this.clusters = [{ name: 'inCluster', server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`, caFile: `${dir}/ca.crt` }];
    this.users = [{ name: 'inClusterUser', tokenFile: `${dir}/token` }];
    this.contexts = [{
      name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser',
      namespace: existsSync(namespaceFile) ? readFileSync(namespaceFile, 'utf8').trim() : undefined,
    }];
    this.currentContext = 'inClusterContext';
  }

  /** The configuration as kubeconfig JSON (credentials included: never log it). */
  exportConfig(): string {
    return JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': this.currentContext,
      clusters: this.clusters.map((c) => ({
        name: c.name,
        cluster: {
          server: c.server, 'certificate-authority-data': c.caData, 'certificate-authority': c.caFile,
          'insecure-skip-tls-verify': c.skipTLSVerify, 'tls-server-name': c.tlsServerName, 'proxy-url': c.proxyUrl,
        },
      })),
      users: this.users.map((u) => ({
        name: u.name,
        user: {
          token: u.token, tokenFile: u.tokenFile, 'client-certificate-data': u.certData, 'client-certificate': u.certFile,
          'client-key-data': u.keyData, 'client-key': u.keyFile, username: u.username, password: u.password,
          as: u.impersonateUser, 'as-groups': u.impersonateGroups, exec: u.exec, 'auth-provider': u.authProvider,
        },
      })),
      contexts: this.contexts.map((c) => ({ name: c.name, context: { cluster: c.cluster, user: c.user, namespace: c.namespace } })),
    });
  }

  private static parse(text: string, source: string, baseDir: string | undefined): KubeConfig {
    let doc: unknown;
    try {
      doc = loadYaml(text);
    } catch (err) {
      throw new Error(`${source}: not valid YAML: ${(err as Error).message}`, { cause: err });
    }
    const root = obj(doc);
    const abs = (p: string | undefined): string | undefined => (p && baseDir && !isAbsolute(p) ? join(baseDir, p) : p);
    const kc = new KubeConfig();
    kc.currentContext = str(root['current-context']) ?? '';
    kc.clusters = named(root['clusters'], 'clusters', source).map(({ name, body }) => {
      const server = str(body['server']);
      if (!server) throw new Error(`${source}: cluster "${name}" has no server`);
      return {
        name, server,
        caData: str(body['certificate-authority-data']),
        caFile: abs(str(body['certificate-authority'])),
        skipTLSVerify: body['insecure-skip-tls-verify'] === true,
        tlsServerName: str(body['tls-server-name']),
        proxyUrl: str(body['proxy-url']),
      };
    });
    kc.users = named(root['users'], 'users', source).map(({ name, body }) => {
      const exec = body['exec'] === undefined || body['exec'] === null ? undefined : obj(body['exec']);
      const command = exec ? str(exec['command']) : undefined;
      if (exec && !command) throw new Error(`${source}: user "${name}": exec.command is missing`);
      const provider = body['auth-provider'] === undefined || body['auth-provider'] === null ? undefined : obj(body['auth-provider']);
      const groups = body['as-groups'];
      return {
        name,
        token: str(body['token']),
        tokenFile: abs(str(body['tokenFile']) ?? str(body['token-file'])),
        certData: str(body['client-certificate-data']),
        certFile: abs(str(body['client-certificate'])),
        keyData: str(body['client-key-data']),
        keyFile: abs(str(body['client-key'])),
        username: str(body['username']),
        password: str(body['password']),
        impersonateUser: str(body['as']),
        impersonateGroups: Array.isArray(groups) ? groups.filter((g): g is string => typeof g === 'string') : undefined,
        exec: exec && command ? {
          command: command.includes('/') ? (abs(command) ?? command) : command,
          args: Array.isArray(exec['args']) ? exec['args'].map(String) : undefined,
          env: Array.isArray(exec['env']) ? exec['env'].map((e: unknown) => ({ name: String(obj(e)['name']), value: String(obj(e)['value']) })) : undefined,
          apiVersion: str(exec['apiVersion']),
          interactiveMode: str(exec['interactiveMode']),
          provideClusterInfo: exec['provideClusterInfo'] === true,
        } : undefined,
        authProvider: provider ? { name: str(provider['name']) ?? '', config: obj(provider['config']) as Record<string, string> } : undefined,
      };
    });
    kc.contexts = named(root['contexts'], 'contexts', source).map(({ name, body }) => ({
      name, cluster: str(body['cluster']) ?? '', user: str(body['user']) ?? '', namespace: str(body['namespace']),
    }));
    return kc;
  }
}
