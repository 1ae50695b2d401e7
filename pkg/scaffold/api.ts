/**
 * The files `ts-controller-manager create api` writes for one kind, and the marker-based edits it makes to files
 * `init` wrote. Pure: names in, contents out (cli.ts does the I/O).
 *
 * Marker edits (`insertAbove`) are idempotent: a block already present anywhere in the file is not inserted again,
 * so re-running a step, or two kinds sharing a line, never duplicates it; a missing marker is an error naming the
 * file and the marker (the user removed it: we do not guess where the block goes).
 */
import { lowerCamel } from '../codegen/types.ts';
import { fileName } from './names.ts';

export interface ApiOptions {
  /** The short group as given (`webapp`); the API group is `${group}.${domain}`. */
  group: string;
  domain: string;
  version: string;
  kind: string;
  plural: string;
}

export interface ApiNames extends ApiOptions {
  /** The API group: group.domain. */
  fullGroup: string;
  /** lowerCamel(kind): the prefix of the generated constants (guestbookResource, guestbookKind). */
  camel: string;
  /** The kind in lower case: file names, the controller name. */
  file: string;
  /** Path of the generated types module, relative to the project. */
  typesPath: string;
  crdPath: string;
  samplePath: string;
  controllerPath: string;
  testPath: string;
  /** The controller's perturbation test (explore), next to its test. */
  exploreTestPath: string;
}

export function apiNames(o: ApiOptions): ApiNames {
  const fullGroup = `${o.group}.${o.domain}`;
  const file = fileName(o.kind);
  return {
    ...o, fullGroup, camel: lowerCamel(o.kind), file,
    // gen types writes DIR/<first label of the group>/<version>/ — the first label of `group.domain` is `group`'s.
    typesPath: `api/${fullGroup.split('.')[0] ?? o.group}/${o.version}/zz_generated.types.ts`,
    crdPath: `config/crd/bases/${fullGroup}_${o.plural}.yaml`,
    samplePath: `config/samples/${o.group}_${o.version}_${file}.yaml`,
    controllerPath: `controllers/${file}.ts`,
    testPath: `controllers/${file}.test.ts`,
    exploreTestPath: `controllers/${file}.explore.test.ts`,
  };
}

/** Inserts `block` (one or more lines) above the line holding `marker`, with that line's indentation; see top. */
export function insertAbove(text: string, marker: string, block: string, file: string): string {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l.trim() === marker);
  if (at < 0) throw new Error(`${file}: marker line "${marker}" not found (create api inserts above it; restore it)`);
  const indent = /^\s*/.exec(lines[at] ?? '')?.[0] ?? '';
  const blockLines = block.replace(/\n$/, '').split('\n').map((l) => (l === '' ? l : indent + l));
  if (text.includes(blockLines.join('\n'))) return text;
  lines.splice(at, 0, ...blockLines);
  return lines.join('\n');
}

export function crdYaml(n: ApiNames): string {
  return `# The ${n.kind} API (${n.fullGroup}/${n.version}), scaffolded by ts-controller-manager create api. This schema is the
# source of truth: edit it, then \`npm run generate\` rewrites ${n.typesPath}.
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${n.plural}.${n.fullGroup}
spec:
  group: ${n.fullGroup}
  scope: Namespaced
  names:
    kind: ${n.kind}
    listKind: ${n.kind}List
    plural: ${n.plural}
    singular: ${n.file}
  versions:
    - name: ${n.version}
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - name: Ready
          type: string
          jsonPath: .status.conditions[?(@.type=="Ready")].status
        - name: Age
          type: date
          jsonPath: .metadata.creationTimestamp
      schema:
        openAPIV3Schema:
          type: object
          description: ${n.kind} is the Schema for the ${n.plural} API.
          properties:
            spec:
              type: object
              description: The desired state of a ${n.kind}.
              properties:
                foo:
                  type: string
                  maxLength: 253
                  description: An example field (the controller copies it into a ConfigMap); replace with your own.
            status:
              type: object
              description: The observed state of a ${n.kind}, written by its controller (status subresource).
              properties:
                conditions:
                  type: array
                  description: "Ready: the ${n.kind}'s ConfigMap is as its spec says."
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [type]
                  items:
                    type: object
                    required: [type, status]
                    properties:
                      type:
                        type: string
                      status:
                        type: string
                        enum: ["True", "False", "Unknown"]
                      reason:
                        type: string
                      message:
                        type: string
                      observedGeneration:
                        type: integer
                        format: int64
                      lastTransitionTime:
                        type: string
                        format: date-time
`;
}

