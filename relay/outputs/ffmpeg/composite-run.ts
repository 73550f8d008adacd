/**
 * A live composite of the stage that follows the stage: one ffmpeg process at a time, fed the
 * room's tracks over loopback RTP; when a track is published or ends, the process is replaced
 * by one with the new set of tracks (after a short debounce, so that camera and microphone
 * published together cost one restart). Each process is a "run"; the caller decides what a run
 * writes (an HLS muxer continuing its numbering, a part of a recording, an RTMP push).
 *
 * Only tracks whose packets flow go into a run: ffmpeg configures its filter graph once every
 * input has given a frame, so a silent track at the start of a run would hold the whole
 * composite back. The set is checked every second: a track that falls silent (muted with no
 * packets, its publisher's network gone) leaves the composite, and comes back when it sends
 * again. A track that falls silent during a run does not stall it meanwhile (ffmpeg keeps its
 * last picture).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TappedTrack, TrackTap } from '../../media/board.ts';
import type { Logger } from '../../log.ts';
import { compositeGraph, encoderArgs } from './composite.ts';
import { FfmpegProcess, type FfmpegExit } from './process.ts';
import { FEED_INPUT, feedSdp, freeRtpPorts, RtpFeed } from './rtp-feed.ts';

/** Options of a {@link CompositeRun}. */
export interface CompositeRunOptions {
  /** The ffmpeg binary. */
  ffmpeg: string;
  /** A private directory of this run's own (SDP, label files). */
  workDir: string;
  width: number;
  height: number;
  fps: number;
  videoKbps: number;
  /** Shown when no video is on stage. */
  roomName: string;
  /** A TrueType font for names; `null` draws none. */
  font: string | null;
  /** The display name of a participant (for its tile's label). */
  nameOf(participantId: string): string;
  /** What run `n` (0, 1, 2...) writes: ffmpeg output arguments. */
  output(run: number): string[];
  /** ffmpeg ended on its own: the composite is over. */
  failed(reason: string): void;
  log: Logger;
  /** Wait after a stage change before restarting (ms, default 400). */
  settleMs?: number;
  /** A run with tracks that writes nothing for this long is stalled (ms, default {@link STALL_MS}). */
  stallMs?: number;
}

/** How often the set of flowing tracks is compared with the run's. */
const CHECK_MS = 1000;
/** Silence after which a track of a run leaves it. */
const SILENT_MS = 2500;

/**
 * A run with tracks that writes nothing for this long is stalled: ffmpeg builds its picture once
 * every input has given a frame, so one track that never decodes (a member publishing garbage
 * VP8, or frames larger than `-max_pixels`) froze the room's HLS, recording and livestream for
 * good, the output still `active`, ffmpeg's memory growing 2 MB a second.
 */
export const STALL_MS = 10_000;
/** How long the tracks suspected of a stall are left out, at first; doubled at each stall a track causes again. */
export const HOLD_MS = 10_000;
const MAX_HOLD_MS = 5 * 60_000;
/**
 * Runs of one composite start at most this often (ms): a member publishing and unpublishing a
 * microphone every 500 ms restarted ffmpeg 1.6 times a second, as long as it liked.
 */
export const MIN_RESTART_MS = 2000;
/** The largest picture a run decodes (4K): a 16,000 × 16,000 key frame is 384 MB of ffmpeg's memory. */
const MAX_PIXELS = 3840 * 2160;

/** Sources a composite remembers as suspects (see {@link STALL_MS}). */
const MAX_HELD = 256;

/** Whose source a track is: what a hold is kept by. */
const holdKey = (t: Pick<TappedTrack, 'participantId' | 'source'>) => `${t.participantId}\u0000${t.source}`;

/** Longest label drawn on a tile. */
const MAX_LABEL = 64;

/** A name as a label: one line, printable, bounded. */
export function labelText(name: string): string {
  const line = name.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ').trim();
  return ([...line].slice(0, MAX_LABEL).join('') || '?');
}

/** A run that ended: what it wrote, and when its output began by the wall clock (`null` if it wrote nothing). */
export interface EndedRun {
  run: number;
  seconds: number;
  startedAt: number | null;
}

