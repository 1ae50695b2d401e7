/**
 * A gallery of small, DELIBERATELY BUGGY controllers (issue 40): each has one bug of a shape that hurts controllers in
 * production, and `explore` must report it in the right class (test/explore-gallery.test.ts). Every one is written
 * as a user would write it — the builder, the listers, the client — and each comment says what is wrong and what the
 * correct code does instead. Do not copy them.
 *
 * They reconcile Gizmos (gizmos-crd.yaml): `spec.version`, `spec.size`, a free-form status. Some keep "volumes" in a
 * Cloud (the world of the execution: an external system whose inventory is compared).
 */
import { coreResources } from '../../pkg/apimachinery/resource.ts';
import type { KubeObject } from '../../pkg/apimachinery/meta.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../../pkg/client/errors.ts';
import type { ControllerManager } from '../../pkg/runtime/manager.ts';
import { create, patch, remove, run, settle, type Step } from '../../pkg/testing/explore/workload.ts';

export const gizmoResource = { group: 'gallery.explore.example.com', version: 'v1', resource: 'gizmos', kind: 'Gizmo', namespaced: true } as const;
export const gizmoCRD = new URL('./gizmos-crd.yaml', import.meta.url).pathname;

export interface Gizmo extends KubeObject {
  spec?: { version?: number; size?: number };
  status?: Record<string, unknown>;
}

const FINALIZER = 'gallery.explore.example.com/cleanup';
const merge = { contentType: 'application/merge-patch+json' } as const;
const gizmoPath = (ns: string, name: string): string => `/apis/gallery.explore.example.com/v1/namespaces/${ns}/gizmos/${name}`;

/** A merge patch fenced by the resourceVersion it carries: false when the Gizmo is gone (404) or changed since (409). */
async function fencedPatch(mgr: ControllerManager, path: string, body: object, signal: AbortSignal): Promise<boolean> {
  try {
    await mgr.client.json('PATCH', path, { body, ...merge, signal });
    return true;
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return false;
    throw err;
  }
}

/**
 * Whether the cached Gizmo `g` is still current on the server: a patch that changes nothing, fenced by its
 * resourceVersion. Every fixed controller that makes a volume asks this first: a cache — a new leader's, after a
 * restart — may hold a Gizmo that is gone, and a volume made for it is never deleted.
 */
function confirmed(mgr: ControllerManager, g: Gizmo, signal: AbortSignal): Promise<boolean> {
  return fencedPatch(mgr, gizmoPath(g.metadata?.namespace ?? '', g.metadata?.name ?? ''), { metadata: { resourceVersion: g.metadata?.resourceVersion } }, signal);
}

/** The external system: volumes by name, each with the data a user wrote into it. Honours the caller's signal. */
export class Cloud {
  readonly volumes = new Map<string, { owner: string; data: string }>();

  ensure(name: string, owner: string, signal: AbortSignal): void {
    signal.throwIfAborted();
    if (!this.volumes.has(name)) this.volumes.set(name, { owner, data: '' });
  }

  delete(name: string, signal: AbortSignal): void {
    signal.throwIfAborted();
    this.volumes.delete(name);
  }

  /** What is compared: every volume and its data (owners are uids: normalized by explore). */
  inventory(): unknown {
    return [...this.volumes.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, v]) => ({ name, ...v }));
  }
}

const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'gallery' } };
const gizmo = (spec: Gizmo['spec'] = { version: 1 }): Gizmo => ({ apiVersion: 'gallery.explore.example.com/v1', kind: 'Gizmo', metadata: { namespace: 'gallery', name: 'g' }, spec });

/** One gallery entry: the controller, the workload that exposes it, and the class explore must report. */
export interface GalleryEntry {
  name: string;
  bug: string;
  expect: { kind: 'safety' | 'liveness'; class: 'intermediate-state' | 'stale-state' | 'unobserved-state' | 'reference'; summary?: RegExp };
  /** Declares the controller; `fixed`: with the correct code instead of the bug (explore must find nothing then). */
  setup(mgr: ControllerManager, cloud: Cloud, fixed: boolean): void;
  workload: Step[];
}

