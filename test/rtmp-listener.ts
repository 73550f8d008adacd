import { createServer, type Server, type Socket } from 'node:net';
import { amfDecode, amfEncode, ChunkReader, MessageType, writeChunks, type Amf } from '../relay/outputs/rtmp-wire.ts';

/** What a local RTMP listener saw of one publisher. */
export interface Received {
  commands: string[];
  app?: string;
  key?: string;
  data: Amf[][];
}

/**
 * Read exactly `n` bytes from a socket; rejects if it closes first. Leaves the socket paused
 * with the rest put back: the next reader attaches its 'data' listener and calls `resume()`.
 */
export function readExactly(socket: Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let got: Buffer = Buffer.alloc(0);
    const done = () => {
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
    };
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length < n) return;
      done();
      if (got.length > n) socket.unshift(got.subarray(n));
      resolve(got.subarray(0, n));
    };
    const onClose = () => {
      done();
      reject(new Error('closed'));
    };
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.resume();
  });
}

/** The server side of the simple handshake: C0C1 in, S0S1S2 out, C2 in (the socket is left paused). */
export async function acceptHandshake(socket: Socket): Promise<void> {
  const c0c1 = await readExactly(socket, 1537);
  socket.write(Buffer.concat([Buffer.from([3]), Buffer.alloc(1536, 1), c0c1.subarray(1)]));
  await readExactly(socket, 1536);
}

/** A command message as a well-behaved server would send it (chunk stream 3, chunks of 128). */
export function command(values: Amf[], streamId = 0): Buffer {
  return Buffer.from(writeChunks({ typeId: MessageType.Command, streamId, timestamp: 0, payload: amfEncode(values) }, 3, 128));
}

/** A type 0 chunk header (one-byte basic header), for messages written by hand. */
export function header0(csid: number, typeId: number, length: number, timestamp = 0, streamId = 0): Buffer {
  const h = Buffer.alloc(12);
  h[0] = csid;
  h.writeUIntBE(timestamp, 1, 3);
  h.writeUIntBE(length, 4, 3);
  h[7] = typeId;
  h.writeUInt32LE(streamId, 8);
  return h;
}

/** A command message with this exact (possibly malformed) AMF0 payload. */
export function commandBytes(payload: Buffer): Buffer {
  return writeChunks({ typeId: MessageType.Command, streamId: 0, timestamp: 0, payload }, 3, 128);
}

/** A Set Chunk Size message with any 32-bit value. */
export function setChunkSize(size: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(size);
  return Buffer.concat([header0(2, MessageType.SetChunkSize, 4), p]);
}

/** A TCP server on a random loopback port running `script` on each connection. */
export async function startTcpServer(script: (socket: Socket) => void | Promise<void>): Promise<{ port: number; sockets: Socket[]; closed: () => number; close(): void }> {
  const sockets: Socket[] = [];
  let closed = 0;
  const server: Server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    socket.on('close', () => closed++);
    void Promise.resolve()
      .then(() => script(socket))
      .catch(() => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    sockets,
    closed: () => closed,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** A minimal RTMP server for tests: handshake, connect, createStream, publish, data. */
export async function startRtmpListener(): Promise<{ port: number; sessions: Received[]; sockets: Socket[]; close(): void }> {
  const sessions: Received[] = [];
  const server = await startTcpServer(async (socket) => {
    const got: Received = { commands: [], data: [] };
    sessions.push(got);
    await acceptHandshake(socket);
    const reply = (values: Amf[], streamId = 0) => socket.write(command(values, streamId));
    const reader = new ChunkReader((m) => {
      if (m.typeId === MessageType.Data) return void got.data.push(amfDecode(m.payload));
      if (m.typeId !== MessageType.Command) return;
      const [name, txn, , arg] = amfDecode(m.payload);
      got.commands.push(String(name));
      if (name === 'connect') {
        got.app = String((amfDecode(m.payload)[2] as { app?: string }).app);
        reply(['_result', txn, { fmsVer: 'test' }, { code: 'NetConnection.Connect.Success' }]);
      } else if (name === 'createStream') reply(['_result', txn, null, 1]);
      else if (name === 'publish') {
        got.key = String(arg);
        reply(['onStatus', 0, null, { level: 'status', code: 'NetStream.Publish.Start' }], 1);
      }
    });
    socket.on('data', (d: Buffer) => {
      try {
        reader.push(d);
      } catch {
        socket.destroy();
      }
    });
    socket.resume();
  });
  return { port: server.port, sessions, sockets: server.sockets, close: server.close };
}