export class CompositeRun {
  private readonly tracks: TappedTrack[] = [];
  private untap: (() => void) | null = null;
  private ffmpeg: FfmpegProcess | null = null;
  private feed: RtpFeed | null = null;
  private run = -1;
  private timer: NodeJS.Timeout | null = null;
  /** Restarts happen one after another. */
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;
  private check: NodeJS.Timeout | null = null;
  private restartQueued = false;
  /** The tracks of the current run. */
  private inRun: TappedTrack[] = [];
  private producing: { resolve(wrote: boolean): void; promise: Promise<boolean> } | null = null;
  /** When each track was last seen flowing. */
  private readonly lastFlowing = new Map<TappedTrack, number>();
  /**
   * Publishers' sources suspected of a stall, left out until `until` (see {@link STALL_MS}), by
   * participant and source: the same garbage published again is a new track, not a new suspect.
   */
  private readonly held = new Map<string, { until: number; strikes: number }>();
  /** A held track whose hold ran out, let into the current run alone of those held: a stall now is its own. */
  private trial: TappedTrack | null = null;
  /** The tracks of the last run that wrote. */
  private lastGood = new Set<TappedTrack>();
  /** When the current run started or last wrote more (performance.now()). */
  private progressAt = 0;
  /**
   * When the last restart began (performance.now()), before the old run's stop: timed from the
   * new run's start, a stop that took a second let the next restart follow at once.
   */
  private restartedAt = -Infinity;
  /** Seconds the current run has written. */
  private written = 0;
  /** Wall-clock time (ms) of the current run's output time 0, once it writes. */
  private outputStart: number | null = null;
  /** The runs that ended, with the seconds each wrote (a run replaced before it wrote anything wrote 0). */
  readonly ended: EndedRun[] = [];
  private firstOutput: { resolve(wrote: boolean): void; promise: Promise<boolean> };

  constructor(
    private readonly tap: (tap: TrackTap) => () => void,
    private readonly options: CompositeRunOptions,
  ) {
    let resolve!: (wrote: boolean) => void;
    this.firstOutput = { resolve: (wrote) => resolve(wrote), promise: new Promise<boolean>((r) => (resolve = r)) };
  }

  /** How many runs have started. */
  get runs(): number {
    return this.run + 1;
  }

  /** Tracks in the current run, in tile order: video then audio, each in publication order. */
  get stage(): ReadonlyArray<Pick<TappedTrack, 'participantId' | 'source' | 'kind'>> {
    return this.inRun;
  }

  /** Seconds of output the current run has written (from ffmpeg's progress). */
  get seconds(): number {
    return this.written;
  }

  /** Resolves once the current run writes output (`true`), or with `false` if it ended first. */
  whenProducing(): Promise<boolean> {
    return this.producing?.promise ?? Promise.resolve(false);
  }

  /**
   * Resolves `true` once any run writes output (a first run replaced before it wrote, by a stage
   * change, is followed by the next), or `false` if the composite stopped or failed first.
   */
  whenFirstOutput(): Promise<boolean> {
    return this.firstOutput.promise;
  }

  /** Wall-clock time (ms) at which the current run's output time 0 was, once it writes; else `null`. */
  get runStartedAt(): number | null {
    return this.outputStart;
  }

  /** Start: the first run begins with the tracks on stage now. Rejects if ffmpeg cannot run. */
  async start(): Promise<void> {
    await mkdir(this.options.workDir, { recursive: true, mode: 0o700 });
    // stopped meanwhile (the output was stopped while starting): nothing to follow, nothing left behind
    if (this.stopped) return;
    this.untap = this.tap((track) => {
      this.tracks.push(track);
      if (this.run >= 0) this.schedule();
      return () => {
        const at = this.tracks.indexOf(track);
        if (at >= 0) this.tracks.splice(at, 1);
        this.lastFlowing.delete(track);
        this.lastGood.delete(track);
        this.schedule();
      };
    });
    await this.enqueue(() => this.next());
    if (this.stopped) return;
    this.check = setInterval(() => {
      if (this.ffmpeg && this.inRun.length > 0 && performance.now() - this.progressAt > (this.options.stallMs ?? STALL_MS)) return this.stalled();
      const now = this.ordered();
      if (now.length !== this.inRun.length || now.some((t, i) => t !== this.inRun[i])) this.schedule();
    }, CHECK_MS);
    this.check.unref();
  }

