/**
 * The human-readable log format (`newLogger({ format: 'text' })`, what a developer reads in a terminal): each of
 * pino's JSON lines becomes one line — `HH:MM:SS.mmm LEVEL message  key=value …` — with the time of day in UTC (the
 * entry's own ISO timestamp), the logger's bindings and the entry's fields in pino's order, strings quoted only when
 * they hold a blank, a quote or `=`, other values as JSON, and an `err` as its message with its stack indented below.
 * A line that is not a JSON object is passed through unchanged. Formatting is synchronous: a line is written whole
 * before `write` returns, in the order pino wrote it.
 */

const levelColors: Record<string, string> = { trace: '90', debug: '90', info: '32', warn: '33', error: '31', fatal: '31' };

function value(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/** One JSON log line (as pino writes it, with or without its newline) in the text format, ending in a newline. */
export function formatLine(line: string, color: boolean): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    entry = undefined;
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return line.endsWith('\n') ? line : `${line}\n`;
  const { level, time, msg, err, ...fields } = entry as Record<string, unknown>;
  const name = typeof level === 'string' ? level : value(level);
  const label = name.toUpperCase().padEnd(5);
  const colored = color ? `\x1b[${levelColors[name] ?? '0'}m${label}\x1b[0m` : label;
  const clock = typeof time === 'string' && time.length >= 23 ? time.slice(11, 23) : value(time ?? '');
  const parts = Object.entries(fields).map(([k, v]) => `${k}=${value(v)}`);
  let stack = '';
  if (err !== undefined) {
    const e = err as { message?: unknown; stack?: unknown };
    parts.push(`err=${value(typeof e === 'object' && e !== null && 'message' in e ? String(e.message) : err)}`);
    if (typeof e === 'object' && e !== null && typeof e.stack === 'string') stack = e.stack.split('\n').map((l) => `\n    ${l}`).join('');
  }
  return `${clock} ${colored} ${typeof msg === 'string' ? msg : ''}${parts.length > 0 ? `  ${parts.join(' ')}` : ''}${stack}\n`;
}

/** A pino destination writing the text format of every line to `out` (colour: ANSI codes for the level). */
export function textDestination(out: NodeJS.WritableStream, color: boolean): { write(line: string): boolean } {
  return { write: (line: string) => out.write(formatLine(line.replace(/\n$/, ''), color)) };
}
