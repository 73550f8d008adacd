import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TimedEvent } from '../rooms/timeline.ts';
import type { OutputContext, OutputProvider } from './board.ts';
import { safeName } from './recording.ts';

const cueText = (e: TimedEvent): string => {
  switch (e.type) {
    case 'participant-joined':
      return `${e.name} joined${e.tier === 'viewer' ? ' the audience' : ' the stage'}`;
    case 'participant-left':
      return `${e.participantId} left`;
    case 'message':
      return `${e.from}: ${typeof e.payload === 'string' ? e.payload : JSON.stringify(e.payload)}`.slice(0, 300);
    case 'stream':
      return `${e.from} shared ${e.name ?? `${e.size} bytes`}`;
    case 'output':
      return `${e.output} ${e.state}`;
    case 'whiteboard':
      return `${e.by} ${e.action === 'clear' ? 'cleared the whiteboard' : 'drew on the whiteboard'}`;
    case 'track-recorded':
      return `recording ${e.participantId}'s ${e.source}`;
  }
};

const vttTime = (ms: number) => {
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = (ms / 1000) % 60;
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${s.toFixed(3).padStart(6, '0')}`;
};

/**
 * HLS output under `/hls/<room>/index.m3u8` on the relay's HTTP port: an event playlist of
 * WebVTT segments carrying the room's timeline as timed captions, one segment every
 * `segmentSeconds`. Video and audio segments join it when the relay forwards media.
 */
export class HlsProvider implements OutputProvider {
  private timer: ReturnType<typeof setInterval> | null = null;
  private off: (() => void) | null = null;
  private pending: TimedEvent[] = [];
  private segments: number[] = [];
  private startedAt = 0;
  private segmentStart = 0;
  private seconds = 2;
  private readonly path: string;

  constructor(
    private readonly ctx: OutputContext,
    root: string,
    private readonly defaultSegmentSeconds: number,
  ) {
    this.path = join(root, safeName(ctx.roomId));
  }

  async start(options: Record<string, unknown>): Promise<Record<string, string>> {
    const seconds = typeof options.segmentSeconds === 'number' && options.segmentSeconds >= 0.5 && options.segmentSeconds <= 30 ? options.segmentSeconds : this.defaultSegmentSeconds;
    this.seconds = seconds;
    rmSync(this.path, { recursive: true, force: true });
    mkdirSync(this.path, { recursive: true });
    this.startedAt = this.segmentStart = Date.now();
    this.segments = [];
    this.writePlaylist(false);
    this.off = this.ctx.timeline.on((e) => this.pending.push(e));
    this.timer = setInterval(() => this.cut(false), seconds * 1000);
    return { playlist: `/hls/${encodeURIComponent(safeName(this.ctx.roomId))}/index.m3u8` };
  }

  async stop(): Promise<void> {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
    this.off?.();
    this.cut(true);
  }

  private cut(last: boolean): void {
    const now = Date.now();
    const index = this.segments.length;
    const cues = this.pending.map((e) => {
      const from = e.at - this.startedAt;
      return `${vttTime(from)} --> ${vttTime(from + 2000)}\n${cueText(e)}`;
    });
    this.pending = [];
    writeFileSync(join(this.path, `seg${index}.vtt`), `WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n${cues.join('\n\n')}\n`);
    this.segments.push(Math.max(0.001, (now - this.segmentStart) / 1000));
    this.segmentStart = now;
    this.writePlaylist(last);
  }

  private writePlaylist(ended: boolean): void {
    const target = Math.ceil(Math.max(this.seconds, ...this.segments));
    const lines = ['#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${target}`, '#EXT-X-MEDIA-SEQUENCE:0', '#EXT-X-PLAYLIST-TYPE:EVENT'];
    this.segments.forEach((d, i) => lines.push(`#EXTINF:${d.toFixed(3)},`, `seg${i}.vtt`));
    if (ended) lines.push('#EXT-X-ENDLIST');
    // replaced atomically: a player never reads half a playlist
    writeFileSync(join(this.path, 'index.m3u8.tmp'), `${lines.join('\n')}\n`);
    renameSync(join(this.path, 'index.m3u8.tmp'), join(this.path, 'index.m3u8'));
  }
}
