/**
 * The stage composite of a recording, as one MP4. While the recording runs, each run of the
 * composite writes an MPEG-TS part (a part cut short by a kill is still readable: TS has no
 * trailer); at the stop the parts become one film (`recording-film.ts`).
 *
 * Runs replace each other when the stage changes, and between two runs nothing is written for a
 * second or two (and nothing before the first run's inputs arrive). Joined as they are, the parts
 * would make a film shorter than the time recorded, and everything after a gap would come early
 * against the timeline: each gap is filled with the room card for as long as it lasted.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { OutputContext } from './board.ts';
import type { CompositeRun } from './ffmpeg/composite-run.ts';
import { roomComposite, type CompositeSize } from './media-output.ts';
import { ffmpegFile, joinFilm, partName, planPieces } from './recording-film.ts';

export class CompositeRecording {
  private readonly composite: CompositeRun;

  /**
   * @param partsDir a private directory of the recording's own, removed by {@link finish}
   * @param workDir the composite's scratch directory (SDP, labels)
   */
  constructor(
    private readonly ctx: OutputContext,
    private readonly ffmpeg: string,
    private readonly size: CompositeSize,
    private readonly partsDir: string,
    workDir: string,
    failed: (reason: string) => void,
  ) {
    this.composite = roomComposite(ctx, { ffmpeg, workDir, size }, (run) => ['-f', 'mpegts', '-y', ffmpegFile(join(partsDir, partName(run)))], failed);
  }

  /** When the recording began (wall-clock ms): the film's time 0. */
  private from = 0;

  /** Start the composite; resolves once it writes, rejects if it cannot. `from`: the recording's start (wall-clock ms). */
  async start(from: number): Promise<void> {
    this.from = from;
    await mkdir(this.partsDir, { mode: 0o700 });
    await this.composite.start();
    if (!(await this.composite.whenFirstOutput())) throw new Error('the composite ended before it wrote anything');
  }

  /**
   * Stop the composite and join what it wrote into `dest` (never replacing a file there).
   * Resolves with the seconds joined, or `null` when nothing was written; the parts are removed.
   */
  async finish(dest: string): Promise<number | null> {
    await this.composite.stop();
    try {
      const pieces = planPieces(this.composite.ended, this.from);
      const film = await joinFilm({ ffmpeg: this.ffmpeg, partsDir: this.partsDir, pieces, size: this.size, roomName: this.ctx.roomId, dest });
      if (!film) return null;
      return this.composite.ended.reduce((sum, r) => sum + r.seconds, 0) + film.gaps;
    } finally {
      await rm(this.partsDir, { recursive: true, force: true });
    }
  }
}
