/**
 * Bytes whose memory is given back when the relay lets go of them, not when V8 next runs a full
 * collection. Every Buffer's memory is "external" to V8's heap: a Buffer that lived long enough
 * to be promoted to the old generation (a member's frame that waited for its budget) is freed
 * only by a full (mark-compact) collection, while V8 also starts one whenever external memory has
 * grown 64 MB since the last. Transferring the memory of a Buffer the relay drops to a fresh,
 * short-lived ArrayBuffer lets the next young-generation collection (every few tens of ms) free
 * it instead. (Bytes kept for minutes live in the relay's own arena: `byte-arena.ts`.)
 */

/** Below this, bytes are not worth giving back (the Buffer pool's slices are shared). */
export const OWN_MIN_BYTES = 4096;

/**
 * Give back the memory of a Buffer that is the whole of its ArrayBuffer and that nothing reads any more: it is
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
