/**
 * The room's microphones while transcription runs: each published microphone gets a recogniser
 * once the pool gives it a place, and loses it when it is unpublished (or its publisher leaves).
 * A recogniser that ends on its own (ffmpeg stops reading an RTP input silent for 10 s, or
 * cannot decode what it gets) is started again once the microphone sends again, after a pause
 * that doubles with each end that came quickly (1 s up to a minute): a publisher whose stream
 * breaks ffmpeg cannot make the relay restart it in a loop.
 */
import { join } from 'node:path';
import type { TappedTrack, TrackTap } from '../../media/board.ts';
import type { Logger } from '../../log.ts';
import type { RecogniserPool } from './pool.ts';
import type { Recogniser, RecogniserEngine, Utterance } from './recogniser.ts';

/** What {@link Microphones} works with. */
export interface MicrophonesOptions {
  tap(tap: TrackTap): () => void;
  pool: RecogniserPool;
  /** The room's project, as the pool counts it. */
  project: string;
  /** The room, as the pool counts it (project and room id). */
  room: string;
  engine: RecogniserEngine;
  /** A private directory; each recogniser gets one of its own inside. */
  workDir: string;
  heard(participantId: string, utterance: Utterance): void;
  log: Logger;
}

interface Mic {
  readonly track: TappedTrack;
  /** Withdraws its request for a place, while it waits for one. */
  cancel: (() => void) | null;
  release: (() => void) | null;
  recogniser: Recogniser | null;
  startedAt: number;
  quickEnds: number;
  retry: NodeJS.Timeout | null;
  gone: boolean;
  /** The number of its current recogniser (0: none). */
  run: number;
  /** Its recogniser is starting: whoever sees it start frees its place. */
  launching: boolean;
}

/** A recogniser that ran this long is not failing: the next end restarts it after the shortest pause. */
const HEALTHY_MS = 30_000;
const RETRY_MS = 1000;
const MAX_RETRY_MS = 60_000;

export class Microphones {
  private readonly mics = new Set<Mic>();
  private untap: (() => void) | null = null;
  private stopped = false;
  private started = 0;
  private readonly launches = new Set<Promise<void>>();

  constructor(private readonly options: MicrophonesOptions) {}

  /** Recognisers running now. */
  get running(): number {
    let n = 0;
    for (const mic of this.mics) if (mic.recogniser) n++;
    return n;
  }

  /** Follow the room's microphones, now and later. */
  start(): void {
    this.untap = this.options.tap((track) => {
      if (this.stopped || track.kind !== 'audio' || track.source !== 'microphone') return;
      const mic: Mic = { track, cancel: null, release: null, recogniser: null, startedAt: 0, quickEnds: 0, retry: null, gone: false, run: 0, launching: false };
      this.mics.add(mic);
      this.want(mic);
      return () => void this.drop(mic);
    });
  }

  /** Stop every recogniser and stop following the room. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.untap?.();
    this.untap = null;
    await Promise.all([...this.mics].map((mic) => this.drop(mic)));
    // a recogniser that was starting is stopped by its launch
    await Promise.all([...this.launches]);
  }

  private want(mic: Mic): void {
    if (mic.gone || this.stopped) return;
    let granted = false;
    const cancel = this.options.pool.request({ project: this.options.project, room: this.options.room, participant: mic.track.participantId }, (release) => {
      granted = true;
      mic.cancel = null;
      const launch = this.launch(mic, release);
      this.launches.add(launch);
      void launch.finally(() => this.launches.delete(launch));
    });
    if (granted) return;
    mic.cancel = cancel;
    this.options.log.debug('transcription: a microphone waits for a recogniser', { participant: mic.track.participantId, running: this.options.pool.running });
  }

  private async launch(mic: Mic, release: () => void): Promise<void> {
    if (mic.gone || this.stopped) return release();
    mic.release = release;
    mic.startedAt = Date.now();
    const run = ++this.started;
    mic.run = run;
    mic.launching = true;
    let recogniser: Recogniser;
    try {
      recogniser = await this.options.engine({
        track: mic.track,
        workDir: join(this.options.workDir, `mic-${run}`),
        heard: (utterance) => {
          if (!mic.gone) this.options.heard(mic.track.participantId, utterance);
        },
        ended: (reason) => this.ended(mic, run, reason),
        log: this.options.log,
      });
    } catch (err) {
      mic.launching = false;
      this.options.log.warn('transcription: a recogniser did not start', { participant: mic.track.participantId, detail: (err as Error).message });
      this.free(mic);
      this.later(mic);
      return;
    }
    mic.launching = false;
    if (mic.gone || this.stopped) {
      await recogniser.stop().catch(() => undefined);
      this.free(mic);
    } else if (mic.run === run) mic.recogniser = recogniser;
  }

  private ended(mic: Mic, run: number, reason: string): void {
    if (mic.run !== run) return;
    mic.run = 0;
    mic.recogniser = null;
    if (mic.gone || this.stopped) return;
    this.free(mic);
    this.options.log.info('transcription: a recogniser ended', { participant: mic.track.participantId, reason });
    this.later(mic);
  }

  /** Ask again once the microphone sends, after a pause that grows while recognisers end quickly. */
  private later(mic: Mic): void {
    mic.quickEnds = Date.now() - mic.startedAt >= HEALTHY_MS ? 0 : mic.quickEnds + 1;
    const wait = Math.min(MAX_RETRY_MS, RETRY_MS * 2 ** Math.max(0, mic.quickEnds - 1));
    const check = () => {
      mic.retry = null;
      if (mic.gone || this.stopped) return;
      if (mic.track.flowing()) this.want(mic);
      else mic.retry = setTimeout(check, RETRY_MS).unref();
    };
    mic.retry = setTimeout(check, wait).unref();
  }

  private free(mic: Mic): void {
    const release = mic.release;
    mic.release = null;
    release?.();
  }

  private async drop(mic: Mic): Promise<void> {
    if (mic.gone) return;
    mic.gone = true;
    this.mics.delete(mic);
    mic.cancel?.();
    mic.cancel = null;
    if (mic.retry) clearTimeout(mic.retry);
    const recogniser = mic.recogniser;
    mic.recogniser = null;
    mic.run = 0;
    if (recogniser) await recogniser.stop().catch(() => undefined);
    // a recogniser still starting is stopped, and its place freed, by its launch
    if (!mic.launching) this.free(mic);
  }
}
