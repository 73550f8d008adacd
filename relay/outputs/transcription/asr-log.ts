/**
 * Reads what the local recogniser's ffmpeg logs: `ametadata=mode=print` writes, for each frame
 * that carries metadata, a header with the frame's pts, then one `key=value` line per entry.
 * The pts are wall-clock microseconds (the graph reads RTP with `-use_wallclock_as_timestamps 1
 * -copyts` and sets the time base to 1/1000000): when the audio reached the relay.
 *
 * `asr` (pocketsphinx) puts `lavfi.asr.text` on the frame at which its voice detector heard the
 * utterance end; `silencedetect` before it marks the frames where sound begins
 * (`lavfi.silence_end`) and where a silence has lasted its minimum (`lavfi.silence_start`). An
 * utterance starts with the first sound after the previous utterance and ends where the silence
 * after it began (or at the `asr` frame, when `asr` ended it without a silence).
 *
 * Only the header's integer pts are used: silencedetect's own values are printed with six
 * significant digits, which is seconds at this scale.
 */

/** One recognised utterance, in wall-clock milliseconds. */
export interface Utterance {
  text: string;
  startedAt: number;
  endedAt: number;
}

/** ffmpeg runs with `-loglevel level+info`: each line names its level after the filter. */
const LINE = /^\[Parsed_ametadata_\d+ @ 0x[0-9a-f]+\] (?:\[info\] )?(.*)$/;
const HEADER = /^frame:\s*\d+\s+pts:\s*(-?\d+)\s/;

/** True when an ffmpeg stderr line is metadata printed by `ametadata` (it may carry what was said). */
export function isMetadataLine(line: string): boolean {
  return LINE.test(line);
}

export class AsrLog {
  /** The pts (µs) of the frame whose entries follow. */
  private frame: number | null = null;
  /** Where the first sound after the last utterance began (µs). */
  private soundFrom: number | null = null;
  /** Where the current silence began (µs), while silent. */
  private silentFrom: number | null = null;
  private lastEnd: number | null = null;

  /**
   * @param silenceUs the minimum silence of `silencedetect` (its `d`), in µs: a silence is
   *   reported that long after it began
   * @param startedAt wall-clock ms at which the recogniser started: the start of an utterance
   *   that began before any sound was reported
   */
  constructor(
    private readonly silenceUs: number,
    private readonly startedAt: number,
  ) {}

  /** Read one stderr line; an utterance when it ends one with words. */
  line(line: string): Utterance | null {
    const m = LINE.exec(line);
    if (!m) return null;
    const body = m[1]!;
    const header = HEADER.exec(body);
    if (header) {
      this.frame = Number(header[1]);
      return null;
    }
    if (this.frame === null) return null;
    const eq = body.indexOf('=');
    if (eq < 0) return null;
    const key = body.slice(0, eq);
    const value = body.slice(eq + 1);
    if (key === 'lavfi.silence_end') {
      this.soundFrom ??= this.frame;
      this.silentFrom = null;
    } else if (key === 'lavfi.silence_start') {
      this.silentFrom = Math.max(this.frame - this.silenceUs, this.soundFrom ?? -Infinity, this.lastEnd ?? -Infinity);
    } else if (key === 'lavfi.asr.text') {
      return this.ended(value.trim());
    }
    return null;
  }

  private ended(text: string): Utterance | null {
    const frame = this.frame!;
    // a silence that began before the last utterance ended is not this one's end
    const end = this.silentFrom !== null && this.silentFrom > (this.lastEnd ?? -Infinity) ? this.silentFrom : frame;
    const start = Math.min(this.soundFrom ?? this.lastEnd ?? this.startedAt * 1000, end);
    // asr may end an utterance while sound goes on (a long one): the next begins here
    this.soundFrom = this.silentFrom === null ? frame : null;
    this.lastEnd = end;
    if (!text) return null;
    return { text, startedAt: Math.round(start / 1000), endedAt: Math.round(end / 1000) };
  }
}