  /** Stop the current run (its muxer finishes) and stop following the stage. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.check) clearInterval(this.check);
    this.untap?.();
    this.untap = null;
    await this.enqueue(() => this.end());
    this.firstOutput.resolve(false);
  }

  /**
   * The current run wrote nothing for the stall time: the tracks that may hold it back are left
   * out for a while (a track let back alone, if it was one; else those that joined since the last
   * run that wrote; else all), and the composite goes on without them. Tracks whose hold runs out
   * come back one at a time, so that the one that never decodes is found and left out for longer.
   */
  private stalled(): void {
    const newcomers = this.inRun.filter((t) => !this.lastGood.has(t));
    const suspects = this.trial ? [this.trial] : newcomers.length > 0 ? newcomers : [...this.inRun];
    const now = Date.now();
    for (const t of suspects) {
      const key = holdKey(t);
      const strikes = (this.held.get(key)?.strikes ?? 0) + 1;
      this.held.delete(key);
      // the oldest make way: a composite has a handful of publishers, this many is plenty
      if (this.held.size >= MAX_HELD) this.held.delete(this.held.keys().next().value!);
      this.held.set(key, { until: now + Math.min(MAX_HOLD_MS, HOLD_MS * 2 ** (strikes - 1)), strikes });
    }
    this.trial = null;
    this.progressAt = performance.now();
    this.options.log.warn('composite: a run wrote nothing: tracks left out for a while', { run: this.run, tracks: suspects.map((t) => `${t.participantId}:${t.source}`).join(' ') });
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped || this.timer || this.restartQueued) return;
    const wait = Math.max(this.options.settleMs ?? 400, this.restartedAt + MIN_RESTART_MS - performance.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      // one restart waits at most: changes while it waits are seen when it runs
      this.restartQueued = true;
      void this.enqueue(() => {
        this.restartQueued = false;
        return this.next();
      }).catch((err: Error) => this.fail(err.message));
    }, wait);
  }

  private enqueue(job: () => Promise<void>): Promise<void> {
    const run = this.chain.then(job);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * The tracks a run would take now: those whose packets flow, video first. A track of the
   * current run stays until it has been silent for `SILENT_MS` (a camera that sends a few frames
   * a second must not flap in and out).
   */
  private ordered(): TappedTrack[] {
    const now = Date.now();
    // the track on trial stays in; else one whose hold ran out may come back
    let backAlone: TappedTrack | null = this.trial && this.tracks.includes(this.trial) ? this.trial : null;
    const flowing = this.tracks.filter((t) => {
      if (t.flowing()) this.lastFlowing.set(t, now);
      const last = this.lastFlowing.get(t);
      if (last === undefined || !(last === now || (this.inRun.includes(t) && now - last < SILENT_MS))) return false;
      const hold = this.held.get(holdKey(t));
      if (!hold) return true;
      if (hold.until > now) return false;
      if (backAlone !== null && t !== backAlone) return false;
      backAlone = t;
      return true;
    });
    return [...flowing.filter((t) => t.kind === 'video'), ...flowing.filter((t) => t.kind === 'audio')];
  }

  /** End the current run, start the next with the stage as it is now. */
  private async next(): Promise<void> {
    this.restartedAt = performance.now();
    await this.end();
    if (this.stopped) return;
    const run = ++this.run;
    const tracks = this.ordered();
    this.inRun = tracks;
    this.trial = tracks.find((t) => this.held.has(holdKey(t))) ?? null;
    this.progressAt = performance.now();
    this.written = 0;
    this.outputStart = null;
    let resolve!: (wrote: boolean) => void;
    this.producing = { resolve: (wrote) => resolve(wrote), promise: new Promise<boolean>((r) => (resolve = r)) };
    const dir = this.options.workDir;
    const videos = tracks.filter((t) => t.kind === 'video');
    const labels = await Promise.all(
      videos.map(async (track, i) => {
        const file = join(dir, `label-${run}-${i}.txt`);
        const name = this.options.nameOf(track.participantId);
        await writeFile(file, labelText(track.source === 'screen' ? `${name} (screen)` : name), { mode: 0o600 });
        return file;
      }),
    );
    const roomCard = join(dir, 'room.txt');
    await writeFile(roomCard, labelText(this.options.roomName), { mode: 0o600 });
    const graph = compositeGraph({ width: this.options.width, height: this.options.height, fps: this.options.fps, labels, audios: tracks.length - videos.length, roomCard, font: this.options.font });
    const ports = await freeRtpPorts(tracks.length);
    let input: string[] = [];
    if (tracks.length > 0) {
      const sdp = join(dir, `run-${run}.sdp`);
      await writeFile(sdp, feedSdp(tracks.map((t, i) => ({ kind: t.kind, port: ports[i]! }))), { mode: 0o600 });
      // the SDP names every codec; a keyframe's worth of probing is enough (5 s by default delays the run)
      input = [...FEED_INPUT, '-max_pixels', String(MAX_PIXELS), '-analyzeduration', '1000000', '-fpsprobesize', '0', '-use_wallclock_as_timestamps', '1', '-i', sdp];
    }
    const producing = this.producing;
    const begun = performance.now();
    const ffmpeg = await FfmpegProcess.start({
      ffmpeg: this.options.ffmpeg,
      stdin: true,
      // debug: ffmpeg can warn once per packet (a flood at warn); a failure carries its last lines anyway
      stderrLine: (line) => this.options.log.debug('composite: ffmpeg says', { run, line }),
      stdout: (chunk) => {
        const us = /out_time_us=(\d+)/.exec(chunk.toString('latin1'));
        if (!us || this.producing !== producing) return;
        const written = Number(us[1]) / 1e6;
        if (written <= this.written) return;
        this.written = written;
        this.progressAt = performance.now();
        if (this.trial) this.held.delete(holdKey(this.trial));
        this.trial = null;
        this.lastGood = new Set(tracks);
        // the first report places output time 0 on the wall clock (the encoder's latency is a few frames)
        if (this.outputStart === null) {
          this.outputStart = Date.now() - this.written * 1000;
          this.options.log.debug('composite run writes', { run, afterMs: Math.round(performance.now() - begun) });
        }
        producing.resolve(true);
        this.firstOutput.resolve(true);
      },
      args: ['-loglevel', 'warning', '-nostats', '-progress', 'pipe:1', ...input, '-filter_complex', graph.filter, '-map', graph.video, '-map', graph.audio, ...encoderArgs(this.options.fps, this.options.videoKbps), ...this.options.output(run)],
    });
    this.ffmpeg = ffmpeg;
    void ffmpeg.exited.then((exit) => this.exited(ffmpeg, exit));
    // ffmpeg binds its ports while it reads the SDP; what is sent before is lost, key frames are asked again
    this.feed = new RtpFeed(tracks.map((track, i) => ({ track, port: ports[i]! })));
    this.options.log.debug('composite run started', { run, videos: videos.length, audios: tracks.length - videos.length });
  }

  private async end(): Promise<void> {
    const ffmpeg = this.ffmpeg;
    const feed = this.feed;
    this.ffmpeg = null;
    this.feed = null;
    this.producing?.resolve(false);
    const stopBegun = performance.now();
    if (ffmpeg) {
      const stopAt = Date.now();
      // fed until it has finished: ffmpeg reads its stdin (the "q") only while packets come in;
      // a run that wrote nothing has nothing to finish (and reads no stdin while it waits for its inputs)
      await ffmpeg.stop(this.written > 0 ? 5000 : 0);
      // placed on the wall clock by its end: what it wrote reaches up to the moment it was told to
      // stop, while its first progress report can come in the middle of the burst of its first second
      const startedAt = this.written > 0 ? stopAt - this.written * 1000 : null;
      this.ended.push({ run: this.run, seconds: this.written, startedAt });
    }
    if (feed) this.options.log.debug('composite run ended', { run: this.run, packets: feed.sent.join(' '), stopMs: Math.round(performance.now() - stopBegun) });
    feed?.stop();
  }

  private exited(ffmpeg: FfmpegProcess, exit: FfmpegExit): void {
    if (exit.stopped || this.ffmpeg !== ffmpeg) return;
    this.fail(exit.reason);
  }

  private fail(reason: string): void {
    if (this.stopped) return;
    this.options.log.warn('composite failed', { reason });
    this.firstOutput.resolve(false);
    void this.stop();
    this.options.failed(reason);
  }
}
