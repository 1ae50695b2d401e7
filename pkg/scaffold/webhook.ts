/**
 * The files `ts-controller-manager create webhook` writes for one kind made by `create api`, and its marker edits,
 * in the layout of kubebuilder v4's `create webhook`: config/webhook (Service, manifests.yaml with the
 * Mutating/ValidatingWebhookConfiguration on kubebuilder's paths), config/certmanager (self-signed Issuer and the
 * Service's Certificate), config/default's [WEBHOOK] and [CERTMANAGER] sections (the manager patch, the CA injection
 * replacements) and, with --conversion, the CRD's conversion patch. Pure: names in, contents out (cli.ts does the I/O).
 *
 * Invariant: the paths in manifests.yaml are the library's (mutatePath/validatePath of pkg/webhook/paths.ts), the
 * ones the builder registers, so the configuration and the server cannot disagree.
 */
import { convertPath, mutatePath, validatePath } from '../webhook/paths.ts';
import type { ApiNames } from './api.ts';

export interface WebhookFlags {
  defaulting: boolean;
  validation: boolean;
  /** The CRD's versions when --conversion: the hub (the storage version) and the others (spokes). */
  conversion?: { hub: string; spokes: string[] };
}

/** Marker lines of the files create webhook writes once and then extends (each appears once in its file). */
export const webhookMarkers = {
  mutating: '# +scaffold:mutatingwebhooks',
  validating: '# +scaffold:validatingwebhooks',
  defaultResources: '# +scaffold:defaultresources',
  defaultSections: '# +scaffold:defaultsections',
  crdCaInjection: '# +scaffold:crdcainjection',
  configurations: '# +scaffold:webhookconfigurations',
} as const;

/** A webhook configuration document of manifests.yaml, with the marker its webhooks are inserted above. */
export function webhookConfiguration(kind: 'mutating' | 'validating'): string {
  return `---
apiVersion: admissionregistration.k8s.io/v1
kind: ${kind === 'mutating' ? 'Mutating' : 'Validating'}WebhookConfiguration
metadata:
  name: ${kind}-webhook-configuration
webhooks:
  ${webhookMarkers[kind]}
`;
}

export interface WebhookNames {
  webhookPath: string;
  testPath: string;
  mutatePath: string;
  validatePath: string;
  /** kubebuilder's webhook names: m<kind>-<version>.<domain-ish>, v<kind>-<version>.… */
  mutatingName: string;
  validatingName: string;
  conversionPatchPath: string;
}

export function webhookNames(n: ApiNames): WebhookNames {
  const gvk = { group: n.fullGroup, version: n.version, kind: n.kind };
  return {
    webhookPath: `webhooks/${n.file}_webhook.ts`,
    testPath: `webhooks/${n.file}_webhook.test.ts`,
    mutatePath: mutatePath(gvk),
    validatePath: validatePath(gvk),
    mutatingName: `m${n.file}-${n.version}.${n.fullGroup}`,
    validatingName: `v${n.file}-${n.version}.${n.fullGroup}`,
    conversionPatchPath: `config/crd/patches/webhook_in_${n.plural}.yaml`,
  };
}

/** The entry of one webhook in manifests.yaml (a list item under `webhooks:`), as controller-gen writes it. */
export function webhookEntry(n: ApiNames, kind: 'mutating' | 'validating'): string {
  const w = webhookNames(n);
  return `- name: ${kind === 'mutating' ? w.mutatingName : w.validatingName}
  admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: ${kind === 'mutating' ? w.mutatePath : w.validatePath}
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 15
  rules:
    - apiGroups: [${n.fullGroup}]
      apiVersions: [${n.version}]
      operations: [CREATE, UPDATE]
      resources: [${n.plural}]
      scope: Namespaced
`;
}

