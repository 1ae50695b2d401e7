import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newLogger } from './logger.ts';
import { formatLine } from './text.ts';

/** A destination that keeps what it is given. */
function sink(): { lines: string[]; write: (s: string) => boolean } {
  const lines: string[] = [];
  return { lines, write: (s: string) => (lines.push(s), true) };
}

test("newLogger({ format: 'text' }): one human-readable line per entry — time, level, the logger's bindings, message, fields", () => {
  const out = sink();
  const log = newLogger({ format: 'text', destination: out as unknown as NodeJS.WritableStream, color: false });
  log.child({ controller: 'guestbook' }).info({ namespace: 'default', name: 'sample', count: 2, ready: true }, 'ConfigMap reconciled');
  log.warn('two words');
  assert.equal(out.lines.length, 2);
  assert.match(out.lines[0] ?? '', /^\d\d:\d\d:\d\d\.\d{3} INFO {2}ConfigMap reconciled {2}controller=guestbook namespace=default name=sample count=2 ready=true\n$/);
  assert.match(out.lines[1] ?? '', /^\d\d:\d\d:\d\d\.\d{3} WARN {2}two words\n$/);
});

test('text: strings that need it are quoted, objects are JSON, an error prints its message and then its stack', () => {
  const line = formatLine(JSON.stringify({
    level: 'error', time: '2026-01-02T03:04:05.678Z', msg: 'reconcile failed', key: 'a b', empty: '', nested: { x: [1] },
    err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (x.ts:1:1)' },
  }), false);
  assert.equal(line, '03:04:05.678 ERROR reconcile failed  key="a b" empty="" nested={"x":[1]} err=boom\n    Error: boom\n        at f (x.ts:1:1)\n');
});

test('text: a line that is not JSON is passed through as it is; colour marks the level', () => {
  assert.equal(formatLine('not json', false), 'not json\n');
  assert.equal(formatLine(JSON.stringify({ level: 'info', time: '2026-01-02T03:04:05.678Z', msg: 'hi' }), true), '03:04:05.678 \x1b[32mINFO \x1b[0m hi\n');
});

test("the default format is still pino's JSON", () => {
  const out = sink();
  newLogger({ destination: out as unknown as NodeJS.WritableStream }).info({ a: 1 }, 'm');
  assert.deepEqual(Object.keys(JSON.parse(out.lines[0] ?? '{}') as object), ['level', 'time', 'a', 'msg']);
});
