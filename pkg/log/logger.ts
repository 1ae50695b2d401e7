/**
 * Structured logging with pino: JSON lines on stdout. Field names are fixed across the code base:
 * `controller`, `namespace`, `name`, `reconcileID`, `resource`, `err`. Credentials and tokens are never logged:
 * the `redact` paths below are a safety net, not a licence to log request headers.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';
import { textDestination } from './text.ts';

/** The logger type of the whole code base: pino's Logger (`child({ controller })`, `info(obj, msg)`, …). */
export type { Logger };

export const logLevels: readonly LevelWithSilent[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/**
 * A JSON logger (pino) with ISO timestamps, `level` as a label, and credentials (token, password, authorization)
 * redacted; default level info, default destination stdout. `format: 'text'` writes the same entries as one
 * human-readable line each (text.ts), for a terminal; `color` (default: the destination is a TTY) marks the level.
 */
export function newLogger(opts: { level?: LevelWithSilent; destination?: NodeJS.WritableStream; format?: 'json' | 'text'; color?: boolean } = {}): Logger {
  const out = opts.destination ?? process.stdout;
  const destination = opts.format === 'text' ? textDestination(out, opts.color ?? (out as { isTTY?: boolean }).isTTY === true) : out;
  return pino(
    {
      level: opts.level ?? 'info',
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: ['token', 'password', 'authorization', 'headers.authorization', 'headers.Authorization', '*.token', '*.password'],
        censor: '[redacted]',
      },
    },
    // pino's destination type is its own stream interface; any writable stream (or text.ts's writer) satisfies it.
    destination as pino.DestinationStream,
  );
}

/** A logger that drops everything: the default for library code used without a logger (e.g. in unit tests). */
export const silentLogger: Logger = pino({ level: 'silent' });