/** Files written by the first create webhook of a project (later ones only insert at their markers). */
export function webhookConfigFiles(repo: string): Record<string, string> {
  const labels = `  labels:\n    app.kubernetes.io/name: ${repo}\n`;
  return {
    'config/webhook/kustomization.yaml': `# The webhook configurations and the Service the API server calls (config/default includes it: [WEBHOOK]).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - manifests.yaml
  - service.yaml
configurations:
  - kustomizeconfig.yaml
`,
    'config/webhook/kustomizeconfig.yaml': `# Teaches kustomize the Service references inside the webhook configurations (name prefix, namespace).
nameReference:
  - kind: Service
    version: v1
    fieldSpecs:
      - kind: MutatingWebhookConfiguration
        group: admissionregistration.k8s.io
        path: webhooks/clientConfig/service/name
      - kind: ValidatingWebhookConfiguration
        group: admissionregistration.k8s.io
        path: webhooks/clientConfig/service/name
namespace:
  - kind: MutatingWebhookConfiguration
    group: admissionregistration.k8s.io
    path: webhooks/clientConfig/service/namespace
    create: true
  - kind: ValidatingWebhookConfiguration
    group: admissionregistration.k8s.io
    path: webhooks/clientConfig/service/namespace
    create: true
`,
    'config/webhook/service.yaml': `# The manager's webhook server (--webhook-bind-address :9443) behind a Service on 443.
apiVersion: v1
kind: Service
metadata:
  name: webhook-service
  namespace: system
${labels}spec:
  selector:
    app.kubernetes.io/name: ${repo}
    control-plane: controller-manager
  ports:
    - name: webhook
      port: 443
      protocol: TCP
      targetPort: 9443
`,
    'config/webhook/manifests.yaml': `# The webhook configurations; \`ts-controller-manager create webhook\` adds each (once, when its first webhook
# comes) above the marker, and each webhook above the marker in its list. The paths are the ones
# mgr.webhook(type).withDefaulter/withValidator registers (kubebuilder's: /mutate-<group>-<version>-<kind>).
${webhookMarkers.configurations}
`,
    'config/certmanager/kustomization.yaml': `# [CERTMANAGER] The webhook Service's serving certificate, issued by cert-manager into Secret webhook-server-cert.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - issuer.yaml
  - certificate.yaml
configurations:
  - kustomizeconfig.yaml
`,
    'config/certmanager/issuer.yaml': `# A self-signed issuer (replace with your own, e.g. a CA Issuer or a ClusterIssuer).
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: selfsigned-issuer
  namespace: system
${labels}spec:
  selfSigned: {}
`,
    'config/certmanager/certificate.yaml': `# The webhook Service's certificate. config/default's replacements fill in the Service's name and namespace
# (SERVICE_NAME.SERVICE_NAMESPACE.svc) and put this Certificate's namespace/name in the webhook configurations'
# cert-manager.io/inject-ca-from annotation, so cert-manager's cainjector writes their caBundle.
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: serving-cert
  namespace: system
${labels}spec:
  dnsNames:
    - SERVICE_NAME.SERVICE_NAMESPACE.svc
    - SERVICE_NAME.SERVICE_NAMESPACE.svc.cluster.local
  issuerRef:
    kind: Issuer
    name: selfsigned-issuer
  secretName: webhook-server-cert
`,
    'config/certmanager/kustomizeconfig.yaml': `# The Issuer reference inside the Certificate follows the Issuer's name prefix.
nameReference:
  - kind: Issuer
    group: cert-manager.io
    fieldSpecs:
      - kind: Certificate
        group: cert-manager.io
        path: spec/issuerRef/name
`,
    'config/default/manager_webhook_patch.yaml': `# [WEBHOOK] The manager serves the webhooks on :9443 with the certificate cert-manager writes into Secret
# webhook-server-cert, mounted where --webhook-cert-path points.
- op: add
  path: /spec/template/spec/containers/0/args/-
  value: --webhook-cert-path=/tmp/k8s-webhook-server/serving-certs
- op: add
  path: /spec/template/spec/containers/0/ports/-
  value: {name: webhook-server, containerPort: 9443, protocol: TCP}
- op: add
  path: /spec/template/spec/containers/0/volumeMounts/-
  value: {name: webhook-certs, mountPath: /tmp/k8s-webhook-server/serving-certs, readOnly: true}
- op: add
  path: /spec/template/spec/volumes/-
  value: {name: webhook-certs, secret: {secretName: webhook-server-cert}}
`,
  };
}

