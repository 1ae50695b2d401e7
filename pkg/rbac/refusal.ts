/**
 * A request RBAC refused (403 Forbidden), read from the API server's answer, and the message that says which rule
 * is missing and where to declare it.
 *
 * The authorizer's message names exactly what it checked — the user, the verb, the resource (with its subresource)
 * and API group, and the namespace or "at the cluster scope" (k8s.io/apiserver responsewriters.forbiddenMessage); an
 * admission plugin that checks a permission quotes it (OwnerReferencesPermissionEnforcement: "cannot set
 * blockOwnerDeletion … User … cannot update resource "foos/finalizers" …"). Only answers carrying such a message are
 * refusals: a webhook's denial is a 403 too, but not a missing rule.
 */
import { contributionOf } from './permission.ts';
import { renderRules } from './role.ts';

/** What RBAC refused: who, which verb on what, where. */
export interface Refusal {
  /** The user the request authenticated as, e.g. system:serviceaccount:system:controller-manager. */
  user: string;
  /** The verb the authorizer checked: get, list, watch, create, update, patch, delete, … */
  verb: string;
  /** The API group ("" = core). */
  group: string;
  /** The plural, or `plural/subresource`. */
  resource: string;
  /** The namespace; undefined at the cluster scope. */
  namespace: string | undefined;
  /** The request (method and path) that was refused. */
  request: string;
  /** The API server's message. */
  message: string;
}

const resourceForbidden = /User "([^"]*)" cannot (\S+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]*)"| at the cluster scope)/;

/** The refusal in a 403 answer's Status body (parsed JSON or text), or undefined when it is no RBAC refusal. */
export function parseRefusal(method: string, path: string, body: unknown): Refusal | undefined {
  const message = typeof body === 'string' ? body : typeof (body as { message?: unknown } | null)?.message === 'string' ? (body as { message: string }).message : '';
  const m = resourceForbidden.exec(message);
  if (!m) return undefined;
  const [, user = '', verb = '', resource = '', group = '', namespace] = m;
  return { user, verb, group, resource, namespace, request: `${method} ${path.split('?')[0] ?? path}`, message };
}

/** The `.rbac()` declaration that grants the refused verb, as code to paste into the builder chain. */
export function declarationOf(r: Pick<Refusal, 'verb' | 'group' | 'resource'>): string {
  const [resource, subresource] = r.resource.split('/');
  return `.rbac({ group: ${quote(r.group)}, resource: ${quote(resource ?? '')}${subresource ? `, subresource: ${quote(subresource)}` : ''}, verbs: [${quote(r.verb)}] })`;
}

const quote = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/** The missing rule as it would appear in a role's `rules:` (YAML lines, indented as in a role file). */
export function missingRule(r: Pick<Refusal, 'verb' | 'group' | 'resource'>): string {
  const c = contributionOf({ group: r.group, resource: r.resource, verbs: [r.verb] }, 'missing');
  return renderRules([{ group: c.group, resource: c.resource, resourceNames: [], verbs: c.verbs, reasons: [] }]).replace(/^rules:\n/, '');
}

/**
 * What a test shows when the manager under test was refused: the verb, resource, group and namespace, the rule the
 * role lacks, and where to declare it so that `gen rbac` (`npm run generate`) writes it. `role` names the role
 * files (default "config/rbac").
 */
export function refusalMessage(r: Refusal, role = 'config/rbac'): string {
  const where = r.namespace === undefined ? 'at the cluster scope' : `in namespace ${JSON.stringify(r.namespace)}`;
  return `RBAC refused the manager (${r.user}): ${r.verb} ${r.resource} (API group ${JSON.stringify(r.group)}) ${where}, on ${r.request}.
${role} lacks the rule
${missingRule(r).trimEnd()}
Declare the call on the builder of the controller that makes it; \`npm run generate\` (ts-controller-manager gen rbac)
then writes the rule into ${role}:
  ${declarationOf(r)}
The API server said: ${r.message}`;
}

/** A one-line form of refusalMessage, for the refused request's own error (the reconcile error a controller logs). */
export function refusalHint(r: Refusal): string {
  return `missing RBAC rule: apiGroups [${JSON.stringify(r.group)}], resources [${r.resource}], verbs [${r.verb}]; declare it with ${declarationOf(r)} and run \`npm run generate\``;
}
