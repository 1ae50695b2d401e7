/**
 * clouds.yaml: find the file, select a cloud, and turn it into a validated `CloudConfig` for the Neutron client.
 *
 * File lookup (first match wins; an explicitly named file that is missing is an error, never skipped):
 *   1. `path` option (`--neutron-cloud-config`)
 *   2. `$NEUTRON_CLOUD_CONFIG`, then `$OS_CLIENT_CONFIG_FILE` (openstacksdk's variable)
 *   3. `./clouds.yaml`, `~/.config/openstack/clouds.yaml`, `/etc/openstack/clouds.yaml`
 * A `secure.yaml` next to the chosen file is merged over it (openstacksdk's way of keeping secrets apart).
 *
 * Cloud selection: `cloud` option (`--neutron-cloud`), else `$OS_CLOUD`, else the file's only cloud.
 *
 * Supported `auth_type`s:
 *  - `password` / `v3password` (Keystone v3): `auth.auth_url`, `auth.username` or `auth.user_id`, `auth.password`,
 *    `auth.project_name` or `auth.project_id`, `auth.user_domain_name|user_domain_id`,
 *    `auth.project_domain_name|project_domain_id`. Missing domains fall back to `auth.default_domain_id|name`, then to
 *    the domain id `default` (as the `openstack` CLI does).
 *  - `v3applicationcredential`: `auth.auth_url`, `auth.application_credential_secret`, and
 *    `auth.application_credential_id` (or `application_credential_name` with `username`/`user_id` + user domain).
 *  - `none` / `noauth`: no Keystone; the network endpoint must be explicit: `auth.endpoint` (keystoneauth's `none`
 *    plugin form, written by hack/neutron/up.sh), or `network_endpoint_override`, or `endpoint_override`.
 * Also read: `region_name`, `interface` (or legacy `endpoint_type`; public/internal/admin, default public),
 * `network_endpoint_override`/`endpoint_override` (skip the catalog even with Keystone auth), and TLS for Keystone and
 * Neutron alike: `verify` (false: no certificate check), `cacert` (CA bundle), `cert` and `key` (client certificate;
 * `cert` alone may hold certificate and key in one PEM file) — file paths relative to the clouds.yaml.
 * If `auth_type` is absent it is inferred: application credential fields → v3applicationcredential; `auth.endpoint`
 * without `auth.auth_url` → none; otherwise password.
 *
 * Invariants: a returned CloudConfig is complete (every field the chosen auth needs is present and URLs parse);
 * secrets (passwords, application credential secrets) are held in `Secret`, which never reveals its value through
 * toString, JSON.stringify, util.inspect or template strings — only through `reveal()`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { inspect } from 'node:util';
import type * as JsYaml from 'js-yaml';

/** js-yaml is loaded on the first clouds.yaml parsed (a manager without Neutron never loads it; see kubeconfig.ts). */
let jsYaml: typeof JsYaml | undefined;
const loadYaml = (text: string): unknown => (jsYaml ??= createRequire(import.meta.url)('js-yaml') as typeof JsYaml).load(text);

const REDACTED = '[redacted]';

/** A credential. Only `reveal()` returns the value; every other way of printing it yields `[redacted]`. */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}

export class CloudConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CloudConfigError';
  }
}

export type EndpointInterface = 'public' | 'internal' | 'admin';

export interface PasswordAuth {
  readonly type: 'password';
  /** Keystone base URL as written (with or without `/v3`). */
  readonly authUrl: string;
  readonly username?: string;
  readonly userId?: string;
  readonly password: Secret;
  readonly userDomainName?: string;
  readonly userDomainId?: string;
  readonly projectName?: string;
  readonly projectId?: string;
  readonly projectDomainName?: string;
  readonly projectDomainId?: string;
}

export interface ApplicationCredentialAuth {
  readonly type: 'v3applicationcredential';
  readonly authUrl: string;
  readonly applicationCredentialId?: string;
  readonly applicationCredentialName?: string;
  readonly applicationCredentialSecret: Secret;
  /** Only with applicationCredentialName. */
  readonly username?: string;
  readonly userId?: string;
  readonly userDomainName?: string;
  readonly userDomainId?: string;
}

export interface NoAuth {
  readonly type: 'none';
  /** Neutron's base URL (no `/v2.0`). */
  readonly endpoint: string;
}

export type CloudAuth = PasswordAuth | ApplicationCredentialAuth | NoAuth;

