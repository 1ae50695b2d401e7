/**
 * The Helm chart in dist/chart and config/ are one deployment in two forms (issue 34, docs/helm.md). This module
 * holds what both the generator (hack/gen-chart.ts) and the test (test/helm.test.ts) need:
 *  - `variants`: each config/ overlay or optional kubebuilder section, and the chart values that select the same
 *    objects. The generator derives the chart's conditions from the differences between these kustomize builds; the
 *    test renders the chart with each variant's values and compares it, field by field, with that build.
 *  - `kustomizeBuild`: config/ rendered with the release's kubectl (`kubectl kustomize`), optionally on a copy with
 *    some sections enabled as a user does.
 *  - `normalise`: the documented differences between the two forms, and nothing else.
 *
 * A new kustomize section or overlay: add one `Variant` with the values that select it and its `flag` (+ the flag's
 * condition in `flagConditions`); objects that exist only with that section become conditional on it, objects it
 * deletes conditional on its absence, Deployment args/env/ports/volumes/volumeMounts it appends (or removes) become
 * conditional list items. Anything else it changes in the Deployment makes the generator stop and name the field.
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { enabledConfigCopy } from '../test/helpers/kustomize.ts';

const run = promisify(execFile);
export const repoRoot = join(import.meta.dirname, '..');
export const chartDir = join(repoRoot, 'dist', 'chart');
/** The release name and namespace under which the chart renders config/default's names exactly. */
export const releaseName = 'ts-controller-manager';
export const releaseNamespace = 'ts-controller-manager-system';

/** A Kubernetes object as rendered YAML (plain values). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** A switch of the chart that selects a config/ overlay or section. */
export type Flag = 'namespaced' | 'sharded' | 'certManager' | 'serviceMonitor' | 'rules' | 'networkPolicy' | 'neutron'
  | 'noWebhooks' | 'webhookCertManager';

/** Each flag's condition in the chart's templates (`$` is the chart's root context). */
export const flagConditions: Record<Flag, string> = {
  namespaced: 'eq $.Values.watch.scope "namespaced"',
  sharded: '$.Values.sharding.enabled',
  certManager: '$.Values.certManager.enabled',
  serviceMonitor: '$.Values.prometheus.serviceMonitor.enabled',
  rules: '$.Values.prometheus.rules.enabled',
  networkPolicy: '$.Values.networkPolicy.enabled',
  neutron: '$.Values.neutron.enabled',
  noWebhooks: 'not $.Values.webhooks.enabled',
  webhookCertManager: 'and $.Values.webhooks.enabled (eq $.Values.webhooks.certificate "cert-manager")',
};

export interface Variant {
  name: string;
  /** A config/ overlay directory (relative to config/), default `default`. */
  overlay?: string;
  /** kubebuilder-style sections of config/default enabled (the '# [NAME]' markers). */
  sections?: string[];
  /** Sections on in config/default that this variant comments out (WEBHOOK-SELFMANAGED with WEBHOOK-CERTMANAGER). */
  disabled?: string[];
  /** The chart values that select the same objects. */
  values: Record<string, unknown>;
  flags: Flag[];
}

export const variants: Variant[] = [
  { name: 'default', values: {}, flags: [] },
  { name: 'namespaced', overlay: 'namespaced', values: { watch: { scope: 'namespaced' } }, flags: ['namespaced'] },
  { name: 'sharded', overlay: 'sharded', values: { replicas: 3, sharding: { enabled: true } }, flags: ['sharded'] },
  { name: 'certmanager', sections: ['CERTMANAGER', 'METRICS-WITH-CERTS'], values: { certManager: { enabled: true } }, flags: ['certManager'] },
  { name: 'prometheus', sections: ['PROMETHEUS'], values: { prometheus: { serviceMonitor: { enabled: true } } }, flags: ['serviceMonitor'] },
  {
    name: 'prometheus+certmanager', sections: ['PROMETHEUS', 'CERTMANAGER', 'METRICS-WITH-CERTS'],
    values: { prometheus: { serviceMonitor: { enabled: true } }, certManager: { enabled: true } }, flags: ['serviceMonitor', 'certManager'],
  },
  { name: 'prometheus-rules', sections: ['PROMETHEUS-RULES'], values: { prometheus: { rules: { enabled: true } } }, flags: ['rules'] },
  { name: 'network-policy', sections: ['NETWORK-POLICY'], values: { networkPolicy: { enabled: true } }, flags: ['networkPolicy'] },
  { name: 'neutron', sections: ['NEUTRON'], values: { neutron: { enabled: true } }, flags: ['neutron'] },
  // Before webhooks-certmanager: where both change an object, the chart's `if` tests webhooks.enabled first.
  { name: 'no-webhooks', overlay: 'no-webhooks', values: { webhooks: { enabled: false } }, flags: ['noWebhooks'] },
  {
    name: 'webhooks-certmanager', sections: ['CERTMANAGER', 'METRICS-WITH-CERTS', 'WEBHOOK-CERTMANAGER'], disabled: ['WEBHOOK-SELFMANAGED'],
    values: { certManager: { enabled: true }, webhooks: { certificate: 'cert-manager' } }, flags: ['certManager', 'webhookCertManager'],
  },
];

