/**
 * Cuts a microphone's audio into utterances for a speech service. ffmpeg writes the audio
 * (16 kHz mono s16le, its pts made the sample count) to stdout, and `silencedetect` +
 * `ametadata=mode=print` log where sound begins (`lavfi.silence_end`) and where a silence has
 * lasted `silenceS` (`lavfi.silence_start`) on stderr, by the header's sample-exact pts. The two
 * pipes are not in step, so a boundary is applied once the audio up to it has arrived.
 *
 * An utterance runs from a little before its sound began (`preRollS`) to where the silence after
 * it began; one shorter than `minS` is dropped (a click, a cough), one longer than `maxS` is cut
 * there and goes on as the next. Only the audio of the utterance in progress is held (at most
 * `maxS`), plus `preRollS` while silent.
 */

/** How utterances are cut. */
export interface CutterOptions {
  sampleRate: number;
  /** The silence `silencedetect` waits for (its `d`), seconds. */
  silenceS: number;
  minS: number;
  maxS: number;
  preRollS: number;
}

/** One utterance's audio and its wall-clock times (ms, when its audio reached the relay). */
export interface Cut {
  pcm: Buffer;
  startedAt: number;
  endedAt: number;
}

const LINE = /^\[Parsed_ametadata_\d+ @ 0x[0-9a-f]+\] (?:\[info\] )?(.*)$/;
const HEADER = /^frame:\s*\d+\s+pts:\s*(\d+)\s/;
/** Boundaries waiting for their audio: ffmpeg's stderr may run ahead of its stdout. */
const MAX_PENDING = 64;

export class UtteranceCutter {
  private readonly chunks: Array<{ from: number; data: Buffer }> = [];
  /** Samples received so far. */
  private received = 0;
  private odd: Buffer | null = null;
  private lastChunkAt = 0;
  /** Where the utterance in progress began (samples), or `null` while silent. The stream may begin in speech. */
  private speechFrom: number | null = 0;
  private frame: number | null = null;
  private readonly pending: Array<{ at: number; sound: boolean }> = [];

  constructor(
    private readonly options: CutterOptions,
    private readonly cut: (cut: Cut) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** The next bytes of the audio. */
  audio(bytes: Buffer): void {
    let data = this.odd ? Buffer.concat([this.odd, bytes]) : bytes;
    this.odd = null;
    if (data.length % 2) {
      this.odd = data.subarray(data.length - 1);
      data = data.subarray(0, data.length - 1);
    }
    if (data.length === 0) return;
    this.chunks.push({ from: this.received, data: Buffer.from(data) });
    this.received += data.length / 2;
    this.lastChunkAt = this.now();
    this.apply();
    const max = this.options.maxS * this.options.sampleRate;
    if (this.speechFrom !== null && this.received - this.speechFrom >= max) {
      this.emit(this.speechFrom, this.received);
      this.speechFrom = this.received;
    }
    this.trim();
  }

  /** A line of ffmpeg's stderr (anything but `ametadata`'s is ignored). */
  line(line: string): void {
    const m = LINE.exec(line);
    if (!m) return;
    const body = m[1]!;
    const header = HEADER.exec(body);
    if (header) {
      this.frame = Number(header[1]);
      return;
    }
    if (this.frame === null) return;
    if (body.startsWith('lavfi.silence_end=')) this.boundary(this.frame, true);
    else if (body.startsWith('lavfi.silence_start=')) this.boundary(Math.max(0, this.frame - Math.round(this.options.silenceS * this.options.sampleRate)), false);
  }

  private boundary(at: number, sound: boolean): void {
    this.pending.push({ at, sound });
    if (this.pending.length > MAX_PENDING) this.pending.shift();
    this.apply();
    this.trim();
  }

  private apply(): void {
    while (this.pending.length && this.pending[0]!.at <= this.received) {
      const { at, sound } = this.pending.shift()!;
      if (sound) {
        if (this.speechFrom === null) this.speechFrom = Math.max(this.held(), at - Math.round(this.options.preRollS * this.options.sampleRate));
      } else if (this.speechFrom !== null) {
        if (at > this.speechFrom) this.emit(this.speechFrom, at);
        this.speechFrom = null;
      }
    }
  }

  /** The first sample still held. */
  private held(): number {
    return this.chunks[0]?.from ?? this.received;
  }

  private emit(from: number, to: number): void {
    const rate = this.options.sampleRate;
    if (to - from < this.options.minS * rate) return;
    const parts: Buffer[] = [];
    for (const { from: start, data } of this.chunks) {
      const end = start + data.length / 2;
      if (end <= from || start >= to) continue;
      parts.push(data.subarray((Math.max(from, start) - start) * 2, (Math.min(to, end) - start) * 2));
    }
    const wall = (sample: number) => Math.round(this.lastChunkAt - ((this.received - sample) * 1000) / rate);
    this.cut({ pcm: Buffer.concat(parts), startedAt: wall(from), endedAt: wall(to) });
  }

  /** Let go of audio no utterance can need: before the one in progress, or older than the pre-roll while silent. */
  private trim(): void {
    const keepFrom = this.speechFrom ?? this.received - Math.round(this.options.preRollS * this.options.sampleRate);
    while (this.chunks.length && this.chunks[0]!.from + this.chunks[0]!.data.length / 2 <= keepFrom) this.chunks.shift();
  }
}
