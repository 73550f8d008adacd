/**
 * A WebSocket frame's header (RFC 6455 §5.2) as the relay sends it: final, unmasked, no
 * extension bits (the relay turns `permessage-deflate` off). Built once per payload and kept
 * while the payload lives, so a fan-out to a thousand members frames its message once instead of
 * a thousand times.
 */
const headers = new WeakMap<Uint8Array, Buffer>();
const OPCODE_TEXT = 0x1;
const OPCODE_BINARY = 0x2;
const FIN = 0x80;

/**
 * The header of the frame that carries `data`, whole, as a text or binary message. The same
 * payload is always sent with the same kind (a text fan-out is never also sent as binary), so the
 * cache is keyed by the payload alone; a mismatch is rebuilt rather than trusted.
 */
export function frameHeader(data: Uint8Array, binary: boolean): Buffer {
  const cached = headers.get(data);
  const first = FIN | (binary ? OPCODE_BINARY : OPCODE_TEXT);
  if (cached && cached[0] === first) return cached;
  const header = buildHeader(first, data.length);
  headers.set(data, header);
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
