import type { OutputInfo, OutputOptions } from '../../src/protocol/control.ts';
import type { WireError } from '../../src/protocol/codes.ts';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { RelayError } from '../errors.ts';
import type { TimedEvent } from '../rooms/timeline.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import { createRunDir, removeRunDir, UnsafeStorageError } from './storage.ts';

/** The files of a run that `/hls` serves: the playlist and its segments. */
export const HLS_FILE = /^(?:index\.m3u8|seg(?:0|[1-9][0-9]{0,8})\.vtt)$/;

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

const vttTime = (ms: number) => {
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = (ms / 1000) % 60;
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${s.toFixed(3).padStart(6, '0')}`;
};

/** The latest run of each room, by storage root, project and room: a restart replaces it. */
const latestRun = new Map<string, string>();

/**
 * HLS output under `/hls/<runId>/index.m3u8` on the relay's HTTP port, where `runId` is 128
 * random bits, new at every start (whoever holds the URL may watch; nobody can guess it): an
 * event playlist of WebVTT segments carrying the room's stage events as timed captions, one
 * segment every `segmentSeconds`, written under `<hlsDir>/<runId>/`. A restart in the same
 * room deletes the previous run's directory (only one this process created). Video and audio
 * segments join it when the relay packages media.
 */
export class HlsProvider implements OutputProvider {
  private timer: ReturnType<typeof setInterval> | null = null;
  private off: (() => void) | null = null;
  private pending: string[] = [];
  private segments: number[] = [];
  private longest = 0;
  private startedAt = 0;
  private segmentStart = 0;
  private seconds = 2;
  private path = '';
  /** Writes happen one after another; a failed write fails the output, never the relay. */
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: OutputContext,
    private readonly root: string,
    private readonly defaultSegmentSeconds: number,
    private readonly failed?: (error: WireError) => void,
  ) {}

  async start(options: OutputOptions['hls'] | undefined): Promise<OutputInfo['hls']> {
    const seconds = options?.segmentSeconds ?? this.defaultSegmentSeconds;
    this.seconds = seconds;
    let run: { runId: string; path: string };
    try {
      run = await createRunDir(this.root);
    } catch (err) {
      if (err instanceof UnsafeStorageError) {
        this.ctx.log.error('HLS directory refused', { error: err.message });
        throw new RelayError('INTERNAL_ERROR', 'the relay cannot write HLS: its HLS directory is not private (see the relay log)', 'unsafe-storage');
      }
      throw err;
    }
    this.path = run.path;
    const key = `${this.root}\u0000${this.ctx.project}\u0000${this.ctx.roomId}`;
    const previous = latestRun.get(key);
    latestRun.set(key, run.path);
    if (previous) await removeRunDir(previous).catch((err: Error) => this.ctx.log.warn('could not delete the previous HLS run', { error: err.message }));
    this.startedAt = this.segmentStart = Date.now();
    this.segments = [];
    this.longest = 0;
    await this.writePlaylist(this.playlist(false));
    this.off = this.ctx.timeline.on((e) => {
      const text = stageCaption(e);
      if (text === null) return;
      const from = e.at - this.startedAt;
      this.pending.push(`${vttTime(from)} --> ${vttTime(from + 2000)}\n${vttText(text)}`);
    });
    this.timer = setInterval(() => this.cut(false), seconds * 1000);
    return { playlist: `/hls/${run.runId}/index.m3u8` };
  }

  async stop(): Promise<void> {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
    this.off?.();
    this.cut(true);
    await this.writing;
  }

  private cut(last: boolean): void {
    const now = Date.now();
    const index = this.segments.length;
    const cues = this.pending;
    this.pending = [];
    const duration = Math.max(0.001, (now - this.segmentStart) / 1000);
    this.segments.push(duration);
    this.longest = Math.max(this.longest, duration);
    this.segmentStart = now;
    const playlist = this.playlist(last);
    this.queue(async () => {
      await fsp.writeFile(join(this.path, `seg${index}.vtt`), `WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n${cues.join('\n\n')}\n`, { mode: 0o600 });
      await this.writePlaylist(playlist);
    });
  }

  private queue(write: () => Promise<void>): void {
    this.writing = this.writing.then(write).catch((err: Error) => {
      if (!this.timer) return;
      clearInterval(this.timer);
      this.timer = null;
      this.off?.();
      this.ctx.log.warn('HLS write failed', { error: err.message });
      this.failed?.({ code: 'INTERNAL_ERROR', kind: 'Network', message: `hls: ${err.message}`, reason: 'write-failed' });
    });
  }

  /** The playlist as of now (a segment is listed only once its file is written before it). */
  private playlist(ended: boolean): string {
    const target = Math.ceil(Math.max(this.seconds, this.longest));
    const lines = ['#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${target}`, '#EXT-X-MEDIA-SEQUENCE:0', '#EXT-X-PLAYLIST-TYPE:EVENT'];
    this.segments.forEach((d, i) => lines.push(`#EXTINF:${d.toFixed(3)},`, `seg${i}.vtt`));
    if (ended) lines.push('#EXT-X-ENDLIST');
    return `${lines.join('\n')}\n`;
  }

  private async writePlaylist(text: string): Promise<void> {
    // replaced atomically: a player never reads half a playlist
    await fsp.writeFile(join(this.path, 'index.m3u8.tmp'), text, { mode: 0o600 });
    await fsp.rename(join(this.path, 'index.m3u8.tmp'), join(this.path, 'index.m3u8'));
  }
}