/** config/default/kustomization.yaml: the resources ([WEBHOOK], [CERTMANAGER]) and the patch/replacement sections. */
export function defaultInsertions(): { resources: string; sections: string } {
  const inject = (kind: string): string => `  - source: # the Certificate's namespace/name → ${kind}'s cert-manager.io/inject-ca-from
      kind: Certificate
      group: cert-manager.io
      version: v1
      name: serving-cert
      fieldPath: .metadata.namespace
    targets:
      - select:
          kind: ${kind}
        fieldPaths:
          - .metadata.annotations.[cert-manager.io/inject-ca-from]
        options:
          delimiter: '/'
          index: 0
          create: true
  - source:
      kind: Certificate
      group: cert-manager.io
      version: v1
      name: serving-cert
      fieldPath: .metadata.name
    targets:
      - select:
          kind: ${kind}
        fieldPaths:
          - .metadata.annotations.[cert-manager.io/inject-ca-from]
        options:
          delimiter: '/'
          index: 1
          create: true
`;
  const dns = (field: string, index: number): string => `  - source: # the webhook Service's ${field.slice(1)} → the Certificate's DNS names
      kind: Service
      version: v1
      name: webhook-service
      fieldPath: ${field}
    targets:
      - select:
          kind: Certificate
          group: cert-manager.io
          version: v1
          name: serving-cert
        fieldPaths:
          - .spec.dnsNames.0
          - .spec.dnsNames.1
        options:
          delimiter: '.'
          index: ${index}
          create: true
`;
  return {
    resources: `# [WEBHOOK] the webhook configurations and their Service (create webhook)
- ../webhook
# [CERTMANAGER] the Service's certificate, issued by cert-manager (install cert-manager first)
- ../certmanager`,
    sections: `# [WEBHOOK] the manager serves the webhooks with the certificate mounted from Secret webhook-server-cert.
patches:
  - path: manager_webhook_patch.yaml
    target:
      kind: Deployment
# [CERTMANAGER] names filled in after prefix and namespace: the Certificate's DNS names, and cert-manager's CA
# injection annotations on the webhook configurations (and on the CRDs with a conversion webhook).
replacements:
${dns('.metadata.name', 0)}${dns('.metadata.namespace', 1)}${inject('MutatingWebhookConfiguration')}${inject('ValidatingWebhookConfiguration')}  ${webhookMarkers.crdCaInjection}
`,
  };
}

/** The two replacements that put the Certificate in the CRD's cert-manager.io/inject-ca-from (conversion). */
export function crdCaInjection(n: ApiNames): string {
  const one = (field: string, index: number): string => `- source: # ${n.plural}.${n.fullGroup}'s conversion webhook CA (${field.slice(10)})
    kind: Certificate
    group: cert-manager.io
    version: v1
    name: serving-cert
    fieldPath: ${field}
  targets:
    - select:
        kind: CustomResourceDefinition
        name: ${n.plural}.${n.fullGroup}
      fieldPaths:
        - .metadata.annotations.[cert-manager.io/inject-ca-from]
      options:
        delimiter: '/'
        index: ${index}
        create: true
`;
  return one('.metadata.namespace', 0) + one('.metadata.name', 1);
}

/** config/crd/patches/webhook_in_<plural>.yaml: the CRD's conversion through the webhook Service's /convert. */
export function conversionPatch(n: ApiNames, versions: string[]): string {
  return `# ${n.plural}.${n.fullGroup}: conversion between ${versions.join(', ')} by the manager's webhook (${convertPath}).
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${n.plural}.${n.fullGroup}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          namespace: system
          name: webhook-service
          path: ${convertPath}
      conversionReviewVersions: [v1]
`;
}

/** The lines create webhook inserts into main.ts. */
export function mainWebhookInsertions(n: ApiNames): { imports: string; webhooks: string } {
  return {
    imports: `import { setup${n.kind}Webhook } from './${webhookNames(n).webhookPath}';`,
    webhooks: `setup${n.kind}Webhook(mgr);`,
  };
}