/**
 * The cached tool directories of hack/build-tools.sh (never builds: run `make tools` first); `controlPlaneOnly`: only
 * the control plane's (kubectl), not helm; `node`: also the real node's (NODE_BIN_DIR).
 */
export async function toolDirs(opts: { controlPlaneOnly?: boolean; node?: boolean } = {}): Promise<Record<string, string>> {
  const args = ['--print-env', '--no-build', ...(opts.controlPlaneOnly ? ['--control-plane'] : []), ...(opts.node ? ['--node'] : [])];
  const { stdout } = await run('bash', [join(repoRoot, 'hack', 'build-tools.sh'), ...args], { cwd: repoRoot });
  return Object.fromEntries(stdout.trim().split('\n').map((l) => l.split('=', 2) as [string, string]));
}

/** `kubectl kustomize` of a variant: its overlay, on a copy of config/ with its sections enabled. */
export async function kustomizeBuild(variant: Variant, kubectl: string): Promise<K8sObject[]> {
  const copy = enabledConfigCopy(variant.sections ?? [], variant.disabled);
  try {
    const { stdout } = await run(kubectl, ['kustomize', join(copy, variant.overlay ?? 'default')], { maxBuffer: 64 << 20 });
    return loadAll(stdout) as K8sObject[];
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

/** An object's identity across builds: kind, namespace and name. */
export const identity = (o: K8sObject): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * Labels Helm's form adds or changes on every templated object's metadata (not on selectors or Pod templates):
 * `helm.sh/chart`, `app.kubernetes.io/instance` (the release) and `app.kubernetes.io/managed-by` (`Helm`, where
 * config/ says `kustomize` on some objects). The only other documented difference: the chart has no Namespace object
 * (Helm installs into `--namespace`, created with `--create-namespace`).
 */
export const helmOnlyLabels = ['helm.sh/chart', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by'];

/**
 * The annotation the chart puts on the CRDs it renders from templates/ (the Network CRD, whose conversion webhook names
 * the release's Service and namespace): `helm uninstall` leaves them, as it leaves crds/ (docs/helm.md).
 */
export const keepAnnotation = ['helm.sh/resource-policy', 'keep'] as const;

/**
 * Both forms' objects with the documented differences removed (a deep copy; the Namespace dropped; Helm's labels and
 * the keep annotation of templated CRDs removed).
 */
export function normalise(objects: K8sObject[]): K8sObject[] {
  return objects.filter((o) => o.kind !== 'Namespace').map((o) => {
    const c = structuredClone(o);
    const labels = c.metadata.labels;
    if (labels) {
      for (const l of helmOnlyLabels) delete labels[l];
      if (Object.keys(labels).length === 0) delete c.metadata.labels;
    }
    const annotations = c.metadata.annotations;
    if (c.kind === 'CustomResourceDefinition' && annotations?.[keepAnnotation[0]] === keepAnnotation[1]) {
      delete annotations[keepAnnotation[0]];
      if (Object.keys(annotations).length === 0) delete c.metadata.annotations;
    }
    return c;
  });
}

/**
 * The fields in which two values differ, as `path: a → b` lines (objects key by key, arrays index by index), empty
 * when they are equal.
 */
export function diffFields(a: unknown, b: unknown, path = ''): string[] {
  if (Array.isArray(a) && Array.isArray(b)) {
    const out: string[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) out.push(...diffFields(a[i], b[i], `${path}[${i}]`));
    return out;
  }
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const ra = a as Record<string, unknown>;
    const rb = b as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(ra), ...Object.keys(rb)])].sort();
    return keys.flatMap((k) => diffFields(ra[k], rb[k], path ? `${path}.${k}` : k));
  }
  return Object.is(a, b) ? [] : [`${path}: ${JSON.stringify(a)} → ${JSON.stringify(b)}`];
}
