/**
 * The endurance bench's world: a private FULL control plane (etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler, kwok with one Node: Deployments roll out, Pods become Ready, deleted Foos' Deployments are garbage
 * collected), this project's CRDs (config/crd/bases: Foo and the v1 Network), a private real neutron-server
 * (hack/neutron/up.sh) behind a NeutronProxy (5xx and slow answers on demand), and a TcpProxy in front of the API
 * server that only the managers go through (cut on demand).
 *
 * kube-apiserver serves Networks WITHOUT its watch cache (`--watch-cache-sizes=networks.samplecrd.k8s.io#0`): their
 * watches are etcd's own, so an etcd compaction past a watch's resourceVersion answers its resumption with 410 Gone
 * and the informer must relist — the path a compaction exercises. Foos and Deployments go through the watch cache as
 * in every cluster (there a restart of kube-apiserver is what makes old resourceVersions "too old").
 *
 * Ownership: `start` creates everything in `dir` and `stop` removes every process it started (also when start fails
 * half-way). The bench's own client (`rest`) talks to kube-apiserver directly, never through the proxy.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { KubeConfig } from '../../pkg/client/kubeconfig.ts';
import { RestClient } from '../../pkg/client/rest.ts';
import { ControlPlane } from '../../test/cluster/controlplane.ts';
import { NeutronProxy, startNeutron, type NeutronInstance } from '../../test/helpers/neutron.ts';
import { proxiedServer, TcpProxy } from '../../test/helpers/tcpproxy.ts';

const repo = join(import.meta.dirname, '..', '..');

/** kube-controller-manager flag: a Node is not marked NotReady by a kube-apiserver restart (see start()). */
export const NODE_MONITOR_GRACE = '--node-monitor-grace-period=10m';

/** kube-apiserver flag: no watch cache for Networks (see the module comment). */
export const NETWORKS_WITHOUT_WATCH_CACHE = '--watch-cache-sizes=networks.samplecrd.k8s.io#0';

export interface SoakEnvOptions {
  /** Working directory (control plane state, neutron state, kubeconfigs, logs). */
  dir: string;
  /** Namespaces the churn spreads objects over. */
  namespaces: readonly string[];
  /** Namespace of the leader-election Lease. */
  leaseNamespace: string;
  log: (msg: string) => void;
  /** Extra kube-apiserver flags. */
  apiserverArgs?: readonly string[];
}

export class SoakEnv {
  readonly dir: string;
  readonly cp: ControlPlane;
  /** The managers' way to the API server (cut() / restore()). */
  readonly apiProxy: TcpProxy;
  /** Admin kubeconfig whose server is `apiProxy` (the managers'). */
  readonly managerKubeconfig: string;
  readonly neutron: NeutronInstance;
  /** The managers' way to Neutron (refuse / delay). */
  readonly neutronProxy: NeutronProxy;
  /** clouds.yaml (cloud `local`, auth none) pointing at `neutronProxy`. */
  readonly cloudsYaml: string;
  /** The bench's own client, straight to kube-apiserver. */
  readonly rest: RestClient;
  readonly namespaces: readonly string[];
  readonly leaseNamespace: string;

  private constructor(init: Omit<SoakEnv, 'stop'>) {
    this.dir = init.dir;
    this.cp = init.cp;
    this.apiProxy = init.apiProxy;
    this.managerKubeconfig = init.managerKubeconfig;
    this.neutron = init.neutron;
    this.neutronProxy = init.neutronProxy;
    this.cloudsYaml = init.cloudsYaml;
    this.rest = init.rest;
    this.namespaces = init.namespaces;
    this.leaseNamespace = init.leaseNamespace;
  }

