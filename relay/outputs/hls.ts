import type { OutputInfo, OutputOptions } from '../../src/protocol/control.ts';
import { wireError, type WireError } from '../../src/protocol/codes.ts';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { RelayError } from '../errors.ts';
import type { TimedEvent } from '../rooms/timeline.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import type { CompositeRun } from './ffmpeg/composite-run.ts';
import { HlsRun } from './hls-run.ts';
import { DEFAULT_COMPOSITE, finishAgain, requireFfmpeg, roomComposite, scratchDir, type CompositeSize, type ScratchDir } from './media-output.ts';
import { mediaOutputStarted } from './media-stops.ts';
import { diskFull, type DiskReserve } from './disk-reserve.ts';
import { overQuota, type DiskQuota, type QuotaWatch } from './disk-quota.ts';
import { outputDirUsage } from './disk-usage.ts';
import { createRunDir, removeRunDir, UnsafeStorageError } from './storage.ts';

/** The files of a run that `/hls` serves: the playlists and their segments (see `HLS_NAMES`). */
export const HLS_FILE = /^(?:(?:index|media|subs)\.m3u8|seg(?:0|[1-9][0-9]{0,8})\.ts|sub(?:0|[1-9][0-9]{0,8})\.vtt)$/;

/** WebVTT text: no markup, no line breaks, no `-->` (a cue's text cannot start another cue). */
const vttText = (s: string) =>
  s
    .replace(/[\r\n\u2028\u2029]+/g, ' ')
    .replace(/-->/g, '->')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .slice(0, 300);

/**
 * The caption of a stage event, or `null` for everything else. The audience outside the room
 * sees the stage: speakers coming and going, outputs, the whiteboard, transcripts. Never pubsub
 * messages or streams (they were sent to the room's members, under their grants), and never the
 * audience itself (viewers joining and leaving).
 */
export function stageCaption(e: TimedEvent): string | null {
  switch (e.type) {
    case 'participant-joined':
      return e.tier === 'speaker' ? `${e.name} joined the stage` : null;
    case 'participant-left':
      return e.tier === 'speaker' ? `${e.participantId} left the stage` : null;
    case 'output':
      return `${e.output} ${e.state}`;
    case 'whiteboard':
      return `${e.by} ${e.action === 'clear' ? 'cleared the whiteboard' : 'drew on the whiteboard'}`;
    case 'message':
    case 'stream':
    case 'track-recorded':
      return null;
    default: {
      // transcripts, once the timeline carries them
      const t = e as { type: string; participantId?: unknown; text?: unknown; final?: unknown };
      if (t.type === 'transcription' && typeof t.text === 'string' && t.final !== false) return `${String(t.participantId ?? '')}: ${t.text}`;
      return null;
    }
  }
}

/** The latest run of each room, by storage root, project and room: a restart replaces it. */
const latestRun = new Map<string, string>();
/**
 * Each run's end, by its directory: settled once its ffmpeg has exited and its last files are
 * written. A run that failed (at the quota, say) is still stopping when its room starts again,
 * and deleting its directory under its ffmpeg's last writes failed (`ENOTEMPTY`) and left it
 * counted against the project.
 */
const runEnds = new Map<string, Promise<void>>();
/**
 * Runs of each room (by the key of {@link latestRun}) whose deletion failed: still the relay's, and
 * counted in the project's quota, so the room's next start and its end try again.
 */
const leftRuns = new Map<string, Set<string>>();
/** How long a start waits for the run it replaces to end before deleting it all the same (ms): ffmpeg is given 5 s to finish. */
const RUN_END_WAIT_MS = 6_000;

/** How the HLS output's media is made. */
export interface HlsMedia {
  /** The default segment length (`--hls-segment`), seconds. */
  segmentSeconds: number;
  /** The ffmpeg to run (`--ffmpeg`). */
  ffmpeg?: string;
  /** The composite's picture (`--composite`). */
  size?: CompositeSize;
  /** The relay's settings object: closing the relay waits for this output. */
  owner: object;
  /** The disk space the relay keeps free: no start below it, and a running HLS fails at it. */
  disk?: DiskReserve;
  /** The disk space each project may take: no start at it, and a running HLS fails past it. */
  quota?: DiskQuota;
}

/** How often the segment lists are read (ms): a segment reaches the playlist at most this late. */
const POLL_MS = 250;

/**
 * Live HLS of the stage composite under `/hls/<runId>/index.m3u8` on the relay's HTTP port,
 * where `runId` is 128 random bits, new at every start (whoever holds the URL may watch; nobody
 * can guess it). `index.m3u8` is the master playlist: one H.264 + AAC variant (`media.m3u8`, a
 * sliding window of MPEG-TS segments, see `hls-run.ts`) and a WebVTT subtitle rendition
 * (`subs.m3u8`) of the room's stage events. Active once the first segment is listed; ended
 * with `#EXT-X-ENDLIST` at stop. A restart in the same room deletes the previous run's
 * directory (only one this process created).
 */
