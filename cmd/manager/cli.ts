/**
 * The manager's command: parse flags/env first (cheap, no heavy imports, so `--help` and bad invocations answer at
 * once), install the signal handlers, then load credentials and the wiring (run.ts) and run until a signal.
 * Exit codes: 0 clean shutdown, 1 runtime failure (lost lease, graceful timeout, cache-sync timeout, fatal runnable
 * error), 2 bad invocation (flags, environment, unreadable kubeconfig).
 *
 * Order matters: signal handlers are installed BEFORE credentials are loaded, the wiring is imported and controllers
 * are set up (issue 11 item 6) — as PID 1 a SIGTERM that arrives before a handler exists is silently ignored. A
 * signal during setup makes the Manager start and shut down at once.
 */
import { installSignalHandlers, type SignalHandlers, type SignalSource } from '../../pkg/manager/signals.ts';
import type { KubeConfigSource } from '../../pkg/manager/kubeconfig.ts';
import { helpText, parseOptions, UsageError, type Options } from './options.ts';

const usageExit = 2;
// Same path as pkg/manager/kubeconfig.ts (not imported here: that module loads client-node).
const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Seams for tests; production (main.ts) passes none. */
export interface MainDeps {
  /** Where signals come from (default `process`). */
  proc?: SignalSource;
  /** Root prefixed to the in-cluster ServiceAccount directory (test/helpers/incluster-main.ts). Default "". */
  inClusterRoot?: string;
  /** The wiring (default run.ts's `run`, imported lazily). */
  run?: (opts: Options, kube: KubeConfigSource, signals: SignalHandlers) => Promise<number>;
}

function usage(message: string): number {
  process.stderr.write(`error: ${message}\nRun with --help for the list of flags.\n`);
  return usageExit;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv, deps: MainDeps = {}): Promise<number> {
  const root = deps.inClusterRoot ?? '';
  let opts: Options;
  try {
    opts = parseOptions(argv, env, { inClusterNamespaceFile: `${root}${serviceAccountDir}/namespace` });
  } catch (err) {
    if (err instanceof UsageError) return usage(err.message);
    throw err;
  }
  if (opts.help) {
    process.stdout.write(helpText());
    return 0;
  }
  const signals = installSignalHandlers(deps.proc ?? process);
  try {
    const { loadKubeConfig } = await import('../../pkg/manager/kubeconfig.ts');
    let kube;
    try {
      kube = loadKubeConfig(opts.kubeconfig, env, { inClusterRoot: root, explicit: '--kubeconfig' });
    } catch (err) {
      return usage((err as Error).message);
    }
    const run = deps.run ?? (await import('./run.ts')).run;
    return await run(opts, kube, signals);
  } finally {
    signals.dispose();
  }
}
