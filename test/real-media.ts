import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { existsSync } from 'node:fs';
import { MediaStreamTrack as WeriftTrack, RtpPacket } from 'werift';

const SETPRIV = '/usr/bin/setpriv';

/** A publisher's real media in Node: ffmpeg's encoding of a test source, written into a werift track as RTP. */
export interface RealTrack {
  track: MediaStreamTrack;
  /** Stop its packets (the track stays published: a silent publisher). */
  stop(): void;
  /** Wall-clock ms at which ffmpeg started sending (its `-re` plays the source in real time from then). */
  startedAt: number;
}

/**
 * Media from a file instead of the test source: audio (e.g. the speech of test/speech-wav.ts)
 * encoded to Opus, or VP8 video (e.g. {@link vp8Clip}) sent as it is, without encoding again;
 * played once or over and over.
 */
export interface MediaFile {
  file: string;
  loop?: boolean;
}

/**
 * A VP8 clip of the test pattern (320x180, 15 fps, a key frame each second) written to `path`,
 * for publishers that send it over and over without encoding (`realTrack('video', { file, loop: true })`):
 * many publishers on two cores, each encoding its own, leave nothing to what they measure.
 */
export async function vp8Clip(path: string, seconds = 10): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', `testsrc=size=320x180:rate=15`, '-t', String(seconds), '-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '300k', '-g', '15', '-y', path], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`ffmpeg could not write ${path} (exit ${code})`))));
  });
  return path;
}

/**
 * A werift track carrying what ffmpeg encodes from a test source (VP8 test pattern at 15 fps,
 * or an Opus 440 Hz tone, or Opus of an audio file, or a VP8 file as it is), for tests that need
 * media a decoder can decode.
 */
export async function realTrack(kind: 'video' | 'audio', from?: MediaFile): Promise<RealTrack> {
  const track = new WeriftTrack({ kind });
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  socket.on('message', (msg) => track.writeRtp(RtpPacket.deSerialize(msg)));
  const { port } = socket.address();
  const input = from ? [...(from.loop ? ['-stream_loop', '-1'] : []), '-i', from.file] : null;
  const args =
    kind === 'video' && input
      ? ['-re', ...input, '-map', '0:v:0', '-c:v', 'copy', '-payload_type', '96', '-f', 'rtp', `rtp://127.0.0.1:${port}?pkt_size=1200`]
      : kind === 'video'
      ? ['-re', '-f', 'lavfi', '-i', 'testsrc=size=320x180:rate=15', '-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '300k', '-g', '15', '-payload_type', '96', '-f', 'rtp', `rtp://127.0.0.1:${port}?pkt_size=1200`]
      : ['-re', ...(input ?? ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000']), '-ar', '48000', '-ac', '2', '-c:a', 'libopus', '-payload_type', '111', '-f', 'rtp', `rtp://127.0.0.1:${port}`];
  // like the relay's own ffmpeg (relay/outputs/ffmpeg/process.ts): killed by the kernel if the test process dies without stopping it
  const argv = ['ffmpeg', '-hide_banner', '-loglevel', 'error', ...args];
  const child = existsSync(SETPRIV) ? spawn(SETPRIV, ['--pdeathsig', 'KILL', '--', ...argv], { stdio: 'ignore' }) : spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
  const startedAt = Date.now();
  let stopped = false;
  return {
    track: track as unknown as MediaStreamTrack,
    startedAt,
    stop: () => {
      if (stopped) return;
      stopped = true;
      child.kill('SIGKILL');
      socket.close();
    },
  };
}
