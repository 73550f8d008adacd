import type { Socket } from 'node:net';

/**
 * WebSocket frames (RFC 6455 §5.2) as the relay sends them: final, unmasked, no extension bits
 * (the relay turns `permessage-deflate` off).
 */
const OPCODE_TEXT = 0x1;
const OPCODE_BINARY = 0x2;
const FIN = 0x80;

/**
 * A frame on its way to a connection, built once for all the copies of a fan-out: the relay
 * writes it to the socket itself (see `Connection.write`).
 */
export interface OutFrame {
  /** Its WebSocket header. */
  readonly header: Buffer;
  /** Its payload. */
  readonly data: Uint8Array;
  /** The payload's length when it was framed (what an outbox counts while it waits). */
  readonly bytes: number;
  /**
   * Header and payload in one buffer, for a payload of at most {@link WHOLE_BYTES}: one write
   * and no cork for each copy. Null for a larger one: header and payload are written in turn
   * (copying it once would cost more than the cork saves).
   */
  readonly whole: Buffer | null;
}

/** Payloads up to this size are framed with their header in one buffer. */
export const WHOLE_BYTES = 16 * 1024;

interface Framed {
  frame: OutFrame;
  /** The payload's length when it was framed. */
  length: number;
  /** The payload within `whole` (compared with the payload of a later copy). */
  body: Buffer | null;
}

/**
 * The last two payloads framed. The copies of a fan-out are framed one after another as they
 * enter their outboxes (or alternate between a full and a reduced version of one event); a frame
 * for one connection is a miss. Not a WeakMap: a weak entry per frame (a 64 KiB stream chunk
 * each) made the garbage collector's work grow with the traffic. The two payloads are kept until
 * the next two are framed.
 */
let last: Framed | null = null;
let prior: Framed | null = null;

function matches(f: Framed | null, data: Uint8Array, length: number, first: number): f is Framed {
  // the length too: a view of a resizable buffer is one object whose length can change; and the
  // bytes of a payload copied into `whole` (a buffer written again after new bytes were put in it
  // must not go out with the old ones: a memcmp of at most 16 KiB, against a write's syscall)
  return f !== null && f.frame.data === data && f.length === length && f.frame.header[0] === first && (f.body === null || f.body.equals(data));
}

/**
 * The frame that carries `data`, whole, as a text or binary message: built once for all the
 * copies of a fan-out (the relay's frames are not masked, so every copy is the same bytes). A
 * payload framed as the other kind is framed again. A payload must not change once sent (every
 * sender builds a fresh buffer): a queued copy of a large one is written from it; the bytes of
 * a small one are compared anyway, so that a buffer reused for new bytes is never sent with the
 * old ones.
 */
export function frame(data: Uint8Array, binary: boolean): OutFrame {
  const first = FIN | (binary ? OPCODE_BINARY : OPCODE_TEXT);
  const length = data.byteLength;
  if (matches(last, data, length, first)) return last.frame;
  if (matches(prior, data, length, first)) return prior.frame;
  const header = buildHeader(first, length);
  let whole: Buffer | null = null;
  let body: Buffer | null = null;
  if (length <= WHOLE_BYTES) {
    whole = Buffer.allocUnsafe(header.length + length);
    header.copy(whole, 0);
    whole.set(data, header.length);
    body = whole.subarray(header.length);
  }
  prior = last;
  last = { frame: { header, data, bytes: length, whole }, length, body };
  return last.frame;
}

/** The header of the frame that carries `data` (see {@link frame}). */
export function frameHeader(data: Uint8Array, binary: boolean): Buffer {
  return frame(data, binary).header;
}

function buildHeader(first: number, length: number): Buffer {
  if (length < 126) return Buffer.from([first, length]);
  if (length < 0x10000) {
    const header = Buffer.allocUnsafe(4);
    header[0] = first;
    header[1] = 126;
    header.writeUInt16BE(length, 2);
    return header;
  }
  const header = Buffer.allocUnsafe(10);
  header[0] = first;
  header[1] = 127;
  // payloads are bounded far below 2^53 (the frame and buffer caps): the high word is their upper bits
  header.writeUInt32BE(Math.floor(length / 0x1_0000_0000), 2);
  header.writeUInt32BE(length >>> 0, 6);
  return header;
}

/**
 * Write `frames` to `socket`, in order: a small frame alone in one call, else in one corked
 * write. In a micro-benchmark (1,000 sockets, a 200-byte frame each, median per write) ws's
 * `send` took 19–24 µs, header and payload corked 15–16 µs, one buffer 13–14 µs.
 */
export function writeFrames(socket: Socket, frames: readonly OutFrame[]): void {
  if (frames.length === 1 && frames[0]!.whole) {
    socket.write(frames[0]!.whole);
    return;
  }
  socket.cork();
  try {
    for (const { header, data, whole } of frames) {
      if (whole) socket.write(whole);
      else {
        socket.write(header);
        if (data.length > 0) socket.write(data);
      }
    }
  } finally {
    socket.uncork();
  }
}
