/**
 * A recording's film: the composite's parts joined into one MP4, each gap between them (the one
 * at the start included, measured by the wall clock) filled with the room card (the room's name,
 * silence) for as long as it lasted. The card is a short all-intra clip encoded once and cut to
 * each gap's length by the concat demuxer, so filling costs one small encode however many gaps
 * there are; the parts are joined without re-encoding (`-c copy`, `+faststart`).
 */
import { link, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encoderArgs } from './ffmpeg/composite.ts';
import { labelText, type EndedRun } from './ffmpeg/composite-run.ts';
import { FfmpegProcess } from './ffmpeg/process.ts';
import { compositeFont, type CompositeSize } from './media-output.ts';

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

/**
 * The concat demuxer's list: names relative to the list's own directory (no quoting, nothing
 * absolute). `outpoint` is a time of the file's own clock, so the card is written to start at 0
 * (see {@link encodeCard}); `duration` places the next file.
 */
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

/** The file name of a run's part in the parts directory. */
export const partName = (run: number) => `part-${run}.ts`;

/** Where a path goes to ffmpeg: `file:` so that no part of a path is read as a protocol. */
export const ffmpegFile = (path: string) => `file:${path}`;

/** What {@link joinFilm} needs. */
export interface FilmJob {
  ffmpeg: string;
  /** The recording's private parts directory: holds `part-N.ts`; the card and the list are written there. */
  partsDir: string;
  pieces: readonly Piece[];
  size: CompositeSize;
  /** Drawn on the card. */
  roomName: string;
  /** The MP4 to create (never replacing a file there). */
  dest: string;
}

/**
 * Join the pieces whose parts exist and are not empty into `dest`. Resolves with the seconds of
 * the gaps filled, or `null` when no part was written (nothing is created then).
 */
export async function joinFilm(job: FilmJob): Promise<{ gaps: number } | null> {
  const present: Piece[] = [];
  for (const piece of job.pieces) {
    if ('card' in piece) present.push(piece);
    else if ((await stat(join(job.partsDir, partName(piece.part))).catch(() => null))?.size) present.push(piece);
  }
  if (!present.some((p) => 'part' in p)) return null;
  const gaps = present.flatMap((p) => ('card' in p ? [p.card] : []));
  if (gaps.length > 0) await encodeCard(job, Math.min(CARD_MAX_S, Math.max(...gaps)) + 1);
  const list = join(job.partsDir, 'list.ffconcat');
  await writeFile(list, concatList(present), { mode: 0o600 });
  const out = join(job.partsDir, 'composite.mp4');
  await run(job.ffmpeg, ['-f', 'concat', '-i', ffmpegFile(list), '-map', '0', '-c', 'copy', '-movflags', '+faststart', '-y', ffmpegFile(out)]);
  // a hard link is an exclusive create: an existing name is never replaced
  await link(out, job.dest);
  await unlink(out);
  return { gaps: gaps.reduce((a, b) => a + b, 0) };
}

/**
 * The room card with silence, every frame a key frame (so that the concat demuxer cuts it
 * anywhere). Its clock starts at 0 (`-muxdelay 0 -muxpreload 0`): MPEG-TS starts at 1.4 s by
 * default, and an `outpoint` below that cut the card to nothing (a film short by every gap
 * under 1.4 s).
 */
async function encodeCard(job: FilmJob, seconds: number): Promise<void> {
  const { width, height, fps, videoKbps } = job.size;
  const font = compositeFont();
  let video = `color=c=0x15181d:s=${width}x${height}:r=${fps}`;
  if (font && /^[\w/.+-]+$/.test(font)) {
    const text = join(job.partsDir, 'card.txt');
    await writeFile(text, labelText(job.roomName), { mode: 0o600 });
    if (/^[\w/.+-]+$/.test(text)) video += `,drawtext=fontfile=${font}:textfile=${text}:expansion=none:fontsize=${Math.round(height / 12)}:fontcolor=white:x=(w-tw)/2:y=(h-th)/2`;
  }
  await run(job.ffmpeg, [
    '-f', 'lavfi', '-i', `${video},format=yuv420p`, '-f', 'lavfi', '-i', 'anullsrc=r=48000:cl=stereo', '-t', seconds.toFixed(3),
    ...encoderArgs(fps, videoKbps), '-g', '1', '-keyint_min', '1', '-muxdelay', '0', '-muxpreload', '0', '-f', 'mpegts', '-y', ffmpegFile(join(job.partsDir, 'card.ts')),
  ]);
}

/** Run ffmpeg to its end; rejects with its words if it fails. */
async function run(ffmpeg: string, args: string[]): Promise<void> {
  const proc = await FfmpegProcess.start({ ffmpeg, args: ['-loglevel', 'error', ...args] });
  const timer = setTimeout(() => void proc.stop(0), JOIN_TIMEOUT_MS);
  const exit = await proc.exited;
  clearTimeout(timer);
  if (exit.code !== 0) throw new Error(exit.reason);
}
