/**
 * The playlists of a live HLS run, as text: one media playlist of MPEG-TS segments and one of
 * WebVTT segments (the same numbers, durations and discontinuities, so the subtitles line up),
 * both a sliding window, and the master playlist that ties them together. Pure: the provider
 * writes what these return.
 */

/** A segment in the window. */
interface Segment {
  index: number;
  duration: number;
  /** The first segment of a run after another: its timestamps and encoder state start anew. */
  discontinuity: boolean;
}

/** The names of a run's files (the only names `/hls` serves, see `HLS_FILE`). */
export const HLS_NAMES = {
  master: 'index.m3u8',
  media: 'media.m3u8',
  subtitles: 'subs.m3u8',
  segment: (n: number) => `seg${n}.ts`,
  cues: (n: number) => `sub${n}.vtt`,
} as const;

/** Segments one playlist lists: a minute of media, and at least six segments. */
export function windowOf(segmentSeconds: number): number {
  return Math.max(6, Math.ceil(60 / segmentSeconds));
}

export class LivePlaylist {
  private readonly segments: Segment[] = [];
  /** Number of the first segment listed (`#EXT-X-MEDIA-SEQUENCE`). */
  private sequence = 0;
  /** Discontinuities that left the window (`#EXT-X-DISCONTINUITY-SEQUENCE`). */
  private discontinuities = 0;
  private breakNext = false;
  private longest = 0;
  private next = 0;
  ended = false;

  constructor(
    readonly segmentSeconds: number,
    readonly window = windowOf(segmentSeconds),
  ) {}

  /** The number the next segment gets. */
  get nextIndex(): number {
    return this.next;
  }

  /** The playlist time at the end of the last segment (seconds since the run began). */
  total = 0;

  /** Segments listed now. */
  get count(): number {
    return this.segments.length;
  }

  /** A new run begins: its first segment is marked as a discontinuity (unless it is the first of all). */
  discontinuity(): void {
    if (this.next > 0) this.breakNext = true;
  }

  /**
   * A segment was written. Returns the numbers of the segments whose files may now be deleted:
   * those that left the playlist a whole window ago (a player that read an older playlist may
   * still fetch what it listed).
   */
  add(duration: number): { index: number; start: number; deletable: number[] } {
    const index = this.next++;
    const start = this.total;
    this.total += duration;
    this.longest = Math.max(this.longest, duration);
    this.segments.push({ index, duration, discontinuity: this.breakNext });
    this.breakNext = false;
    while (this.segments.length > this.window) {
      const gone = this.segments.shift()!;
      this.sequence = gone.index + 1;
      if (gone.discontinuity) this.discontinuities++;
    }
    const deletable = index - 2 * this.window - 1;
    return { index, start, deletable: deletable >= 0 ? [deletable] : [] };
  }

  /** `#EXT-X-TARGETDURATION`: the segment length, or the longest segment rounded, whichever is more. */
  private target(): number {
    return Math.max(Math.ceil(this.segmentSeconds), Math.round(this.longest));
  }

  /** The media playlist (`name` gives each segment's file). */
  playlist(name: (index: number) => string): string {
    const lines = ['#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${this.target()}`, `#EXT-X-MEDIA-SEQUENCE:${this.sequence}`, `#EXT-X-DISCONTINUITY-SEQUENCE:${this.discontinuities}`];
    for (const s of this.segments) {
      if (s.discontinuity) lines.push('#EXT-X-DISCONTINUITY');
      lines.push(`#EXTINF:${s.duration.toFixed(3)},`, name(s.index));
    }
    if (this.ended) lines.push('#EXT-X-ENDLIST');
    return `${lines.join('\n')}\n`;
  }
}

/** The stream's description in the master playlist. */
export interface Variant {
  width: number;
  height: number;
  fps: number;
  /** Video and audio together, bits per second. */
  bandwidth: number;
  /** RFC 6381 codecs, e.g. `avc1.640028,mp4a.40.2`. */
  codecs: string;
}

/** The master playlist: the one H.264 + AAC variant and the stage's WebVTT subtitles. */
export function masterPlaylist(v: Variant): string {
  return [
    '#EXTM3U',
    '#EXT-X-VERSION:3',
    `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="stage",NAME="Stage",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,FORCED=NO,URI="${HLS_NAMES.subtitles}"`,
    `#EXT-X-STREAM-INF:BANDWIDTH=${Math.round(v.bandwidth)},CODECS="${v.codecs}",RESOLUTION=${v.width}x${v.height},FRAME-RATE=${v.fps.toFixed(3)},SUBTITLES="stage"`,
    HLS_NAMES.media,
    '',
  ].join('\n');
}

/**
 * The H.264 level a picture needs (macroblocks per second): 4.0 up to 1080p30, else 4.2 (the
 * composite is at most 1080p60). The composite is High profile (x264's default for yuv420p).
 */
export function h264Codec(width: number, height: number, fps: number): { codecs: string; level: string } {
  const mbps = Math.ceil(width / 16) * Math.ceil(height / 16) * fps;
  const [level, hex] = mbps <= 245_760 ? ['4.0', '28'] : ['4.2', '2a'];
  return { codecs: `avc1.6400${hex},mp4a.40.2`, level };
}
