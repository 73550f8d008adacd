/**
 * The one long-lived ffmpeg of a livestream: it reads MPEG-TS from a named pipe and pushes it,
 * copied (no re-encoding), as FLV to the RTMP server. The stage composite restarts its encoder
 * whenever the stage changes; each of its runs writes into this pipe in turn, so the RTMP
 * connection, and every player watching it, outlives the restarts: the pusher's MPEG-TS reader
 * sees one stream with timestamp discontinuities, which ffmpeg stitches into continuous FLV
 * timestamps. (A run pushing to the server itself would reconnect at every change, and
 * players would see the new publisher's timestamps start again at zero.)
 *
 * ffmpeg speaks RTMP here, in its own process: nothing the server sends is parsed by the relay.
 */
import { execFile } from 'node:child_process';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../log.ts';
import { FfmpegProcess, type FfmpegExit } from './ffmpeg/process.ts';

/** Where the pusher sends the stream. */
export interface PushTarget {
  /** The URL ffmpeg connects to: the checked address, never the name (or the TLS tunnel's port). */
  url: string;
  /** `rtmp[s]://host[:port]/app` as the caller wrote it: the `tcUrl` the server is told. */
  tcUrl: string;
  app: string;
  /** The stream key: kept out of logs and failure reasons. */
  key: string;
}

export interface RtmpPushOptions {
  ffmpeg: string;
  /** A private directory (the named pipe is made there). */
  workDir: string;
  target: PushTarget;
  /** How long one read or write on the connection may block before ffmpeg gives up (ms). */
  ioTimeoutMs: number;
  log: Logger;
}

/** A stream key as it may be shown: its first two characters. */
export function shortKey(key: string): string {
  return `${key.slice(0, 2)}…`;
}

/** `text` without the stream key (ffmpeg names its output URL in its errors). */
export function withoutKey(text: string, target: PushTarget): string {
  let out = text.split(target.url).join(`${target.tcUrl}/${shortKey(target.key)}`);
  // a key of one or two characters is no secret, and replacing it would garble every word
  if (target.key.length >= 3) out = out.split(target.key).join(shortKey(target.key));
  return out;
}

export class RtmpPush {
  /** Resolves once media reaches the server (the first progress past zero). */
  readonly flowing: Promise<void>;
  /** How the pusher ended, its reason without the stream key. */
  readonly exited: Promise<FfmpegExit>;

  private constructor(
    /** The named pipe the composite's runs write MPEG-TS to. */
    readonly input: string,
    private holder: FileHandle | null,
    private readonly ffmpeg: FfmpegProcess,
    private readonly progress: { seconds: number },
    flowing: Promise<void>,
    target: PushTarget,
  ) {
    this.flowing = flowing;
    this.exited = ffmpeg.exited.then((exit) => ({ ...exit, reason: withoutKey(exit.reason, target) }));
  }

  /** Seconds of stream pushed so far (ffmpeg's progress). */
  get seconds(): number {
    return this.progress.seconds;
  }

  static async start(options: RtmpPushOptions): Promise<RtmpPush> {
    const { target } = options;
    const input = join(options.workDir, 'stage.ts');
    await promisify(execFile)('mkfifo', ['-m', '600', input]);
    // the relay holds the pipe open for writing: a run ending (closing its end) is then no end
    // of input for the pusher; opening read-write never blocks on a pipe
    const holder = await open(input, 'r+');
    const progress = { seconds: 0 };
    let reached!: () => void;
    const flowing = new Promise<void>((resolve) => (reached = resolve));
    let proc: FfmpegProcess;
    try {
      proc = await FfmpegProcess.start({
        ffmpeg: options.ffmpeg,
        // debug: ffmpeg can warn once per packet (a flood at warn); a failure carries its last lines anyway
        stderrLine: (line) => options.log.debug('livestream: ffmpeg says', { line: withoutKey(line, target) }),
        stdout: (chunk) => {
          const all = [...chunk.toString('latin1').matchAll(/out_time_us=(\d+)/g)];
          const us = all.at(-1)?.[1];
          if (us === undefined) return;
          progress.seconds = Number(us) / 1e6;
          if (progress.seconds > 0) reached();
        },
        args: [
          '-loglevel', 'warning', '-nostats', '-progress', 'pipe:1',
          // the runs' streams are known (H.264 + AAC): a second of probing, not ffmpeg's five
          '-f', 'mpegts', '-analyzeduration', '1000000', '-i', input,
          '-map', '0', '-c', 'copy',
          '-f', 'flv', '-flvflags', 'no_duration_filesize',
          '-rw_timeout', String(options.ioTimeoutMs * 1000),
          '-rtmp_tcurl', target.tcUrl, '-rtmp_app', target.app, '-rtmp_playpath', target.key,
          target.url,
        ],
      });
    } catch (err) {
      await holder.close();
      throw err;
    }
    return new RtmpPush(input, holder, proc, progress, flowing, target);
  }

  /**
   * Let the input end: once the last run has closed its end of the pipe, the pusher reads the
   * end of its input, finishes the FLV stream and ends. Also unblocks runs writing into a pipe
   * nobody reads any more (the pusher died): they get EPIPE.
   */
  async endInput(): Promise<void> {
    const holder = this.holder;
    this.holder = null;
    await holder?.close();
  }

  /** End the push: the input ends, then ffmpeg is asked to finish and killed after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    await this.endInput();
    await this.ffmpeg.stop(graceMs);
  }
}
