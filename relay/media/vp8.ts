/**
 * Just enough of the VP8 RTP payload format (RFC 7741) to tell where a key frame starts: the
 * relay switches simulcast layers only there, so a subscriber never gets a layer it cannot
 * decode.
 */
export function isVp8KeyFrameStart(payload: Uint8Array): boolean {
  if (payload.length < 1) return false;
  const first = payload[0]!;
  const extended = (first & 0x80) !== 0;
  const start = (first & 0x10) !== 0;
  const partition = first & 0x07;
  if (!start || partition !== 0) return false;
  let offset = 1;
  if (extended) {
    if (payload.length < 2) return false;
    const flags = payload[1]!;
    offset = 2;
    if (flags & 0x80) offset += payload[offset] !== undefined && payload[offset]! & 0x80 ? 2 : 1; // picture id (7 or 15 bits)
    if (flags & 0x40) offset += 1; // TL0PICIDX
    if (flags & 0x30) offset += 1; // TID / KEYIDX
  }
  const header = payload[offset];
  // the first byte of the VP8 frame: bit 0 is the inverse key frame flag
  return header !== undefined && (header & 0x01) === 0;
}