export function sampleYaml(n: ApiNames): string {
  return `apiVersion: ${n.fullGroup}/${n.version}
kind: ${n.kind}
metadata:
  name: ${n.file}-sample
spec:
  foo: bar
`;
}

export function controllerTs(n: ApiNames): string {
  const K = n.kind;
  const c = n.camel;
  return `/**
 * The ${K} controller (${n.fullGroup}/${n.version}), scaffolded by \`ts-controller-manager create api\`: a working
 * starting point that shows the library's reconcile helpers — replace the ConfigMap with what your ${K} manages, and
 * grow its unit test (${n.file}.test.ts) with it.
 *
 * For each ${K}:
 *  - a finalizer (finalizer()) is added before anything is created, and removed only after cleanup ran; the
 *    ConfigMap also carries an ownerReference, so the garbage collector deletes it even when the API server deletes a
 *    ${K} without waiting for the finalizer (a DELETE under way while it was added: kubernetes#77988). Cleanup of
 *    things outside the cluster needs BypassedFinalizers too (see finalizer()'s doc);
 *  - apply: a ConfigMap of the ${K}'s name holding spec.foo, controlled by the ${K} (createOrPatch: created, or
 *    patched with only the difference; setControllerReference), and status.conditions Ready=True with the
 *    generation it reflects. A ConfigMap of that name that this ${K} does not control (someone else's) is never
 *    touched: Ready=False (ConfigMapExists) until it goes;
 *  - cleanup (the ${K} is being deleted): the ConfigMap is deleted — in a cluster its ownerReference would let the
 *    garbage collector do that too, but your own cleanup (outside the cluster) goes here;
 *  - Events (\`kubectl describe\` lists them): ConfigMapCreated, ConfigMapUpdated, ConfigMapDeleted, and the Warning
 *    ConfigMapExists.
 * \`.owns(configMaps)\` requeues the ${K} whenever its ConfigMap changes, so a hand edit is undone.
 */
import {
  controllerOf, coreResources, createOrPatch, finalizer, ignoreNotFound, setControllerReference, setStatusCondition,
  type ControllerManager, type KubeObject, type Reconciler, type ReconcilerHost,
} from 'ts-controller-manager';
import { apiVersion, ${c}Kind, ${c}Resource, type ${K} } from '../${n.typesPath}';

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** The finalizer this controller keeps on every ${K}. */
export const ${c}Finalizer = '${n.fullGroup}/finalizer';

/**
 * The ${K} reconciler on any ReconcilerHost: the manager (setup${K}Controller below), or a FakeClient's host() in its
 * unit test. Reads come from the host's shared caches; writes and Events go through the host.
 */
export function ${c}Reconciler(host: ReconcilerHost): Reconciler {
  const ${c}s = host.informer<${K}>(${c}Resource).lister();
  const ${c}Api = host.client.resource<${K}>(${c}Resource);
  const configMapApi = host.client.resource<ConfigMap>(coreResources.configMaps);
  const recorder = host.recorderFor('${n.file}-controller');

  return async ({ namespace, name }, signal, { log }) => {
    const current = ${c}s.get(namespace, name);
    if (!current) return; // deleted: its finalizer already cleaned up
    // The ${K} as an owner and as the subject of Events: cached objects lack apiVersion and kind.
    const self = { ...current, apiVersion, kind: ${c}Kind };
    const api = ${c}Api.namespace(namespace);
    const configMaps = configMapApi.namespace(namespace);

    /** Sets the Ready condition; writes the status only when it changed (lastTransitionTime moves only on a flip). */
    async function setReady(obj: ${K}, status: 'True' | 'False', reason: string, message: string): Promise<void> {
      const conditions = structuredClone(obj.status?.conditions ?? []);
      if (!setStatusCondition(conditions, { type: 'Ready', status, reason, message, observedGeneration: obj.metadata?.generation })) return;
      await api.status().patch(name, { merge: { status: { conditions } } }, { signal });
      log.info({ ready: status, reason }, message);
    }

    return finalizer(api, current, ${c}Finalizer, {
      apply: async (obj) => {
        // createOrPatch reads the ConfigMap from the API server and hands it (or a new one) to this function; only
        // what it changes is sent, fenced by the resourceVersion read: a change landing after the read (someone
        // taking the ConfigMap over) fails the patch with 409 and the reconcile retries. One that exists and that
        // this ${K} does not control is left as it is (nothing changed: no request).
        let foreign = false;
        const { result } = await createOrPatch(configMaps, { metadata: { name } }, (cm) => {
          if (cm.metadata?.uid && controllerOf(cm)?.uid !== obj.metadata?.uid) {
            foreign = true;
            return;
          }
          cm.data = { foo: obj.spec?.foo ?? '' };
          setControllerReference(self, cm);
        }, { signal });
        if (foreign) {
          const message = \`ConfigMap \${name} exists and is not controlled by this ${K}\`;
          recorder.event(self, 'Warning', 'ConfigMapExists', message);
          return setReady(obj, 'False', 'ConfigMapExists', message);
        }
        if (result === 'created') recorder.event(self, 'Normal', 'ConfigMapCreated', \`ConfigMap \${name} created\`);
        else if (result !== 'unchanged') recorder.event(self, 'Normal', 'ConfigMapUpdated', \`ConfigMap \${name} updated\`);
        return setReady(obj, 'True', 'Reconciled', \`ConfigMap \${name} is up to date\`);
      },
      cleanup: async (obj) => {
        // Read the API server, not the cache (a ConfigMap made a moment ago may not be cached yet); delete only ours.
        const cm = await ignoreNotFound(configMaps.get(name, { signal }));
        if (cm && controllerOf(cm)?.uid === obj.metadata?.uid) {
          await ignoreNotFound(configMaps.delete(name, { preconditions: { uid: cm.metadata?.uid }, signal }));
          recorder.event(self, 'Normal', 'ConfigMapDeleted', \`ConfigMap \${name} deleted\`);
        }
      },
    }, { signal });
  };
}

/** Registers the ${K} controller with the manager (main.ts's setup calls it before mgr.run()). */
export function setup${K}Controller(mgr: ControllerManager): void {
  mgr.controller('${n.file}')
    .for<${K}>(${c}Resource)
    .owns(coreResources.configMaps) // a change to a ConfigMap it controls requeues its ${K}
    // What the reconciler calls beyond its informers (their list and watch, and the Events, need no line here):
    // \`npm run generate\` writes config/rbac/role.yaml from it, and main.test.ts runs the manager with only that role —
    // a call missing here fails it, naming the line to add.
    .rbac(
      { resource: ${c}Resource, verbs: ['get', 'patch'], why: 'finalizer add/remove (re-read when stale)' },
      { resource: ${c}Resource, subresource: 'status', verbs: ['patch'], why: 'the Ready condition' },
      { resource: coreResources.configMaps, verbs: ['get', 'create', 'patch', 'delete'], why: 'createOrPatch, cleanup' },
    )
    .complete(${c}Reconciler(mgr));
}
`;
}

