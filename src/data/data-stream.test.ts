import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { SdkError } from '../errors.ts';
import { decodeChunkHeader } from '../protocol/messages.ts';
import { DataStreams, MAX_INCOMING_STREAMS } from './data-stream.ts';

type Connection = ConstructorParameters<typeof DataStreams>[0];

/**
 * A relay as the sender sees it: every `stream.open` answered with `open`'s result, every chunk
 * acknowledged a moment later, every other request answered `{}`. Keeps the requests made.
 */
function sender(open: () => { streamId: number; chunkBytes: number; window: number }) {
  const requests: Array<{ method: string; params: unknown }> = [];
  const connection = {
    request: async (method: string, params: unknown) => {
      requests.push({ method, params });
      return method === 'stream.open' ? open() : {};
    },
    sendBinary: (frame: Uint8Array) => {
      const header = decodeChunkHeader(frame)!;
      setImmediate(() => streams.acked(header.streamId, header.seq));
    },
  };
  const streams = new DataStreams(connection as unknown as Connection);
  return { streams, requests };
}

/** How `promise` settled within `ms`: its value, its error, or `'pending'`. */
async function settled<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | 'pending'> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const outcome = promise.then((value) => ({ value }), (error: unknown) => ({ error }));
  try {
    return await Promise.race([outcome, new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

describe('data streams, sending (SDK)', () => {
  it('a relay that answers two stream.open with one streamId: the second send fails INTERNAL_ERROR (bad-frame), the first completes (it waited for ever, even after leave)', async () => {
    const { streams, requests } = sender(() => ({ streamId: 42, chunkBytes: 4, window: 1 }));
    const first = streams.send('x'.repeat(40));
    const second = streams.send('abcd');
    const [one, two] = await Promise.all([settled(first, 2000), settled(second, 2000)]);
    assert.deepEqual(one, { value: { id: 42, size: 40 } }, 'the first send went on to its end');
    assert.ok(two !== 'pending' && 'error' in two, 'the second send failed');
    assert.ok(two.error instanceof SdkError);
    assert.equal(two.error.code, 'INTERNAL_ERROR');
    assert.equal(two.error.reason, 'bad-frame');
    assert.match(two.error.message, /stream\.open/);
    assert.deepEqual(requests.filter((r) => r.method === 'stream.close'), [{ method: 'stream.close', params: { streamId: 42 } }], 'one close: the first stream\'s, none for the refused id');
    assert.equal((streams as unknown as { outgoing: Map<number, unknown> }).outgoing.size, 0, 'nothing left behind');
  });

  it('a source that cannot be read fails the send and closes the stream toward the relay (it was left open there until it went idle, 60 s); an onProgress that throws is reported and the send goes on', async () => {
    const { streams, requests } = sender(() => ({ streamId: 7, chunkBytes: 4, window: 1 }));
    const unreadable = new Error('the file went away');
    class GoneBlob extends Blob {
      override slice(start?: number, end?: number): Blob {
        if ((start ?? 0) >= 8) return { arrayBuffer: () => Promise.reject(unreadable) } as unknown as Blob;
        return super.slice(start, end);
      }
    }
    const outcome = await settled(streams.send(new GoneBlob(['x'.repeat(40)])), 2000);
    assert.deepEqual(outcome, { error: unreadable });
    assert.deepEqual(requests.map((r) => r.method), ['stream.open', 'stream.close']);
    assert.deepEqual(requests[1]!.params, { streamId: 7 });
    const reported: unknown[] = [];
    const quiet = console.error;
    console.error = (...args: unknown[]) => void reported.push(args);
    try {
      const progressing = sender(() => ({ streamId: 9, chunkBytes: 4, window: 1 }));
      const done = await settled(progressing.streams.send('x'.repeat(40), { onProgress: () => { throw new Error('the progress bar is gone'); } }), 2000);
      assert.deepEqual(done, { value: { id: 9, size: 40 } });
      assert.ok(reported.length > 0, 'the exception was reported');
    } finally {
      console.error = quiet;
    }
    // a stream the relay aborted itself is not closed again
    const aborted = sender(() => ({ streamId: 8, chunkBytes: 4, window: 1 }));
    const send = aborted.streams.send('x'.repeat(40));
    await new Promise((resolve) => setImmediate(resolve));
    aborted.streams.aborted(8, { code: 'TIMEOUT', kind: 'Network', message: 'idle', reason: 'stream-idle' });
    const error = await settled(send, 2000);
    assert.ok(error !== 'pending' && 'error' in error && (error.error as SdkError).reason === 'stream-idle');
    assert.deepEqual(aborted.requests.map((r) => r.method), ['stream.open']);
  });
  it('a relay acknowledging a chunk never sent does not lift the window: the sender keeps to it (a hostile relay that stopped reading had the whole source read into the socket)', async () => {
    const sentSeqs: number[] = [];
    const connection = {
      request: async (method: string) => (method === 'stream.open' ? { streamId: 3, chunkBytes: 4, window: 2 } : {}),
      sendBinary: (frame: Uint8Array) => {
        const { seq } = decodeChunkHeader(frame)!;
        sentSeqs.push(seq);
        // acknowledges the last chunk there could ever be, once, and then reads no more
        if (seq === 0) setImmediate(() => streams.acked(3, 2 ** 32 - 1));
      },
    };
    const streams = new DataStreams(connection as unknown as Connection);
    const sending = streams.send('x'.repeat(4 * 100));
    assert.equal(await settled(sending, 200), 'pending');
    assert.deepEqual(sentSeqs, [0, 1], 'the window (2 chunks unacknowledged), no more');
  });

  it('incoming streams kept at once are at most MAX_INCOMING_STREAMS: one more is left, and not given to the app (a relay opening streams that never end grew the SDK 2.4 KB each)', async () => {
    const left: unknown[] = [];
    const connection = { request: async (method: string, params: unknown) => (method === 'stream.leave' && left.push(params), {}) };
    const streams = new DataStreams(connection as unknown as Connection);
    let given = 0;
    streams.on('stream', () => void given++);
    for (let id = 1; id <= MAX_INCOMING_STREAMS + 1; id++) streams.opened({ streamId: id, from: 'x', size: 1, kind: 'bytes', timestamp: 0 });
    assert.equal(given, MAX_INCOMING_STREAMS);
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(left, [{ streamId: MAX_INCOMING_STREAMS + 1 }], 'the relay is told to send none of it');
  });
});
