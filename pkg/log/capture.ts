/**
 * For tests: a logger (same format as newLogger) whose JSON lines are parsed into `lines` as they are written.
 * `L` describes the fields a test reads; every line has at least `level` and `msg`.
 */
import { Writable } from 'node:stream';
import type { LevelWithSilent } from 'pino';
import { newLogger, type Logger } from './logger.ts';

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export function captureLogs<L extends LogLine = LogLine>(level: LevelWithSilent = 'debug'): { logger: Logger; lines: L[] } {
  const lines: L[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb): void {
      for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as L);
      cb();
    },
  });
  return { logger: newLogger({ level, destination }), lines };
}
