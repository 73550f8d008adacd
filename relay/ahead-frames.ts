/**
 * What a room sends a member between its seat and the answer to its entry, kept to follow the
 * answer: a room on another node may be quicker than its answer, and the answer to an entry
 * waits for its token's turn.
 */

/**
 * What the room may send a member between its seat and the answer to its entry (which waits for
 * its token's turn), kept to follow the answer: past it, the member is sent the answer and then
 * closed (`SLOW_CONSUMER`, so its client comes back and gets the room as it is then), never a
 * `joined` followed by a gap.
 */
const AHEAD_FRAMES = 4096;
const AHEAD_BYTES = 1024 * 1024;

/** One frame the room sent ahead of the answer. */
export interface AheadFrame {
  readonly data: Uint8Array;
  readonly binary: boolean;
  readonly optional: boolean;
}

/** The frames a room sent one connection ahead of the answer to its entry, to follow `joined` (or `lobby`). */
export class AheadFrames {
  private frames: AheadFrame[] = [];
  private bytes = 0;
  private overflowed = false;

  /** More was sent ahead of the answer than is kept (see {@link AHEAD_BYTES}): none is kept since. */
  get lost(): boolean {
    return this.overflowed;
  }

  /** Keep a frame the room sent. */
  keep(data: Uint8Array, binary: boolean, optional: boolean): void {
    if (this.overflowed) return;
    if (this.frames.length >= AHEAD_FRAMES || this.bytes + data.byteLength > AHEAD_BYTES) {
      this.overflowed = true;
      this.frames = [];
      this.bytes = 0;
      return;
    }
    this.frames.push({ data, binary, optional });
    this.bytes += data.byteLength;
  }

  /** The frames kept, now that the answer went (whether more were lost is still {@link lost}). */
  take(): AheadFrame[] {
    const frames = this.frames;
    this.frames = [];
    this.bytes = 0;
    return frames;
  }

  /** Forget the frames kept, and that any were lost. */
  clear(): void {
    this.overflowed = false;
    this.frames = [];
    this.bytes = 0;
  }
}
