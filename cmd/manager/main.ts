#!/usr/bin/env node
/**
 * ts-controller-manager entry point: parse flags/env first (cheap, no heavy imports, so `--help` and bad invocations
 * answer at once), then load the wiring (run.ts) and run until a signal.
 * Exit codes: 0 clean shutdown, 1 runtime failure (lost lease, graceful timeout, fatal runnable error),
 * 2 bad invocation (flags, environment, unreadable kubeconfig).
 */
import { helpText, parseOptions, UsageError, type Options } from './options.ts';

const usageExit = 2;
// Same path as pkg/manager/kubeconfig.ts (not imported here: that module loads client-node).
const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

function usage(message: string): number {
  process.stderr.write(`error: ${message}\nRun with --help for the list of flags.\n`);
  return usageExit;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const inClusterPrefix = env['TSCM_IN_CLUSTER_PATH_PREFIX'] ?? '';
  let opts: Options;
  try {
    opts = parseOptions(argv, env, { inClusterNamespaceFile: `${inClusterPrefix}${serviceAccountDir}/namespace` });
  } catch (err) {
    if (err instanceof UsageError) return usage(err.message);
    throw err;
  }
  if (opts.help) {
    process.stdout.write(helpText());
    return 0;
  }
  const { loadKubeConfig } = await import('../../pkg/manager/kubeconfig.ts');
  let kube;
  try {
    kube = loadKubeConfig(opts.kubeconfig, env);
  } catch (err) {
    return usage((err as Error).message);
  }
  const { run } = await import('./run.ts');
  return run(opts, kube);
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
