/**
 * Memory for bytes the relay keeps for minutes (pubsub history, whiteboard shapes), managed by
 * the relay itself: fixed-size blocks in slabs that are allocated once and reused, never handed
 * to the garbage collector.
 *
 * Why not the Buffer a message arrived in, or one of its own:
 * - V8 counts every ArrayBuffer's memory as "external" and starts a full (mark-compact)
 *   collection whenever external memory has grown 64 MB since the last one. A relay whose history
 *   fills to its budget (hundreds of MiB within seconds under a flood) paid one full collection
 *   per 64 MB of growth — live bytes, not garbage — each a pause every room waited through. The
 *   slabs are `SharedArrayBuffer`s, whose memory V8 does not count that way (measured: 1,000 MiB
 *   of them started no full collection, of `ArrayBuffer`s 15); since the relay frees and reuses
 *   their blocks itself, none of it ever waits for a collection either.
 * - A small message kept as a view into the Buffer it was framed in keeps that Buffer's whole
 *   memory: Node slices Buffers under 4 KiB from shared 8 KiB chunks, so a member persisting
 *   one-byte messages between other sends held 8 KiB for each ~200 bytes charged (42 times the
 *   history budget, measured by an attack review).
 *
 * The memory is bounded by what is kept: a message takes whole blocks of its size class
 * ({@link SMALL_BLOCK_BYTES} below {@link LARGE_FROM_BYTES}, else {@link LARGE_BLOCK_BYTES}), at
 * most 5/4 of what its budget charges for it (the charge includes the frame around the JSON and
 * 64 bytes of bookkeeping); slabs stay at their high-water mark (the next flood would only take
 * them again), so the arena holds at most 5/4 of its budgets, plus one partly used slab per size
 * class.
 */

/** Bytes in one block of the small size class. */
export const SMALL_BLOCK_BYTES = 128;
/** Bytes in one block of the large size class. */
export const LARGE_BLOCK_BYTES = 1024;
/** Kept bytes of at least this length take large blocks (at most 1/4 wasted from here on). */
export const LARGE_FROM_BYTES = 4096;
/** Bytes in one slab. */
export const SLAB_BYTES = 1024 * 1024;

/** Kept bytes, wherever they live. */
export interface KeptBytes {
  readonly length: number;
  /** Copy all of it into `target` at `targetStart`; returns the bytes copied. */
  copy(target: Uint8Array, targetStart: number): number;
  toString(): string;
}

/** Blocks of one size in slabs of {@link SLAB_BYTES}, handed out and taken back. */
class BlockPool {
  private readonly slabs: Buffer[] = [];
  /** Free blocks, as indices (slab × blocks a slab + block); the last freed is handed out first. */
  private readonly free: number[] = [];
  private readonly perSlab: number;

  constructor(readonly blockBytes: number) {
    this.perSlab = SLAB_BYTES / blockBytes;
  }

  get slabBytes(): number {
    return this.slabs.length * SLAB_BYTES;
  }

  get bytesInUse(): number {
    return this.slabBytes - this.free.length * this.blockBytes;
  }

  /** `bytes` copied into blocks of this pool. */
  keep(bytes: Uint8Array): ArenaBytes {
    const count = Math.max(1, Math.ceil(bytes.length / this.blockBytes));
    while (this.free.length < count) this.grow();
    const blocks = this.free.splice(this.free.length - count, count);
    for (let i = 0, at = 0; i < count && at < bytes.length; i++, at += this.blockBytes) {
      const b = blocks[i]!;
      this.slabOf(b).set(bytes.subarray(at, Math.min(at + this.blockBytes, bytes.length)), this.offsetOf(b));
    }
    return new ArenaBytes(this, blocks, bytes.length);
  }

  slabOf(index: number): Buffer {
    return this.slabs[Math.floor(index / this.perSlab)]!;
  }

  offsetOf(index: number): number {
    return (index % this.perSlab) * this.blockBytes;
  }

  release(blocks: readonly number[]): void {
    for (const b of blocks) this.free.push(b);
  }

  private grow(): void {
    const first = this.slabs.length * this.perSlab;
    this.slabs.push(Buffer.from(new SharedArrayBuffer(SLAB_BYTES)));
    for (let b = first; b < first + this.perSlab; b++) this.free.push(b);
  }
}

/** The relay's arena of kept bytes: two size classes of blocks (see the module's comment). */
export class ByteArena {
  private readonly small = new BlockPool(SMALL_BLOCK_BYTES);
  private readonly large = new BlockPool(LARGE_BLOCK_BYTES);

  /** Bytes of slabs allocated (their high-water mark). */
  get slabBytes(): number {
    return this.small.slabBytes + this.large.slabBytes;
  }

  /** Bytes of blocks in use. */
  get bytesInUse(): number {
    return this.small.bytesInUse + this.large.bytesInUse;
  }

  /** `bytes` kept: copied into blocks of the arena ({@link ArenaBytes.free} gives them back). */
  keep(bytes: Uint8Array): ArenaBytes {
    return (bytes.length >= LARGE_FROM_BYTES ? this.large : this.small).keep(bytes);
  }
}

/** Bytes kept in an arena's blocks. Read them only until {@link free}. */
export class ArenaBytes implements KeptBytes {
  private blocks: readonly number[] | null;

  constructor(
    private readonly pool: BlockPool,
    blocks: readonly number[],
    readonly length: number,
  ) {
    this.blocks = blocks;
  }

  copy(target: Uint8Array, targetStart: number): number {
    const blocks = this.blocks;
    if (!blocks) throw new Error('these kept bytes were freed');
    const size = this.pool.blockBytes;
    let left = this.length;
    let at = targetStart;
    for (const b of blocks) {
      if (left <= 0) break;
      const n = Math.min(left, size);
      const from = this.pool.offsetOf(b);
      this.pool.slabOf(b).copy(target, at, from, from + n);
      at += n;
      left -= n;
    }
    return this.length;
  }

  toString(): string {
    const out = Buffer.allocUnsafe(this.length);
    this.copy(out, 0);
    return out.toString();
  }

  /** Give the blocks back to the arena; reading afterwards throws. */
  free(): void {
    if (!this.blocks) return;
    this.pool.release(this.blocks);
    this.blocks = null;
  }
}
