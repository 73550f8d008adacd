import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { DurationPosition, replaceSegmentSize, SegmentSizePosition, type WebmOutput } from 'werift/nonstandard';

/**
 * One track's WebM file, written from what werift's WebM muxer puts out (its stream mode).
 * werift's own file mode appended each block with a promise nobody caught: a write that failed
 * (the disk full, the process out of file descriptors) was an unhandled rejection, and the
 * relay's process ended. Here the writes go in order through one handle, and the first one that
 * fails ends the file: what was written stays (without its final duration), and `failed` is told
 * once.
 */
export class WebmFile {
  private handle: FileHandle | null = null;
  private size = 0;
  private chain: Promise<void>;
  private error: Error | null = null;
  private ended = false;
  private markEnded!: () => void;
  /** Settles once the muxer's end (its duration) is written, or the file failed. */
  private readonly end = new Promise<void>((resolve) => (this.markEnded = resolve));

  constructor(
    path: string,
    private readonly failed: (error: Error) => void,
  ) {
    // the recording reserved the name in its private directory; never through a link planted there
    this.chain = open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600).then(
      (handle) => {
        this.handle = handle;
      },
      (err: Error) => this.fail(err),
    );
  }

  /** One output of the muxer: bytes to append, or its end (the duration and segment size to write in place). */
  take(output: WebmOutput): void {
    this.chain = this.chain.then(() => this.write(output)).catch((err: Error) => this.fail(err));
  }

  private async write(output: WebmOutput): Promise<void> {
    const handle = this.handle;
    if (!handle || this.error || this.ended) return;
    if (output.saveToFile) {
      const bytes = output.saveToFile;
      await handle.write(bytes, 0, bytes.length, this.size);
      this.size += bytes.length;
    } else if (output.eol) {
      const duration = output.eol.durationElement;
      await handle.write(duration, 0, duration.length, DurationPosition);
      const resize = replaceSegmentSize(this.size);
      await handle.write(resize, 0, resize.length, SegmentSizePosition);
      this.ended = true;
      this.markEnded();
    }
  }

  private fail(err: Error): void {
    if (this.error) return;
    this.error = err;
    this.markEnded();
    this.failed(err);
  }

  /**
   * Wait (at most `ms` in all) for the muxer's end and for every write taken, then close the
   * file (a disk that stalls does not hold the recording's stop up; later writes are dropped).
   */
  async close(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
    await Promise.race([this.end.then(() => this.chain), bound]);
    clearTimeout(timer);
    this.ended = true;
    const handle = this.handle;
    this.handle = null;
    await handle?.close().catch(() => undefined);
  }
}
