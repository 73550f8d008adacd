/**
 * The stage composite of a recording, as one MP4. While the recording runs, each run of the
 * composite writes an MPEG-TS part (a part cut short by a kill is still readable: TS has no
 * trailer); at the stop the parts are joined without re-encoding (`-c copy`, `+faststart`).
 *
 * Runs replace each other when the stage changes, and between two runs nothing is written for a
 * second or two (and nothing before the first run's inputs arrive). Joined as they are, the parts
 * would make a film shorter than the time recorded, and everything after a gap would come early
 * against the timeline. So each gap, the one at the start included,
 * measured by the wall clock, is filled with the room card (the room's name, silence) for as
 * long as it lasted: a short all-intra clip encoded once and cut to each gap's length by the
 * concat demuxer, so filling costs one small encode however many gaps there are.
 */
import { link, mkdir, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OutputContext } from './board.ts';
import { encoderArgs } from './ffmpeg/composite.ts';
import { labelText, type CompositeRun, type EndedRun } from './ffmpeg/composite-run.ts';
import { FfmpegProcess } from './ffmpeg/process.ts';
import { compositeFont, roomComposite, type CompositeSize } from './media-output.ts';

/** Gaps shorter than this are left alone (a frame or two of timing noise). */
const MIN_GAP_S = 0.1;
/** Longest room card clip; a longer gap uses it several times. */
const CARD_MAX_S = 60;
/** The longest the final join may take (a recording of hours is a copy of gigabytes). */
const JOIN_TIMEOUT_MS = 10 * 60_000;

/** One piece of the film: a run's part, or the card for a gap. */
export type Piece = { part: number } | { card: number };

/**
 * The film's pieces in order: each run that wrote, and before it the card for the time since the
 * previous one ended, or since the recording began (`from`), by the wall clock. Runs that wrote
 * nothing leave a gap, which is filled. So the film's time is the timeline's.
 */
export function planPieces(runs: readonly EndedRun[], from: number): Piece[] {
  const pieces: Piece[] = [];
  let endOfLast = from;
  for (const run of runs) {
    if (run.seconds <= 0 || run.startedAt === null) continue;
    const gap = (run.startedAt - endOfLast) / 1000;
    if (gap >= MIN_GAP_S) pieces.push({ card: gap });
    pieces.push({ part: run.run });
    endOfLast = run.startedAt + run.seconds * 1000;
  }
  return pieces;
}

/** The concat demuxer's list: names relative to the list's own directory (no quoting, nothing absolute). */
export function concatList(pieces: readonly Piece[]): string {
  const lines = ['ffconcat version 1.0'];
  for (const piece of pieces) {
    if ('part' in piece) {
      lines.push(`file ${partName(piece.part)}`);
      continue;
    }
    for (let left = piece.card; left >= MIN_GAP_S; left -= CARD_MAX_S) {
      const take = Math.min(left, CARD_MAX_S).toFixed(3);
      lines.push('file card.ts', `outpoint ${take}`, `duration ${take}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

const partName = (run: number) => `part-${run}.ts`;

/** Where an output path goes to ffmpeg: `file:` so that no part of a path is read as a protocol. */
const file = (path: string) => `file:${path}`;

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
    this.composite = roomComposite(ctx, { ffmpeg, workDir, size }, (run) => ['-f', 'mpegts', '-y', file(join(partsDir, partName(run)))], failed);
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
      const present: Piece[] = [];
      for (const piece of pieces) {
        if ('card' in piece) present.push(piece);
        else if ((await stat(join(this.partsDir, partName(piece.part))).catch(() => null))?.size) present.push(piece);
      }
      if (!present.some((p) => 'part' in p)) return null;
      const gaps = present.flatMap((p) => ('card' in p ? [p.card] : []));
      if (gaps.length > 0) await this.encodeCard(Math.min(CARD_MAX_S, Math.max(...gaps)) + 1);
      const list = join(this.partsDir, 'list.ffconcat');
      await writeFile(list, concatList(present), { mode: 0o600 });
      const out = join(this.partsDir, 'composite.mp4');
      await this.run(['-f', 'concat', '-i', file(list), '-map', '0', '-c', 'copy', '-movflags', '+faststart', '-y', file(out)]);
      // a hard link is an exclusive create: an existing name is never replaced
      await link(out, dest);
      await unlink(out);
      const seconds = this.composite.ended.reduce((sum, r) => sum + r.seconds, 0) + gaps.reduce((a, b) => a + b, 0);
      return seconds;
    } finally {
      await rm(this.partsDir, { recursive: true, force: true });
    }
  }

  /** The room card with silence, every frame a key frame (so that the concat demuxer cuts it anywhere). */
  private async encodeCard(seconds: number): Promise<void> {
    const { width, height, fps, videoKbps } = this.size;
    const font = compositeFont();
    let video = `color=c=0x15181d:s=${width}x${height}:r=${fps}`;
    if (font && /^[\w/.+-]+$/.test(font)) {
      const text = join(this.partsDir, 'card.txt');
      await writeFile(text, labelText(this.ctx.roomId), { mode: 0o600 });
      if (/^[\w/.+-]+$/.test(text)) video += `,drawtext=fontfile=${font}:textfile=${text}:expansion=none:fontsize=${Math.round(height / 12)}:fontcolor=white:x=(w-tw)/2:y=(h-th)/2`;
    }
    await this.run([
      '-f', 'lavfi', '-i', `${video},format=yuv420p`, '-f', 'lavfi', '-i', 'anullsrc=r=48000:cl=stereo', '-t', seconds.toFixed(3),
      ...encoderArgs(fps, videoKbps), '-g', '1', '-keyint_min', '1', '-f', 'mpegts', '-y', file(join(this.partsDir, 'card.ts')),
    ]);
  }

  /** Run ffmpeg to its end; rejects with its words if it fails. */
  private async run(args: string[]): Promise<void> {
    const proc = await FfmpegProcess.start({ ffmpeg: this.ffmpeg, args: ['-loglevel', 'error', ...args] });
    const timer = setTimeout(() => void proc.stop(0), JOIN_TIMEOUT_MS);
    const exit = await proc.exited;
    clearTimeout(timer);
    if (exit.code !== 0) throw new Error(exit.reason);
  }
}
