/**
 * Memory for bytes the relay keeps for minutes (pubsub history), managed by the relay itself:
 * fixed-size blocks in slabs that are allocated once and reused, never handed to the garbage
 * collector.
 *
 * Why not a Buffer per kept message: V8 counts every ArrayBuffer's memory as "external" and
 * starts a full (mark-compact) collection whenever external memory has grown 64 MB since the last
 * one. A relay whose history fills to its budget (hundreds of MiB within seconds under a flood)
 * paid one full collection per 64 MB of growth — live bytes, not garbage — each a pause every room
 * waited through. The slabs are `SharedArrayBuffer`s, whose memory V8 does not count that way
 * (measured: 1,000 MiB of them started no full collection, of `ArrayBuffer`s 15); since the relay
 * frees and reuses their blocks itself, none of it ever waits for a collection either.
 *
 * The memory is bounded by what is kept: a message of n bytes takes ⌈n / {@link BLOCK_BYTES}⌉
 * blocks, and only messages of at least {@link ARENA_MIN_BYTES} are kept here, so the blocks in
 * use are at most 5/4 of the bytes kept (the history budget), and the slabs never more than
 * their high-water mark (a slab is not given back: the next flood would only take it again).
 */

/** Bytes in one block. */
export const BLOCK_BYTES = 1024;
/** Blocks in one slab (a slab is 1 MiB). */
export const SLAB_BLOCKS = 1024;
/**
 * Below this a kept message stays a Buffer of its own making (a slice of Node's shared pool):
 * it would waste most of a block, and small Buffers are not what grows external memory.
 */
export const ARENA_MIN_BYTES = 4096;

const SLAB_BYTES = BLOCK_BYTES * SLAB_BLOCKS;

/** Where block `index` starts in its slab. */
function offsetOf(index: number): number {
  return (index % SLAB_BLOCKS) * BLOCK_BYTES;
}

/** Kept bytes, wherever they live: a Buffer, or {@link ArenaBytes}. */
export interface KeptBytes {
  readonly length: number;
  /** Copy all of it into `target` at `targetStart`; returns the bytes copied. */
  copy(target: Uint8Array, targetStart: number): number;
  toString(): string;
}

/** Blocks of {@link BLOCK_BYTES} in slabs of 1 MiB, handed out and taken back (see the module's comment). */
export class ByteArena {
  private readonly slabs: Buffer[] = [];
  /** Free blocks, as indices (slab × SLAB_BLOCKS + block); the last freed is handed out first. */
  private readonly free: number[] = [];

  /** Bytes of slabs allocated (their high-water mark). */
  get slabBytes(): number {
    return this.slabs.length * SLAB_BYTES;
  }

  /** Bytes of blocks in use. */
  get bytesInUse(): number {
    return this.slabBytes - this.free.length * BLOCK_BYTES;
  }

  /**
   * `bytes` kept: copied into blocks of the arena when they are at least {@link ARENA_MIN_BYTES}
   * (then {@link ArenaBytes.free} gives them back), else as they are.
   */
  keep(bytes: Buffer): KeptBytes {
    if (bytes.length < ARENA_MIN_BYTES) return bytes;
    const count = Math.ceil(bytes.length / BLOCK_BYTES);
    while (this.free.length < count) this.grow();
    const blocks = this.free.splice(this.free.length - count, count);
    for (let i = 0, at = 0; i < count; i++, at += BLOCK_BYTES) {
      const b = blocks[i]!;
      bytes.copy(this.slabOf(b), offsetOf(b), at, Math.min(at + BLOCK_BYTES, bytes.length));
    }
    return new ArenaBytes(this, blocks, bytes.length);
  }

  /** The slab that holds block `index`. */
  slabOf(index: number): Buffer {
    return this.slabs[Math.floor(index / SLAB_BLOCKS)]!;
  }

  /** Take `blocks` back (their holder gave them up). */
  release(blocks: readonly number[]): void {
    for (const b of blocks) this.free.push(b);
  }

  private grow(): void {
    const first = this.slabs.length * SLAB_BLOCKS;
    this.slabs.push(Buffer.from(new SharedArrayBuffer(SLAB_BYTES)));
    for (let b = first; b < first + SLAB_BLOCKS; b++) this.free.push(b);
  }
}

/** Bytes kept in a {@link ByteArena}'s blocks. Read them only until {@link free}. */
export class ArenaBytes implements KeptBytes {
  private blocks: readonly number[] | null;

  constructor(
    private readonly arena: ByteArena,
    blocks: readonly number[],
    readonly length: number,
  ) {
    this.blocks = blocks;
  }

  copy(target: Uint8Array, targetStart: number): number {
    const blocks = this.blocks;
    if (!blocks) throw new Error('these kept bytes were freed');
    let left = this.length;
    let at = targetStart;
    for (const b of blocks) {
      const n = Math.min(left, BLOCK_BYTES);
      const from = offsetOf(b);
      this.arena.slabOf(b).copy(target, at, from, from + n);
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
    this.arena.release(this.blocks);
    this.blocks = null;
  }
}
