/**
 * The relay frames its own messages (a fan-out's frame once for all its copies): what it writes
 * to the socket must be what a real WebSocket client reads, at every length boundary of the
 * header (7-bit, 16-bit, 64-bit lengths) and of a frame written as one buffer, as text and as
 * binary, alone or in a batch.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { frame, frameHeader, WHOLE_BYTES, writeFrames } from './ws-frame.ts';

const LENGTHS = [0, 1, 125, 126, 127, WHOLE_BYTES - 1, WHOLE_BYTES, WHOLE_BYTES + 1, 65_535, 65_536, 70_000];

async function pair(): Promise<{ socket: Socket; server: WebSocket; client: WebSocket; close: () => Promise<void> }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const { port } = wss.address() as { port: number };
  const accepted = new Promise<[WebSocket, Socket]>((resolve) => wss.once('connection', (ws, req) => resolve([ws, req.socket as Socket])));
  const client = new WebSocket(`ws://127.0.0.1:${port}`);
  await new Promise<void>((resolve, reject) => client.once('open', () => resolve()).once('error', reject));
  const [server, socket] = await accepted;
  return {
    socket,
    server,
    client,
    close: async () => {
      client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

function payload(length: number, seed: number): Buffer {
  const data = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) data[i] = 0x21 + ((i * 7 + seed) % 90);
  return data;
}

describe('frameHeader: frames the relay writes itself', () => {
  it('a real client reads every length boundary, as text and as binary, in order', async () => {
    const { socket, client, close } = await pair();
    try {
      const sent: Array<{ data: Buffer; binary: boolean }> = [];
      for (const length of LENGTHS) for (const binary of [false, true]) sent.push({ data: payload(length, sent.length), binary });
      const received: Array<{ data: Buffer; binary: boolean }> = [];
      const all = new Promise<void>((resolve) =>
        client.on('message', (data, binary) => {
          received.push({ data: Buffer.from(data as Buffer), binary });
          if (received.length === sent.length) resolve();
        }),
      );
      // the first half one frame per write (a small one in one call), the rest in one batch
      const half = sent.length >> 1;
      for (const { data, binary } of sent.slice(0, half)) writeFrames(socket, [frame(data, binary)]);
      writeFrames(socket, sent.slice(half).map(({ data, binary }) => frame(data, binary)));
      await all;
      assert.deepEqual(
        received.map((r) => [r.data.length, r.binary]),
        sent.map((s) => [s.data.length, s.binary]),
      );
      for (let i = 0; i < sent.length; i++) assert.ok(received[i]!.data.equals(sent[i]!.data), `message ${i} arrived whole`);
    } finally {
      await close();
    }
  });

  it('one payload is framed once for all its copies, and again if it is ever sent as the other kind', () => {
    const data = payload(300, 1);
    const text = frameHeader(data, false);
    assert.equal(frameHeader(data, false), text, 'the second copy reuses the first copy’s header');
    assert.deepEqual([...text], [0x81, 126, 0x01, 0x2c]);
    const binary = frameHeader(data, true);
    assert.deepEqual([...binary], [0x82, 126, 0x01, 0x2c]);
    assert.notEqual(binary, text);
    assert.deepEqual([...frameHeader(payload(70_000, 2), true)], [0x82, 127, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70]);
    // a full and a reduced version of one event, alternating member by member, both stay framed once
    const full = payload(200, 3);
    const reduced = payload(10, 4);
    const fullHeader = frameHeader(full, false);
    const reducedHeader = frameHeader(reduced, false);
    for (let member = 0; member < 4; member++) {
      assert.equal(frameHeader(full, false), fullHeader);
      assert.equal(frameHeader(reduced, false), reducedHeader);
    }
    // a payload framed again after others were is framed anew, and alike
    frameHeader(payload(5, 4), false);
    frameHeader(payload(6, 5), false);
    assert.deepEqual([...frameHeader(data, false)], [...text]);
  });

  it("ws's own frames (a ping, the close) and the relay's arrive in the order they were sent, and ws counts the relay's unsent bytes", async () => {
    // what Connection.write relies on: ws's sender holds nothing back (no deflate, no Blob), and
    // its bufferedAmount is the socket's (the slow-consumer cut-offs read it)
    const { socket, server, client, close } = await pair();
    try {
      const order: string[] = [];
      const closed = new Promise<number>((resolve) => client.once('close', (code) => resolve(code)));
      client.on('message', (data) => order.push(`message ${String(data)}`));
      client.on('ping', () => order.push('ping'));
      // as Connection.write does: a small frame alone in one call, a large one corked
      const write = (text: string) => writeFrames(socket, [frame(Buffer.from(text), false)]);
      // more than loopback's socket buffers take at once (Linux: up to 4 MiB sent and 32 MiB received
      // by default): 4 MiB were sometimes all taken, and nothing was left for ws to count
      const big = Buffer.alloc(64 * 1024 * 1024, 0x61);
      writeFrames(socket, [frame(big, true)]);
      assert.ok(server.bufferedAmount > 0, `ws counts what the relay wrote and the socket holds (${server.bufferedAmount})`);
      write('a');
      server.ping();
      write('b');
      server.close(4000, 'bye');
      assert.equal(await closed, 4000);
      assert.deepEqual(order.slice(1), ['message a', 'ping', 'message b']);
    } finally {
      await close();
    }
  });

  it('the copies of a fan-out share one frame: a small one is one buffer, a larger one its header and payload', () => {
    const small = payload(300, 6);
    const first = frame(small, false);
    assert.equal(frame(small, false), first, 'the second copy is the first copy’s frame');
    assert.ok(first.whole, 'a small frame is one buffer');
    assert.deepEqual([...first.whole], [0x81, 126, 0x01, 0x2c, ...small]);
    const large = payload(WHOLE_BYTES + 1, 7);
    const big = frame(large, true);
    assert.equal(big.whole, null, 'a larger payload is not copied');
    assert.equal(big.data, large);
    assert.equal(frame(large, true), big);
  });

  it('a buffer sent again with new bytes in it goes out with its new bytes', () => {
    const data = payload(50, 8);
    const before = frame(data, false);
    data.fill(0x41);
    const after = frame(data, false);
    assert.deepEqual([...after.whole!], [0x81, 50, ...Buffer.alloc(50, 0x41)]);
    assert.notEqual(before.whole![2], 0x41, 'a small frame framed before (a copy still queued) keeps the bytes sent then');
  });

  it('a view whose length changes (over a resizable buffer) is framed with its length now', () => {
    const Resizable = ArrayBuffer as unknown as new (length: number, options: { maxByteLength: number }) => ArrayBuffer & { resize(length: number): void };
    const buffer = new Resizable(10, { maxByteLength: 300 });
    const view = new Uint8Array(buffer);
    assert.deepEqual([...frameHeader(view, false)], [0x81, 10]);
    buffer.resize(200);
    assert.deepEqual([...frameHeader(view, false)], [0x81, 126, 0, 200]);
  });
});