export class HlsProvider implements OutputProvider {
  private run: HlsRun | null = null;
  private composite: CompositeRun | null = null;
  private scratch: ScratchDir | null = null;
  private off: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private offDisk: (() => void) | null = null;
  private quotaWatch: QuotaWatch | null = null;
  private release: (() => void) | null = null;
  /** While `start` runs: a stop meanwhile leaves the relay's count of running outputs to the start's own cleanup. */
  private starting = false;
  private stopping: Promise<void> | null = null;
  /** This provider's run directory, once made, and what settles when its run has ended. */
  private runDir: string | null = null;
  /** Whether its start answered with the run's URL (else the run is nobody's once it ends). */
  private given = false;
  private ended: (() => void) | null = null;

  constructor(
    private readonly ctx: OutputContext,
    private readonly root: string,
    private readonly failed: (error: WireError) => void,
    private readonly media: HlsMedia,
  ) {}

  async start(options: OutputOptions['hls'] | undefined): Promise<OutputInfo['hls']> {
    const ffmpeg = requireFfmpeg(this.media.ffmpeg);
    this.release = mediaOutputStarted(this.media.owner);
    this.starting = true;
    try {
      const info = await this.begin(ffmpeg, options?.segmentSeconds ?? this.media.segmentSeconds);
      this.checkNotStopped();
      this.given = true;
      return info;
    } catch (err) {
      // a start that fails leaves nothing running (the board stops only what started); a stop's
      // finish still under way leaves the last of it to this one (still starting until it runs)
      this.stopping = finishAgain(this.stopping, () => {
        this.starting = false;
        return this.finish();
      });
      await this.stopping.catch(() => undefined);
      if (err instanceof RelayError) throw err;
      throw new RelayError('INTERNAL_ERROR', `hls: ${(err as Error).message}`, 'ffmpeg-failed');
    } finally {
      this.starting = false;
    }
  }

  private async begin(ffmpeg: string, seconds: number): Promise<OutputInfo['hls']> {
    await this.media.disk?.check(this.root, 'hls');
    // the room's previous run goes first: it would be replaced anyway, and left in place a
    // stopped run could hold its project at the quota with nothing the integrator can delete
    const key = this.runKey;
    const previous = latestRun.get(key);
    if (previous) {
      latestRun.delete(key);
      await this.removeRun(previous);
    }
    await this.removeLeftRuns();
    this.checkNotStopped();
    const quota = this.media.quota;
    await quota?.check(this.ctx.project, 'hls');
    this.checkNotStopped();
    let dir: { runId: string; path: string };
    try {
      dir = await createRunDir(this.root, this.ctx.project);
    } catch (err) {
      if (err instanceof UnsafeStorageError) {
        this.ctx.log.error('HLS directory refused', { error: err.message });
        throw new RelayError('INTERNAL_ERROR', 'the relay cannot write HLS: its HLS directory is not private (see the relay log)', 'unsafe-storage');
      }
      throw err;
    }
    this.quotaWatch = quota?.watch(this.ctx.project, dir.path, (used) => this.failed(overQuota('hls', used, quota.limit).toWire())) ?? null;
    this.runDir = dir.path;
    runEnds.set(dir.path, new Promise<void>((resolve) => (this.ended = resolve)));
    // the room's latest only while this start is still wanted (checked in the same step): a
    // cancelled start that went on made its run the latest over the one that replaced it
    this.checkNotStopped();
    latestRun.set(key, dir.path);
    this.scratch = await scratchDir('hls');
    this.checkNotStopped();
    const size = this.media.size ?? DEFAULT_COMPOSITE;
    const run = new HlsRun(dir.path, this.scratch.path, size, seconds, (err) => {
      this.ctx.log.warn('HLS write failed', { error: err.message });
      this.failed(wireError('INTERNAL_ERROR', `hls: ${err.message}`, 'write-failed'));
    });
    this.run = run;
    this.off = this.ctx.timeline.on((e) => {
      const text = stageCaption(e);
      if (text !== null) run.caption(e.at, vttText(text));
    });
    let failure: ((reason: string) => void) | null = null;
    const failedFirst = new Promise<never>((_, reject) => (failure = (reason) => reject(new RelayError('INTERNAL_ERROR', `hls: ${reason}`, 'ffmpeg-failed'))));
    failedFirst.catch(() => undefined);
    const composite = roomComposite(
      this.ctx,
      { ffmpeg, workDir: join(this.scratch.path, 'work'), size },
      (n) => run.outputArgs(n, composite.ended.at(-1)?.startedAt ?? null),
      (reason) => {
        failure?.(reason);
        this.failed(wireError('INTERNAL_ERROR', `hls: ${reason}`, 'ffmpeg-failed'));
      },
    );
    this.composite = composite;
    await composite.start();
    this.checkNotStopped();
    this.timer = setInterval(() => run.poll(composite.runStartedAt), POLL_MS);
    this.offDisk = this.media.disk?.watch(this.root, (free) => this.failed(diskFull('hls', free, this.media.disk!.reserve).toWire())) ?? null;
    // a composite stopped before it wrote anything never makes a first segment
    const stoppedFirst = composite.whenFirstOutput().then((wrote) => (wrote ? new Promise<never>(() => undefined) : Promise.reject(new RelayError('INVALID_STATE', 'hls was stopped while starting', 'output-stopped'))));
    stoppedFirst.catch(() => undefined);
    await Promise.race([run.firstSegment, failedFirst, stoppedFirst]);
    return { playlist: `/hls/${dir.runId}/index.m3u8` };
  }

