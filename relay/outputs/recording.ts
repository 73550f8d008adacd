import type { OutputInfo, RecordingFile } from '../../src/protocol/control.ts';
import { wireError, type WireError } from '../../src/protocol/codes.ts';
import { promises as fsp, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { RelayError } from '../errors.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import type { TimedEvent } from '../rooms/timeline.ts';
import { DEFAULT_COMPOSITE, finishAgain, requireFfmpeg, scratchDir, type CompositeSize, type ScratchDir } from './media-output.ts';
import { mediaOutputStarted } from './media-stops.ts';
import { diskFull, type DiskReserve } from './disk-reserve.ts';
import { overQuota, type DiskQuota, type QuotaWatch } from './disk-quota.ts';
import { CompositeRecording } from './recording-composite.ts';
import { COMPOSITE_FILE, createExclusive, createRecordingDir, isRecordingFile, newRecordingId, recordingWritten, TIMELINE_FILE, trackFileName, UnsafeStorageError } from './storage.ts';
import { RawPayload } from '../data/raw-json.ts';

/** The URL path of a file of a recording (served with a token of the room, see `relay/http.ts`). */
export const recordingUrl = (recording: string, file: string) => `/recordings/${recording}/${file}`;

/** Bytes queued for the disk past which messages are left out of the timeline rather than held in memory. */
const MAX_UNWRITTEN = 8 * 1024 * 1024;

/** How the recording's composite is made. */
export interface RecordingMedia {
  /** The ffmpeg to run (`--ffmpeg`). */
  ffmpeg?: string;
  /** The composite's picture (`--composite`). */
  size?: CompositeSize;
  /** The relay's settings object: closing the relay waits for this recording's files. */
  owner: object;
  /** The disk space the relay keeps free: no start below it, and a running recording fails at it. */
  disk?: DiskReserve;
  /** The disk space each project may take: no start at it, and a running recording fails past it. */
  quota?: DiskQuota;
}

/** What a file of a recording is, by its name. */
const kindOf = (name: string): RecordingFile['kind'] => (name === TIMELINE_FILE ? 'timeline' : name === COMPOSITE_FILE ? 'composite' : 'track');

/**
 * One line of the timeline file. A message whose payload came as its bytes is written with those
 * bytes, never parsed (see `topics.ts`); in JSON a line break can only be whitespace between
 * tokens, so each becomes a space and the event stays one line.
 */
export function timelineLine(event: TimedEvent): string {
  if (event.type !== 'message' || !(event.payload instanceof RawPayload)) return `${JSON.stringify(event)}\n`;
  const { payload, ...rest } = event;
  const raw = Buffer.from(payload.json.buffer, payload.json.byteOffset, payload.json.byteLength).toString('utf8').replace(/[\r\n]/g, ' ');
  return `${JSON.stringify(rest).slice(0, -1)},"payload":${raw}}\n`;
}

/**
 * Records the room into its own directory, `<dir>/<project>/<room>/<recording id>/` (ids encoded
 * by `storage.ts`): the stage composite as `composite.mp4` (H.264 + AAC, put together at the
 * stop: see `recording-composite.ts`), the timeline — joins and leaves, pubsub messages,
 * streams, output and whiteboard changes, the media files — one JSON object per line in
 * `timeline.jsonl`, and each published track as it is published, one WebM file per track (VP8
 * or Opus, as forwarded; no re-encoding): `<participant>--<source>.webm`, `--2`, `--3`... for
 * later publications of the same source. Nothing is ever overwritten. Active once the
 * composite writes; its stop answers with every file (`info.files`).
 */
export class RecordingProvider implements OutputProvider<'recording'> {
  private out: WriteStream | null = null;
  private off: (() => void) | null = null;
  private offMedia: (() => void) | null = null;
  private offDisk: (() => void) | null = null;
  private quotaWatch: QuotaWatch | null = null;
  private readonly recorders = new Set<Promise<{ stop(): Promise<void> }>>();
  /** Publications per participant and source, for the `--N` of a name. */
  private readonly published = new Map<string, number>();

  private composite: CompositeRecording | null = null;
  private scratch: ScratchDir | null = null;
  private path = '';
  private info: OutputInfo['recording'] | null = null;
  private release: (() => void) | null = null;
  /** While `start` runs: a stop meanwhile leaves the relay's count of running outputs to the start's own cleanup. */
  private starting = false;
  private stopping: Promise<OutputInfo['recording'] | void> | null = null;

  /** Bytes of messages (pubsub, shapes) written to this recording's timeline so far. */
  private messageBytes = 0;
  private truncated = false;

  /**
   * @param timelineBytes what the room's messages may write to one timeline: past it (or while
   *   the disk lags more than `MAX_UNWRITTEN` behind) messages are left out, with one marker line;
   *   stage events are always written
   */
  constructor(
    private readonly ctx: OutputContext,
    private readonly dir: string,
    private readonly failed: (error: WireError) => void,
    private readonly media: RecordingMedia,
    private readonly timelineBytes = 64 * 1024 * 1024,
  ) {}

  private write(out: WriteStream, event: TimedEvent): void {
    const line = timelineLine(event);
    if (event.type === 'message' || event.type === 'stream' || event.type === 'whiteboard') {
      const over = this.messageBytes + line.length > this.timelineBytes;
      if (over || out.writableLength > MAX_UNWRITTEN) {
        if (!this.truncated) out.write(`${JSON.stringify({ type: 'truncated', at: event.at, reason: over ? 'timeline-budget' : 'disk-behind' })}\n`);
        this.truncated = true;
        return;
      }
      this.messageBytes += line.length;
      this.truncated = false;
    }
    out.write(line);
  }

  async start(): Promise<OutputInfo['recording']> {
    const ffmpeg = requireFfmpeg(this.media.ffmpeg);
    this.release = mediaOutputStarted(this.media.owner);
    this.starting = true;
    try {
      const info = await this.begin(ffmpeg);
      if (this.stopping) throw new RelayError('INVALID_STATE', 'the recording was stopped while starting', 'output-stopped');
      return info;
    } catch (err) {
      // a start that fails leaves nothing running (the board stops only what started)
      this.starting = false;
      this.stopping = finishAgain(this.stopping, () => this.finish());
      await this.stopping.catch(() => undefined);
      if (err instanceof RelayError) throw err;
      throw new RelayError('INTERNAL_ERROR', `recording: ${(err as Error).message}`, 'ffmpeg-failed');
    } finally {
      this.starting = false;
    }
  }

  private async begin(ffmpeg: string): Promise<OutputInfo['recording']> {
    await this.media.disk?.check(this.dir, 'recording');
    await this.media.quota?.check(this.ctx.project, 'recording');
    const id = newRecordingId();
    let path: string;
    try {
      path = await createRecordingDir(this.dir, this.ctx.project, this.ctx.roomId, id);
    } catch (err) {
      if (err instanceof UnsafeStorageError) {
        this.ctx.log.error('recordings directory refused', { error: err.message });
        throw new RelayError('INTERNAL_ERROR', 'the relay cannot write recordings: its recordings directory is not private (see the relay log)', 'unsafe-storage');
      }
      throw err;
    }
    this.path = path;
    const quota = this.media.quota;
    this.quotaWatch = quota?.watch(this.ctx.project, path, (used) => this.failed(overQuota('recording', used, quota.limit).toWire())) ?? null;
    const timeline = join(path, TIMELINE_FILE);
    const out = (await createExclusive(timeline)).createWriteStream();
    out.on('error', (err) => this.failed({ code: 'INTERNAL_ERROR', kind: 'Network', message: `recording: ${err.message}`, reason: 'write-failed' }));
    const startedAt = Date.now();
    out.write(`${JSON.stringify({ type: 'recording-started', recording: id, roomId: this.ctx.roomId, at: startedAt, format: 'tessera-timeline/1' })}\n`);
    this.off = this.ctx.timeline.on((event) => this.write(out, event));
    this.out = out;
    this.offMedia = this.ctx.tapMedia((track) => {
      const key = `${track.participantId}\u0000${track.source}`;
      const n = (this.published.get(key) ?? 0) + 1;
      this.published.set(key, n);
      const file = trackFileName(track.participantId, track.source, n);
      const recorder = this.recordTrack(join(path, file), (to) =>
        // the file ends where the write failed; the recording and its other tracks go on
        track.record(to, (err) => this.ctx.log.warn('track recording: a write failed, the file ends there', { participantId: track.participantId, source: track.source, file, error: err.message })),
      );
      this.recorders.add(recorder);
      recorder.then(
        () => this.ctx.timeline.emit({ type: 'track-recorded', participantId: track.participantId, source: track.source, kind: track.kind, file }),
        (err: Error) => this.ctx.log.warn('track recording failed', { participantId: track.participantId, source: track.source, error: err.message }),
      );
      return () => {
        this.recorders.delete(recorder);
        void recorder.then((r) => r.stop()).catch(() => undefined);
      };
    });
    this.info = { recording: id, file: TIMELINE_FILE, url: recordingUrl(id, TIMELINE_FILE) };
    this.offDisk = this.media.disk?.watch(this.dir, (free) => this.failed(diskFull('recording', free, this.media.disk!.reserve).toWire())) ?? null;
    this.scratch = await scratchDir('recording');
    if (this.stopping) throw new RelayError('INVALID_STATE', 'the recording was stopped while starting', 'output-stopped');
    this.composite = new CompositeRecording(this.ctx, ffmpeg, this.media.size ?? DEFAULT_COMPOSITE, join(path, '.composite'), this.scratch.path, (reason) =>
      this.failed(wireError('INTERNAL_ERROR', `recording: ${reason}`, 'ffmpeg-failed')),
    );
    await this.composite.start(startedAt);
    return this.info;
  }

  /** Reserve the name first (exclusive create), so that a track never replaces another file. */
  private async recordTrack(path: string, record: (path: string) => Promise<{ stop(): Promise<void> }>): Promise<{ stop(): Promise<void> }> {
    await (await createExclusive(path)).close();
    return record(path);
  }

  /** Stop, put the composite together, and answer with every file of the recording. */
  stop(): Promise<OutputInfo['recording'] | void> {
    this.stopping ??= this.finish();
    return this.stopping;
  }

  private async finish(): Promise<OutputInfo['recording'] | void> {
    try {
      this.offDisk?.();
      this.offDisk = null;
      this.quotaWatch?.quiet();
      this.offMedia?.();
      this.offMedia = null;
      const recorders = [...this.recorders];
      this.recorders.clear();
      const composite = this.composite;
      this.composite = null;
      const [joined] = await Promise.allSettled([
        composite ? composite.finish(join(this.path, COMPOSITE_FILE)) : Promise.resolve(null),
        ...recorders.map((r) => r.then((x) => x.stop())),
      ]);
      if (joined.status === 'rejected') this.ctx.log.warn('recording: the composite could not be put together', { error: (joined.reason as Error).message });
      this.off?.();
      this.off = null;
      const out = this.out;
      this.out = null;
      if (out) {
        if (joined.status === 'fulfilled' && joined.value !== null) out.write(`${JSON.stringify({ type: 'composite-recorded', file: COMPOSITE_FILE, seconds: Math.round(joined.value * 1000) / 1000, at: Date.now() })}\n`);
        out.write(`${JSON.stringify({ type: 'recording-stopped', at: Date.now() })}\n`);
        await new Promise<void>((resolve) => out.end(resolve));
      }
      return this.info ? { ...this.info, files: await this.files() } : undefined;
    } finally {
      await this.scratch?.release().catch(() => undefined);
      this.scratch = null;
      // a stop during the start: the start's cleanup, which runs this again, gives the place back
      // and says the files are final (the project's quota counts them as kept; they may be deleted)
      if (!this.starting) {
        const watch = this.quotaWatch;
        this.quotaWatch = null;
        await watch?.settle().catch(() => undefined);
        if (this.path) recordingWritten(this.path);
        this.release?.();
        this.release = null;
      }
    }
  }

  /** The files of this recording as `/recordings` serves them. */
  private async files(): Promise<RecordingFile[]> {
    const id = this.info!.recording;
    const names = (await fsp.readdir(this.path)).filter(isRecordingFile).sort();
    const files: RecordingFile[] = [];
    for (const name of names) {
      const st = await fsp.lstat(join(this.path, name)).catch(() => null);
      if (st?.isFile()) files.push({ name, kind: kindOf(name), size: st.size, url: recordingUrl(id, name) });
    }
    return files;
  }
}
