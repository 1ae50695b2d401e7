/**
 * Public API of the informer machinery. Typical controller wiring:
 *
 *   const factory = new SharedInformerFactory({ client, namespaces: parseWatchNamespace(process.env.WATCH_NAMESPACE) });
 *   const deployments = factory.informerFor<V1Deployment>(coreResources.deployments);
 *   deployments.addIndexers(controllerOwnerUIDIndex);
 *   const reg = deployments.addEventHandler({ onAdd: (d) => queue.add(metaNamespaceKey(d)), … });
 *   void factory.run(signal);
 *   await factory.waitForCacheSync({ timeoutMs: 60_000 }) && reg.hasSynced();
 *   deployments.lister().get('default', 'web'); deployments.getIndexer().byIndex(CONTROLLER_OWNER_UID_INDEX, uid);
 *
 * Resource types, paths, keys and label selectors come from pkg/apimachinery (the lowest room).
 */
export * from './object.ts';
export * from './watchdecoder.ts';
export * from './indexer.ts';
export * from './ownerindex.ts';
export * from './lister.ts';
export * from './deltaqueue.ts';
export * from './reflectorstate.ts';
export * from './listwatch.ts';
export * from './reflector.ts';
export * from './watchcounter.ts';
export * from './listener.ts';
export * from './handlererrors.ts';
export * from './waitforsync.ts';
export * from './sharedinformer.ts';
export * from './factory.ts';
