import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { SdkError } from '../errors.ts';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { encodeChunk } from '../protocol/messages.ts';
import { DataStreams } from './data-stream.ts';
import { IncomingStream, type IncomingOwner } from './incoming-stream.ts';

/** The room's side: an allowance of unread bytes, and who left. */
function owner(max: number) {
  let unread = 0;
  const left: number[] = [];
  const o: IncomingOwner & { left: number[]; unread: () => number } = {
    maxUnreadBytes: max,
    hold: (n) => (unread + n > max ? false : ((unread += n), true)),
    release: (n) => void (unread -= n),
    leave: (s) => void left.push(s.id),
    left,
    unread: () => unread,
  };
  return o;
}

/** What a chunk waiting unread costs the allowance at least (documented with `maxUnreadBytes`). */
const MIN_CHUNK_CHARGE = 256;

const info = (streamId: number, size: number) => ({ streamId, from: 'x', size, kind: 'bytes' as const, timestamp: 0 });
const bytes = (n: number) => new Uint8Array(n);

describe('incoming streams (SDK)', () => {
  it('streams nobody reads are given up once the unread bytes of all of them would pass the allowance: the reader gets slow-recipient, the relay is told', async () => {
    const room = owner(1000);
    const a = new IncomingStream(info(1, 10_000), room);
    const b = new IncomingStream(info(2, 10_000), room);
    a.push(0, bytes(600));
    b.push(0, bytes(300));
    b.push(1, bytes(300)); // would make 1200
    assert.deepEqual(room.left, [2]);
    assert.equal(room.unread(), 600, 'what the given-up stream held is let go');
    await assert.rejects(b.readAll(), (err: SdkError) => err.code === 'TIMEOUT' && err.reason === 'slow-recipient');
    // a stream that is read as it comes never gets near it
    const c = new IncomingStream(info(3, 3000), room);
    const read = (async () => {
      let n = 0;
      for await (const chunk of c) n += chunk.byteLength;
      return n;
    })();
    for (let i = 0; i < 10; i++) {
      c.push(i, bytes(300));
      await new Promise((r) => setImmediate(r));
    }
    c.end();
    assert.equal(await read, 3000);
  });

  it('readAll, readText and readBlob gather at most maxBytes (by default the allowance): a stream announcing more is refused at once and left (the sender chose 4 GiB, and each byte read was no longer counted)', async () => {
    const room = owner(1000);
    for (const read of ['readAll', 'readText', 'readBlob'] as const) {
      const s = new IncomingStream(info(10, 1001), room);
      await assert.rejects(s[read](), (err: SdkError) => err.code === 'PAYLOAD_TOO_LARGE' && err.reason === 'stream-too-large');
      assert.deepEqual(room.left.splice(0), [10], `${read}: the relay is told`);
    }
    const big = new IncomingStream(info(11, 1000), room);
    await assert.rejects(big.readAll({ maxBytes: 999 }), (err: SdkError) => err.reason === 'stream-too-large');
    const fits = new IncomingStream(info(12, 1000), room);
    const read = fits.readAll();
    fits.push(0, bytes(1000));
    fits.end();
    assert.equal((await read).byteLength, 1000, 'the allowance itself is fine');
  });

  it('cancel, or leaving a for-await loop early, lets go of what waits and tells the relay; the loop ends without an error', async () => {
    const room = owner(1000);
    const s = new IncomingStream(info(7, 100), room);
    s.push(0, bytes(10));
    s.push(1, bytes(10));
    for await (const chunk of s) {
      assert.equal(chunk.byteLength, 10);
      break;
    }
    assert.deepEqual(room.left, [7]);
    assert.equal(room.unread(), 0);
    s.push(2, bytes(10)); // late chunks are not kept
    assert.equal(room.unread(), 0);
    const t = new IncomingStream(info(8, 100), room);
    const reading = (async () => {
      let n = 0;
      for await (const _ of t) n++;
      return n;
    })();
    t.push(0, bytes(5));
    await new Promise((r) => setImmediate(r));
    t.cancel();
    assert.equal(await reading, 1);
    assert.deepEqual(room.left, [7, 8]);
  });

  it('more bytes than announced end the stream (bad-chunk); a hundred thousand chunks drain in order', async () => {
    const room = owner(Infinity);
    const s = new IncomingStream(info(1, 5), room);
    s.push(0, bytes(5));
    s.push(1, bytes(1));
    await assert.rejects(s.readAll(), (err: SdkError) => err.reason === 'bad-chunk');
    const many = new IncomingStream(info(2, 100_000), room);
    for (let i = 0; i < 100_000; i++) many.push(i, Uint8Array.of(i & 0xff));
    many.end();
    const all = await many.readAll();
    assert.equal(all.byteLength, 100_000);
    assert.ok(all.every((v, i) => v === (i & 0xff)));
  });

  it('an empty chunk ends its stream (bad-chunk) and the relay is told (a million of them were queued: +186 MiB of heap under an allowance of 1 KiB)', async () => {
    const room = owner(1024);
    const empty = new IncomingStream(info(1, 10), room);
    empty.push(0, bytes(0));
    assert.deepEqual(room.left, [1], 'the relay is told to send no more of it');
    await assert.rejects(empty.readAll(), (err: SdkError) => err.code === 'INTERNAL_ERROR' && err.reason === 'bad-chunk');
  });

  it('a chunk waiting unread costs the allowance at least 256 bytes: chunks of a byte cannot pile up past maxUnreadBytes (each cost 1)', async () => {
    const room = owner(1024);
    const tiny = new IncomingStream(info(2, 1_000_000), room);
    let taken = 0;
    for (let i = 0; i < 1_000_000 && room.left.length === 0; i++, taken++) tiny.push(i, bytes(1));
    assert.equal(taken, 1024 / MIN_CHUNK_CHARGE + 1, 'the chunk past the allowance gives the stream up');
    assert.deepEqual(room.left, [2]);
    assert.equal(room.unread(), 0, 'what it held is let go');
    await assert.rejects(tiny.readAll(), (err: SdkError) => err.reason === 'slow-recipient');
    // the room's own allowance: charged and given back chunk by chunk as they are read
    const connection = { request: async () => ({}) } as unknown as ConstructorParameters<typeof DataStreams>[0];
    const streams = new DataStreams(connection);
    streams.maxUnreadBytes = 64 * 1024;
    const kept: IncomingStream[] = [];
    streams.on('stream', (stream) => void kept.push(stream));
    streams.opened({ streamId: 3, from: 'x', size: 1_000_000, kind: 'bytes', timestamp: 0 });
    for (let seq = 0; seq < 100_000; seq++) streams.chunk(encodeChunk(3, seq, bytes(1)));
    assert.equal(kept[0]!.received, 64 * 1024 / MIN_CHUNK_CHARGE, 'no more chunks held than the allowance pays for');
    await assert.rejects(kept[0]!.readAll(), (err: SdkError) => err.reason === 'slow-recipient');
    assert.equal((streams as unknown as { unread: number }).unread, 0);
  });

  it('readAll gathers the bytes as they come: a stream that announces 1 GiB costs what arrived, which stays on the allowance until the read is over', async () => {
    const room = owner(Infinity);
    const before = process.memoryUsage().arrayBuffers;
    const s = new IncomingStream(info(1, 2 ** 30), room);
    const all = s.readAll({ maxBytes: Infinity });
    for (let i = 0; i < 3; i++) {
      s.push(i, bytes(1000));
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(s.received, 3000);
    assert.equal(room.unread(), 3000, 'taken as they came, and still counted while gathered');
    const grew = process.memoryUsage().arrayBuffers - before;
    assert.ok(grew < 64 * 1024 * 1024, `${grew} bytes allocated for 3,000 received (never the announced size ahead of them)`);
    // announced and never sent: the relay aborts it (stream-idle), and the reader hears of it
    s.fail(new SdkError('TIMEOUT', 'the stream carried nothing for 60 s', { reason: 'stream-idle' }));
    await assert.rejects(all, (err: SdkError) => err.reason === 'stream-idle');
    assert.equal(room.unread(), 0, 'given back when the read is over');
  });

  it('reads of many streams at once hold no more together than the allowance: what each gathered counts until it is over (sixteen reads of 64 MiB grew a reader by 1 GiB)', async () => {
    const room = owner(4000);
    const streams = Array.from({ length: 4 }, (_, i) => new IncomingStream(info(20 + i, 4000), room));
    const reads = streams.map((s) => s.readAll().then(() => 'read', (err: SdkError) => err.reason));
    let most = 0;
    for (let seq = 0; seq < 4; seq++) {
      for (const s of streams) s.push(seq, bytes(1000));
      await new Promise((r) => setImmediate(r));
      most = Math.max(most, room.unread());
    }
    for (const s of streams) s.end();
    const outcomes = await Promise.all(reads);
    assert.ok(most <= 4000, `${most} held`);
    // 16,000 bytes were sent for an allowance of 4,000: they cannot all have been gathered
    assert.ok(outcomes.includes('slow-recipient') && outcomes.every((o) => o === 'read' || o === 'slow-recipient'), outcomes.join());
    assert.equal(room.unread(), 0, 'every read over: all given back');
    await assert.rejects(new IncomingStream(info(30, 10), room).readAll({ maxBytes: Number.NaN }), (err: SdkError) => err.code === 'INVALID_ARGUMENT');
  });

  it('a stream that ended unread gives its bytes back when cancelled or left early, and when the app lets go of it unread (garbage-collected)', async () => {
    const room = owner(10_000);
    const ended = new IncomingStream(info(1, 600), room);
    ended.push(0, bytes(300));
    ended.push(1, bytes(300));
    ended.end();
    assert.equal(room.unread(), 600);
    ended.cancel();
    assert.equal(room.unread(), 0, 'cancelled after it ended');
    const left = new IncomingStream(info(2, 600), room);
    left.push(0, bytes(300));
    left.push(1, bytes(300));
    left.end();
    for await (const _ of left) break;
    assert.equal(room.unread(), 0, 'left early after it ended');
    // the room's streams, with a stream the app never keeps
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const connection = { request: async () => ({}) } as unknown as ConstructorParameters<typeof DataStreams>[0];
    const streams = new DataStreams(connection);
    streams.on('stream', () => undefined);
    streams.opened({ streamId: 9, from: 'x', size: 300, kind: 'bytes', timestamp: 0 });
    streams.chunk(encodeChunk(9, 0, bytes(300)));
    streams.ended(9);
    const unread = () => (streams as unknown as { unread: number }).unread;
    assert.equal(unread(), 300);
    for (let i = 0; i < 20 && unread() > 0; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(unread(), 0, 'given back once the stream was collected');
  });
});

describe('leaving streams (SDK)', () => {
  it('streams to leave go together, one stream.leave on its way at a time; a stream that ends meanwhile is not left; a relay that takes no streamIds gets them one by one', async () => {
    for (const oldRelay of [false, true]) {
      const sent: unknown[] = [];
      let inFlight = 0;
      let most = 0;
      const connection = {
        request: async (_method: string, params: { streamId?: number; streamIds?: number[] }) => {
          sent.push(params);
          most = Math.max(most, ++inFlight);
          await new Promise((r) => setTimeout(r, 5));
          inFlight--;
          if (oldRelay && params.streamIds) throw new SdkError('INVALID_ARGUMENT', 'streamId must be a stream id');
          return {};
        },
      } as unknown as ConstructorParameters<typeof DataStreams>[0];
      const streams = new DataStreams(connection);
      // nobody listens: each stream announced is left
      for (let id = 1; id <= 10; id++) streams.opened({ streamId: id, from: 'x', size: 10, kind: 'bytes', timestamp: 0 });
      streams.ended(10);
      await new Promise((r) => setTimeout(r, 200));
      const left = sent.flatMap((p) => {
        const { streamId, streamIds } = p as { streamId?: number; streamIds?: number[] };
        return streamIds ?? [streamId!];
      });
      assert.equal(most, 1, 'one on its way at a time');
      assert.deepEqual([...new Set(left)].sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8, 9], 'every stream left but the one that ended');
      // the ten announced in one turn go in one request (the tenth ended before it went)
      if (!oldRelay) assert.deepEqual(sent, [{ streamIds: [1, 2, 3, 4, 5, 6, 7, 8, 9] }]);
      else assert.deepEqual(sent.slice(1), [1, 2, 3, 4, 5, 6, 7, 8, 9].map((streamId) => ({ streamId })), 'after the refusal, one by one');
    }
  });
});

describe('readAll while another read runs (SDK)', () => {
  it('is refused (already-read) and leaves what the running read gathered on the allowance', async () => {
    const room = owner(10_000);
    const s = new IncomingStream(info(40, 2000), room);
    const first = s.readAll();
    s.push(0, bytes(1000));
    await new Promise((r) => setImmediate(r));
    await assert.rejects(s.readAll(), (err: SdkError) => err.reason === 'already-read');
    assert.equal(room.unread(), 1000, 'still counted: the first read holds it');
    s.push(1, bytes(1000));
    s.end();
    assert.equal((await first).byteLength, 2000);
    assert.equal(room.unread(), 0);
  });
});
