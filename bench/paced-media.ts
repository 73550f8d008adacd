/**
 * A publisher whose media the benchmark writes itself, sample by sample in real time, so that
 * it knows the wall-clock time of what it sends: a microphone that speaks a WAV when asked (for
 * the transcription latency). ffmpeg encodes what Node writes to its stdin (Opus) to RTP, which
 * goes into a werift track the SDK publishes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { MediaStreamTrack as WeriftTrack, RtpPacket } from 'werift';

interface Encoder {
  track: MediaStreamTrack;
  ffmpeg: ChildProcess;
  socket: Socket;
}

async function encoder(kind: 'video' | 'audio', input: string[], codec: string[]): Promise<Encoder> {
  const track = new WeriftTrack({ kind });
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  socket.on('message', (msg) => track.writeRtp(RtpPacket.deSerialize(msg)));
  const { port } = socket.address();
  const ffmpeg = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', ...input, '-i', 'pipe:0', ...codec, '-f', 'rtp', `rtp://127.0.0.1:${port}?pkt_size=1200`], { stdio: ['pipe', 'ignore', 'inherit'] });
  ffmpeg.stdin!.on('error', () => undefined);
  return { track: track as unknown as MediaStreamTrack, ffmpeg, socket };
}

/** Calls `tick(due)` every few ms with how many units are due by the wall clock since the start. */
function pace(rate: number, tick: (due: number) => void): () => void {
  const start = performance.now();
  let done = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - start) / 1000) * rate) - done;
    if (due > 0) {
      done += due;
      tick(due);
    }
  }, 5);
  return () => clearInterval(timer);
}

/** A microphone (Opus, 48 kHz mono) that is silent until `say()`. */
export interface SpeakingMicrophone {
  track: MediaStreamTrack;
  /** Speak the WAV now; resolves with the wall-clock time its last sample was written. */
  say(): Promise<number>;
  stop(): void;
}

/** `wav`: 16-bit mono PCM at 48 kHz (a canonical 44-byte header), speech only (no trailing silence). */
export async function speakingMicrophone(wav: string): Promise<SpeakingMicrophone> {
  const rate = 48_000;
  const pcm = readFileSync(wav).subarray(44);
  const enc = await encoder('audio', ['-probesize', '32', '-analyzeduration', '0', '-fflags', 'nobuffer', '-f', 's16le', '-ar', String(rate), '-ac', '1'], ['-c:a', 'libopus', '-application', 'voip', '-frame_duration', '20', '-payload_type', '111']);
  let speech: { at: number; done: (t: number) => void } | null = null;
  const stopPace = pace(rate, (due) => {
    const out = Buffer.alloc(due * 2);
    if (speech) {
      const from = speech.at;
      const n = Math.min(due * 2, pcm.length - from);
      pcm.copy(out, 0, from, from + n);
      speech.at += n;
      if (speech.at >= pcm.length) {
        speech.done(Date.now());
        speech = null;
      }
    }
    enc.ffmpeg.stdin!.write(out);
  });
  return {
    track: enc.track,
    say: () => new Promise<number>((resolve) => (speech = { at: 0, done: resolve })),
    stop() {
      stopPace();
      enc.ffmpeg.kill('SIGKILL');
      enc.socket.close();
    },
  };
}
