/**
 * `ts-controller-manager dev [--crd PATH ...]`: the local control plane of `ts-controller-manager/testing`
 * (startTestEnv: etcd + kube-apiserver on loopback, RBAC, an admin client certificate) with the project's CRDs
 * installed, for running and poking at a controller by hand: `kubectl` and `node main.ts` with the printed KUBECONFIG.
 *
 * Output contract (test/dev.test.ts): progress lines on stderr; once everything is ready, exactly one line on stdout,
 * `export KUBECONFIG=<path>` (an admin kubeconfig inside the environment's temporary directory), so
 * `eval "$(ts-controller-manager dev)"` style use works. It then runs until SIGINT or SIGTERM, stops kube-apiserver
 * and etcd, removes the directory and exits 0; a second signal during that stop is ignored (the stop is bounded:
 * SIGKILL after 5 s per component). If a component dies on its own it exits 1 naming it (after stopping the rest).
 * If this process is killed outright the environment's reaper removes everything within about a second.
 *
 * Exit codes: 0 stopped by a signal, 1 the control plane failed to start or died, 2 bad invocation.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

export const defaultCRDPath = 'config/crd/bases';

export const devUsage = `Usage: ts-controller-manager dev [--crd PATH ...]

Starts a local control plane (etcd + kube-apiserver, as ts-controller-manager/testing's startTestEnv) with the
given CRDs installed, prints "export KUBECONFIG=..." on stdout and runs until Ctrl-C (SIGINT) or SIGTERM, then
stops everything. The binaries come from $KUBEBUILDER_ASSETS or the ts-controller-manager cache (make tools).

Flags:
  --crd=PATH   A CRD manifest or a directory of them; repeatable (default "${defaultCRDPath}" if it exists).
  -h, --help   This text.
`;

export class DevUsageError extends Error {}

/** Parses the arguments after `dev`; `cwd` resolves the default CRD directory. Throws DevUsageError (one line). */
export function parseDevArgs(argv: readonly string[], cwd: string): { help: boolean; crdPaths: string[] } {
  const crdPaths: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-h' || a === '--help') return { help: true, crdPaths: [] };
    const m = /^--crd(?:=(.*))?$/.exec(a);
    if (!m) throw new DevUsageError(a.startsWith('-') ? `unknown flag ${JSON.stringify(a)}` : `unexpected argument ${JSON.stringify(a)}`);
    const value = m[1] ?? argv[++i];
    if (value === undefined || value.trim() === '') throw new DevUsageError('flag --crd needs a non-empty value');
    crdPaths.push(value);
  }
  if (crdPaths.length === 0 && existsSync(resolve(cwd, defaultCRDPath))) crdPaths.push(defaultCRDPath);
  return { help: false, crdPaths };
}

/** `ts-controller-manager dev …`: resolves the exit code once the control plane is stopped. */
export async function devMain(argv: readonly string[], proc: NodeJS.Process = process): Promise<number> {
  let args;
  try {
    args = parseDevArgs(argv, proc.cwd());
  } catch (err) {
    if (!(err instanceof DevUsageError)) throw err;
    proc.stderr.write(`error: ${err.message}\n${devUsage}`);
    return 2;
  }
  if (args.help) {
    proc.stdout.write(devUsage);
    return 0;
  }
  // Signal handlers first: a Ctrl-C during the start aborts it (what was started is stopped) instead of killing us
  // with the components still running until the reaper notices.
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (!stop.signal.aborted) proc.stderr.write(`${sig}: stopping the control plane\n`);
    stop.abort();
  };
  proc.on('SIGINT', onSignal);
  proc.on('SIGTERM', onSignal);
  try {
    const { startTestEnv } = await import('../../pkg/testing/index.ts');
    let env;
    try {
      env = await startTestEnv({ crdPaths: args.crdPaths, signal: stop.signal, log: (m) => proc.stderr.write(`${m}\n`) });
    } catch (err) {
      if (stop.signal.aborted) return 0;
      proc.stderr.write(`error: ${(err as Error).message}\n`);
      return 1;
    }
    try {
      if (env.crds.length > 0) proc.stderr.write(`CRDs installed: ${env.crds.join(', ')}\n`);
      proc.stderr.write('Ctrl-C stops it. Use it from another shell with:\n');
      proc.stdout.write(`export KUBECONFIG=${env.kubeconfigPath}\n`);
      // Until a signal, or until a component dies on its own (checked once a second).
      const started = env.running().length;
      const died = await new Promise<boolean>((res) => {
        const timer = setInterval(() => {
          if (env.running().length < started) {
            clearInterval(timer);
            res(true);
          }
        }, 1_000);
        stop.signal.addEventListener('abort', () => {
          clearInterval(timer);
          res(false);
        }, { once: true });
      });
      if (died) proc.stderr.write(`error: a control plane component exited; its log is under ${env.dir} (removed now)\n`);
      return died ? 1 : 0;
    } finally {
      await env.stop();
      proc.stderr.write('control plane stopped\n');
    }
  } finally {
    proc.off('SIGINT', onSignal);
    proc.off('SIGTERM', onSignal);
  }
}