export function controllerTestTs(n: ApiNames): string {
  const K = n.kind;
  const c = n.camel;
  const a = /^[AEIOU]/.test(K) ? 'an' : 'a';
  return `/**
 * Unit tests of the ${K} reconciler: ${c}Reconciler (${n.file}.ts) called directly on a FakeClient from
 * ts-controller-manager/testing — an in-memory API server serving this project's CRDs: no control plane, milliseconds
 * per test. Each step reconciles once, as the manager does after a change, then checks what the API holds and which
 * Events were recorded. Add a test for each behaviour you give the reconciler.
 * What the fake does not do — webhooks, RBAC, garbage collection, the caches' lag — is checked on a real API server by
 * main.test.ts (the manager as main.ts runs it) and the webhook tests; crashes and stale views by
 * ${n.file}.explore.test.ts.
 *   npm test   (or: node --test ${n.testPath})
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { coreResources, findStatusCondition, ignoreNotFound, type KubeObject } from 'ts-controller-manager';
import { FakeClient, reconcileContext } from 'ts-controller-manager/testing';
import { apiVersion, ${c}Kind, ${c}Resource, type ${K} } from '../${n.typesPath}';
import { ${c}Finalizer, ${c}Reconciler } from './${n.file}.ts';

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** A fresh fake API server with the CRDs and namespace \`demo\`, the reconciler on it, and the tests' shorthands. */
async function setup() {
  const fake = new FakeClient({ crdPaths: [join(import.meta.dirname, '..', 'config', 'crd', 'bases')] });
  await fake.resource(coreResources.namespaces).create({ metadata: { name: 'demo' } });
  const reconcile = ${c}Reconciler(fake.host());
  return {
    ${c}s: fake.resource<${K}>(${c}Resource).namespace('demo'),
    configMaps: fake.resource<ConfigMap>(coreResources.configMaps).namespace('demo'),
    /** One reconcile of demo/<name>, as the manager runs it after a change of that ${K} or of its ConfigMap. */
    reconcile: (name: string) => reconcile({ namespace: 'demo', name }, AbortSignal.timeout(10_000), reconcileContext(\`demo/\${name}\`)),
    /** The Events recorded so far, as "<type> <reason>". */
    events: () => fake.objects<KubeObject & { type?: string; reason?: string }>(coreResources.events).map((e) => \`\${e.type} \${e.reason}\`),
  };
}

test('${a} ${K} gets its ConfigMap, the finalizer and Ready=True; a spec change and a hand edit are followed', async () => {
  const { ${c}s, configMaps, reconcile, events } = await setup();
  const created = await ${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'sample' }, spec: { foo: 'bar' } });
  await reconcile('sample');

  const cm = await configMaps.get('sample');
  assert.deepEqual(cm.data, { foo: 'bar' });
  assert.deepEqual(cm.metadata?.ownerReferences, [{
    apiVersion, kind: ${c}Kind, name: 'sample', uid: created.metadata?.uid, controller: true, blockOwnerDeletion: true,
  }]);
  const stored = await ${c}s.get('sample');
  assert.deepEqual(stored.metadata?.finalizers, [${c}Finalizer]);
  const ready = findStatusCondition(stored.status?.conditions, 'Ready');
  assert.deepEqual([ready?.status, ready?.reason, ready?.observedGeneration], ['True', 'Reconciled', 1]);
  assert.deepEqual(events(), ['Normal ConfigMapCreated']);

  // A spec change reaches the ConfigMap, and Ready reports the new generation.
  await ${c}s.patch('sample', { merge: { spec: { foo: 'baz' } } });
  await reconcile('sample');
  assert.deepEqual((await configMaps.get('sample')).data, { foo: 'baz' });
  assert.equal(findStatusCondition((await ${c}s.get('sample')).status?.conditions, 'Ready')?.observedGeneration, 2);

  // A hand edit of the ConfigMap is undone (in the manager its change requeues the ${K}: .owns in setup${K}Controller).
  await configMaps.patch('sample', { merge: { data: { foo: 'edited' } } });
  await reconcile('sample');
  assert.deepEqual((await configMaps.get('sample')).data, { foo: 'baz' });
  assert.deepEqual(events(), ['Normal ConfigMapCreated', 'Normal ConfigMapUpdated']);

  // Nothing changed since: a further reconcile writes nothing.
  const before = [(await ${c}s.get('sample')).metadata?.resourceVersion, (await configMaps.get('sample')).metadata?.resourceVersion];
  await reconcile('sample');
  assert.deepEqual([(await ${c}s.get('sample')).metadata?.resourceVersion, (await configMaps.get('sample')).metadata?.resourceVersion], before);
});

test('deleting ${a} ${K}: cleanup deletes its ConfigMap, then the finalizer goes and with it the ${K}', async () => {
  const { ${c}s, configMaps, reconcile, events } = await setup();
  await ${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'sample' }, spec: { foo: 'bar' } });
  await reconcile('sample');
  await ${c}s.delete('sample'); // held by the finalizer: only deletionTimestamp is set
  await reconcile('sample');
  assert.equal(await ignoreNotFound(configMaps.get('sample')), undefined);
  assert.equal(await ignoreNotFound(${c}s.get('sample')), undefined);
  assert.deepEqual(events(), ['Normal ConfigMapCreated', 'Normal ConfigMapDeleted']);
});

test('a ConfigMap of the same name that another owner controls is left alone: Ready=False ConfigMapExists and a Warning', async () => {
  const { ${c}s, configMaps, reconcile, events } = await setup();
  const foreignOwner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: '00000000-0000-0000-0000-000000000001', controller: true };
  await configMaps.create({ metadata: { name: 'taken', ownerReferences: [foreignOwner] }, data: { mine: 'yes' } });
  await ${c}s.create({ apiVersion, kind: ${c}Kind, metadata: { name: 'taken' }, spec: { foo: 'bar' } });
  await reconcile('taken');
  const refused = findStatusCondition((await ${c}s.get('taken')).status?.conditions, 'Ready');
  assert.deepEqual([refused?.status, refused?.reason], ['False', 'ConfigMapExists']);
  assert.deepEqual((await configMaps.get('taken')).data, { mine: 'yes' }, 'the foreign ConfigMap is untouched');
  assert.deepEqual(events(), ['Warning ConfigMapExists']);

  await ${c}s.delete('taken');
  await reconcile('taken');
  assert.equal(await ignoreNotFound(${c}s.get('taken')), undefined);
  assert.deepEqual((await configMaps.get('taken')).data, { mine: 'yes' }, 'cleanup left the foreign ConfigMap alone');
});
`;
}

