/**
 * Long-lived bytes whose memory is given back when the relay lets go of them, not when V8 next
 * runs a full collection. Every Buffer's memory is "external" to V8's heap: the Buffer object of
 * a message kept for minutes is promoted to the old generation, and its memory is freed only by
 * a full (mark-compact) collection, while V8 also starts one whenever external memory has grown
 * 64 MB since the last. A room's history churning at a flood's byte rate thus started a full
 * collection every 1.5 s under the hostile benchmark, each a 5–20 ms pause every room waited
 * through. Transferring the memory of a Buffer the relay drops to a fresh, short-lived
 * ArrayBuffer lets the next young-generation collection (every few tens of ms) free it instead.
 */

/** Below this, bytes are not worth an allocation of their own (the Buffer pool's slices are shared). */
export const OWN_MIN_BYTES = 4096;

/**
 * `bytes` in memory of their own (a copy, when they are at least {@link OWN_MIN_BYTES}): they can
 * be {@link release}d without touching any other Buffer (a view into a frame that is still being
 * written to other members must never be).
 */
export function ownCopy(bytes: Buffer): Buffer {
  if (bytes.length < OWN_MIN_BYTES) return bytes;
  const own = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(own);
  return own;
}

/**
 * Give back the memory of a Buffer made by {@link ownCopy} that nothing reads any more: it is
 * moved to an ArrayBuffer nobody holds, which the next young collection frees. Anything else (a
 * small, pooled or shared Buffer) is left to the collector as before. Reading `bytes` afterwards
 * finds it empty.
 */
export function release(bytes: Buffer): void {
  const { buffer } = bytes;
  if (bytes.length < OWN_MIN_BYTES || bytes.byteOffset !== 0 || bytes.byteLength !== buffer.byteLength || !(buffer instanceof ArrayBuffer)) return;
  try {
    structuredClone(buffer, { transfer: [buffer] });
  } catch {
    // already detached, or not transferable: the collector frees it in time
  }
}