  /** A stop (or the room's end) came while this start ran: it goes no further. */
  private checkNotStopped(): void {
    if (this.stopping) throw new RelayError('INVALID_STATE', 'hls was stopped while starting', 'output-stopped');
  }

  /** The key of this room's latest run in {@link latestRun}. */
  private get runKey(): string {
    return `${this.root}\u0000${this.ctx.project}\u0000${this.ctx.roomId}`;
  }

  /**
   * The room is gone: its latest run goes (whichever start made it: this one's may have been
   * refused before it made one), and with it its place in the project's quota.
   */
  async roomEnded(): Promise<void> {
    const run = latestRun.get(this.runKey);
    if (run) {
      latestRun.delete(this.runKey);
      await this.removeRun(run);
    }
    await this.removeLeftRuns();
  }

  /** Runs of this room an earlier deletion left: tried again. */
  private async removeLeftRuns(): Promise<void> {
    const left = leftRuns.get(this.runKey);
    if (!left) return;
    leftRuns.delete(this.runKey);
    for (const run of left) await this.removeRun(run);
  }

  /**
   * Delete a run of the room (one this process made), once it has ended, and give its bytes back
   * to the project's quota.
   */
  private async removeRun(previous: string): Promise<void> {
    const end = runEnds.get(previous);
    if (end) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([end, new Promise<void>((resolve) => (timer = setTimeout(resolve, RUN_END_WAIT_MS)))]);
      clearTimeout(timer);
    }
    try {
      const { bytes } = await outputDirUsage(previous);
      if (await removeRunDir(previous)) this.media.quota?.freed(this.ctx.project, bytes, previous);
    } catch (err) {
      this.ctx.log.warn('could not delete the previous HLS run', { error: (err as Error).message });
      // still registered as the relay's (see `removeRunDir`): the room's next start or its end tries again
      let left = leftRuns.get(this.runKey);
      if (!left) leftRuns.set(this.runKey, (left = new Set()));
      left.add(previous);
    }
  }

  /** Stop the composite, list its last segments and end the playlists (`#EXT-X-ENDLIST`). */
  stop(): Promise<void> {
    this.stopping ??= this.finish();
    return this.stopping;
  }

  private async finish(): Promise<void> {
    try {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      this.offDisk?.();
      this.offDisk = null;
      this.quotaWatch?.quiet();
      const composite = this.composite;
      this.composite = null;
      await composite?.stop();
      this.off?.();
      this.off = null;
      await this.run?.end(composite?.ended.at(-1)?.startedAt ?? null);
    } finally {
      await this.scratch?.release().catch(() => undefined);
      this.scratch = null;
      // a stop during the start: the start's cleanup, which runs this again, gives the place back
      // and says the files are final (the project's quota counts them as kept)
      if (!this.starting) {
        const watch = this.quotaWatch;
        this.quotaWatch = null;
        await watch?.settle().catch(() => undefined);
        const dir = this.runDir;
        if (dir !== null) runEnds.delete(dir);
        this.runDir = null;
        this.ended?.();
        this.ended = null;
        // a start that failed or was cancelled never gave its URL: its run goes with it (one cancelled
        // by a stop or by the room's end went on to make one that nothing deleted, counted in the
        // quota for good); before the place is given back, so that closing the relay waits for it
        if (dir !== null && !this.given) {
          if (latestRun.get(this.runKey) === dir) latestRun.delete(this.runKey);
          await this.removeRun(dir);
        }
        this.release?.();
        this.release = null;
      }
    }
  }
}
