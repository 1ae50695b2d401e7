/**
 * Names a scaffolded project is built from, validated as kubebuilder validates them (so a name accepted here is one
 * the API server accepts later), and the names derived from them. Every validator returns an error sentence, or
 * undefined when the value is fine.
 */

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** `--domain`: a DNS-1123 subdomain (lower case, dots), e.g. example.com. */
export function validateDomain(domain: string): string | undefined {
  if (domain.length > 253 || !dns1123Subdomain.test(domain)) {
    return `invalid --domain ${JSON.stringify(domain)}: must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.'), e.g. example.com`;
  }
  return undefined;
}

/**
 * `--repo`: the project's name — npm package name, namespace `<repo>-system`, name prefix `<repo>-`, image name. A
 * DNS-1123 label short enough that `<repo>-system` still is one.
 */
export function validateRepo(repo: string): string | undefined {
  if (repo.length > 56 || !dns1123Label.test(repo)) {
    return `invalid --repo ${JSON.stringify(repo)}: must be a DNS-1123 label of at most 56 characters (lower-case letters, digits, '-'), e.g. memcached-operator`;
  }
  return undefined;
}

/** `--group`: a DNS-1123 subdomain; with the domain appended (the API group) at most 253 characters. */
export function validateGroup(group: string, domain: string): string | undefined {
  if (!dns1123Subdomain.test(group) || `${group}.${domain}`.length > 253) {
    return `invalid --group ${JSON.stringify(group)}: must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.'), e.g. cache`;
  }
  return undefined;
}

/** `--version`: kubebuilder's rule, `^v\d+(?:alpha\d+|beta\d+)?$` — v1, v2beta1, v1alpha1. */
export function validateVersion(version: string): string | undefined {
  if (!/^v[1-9]\d*(?:alpha[1-9]\d*|beta[1-9]\d*)?$/.test(version)) {
    return `invalid --version ${JSON.stringify(version)}: must be like v1, v1beta1 or v1alpha1`;
  }
  return undefined;
}

/** Names the generated controller, test and types files use themselves: a kind of that name would clash. */
const reservedKinds = new Set(['ConfigMap', 'ControllerManager', 'KubeObject', 'Reconciler', 'ResourceType', 'TestEnv']);

/**
 * `--kind`: PascalCase (starts upper case, letters and digits only), its lower case a DNS-1035 label (≤ 63), and
 * none of the type names the generated code imports.
 */
export function validateKind(kind: string): string | undefined {
  if (!/^[A-Z][A-Za-z0-9]*$/.test(kind) || kind.length > 63) {
    return `invalid --kind ${JSON.stringify(kind)}: must be PascalCase (an upper-case letter, then letters and digits), e.g. Memcached`;
  }
  if (reservedKinds.has(kind)) return `invalid --kind ${JSON.stringify(kind)}: the generated code uses that name itself (${[...reservedKinds].join(', ')})`;
  return undefined;
}

/** `--plural`: a DNS-1123 label (the resource name in URLs and in the CRD's name). */
export function validatePlural(plural: string): string | undefined {
  if (plural.length > 63 || !dns1123Label.test(plural)) {
    return `invalid --plural ${JSON.stringify(plural)}: must be a lower-case DNS-1123 label, e.g. memcacheds`;
  }
  return undefined;
}

/**
 * The plural resource name of a kind, lower case, by the English rules kubebuilder's flect applies to the common
 * cases: Policy → policies, Ingress → ingresses, Box → boxes, Match → matches, Memcached → memcacheds. Irregular
 * plurals need `--plural`.
 */
export function pluralize(kind: string): string {
  const k = kind.toLowerCase();
  if (/[^aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  if (/(s|x|z|ch|sh)$/.test(k)) return `${k}es`;
  return `${k}s`;
}

/** A file-name form of the kind: DNSRecord → dnsrecord (kubebuilder names files by the lower-case kind). */
export function fileName(kind: string): string {
  return kind.toLowerCase();
}
