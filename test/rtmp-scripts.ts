/**
 * Hostile and broken "RTMP servers" for tests: TCP servers that run a script on each
 * connection, and the few bytes of RTMP they need to write by hand (a handshake, chunk headers,
 * AMF0 values). Nothing here reads RTMP: the scripts only write.
 */
import { createServer, type Server, type Socket } from 'node:net';

/**
 * Read exactly `n` bytes from a socket; rejects if it closes first. Leaves the socket paused
 * with the rest put back.
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

/** RTMP message types the scripts write. */
export const MessageType = { SetChunkSize: 1, Ack: 3, Command: 20 } as const;

/** A type 0 chunk header (one-byte basic header). */
export function header0(csid: number, typeId: number, length: number, timestamp = 0, streamId = 0): Buffer {
  const h = Buffer.alloc(12);
  h[0] = csid;
  h.writeUIntBE(timestamp, 1, 3);
  h.writeUIntBE(length, 4, 3);
  h[7] = typeId;
  h.writeUInt32LE(streamId, 8);
  return h;
}

/** An AMF0 value the scripts write. */
export type Amf0 = string | number | null | { [key: string]: Amf0 };

/** AMF0 encoding of strings, numbers, null and objects. */
export function amf0(values: Amf0[]): Buffer {
  const parts: Buffer[] = [];
  const str = (s: string) => {
    const b = Buffer.from(s);
    const len = Buffer.alloc(2);
    len.writeUInt16BE(b.length);
    return Buffer.concat([len, b]);
  };
  const one = (v: Amf0) => {
    if (v === null) parts.push(Buffer.from([5]));
    else if (typeof v === 'number') {
      const b = Buffer.alloc(9);
      b.writeDoubleBE(v, 1);
      parts.push(b);
    } else if (typeof v === 'string') parts.push(Buffer.from([2]), str(v));
    else {
      parts.push(Buffer.from([3]));
      for (const [k, x] of Object.entries(v)) {
        parts.push(str(k));
        one(x);
      }
      parts.push(Buffer.from([0, 0, 9]));
    }
  };
  values.forEach(one);
  return Buffer.concat(parts);
}

/** A command message with this exact payload, in chunks of 128 on chunk stream 3. */
export function commandBytes(payload: Buffer, streamId = 0): Buffer {
  const out = [header0(3, MessageType.Command, payload.length, 0, streamId), payload.subarray(0, 128)];
  for (let at = 128; at < payload.length; at += 128) out.push(Buffer.from([0xc3]), payload.subarray(at, at + 128));
  return Buffer.concat(out);
}

/** A command message of these values. */
export function command(values: Amf0[], streamId = 0): Buffer {
  return commandBytes(amf0(values), streamId);
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
