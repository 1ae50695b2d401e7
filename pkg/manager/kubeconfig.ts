/**
 * Where API credentials come from, in controller-runtime's order:
 *   1. an explicit kubeconfig file (the manager's --kubeconfig; a library caller's `path` argument), 2. $KUBECONFIG (a path list, merged as kubectl does: missing files skipped, first
 *   current-context wins, entries first-wins by name), 3. in-cluster (KUBERNETES_SERVICE_HOST/PORT and the Pod's
 *   ServiceAccount token + CA), 4. ~/.kube/config.
 * The in-cluster token is a FILE the transport re-reads when the kubelet rotates it (pkg/client/transport.ts).
 *
 * `opts.inClusterRoot` prefixes /var/run/secrets/kubernetes.io/serviceaccount: a seam for tests (they run the manager
 * "in-cluster style" through test/helpers/incluster-main.ts). Production code never sets it: no environment variable
 * can move where a deployed manager reads its credentials from.
 *
 * Errors speak to whoever chose the sources: `opts.explicit` names how that caller passes a file explicitly — the
 * bundled manager says `--kubeconfig`; the library default names the option of `new ControllerManager({ kubeConfig })`
 * (a library user has no flags unless they add one).
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig, serviceAccountDir } from '../client/kubeconfig.ts';

export { serviceAccountDir };

/** A loaded kubeconfig and where it came from. */
export interface KubeConfigSource {
  /** The loaded configuration (its current context chosen). */
  kubeConfig: KubeConfig;
  /** Human-readable origin for the startup log (never contains credentials). */
  source: string;
}

export interface LoadKubeConfigOptions {
  /** Root prefixed to the ServiceAccount directory (tests only). Default "" (the real path). */
  inClusterRoot?: string;
  /**
   * How the caller passes a kubeconfig explicitly, as error messages and the source line name it: the manager's
   * `'--kubeconfig'`. Default: the library's `kubeConfig` option / `loadKubeConfig(path)` argument.
   */
  explicit?: string;
}

/** What the library calls an explicit kubeconfig (the default of `LoadKubeConfigOptions.explicit`). */
const libraryExplicit = 'kubeconfig path';

/**
 * Loads API credentials in controller-runtime's order: the explicit kubeconfig file, $KUBECONFIG, in-cluster,
 * ~/.kube/config. Throws when an explicitly named file is missing or has no current context.
 */
export function loadKubeConfig(kubeconfigFlag: string | undefined, env: NodeJS.ProcessEnv, opts: LoadKubeConfigOptions = {}): KubeConfigSource {
  const explicit = opts.explicit ?? libraryExplicit;
  const kc = new KubeConfig();
  const fromFile = (path: string, source: string): KubeConfigSource => {
    if (!existsSync(path)) throw new Error(`kubeconfig ${path} (${source}) does not exist`);
    try {
      kc.loadFromFile(path);
    } catch (err) {
      throw new Error(`cannot load kubeconfig ${path} (${source}): ${(err as Error).message}`, { cause: err });
    }
    if (!kc.getCurrentCluster()) throw new Error(`kubeconfig ${path} (${source}) has no current context/cluster`);
    return { kubeConfig: kc, source: `${source} ${path}` };
  };
  if (kubeconfigFlag) return fromFile(kubeconfigFlag, explicit);
  const envPaths = (env['KUBECONFIG'] ?? '').split(delimiter).filter((p) => p !== '');
  if (envPaths.length === 1) return fromFile(envPaths[0] ?? '', '$KUBECONFIG');
  if (envPaths.length > 1) {
    let used: string[];
    try {
      used = kc.loadFromFiles(envPaths);
    } catch (err) {
      throw new Error(`cannot load $KUBECONFIG: ${(err as Error).message}`, { cause: err });
    }
    if (!kc.getCurrentCluster()) throw new Error(`$KUBECONFIG (${used.join(delimiter)}) has no current context/cluster`);
    return { kubeConfig: kc, source: `$KUBECONFIG ${used.join(delimiter)}` };
  }
  if (env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT']) {
    const prefix = opts.inClusterRoot ?? '';
    const tokenFile = `${prefix}${serviceAccountDir}/token`;
    if (!existsSync(tokenFile)) throw new Error(`in-cluster configuration: ServiceAccount token ${tokenFile} does not exist`);
    kc.loadFromCluster(prefix, env);
    return { kubeConfig: kc, source: `in-cluster ServiceAccount (${prefix}${serviceAccountDir})` };
  }
  const home = join(env['HOME'] ?? homedir(), '.kube', 'config');
  if (existsSync(home)) return fromFile(home, 'default');
  if (opts.explicit) throw new Error(`no Kubernetes credentials: pass ${opts.explicit}, set KUBECONFIG, or run in a Pod with a ServiceAccount`);
  throw new Error('no Kubernetes credentials: set KUBECONFIG (or create ~/.kube/config), run in a Pod with a ServiceAccount, '
    + 'or pass one explicitly: new ControllerManager({ kubeConfig }) with a KubeConfig (e.g. loadKubeConfig(path, process.env).kubeConfig)');
}