export interface CloudConfig {
  /** The cloud's name in clouds.yaml. */
  readonly name: string;
  /** The clouds.yaml it came from (absolute path). */
  readonly source: string;
  readonly auth: CloudAuth;
  readonly regionName?: string;
  /** Catalog interface to use (default public). */
  readonly interface: EndpointInterface;
  /** Explicit Neutron base URL that bypasses the catalog (always set for auth type none). */
  readonly networkEndpoint?: string;
  /** Verify TLS certificates (default true). */
  readonly verify: boolean;
  /** Path of a CA bundle for TLS. */
  readonly cacert?: string;
  /** Path of a client certificate (PEM) presented to Keystone and Neutron. */
  readonly cert?: string;
  /** Path of the client certificate's key (PEM); absent when `cert` holds both. */
  readonly key?: string;
}

export interface LoadCloudOptions {
  /** `--neutron-cloud-config`: explicit clouds.yaml path. */
  path?: string;
  /** `--neutron-cloud`: cloud name. */
  cloud?: string;
  /** Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  /** Directory searched for ./clouds.yaml (default process.cwd()). */
  cwd?: string;
  /** Home directory (default os.homedir()). */
  home?: string;
  /** System directory (default /etc/openstack). */
  systemDir?: string;
}

interface Candidate {
  path: string;
  /** Where the path came from, for error messages. */
  origin: string;
  explicit: boolean;
}

/** The clouds.yaml paths that would be tried, in order. */
export function cloudsYamlCandidates(opts: LoadCloudOptions = {}): { path: string; origin: string; explicit: boolean }[] {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const out: Candidate[] = [];
  if (opts.path) out.push({ path: resolve(cwd, opts.path), origin: '--neutron-cloud-config', explicit: true });
  else if (env['NEUTRON_CLOUD_CONFIG']) out.push({ path: resolve(cwd, env['NEUTRON_CLOUD_CONFIG']), origin: '$NEUTRON_CLOUD_CONFIG', explicit: true });
  else if (env['OS_CLIENT_CONFIG_FILE']) out.push({ path: resolve(cwd, env['OS_CLIENT_CONFIG_FILE']), origin: '$OS_CLIENT_CONFIG_FILE', explicit: true });
  else {
    out.push({ path: join(cwd, 'clouds.yaml'), origin: 'current directory', explicit: false });
    out.push({ path: join(opts.home ?? homedir(), '.config', 'openstack', 'clouds.yaml'), origin: 'user config', explicit: false });
    out.push({ path: join(opts.systemDir ?? '/etc/openstack', 'clouds.yaml'), origin: 'system config', explicit: false });
  }
  return out;
}

/** The clouds.yaml to use; throws CloudConfigError naming every path tried. */
export function findCloudsYaml(opts: LoadCloudOptions = {}): string {
  const candidates = cloudsYamlCandidates(opts);
  for (const c of candidates) {
    if (existsSync(c.path)) return c.path;
    if (c.explicit) throw new CloudConfigError(`clouds.yaml not found: ${c.path} (from ${c.origin}) does not exist`);
  }
  throw new CloudConfigError(
    `no clouds.yaml found (set --neutron-cloud-config or NEUTRON_CLOUD_CONFIG); tried ${candidates.map((c) => c.path).join(', ')}`,
  );
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseYamlFile(path: string): Obj {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CloudConfigError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = text.trim() === '' ? {} : loadYaml(text);
  } catch (err) {
    throw new CloudConfigError(`${path} is not valid YAML: ${(err as Error).message.split('\n')[0] ?? ''}`);
  }
  if (!isObj(doc)) throw new CloudConfigError(`${path}: expected a mapping at the top level`);
  return doc;
}

/** Deep merge for secure.yaml over clouds.yaml: mappings merge, everything else is replaced. */
function merge(base: Obj, over: Obj): Obj {
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = isObj(b) && isObj(v) ? merge(b, v) : v;
  }
  return out;
}

/** Parses clouds.yaml text (plus optional secure.yaml text) and returns its `clouds` mapping. */
export function parseClouds(doc: Obj, source: string): Obj {
  const clouds = doc['clouds'];
  if (clouds === undefined) throw new CloudConfigError(`${source} has no top-level "clouds:" mapping`);
  if (!isObj(clouds)) throw new CloudConfigError(`${source}: "clouds" must be a mapping of cloud name to settings`);
  return clouds;
}

function scalar(o: Obj, key: string, where: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v.trim() === '' ? undefined : v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw new CloudConfigError(`${where}.${key} must be a string`);
}

