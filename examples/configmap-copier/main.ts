/**
 * configmap-copier: copies every ConfigMap labelled `copier.example.com/source=true` into each namespace labelled
 * `copier.example.com/receive=true`, keeps the copies in sync, and deletes them (then its finalizer) when the source
 * is deleted or unlabelled. Level-based: a copy whose source is gone (or is another object of that name now) is deleted
 * whenever the copier looks at that name — a copy made from a stale cache after the source went (a new leader's first
 * reconcile) does not outlive it. Built only on the public entry point of ts-controller-manager.
 *   KUBECONFIG=… node main.ts      (env: WATCH_NAMESPACE, PROBE_ADDRESS, LEADER_ELECTION_NAMESPACE)
 *   ts-controller-manager gen rbac --out rbac --setup setupCopier main.ts   # rbac/: the RBAC it declares
 */
import {
  ControllerManager, coreResources, ignoreNotFound, keyOf, parseSelector, parseWatchNamespace, selectorFromSet, type Reconciler,
} from 'ts-controller-manager';
import type { ConfigMap, Namespace } from 'ts-controller-manager/api/core/v1';

const { configMaps, namespaces } = coreResources;
const isSource = selectorFromSet({ 'copier.example.com/source': 'true' });
const isReceiver = selectorFromSet({ 'copier.example.com/receive': 'true' });
const copyOf = 'copier.example.com/copy-of'; // label on each copy: its source's UID
const isCopy = parseSelector(copyOf);
const sourceKey = 'copier.example.com/source'; // annotation on each copy: "namespace/name" of its source
const finalizer = 'copier.example.com/copies';

/** Declares the copier on `mgr` (main below; a test may run it on its own manager). */
export function setupCopier(mgr: ControllerManager): void {
  const cms = mgr.informer<ConfigMap>(configMaps).lister();
  const nss = mgr.informer<Namespace>(namespaces).lister();
  const api = mgr.client.resource<ConfigMap>(configMaps);
  const copiesOf = (src: ConfigMap): ConfigMap[] => cms.list(undefined, selectorFromSet({ [copyOf]: src.metadata?.uid ?? '' }));

  /** Copies made of the ConfigMap `key` other than `src` (undefined: none is cached): of a source gone, or an earlier one. */
  const orphansOf = (key: string, src: ConfigMap | undefined): ConfigMap[] => cms.list(undefined, isCopy)
    .filter((c) => c.metadata?.annotations?.[sourceKey] === key && c.metadata?.labels?.[copyOf] !== src?.metadata?.uid);
  const remove = async (copy: ConfigMap, signal: AbortSignal): Promise<void> => {
    await ignoreNotFound(api.namespace(copy.metadata?.namespace ?? '').delete(copy.metadata?.name ?? '', { preconditions: { uid: copy.metadata?.uid }, signal }));
  };

  const reconcile: Reconciler = async ({ namespace, name }, signal, { log }) => {
    const src = cms.get(namespace, name);
    // Copies reach this key through the watch below (their source annotation): one of no cached source is deleted.
    for (const copy of orphansOf(keyOf(namespace, name), src)) {
      await remove(copy, signal);
      log.info({ copy: keyOf(copy.metadata?.namespace, name) }, 'Deleted copy of a source gone');
    }
    const finalizers = src?.metadata?.finalizers ?? [];
    if (!src || (!isSource.matches(src.metadata?.labels) && !finalizers.includes(finalizer))) return;
    const setFinalizers = (list: string[]): Promise<unknown> => api.namespace(namespace)
      .patch(name, { merge: { metadata: { finalizers: list, resourceVersion: src.metadata?.resourceVersion } } }, { signal });
    const wanted = !src.metadata?.deletionTimestamp && isSource.matches(src.metadata?.labels);
    const want = new Set(wanted ? nss.list(undefined, isReceiver).map((n) => n.metadata?.name ?? '').filter((n) => n !== namespace) : []);
    if (want.size > 0 && !finalizers.includes(finalizer)) await setFinalizers([...finalizers, finalizer]);

    for (const copy of copiesOf(src)) {
      const ns = copy.metadata?.namespace ?? '';
      if (want.has(ns)) continue;
      await remove(copy, signal);
      log.info({ copy: keyOf(ns, name) }, 'Deleted copy');
    }
    for (const ns of want) {
      const copy = cms.get(ns, name);
      const metadata = { name, namespace: ns, labels: { [copyOf]: src.metadata?.uid ?? '' }, annotations: { [sourceKey]: keyOf(namespace, name) } };
      if (!copy) {
        await api.create({ metadata, data: src.data ?? {} }, { signal });
        log.info({ copy: keyOf(ns, name) }, 'Created copy');
      } else if (copy.metadata?.labels?.[copyOf] !== metadata.labels[copyOf]) {
        log.warn({ copy: keyOf(ns, name) }, 'A ConfigMap of that name exists and is not our copy; leaving it alone');
      } else if (JSON.stringify(copy.data ?? {}) !== JSON.stringify(src.data ?? {})) {
        await api.update({ metadata: { ...metadata, resourceVersion: copy.metadata?.resourceVersion }, data: src.data ?? {} }, { signal });
      }
    }
    // Deleted copies come back here through their delete events: the finalizer goes once none is left in the cache.
    if (want.size === 0 && finalizers.includes(finalizer) && copiesOf(src).length === 0) await setFinalizers(finalizers.filter((f) => f !== finalizer));
  };

  const sources = (): string[] => cms.list(undefined, isSource).map((cm) => keyOf(cm.metadata?.namespace, cm.metadata?.name ?? ''));
  mgr.controller('configmap-copier')
    .for<ConfigMap>(configMaps)
    .watches<ConfigMap>(configMaps, (copy) => [copy.metadata?.annotations?.[sourceKey] ?? ''].filter((k) => k !== ''))
    .watches<Namespace>(namespaces, sources)
    .rbac( // what the reconcile calls beyond its informers: gen rbac writes rbac/role.yaml from it
      { resource: configMaps, verbs: ['create', 'update', 'delete'], why: 'its copies' },
      { resource: configMaps, verbs: ['patch'], why: 'the finalizer on a source' },
    )
    .complete(reconcile);
}

if (import.meta.main) { // `node main.ts`; importing this file runs nothing
  const env = process.env;
  const mgr = new ControllerManager({
    namespaces: parseWatchNamespace(env['WATCH_NAMESPACE']),
    healthProbeBindAddress: env['PROBE_ADDRESS'] ?? ':8081',
    ...(env['LEADER_ELECTION_NAMESPACE'] ? { leaderElection: { id: 'configmap-copier', namespace: env['LEADER_ELECTION_NAMESPACE'] } } : {}),
  });
  setupCopier(mgr);
  process.exitCode = await mgr.run();
}
