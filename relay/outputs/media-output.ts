/**
 * What every media output (recording, HLS, livestream, transcription) shares: the ffmpeg it
 * runs (or the `ffmpeg-missing` refusal), a private scratch directory of its own, the font of
 * the composite's labels, and the stage composite itself wired to the room.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RelayError } from '../errors.ts';
import type { OutputContext } from './board.ts';
import { CompositeRun, type CompositeRunOptions } from './ffmpeg/composite-run.ts';
import { findExecutable } from './ffmpeg/process.ts';

/** Fonts tried for the composite's names and room card (Debian's `fonts-dejavu-core` comes with ffmpeg). */
const FONTS = ['/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf', '/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf', '/usr/share/fonts/TTF/DejaVuSans.ttf'];

/** The first font present, or `null` (the composite then draws no text). */
export function compositeFont(): string | null {
  return FONTS.find((f) => existsSync(f)) ?? null;
}

/**
 * The ffmpeg to run: `given` (`--ffmpeg`, a path or a name on `PATH`). A relay without one
 * refuses media outputs with `ffmpeg-missing` (the output goes to `failed`).
 */
export function requireFfmpeg(given = 'ffmpeg'): string {
  const found = findExecutable(given);
  if (!found) throw new RelayError('INTERNAL_ERROR', `this relay has no ffmpeg (${given} not found): install Debian's ffmpeg or give --ffmpeg PATH`, 'ffmpeg-missing');
  return found;
}

/** A private directory (0700, made by this run of the relay) removed by `release`. */
export interface ScratchDir {
  readonly path: string;
  release(): Promise<void>;
}

/** Make a scratch directory for one output's run (SDP files, labels, partial files). */
export async function scratchDir(output: string): Promise<ScratchDir> {
  // mkdtemp makes the directory 0700 with a name nobody could have planted
  const path = await mkdtemp(join(tmpdir(), `tessera-${output}-`));
  return { path, release: () => rm(path, { recursive: true, force: true }) };
}

/**
 * A media output's `finish` run once more, after the stop that already ran (if any) has settled:
 * for a start that failed. A stop that came while the start awaited its files ran before the
 * start went on (to listen to the room, tap its media, make a scratch directory, a composite or a
 * timer) and found none of that to release.
 */
export function finishAgain<T>(earlier: Promise<T> | null, finish: () => Promise<T>): Promise<T> {
  return (earlier ?? Promise.resolve()).catch(() => undefined).then(finish);
}

/** The picture of a composite. */
export interface CompositeSize {
  width: number;
  height: number;
  fps: number;
  videoKbps: number;
}

/** 720p at 25 fps, 2.3 Mbps (the relay's `--composite` default): what players and RTMP services expect. */
export const DEFAULT_COMPOSITE: CompositeSize = { width: 1280, height: 720, fps: 25, videoKbps: 2300 };

/**
 * The room's stage composite (see {@link CompositeRun}) with the room's names and card, ffmpeg
 * checked first. `output(run)` says what each run writes; `failed` is the output's failure.
 */
export function roomComposite(
  ctx: OutputContext,
  settings: { ffmpeg: string; workDir: string; size?: CompositeSize; settleMs?: number },
  output: CompositeRunOptions['output'],
  failed: (reason: string) => void,
): CompositeRun {
  const size = settings.size ?? DEFAULT_COMPOSITE;
  return new CompositeRun((tap) => ctx.tapMedia(tap), {
    ffmpeg: settings.ffmpeg,
    workDir: settings.workDir,
    ...size,
    roomName: ctx.roomId,
    font: compositeFont(),
    nameOf: (id) => ctx.nameOf(id),
    output,
    failed,
    log: ctx.log,
    ...(settings.settleMs !== undefined ? { settleMs: settings.settleMs } : {}),
  });
}
