import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { decodeWatchStream, LineSplitter, WatchDecodeError, type WatchEvent } from './watchdecoder.ts';

const enc = new TextEncoder();

async function* chunks(parts: Array<string | Uint8Array>): AsyncGenerator<Uint8Array | string> {
  for (const p of parts) {
    await Promise.resolve(); // one chunk per turn, like a socket
    yield p;
  }
}

async function collect(src: Parameters<typeof decodeWatchStream>[0]): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  for await (const e of decodeWatchStream(src)) out.push(e);
  return out;
}

const line = (type: string, name: string, rv: string): string =>
  JSON.stringify({ type, object: { kind: 'ConfigMap', metadata: { name, resourceVersion: rv } } }) + '\n';

describe('decodeWatchStream', () => {
  it('decodes one event per line from one chunk', async () => {
    const evs = await collect(chunks([line('ADDED', 'a', '1') + line('MODIFIED', 'a', '2') + line('DELETED', 'a', '3')]));
    assert.deepEqual(evs.map((e) => e.type), ['ADDED', 'MODIFIED', 'DELETED']);
  });

  it('reassembles an event cut across chunks at every possible position', async () => {
    const text = line('ADDED', 'a', '1') + line('BOOKMARK', '', '7');
    const bytes = enc.encode(text);
    for (let i = 1; i < bytes.length; i++) {
      const evs = await collect(chunks([bytes.subarray(0, i), bytes.subarray(i)]));
      assert.deepEqual(evs.map((e) => e.type), ['ADDED', 'BOOKMARK'], `split at ${i}`);
    }
  });

  it('decodes a multi-byte UTF-8 character split between chunks', async () => {
    const bytes = enc.encode(line('ADDED', 'ünïcødé-☃', '1'));
    const i = bytes.indexOf(0xe2); // first byte of ☃
    const evs = await collect(chunks([bytes.subarray(0, i + 1), bytes.subarray(i + 1)]));
    assert.equal((evs[0]?.object as { metadata: { name: string } }).metadata.name, 'ünïcødé-☃');
  });

  it('handles one byte per chunk', async () => {
    const bytes = enc.encode(line('ADDED', 'a', '1') + line('ADDED', 'b', '2'));
    const parts = Array.from(bytes, (b) => Uint8Array.of(b));
    assert.equal((await collect(chunks(parts))).length, 2);
  });

  it('skips blank keep-alive lines', async () => {
    const evs = await collect(chunks(['\n', line('ADDED', 'a', '1'), '\n  \n']));
    assert.equal(evs.length, 1);
  });

  it('throws "stream cut in the middle of an event" on a partial final event, after the complete ones', async () => {
    const text = line('ADDED', 'a', '1') + line('ADDED', 'b', '2').slice(0, 20);
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of decodeWatchStream(chunks([text]))) seen.push(e.type);
      })(),
      (err: unknown) => err instanceof WatchDecodeError && /stream cut in the middle of an event/.test(err.message),
    );
    assert.deepEqual(seen, ['ADDED']);
  });

  it('a final event without its newline is also a cut', async () => {
    await assert.rejects(collect(chunks([line('ADDED', 'a', '1').trimEnd()])), /stream cut in the middle/);
  });

  it('rejects a line that is not a watch event', async () => {
    await assert.rejects(collect(chunks(['{"type":5,"object":{}}\n'])), WatchDecodeError);
    await assert.rejects(collect(chunks(['{"object":{}}\n'])), WatchDecodeError);
    await assert.rejects(collect(chunks(['{"type":"ADDED"}\n'])), /without an object/);
    await assert.rejects(collect(chunks(['not json\n'])), /invalid JSON/);
  });

  it('skips events of an unknown type (client-go does) and reports each type to onUnknownType', async () => {
    const unknown: string[] = [];
    const seen: string[] = [];
    const text = line('ADDED', 'a', '1') + '{"type":"NOPE","object":{}}\n' + line('MODIFIED', 'a', '2') + '{"type":"FUTURE","object":{"x":1}}\n';
    for await (const e of decodeWatchStream(chunks([text]), { onUnknownType: (t) => unknown.push(t) })) seen.push(e.type);
    assert.deepEqual(seen, ['ADDED', 'MODIFIED']);
    assert.deepEqual(unknown, ['NOPE', 'FUTURE']);
    // Without a callback they are skipped all the same.
    assert.deepEqual((await collect(chunks([text]))).map((e) => e.type), ['ADDED', 'MODIFIED']);
  });

  it('reads a web ReadableStream and a Node Readable', async () => {
    const text = line('ADDED', 'a', '1') + line('DELETED', 'a', '2');
    const web = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(text.slice(0, 10)));
        c.enqueue(enc.encode(text.slice(10)));
        c.close();
      },
    });
    assert.equal((await collect(web)).length, 2);
    assert.equal((await collect(Readable.from([Buffer.from(text)]))).length, 2);
  });

  it('reports every chunk to onData', async () => {
    const sizes: number[] = [];
    for await (const _ of decodeWatchStream(chunks(['\n', line('ADDED', 'a', '1')]), { onData: (n) => sizes.push(n) })) {
      // consume
    }
    assert.equal(sizes.length, 2);
    assert.equal(sizes[0], 1);
  });
});

describe('LineSplitter', () => {
  it('keeps only the unterminated tail buffered', () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push(enc.encode('ab')), []);
    assert.equal(s.buffered, 2);
    assert.deepEqual(s.push(enc.encode('c\nde\nf')), ['abc', 'de']);
    assert.equal(s.buffered, 1);
    assert.equal(s.finish(), 'f');
    assert.equal(s.buffered, 0);
  });

  it('is linear: a 5 MB line in 64 KiB chunks is joined once', () => {
    const s = new LineSplitter();
    const chunk = new Uint8Array(65536).fill(0x61);
    for (let i = 0; i < 80; i++) assert.deepEqual(s.push(chunk), []);
    const [l] = s.push(enc.encode('\n'));
    assert.equal(l?.length, 80 * 65536);
  });
});