/** The controller's perturbation test: its setup under every plan of `explore` (ts-controller-manager/testing). */
export function controllerExploreTestTs(n: ApiNames): string {
  const K = n.kind;
  const c = n.camel;
  return `/**
 * The ${K} controller under perturbation (ts-controller-manager/testing's explore): its setup — the code main.ts runs —
 * against an in-memory API server, once as is and then once per perturbation derived from that run: the manager
 * crashing right before or right after each of its writes (and restarting), its view of a resource lagging behind,
 * intermediate states it never sees, a write answered 409, or answered 500 / not at all after it was applied. Every run
 * must end where the unperturbed one did; a finding names the plan and prints a one-line replay command.
 * Grow the workload with your controller: what your users do to a ${K}, with settle() where they would wait.
 *   npm test   (or: node --test ${n.exploreTestPath})
 */
import { join } from 'node:path';
import { test } from 'node:test';
import { create, explore, expectNoFindings, patch, remove, settle } from 'ts-controller-manager/testing';
import { apiVersion, ${c}Kind, type ${K} } from '../${n.typesPath}';
import { setup${K}Controller } from './${n.file}.ts';

test('the ${K} controller: no finding under crashes, stale views, unobserved states and write faults', async () => {
  const namespace = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } };
  const sample: ${K} = { apiVersion, kind: ${c}Kind, metadata: { namespace: 'demo', name: 'sample' }, spec: { foo: 'bar' } };
  const report = await explore({
    crdPaths: [join(import.meta.dirname, '..', 'config', 'crd', 'bases')],
    setup: (mgr) => setup${K}Controller(mgr),
    workload: [create(namespace), create(sample), settle(), patch(sample, { spec: { foo: 'baz' } }), settle(), remove(sample)],
  });
  expectNoFindings(report);
});
`;
}

/** The lines `create api` inserts into main.ts at its two markers. */
export function mainInsertions(n: ApiNames): { imports: string; controllers: string } {
  return {
    imports: `import { setup${n.kind}Controller } from './${n.controllerPath}';`,
    controllers: `setup${n.kind}Controller(mgr);`,
  };
}
