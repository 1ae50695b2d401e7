/**
 * SIGTERM/SIGINT handling for the manager process. Deliberately light (no runtime imports): cmd/manager installs the
 * handlers right after parsing flags — before loading credentials, importing the wiring and setting up controllers —
 * because as PID 1 in a container a signal that arrives before a handler exists is ignored.
 *
 * Contract: the first SIGTERM/SIGINT aborts `signal` (graceful shutdown; if it arrives during setup, the Manager
 * starts and immediately shuts down); a second one exits with code 1 at once. `dispose` removes the handlers.
 */
import type { Logger } from '../log/logger.ts';

/** What installSignalHandlers needs from `process` (an EventEmitter fake in tests). */
export interface SignalSource {
  on(event: 'SIGTERM' | 'SIGINT', listener: (signal: NodeJS.Signals) => void): unknown;
  off(event: 'SIGTERM' | 'SIGINT', listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): void;
}

/** What installSignalHandlers returns. */
export interface SignalHandlers {
  /** Aborts on the first signal. */
  readonly signal: AbortSignal;
  /** Removes the handlers. */
  readonly dispose: () => void;
  /** Where to log signals from now on (installed before the logger exists; until then nothing is logged). */
  readonly setLogger: (logger: Pick<Logger, 'info' | 'warn'>) => void;
}

/**
 * Handles SIGTERM and SIGINT: the first aborts the returned signal (graceful shutdown), the second exits at once
 * with code 1.
 */
export function installSignalHandlers(proc: SignalSource, logger?: Pick<Logger, 'info' | 'warn'>): SignalHandlers {
  const ac = new AbortController();
  let log = logger;
  const handler = (sig: NodeJS.Signals): void => {
    if (!ac.signal.aborted) {
      log?.info({ signal: sig }, 'received signal: shutting down gracefully (send again to exit immediately)');
      ac.abort(new Error(`received ${sig}`));
      return;
    }
    log?.warn({ signal: sig }, 'received second signal: exiting immediately');
    proc.exit(1);
  };
  proc.on('SIGTERM', handler);
  proc.on('SIGINT', handler);
  return {
    signal: ac.signal,
    dispose: () => {
      proc.off('SIGTERM', handler);
      proc.off('SIGINT', handler);
    },
    setLogger: (l) => {
      log = l;
    },
  };
}