function url(value: string, where: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new CloudConfigError(`${where} is not a URL: ${JSON.stringify(value)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new CloudConfigError(`${where} must be http(s): ${value}`);
  return value.replace(/\/+$/, '');
}

function normaliseAuthType(raw: string | undefined, auth: Obj): string {
  if (raw === undefined) {
    if (auth['application_credential_id'] !== undefined || auth['application_credential_secret'] !== undefined) return 'v3applicationcredential';
    if (auth['endpoint'] !== undefined && auth['auth_url'] === undefined) return 'none';
    return 'password';
  }
  const t = raw.toLowerCase();
  if (t === 'password' || t === 'v3password') return 'password';
  if (t === 'v3applicationcredential') return 'v3applicationcredential';
  if (t === 'none' || t === 'noauth') return 'none';
  return raw;
}

/** Turns one cloud's settings into a validated CloudConfig. */
export function cloudFromSettings(name: string, settings: unknown, source: string): CloudConfig {
  const where = `${source}: clouds.${name}`;
  if (!isObj(settings)) throw new CloudConfigError(`${where} must be a mapping`);
  const authRaw = settings['auth'] ?? {};
  if (!isObj(authRaw)) throw new CloudConfigError(`${where}.auth must be a mapping`);
  const aw = `${where}.auth`;
  const a = (k: string): string | undefined => scalar(authRaw, k, aw);
  const s = (k: string): string | undefined => scalar(settings, k, where);

  const regionName = s('region_name');
  const ifaceRaw = (s('interface') ?? s('endpoint_type') ?? 'public').toLowerCase().replace(/url$/, '');
  if (ifaceRaw !== 'public' && ifaceRaw !== 'internal' && ifaceRaw !== 'admin') {
    throw new CloudConfigError(`${where}.interface must be public, internal or admin, not ${JSON.stringify(ifaceRaw)}`);
  }
  const overrideKey = s('network_endpoint_override') !== undefined ? 'network_endpoint_override' : 'endpoint_override';
  const overrideRaw = s(overrideKey);
  let networkEndpoint = overrideRaw === undefined ? undefined : url(overrideRaw, `${where}.${overrideKey}`);
  const verifyRaw = settings['verify'];
  if (verifyRaw !== undefined && typeof verifyRaw !== 'boolean' && verifyRaw !== 'true' && verifyRaw !== 'false') {
    throw new CloudConfigError(`${where}.verify must be true or false`);
  }
  const verify = verifyRaw === undefined ? true : verifyRaw === true || verifyRaw === 'true';
  const file = (k: string): string | undefined => {
    const v = s(k);
    return v === undefined ? undefined : resolve(dirname(source), v);
  };
  const cacert = file('cacert');
  const cert = file('cert');
  const key = file('key');
  if (key !== undefined && cert === undefined) throw new CloudConfigError(`${where}.key is set without ${where}.cert`);

  const type = normaliseAuthType(s('auth_type'), authRaw);
  const missing = (what: string): CloudConfigError => new CloudConfigError(`${aw}.${what} is required for auth_type ${type}`);
  const defaultDomainId = a('default_domain_id');
  const defaultDomainName = a('default_domain_name');
  // Domain fallback (as the openstack CLI): explicit → default_domain_* → id "default".
  const domain = (nameKey: string, idKey: string): { name?: string; id?: string } => {
    const n = a(nameKey);
    const i = a(idKey);
    if (n !== undefined || i !== undefined) return { name: n, id: i };
    if (defaultDomainId !== undefined || defaultDomainName !== undefined) return { name: defaultDomainName, id: defaultDomainId };
    return { id: 'default' };
  };

  let auth: CloudAuth;
  if (type === 'none') {
    const endpointRaw = a('endpoint');
    const endpoint = endpointRaw !== undefined ? url(endpointRaw, `${aw}.endpoint`) : networkEndpoint;
    if (endpoint === undefined) {
      throw new CloudConfigError(`${where}: auth_type none needs an explicit network endpoint: auth.endpoint, network_endpoint_override or endpoint_override`);
    }
    networkEndpoint ??= endpoint;
    auth = { type: 'none', endpoint };
  } else if (type === 'password') {
    const authUrlRaw = a('auth_url');
    if (authUrlRaw === undefined) throw missing('auth_url');
    const username = a('username');
    const userId = a('user_id');
    if (username === undefined && userId === undefined) throw missing('username (or user_id)');
    const password = a('password');
    if (password === undefined) throw missing('password');
    const projectName = a('project_name') ?? a('tenant_name');
    const projectId = a('project_id') ?? a('tenant_id');
    if (projectName === undefined && projectId === undefined) throw missing('project_name (or project_id)');
    const ud = username !== undefined && userId === undefined ? domain('user_domain_name', 'user_domain_id') : {};
    const pd = projectName !== undefined && projectId === undefined ? domain('project_domain_name', 'project_domain_id') : {};
    auth = {
      type: 'password', authUrl: url(authUrlRaw, `${aw}.auth_url`), password: new Secret(password),
      ...(username !== undefined && { username }), ...(userId !== undefined && { userId }),
      ...(ud.name !== undefined && { userDomainName: ud.name }), ...(ud.id !== undefined && { userDomainId: ud.id }),
      ...(projectName !== undefined && { projectName }), ...(projectId !== undefined && { projectId }),
      ...(pd.name !== undefined && { projectDomainName: pd.name }), ...(pd.id !== undefined && { projectDomainId: pd.id }),
    };
  } else if (type === 'v3applicationcredential') {
    const authUrlRaw = a('auth_url');
    if (authUrlRaw === undefined) throw missing('auth_url');
    const secret = a('application_credential_secret');
    if (secret === undefined) throw missing('application_credential_secret');
    const id = a('application_credential_id');
    const acName = a('application_credential_name');
    if (id === undefined && acName === undefined) throw missing('application_credential_id (or application_credential_name)');
    let user: Partial<ApplicationCredentialAuth> = {};
    if (id === undefined) {
      const username = a('username');
      const userId = a('user_id');
      if (username === undefined && userId === undefined) throw missing('username or user_id (with application_credential_name)');
      const ud = username !== undefined && userId === undefined ? domain('user_domain_name', 'user_domain_id') : {};
      user = {
        ...(username !== undefined && { username }), ...(userId !== undefined && { userId }),
        ...(ud.name !== undefined && { userDomainName: ud.name }), ...(ud.id !== undefined && { userDomainId: ud.id }),
      };
    }
    auth = {
      type: 'v3applicationcredential', authUrl: url(authUrlRaw, `${aw}.auth_url`), applicationCredentialSecret: new Secret(secret),
      ...(id !== undefined && { applicationCredentialId: id }), ...(acName !== undefined && { applicationCredentialName: acName }),
      ...user,
    };
  } else {
    throw new CloudConfigError(`${where}.auth_type ${JSON.stringify(type)} is not supported (supported: password, v3password, v3applicationcredential, none)`);
  }

  return {
    name, source, auth, interface: ifaceRaw, verify,
    ...(regionName !== undefined && { regionName }),
    ...(networkEndpoint !== undefined && { networkEndpoint }),
    ...(cacert !== undefined && { cacert }),
    ...(cert !== undefined && { cert }),
    ...(key !== undefined && { key }),
  };
}

/** Selects a cloud from a parsed clouds.yaml document. */
export function selectCloud(doc: Obj, source: string, name: string | undefined): CloudConfig {
  const clouds = parseClouds(doc, source);
  const names = Object.keys(clouds);
  let chosen = name;
  if (chosen === undefined) {
    if (names.length !== 1) {
      throw new CloudConfigError(
        `${source} defines ${names.length} clouds (${names.join(', ') || 'none'}): choose one with --neutron-cloud or OS_CLOUD`,
      );
    }
    chosen = names[0] ?? '';
  }
  if (!Object.hasOwn(clouds, chosen)) {
    throw new CloudConfigError(`cloud ${JSON.stringify(chosen)} not found in ${source} (available: ${names.join(', ') || 'none'})`);
  }
  return cloudFromSettings(chosen, clouds[chosen], source);
}

/** Finds clouds.yaml (and secure.yaml next to it), selects the cloud and validates it. Throws CloudConfigError. */
export function loadCloudConfig(opts: LoadCloudOptions = {}): CloudConfig {
  const env = opts.env ?? process.env;
  const path = findCloudsYaml(opts);
  let doc = parseYamlFile(path);
  const secure = join(dirname(path), 'secure.yaml');
  if (existsSync(secure)) doc = merge(doc, parseYamlFile(secure));
  const name = opts.cloud || env['OS_CLOUD'] || undefined;
  return selectCloud(doc, path, name);
}

/** A one-line description safe to log (no secrets). */
export function describeCloud(c: CloudConfig): string {
  const where = c.auth.type === 'none' ? `endpoint ${c.auth.endpoint}` : `keystone ${c.auth.authUrl}`;
  return `cloud ${c.name} from ${c.source} (auth ${c.auth.type}, ${where}${c.regionName ? `, region ${c.regionName}` : ''})`;
}
