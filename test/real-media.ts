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

/** Audio from a file instead of the tone (e.g. the speech of test/speech-wav.ts), played once or over and over. */
export interface AudioFile {
  file: string;
  loop?: boolean;
}

/**
 * A werift track carrying what ffmpeg encodes from a test source (VP8 test pattern at 15 fps,
 * or an Opus 440 Hz tone, or Opus of an audio file), for tests that need media a decoder can decode.
 */
export async function realTrack(kind: 'video' | 'audio', audio?: AudioFile): Promise<RealTrack> {
  const track = new WeriftTrack({ kind });
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  socket.on('message', (msg) => track.writeRtp(RtpPacket.deSerialize(msg)));
  const { port } = socket.address();
  const args =
    kind === 'video'
      ? ['-re', '-f', 'lavfi', '-i', 'testsrc=size=320x180:rate=15', '-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '300k', '-g', '15', '-payload_type', '96', '-f', 'rtp', `rtp://127.0.0.1:${port}?pkt_size=1200`]
      : ['-re', ...(audio ? [...(audio.loop ? ['-stream_loop', '-1'] : []), '-i', audio.file] : ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000']), '-ar', '48000', '-ac', '2', '-c:a', 'libopus', '-payload_type', '111', '-f', 'rtp', `rtp://127.0.0.1:${port}`];
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
