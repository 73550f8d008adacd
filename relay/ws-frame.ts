/**
 * A WebSocket frame's header (RFC 6455 §5.2) as the relay sends it: final, unmasked, no
 * extension bits (the relay turns `permessage-deflate` off).
 */
const OPCODE_TEXT = 0x1;
const OPCODE_BINARY = 0x2;
const FIN = 0x80;

/**
 * The last two payloads framed and their headers. The copies of a fan-out are framed one after
 * another as they enter their outboxes (or alternate between a full and a reduced version of one
 * event); a frame for one connection is a miss and costs what ws's own framing did. Not a
 * WeakMap: a weak entry per frame (a 64 KiB stream chunk each) made the garbage collector's work
 * grow with the traffic. The two payloads are kept until the next two are framed.
 */
let lastData: Uint8Array | null = null;
let lastLength = 0;
let lastHeader: Buffer | null = null;
let priorData: Uint8Array | null = null;
let priorLength = 0;
let priorHeader: Buffer | null = null;

/**
 * The header of the frame that carries `data`, whole, as a text or binary message: built once
 * for all the copies of a fan-out. A payload framed as the other kind is framed again.
 */
export function frameHeader(data: Uint8Array, binary: boolean): Buffer {
  const first = FIN | (binary ? OPCODE_BINARY : OPCODE_TEXT);
  const length = data.byteLength;
  // the length too: a view of a resizable buffer is one object whose length can change (the
  // relay sends none: its header would also go stale between entering an outbox and the write)
  if (data === lastData && length === lastLength && lastHeader![0] === first) return lastHeader!;
  if (data === priorData && length === priorLength && priorHeader![0] === first) return priorHeader!;
  const header = buildHeader(first, length);
  priorData = lastData;
  priorLength = lastLength;
  priorHeader = lastHeader;
  lastData = data;
  lastLength = length;
  lastHeader = header;
  return header;
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
