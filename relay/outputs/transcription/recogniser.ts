/**
 * What an engine gives the transcription output: one recogniser per microphone, fed the
 * microphone's RTP over loopback, telling each utterance it recognised and when it ended.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log.ts';
import type { FeedTrack } from '../ffmpeg/rtp-feed.ts';
import { FEED_INPUT, feedSdp, freeRtpPorts, RtpFeed } from '../ffmpeg/rtp-feed.ts';
import type { Utterance } from './asr-log.ts';

export type { Utterance } from './asr-log.ts';

/** A running recogniser. */
export interface Recogniser {
  /** Stop it; resolves once its processes have ended. */
  stop(): Promise<void>;
}

/** What a recogniser is started with. */
export interface RecogniserStart {
  /** The microphone. */
  track: FeedTrack;
  /** A private directory of its own (its SDP). */
  workDir: string;
  /** An utterance was recognised. */
  heard(utterance: Utterance): void;
  /** It ended on its own (`reason` for the log: never a transcript). */
  ended(reason: string): void;
  log: Logger;
}

/** Starts recognisers of one engine. */
export type RecogniserEngine = (start: RecogniserStart) => Promise<Recogniser>;

/**
 * ffmpeg's input arguments for one microphone's RTP, and the feed that sends it once ffmpeg
 * runs: wall-clock timestamps (`-copyts` keeps them), and no probing beyond the SDP's codec (a
 * recogniser that waited to probe would hold the first words back).
 */
export async function microphoneInput(track: FeedTrack, workDir: string): Promise<{ args: string[]; feed(): RtpFeed }> {
  await mkdir(workDir, { recursive: true, mode: 0o700 });
  const [port] = await freeRtpPorts(1);
  const sdp = join(workDir, 'microphone.sdp');
  await writeFile(sdp, feedSdp([{ kind: 'audio', port: port! }]), { mode: 0o600 });
  return {
    args: [...FEED_INPUT, '-analyzeduration', '0', '-probesize', '32', '-use_wallclock_as_timestamps', '1', '-copyts', '-i', sdp],
    feed: () => new RtpFeed([{ track, port: port! }]),
  };
}

/** The filters that bring any microphone to what recognisers expect: 16 kHz mono, 16-bit. */
export const SPEECH_FORMAT = 'aresample=16000,aformat=sample_fmts=s16:channel_layouts=mono';

const ERROR_LINE = /^(?:\[[^\]]+\] )?\[(?:error|fatal|panic)\] /;

/**
 * ffmpeg's last errors (it runs with `-loglevel level+info`, so each line names its level), for
 * a reason in the log: never metadata lines (transcripts) nor pocketsphinx's chatter.
 */
export function reasonLines(): { keep(line: string): void; reason(fallback: string): string } {
  const kept: string[] = [];
  return {
    keep(line) {
      if (!ERROR_LINE.test(line)) return;
      kept.push(line);
      if (kept.length > 3) kept.shift();
    },
    reason: (fallback) => (kept.length ? `${fallback}: ${kept.join(' | ')}` : fallback),
  };
}
