/**
 * The `service` engine: per microphone, one ffmpeg that decodes it to 16 kHz mono and marks its
 * silences; the relay cuts utterances at them (`utterance-cutter.ts`) and sends each, as a WAV,
 * to the room's {@link SpeechService}.
 */
import { FfmpegProcess } from '../ffmpeg/process.ts';
import type { SpeechService } from './service-client.ts';
import { UtteranceCutter, type CutterOptions } from './utterance-cutter.ts';
import { wavFile } from './wav.ts';
import { microphoneInput, reasonLines, SPEECH_FORMAT, type RecogniserEngine } from './recogniser.ts';

/** Utterances for a service: half a second of silence ends one, 30 s is the longest. */
export const CUTTER: CutterOptions = { sampleRate: 16000, silenceS: 0.5, minS: 0.3, maxS: 30, preRollS: 0.2 };

/** The `service` engine, sending to `service` (one per running output) in `language`. */
export function serviceEngine(ffmpeg: string, service: SpeechService, language: string): RecogniserEngine {
  const apiLanguage = language.split('-')[0]!.toLowerCase();
  // the pts become the sample count, so that silencedetect's marks are sample-exact positions in the audio
  const graph = [SPEECH_FORMAT, `asettb=1/${CUTTER.sampleRate}`, 'asetpts=N', `silencedetect=n=-40dB:d=${CUTTER.silenceS}`, 'ametadata=mode=print'].join(',');
  return async ({ track, workDir, heard, ended, log }) => {
    const input = await microphoneInput(track, workDir);
    const cutter = new UtteranceCutter(CUTTER, ({ pcm, startedAt, endedAt }) => {
      service.submit({ wav: wavFile(pcm, CUTTER.sampleRate), language: apiLanguage, done: (text) => heard({ text, startedAt, endedAt }) });
    });
    const lines = reasonLines();
    const proc = await FfmpegProcess.start({
      ffmpeg,
      args: ['-loglevel', 'level+info', '-nostats', ...input.args, '-af', graph, '-flush_packets', '1', '-f', 's16le', 'pipe:1'],
      stdout: (chunk) => cutter.audio(chunk),
      stderrLine: (line) => {
        cutter.line(line);
        lines.keep(line);
      },
    });
    const feed = input.feed();
    void proc.exited.then((exit) => {
      feed.stop();
      if (!exit.stopped) ended(lines.reason(`ffmpeg ended (${exit.signal ?? `exit code ${exit.code}`})`));
    });
    log.debug('transcription: service recogniser started', { pid: proc.pid });
    return {
      stop: async () => {
        await proc.stop(1000);
        feed.stop();
      },
    };
  };
}