  static async start(opts: SoakEnvOptions): Promise<SoakEnv> {
    const stops: (() => Promise<void> | void)[] = [];
    try {
      mkdirSync(opts.dir, { recursive: true });
      opts.log('starting neutron-server (hack/neutron/up.sh) and a full control plane');
      const [neutron, cp] = await Promise.all([
        startNeutron({ dir: join(opts.dir, 'neutron') }).then((n) => (stops.push(() => n.stop()), n)),
        ControlPlane.start({
          mode: 'full', dir: join(opts.dir, 'cluster'), log: (m) => opts.log(`cluster: ${m}`),
          extraArgs: {
            'kube-apiserver': [NETWORKS_WITHOUT_WATCH_CACHE, ...(opts.apiserverArgs ?? [])],
            // kwok cannot renew its Node's lease while kube-apiserver is down; a graceful restart (~70 s: 60 s of drain)
            // outlasted the 40 s grace, node-lifecycle set the Pods Ready=False, and kwok never set them Ready again:
            // Deployments that stay unavailable for good (seen), which no controller of ours can mend.
            'kube-controller-manager': [NODE_MONITOR_GRACE],
          },
        }).then((c) => (stops.push(() => c.stop()), c)),
      ]);
      // A restarted kube-apiserver counts as back once it serves requests (/livez/ping), not once /readyz or /livez
      // pass: the managers wait for neither, and under the churn on 2 cores the rbac/bootstrap-roles post-start hook
      // (part of both) kept them failing for over 90 s after a restart (seen) while every request was answered.
      const apiState = cp.state.components['kube-apiserver'];
      if (apiState?.health) apiState.health = apiState.health.replace(/\/readyz$/, '/livez/ping');
      const kubectl = join(cp.k8sBinDir, 'kubectl');
      execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'apply', '--server-side', '-f', 'config/crd/bases'], { cwd: repo, stdio: 'ignore' });
      execFileSync(kubectl, ['--kubeconfig', cp.kubeconfig, 'wait', '--for=condition=Established', '--timeout=60s',
        'crd/foos.samplecontroller.k8s.io', 'crd/networks.samplecrd.k8s.io'], { stdio: 'ignore' });

      const kc = new KubeConfig();
      kc.loadFromFile(cp.kubeconfig);
      const rest = new RestClient({ kubeConfig: kc, registry: new Registry(), userAgent: 'soak-bench' });
      stops.push(() => rest.close());
      for (const ns of [...opts.namespaces, opts.leaseNamespace]) {
        await rest.json('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
      }

      const api = new URL(cp.server);
      const apiProxy = await TcpProxy.start(api.hostname, Number(api.port));
      stops.push(() => apiProxy.close());
      const managerKubeconfig = join(opts.dir, 'manager.kubeconfig');
      writeFileSync(managerKubeconfig, readFileSync(cp.kubeconfig, 'utf8').replaceAll(cp.server, proxiedServer(cp.server, apiProxy)));

      const neutronProxy = await NeutronProxy.start(neutron.endpoint);
      stops.push(() => neutronProxy.close());
      const cloudsYaml = join(opts.dir, 'clouds.yaml');
      writeFileSync(cloudsYaml, `clouds:\n  local:\n    auth_type: none\n    auth:\n      endpoint: ${neutronProxy.endpoint}\n    region_name: RegionOne\n`);
      // Neutron's default quota (100 networks and subnets per project) would refuse creates of a busy churn.
      const quota = await fetch(`${neutron.endpoint}/v2.0/quotas/fake_project_id`, {
        method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ quota: { network: -1, subnet: -1 } }),
        signal: AbortSignal.timeout(60_000),
      });
      if (quota.status !== 200) throw new Error(`raising the Neutron quota: HTTP ${quota.status} ${await quota.text()}`);
      return new SoakEnv({
        dir: opts.dir, cp, apiProxy, managerKubeconfig, neutron, neutronProxy, cloudsYaml, rest,
        namespaces: opts.namespaces, leaseNamespace: opts.leaseNamespace,
      });
    } catch (err) {
      for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => {});
      throw err;
    }
  }

  /** Stops the proxies, neutron-server and the control plane (its state and logs removed unless `keepState`). */
  async stop(keepState = false): Promise<void> {
    await this.rest.close().catch(() => {});
    await this.neutronProxy.close().catch(() => {});
    await this.apiProxy.close().catch(() => {});
    await this.neutron.stop().catch(() => {});
    await this.cp.stop({ removeState: !keepState });
  }
}