export const gallery: GalleryEntry[] = [
  {
    name: 'fresh-cache-duplicate',
    bug: 'relies on a fresh cache to avoid a duplicate create: a child made with generateName is looked up in the cache only',
    expect: { kind: 'safety', class: 'stale-state' },
    setup(mgr, _cloud, fixed) {
      const b = mgr.controller('fresh-cache').for<Gizmo>(gizmoResource).owns(coreResources.configMaps);
      const children = b.informerOf<KubeObject>(coreResources.configMaps).lister();
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g) return;
        const mine = children.list(namespace).filter((c) => c.metadata?.labels?.['gizmo'] === name);
        // BUG: the cache may not show a child created a moment ago; a generateName create is not fenced by name, so
        // this makes a second one. Correct: a deterministic child name (AlreadyExists fences it), or expectations.
        if (mine.length === 0) {
          const meta = fixed ? { name: `${name}-child` } : { generateName: `${name}-` };
          await mgr.client.json('POST', `/api/v1/namespaces/${namespace}/configmaps`, {
            body: { metadata: { ...meta, labels: { gizmo: name }, ownerReferences: [ownerRef(g)] } }, signal,
          }).catch((err: unknown) => {
            if (!(fixed && isAlreadyExists(err))) throw err;
          });
        }
        await mgr.client.json('PATCH', `${gizmoPath(namespace, name)}/status`, { body: { status: { children: Math.max(mine.length, 1) } }, ...merge, signal });
      });
    },
    workload: [create(ns), create(gizmo()), settle(), patch(gizmo(), { spec: { size: 2 } }), settle()],
  },
  {
    name: 'finalizer-before-cleanup',
    bug: 'removes its finalizer before the cleanup is durable: a crash in between leaks the volume',
    expect: { kind: 'safety', class: 'intermediate-state' },
    setup(mgr, cloud, fixed) {
      const b = mgr.controller('finalizer-first').for<Gizmo>(gizmoResource);
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g) return undefined;
        const m = g.metadata ?? {};
        if (m.deletionTimestamp) {
          if (!m.finalizers?.includes(FINALIZER)) return undefined;
          // BUG: the finalizer goes first; if the process dies before the delete below, nothing will ever delete
          // the volume. Correct: delete the volume, then remove the finalizer.
          if (fixed) cloud.delete(name, signal);
          await mgr.client.json('PATCH', gizmoPath(namespace, name), { body: { metadata: { resourceVersion: m.resourceVersion, finalizers: m.finalizers.filter((f) => f !== FINALIZER) } }, ...merge, signal });
          if (!fixed) cloud.delete(name, signal);
          return undefined;
        }
        if (!m.finalizers?.includes(FINALIZER)) {
          await mgr.client.json('PATCH', gizmoPath(namespace, name), { body: { metadata: { resourceVersion: m.resourceVersion, finalizers: [...(m.finalizers ?? []), FINALIZER] } }, ...merge, signal });
          return undefined;
        }
        if (fixed && !(await confirmed(mgr, g, signal))) return { requeue: true }; // (not this entry's bug: stale-cache-after-deletion's)
        cloud.ensure(name, m.uid ?? '', signal);
        return undefined;
      });
    },
    workload: [create(ns), create(gizmo()), settle(), remove(gizmo())],
  },
  {
    name: 'stale-read-after-recreate',
    bug: 'acts, after a restart, on a Gizmo that was deleted and re-created under the same name: it reads from the watch cache (resourceVersion=0) and deletes by name',
    expect: { kind: 'safety', class: 'stale-state' },
    setup(mgr, cloud, fixed) {
      const b = mgr.controller('stale-read').for<Gizmo>(gizmoResource);
      b.complete(async ({ namespace, name }, signal) => {
        if (!b.informer().lister().get(namespace, name)) return undefined;
        // BUG: a "cheap" read from the API server's watch cache (resourceVersion=0) may return an older state — after
        // a restart, even the Gizmo this name had before it was deleted and re-created. The cleanup below then
        // deletes the new Gizmo's volume and its finalizer, both by name. Correct: the informer's object, and
        // uid/resourceVersion preconditions on writes derived from it.
        let g: Gizmo | undefined;
        try {
          g = fixed ? b.informer().lister().get(namespace, name) : await mgr.client.json<Gizmo>('GET', gizmoPath(namespace, name), { query: { resourceVersion: '0' }, signal });
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
        if (!g) return undefined;
        const m = g.metadata ?? {};
        const fence = fixed ? { uid: m.uid, resourceVersion: m.resourceVersion } : {};
        if (m.deletionTimestamp) {
          cloud.delete(name, signal);
          await mgr.client.json('PATCH', gizmoPath(namespace, name), { body: { metadata: { ...fence, finalizers: null } }, ...merge, signal });
          return undefined;
        }
        if (!m.finalizers?.includes(FINALIZER)) {
          await mgr.client.json('PATCH', gizmoPath(namespace, name), { body: { metadata: { ...fence, finalizers: [FINALIZER] } }, ...merge, signal });
          return undefined;
        }
        if (fixed && !(await confirmed(mgr, g, signal))) return { requeue: true }; // (not this entry's bug: stale-cache-after-deletion's)
        cloud.ensure(name, m.uid ?? '', signal);
        if (g.status?.['size'] !== g.spec?.size) {
          await mgr.client.json('PATCH', `${gizmoPath(namespace, name)}/status`, { body: { status: { size: g.spec?.size ?? null } }, ...merge, signal });
        }
        return undefined;
      });
    },
    workload: [
      create(ns), create(gizmo()), settle(),
      remove(gizmo()), settle(),
      create(gizmo()), settle(),
      run<Cloud>('the user writes data into the new volume', (_c, cloud) => {
        const v = cloud.volumes.get('g');
        if (v) v.data = 'precious';
      }),
      patch(gizmo(), { spec: { size: 5 } }), settle(),
    ],
  },
  {
    name: 'stale-cache-after-deletion',
    bug: 'a restarted manager whose cache still holds a Gizmo from before its volume was made and its deletion was requested creates the volume of a Gizmo that is gone: a leak nobody deletes',
    expect: { kind: 'safety', class: 'stale-state', summary: /external state/ },
    setup(mgr, cloud, fixed) {
      const b = mgr.controller('stale-cache').for<Gizmo>(gizmoResource);
      const write = (path: string, body: object, signal: AbortSignal): Promise<boolean> => fencedPatch(mgr, path, body, signal);
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g) return undefined;
        const m = g.metadata ?? {};
        const fence = { resourceVersion: m.resourceVersion };
        if (m.deletionTimestamp) {
          if (!m.finalizers?.includes(FINALIZER)) return undefined;
          cloud.delete(name, signal);
          return (await write(gizmoPath(namespace, name), { metadata: { ...fence, finalizers: m.finalizers.filter((f) => f !== FINALIZER) } }, signal)) ? undefined : { requeue: true };
        }
        if (!m.finalizers?.includes(FINALIZER)) {
          return (await write(gizmoPath(namespace, name), { metadata: { ...fence, finalizers: [...(m.finalizers ?? []), FINALIZER] } }, signal)) ? undefined : { requeue: true };
        }
        if (g.status?.['volume']) return undefined;
        // BUG: the cached Gizmo may be from before its deletion — after a restart, even from before its volume was
        // made, deleted and its finalizer removed: the Gizmo is gone on the server, and the volume made here is never
        // deleted. Correct: confirm the cached copy first — a patch that changes nothing, fenced by the cached
        // resourceVersion (404: gone; 409: changed since) — and requeue if it is not current.
        if (fixed && !(await confirmed(mgr, g, signal))) return { requeue: true };
        cloud.ensure(name, m.uid ?? '', signal);
        return (await write(`${gizmoPath(namespace, name)}/status`, { metadata: fence, status: { volume: name } }, signal)) ? undefined : { requeue: true };
      });
    },
    workload: [
      create(ns), create(gizmo()), settle(),
      run<Cloud>('the volume exists', (_c, cloud) => {
        if (!cloud.volumes.has('g')) throw new Error('no volume g after the rest');
      }),
      remove(gizmo()), settle(),
    ],
  },
  {
    name: 'generate-name-not-idempotent',
    bug: 'a non-idempotent generateName create: the child\'s name is recorded in status only after the create, so a crash (or a lost answer) in between makes a second child',
    expect: { kind: 'safety', class: 'intermediate-state' },
    setup(mgr, _cloud, fixed) {
      const b = mgr.controller('generate-name').for<Gizmo>(gizmoResource);
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g || g.status?.['child']) return;
        // BUG: nothing ties the created child to this Gizmo until the status write below; after a crash between the
        // two, the next reconcile creates another. Correct: a deterministic name, or look the child up by a label.
        const meta = fixed ? { name: `${name}-child` } : { generateName: `${name}-child-` };
        const child = await mgr.client.json<KubeObject>('POST', `/api/v1/namespaces/${namespace}/configmaps`, {
          body: { metadata: { ...meta, ownerReferences: [ownerRef(g)] } }, signal,
        }).catch((err: unknown) => {
          if (fixed && isAlreadyExists(err)) return { metadata: meta };
          throw err;
        });
        await mgr.client.json('PATCH', `${gizmoPath(namespace, name)}/status`, {
          body: { metadata: { resourceVersion: g.metadata?.resourceVersion }, status: { child: child.metadata?.name } }, ...merge, signal,
        });
      });
    },
    workload: [create(ns), create(gizmo()), settle()],
  },
  {
    name: 'status-from-unobserved',
    bug: 'computes status from the states it happened to observe: a history of spec.version that misses a version it never saw',
    expect: { kind: 'safety', class: 'unobserved-state' },
    setup(mgr, _cloud, fixed) {
      const b = mgr.controller('history').for<Gizmo>(gizmoResource);
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g) return;
        const history = (g.status?.['history'] as number[] | undefined) ?? [];
        const v = g.spec?.version ?? 0;
        // BUG: a controller sees states, not transitions: watch events of intermediate states can be coalesced (a
        // relist), so a history of what it saw is not the history of the object. Correct: record only what the
        // current state implies (e.g. the current version), or keep history where the changes are made.
        if (history.at(-1) === v) return;
        await mgr.client.json('PATCH', `${gizmoPath(namespace, name)}/status`, {
          body: { metadata: { resourceVersion: g.metadata?.resourceVersion }, status: { history: fixed ? [v] : [...history, v] } }, ...merge, signal,
        });
      });
    },
    workload: [create(ns), create(gizmo({ version: 1 })), settle(), patch(gizmo(), { spec: { version: 2 } }), settle(), patch(gizmo(), { spec: { version: 3 } }), settle()],
  },
  {
    name: 'status-loop',
    bug: 'a status write that triggers its own reconcile forever: it stamps the time of every reconcile into status',
    expect: { kind: 'liveness', class: 'reference', summary: /no fixpoint/ },
    setup(mgr, _cloud, fixed) {
      const b = mgr.controller('status-loop').for<Gizmo>(gizmoResource);
      let n = 0;
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g) return;
        // BUG: every reconcile writes a new value, whose watch event queues the next reconcile. Correct: write status
        // only when what it reports changed (and never a timestamp of the reconcile itself).
        if (fixed && g.status?.['reconciled'] !== undefined) return;
        await mgr.client.json('PATCH', `${gizmoPath(namespace, name)}/status`, { body: { status: { reconciled: fixed ? 'yes' : `${new Date().toISOString()} #${++n}` } }, ...merge, signal });
      });
    },
    workload: [create(ns), create(gizmo()), settle()],
  },
  {
    name: 'no-op-hot-loop',
    bug: 'a hot loop of writes that change nothing: it writes the same status and asks to be requeued at once, every time',
    expect: { kind: 'liveness', class: 'reference', summary: /hot loop: .* changed nothing/ },
    setup(mgr, _cloud, fixed) {
      const b = mgr.controller('hot-loop').for<Gizmo>(gizmoResource);
      b.complete(async ({ namespace, name }, signal) => {
        const g = b.informer().lister().get(namespace, name);
        if (!g) return undefined;
        // BUG: the status write changes nothing after the first time (no event, no harm), but the requeue makes the
        // controller spin on one key forever. Correct: requeue only for a reason (a real wait), and write only changes.
        if (!fixed || g.status?.['size'] !== (g.spec?.size ?? 0)) {
          await mgr.client.json('PATCH', `${gizmoPath(namespace, name)}/status`, { body: { status: { size: g.spec?.size ?? 0 } }, ...merge, signal });
        }
        return fixed ? undefined : { requeueAfter: 1 };
      });
    },
    workload: [create(ns), create(gizmo({ version: 1, size: 2 })), settle()],
  },
];

function ownerRef(g: Gizmo): { apiVersion: string; kind: string; name: string; uid: string; controller: boolean } {
  return { apiVersion: 'gallery.explore.example.com/v1', kind: 'Gizmo', name: g.metadata?.name ?? '', uid: g.metadata?.uid ?? '', controller: true };
}