/** `webhooks/<kind>_webhook.ts`. */
export function webhookTs(n: ApiNames, f: WebhookFlags): string {
  const K = n.kind;
  const c = n.camel;
  const w = webhookNames(n);
  const parts: string[] = [];
  const doc: string[] = [];
  if (f.defaulting) {
    doc.push(` *  - defaulting (${w.mutatePath}): an empty or missing spec.foo becomes ${c}DefaultFoo;`);
    parts.push(`    // Defaulting: gets a deep copy of the object; what is changed here goes back as a JSON patch.
    .withDefaulter((obj) => {
      if (!obj.spec?.foo) obj.spec = { ...obj.spec, foo: ${c}DefaultFoo };
    })`);
  }
  if (f.validation) {
    doc.push(` *  - validation (${w.validatePath}): spec.foo must be lower-case letters, digits and '-' (a denial is the
 *    API error the client sees); changing it is allowed with a warning (kubectl prints it); deletes are not checked.`);
    parts.push(`    // Validation: return nothing (allowed), warnings (allowed, shown by kubectl) or denied(message) (refused).
    .withValidator({
      validateCreate: (obj) => checkFoo(obj),
      validateUpdate: (oldObj, obj) => {
        const refused = checkFoo(obj);
        if (refused) return refused;
        return oldObj.spec?.foo !== obj.spec?.foo ? [\`spec.foo changed from \${JSON.stringify(oldObj.spec?.foo)} to \${JSON.stringify(obj.spec?.foo)}: its ConfigMap follows\`] : [];
      },
      // validateDelete left out: deletes are allowed.
    })`);
  }
  if (f.conversion) {
    const hub = f.conversion.hub;
    doc.push(` *  - conversion (${convertPath}): hub ${hub} (the storage version); ${f.conversion.spokes.join(', ')} ${f.conversion.spokes.length === 1 ? 'converts' : 'convert'} to
 *    and from it. The functions below copy the object (the library sets apiVersion) — write your versions' field mapping.`);
    const spokes = f.conversion.spokes.map((v) => `        ${v}: {
          // ${v} → ${hub}: map the fields that differ (the library sets apiVersion and keeps metadata).
          toHub: (obj) => structuredClone(obj),
          // ${hub} → ${v}.
          fromHub: (hub) => structuredClone(hub),
        },`).join('\n');
    parts.push(`    // Conversion: every version converts to and from the hub; the API server calls ${convertPath} for each read or
    // write in a version other than the stored one.
    .withConversion({
      hub: '${hub}',
      spokes: {
${spokes}
      },
    })`);
  }
  const imports = ['type ControllerManager', ...(f.validation ? ['denied', 'type Denied'] : [])].sort((a, b) => a.replace('type ', '').localeCompare(b.replace('type ', '')));
  return `/**
 * The ${K} webhooks (${n.fullGroup}/${n.version}), scaffolded by \`ts-controller-manager create webhook\`: a working
 * starting point — replace the rules with your own.
${doc.join('\n')}
 * The API server calls them as config/webhook/manifests.yaml says (kubebuilder's paths, which the builder registers).
 */
import ${f.validation ? `{ ${imports.join(', ')} }` : 'type { ControllerManager }'} from 'ts-controller-manager';
import { ${c}Kind, type ${K} } from '../${n.typesPath}';
${f.defaulting ? `
/** What the defaulter puts in an empty spec.foo. */
export const ${c}DefaultFoo = 'default';
` : ''}${f.validation ? `
const fooPattern = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** spec.foo's rule (the CRD's schema already checks its type and length). */
function checkFoo(obj: ${K}): Denied | undefined {
  const foo = obj.spec?.foo;
  if (foo === undefined || foo === '' || fooPattern.test(foo)) return undefined;
  return denied(\`spec.foo \${JSON.stringify(foo)} must consist of lower-case letters, digits and '-', and start and end with a letter or digit\`);
}
` : ''}
/** Registers the ${K} webhooks with the manager's webhook server (main.ts calls it unless ENABLE_WEBHOOKS=false). */
export function setup${K}Webhook(mgr: ControllerManager): void {
  mgr.webhook<${K}>({ group: '${n.fullGroup}', version: '${n.version}', kind: ${c}Kind })
${parts.join('\n')}
    .complete();
}
`;
}

/** `webhooks/<kind>_webhook.test.ts`: the webhooks called by a real kube-apiserver. */
export function webhookTestTs(n: ApiNames, f: WebhookFlags): string {
  const K = n.kind;
  const c = n.camel;
  const w = webhookNames(n);
  const ns = `test-${n.file}-webhook`;
  const tests: string[] = [];
  if (f.defaulting) tests.push(`test('the defaulter fills an empty spec.foo, and leaves a set one alone', async () => {
  const ${c}s = env.client.resource<${K}>(${c}Resource).namespace('${ns}');
  const empty = await ${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'empty' }, spec: {} });
  assert.equal(empty.spec?.foo, ${c}DefaultFoo);
  assert.equal((await ${c}s.get('empty')).spec?.foo, ${c}DefaultFoo, 'stored defaulted');
  const set = await ${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'set' }, spec: { foo: 'mine' } });
  assert.equal(set.spec?.foo, 'mine');
});
`);
  if (f.validation) tests.push(`test('the validator refuses a bad spec.foo on create and update with its message; a valid change is allowed', async () => {
  const ${c}s = env.client.resource<${K}>(${c}Resource).namespace('${ns}');
  await assert.rejects(${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'bad' }, spec: { foo: 'Not_Valid' } }),
    /admission webhook "${w.validatingName.replaceAll('.', '\\.')}" denied the request: spec\\.foo "Not_Valid" must consist of lower-case letters/);
  assert.equal(await ignoreNotFound(${c}s.get('bad')), undefined, 'nothing stored');

  await ${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'good' }, spec: { foo: 'good-1' } });
  await assert.rejects(${c}s.patch('good', { merge: { spec: { foo: 'UPPER' } } }), /denied the request: spec\\.foo "UPPER"/);
  const changed = await ${c}s.patch('good', { merge: { spec: { foo: 'good-2' } } });
  assert.equal(changed.spec?.foo, 'good-2');
});
`);
  return `/**
 * The ${K} webhooks called by a real etcd + kube-apiserver (ts-controller-manager/testing): the environment installs
 * config/webhook — the webhook configurations as they are deployed, their Service reference pointed at this process
 * with the environment's CA as caBundle — and the manager serves the webhooks in this process on the address and
 * certificate the environment made for it. Everything is checked through the API, as kubectl sees it. Add a case for
 * each rule you give the webhooks.
 *   npm test   (or: node --test ${w.testPath})
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ControllerManager, coreResources, ignoreNotFound, silentLogger } from 'ts-controller-manager';
import { startTestEnv, type TestEnv } from 'ts-controller-manager/testing';
import { apiVersion, ${c}Kind, ${c}Resource, type ${K} } from '../${n.typesPath}';
import { ${f.defaulting ? `${c}DefaultFoo, ` : ''}setup${K}Webhook } from './${n.file}_webhook.ts';

let env: TestEnv;
const stop = new AbortController();
let manager: Promise<number> | undefined;

before(async () => {
  const project = join(import.meta.dirname, '..');
  env = await startTestEnv({
    crdPaths: [join(project, 'config', 'crd', 'bases')],
    webhooks: { paths: [join(project, 'config', 'webhook')] },
  });
  console.log(\`control plane ready in \${(env.startMs / 1000).toFixed(1)} s\`);
  const serving = env.webhook;
  assert.ok(serving, 'the environment serves webhooks');
  const mgr = new ControllerManager({
    kubeConfig: env.kubeConfig, logger: silentLogger, webhook: { bindAddress: serving.bindAddress, certDir: serving.certDir },
  });
  setup${K}Webhook(mgr);
  manager = mgr.start(stop.signal);
  // The API server loads webhook configurations asynchronously: from here on it calls this process's webhooks.
  await env.waitForWebhooks();
  await env.client.resource(coreResources.namespaces).create({ metadata: { name: '${ns}' } });
});

after(async () => {
  stop.abort();
  await manager;
  await env?.stop();
});


${tests.join('\n')}`;
}
