/**
 * One HLS run's files as the composite writes them: each composite run (an ffmpeg process) cuts
 * MPEG-TS segments with ffmpeg's segment muxer, numbered on from the previous run and with its
 * timestamps offset to the playlist's time, and lists each finished segment in a CSV file of the
 * scratch directory. This reads those lists, puts each segment in the playlists (a
 * discontinuity where a run begins), writes the WebVTT segment of the stage events that fall in
 * it, and deletes segments long gone from the window.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { h264Codec, HLS_NAMES, LivePlaylist, masterPlaylist } from './hls-playlist.ts';
import type { CompositeSize } from './media-output.ts';

/** How long a stage event's caption stays on screen (s). */
const CUE_SECONDS = 3;
/** Captions waiting for their segment, at most (a flood of stage events drops the oldest). */
const MAX_PENDING = 200;
/** Bytes of a segment list read at once. */
const READ_CHUNK = 64 * 1024;

const vttTime = (seconds: number) => {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = (ms / 1000) % 60;
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${s.toFixed(3).padStart(6, '0')}`;
};

/** The composite run being read: its segment list and where it sits in the playlist's time. */
interface RunList {
  csv: string;
  read: number;
  partial: string;
  /** Playlist time at which this run's output begins (its `-output_ts_offset`). */
  offset: number;
  /** Playlist time at the end of the last segment listed. */
  end: number;
  /** Wall-clock ms of this run's output time 0, once known. */
  startedAt: number | null;
}

export class HlsRun {
  readonly playlist: LivePlaylist;
  private current: RunList | null = null;
  private pending: Array<{ at: number; text: string }> = [];
  private writing: Promise<void> = Promise.resolve();
  private wroteMaster = false;
  private firstResolve!: () => void;
  /** Resolves once the first segment is in the playlists. */
  readonly firstSegment = new Promise<void>((resolve) => (this.firstResolve = resolve));

  /**
   * @param dir the run's public directory (playlists and segments)
   * @param scratch a private directory for the segment lists
   * @param failed a write failed (the output is over)
   */
  constructor(
    private readonly dir: string,
    private readonly scratch: string,
    private readonly size: CompositeSize,
    segmentSeconds: number,
    private readonly failed: (err: Error) => void,
  ) {
    this.playlist = new LivePlaylist(segmentSeconds);
  }

  /** A stage event's caption (already WebVTT-safe text), at its wall-clock time. */
  caption(at: number, text: string): void {
    this.pending.push({ at, text });
    if (this.pending.length > MAX_PENDING) this.pending.shift();
  }

  /**
   * The output arguments of composite run `run`: the previous run's last segments are taken in
   * first (synchronously: its ffmpeg has ended), so that numbers and times continue.
   */
  outputArgs(run: number, previousStartedAt: number | null): string[] {
    if (this.current) {
      this.current.startedAt ??= previousStartedAt;
      this.readList();
    }
    this.playlist.discontinuity();
    const offset = this.playlist.total;
    this.current = { csv: join(this.scratch, `run-${run}.csv`), read: 0, partial: '', offset, end: offset, startedAt: null };
    const seconds = this.playlist.segmentSeconds;
    const { fps } = this.size;
    const gop = Math.max(1, Math.round(fps * seconds));
    // `%` is the segment muxer's pattern character: one in the directory's name stays literal
    const pattern = join(this.dir.replace(/%/g, '%%'), 'seg%d.ts');
    return [
      '-profile:v', 'high', '-level:v', h264Codec(this.size.width, this.size.height, fps).level,
      // a key frame at every segment boundary, so that segments are cut where they should be
      '-g', String(gop), '-keyint_min', String(gop), '-force_key_frames', `expr:gte(t,n_forced*${seconds})`,
      // timestamps in the playlist's time: runs continue one timeline, and the captions' times hold
      '-output_ts_offset', offset.toFixed(6), '-muxdelay', '0', '-muxpreload', '0',
      '-f', 'segment', '-segment_format', 'mpegts', '-segment_time', String(seconds), '-reset_timestamps', '0',
      '-segment_start_number', String(this.playlist.nextIndex), '-segment_list', `file:${this.current.csv}`, '-segment_list_type', 'csv',
      `file:${pattern}`,
    ];
  }

  /** Take in the segments the current run has finished (`startedAt`: its output time 0 by the wall clock, once known). */
  poll(startedAt: number | null): void {
    if (!this.current) return;
    this.current.startedAt ??= startedAt;
    this.readList();
  }

  /** The last segments are in: end the playlists. Resolves once everything is written. */
  async end(previousStartedAt: number | null): Promise<void> {
    if (this.current) {
      this.current.startedAt ??= previousStartedAt;
      this.readList();
    }
    this.playlist.ended = true;
    if (this.playlist.nextIndex > 0) this.queue(() => this.writePlaylists());
    await this.writing;
  }

  /** Read what the segment muxer appended to the current list (small: one line per segment). */
  private readList(): void {
    const run = this.current!;
    let fd: number;
    try {
      fd = openSync(run.csv, 'r');
    } catch {
      return; // not made yet: the run has written no segment
    }
    try {
      const buffer = Buffer.alloc(READ_CHUNK);
      for (;;) {
        const n = readSync(fd, buffer, 0, buffer.length, run.read);
        if (n <= 0) break;
        run.read += n;
        run.partial += buffer.subarray(0, n).toString('latin1');
      }
    } finally {
      closeSync(fd);
    }
    const lines = run.partial.split('\n');
    run.partial = lines.pop() ?? '';
    for (const line of lines) {
      const m = /^seg(\d+)\.ts,[^,]*,([0-9.]+)$/.exec(line.trim());
      if (!m || Number(m[1]) !== this.playlist.nextIndex) continue;
      const end = Number(m[2]);
      this.segment(Math.max(0.001, end - run.end));
      run.end = end;
    }
  }

  private segment(duration: number): void {
    const { index, start, deletable } = this.playlist.add(duration);
    const cues = this.cuesUntil(start, start + duration);
    const first = index === 0;
    this.queue(async () => {
      await fsp.writeFile(join(this.dir, HLS_NAMES.cues(index)), `WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n${cues.join('\n\n')}\n`, { mode: 0o600 });
      await this.writePlaylists();
      for (const old of deletable) {
        await fsp.rm(join(this.dir, HLS_NAMES.segment(old)), { force: true });
        await fsp.rm(join(this.dir, HLS_NAMES.cues(old)), { force: true });
      }
      if (first) this.firstResolve();
    });
  }

  /** The pending captions that fall before `end` in the playlist's time, as cues of the segment starting at `start`. */
  private cuesUntil(start: number, end: number): string[] {
    const run = this.current!;
    const cues: string[] = [];
    const keep: typeof this.pending = [];
    for (const p of this.pending) {
      // an event while no run wrote (between two runs) is shown as the next run begins
      const at = run.startedAt === null ? start : Math.max(start, run.offset + (p.at - run.startedAt) / 1000);
      if (at >= end) keep.push(p);
      else cues.push(`${vttTime(at)} --> ${vttTime(at + CUE_SECONDS)}\n${p.text}`);
    }
    this.pending = keep;
    return cues;
  }

  private async writePlaylists(): Promise<void> {
    if (!this.wroteMaster) {
      const { width, height, fps, videoKbps } = this.size;
      await this.atomic(HLS_NAMES.master, masterPlaylist({ width, height, fps, bandwidth: (videoKbps + 128) * 1000 * 1.1, codecs: h264Codec(width, height, fps).codecs }));
      this.wroteMaster = true;
    }
    await this.atomic(HLS_NAMES.subtitles, this.playlist.playlist(HLS_NAMES.cues));
    await this.atomic(HLS_NAMES.media, this.playlist.playlist(HLS_NAMES.segment));
  }

  /** Replaced in one step: a player never reads half a playlist. */
  private async atomic(name: string, text: string): Promise<void> {
    const tmp = join(this.dir, `${name}.tmp`);
    await fsp.writeFile(tmp, text, { mode: 0o600 });
    await fsp.rename(tmp, join(this.dir, name));
  }

  private queue(write: () => Promise<void>): void {
    this.writing = this.writing.then(write).catch((err: Error) => this.failed(err));
  }
}
