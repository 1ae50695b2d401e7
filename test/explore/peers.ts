/** Simulated controllers of a real cluster, as `explore` peers (ExploreOptions.peers) for the shipped controllers. */
import { coreResources } from '../../pkg/apimachinery/resource.ts';
import type { ApiClient } from '../../pkg/client/typed.ts';
import { revisionAnnotation, type Deployment } from '../../pkg/controllers/deployment/types.ts';
import type { Peer } from '../../pkg/testing/index.ts';

/**
 * kube-controller-manager's Deployment controller, simulated: every Deployment's rollout completes at once — status
 * observes the generation, all replicas updated and available, the revision annotation counts template changes.
 */
export const deploymentStatusPeer: Peer = {
  name: 'deployment-controller',
  act: async (client: ApiClient) => {
    const api = client.resource<Deployment>(coreResources.deployments);
    for (const d of (await api.list()).items) {
      const m = d.metadata ?? {};
      const want = d.spec?.replicas ?? 1;
      const st = d.status ?? {};
      if (st.observedGeneration === m.generation && st.availableReplicas === want && st.updatedReplicas === want && st.replicas === want) continue;
      const ns = api.namespace(m.namespace ?? '');
      const templateHash = JSON.stringify(d.spec?.template ?? {});
      if (m.annotations?.['explore.example.com/template'] !== templateHash) {
        const revision = String(Number(m.annotations?.[revisionAnnotation] ?? '0') + 1);
        await ns.patch(m.name ?? '', { merge: { metadata: { annotations: { [revisionAnnotation]: revision, 'explore.example.com/template': templateHash } } } });
      }
      const fresh = await ns.get(m.name ?? '');
      await ns.status().patch(m.name ?? '', {
        merge: { status: { observedGeneration: fresh.metadata?.generation ?? 1, replicas: want, updatedReplicas: want, readyReplicas: want, availableReplicas: want } },
      });
    }
  },
};

